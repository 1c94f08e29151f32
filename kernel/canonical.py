"""Canonical JSON and content hashes, shared by events, evidence, contracts and proposals."""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any


def _text(value: str) -> str:
    # ASCII text is already NFC; only other text pays for normalization.
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def _normalize(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is dict:
        return {_text(k) if type(k) is str else str(k): _normalize(v) for k, v in value.items()}
    if kind is int or kind is bool or value is None:
        return value
    if kind is list or kind is tuple:
        return [_normalize(v) for v in value]
    if isinstance(value, str):
        return _text(str(value))
    if isinstance(value, dict):
        return {_normalize(str(k)): _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# The text of an integral float, which normalizing would change. The text comes from
# Python's own encoder, which writes floats with ``repr``: an integral float is either
# "1.0" followed by a JSON delimiter or, from 1e16 up, an exponent with a plus sign
# ("1e+16"; a negative exponent is never integral, and the "e" is always lower case). The
# same characters inside a string only send that value down the slower path, which gives
# the same answer.
_INTEGRAL_FLOAT = re.compile(r"\d\.0+(?:[,\]}]|$)|\de\+\d")

_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _may_hold_integral_float(text: str) -> bool:
    # Cheap substring scans first; only text that could hold one pays for the pattern.
    if not (".0," in text or ".0]" in text or ".0}" in text or text.endswith(".0") or "e+" in text):
        return False
    return _INTEGRAL_FLOAT.search(text) is not None


# An encoder that returns canonical JSON's exact UTF-8 bytes for the values it can prove it
# encodes identically, and None for all others (``kernel.fastjson`` installs one when its
# dependency is there; this module stays standard library only). Without it, or when it
# declines a value, the text below is the answer.
Accelerator = Callable[[Any], "bytes | None"]
_accelerated: Accelerator | None = None


def accelerate(encoder: Accelerator | None) -> None:
    """Install (or, with None, remove) the accelerated encoder; see ``_accelerated``."""
    global _accelerated
    _accelerated = encoder


def canonical_json(value: Any) -> str:
    """Return one stable text for ``value``: NFC strings, sorted keys, no whitespace.

    Most values are already canonical: all-ASCII text (so NFC) and no integral floats.
    For those the plain sorted encoding is the answer; everything else is normalized first.
    """
    if _accelerated is not None:
        data = _accelerated(value)
        if data is not None:
            return data.decode("ascii")
    return standard_canonical_json(value)


def standard_canonical_json(value: Any) -> str:
    """``canonical_json`` without the accelerated encoder: the definition it must match."""
    text = _ENCODER.encode(value)
    if text.isascii() and not _may_hold_integral_float(text):
        return text
    return _ENCODER.encode(_normalize(value))


def digest(value: Any) -> str:
    """Return the sha256 hex digest of the canonical JSON of ``value``."""
    if _accelerated is not None:
        data = _accelerated(value)
        if data is not None:
            return hashlib.sha256(data).hexdigest()
    return hashlib.sha256(standard_canonical_json(value).encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, content_hash: str) -> str:
    """Return the integrity link of an event: hash(previous link + this content)."""
    return hashlib.sha256(f"{prev_hash}:{content_hash}".encode("ascii")).hexdigest()


class RepeatedKey(ValueError):
    """A JSON object names a key more than once: ``keys`` are those keys, sorted; the
    message names the first one seen again."""

    def __init__(self, keys: list[str], first: str) -> None:
        super().__init__(f"the key {first!r} appears twice in one object")
        self.keys = tuple(keys)


def object_without_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` for JSON from outside (request bodies,
    callbacks, provider answers, model arguments): one object; a key given twice raises
    RepeatedKey. Parsers disagree on which one wins (Python's takes the last), so the
    sender, a proxy or a log could read another object than the one acted on."""
    data = dict(pairs)
    if len(data) != len(pairs):
        names = [key for key, _ in pairs]
        again = [key for i, key in enumerate(names) if key in names[:i]]
        raise RepeatedKey(sorted(set(again)), first=again[0])
    return data


def unstorable(data: Any) -> str:
    """Why parsed JSON ``data`` cannot be stored (NUL, unpaired surrogate, non-finite
    number: PostgreSQL text and jsonb hold none of them), or ""."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return "strings must not contain NUL characters"
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return "strings must not contain unpaired surrogates"
        elif isinstance(node, float) and not math.isfinite(node):
            return "numbers must be finite"
        elif isinstance(node, Mapping):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return ""


def storable_text(text: str) -> str:
    """``text`` as PostgreSQL can store it, nothing hidden: a NUL (which no text or jsonb
    column holds) becomes the six characters ``\\u0000``, an unpaired surrogate its
    ``\\udc80`` escape. Everything else is kept as it is."""
    if "\x00" in text:
        text = text.replace("\x00", "\\u0000")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def storable(value: Any) -> Any:
    """A JSON value from outside (a tool server's identity, say) made storable: every
    string and key through ``storable_text``, a non-finite number as its text."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {storable_text(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value
