"""The clarify scenario reads its requester's answer the way a person means it.

It asked "Which depot should supply the part?" and read any answer that did not start with
``LOC-`` as no answer at all: "the service van" reserved at the request's own depot,
LOC-N1, and the run completed at a depot the requester had not chosen. An answer now names
a depot by its id, its name or words only its name has; an answer that names none, or
more than one, is asked again with the depots to choose from; a second such answer ends
the run as "no applicable tool", saying why, instead of guessing."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import services as approvals
from approvals.models import Checkpoint
from runs.engine import runner
from runs.models import Evidence, Run
from sim.double import depots_named
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ("LOC-N2", ("LOC-N2",)),
        ("loc n2 please", ("LOC-N2",)),
        ("North service van 2", ("LOC-N2",)),
        ("the service van", ("LOC-N2",)),
        ("use the van", ("LOC-N2",)),
        ("North depot", ("LOC-N1",)),
        ("south depot", ("LOC-S1",)),
        ("north", ("LOC-N1", "LOC-N2")),
        ("depot", ("LOC-N1", "LOC-S1")),
        ("whichever is closest", ()),
        ("", ()),
        ("LOC-N9", ()),
    ],
)
def test_an_answer_names_the_depots_a_person_would_read_in_it(
    answer: str, named: tuple[str, ...]
) -> None:
    assert depots_named(answer) == named


def _answer(run: Run, user: Any, text: str) -> None:
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    assert checkpoint.kind == "clarification"
    approvals.clarification_answer(checkpoint_id=checkpoint.pk, user=user, answer=text)
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()


def _proposals(run: Run) -> list[dict[str, Any]]:
    return [
        e.content for e in Evidence.objects.filter(run=run, kind="proposal").order_by("created_at")
    ]


def _inventory_locations(run: Run) -> list[str]:
    return [
        p["args"]["location_id"]
        for p in _proposals(run)
        if p.get("capability") == "check_inventory"
    ]


def _questions(run: Run) -> list[str]:
    return [
        c.question
        for c in Checkpoint.objects.filter(run=run, kind="clarification").order_by("created_at")
    ]


def test_the_van_named_in_words_is_the_depot_the_part_comes_from(
    world: None, operator: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    _answer(run, operator, "the service van, please")
    # Proposed where the requester said; this run is delegated only its request's depot,
    # so the authority denies it and the unchanged retry escalates to a person.
    assert _inventory_locations(run)[0] == "LOC-N2"
    assert run.state == "ESCALATED"


def test_an_answer_naming_the_delegated_depot_completes_there(
    world: None, operator: Any, approver: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    _answer(run, operator, "north depot")
    assert set(_inventory_locations(run)) == {"LOC-N1"}
    approve(run, approver)
    assert run.state == "COMPLETED"


def test_an_answer_naming_no_depot_is_asked_again_with_the_depots_to_choose_from(
    world: None, operator: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    _answer(run, operator, "whichever is closest")
    assert run.state == "WAITING_HUMAN"
    assert _inventory_locations(run) == []
    again = _questions(run)[-1]
    assert "North depot (LOC-N1)" in again and "North service van 2 (LOC-N2)" in again
    assert "South depot" not in again  # another tenant's depot is not offered
    _answer(run, operator, "LOC-N1")
    assert set(_inventory_locations(run)) == {"LOC-N1"}


def test_an_answer_naming_two_depots_is_asked_again_between_those_two(
    world: None, operator: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    _answer(run, operator, "north")
    again = _questions(run)[-1]
    assert "North depot (LOC-N1)" in again and "North service van 2 (LOC-N2)" in again
    assert run.state == "WAITING_HUMAN"


def test_a_second_answer_naming_no_depot_ends_the_run_saying_why(
    world: None, operator: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    _answer(run, operator, "whichever is closest")
    _answer(run, operator, "you choose")
    assert _inventory_locations(run) == []
    assert run.state == "ESCALATED"
    last = _proposals(run)[-1]
    assert last["kind"] == "abstain" and "you choose" in last["reason"]


def test_a_question_asked_again_offers_every_depot_when_the_request_names_none_known() -> None:
    from sim.double import s_clarify

    ctx = {
        "observations": [
            {"capability": "request", "ok": True, "data": {"location_id": "LOC-X9"}},
            {"capability": "answer", "ok": True, "data": {"answer": "whichever"}},
        ]
    }
    again = s_clarify(ctx)
    question = again.args["question"]  # type: ignore[union-attr]
    assert "North depot (LOC-N1)" in question and "South depot (LOC-S1)" in question
