"""Bounds on what a provider may send, measured before anything parses or serialises it.

A model output is untrusted data. Python's recursive tools (``json.dumps``, ``json.loads``,
``copy.deepcopy``, a recursive walk) raise ``RecursionError`` on input nested a few hundred
levels deep, and do unbounded work on huge input, so nothing here recurses: every function
walks with an explicit stack and stops as soon as a limit is exceeded.

- ``check(value)`` measures a decoded output (depth, values, approximate bytes) and returns
  the typed ``RejectionReason`` of the first limit it exceeds, or None.
- ``check_json_text(text)`` does the same for JSON *text* (tool-call arguments, a response
  body) by scanning brackets, before ``json.loads`` may see it.
- ``bounded(value)`` returns a copy that is always JSON-serialisable and bounded (deeper
  containers, extra values and long strings replaced by markers): the form in which raw
  output is stored as evidence *before* it is parsed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runs.domain.proposals import RejectionReason

LIMIT_EXCEEDED = "output_limit_exceeded"

# Real tool-calling outputs nest well under 20 levels (a Responses object echoing a tool's
# JSON Schema is among the deepest); 64 leaves room and stays far below the interpreter's
# recursion limit (1000) for everything downstream (canonical JSON, jsonschema, evidence).
MAX_DEPTH = 64
MAX_NODES = 50_000
MAX_BYTES = 2 * 1024 * 1024
# One call's arguments: decoded with the standard library, so bounded before decoding.
MAX_ARGUMENT_DEPTH = 32
MAX_ARGUMENT_BYTES = 64 * 1024
# FieldOps admits one proposal per turn; more calls than this are not even inspected.
MAX_CALLS = 16

# The stored (bounded) form of a raw output.
STORED_DEPTH = MAX_DEPTH
STORED_NODES = MAX_NODES
STORED_STRING = 64 * 1024
MARKER = "$fieldops_truncated"


@dataclass(frozen=True)
class Measure:
    """What ``measure`` saw; ``complete`` is False when it stopped at a limit."""

    depth: int
    nodes: int
    size: int
    complete: bool


def measure(
    value: Any,
    *,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_bytes: int = MAX_BYTES,
) -> Measure:
    """Walk ``value`` iteratively, stopping as soon as a limit is exceeded."""
    depth = nodes = size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if depth > max_depth or nodes > max_nodes or size > max_bytes:
            return Measure(depth, nodes, size, False)
        if isinstance(item, Mapping):
            size += 2
            for key, child in item.items():
                size += len(key) + 3 if isinstance(key, str) else 8
                stack.append((child, level + 1))
        elif isinstance(item, (list, tuple)):
            size += 2
            stack.extend((child, level + 1) for child in item)
        elif isinstance(item, str):
            size += len(item) + 2
        else:
            size += 8
    return Measure(depth, nodes, size, True)


def check(value: Any) -> RejectionReason | None:
    """Return the reason ``value`` exceeds a limit, or None when it is within all of them."""
    seen = measure(value)
    if seen.complete:
        return None
    if seen.depth > MAX_DEPTH:
        return _exceeded("depth", seen.depth, MAX_DEPTH)
    if seen.nodes > MAX_NODES:
        return _exceeded("values", seen.nodes, MAX_NODES)
    return _exceeded("bytes", seen.size, MAX_BYTES)


def check_json_text(
    text: str, *, max_depth: int = MAX_ARGUMENT_DEPTH, max_bytes: int = MAX_ARGUMENT_BYTES
) -> RejectionReason | None:
    """Return the reason JSON ``text`` is too large or nested too deeply, or None.

    Counts bracket nesting outside string literals in one pass, so a decoder never sees
    text it would have to recurse through.
    """
    if len(text) > max_bytes:
        return _exceeded("bytes", len(text), max_bytes)
    level = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            if level > deepest:
                deepest = level
                if deepest > max_depth:
                    return _exceeded("depth", deepest, max_depth)
        elif char in "]}":
            level -= 1
    return None


def _exceeded(limit: str, measured: int, maximum: int) -> RejectionReason:
    return RejectionReason(
        LIMIT_EXCEEDED,
        f"output {limit} {'over' if limit != 'depth' else 'at least'} {measured} > {maximum}",
        limit=limit,
        measured=measured,
        maximum=maximum,
    )


def bounded(
    value: Any,
    *,
    max_depth: int = STORED_DEPTH,
    max_nodes: int = STORED_NODES,
    max_string: int = STORED_STRING,
    text: Callable[[str], str] | None = None,
) -> tuple[Any, bool]:
    """Return (a bounded, JSON-serialisable copy of ``value``, whether anything was cut).

    Containers deeper than ``max_depth`` and values past ``max_nodes`` are replaced by
    ``{MARKER: reason, ...}``; strings longer than ``max_string`` are cut; keys become
    strings; non-finite floats and non-JSON objects become descriptive strings. ``text``
    (e.g. secret redaction) is applied to every string and key kept.
    """
    cut = False
    nodes = 0

    def scalar(item: Any) -> Any:
        nonlocal cut
        if item is None or isinstance(item, (bool, int)):
            return item
        if isinstance(item, float):
            return item if math.isfinite(item) else repr(item)
        if isinstance(item, str):
            if len(item) > max_string:
                cut = True
                item = item[:max_string] + f"...[{len(item) - max_string} characters cut]"
            return text(item) if text else item
        return f"<{type(item).__name__}>"

    def container(item: Any) -> dict[str, Any] | list[Any] | None:
        if isinstance(item, Mapping):
            return {}
        if isinstance(item, (list, tuple)):
            return []
        return None

    root = container(value)
    if root is None:
        return scalar(value), cut
    # Each task: (source container, its copy, depth of the copy).
    stack: list[tuple[Any, dict[str, Any] | list[Any], int]] = [(value, root, 1)]
    while stack:
        source, target, level = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, child in items:
            nodes += 1
            if nodes > max_nodes:
                cut = True
                _put(target, key, {MARKER: "values", "limit": max_nodes}, text)
                break
            copy = container(child)
            if copy is None:
                _put(target, key, scalar(child), text)
            elif level >= max_depth:
                cut = True
                _put(target, key, {MARKER: "depth", "limit": max_depth}, text)
            else:
                _put(target, key, copy, text)
                stack.append((child, copy, level + 1))
        if nodes > max_nodes:
            break
    return root, cut


def _put(
    target: dict[str, Any] | list[Any],
    key: Any,
    value: Any,
    text: Callable[[str], str] | None,
) -> None:
    if isinstance(target, list):
        target.append(value)
        return
    name = key if isinstance(key, str) else str(key)
    target[text(name) if text else name] = value
