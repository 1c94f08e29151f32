"""Discovered tool definitions: parse an untrusted tool list into candidates, or refuse it.

Accepts the common tool-list JSON (as MCP's ``tools/list`` result):
``{"tools": [{"name", "title"?, "description"?, "inputSchema", "outputSchema"?,
"annotations"?}]}``, bare or inside a JSON-RPC ``{"result": {...}}`` envelope.

Everything here is untrusted input. Parsing never executes, fetches or resolves anything;
it bounds size, nesting, counts and string content before a single byte is stored.
Annotations (``readOnlyHint`` and friends) are kept as *untrusted hints*: they are shown,
never used to set an effect class. A discovered definition is a candidate, not a contract.

Pure module: standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs.domain.canonical import digest

MAX_BYTES = 256 * 1024
MAX_DEPTH = 24
MAX_TOOLS = 50
MAX_SCHEMA_BYTES = 32 * 1024
MAX_DESCRIPTION = 4000
MAX_TITLE = 200
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
SERVER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:/@+-]{0,199}$")

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
TOOL_FIELDS = frozenset(
    {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"}
)
# Text that reads like an instruction to an agent: kept as data, flagged for the reviewer.
_INSTRUCTION = re.compile(
    r"ignore (all |any |the |your )?(previous |prior |above )?(instructions|task)"
    r"|system prompt|you must (now )?call|override[s]? (your|the) (operator|instructions)"
    r"|<\s*script|javascript:",
    re.IGNORECASE,
)


class ImportRefused(ValueError):
    """The tool list was refused; ``errors`` says why (nothing was stored)."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass(frozen=True)
class DiscoveredTool:
    name: str
    definition: Mapping[str, Any]
    digest: str
    hints: Mapping[str, bool]
    flags: tuple[str, ...]

    @property
    def version(self) -> str:
        """Discovered versions are named by content: a changed definition is a new one."""
        return candidate_version(self.digest)


def candidate_version(definition_digest: str) -> str:
    return f"d-{definition_digest[:16]}"


def nesting_depth(text: str) -> int:
    """Return the maximum bracket nesting of a JSON text, ignoring brackets in strings.

    Measured before ``json.loads`` so a hostile document cannot exhaust the parser's
    recursion.
    """
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _clean_strings(value: Any, where: str, errors: list[str]) -> None:
    """Refuse NUL bytes, unpaired surrogates and non-finite numbers anywhere."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack and len(errors) < 10:
        node, at = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                errors.append(f"{at}: contains a NUL byte")
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                errors.append(f"{at}: contains an unpaired surrogate")
        elif isinstance(node, float) and not math.isfinite(node):
            errors.append(f"{at}: non-finite number")
        elif isinstance(node, Mapping):
            for key, item in node.items():
                stack.append((key, f"{at} key"))
                stack.append((item, f"{at}.{str(key)[:40]}"))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                stack.append((item, f"{at}[{i}]"))


def _schema_problem(schema: Any, field: str, required: bool) -> str | None:
    if schema is None:
        return f"{field} is required" if required else None
    if not isinstance(schema, Mapping):
        return f"{field} must be a JSON object"
    if schema.get("type") != "object":
        return f'{field} must have "type": "object"'
    size = len(json.dumps(schema))
    if size > MAX_SCHEMA_BYTES:
        return f"{field} is {size} bytes (limit {MAX_SCHEMA_BYTES})"
    return None


def _tool(raw: Any, index: int, errors: list[str]) -> DiscoveredTool | None:
    at = f"tools[{index}]"
    if not isinstance(raw, Mapping):
        errors.append(f"{at}: a tool must be a JSON object")
        return None
    unknown = sorted(str(k) for k in raw if k not in TOOL_FIELDS)
    if unknown:
        errors.append(f"{at}: unknown field(s) {', '.join(unknown[:5])}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        errors.append(f"{at}: name must match {NAME.pattern} (got {str(name)[:40]!r})")
        return None
    at = f"tools[{index}] {name}"
    description = raw.get("description", "")
    if not isinstance(description, str):
        errors.append(f"{at}: description must be a string")
    elif len(description) > MAX_DESCRIPTION:
        errors.append(f"{at}: description is {len(description)} characters (limit 4000)")
    title = raw.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE):
        errors.append(f"{at}: title must be a string of at most {MAX_TITLE} characters")
    for field, required in (("inputSchema", True), ("outputSchema", False)):
        problem = _schema_problem(raw.get(field), field, required)
        if problem:
            errors.append(f"{at}: {problem}")
    annotations = raw.get("annotations", {})
    hints: dict[str, bool] = {}
    if not isinstance(annotations, Mapping):
        errors.append(f"{at}: annotations must be a JSON object")
    else:
        for key, value in annotations.items():
            if key in HINTS:
                if not isinstance(value, bool):
                    errors.append(f"{at}: annotations.{key} must be true or false")
                else:
                    hints[key] = value
            elif key == "title":
                if not isinstance(value, str) or len(value) > MAX_TITLE:
                    errors.append(f"{at}: annotations.title must be a short string")
            else:
                errors.append(f"{at}: unknown annotation {str(key)[:40]!r}")
    meta = raw.get("_meta")
    if meta is not None and not isinstance(meta, Mapping):
        errors.append(f"{at}: _meta must be a JSON object")
    definition = {k: raw[k] for k in sorted(raw) if k in TOOL_FIELDS}
    flags = []
    annotated_title = annotations.get("title", "") if isinstance(annotations, Mapping) else ""
    text = " ".join(str(v) for v in (description, title, annotated_title) if v)
    if _INSTRUCTION.search(text) or _INSTRUCTION.search(json.dumps(definition)[:MAX_BYTES]):
        flags.append("contains instruction-like text: it is data, never an instruction")
    return DiscoveredTool(
        name=name,
        definition=definition,
        digest=digest(definition),
        hints=hints,
        flags=tuple(flags),
    )


def parse_tool_list(text: str) -> list[DiscoveredTool]:
    """Parse an untrusted tool list. Raise ImportRefused with every problem found."""
    if not isinstance(text, str) or not text.strip():
        raise ImportRefused(["the tool list is empty"])
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BYTES:
        raise ImportRefused([f"the tool list is {size} bytes (limit {MAX_BYTES})"])
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise ImportRefused([f"the tool list nests {depth} levels deep (limit {MAX_DEPTH})"])
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ImportRefused([f"not valid JSON: {str(exc)[:200]}"]) from None
    if isinstance(data, Mapping) and isinstance(data.get("result"), Mapping):
        data = data["result"]
    if not isinstance(data, Mapping) or "tools" not in data:
        raise ImportRefused(['expected a JSON object with a "tools" list'])
    tools = data["tools"]
    if not isinstance(tools, list):
        raise ImportRefused(['"tools" must be a list'])
    if not tools:
        raise ImportRefused(['"tools" is empty: nothing to import'])
    if len(tools) > MAX_TOOLS:
        raise ImportRefused([f"{len(tools)} tools in one list (limit {MAX_TOOLS})"])
    errors: list[str] = []
    _clean_strings(tools, "tools", errors)
    if errors:
        raise ImportRefused(errors)
    parsed = []
    seen: set[str] = set()
    for index, raw in enumerate(tools):
        tool = _tool(raw, index, errors)
        if tool is None:
            continue
        if tool.name in seen:
            errors.append(f"tools[{index}]: duplicate name {tool.name!r} in one list")
        seen.add(tool.name)
        parsed.append(tool)
    if errors:
        raise ImportRefused(errors[:20])
    return parsed


def valid_server(server: str) -> bool:
    return isinstance(server, str) and bool(SERVER.match(server.strip()))
