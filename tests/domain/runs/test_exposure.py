"""Exposure differences of decision replay (pure): added and removed capabilities with
the current funnel's reason, and pins that differ from what a new run would pin today."""

from __future__ import annotations

from runs.domain.exposure import pin_differences, visible_difference


def test_it_reports_added_and_removed_capabilities_with_why_each_was_removed() -> None:
    diff = visible_difference(
        ["read_equipment", "search_manual", "clarify"],
        ["check_inventory", "clarify", "read_equipment"],
        reasons={
            "search_manual@1.0.0": "RETIRED: only admitted versions reach a model context",
            "search_manual@1.1.0": "not pinned by this run",
        },
        recorded_phase="diagnose",
        current_phase="diagnose",
    )
    assert diff.added == ("check_inventory",)
    assert diff.removed == ("search_manual",)
    assert diff.why_removed == {
        "search_manual": "RETIRED: only admitted versions reach a model context"
    }
    assert not diff.same
    assert diff.summary() == "+check_inventory -search_manual"
    assert diff.as_dict()["removed"] == ["search_manual"]


def test_the_same_set_in_another_order_is_no_difference() -> None:
    diff = visible_difference(["b", "a"], ("a", "b"), reasons={})
    assert diff.same and diff.added == diff.removed == ()
    assert diff.summary() == "same visible set"


def test_a_removed_capability_with_no_catalog_row_says_so() -> None:
    diff = visible_difference(["gone"], [], reasons={})
    assert diff.why_removed == {"gone": "not in the current catalog"}


def test_a_decision_without_a_recorded_visible_set_is_unknown_not_a_difference() -> None:
    diff = visible_difference(None, ["a"], reasons={})
    assert not diff.known and diff.same
    assert diff.summary() == "no visible set recorded"


def test_pins_that_differ_from_todays_pin_are_reported_with_the_pinned_lifecycle() -> None:
    pinned = {"search_manual": "1.0.0#aaaa", "read_equipment": "1.0.0#bbbb", "old": "0.1.0#cc"}
    now = {"search_manual": "1.1.0#dddd", "read_equipment": "1.0.0#bbbb", "fresh": "1.0.0#ee"}
    found = pin_differences(
        pinned, now, lifecycles={"search_manual@1.0.0": "RETIRED", "old@0.1.0": "DEPRECATED"}
    )
    assert [p.capability for p in found] == ["fresh", "old", "search_manual"]
    fresh, old, manual = found
    assert manual.summary() == "search_manual: pinned 1.0.0 (RETIRED), a new run would pin 1.1.0"
    assert old.summary() == "old: pinned 0.1.0 (DEPRECATED), a new run would pin none"
    assert fresh.summary() == "fresh: pinned none, a new run would pin 1.0.0"
    assert pin_differences(now, now, lifecycles={}) == ()
