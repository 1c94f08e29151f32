"""The routing evaluation over the shipped case set, and the routing_eval command."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from capabilities import registry
from capabilities.registry import CAPABILITIES, CONTROLS
from sim import routing_eval
from sim.routing import Category, RoutingStage, failure_profile
from sim.world import service as world_service
from sim.world.models import LedgerEntry, ServiceRequest
from tests.helpers import manage_refused

FIVE = set(CAPABILITIES)
ALL_CATEGORIES = {
    Category.POSITIVE,
    Category.NEGATIVE,
    Category.NEAR_NEIGHBOUR,
    Category.ABSTENTION,
    Category.FORBIDDEN,
}


def test_the_case_set_covers_every_capability_in_every_category():
    by_capability = defaultdict(set)
    for case in routing_eval.load_cases():
        by_capability[case.capability].add(case.category)
    for capability in FIVE:
        assert by_capability[capability] >= ALL_CATEGORIES, capability
    for control in CONTROLS:
        assert {Category.POSITIVE, Category.NEAR_NEIGHBOUR} <= by_capability[control]
    assert Category.GAP in {c for cats in by_capability.values() for c in cats}


def test_labels_name_registered_capabilities_except_known_gaps():
    known = set(registry.ALL_CONTRACTS) | {"inventory_admin"}
    for case in routing_eval.load_cases():
        if case.category is Category.GAP:
            assert not case.acceptable & known
        else:
            assert case.acceptable <= known, case.case_id
            assert case.forbidden <= known, case.case_id


def test_each_situation_implies_the_phase_a_live_run_would_be_in():
    assert routing_eval.situation_phase("fresh") == "diagnose"
    assert routing_eval.situation_phase("part_known") == "source"
    assert routing_eval.situation_phase("proposal_ready") == "commit"


@pytest.fixture
def no_effects_possible(monkeypatch):
    """Fail loudly if the selection suite ever reaches an adapter or the world."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the selection suite reached a real capability")

    monkeypatch.setattr(registry, "dispatch", forbidden)
    monkeypatch.setattr(world_service.WorldService, "__init__", forbidden)


@pytest.mark.django_db
def test_the_selection_suite_records_calls_on_stubs_and_has_no_effects(no_effects_possible):
    stubs = routing_eval.RecordingStubs()
    report = routing_eval.evaluate(registry_name="fieldops", selector_name="double", stubs=stubs)
    selections = [r for r in report.records if r.selected not in (None, "final")]
    assert len(stubs.calls) == len(selections) > 30
    assert {name for _, name, _ in stubs.calls} <= set(registry.ALL_CONTRACTS)
    assert not LedgerEntry.objects.exists()
    assert not ServiceRequest.objects.exists()


def test_the_policy_double_selects_every_positive_of_the_five_capabilities():
    report = routing_eval.evaluate(registry_name="fieldops", selector_name="double", k=5)
    positives = [r for r in report.records if r.case.category is Category.POSITIVE]
    for r in positives:
        if r.case.capability in FIVE and r.failed_stage is not RoutingStage.EXPOSURE:
            assert r.correct, (r.case.case_id, r.selected)
    # The double's arguments are valid model-owned arguments for what it selected.
    assert report.metrics()["arguments_validity"].value == 1.0


def test_the_double_is_scripted_so_goal_only_abstentions_fail_at_selection():
    report = routing_eval.evaluate(registry_name="fieldops", selector_name="double")
    by_id = {r.case.case_id: r for r in report.records}
    schedule = by_id["no_applicable_tool.positive.1"]
    assert schedule.failed_stage is RoutingStage.SELECTION
    assert schedule.selected == "read_equipment"
    # Evidence-driven abstention works: no approved passage names a part.
    assert by_id["search_manual.abstention.1"].selected == "no_applicable_tool"
    assert by_id["search_manual.abstention.1"].correct


def test_known_gaps_fail_at_coverage_and_phase_limits_fail_at_exposure():
    report = routing_eval.evaluate(registry_name="fieldops", selector_name="lexical")
    by_id = {r.case.case_id: r for r in report.records}
    assert by_id["gap.release.1"].failed_stage is RoutingStage.COVERAGE
    assert by_id["gap.transfer.1"].failed_stage is RoutingStage.COVERAGE
    assert by_id["check_inventory.positive.3"].failed_stage is RoutingStage.EXPOSURE


def test_a_confusable_catalog_moves_the_metrics():
    fieldops = routing_eval.evaluate(registry_name="fieldops", selector_name="lexical", k=3)
    confusable = routing_eval.evaluate(registry_name="confusable", selector_name="lexical", k=3)
    f, c = fieldops.metrics(), confusable.metrics()
    assert c["recall_at_k"].value < f["recall_at_k"].value
    assert c["selection_accuracy"].value < f["selection_accuracy"].value
    assert c["end_to_end_accuracy"].value < f["end_to_end_accuracy"].value
    confused = {
        (a, s)
        for a, s, _ in __import__("sim.routing", fromlist=["x"]).selection_confusions(
            confusable.records
        )
    }
    assert ("search_manual", "search_documents") in confused
    # The double ignores descriptions, so its losses on the crowded catalog are retrieval
    # failures: the acceptable capability never made the top k.
    double_f = routing_eval.evaluate(registry_name="fieldops", selector_name="double", k=3)
    double_c = routing_eval.evaluate(registry_name="confusable", selector_name="double", k=3)
    assert failure_profile(double_f.records)["retrieval"] == 0
    assert failure_profile(double_c.records)["retrieval"] > 0
    assert double_c.metrics()["selected_outside_visible"].hits > 0


def test_recall_at_k_rises_with_k_on_the_confusable_catalog():
    report = routing_eval.evaluate(registry_name="confusable", selector_name="lexical")
    values = [report.extra_recall[k].value for k in routing_eval.RECALL_KS]
    assert values == sorted(values)
    assert values[0] < values[-1]


@pytest.mark.django_db
def test_the_command_prints_every_metric():
    out = StringIO()
    call_command(
        "routing_eval", "--selector", "double", "--registry", "fieldops", "--failures", stdout=out
    )
    text = out.getvalue()
    for metric in (
        "capability_coverage",
        "exposure_recall",
        "recall_at_k",
        "selection_accuracy",
        "abstention_accuracy",
        "violation_rate",
        "failure profile (first failed stage)",
        "funnel: cases 38",
        "FAIL gap.release.1: stage coverage",
    ):
        assert metric in text, metric


@pytest.mark.django_db
def test_the_command_speaks_json_for_every_configuration():
    out = StringIO()
    call_command("routing_eval", "--json", "--k", "2", stdout=out)
    reports = json.loads(out.getvalue())
    assert len(reports) == 4
    assert {r["k"] for r in reports} == {2}
    assert all(
        set(r["failure_profile"]) == {"coverage", "exposure", "retrieval", "selection"}
        for r in reports
    )
    names = {r["name"] for r in reports}
    assert "lexical on confusable (k=2)" in names


@pytest.mark.django_db
def test_the_command_fails_under_a_floor_and_on_bad_options():
    with pytest.raises(CommandError, match="end-to-end accuracy below"):
        call_command("routing_eval", "--fail-under", "0.99", stdout=StringIO())
    with pytest.raises(CommandError, match="--k"):
        call_command("routing_eval", "--k", "0", stdout=StringIO())
    with pytest.raises(CommandError, match="unknown scenario"):
        call_command("routing_eval", "--scenario", "nope", stdout=StringIO())


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # nan passed every evaluation (no accuracy is below nan); 2 failed every one
        (["--fail-under", "nan"], "argument --fail-under: 'nan' is not a decimal number"),
        (["--fail-under", "2"], "--fail-under is an accuracy: from 0 to 1"),
        (["--k", "\u0663"], "argument --k: '\u0663' is not a whole number"),
        (["--k", "9" * 30], "is not a whole number"),
    ],
)
def test_the_command_refuses_a_floor_or_k_that_is_no_number_of_its_kind(arguments, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("routing_eval", *arguments, stdout=StringIO())


def test_the_command_refuses_a_nan_floor_with_one_line_in_a_real_process():
    line = manage_refused("routing_eval", "--fail-under", "nan")
    assert line.endswith(
        "error: argument --fail-under: 'nan' is not a decimal number (the digits 0-9 and one '.')"
    ), line
