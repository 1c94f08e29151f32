"""Discovered tool definitions: parse an untrusted tool list into candidates, or refuse it.

Accepts the MCP ``tools/list`` result (bare, inside a JSON-RPC ``{"result": {...}}``
envelope, or that envelope in the event stream a Streamable HTTP server answers with, as
curl prints it) as defined by the 2025-11-25 and 2026-07-28 specifications: every Tool field
(``name``, ``title``, ``description``, ``icons``, ``inputSchema``, ``outputSchema``,
``annotations``, ``execution``, ``_meta``), JSON Schema 2020-12 schemas (``$schema``,
``$defs``, ``anyOf`` ...) and ``nextCursor``.

Tolerant where it is safe, strict where it must be:

- A field the catalog does not know (a Tool field of a later revision, a vendor extension,
  an unknown annotation) is kept verbatim in the definition as untrusted data and listed
  for the reviewer; it is never a reason to refuse, and never read as meaning anything.
- A tool that is itself unacceptable (bad name, missing or oversized schema, wrong JSON
  type for a known field, NUL bytes ...) is refused *alone*, with its reason; the other
  tools are imported. Several tools with one name are all refused: the list is ambiguous.
- Input that cannot be read safely (too large, too deep, not JSON, not a tool list, more
  tools than the limit) is refused as a whole before anything is parsed further.

Everything here is untrusted. Parsing never executes, fetches or resolves anything (an
icon URL is text, a ``$ref`` is text). Annotations (``readOnlyHint`` and friends) are kept
as *untrusted hints*: shown, never used to set an effect class. A discovered definition is
a candidate, not a contract.

Pure module: standard library only.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernel.canonical import RepeatedKey, digest, object_without_repeated_keys, storable_text
from kernel.text import BIDI_CONTROLS

# A pasted list or an uploaded file (the import page). Sized for real servers: the
# reference servers list 1-30 tools in 2-30 KB, a GitHub server about a hundred in ~150 KB.
MAX_BYTES = 2 * 1024 * 1024
# One live discovery, all pages together (wire bytes of the tools/list results).
MAX_DISCOVERY_BYTES = 8 * 1024 * 1024
MAX_PAGES = 100
MAX_TOOLS = 1000
MAX_DEPTH = 32
# A pasted text may nest past a bare ``{"tools": [...]}`` (MAX_DEPTH): inside a JSON-RPC
# response (or a recorded fixture's ``{"result": ...}``) a tool nesting MAX_DEPTH - 2
# levels, which live discovery accepts, is imported too, and one a level deeper is
# refused alone, as in a live listing.
MAX_TEXT_DEPTH = MAX_DEPTH + 2
MAX_TOOL_BYTES = 128 * 1024
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION = 16_000
MAX_TITLE = 200
MAX_CURSOR = 1024
MAX_ERRORS = 20
# MCP tool names: 1-128 characters of A-Z a-z 0-9 _ - . (2025-11-25, "Tool names").
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
SERVER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:/@+-]{0,199}$")

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
KNOWN_FIELDS = frozenset(
    {
        "name",
        "title",
        "description",
        "icons",
        "inputSchema",
        "outputSchema",
        "annotations",
        "execution",
        "_meta",
    }
)
TASK_SUPPORT = ("forbidden", "optional", "required")
# Text that reads like an instruction to an agent: kept as data, flagged for the reviewer.
# Besides the plain injections, the published tool poisoning shapes: an <IMPORTANT> block,
# keeping something from the user, reading a key or a client's configuration.
_INSTRUCTION = re.compile(
    r"ignore (all |any |the |your )?(previous |prior |above )?(instructions|task)"
    r"|system prompt|you must (now )?call|override[s]? (your|the) (operator|instructions)"
    r"|<\s*script|javascript:"
    r"|<\s*/?\s*important\s*>"
    r"|(do not|don't|never) (mention|tell|inform|reveal|disclose)\b"
    r"|~/\.ssh|\bid_(rsa|ed25519|ecdsa)\b|\bmcp\.json\b",
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
    unknown_fields: tuple[str, ...] = ()
    unknown_annotations: tuple[str, ...] = ()

    @property
    def version(self) -> str:
        """Discovered versions are named by content: a changed definition is a new one."""
        return candidate_version(self.digest)

    def notes(self) -> dict[str, Any]:
        """What the reviewer is shown besides the definition itself (all untrusted)."""
        return {
            "hints": dict(self.hints),
            "flags": list(self.flags),
            "unknown_fields": list(self.unknown_fields),
            "unknown_annotations": list(self.unknown_annotations),
        }


@dataclass(frozen=True)
class RefusedTool:
    """One tool refused alone: ``name`` is empty when it had no usable name."""

    index: int
    name: str
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "reasons": list(self.reasons)}

    @property
    def label(self) -> str:
        return f"tools[{self.index}]" + (f" {self.name}" if self.name else "")


@dataclass(frozen=True)
class ToolListing:
    """The accepted tools of a list, the refused ones with their reasons, and the cursor."""

    tools: tuple[DiscoveredTool, ...]
    refused: tuple[RefusedTool, ...] = ()
    next_cursor: str | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)

    @property
    def refused_names(self) -> frozenset[str]:
        return frozenset(r.name for r in self.refused if r.name)

    def errors(self) -> list[str]:
        return [f"{r.label}: {'; '.join(r.reasons)}" for r in self.refused][:MAX_ERRORS]


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


def value_depth(value: Any) -> int:
    """Nesting depth of an already-parsed JSON value (iterative: no recursion to exhaust)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in node)
    return deepest


class _Constant(ValueError):
    """NaN, Infinity or -Infinity: JSON has no such number."""


def _reject_constant(name: str) -> Any:
    raise _Constant(f"{name} is not allowed")


def _unclean(value: Any, where: str, limit: int = 3) -> list[str]:
    """NUL bytes, unpaired surrogates, bidirectional controls, text hidden in invisible tag
    characters and non-finite numbers anywhere in ``value``.

    A bidirectional embedding, override or isolate (U+202A..U+202E, U+2066..U+2069) would
    show the reviewer its text reordered (Trojan Source): refused, never stripped, as in a
    reason (``kernel.text``); the plain marks U+200E / U+200F stay allowed."""
    errors: list[str] = []
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack and len(errors) < limit:
        node, at = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                errors.append(f"{at}: contains a NUL byte")
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                errors.append(f"{at}: contains an unpaired surrogate")
            bidi = next((c for c in node if c in BIDI_CONTROLS), "")
            if bidi:
                errors.append(
                    f"{at}: contains U+{ord(bidi):04X} {unicodedata.name(bidi)}, a "
                    "bidirectional control that would show the text reordered"
                )
            hiding = _hidden_text(node)
            if hiding:
                errors.append(f"{at}: {hiding}")
        elif isinstance(node, float) and not math.isfinite(node):
            errors.append(f"{at}: non-finite number")
        elif isinstance(node, Mapping):
            for key, item in node.items():
                stack.append((key, f"{at} key"))
                shown = "".join(
                    f"\\u{ord(c):04x}" if c in BIDI_CONTROLS else c
                    for c in storable_text(str(key)[:40])
                )
                stack.append((item, f"{at}.{shown}"))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                stack.append((item, f"{at}[{i}]"))
    return errors


# Unicode tag characters (U+E0000..U+E007F) show as nothing, yet a language model reads
# the text they spell ("ASCII smuggling": hidden instructions in a tool's description).
# Only an emoji flag of a region (U+1F3F4, its code in tags, U+E007F) uses them to show.
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_FLAG_TAG_SEQUENCE = re.compile(
    "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,7}\U000e007f"
)


def _hidden_text(text: str) -> str:
    """Why ``text`` hides text in invisible tag characters ("" when it does not): the
    first such character, named, and the text they spell."""
    rest = _FLAG_TAG_SEQUENCE.sub("", text)
    tags = _TAGS.findall(rest)
    if not tags:
        return ""
    first = tags[0]
    name = unicodedata.name(first, "TAG")
    spelled = "".join(chr(ord(c) - 0xE0000) for c in tags if 0x20 <= ord(c) - 0xE0000 < 0x7F)
    return (
        f"contains U+{ord(first):04X} {name}, an invisible Unicode tag character: "
        f"{len(tags)} of them hide text from the reviewer that a model would read "
        f"(they spell {spelled[:80]!r})"
    )


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", errors="surrogatepass"))


def _schema_problem(schema: Any, field: str, *, required: bool, object_root: bool) -> str | None:
    """A JSON Schema the catalog can store: an object, bounded; the input root an object type.

    JSON Schema 2020-12 keywords (``$schema``, ``$defs``, ``anyOf``, ``$ref`` ...) are kept
    as they are: the catalog never resolves a reference or fetches a meta-schema.
    """
    if schema is None:
        return f"{field} is required" if required else None
    if not isinstance(schema, Mapping):
        return f"{field} must be a JSON object"
    if object_root and schema.get("type") != "object":
        return f'{field} must have "type": "object"'
    if "$schema" in schema and not isinstance(schema["$schema"], str):
        return f"{field}.$schema must be a string"
    size = _size(schema)
    if size > MAX_SCHEMA_BYTES:
        return f"{field} is {size} bytes (limit {MAX_SCHEMA_BYTES})"
    return None


def _text_field(raw: Mapping[str, Any], key: str, limit: int, label: str = "") -> str | None:
    value = raw.get(key)
    label = label or key
    if value is None:
        return None
    if not isinstance(value, str):
        return f"{label} must be a string"
    if len(value) > limit:
        return f"{label} is {len(value)} characters (limit {limit})"
    return None


def _annotations(value: Any, problems: list[str]) -> tuple[dict[str, bool], tuple[str, ...]]:
    hints: dict[str, bool] = {}
    if value is None:
        return hints, ()
    if not isinstance(value, Mapping):
        problems.append("annotations must be a JSON object")
        return hints, ()
    unknown = []
    for key, item in value.items():
        if key in HINTS:
            if isinstance(item, bool):
                hints[key] = item
            else:
                problems.append(f"annotations.{key} must be true or false")
        elif key == "title":
            problem = _text_field(value, "title", MAX_TITLE, "annotations.title")
            if problem:
                problems.append(problem)
        else:
            unknown.append(str(key)[:64])
    return hints, tuple(sorted(unknown))


def _icons(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(icon, Mapping) and isinstance(icon.get("src"), str) for icon in value
    ):
        return 'icons must be a list of objects with a "src" string'
    return None


def _execution(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return "execution must be a JSON object"
    task = value.get("taskSupport")
    if task is not None and task not in TASK_SUPPORT:
        return f"execution.taskSupport must be one of {', '.join(TASK_SUPPORT)}"
    return None


# Says why a schema breaks its JSON Schema meta-schema ("" / None when it does not). The
# check needs a JSON Schema implementation, which this pure module does not import: the
# catalog's services pass ``catalog.schemas.meta_problem``.
SchemaCheck = Callable[[Mapping[str, Any]], "str | None"]


def parse_tool(
    raw: Any, index: int, schema_check: SchemaCheck | None = None
) -> DiscoveredTool | RefusedTool:
    """Accept one tool definition, or refuse it alone with every reason found.

    ``schema_check`` (when given) refuses a tool whose ``inputSchema`` / ``outputSchema``
    is no valid JSON Schema: a definition whose schema cannot be read is no contract.
    """
    if not isinstance(raw, Mapping):
        return RefusedTool(index, "", ("a tool must be a JSON object",))
    name = raw.get("name")
    shown = name if isinstance(name, str) and NAME.match(name) else ""
    problems = _unclean(raw, "")
    if problems:
        return RefusedTool(index, shown, tuple(p.lstrip(".") or "value" for p in problems))
    if not isinstance(name, str) or not NAME.match(name):
        return RefusedTool(index, "", (f"name must match {NAME.pattern} (got {str(name)[:40]!r})",))
    depth = value_depth(raw)
    if depth > MAX_DEPTH - 2:
        return RefusedTool(
            index, shown, (f"the definition nests {depth} levels (limit {MAX_DEPTH - 2})",)
        )
    size = _size(raw)
    if size > MAX_TOOL_BYTES:
        return RefusedTool(
            index, shown, (f"the definition is {size} bytes (limit {MAX_TOOL_BYTES})",)
        )
    for key, limit in (("description", MAX_DESCRIPTION), ("title", MAX_TITLE)):
        problem = _text_field(raw, key, limit)
        if problem:
            problems.append(problem)
    for key, required, object_root in (("inputSchema", True, True), ("outputSchema", False, False)):
        problem = _schema_problem(raw.get(key), key, required=required, object_root=object_root)
        if problem is None and schema_check is not None and isinstance(raw.get(key), Mapping):
            broken = schema_check(raw[key])
            problem = f"{key} is not a valid JSON Schema: {broken}"[:300] if broken else None
        if problem:
            problems.append(problem)
    hints, unknown_annotations = _annotations(raw.get("annotations"), problems)
    for problem in (_icons(raw.get("icons")), _execution(raw.get("execution"))):
        if problem:
            problems.append(problem)
    meta = raw.get("_meta")
    if meta is not None and not isinstance(meta, Mapping):
        problems.append("_meta must be a JSON object")
    if problems:
        return RefusedTool(index, shown, tuple(problems))
    definition = {str(k): raw[k] for k in sorted(raw, key=str)}
    unknown = tuple(sorted(str(k)[:64] for k in raw if k not in KNOWN_FIELDS))
    flags = []
    if _INSTRUCTION.search(json.dumps(definition, ensure_ascii=False)):
        flags.append("contains instruction-like text: it is data, never an instruction")
    if unknown or unknown_annotations:
        flags.append(
            "carries fields the catalog does not know: kept as untrusted data, never read "
            "as meaning anything"
        )
    return DiscoveredTool(
        name=name,
        definition=definition,
        digest=digest(definition),
        hints=hints,
        flags=tuple(flags),
        unknown_fields=unknown,
        unknown_annotations=unknown_annotations,
    )


def parse_tools(
    tools: Sequence[Any],
    *,
    next_cursor: Any = None,
    allow_none: bool = False,
    schema_check: SchemaCheck | None = None,
) -> ToolListing:
    """Parse a sequence of raw tool definitions (one page or several pages together).

    Each tool is accepted or refused alone; tools sharing a name are all refused.
    Raise ImportRefused when there is nothing to accept (with every reason), unless
    ``allow_none``: a server's complete listing that accepts nothing still says which of
    its earlier tools are gone or refused.
    """
    if len(tools) > MAX_TOOLS:
        raise ImportRefused([f"{len(tools)} tools in one list (limit {MAX_TOOLS})"])
    parsed = [parse_tool(raw, index, schema_check) for index, raw in enumerate(tools)]
    counts = Counter(p.name for p in parsed if isinstance(p, DiscoveredTool))
    accepted: list[DiscoveredTool] = []
    refused: list[RefusedTool] = []
    for index, item in enumerate(parsed):
        if isinstance(item, RefusedTool):
            refused.append(item)
        elif counts[item.name] > 1:
            refused.append(
                RefusedTool(
                    index,
                    item.name,
                    (f"duplicate name {item.name!r} ({counts[item.name]} tools in one list)",),
                )
            )
        else:
            accepted.append(item)
    cursor, warnings = _cursor(next_cursor)
    listing = ToolListing(tuple(accepted), tuple(refused), cursor, warnings)
    if not accepted and not allow_none:
        raise ImportRefused(listing.errors() or ["nothing to import"])
    return listing


def _cursor(value: Any) -> tuple[str | None, tuple[str, ...]]:
    if value is None or value == "":  # an empty cursor is the end, as for live discovery
        return None, ()
    if not isinstance(value, str) or len(value) > MAX_CURSOR:
        return None, ("nextCursor is not a usable cursor string: ignored",)
    return value, (
        "this list is one page of a paginated listing (it has a nextCursor): tools on other "
        "pages were not imported, and no tool is marked gone. Register the server and use "
        "Discover now to read every page.",
    )


def parse_tool_list(text: str, schema_check: SchemaCheck | None = None) -> ToolListing:
    """Parse an untrusted tool-list text. Raise ImportRefused when nothing can be imported.

    The whole text is refused when it cannot be read safely (empty, too large, too deep,
    not JSON, not a tool list, too many tools); otherwise each tool is accepted or refused
    alone (``ToolListing.refused``).
    """
    if not isinstance(text, str) or not text.strip():
        raise ImportRefused(["the tool list is empty"])
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BYTES:
        raise ImportRefused([f"the tool list is {size} bytes (limit {MAX_BYTES})"])
    depth = nesting_depth(text)
    if depth > MAX_TEXT_DEPTH:
        raise ImportRefused([f"the tool list nests {depth} levels deep (limit {MAX_TEXT_DEPTH})"])
    events = _event_stream(text)
    if events is not None:
        return parse_result(_answer_in(events), schema_check)
    return parse_result(_json(text, "not valid JSON"), schema_check)


def _json(text: str, what: str) -> Any:
    """The JSON of ``text``, read as every other JSON from outside is: an object naming a
    key twice is refused (``{"name": "a", "name": "b"}`` was read as ``b`` by this parser
    and as ``a`` by others, so a reviewer of the text could see another tool than the one
    imported), and so is an integer over Python's digit limit, in words."""
    try:
        return json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=object_without_repeated_keys
        )
    except (json.JSONDecodeError, _Constant, RepeatedKey, RecursionError) as exc:
        raise ImportRefused([f"{what}: {str(exc)[:200]}"]) from None
    except ValueError:  # the only other one: an integer over Python's digit limit
        limit = sys.get_int_max_str_digits()
        raise ImportRefused([f"{what}: a number has more than {limit} digits"]) from None


# The first line of a Server-Sent Events stream: a field (``event:``, ``data:``, ``id:``,
# ``retry:``) or a comment (``:``). No JSON text starts so.
_SSE_LINE = re.compile(r"(?:event|data|id|retry)(?::|$)|:")
# SSE ends a line at CRLF, LF or CR; never at the other breaks ``str.splitlines`` knows
# (U+2028 may stand raw inside a JSON string).
_SSE_EOL = re.compile(r"\r\n|\r|\n")


def _event_stream(text: str) -> list[str] | None:
    """The data of each event, when ``text`` is an event stream: what a Streamable HTTP
    server answers a POST with (``text/event-stream``), as curl prints it. ``None`` when
    it is not one."""
    lines = _SSE_EOL.split(text.lstrip("\ufeff"))
    first = next((line for line in lines if line.strip()), "")
    if not _SSE_LINE.match(first):
        return None
    events: list[str] = []
    data: list[str] | None = None
    for line in [*lines, ""]:
        if not line:
            if data is not None:
                events.append("\n".join(data))
            data = None
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            if name == "data":
                data = [*(data or []), value.removeprefix(" ")]
    return events


def _answer_in(events: list[str]) -> Any:
    """The one ``tools/list`` result an event stream carries; the other messages (a
    priming event without data, notifications, the server's requests) are skipped."""
    answers: list[Any] = []
    errors: list[str] = []
    for number, data in enumerate(events, start=1):
        if not data.strip():
            continue
        message = _json(data, f"event {number} of the event stream is not valid JSON")
        if not isinstance(message, Mapping) or "method" in message:
            continue
        if isinstance(message.get("result"), Mapping) and "tools" in message["result"]:
            answers.append(message)
        elif isinstance(message.get("error"), Mapping):
            errors.append(_said_error(message["error"]))
    if len(answers) == 1:
        return answers[0]
    if answers:
        raise ImportRefused(
            [f"the event stream carries {len(answers)} tools/list results: import one at a time"]
        )
    if errors:
        raise ImportRefused(
            [f"the event stream answers with a JSON-RPC error, not a tool list: {errors[0]}"]
        )
    raise ImportRefused(
        ["the event stream carries no tools/list result (a JSON-RPC response with a tools list)"]
    )


def _said_error(error: Mapping[str, Any]) -> str:
    """A JSON-RPC error object as a bounded sentence part: its code and its message."""
    return f"error {str(error.get('code'))[:40]}: {str(error.get('message'))[:200]}"


def parse_result(data: Any, schema_check: SchemaCheck | None = None) -> ToolListing:
    """Parse an already-decoded ``tools/list`` result (or its JSON-RPC envelope)."""
    if isinstance(data, Mapping) and isinstance(data.get("result"), Mapping):
        data = data["result"]
    elif isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
        # The server's answer was an error (a pasted response to a tools/list it refused):
        # say so with its words, as for the same answer in an event stream.
        raise ImportRefused(
            [f"the text is a JSON-RPC error, not a tool list: {_said_error(data['error'])}"]
        )
    if not isinstance(data, Mapping) or "tools" not in data:
        raise ImportRefused(['expected a JSON object with a "tools" list'])
    tools = data["tools"]
    if not isinstance(tools, list):
        raise ImportRefused(['"tools" must be a list'])
    if not tools:
        raise ImportRefused(['"tools" is empty: nothing to import'])
    return parse_tools(tools, next_cursor=data.get("nextCursor"), schema_check=schema_check)


def valid_server(server: str) -> bool:
    return isinstance(server, str) and bool(SERVER.match(server.strip()))
