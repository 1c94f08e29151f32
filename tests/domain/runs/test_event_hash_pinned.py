"""Stored histories must keep verifying: the hashes of fixed events are pinned.

The expected digests below were computed by the code as it was before the authority's
fast path (issue 21) changed how an event's canonical text is produced; any change to
the canonical encoding, the content's fields or the link envelope breaks them, and with
them every stored chain. Never update these values to make a change pass.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from runs.domain.events import RunSnapshot, apply, build_event, event_content
from runs.domain.states import EventType, State

from .factory import CONFIG

EVENT_ID = "0b6a8f3e-8f51-4c1e-9a52-3f4d0e1c2b7a"
AT = "2026-11-30T10:00:01.000000+00:00"

CASES: dict[str, dict[str, Any]] = {
    "ascii": {
        "type": EventType.RUN_STARTED,
        "actor": "harness",
        "next_state": State.OBSERVING,
        "elapsed_ms": 12,
        "reason_code": "contract_valid",
        "refs": {"observation": "rq-1"},
        "payload": {
            "capability": "check_inventory",
            "attempts": 1,
            "note": "seal weep; manual 4.2",
            "i": 7,
        },
    },
    "unicode_floats_big_ints_controls": {
        "type": EventType.RUN_STARTED,
        "actor": "harness",
        "next_state": State.OBSERVING,
        "counters_delta": {"turns": 1},
        "elapsed_ms": 3,
        "reason_code": "ok",
        "refs": {"observation": "ev-\u00e9", "empty": ""},
        "payload": {
            unicodedata.normalize("NFD", "caf\u00e9"): [1.0, 2.5, -0.0, 1e16, 10**30, -(10**20)],
            "ctl": 'a\x00b\x1f\n\t\u2028\x7f"\\/',
            "emoji": "\U0001f600 \u00c5 \u212b",
            "nested": {"z": None, "a": True, "m": {"x": [{"y": 3.0}], "t": (1, "\u0065\u0301")}},
        },
    },
    "no_payload": {
        "type": EventType.RUN_STARTED,
        "actor": "harness",
        "next_state": State.OBSERVING,
    },
}

# (content_hash, hash) per case, computed before the change (see the module docstring).
PINNED: dict[str, tuple[str, str]] = {
    "ascii": (
        "9cbacb3b48d88ccc76ad7056bd9e0b5d1ae6d4a5cff6c71d4bed69c62cc5eac8",
        "2bfa621b8cb07c63dd60ce88b65346680d6a242f11ef46db38e1d509658c7ca6",
    ),
    "no_payload": (
        "c6fab3974106c0a60ef03817b252021412b30eb26b9a75b1fcb25d8ceb45f6a6",
        "847939cb95e786f5d1fc8fe57f7c7c1cff051682f82ad813af496fb26e2c46a9",
    ),
    "unicode_floats_big_ints_controls": (
        "dc5131c8103764eb589785be6738dcb952975b2cfa11c4d0cce10f1999732c82",
        "656f5599e27c3cafb307a8435ed089a9f7fc025a887cd8d885847e4fc5f8d29d",
    ),
    "second": (
        "622dc69e20247c7887da47d61e277c3802573af1491dc9677c3a3a0dc3de8d7a",
        "84dbf249d4eca44975e31302b6e0abc83f0627d8fd2324aca93547a53e71eed0",
    ),
}


def _event(name: str):
    return build_event(
        RunSnapshot.initial(CONFIG), event_id=EVENT_ID, occurred_at=AT, **CASES[name]
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_fixed_event_hashes_as_it_always_did(name):
    event = _event(name)
    assert (event.content_hash, event.hash) == PINNED[name]
    assert event.recomputed_content_hash() == event.content_hash
    assert event.recomputed_hash() == event.hash


def test_a_second_event_links_to_the_first_as_it_always_did():
    first = _event("ascii")
    second = build_event(
        apply(RunSnapshot.initial(CONFIG), first),
        event_id="5d1c1b0e-2f0a-4c51-8d67-0f6a3b9e4c21",
        occurred_at="2026-11-30T10:00:02.000000+00:00",
        type=EventType.OBSERVATION_RECORDED,
        actor="harness",
        next_state=State.DECIDING,
        counters_delta={"turns": 1},
        elapsed_ms=40,
        payload={"i": 8},
    )
    assert second.prev_hash == first.hash
    assert (second.content_hash, second.hash) == PINNED["second"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_record_content_is_event_content_of_its_fields(name):
    """``EventRecord.content`` is built directly; it must stay ``event_content``'s answer."""
    event = _event(name)
    fields = {
        key: getattr(event, key)
        for key in (
            "run_id",
            "type",
            "actor",
            "attempt",
            "owner_epoch",
            "prev_state",
            "next_state",
            "contract_version",
            "policy_version",
            "component_set",
            "budget",
            "cancel_revision",
            "reason_code",
            "refs",
            "payload",
            "schema_version",
        )
    }
    assert event.content() == event_content(**fields)
