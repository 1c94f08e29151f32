"""The fast canonical encoding of values read back from storage is byte-identical to
``canonical_json`` (stored histories must keep verifying), on arbitrary JSON values:
non-ASCII and NFC/NFD text, control characters, big ints, integral and tiny floats."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernel import fastjson
from kernel.canonical import canonical_json, digest
from kernel.fastjson import JsonFloat, canonical_bytes_of_decoded, digest_of_decoded

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


def decoded(value):
    """``value`` as stored JSON reads back: through its text, floats as JsonFloat."""
    return json.loads(json.dumps(value, allow_nan=False), parse_float=JsonFloat)


@given(JSON)
@example({"a": [1e-06, 1e16, 1.0], "b": "x"})  # floats orjson writes differently from repr
@example({"\u00e9": "e\u0301", "k": 2**64})  # NFC keys and values, an int beyond 64 bits
@example({"ctl": '\x00\x01\x1f"\\/\x7f', "n": -(2**63)})
def test_the_decoded_fast_path_is_byte_identical_to_canonical_json(value):
    value = decoded(value)
    expected = canonical_json(value)
    assert canonical_bytes_of_decoded(value) == expected.encode("utf-8")
    assert digest_of_decoded(value) == digest(value)


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_character_is_escaped_as_json_does(code):
    value = {"k" + chr(code): ["x" + chr(code) + "y"]}
    assert canonical_bytes_of_decoded(value) == canonical_json(value).encode("ascii")


def test_a_json_float_is_a_plain_float_to_everything_but_the_fast_encoder():
    value = JsonFloat("1e-06")
    assert value == 1e-06 and repr(value) == repr(1e-06)
    assert json.dumps({"f": value}) == json.dumps({"f": 1e-06})
    assert canonical_json([value, JsonFloat("2.0")]) == "[1e-06,2]"


def test_without_orjson_the_exact_path_answers(monkeypatch):
    monkeypatch.setattr(fastjson, "orjson", None)
    value = decoded({"b": [1, "\u00e9"], "a": 1.5})
    assert canonical_bytes_of_decoded(value) == canonical_json(value).encode("utf-8")
