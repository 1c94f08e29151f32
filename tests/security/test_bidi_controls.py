"""Bidirectional control characters ("Trojan Source") in free text others read are refused
at the central validation of each kind of text, naming the character: nothing changes, the
form comes back as typed, and a refused decision is recorded as its other input refusals
are (refusal log and ``decision.refused``). U+200E and U+200F stay allowed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint, Decision, DecisionRefusal
from catalog import services as catalog
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion, LifecycleDecision
from kernel.text import BIDI_CONTROLS, bidi_control_refusal
from operations import saved_views
from operations import services as ops
from operations.models import Operation, SavedView
from runs import services as runs
from runs.console import operations as bulk
from runs.models import Event, Run
from tests.api.test_api import bearer, call
from tests.helpers import make_run, types

pytestmark = pytest.mark.django_db

RLO = "\u202e"
SPOOFED = f"routine check {RLO}devlohs snur"
TOLD = "U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in a reason"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _field(body: str, field_id: str) -> str:
    match = re.search(rf'<(?:input|textarea)[^>]*id="{field_id}"[^>]*>', body)
    assert match is not None, field_id
    return match.group(0)


@pytest.fixture
def waiting_run(world: None, operator: Any) -> Run:
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert run.state == "WAITING_HUMAN"
    return run


def _checkpoint(run: Run) -> Checkpoint:
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)


# -- the rule ----------------------------------------------------------------------------
def test_every_embedding_override_and_isolate_is_named_and_the_marks_pass() -> None:
    assert {f"U+{ord(c):04X}" for c in BIDI_CONTROLS} == {
        *(f"U+{n:04X}" for n in range(0x202A, 0x202F)),
        *(f"U+{n:04X}" for n in range(0x2066, 0x206A)),
    }
    assert bidi_control_refusal(SPOOFED) == TOLD
    assert bidi_control_refusal("a\u2067b") == (
        "U+2067 RIGHT-TO-LEFT ISOLATE is not allowed in a reason"
    )
    assert bidi_control_refusal("שלום \u200f(1)\u200e ok") is None


# -- runs: cancel, budget change, bulk cancel (console and API) --------------------------
def test_a_cancellation_with_an_override_is_refused_and_comes_back_as_typed(
    operator: Any, waiting_run: Run
) -> None:
    before = types(waiting_run)
    with pytest.raises(runs.RunInputError) as refused:
        runs.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason=SPOOFED)
    assert refused.value.field == "reason" and TOLD in str(refused.value)
    response = _client(operator).post(
        reverse("runs-cancel", args=[waiting_run.pk]), {"reason": SPOOFED}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert TOLD in body and 'aria-invalid="true"' in _field(body, "cancel-reason")
    assert f">{SPOOFED}</textarea>" in body
    bulk_page = _client(operator).post(
        reverse("runs-bulk-cancel"), {"run": [str(waiting_run.pk)], "reason": SPOOFED}
    )
    assert bulk_page.status_code == 400 and TOLD in bulk_page.content.decode()
    assert f'value="{SPOOFED}"' in _field(bulk_page.content.decode(), "bulk-reason")
    with pytest.raises(runs.RunInputError):
        bulk.run_cancel_many(
            tenant="north", run_ids=[str(waiting_run.pk)], by_ref="user:operator", reason=SPOOFED
        )
    with pytest.raises(runs.RunInputError):
        runs.run_budget_change(
            run_id=str(waiting_run.pk),
            by_ref="user:operator",
            budget="actions",
            limit=20,
            reason=SPOOFED,
        )
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN" and types(waiting_run) == before


def test_the_api_refuses_a_cancellation_with_an_override_as_an_invalid_reason(
    operator: Any, waiting_run: Run
) -> None:
    response = call("POST", f"/runs/{waiting_run.pk}/cancel", bearer(operator), {"reason": SPOOFED})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_reason" and TOLD in response.json()["message"]
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"


# -- operations and saved views ----------------------------------------------------------
def test_an_operation_and_a_view_name_with_an_override_are_refused(operator: Any) -> None:
    make_run(advance=False)
    with pytest.raises(ops.OperationInputError) as refused:
        ops.operation_start_cancel(
            tenant="north",
            by_ref="user:operator",
            query={"world": "faultlab"},
            reason=SPOOFED,
            confirm=1,
        )
    assert refused.value.field == "reason" and TOLD in str(refused.value)
    assert not Operation.objects.exists()
    with pytest.raises(ops.OperationInputError) as named:
        saved_views.saved_view_create(
            tenant="north",
            by_ref="user:operator",
            page="runs",
            name=f"mine {RLO}sruoy",
            query={"world": "faultlab"},
        )
    assert named.value.field == "name"
    assert "U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in a view's name" in str(named.value)
    response = _client(operator).post(
        reverse("saved-views-create"),
        {"page": "runs", "name": f"mine {RLO}sruoy", "query": "world=faultlab"},
    )
    assert response.status_code == 400
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in response.content.decode()
    assert not SavedView.objects.exists()


# -- catalog: admission answers ---------------------------------------------------------
def test_an_admission_answer_with_an_override_is_refused_naming_its_field() -> None:
    """The alternatives considered and the expiry rule are free text the next reviewer
    reads on the admission record: the same rule as a reason, each named by its field."""
    from catalog.domain import lifecycle

    answers = {
        "contract": {},
        "local_ref": "search_manual@1.1.0",
        "reviewer": "user:a",
        "task_transition": "NEED_INVENTORY -> HAVE_INVENTORY_EVIDENCE",
        "alternatives": ["keep 1.0.0"],
        "decision": "ADMIT_BOUNDED",
        "expiry": "when the manual's index changes",
    }
    for bad, field, what in (
        ({"alternatives": ["keep 1.0.0", SPOOFED]}, "alternatives", "an alternative"),
        ({"expiry": SPOOFED}, "expiry", "the expiry rule"),
    ):
        with pytest.raises(Refusal) as refused:
            lifecycle.admission_record(**{**answers, **bad})
        assert (refused.value.code, refused.value.field) == ("answer_bidi_control", field)
        assert refused.value.message == TOLD.replace("a reason", what)
    assert lifecycle.admission_record(**answers).expiry == answers["expiry"]


# -- catalog: lifecycle decisions and gates ----------------------------------------------
def test_a_catalog_decision_or_gate_change_with_an_override_changes_nothing(
    catalog_admin: Any, operator: Any
) -> None:
    target = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    before = LifecycleDecision.objects.count()
    with pytest.raises(Refusal) as refused:
        catalog.capability_decide(
            version_id=target.pk, user=catalog_admin, action="deprecate", reason=SPOOFED
        )
    assert refused.value.code == "reason_bidi_control" and refused.value.message == TOLD
    page = _client(catalog_admin).post(
        reverse("catalog-gate", args=[target.pk]), {"open": "0", "reason": SPOOFED}
    )
    assert page.status_code == 400
    field = _field(page.content.decode(), "gate-reason")
    assert 'aria-invalid="true"' in field and f'value="{SPOOFED}"' in field
    assert "Refused (reason_bidi_control)" in page.content.decode()
    runbook = _client(operator).post(
        reverse("runbooks-gate", args=["ledger-outage"]),
        {"capability_id": "reserve_part", "version": "1.0.0", "open": "0", "reason": SPOOFED},
    )
    assert runbook.status_code == 400 and TOLD in runbook.content.decode()
    target.refresh_from_db()
    assert target.lifecycle == "ADMITTED" and target.effect_gate_open
    assert catalog.tenant_gate_open(target, "north")
    assert LifecycleDecision.objects.count() == before


# -- approvals: a refused decision is recorded, as its other input refusals are -----------
def test_a_decision_with_an_override_is_refused_recorded_and_named(
    approver: Any, waiting_run: Run
) -> None:
    checkpoint = _checkpoint(waiting_run)
    before = Event.objects.filter(run=waiting_run).count()
    form = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": SPOOFED}
    response = _client(approver).post(reverse("approvals-decide", args=[checkpoint.pk]), form)
    assert response.status_code == 400
    body = response.content.decode()
    assert "bidi_control" in body and TOLD in body
    field = body[body.index('<textarea id="decision-reason"') :]
    assert 'aria-invalid="true"' in field[: field.index(">")]
    assert f">{SPOOFED}</textarea>" in field  # as typed
    api = call(
        "POST",
        f"/checkpoints/{checkpoint.pk}/decision",
        bearer(approver),
        {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": SPOOFED},
    )
    assert api.status_code == 400 and api.json()["code"] == "bidi_control"
    assert TOLD in api.json()["message"]
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == ["bidi_control"] * 2
    added = Event.objects.filter(run=waiting_run, sequence__gt=before)
    assert [(e.type, e.reason_code) for e in added] == [("decision.refused", "bidi_control")] * 2
    assert not Decision.objects.exists()
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"


def test_an_answer_with_an_override_is_refused_recorded_and_comes_back_as_typed(
    operator: Any,
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    checkpoint = _checkpoint(run)
    typed = f"Use the north depot {RLO}1N-COL"
    response = _client(operator).post(
        reverse("approvals-answer", args=[checkpoint.pk]), {"answer": typed}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in an answer" in body
    field = body[body.index('<textarea id="answer"') :]
    assert 'aria-invalid="true"' in field[: field.index(">")]
    assert f">{typed}</textarea>" in field
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == ["bidi_control"]
    assert not Decision.objects.exists() and "clarification.answered" not in types(run)
