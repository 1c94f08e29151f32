"""Canonical JSON of values read back from storage, through a fast encoder.

``kernel.canonical`` stays pure (standard library only); this module adds ``orjson`` for
the one place that encodes many stored values: audit replay recomputes the content hash of
every event it reads. Its answers are byte-identical to ``kernel.canonical``'s.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kernel.canonical import canonical_json

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


def canonical_bytes_of_decoded(value: Any) -> bytes:
    """``canonical_json(value).encode()``, for a value read back from stored JSON.

    Precondition: ``value`` holds only what JSON decoding gives (dict with str keys, list,
    str, int, bool, None) with every float a ``JsonFloat``, plus tuples, str and int of the
    caller's own. For such a value orjson's sorted compact encoding either fails (a
    ``JsonFloat``, an int beyond 64 bits, a non-str key) or, when its output is ASCII,
    is byte-identical to ``canonical_json``: without floats and with ASCII text there is
    nothing to normalize (ASCII is NFC; no integral float), orjson escapes the 33 control
    characters, the quote and the backslash exactly as ``json`` does, sorts keys by the
    same code-point order and writes ints the same way (tests/domain/kernel prove it on
    arbitrary values). Everything else, including non-ASCII text (NFC), is encoded by
    ``canonical_json`` itself. Never call it with plain floats from elsewhere.
    """
    if orjson is not None:
        try:
            data: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError too
            pass
        else:
            if data.isascii():
                return data
    return canonical_json(value).encode("utf-8")


def digest_of_decoded(value: Any) -> str:
    """``digest(value)`` for a value read back from stored JSON; see
    ``canonical_bytes_of_decoded`` for the precondition."""
    return hashlib.sha256(canonical_bytes_of_decoded(value)).hexdigest()
