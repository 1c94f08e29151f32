"""Canonical JSON: one stable text per value; the fast path agrees with full normalization."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from kernel.canonical import _normalize, canonical_json, chain_hash, digest
from runs.domain.events import link_hash

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def normalized(value):
    return json.dumps(
        _normalize(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


@given(JSON)
@example([1e16, -1e16, 1.5e20, 1e300])  # integral floats written with an exponent
@example({"a": -0.0, "b": [2.0], "c": {"d": 3.0}})  # integral floats before each delimiter
@example([1e-05, 2.5e-07, "reserve-part e-05"])  # a negative exponent is never integral
def test_the_fast_path_equals_full_normalization(value):
    assert canonical_json(value) == normalized(value)


def test_equivalent_spellings_have_one_digest():
    composed, decomposed = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert composed != decomposed
    assert digest({"a": composed, "b": [1.0]}) == digest({"b": [1], "a": decomposed})


def test_keys_are_sorted_and_whitespace_is_gone():
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


@given(
    st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    st.uuids().map(str) | st.text(max_size=40),
    st.integers(min_value=0, max_value=10**9),
    st.sampled_from(["2026-11-30T04:12:58.123456+00:00", "2026-11-30T04:12:58Z"])
    | st.text(max_size=40),
)
def test_the_written_link_envelope_is_the_canonical_one(content_hash, event_id, sequence, at):
    """link_hash writes plain envelopes without the encoder; it must equal the digest of
    the canonical JSON exactly, or stored chains would stop verifying."""
    envelope = {
        "content_hash": content_hash,
        "event_id": event_id,
        "sequence": sequence,
        "occurred_at": at,
    }
    expected = chain_hash("0" * 64, digest(envelope))
    assert link_hash(prev_hash="0" * 64, **envelope) == expected
