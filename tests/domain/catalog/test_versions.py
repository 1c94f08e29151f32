"""The version lifecycle's consequences for runs: pinning, dispatch status, retirement."""

from __future__ import annotations

import pytest

from catalog.domain import versions
from catalog.domain.lifecycle import State


def offer(version: str, state: str = "ADMITTED", cid: str = "search_manual") -> versions.Offer:
    return versions.Offer(cid, version, "d" * 64, state)


def test_new_runs_pin_the_newest_admitted_version_in_semantic_order():
    best = versions.newest_admitted(
        [offer("1.9.0"), offer("1.10.0"), offer("2.0.0", "DEPRECATED"), offer("3.0.0", "RETIRED")]
    )
    assert best["search_manual"].version == "1.10.0"
    assert versions.newest_admitted([offer("1.0.0", "DEPRECATED")]) == {}


@pytest.mark.parametrize(
    ("state", "newest", "code"),
    [
        ("ADMITTED", True, "new_and_pinned_runs"),
        ("ADMITTED", False, "pinned_runs_only"),
        ("DEPRECATED", False, "pinned_runs_only"),
        ("RETIRED", False, "nothing"),
        ("DISCOVERED", False, "nothing"),
        ("REJECTED", False, "nothing"),
    ],
)
def test_dispatch_status_says_who_a_version_serves(state, newest, code):
    status = versions.dispatch_status(lifecycle=state, has_adapter=True, newest=newest)
    assert status.code == code and status.dispatches == (code != "nothing")


def test_a_version_without_an_adapter_dispatches_nothing_whatever_its_state():
    status = versions.dispatch_status(lifecycle="ADMITTED", has_adapter=False, newest=True)
    assert status.code == "nothing" and "no adapter" in status.label


def test_every_state_has_a_rule_and_only_admitted_and_deprecated_serve_runs():
    assert set(versions.VERSION_RULES) == set(State)
    serving = {s for s, r in versions.VERSION_RULES.items() if r.pinned_runs}
    assert serving == {State.ADMITTED, State.DEPRECATED}


def test_retirement_risks():
    assert (
        versions.retirement_risks(
            consequential=False, successor="search_manual@1.1.0", pinned_runs=0, unknown_effects=0
        )
        == []
    )
    assert versions.retirement_risks(
        consequential=True, successor="", pinned_runs=2, unknown_effects=1
    ) == ["consequential", "no_successor", "pinned_runs", "unknown_effects"]
