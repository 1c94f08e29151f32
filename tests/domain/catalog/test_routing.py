"""Routing metrics on small hand-checked cases.

Six records, worked out by hand:

| case | acceptable | forbidden | registry | exposed | retrieved | controls | chose | fails at |
|---|---|---|---|---|---|---|---|---|
| c1 | {a} | {} | a b | a b | a | abstain | a | - |
| c2 | {b} | {d} | a b | a b | a | abstain | a | retrieval |
| c3 | {z} | {} | a b | a b | a b | abstain | a | coverage |
| c4 | {b} | {a} | a b | a | a | abstain | a | exposure (violation) |
| c5 | {abstain} | {} | a b | a b | a b | abstain | b | selection |
| c6 | {a, b} | {} | a b | a b | a b | abstain | b | - |
"""

from __future__ import annotations

import pytest

from capabilities.contracts import EffectClass
from capabilities.exposure import Candidate
from sim.routing import (
    ABSTAIN,
    Category,
    Rate,
    Report,
    RoutingCase,
    RoutingRecord,
    RoutingStage,
    abstention_accuracy,
    capability_coverage,
    end_to_end_accuracy,
    exposure_recall,
    failure_profile,
    funnel_counts,
    lexical_select,
    recall_at_k,
    selection_accuracy,
    selection_confusions,
    violation_rate,
)

AB = frozenset({"a", "b", ABSTAIN})


def rec(cid, acceptable, selected, *, forbidden=(), exposed="ab", retrieved="ab", k=2):
    case = RoutingCase(
        cid, f"goal {cid}", frozenset(acceptable), frozenset(forbidden), capability="x"
    )
    return RoutingRecord(
        case=case,
        registry=AB,
        exposed=frozenset(exposed),
        retrieved=frozenset(retrieved),
        controls=frozenset({ABSTAIN}),
        selected=selected,
        k=k,
    )


RECORDS = [
    rec("c1", {"a"}, "a", retrieved="a"),
    rec("c2", {"b"}, "a", forbidden={"d"}, retrieved="a"),
    rec("c3", {"z"}, "a"),
    rec("c4", {"b"}, "a", forbidden={"a"}, exposed="a", retrieved="a"),
    rec("c5", {ABSTAIN}, "b"),
    rec("c6", {"a", "b"}, "b"),
]


def test_first_failed_stage_of_each_hand_checked_case():
    stages = [r.failed_stage for r in RECORDS]
    assert stages == [
        None,
        RoutingStage.RETRIEVAL,
        RoutingStage.COVERAGE,
        RoutingStage.EXPOSURE,
        RoutingStage.SELECTION,
        None,
    ]


def test_rates_with_their_denominators():
    # coverage: every case but c3 has an acceptable capability in the registry.
    assert capability_coverage(RECORDS) == Rate(5, 6)
    # exposure given coverage: c1 c2 c5(control) c6 yes, c4 no.
    assert exposure_recall(RECORDS) == Rate(4, 5)
    # recall@2 given an ordinary acceptable was exposed: c1 c2 c6 -> c2 missed.
    assert recall_at_k(RECORDS, 2) == Rate(2, 3)
    assert recall_at_k(RECORDS, 5) == Rate(0, 0)
    assert recall_at_k(RECORDS, 5).value is None
    # selection given an acceptable was visible: c1 c5 c6 -> c5 chose b.
    assert selection_accuracy(RECORDS) == Rate(2, 3)
    # abstention: only c5 expects a control outcome, and it did not abstain.
    assert abstention_accuracy(RECORDS) == Rate(0, 1)
    # violations: c4 chose a forbidden capability.
    assert violation_rate(RECORDS) == Rate(1, 6)
    assert end_to_end_accuracy(RECORDS) == Rate(2, 6)


def test_failure_profile_and_confusions():
    assert failure_profile(RECORDS) == {
        "coverage": 1,
        "exposure": 1,
        "retrieval": 1,
        "selection": 1,
    }
    assert selection_confusions(RECORDS) == [(ABSTAIN, "b", 1)]
    assert funnel_counts(RECORDS) == [
        ("cases", 6),
        ("coverage", 5),
        ("exposure", 4),
        ("retrieval", 3),
        ("selection", 2),
    ]


def test_report_serializes_every_metric():
    report = Report("hand", tuple(RECORDS), k=2)
    data = report.as_dict()
    assert data["metrics"]["selection_accuracy"] == {"hits": 2, "total": 3, "value": 0.6667}
    assert data["metrics"]["arguments_validity"]["value"] is None
    assert [f["case"] for f in data["failures"]] == ["c2", "c3", "c4", "c5"]
    assert data["by_category"] == {"positive": {"hits": 2, "total": 6, "value": 0.3333}}


def test_a_selection_outside_the_visible_set_is_reported():
    r = rec("c7", {"a"}, "b", retrieved="a")
    assert r.selected_outside_visible
    assert r.failed_stage is RoutingStage.SELECTION


def test_cases_refuse_empty_or_contradictory_labels():
    with pytest.raises(ValueError, match="cannot be empty"):
        RoutingCase("x", "g", frozenset())
    with pytest.raises(ValueError, match="both acceptable and forbidden"):
        RoutingCase("x", "g", frozenset({"a"}), frozenset({"a"}))
    assert RoutingCase("x", "g", frozenset({"ask_user", ABSTAIN})).expects_abstention
    assert not RoutingCase("x", "g", frozenset({"a", ABSTAIN})).expects_abstention
    assert RoutingCase("x", "g", frozenset({"a"}), category=Category.GAP).category == "gap"


def _c(cid: str, purpose: str) -> Candidate:
    return Candidate(cid, "1", "f", EffectClass.READ, "ADMITTED", purpose)


def test_lexical_selector_picks_the_best_match_or_abstains():
    visible = [_c("check_inventory", "availability of a part"), _c(ABSTAIN, "nothing applies")]
    assert lexical_select("availability of part A17", visible) == "check_inventory"
    assert lexical_select("schedule a visit", visible) == ABSTAIN
    assert lexical_select("anything", []) is None


def test_lexical_ties_go_to_the_first_id_which_is_how_synonyms_become_guesses():
    visible = [_c("search", "find things"), _c("lookup", "find things")]
    assert lexical_select("find things", visible) == "lookup"
