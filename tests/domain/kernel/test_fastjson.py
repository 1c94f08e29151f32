"""Canonical JSON through orjson is byte-identical to the standard library's
(``kernel.canonical.standard_canonical_json``), or declines: stored histories must keep
verifying. Checked on arbitrary JSON values: non-ASCII and NFC/NFD text, control
characters, big ints, integral and tiny floats, tuples, enums, UUIDs, subclasses."""

from __future__ import annotations

import enum
import json
import unicodedata
import uuid

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernel import canonical, fastjson
from kernel.canonical import canonical_json, digest, standard_canonical_json
from kernel.fastjson import (
    JsonFloat,
    canonical_bytes_of_decoded,
    digest_of_decoded,
    json_copy,
    plain_canonical_bytes,
    plain_json_text,
)

TEXT = (
    st.text()
    | st.text(alphabet=st.characters(max_codepoint=0x7F))
    | st.sampled_from(
        ["caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9"), "\u212b", "\x00\x1f\x7f\u2028"]
    )
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1.0, -0.0, 1e16, 1e-06, 1e-05, 2.5e-07, 1.5e20, 1e300, 5e-324]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**64 + 2)
    | st.integers(min_value=-(2**63) - 2, max_value=-(2**63) + 2)
    | FLOATS
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 7


class Plain(enum.Enum):
    A = "a"


class Text(str):
    pass


ODD = st.sampled_from(
    [(1, "t"), Colour.RED, Size.BIG, Plain.A, uuid.UUID(int=5), Text("x"), b"bytes", 3 + 0j]
)
ANYTHING = st.recursive(
    SCALARS | ODD,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(TEXT | st.sampled_from([Colour.RED, 1, None]), inner, max_size=4)
    ),
    max_leaves=20,
)


def standard_or_error(value):
    try:
        return standard_canonical_json(value).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return type(exc)


@given(ANYTHING)
@example({"a": [1e-06, 1e16, 1.0], "b": "x"})
@example({"k": (1, 2), "e": Colour.RED, "u": uuid.UUID(int=5)})
@example({"\u00e9": "e\u0301", "big": 2**64, "ctl": "\x00\x1f\x7f"})
def test_the_plain_fast_path_is_byte_identical_or_declines(value):
    fast = plain_canonical_bytes(value)
    if fast is not None:
        assert fast == standard_or_error(value)


PLAIN = st.recursive(
    st.none() | st.booleans() | SCALARS.filter(lambda v: type(v) in (int, str)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(PLAIN)
def test_plain_values_take_the_fast_path_unless_non_ascii_or_huge(value):
    expected = standard_canonical_json(value).encode("utf-8")
    fast = plain_canonical_bytes(value)
    if expected.isascii() and all(-(2**63) <= i < 2**64 for i in _ints(value)):
        assert fast == expected
    else:
        assert fast is None


def _ints(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _ints(item)
    elif isinstance(value, list):
        for item in value:
            yield from _ints(item)
    elif type(value) is int:
        yield value


def test_the_accelerator_is_installed_and_agrees(monkeypatch):
    """With the apps ready, ``digest`` goes through orjson for plain values; removing the
    accelerator gives the same digests."""
    assert canonical._accelerated is plain_canonical_bytes
    value = {"b": [1, "x"], "a": {"c": None, "d": True}}
    fast_digest, fast_text = digest(value), canonical_json(value)
    monkeypatch.setattr(canonical, "_accelerated", None)
    assert (digest(value), canonical_json(value)) == (fast_digest, fast_text)


def decoded(value):
    """``value`` as stored JSON reads back: through its text, floats as JsonFloat."""
    return json.loads(json.dumps(value, allow_nan=False), parse_float=JsonFloat)


@given(JSON)
@example({"a": [1e-06, 1e16, 1.0], "b": "x"})  # floats orjson writes differently from repr
@example({"\u00e9": "e\u0301", "k": 2**64})  # NFC keys and values, an int beyond 64 bits
@example({"ctl": '\x00\x01\x1f"\\/\x7f', "n": -(2**63)})
def test_the_decoded_fast_path_is_byte_identical_to_canonical_json(value):
    value = decoded(value)
    expected = standard_canonical_json(value)
    assert canonical_bytes_of_decoded(value) == expected.encode("utf-8")
    assert digest_of_decoded(value) == digest(value)


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_character_is_escaped_as_json_does(code):
    value = {"k" + chr(code): ["x" + chr(code) + "y"]}
    expected = standard_canonical_json(value).encode("ascii")
    assert canonical_bytes_of_decoded(value) == expected
    assert plain_canonical_bytes(value) == expected


def test_a_json_float_is_a_plain_float_to_everything_but_the_fast_encoder():
    value = JsonFloat("1e-06")
    assert value == 1e-06 and repr(value) == repr(1e-06)
    assert json.dumps({"f": value}) == json.dumps({"f": 1e-06})
    assert canonical_json([value, JsonFloat("2.0")]) == "[1e-06,2]"


def test_without_orjson_the_exact_path_answers(monkeypatch):
    monkeypatch.setattr(fastjson, "orjson", None)
    value = decoded({"b": [1, "\u00e9"], "a": 1.5})
    assert canonical_bytes_of_decoded(value) == standard_canonical_json(value).encode("utf-8")
    assert plain_canonical_bytes(value) is None


@given(ANYTHING)
@example({"a": [1e-06, 1e16, 1.0], "b": "x"})
@example({"\u00e9": "e\u0301", "big": 2**64, "ctl": "\x00\x1f\x7f", "lone": "\ud800"})
@example({"k": (1, 2), "e": Colour.RED, "u": uuid.UUID(int=5), "t": Text("x")})
def test_stored_json_text_decodes_to_what_json_dumps_writes_or_declines(value):
    """The stored text of a JSON column (jsonb keeps the value, not the text): whenever the
    fast path answers, its text decodes to exactly the value ``json.dumps`` would store."""
    text = plain_json_text(value)
    if text is None:
        return
    assert json.loads(text) == json.loads(json.dumps(value, default=str))
    assert "NaN" not in text and "Infinity" not in text


@given(PLAIN)
def test_plain_values_are_stored_through_the_fast_path_unless_huge(value):
    text = plain_json_text(value)
    if all(-(2**63) <= i < 2**64 for i in _ints(value)) and _encodable(value):
        assert text is not None
        assert json.loads(text) == json.loads(json.dumps(value))
    else:
        assert text is None


def _encodable(value):
    """Whether all text in ``value`` is valid UTF-8 (no lone surrogate, which orjson refuses)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@given(ANYTHING)
@example({"a": [1e-06, 1e16, 1.0, True, 1], "b": "x"})
@example({"\u00e9": "e\u0301", "big": 2**64, "ctl": "\x00\x1f\x7f", "lone": "\ud800"})
@example({"k": (1, 2), "e": Colour.RED, "n": Size.BIG, "u": uuid.UUID(int=5), "t": Text("x")})
@example([[{"deep": [1, "2", None]}]])
def test_a_json_copy_is_what_a_json_column_reads_back(value):
    """``json_copy`` is ``json.loads(json.dumps(value, default=str))`` to the type of each
    item and the order of each key (``repr`` tells 1, 1.0 and True apart), and a copy."""
    try:
        expected = json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            json_copy(value)
        return
    copied = json_copy(value)
    assert repr(copied) == repr(expected)
    if isinstance(copied, dict | list) and copied:
        before = repr(value)
        copied.clear()
        assert repr(value) == before


def test_a_plain_json_copy_takes_the_fast_path(monkeypatch):
    """A plain value never reaches ``json``; any other does (the fast path is not dead)."""
    calls = []
    real = json.dumps
    monkeypatch.setattr(json, "dumps", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert json_copy({"a": [1, "b", None, (True,)]}) == {"a": [1, "b", None, [True]]}
    assert calls == []
    assert json_copy({"when": uuid.UUID(int=5), "f": 0.5}) == {
        "when": str(uuid.UUID(int=5)),
        "f": 0.5,
    }
    assert len(calls) == 1
