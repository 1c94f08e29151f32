"""Canonical JSON through ``orjson``, wherever it is provably byte-identical.

``kernel.canonical`` stays pure (standard library only) and encodes with ``json``, whose
C encoder writes about 150 MB/s (14 us for an event's content, a fifth of an append);
orjson writes the same text about twenty times faster, but not for every value: it writes
some floats differently from ``repr`` (``1e-06`` as ``1e-6``), encodes types ``json``
refuses (UUID, datetime, enums, dataclasses) and does not normalize text to NFC. So it is
used only where the value is known to hold none of those:

- ``plain_canonical_bytes``: any value, after a walk proves it holds only dict (str keys),
  list, tuple, str, int, bool and None, exact types; installed as ``kernel.canonical``'s
  accelerator when the apps are ready (``runs.apps``), so ``digest`` and
  ``canonical_json`` use it for every value it accepts;
- ``canonical_bytes_of_decoded``: values audit replay decoded from stored JSON with floats
  as ``JsonFloat``, which needs no walk (orjson refuses the subclass itself).
- ``json_copy``: a value as its JSON column reads it back (evidence, the advance's read
  cache), for a plain value without ``json``'s slower encoder and decoder.

Either way the output must also be ASCII (no text that NFC could change). For such values
orjson's sorted compact encoding is ``json``'s: it escapes the 33 control characters, the
quote and the backslash exactly as ``json`` does, sorts keys by the same code-point order
and writes ints the same way; anything else it cannot encode (ints beyond 64 bits, nesting
past 255) raises, and ``kernel.canonical`` answers. tests/domain/kernel/test_fastjson.py
checks both against ``kernel.canonical`` on arbitrary values.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kernel import canonical
from kernel.canonical import standard_canonical_json

try:  # Everything works without it, at the standard library's speed.
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]


class JsonFloat(float):
    """A float decoded from stored JSON (``parse_float=JsonFloat``): a plain float in every
    respect (the same value, ``repr`` and JSON text), except that ``orjson`` refuses it.

    That refusal is what ``canonical_bytes_of_decoded`` relies on: orjson writes some
    floats differently from Python's ``repr`` (``1e-06`` as ``1e-6``), so any value that
    holds a float must take the exact path."""

    __slots__ = ()


_LEAVES = frozenset({str, int, bool, type(None)})


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only dict (str keys), list, tuple, str, int, bool and None,
    each of exactly that type (no float, no subclass such as an enum)."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _LEAVES and not _plain(item)):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 (a loop: all() over a generator costs more here)
            if type(item) not in _LEAVES and not _plain(item):
                return False
        return True
    return kind in _LEAVES


def plain_canonical_bytes(value: Any) -> bytes | None:
    """``canonical_json(value).encode()`` when ``value`` is plain (``_plain``) and its
    encoding ASCII; None otherwise (the caller encodes it the standard way)."""
    if orjson is None:
        return None
    try:
        if not _plain(value):
            return None
        data: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None
    return data if data.isascii() else None


def plain_json_text(value: Any) -> str | None:
    """Compact JSON text of ``value`` (keys in their own order, non-ASCII text as is) when
    ``value`` is plain (``_plain``); None otherwise (the caller encodes it with ``json``).

    For stored JSON, not for hashing: PostgreSQL's jsonb keeps the value, not the text, so
    any text that decodes to the same value will do, and for a plain value orjson's
    decodes to exactly what ``json.dumps`` writes (ints, strings and containers only; no
    float, whose text orjson may write differently)."""
    if orjson is None:
        return None
    try:
        if not _plain(value):
            return None
        data: bytes = orjson.dumps(value)
    except (TypeError, RecursionError):  # ints beyond 64 bits, lone surrogates, deep nesting
        return None
    return data.decode("utf-8")


def json_copy(value: Any) -> Any:
    """``json.loads(json.dumps(value, default=str))``: the value as a JSON column reads it
    back (a new copy; tuples become lists, anything JSON has no type for becomes its
    ``str``). A plain value (``_plain``) makes the round trip through orjson, which
    decodes to exactly what ``json`` would for ints, strings and containers; any other
    (floats, UUIDs, datetimes, enums...) takes ``json``'s own."""
    if orjson is not None and _plain(value):
        try:
            return orjson.loads(orjson.dumps(value))
        except (TypeError, RecursionError):  # ints beyond 64 bits, lone surrogates, nesting
            pass
    return json.loads(json.dumps(value, default=str))


def install() -> None:
    """Make ``kernel.canonical`` use ``plain_canonical_bytes`` (when orjson is there)."""
    if orjson is not None:
        canonical.accelerate(plain_canonical_bytes)


def canonical_bytes_of_decoded(value: Any) -> bytes:
    """``canonical_json(value).encode()``, for a value read back from stored JSON.

    Precondition: ``value`` holds only what JSON decoding gives (dict with str keys, list,
    str, int, bool, None) with every float a ``JsonFloat``, plus tuples, str and int of the
    caller's own. orjson then either refuses it (a ``JsonFloat``, an int beyond 64 bits)
    or encodes a plain value (see the module docstring). Never call it with plain floats.
    """
    if orjson is not None:
        try:
            data: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError too
            pass
        else:
            if data.isascii():
                return data
    return standard_canonical_json(value).encode("utf-8")


def digest_of_decoded(value: Any) -> str:
    """``digest(value)`` for a value read back from stored JSON; see
    ``canonical_bytes_of_decoded`` for the precondition."""
    return hashlib.sha256(canonical_bytes_of_decoded(value)).hexdigest()
