"""Every rejection the spec says to record, provoked over HTTP as an attacker would: refused
with a clear message, recorded exactly once, and nothing else changed.

"Recorded" is the spec's and docs' record for each: a refused decision is a row of the
refusal log (``DecisionRefusal``), plus a control event on the run's timeline unless the
person had no standing to decide (an outsider must not grow a run's history: SPEC §4,
docs/approvals.md); a callback that passed authentication is a receipt plus, for a known
run, one control event (docs/callbacks.md); an unauthenticated one records nothing.
"Nothing else changed": every other table is as it was, and the run keeps its state,
counters and disposition (a control event only moves its revision and hash link).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from api.tokens import token_create
from approvals.models import Checkpoint, DecisionRefusal
from kernel import clock
from runs import services
from runs.api import sign
from runs.models import CallbackReceipt, Correlation, Event, Run
from tests.security.world import World, snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# What a control event may change on its run (the append itself).
APPEND_FIELDS = {"revision", "last_hash", "event_bytes", "updated_at"}
RUN_FIELDS = [f.name for f in Run._meta.fields if f.name not in APPEND_FIELDS]


def _run_row(run_id: str) -> dict[str, Any]:
    """The run's fields a rejection must leave alone. A run that has not ended measures its
    elapsed time at every append (time passed); an ended one keeps the time of its end."""
    row = Run.objects.filter(pk=run_id).values(*RUN_FIELDS).get()
    if not row["disposition"]:
        row["counters"] = {k: v for k, v in row["counters"].items() if k != "elapsed_ms"}
    return row


def _counts() -> dict[str, int]:
    return {label: count for label, (count, _) in snapshot().items()}


class Recorder:
    """Snapshot before a request; then check exactly which records it added."""

    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id
        self.before = snapshot()
        self.run = _run_row(run_id) if run_id else None
        self.events = Event.objects.count()
        self.refusals = DecisionRefusal.objects.count()
        self.receipts = CallbackReceipt.objects.count()

    def added(
        self,
        *,
        events: Mapping[str, int] | None = None,
        refusals: Mapping[str, int] | None = None,
        receipts: Mapping[str, int] | None = None,
    ) -> None:
        events, refusals, receipts = events or {}, refusals or {}, receipts or {}
        new_events = list(
            Event.objects.order_by("pk")[self.events :].values_list("type", "reason_code")
        )
        got_events: dict[str, int] = {}
        for type_, reason in new_events:
            key = f"{type_}/{reason}"
            got_events[key] = got_events.get(key, 0) + 1
        assert got_events == dict(events), f"events added: {got_events}"
        got_refusals: dict[str, int] = {}
        for code in DecisionRefusal.objects.order_by("pk")[self.refusals :].values_list(
            "code", flat=True
        ):
            got_refusals[code] = got_refusals.get(code, 0) + 1
        assert got_refusals == dict(refusals), f"refusals recorded: {got_refusals}"
        got_receipts: dict[str, int] = {}
        for outcome in CallbackReceipt.objects.order_by("pk")[self.receipts :].values_list(
            "outcome", flat=True
        ):
            got_receipts[outcome] = got_receipts.get(outcome, 0) + 1
        assert got_receipts == dict(receipts), f"receipts recorded: {got_receipts}"
        after = snapshot()
        allowed = {"api.ApiToken"}  # a token's last use
        if events:
            allowed |= {"runs.Event", "runs.Run"}
        if refusals:
            allowed.add("approvals.DecisionRefusal")
        if receipts:
            allowed.add("runs.CallbackReceipt")
        other = sorted(t for t in after if after[t] != self.before[t] and t not in allowed)
        assert not other, f"the rejection also changed {other}"
        if self.run_id:
            now = _run_row(self.run_id)
            assert self.run is not None
            moved = {k: (self.run[k], now[k]) for k in now if now[k] != self.run[k]}
            assert not moved, f"the run itself changed: {moved}"


def _client(world: World, principal: str) -> Client:
    """A signed-in client; make it before the Recorder (signing in writes last_login)."""
    return world.client(principal, raise_request_exception=False)


def _decide(client: Client, checkpoint_id: str, **body: str) -> Any:
    data = {"verdict": "approve", "reason": "looks right", **body}
    return client.post(reverse("approvals-decide", args=[checkpoint_id]), data)


def _page(response: Any) -> str:
    return response.content.decode()


# -- decisions over the console ------------------------------------------------------
def test_a_decision_on_a_tampered_hash_is_refused_and_recorded_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = _client(sworld, "approver")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash="0" * 64)
    assert response.status_code == 409
    assert "hash" in _page(response).lower()
    rec.added(refusals={"hash_mismatch": 1}, events={"decision.refused/hash_mismatch": 1})


def test_self_approval_is_refused_and_recorded_in_the_refusal_log_only(sworld: World) -> None:
    checkpoint = sworld.checkpoint("lead_approval")
    client = _client(sworld, "lead")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 403
    assert "requested" in _page(response).lower()
    rec.added(refusals={"self_approval": 1})


@pytest.mark.parametrize("principal", ["operator", "catalog_admin"])
def test_a_decision_without_the_approver_role_is_refused_and_recorded(
    sworld: World, principal: str
) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = _client(sworld, principal)
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 403
    assert "approver" in _page(response).lower()
    rec.added(refusals={"not_an_approver": 1})


def test_a_used_approval_cannot_be_used_again_and_the_attempt_is_recorded(sworld: World) -> None:
    checkpoint = sworld.checkpoint("decided")
    assert checkpoint.status == Checkpoint.Status.USED
    client = _client(sworld, "approver")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 409
    rec.added(
        refusals={"already_decided": 1},
        events={"late_approval.rejected/already_decided": 1},
    )


def test_a_stale_approval_after_expiry_is_recorded_as_late_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    clock.advance((checkpoint.expires_at - clock.now()).total_seconds() + 1)
    client = _client(sworld, "approver")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 409
    assert "expired" in _page(response).lower()
    rec.added(
        refusals={"checkpoint_expired": 1},
        events={"late_approval.rejected/checkpoint_expired": 1},
    )


def test_an_approval_of_a_cancelled_run_is_recorded_as_late_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    services.run_cancel(run_id=str(checkpoint.run_id), by_ref="user:operator", reason="stop")
    client = _client(sworld, "approver")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 409
    assert "cancel" in _page(response).lower()
    rec.added(
        refusals={"run_cancelled": 1},
        events={"late_approval.rejected/run_cancelled": 1},
    )


def test_another_tenants_decision_is_404_and_records_nothing(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = _client(sworld, "outsider")
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 404
    rec.added()


def test_a_decision_without_a_csrf_token_is_refused_and_records_nothing(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = Client(enforce_csrf_checks=True)
    client.force_login(sworld.users["approver"])
    rec = Recorder(str(checkpoint.run_id))
    response = _decide(client, checkpoint.pk, seen_hash=checkpoint.proposal_hash)
    assert response.status_code == 403
    rec.added()


# -- clarification answers -------------------------------------------------------------
@pytest.mark.parametrize("principal", ["approver", "lead"])
def test_an_answer_by_someone_other_than_the_requester_is_refused_and_recorded(
    sworld: World, principal: str
) -> None:
    """The page says the refusal was recorded: it must be (in the refusal log only: the
    person had no standing, so the run's history does not grow)."""
    checkpoint = sworld.checkpoint("clarification")
    client = _client(sworld, principal)
    rec = Recorder(str(checkpoint.run_id))
    response = client.post(reverse("approvals-answer", args=[checkpoint.pk]), {"answer": "LOC-N1"})
    assert response.status_code == 403
    assert "requested the run" in _page(response)
    rec.added(refusals={"not_requester": 1})


def test_an_empty_answer_is_refused_and_recorded_as_the_page_says(sworld: World) -> None:
    checkpoint = sworld.checkpoint("clarification")
    client = _client(sworld, "operator")
    rec = Recorder(str(checkpoint.run_id))
    response = client.post(reverse("approvals-answer", args=[checkpoint.pk]), {"answer": "  "})
    assert response.status_code == 400
    assert "answer is required" in _page(response)
    rec.added(refusals={"answer_required": 1}, events={"decision.refused/answer_required": 1})


def test_a_decision_sent_to_the_other_kind_of_checkpoint_is_recorded_as_the_page_says(
    sworld: World,
) -> None:
    """An approval sent to a question, and an answer sent to an approval: refused, and the
    page says "recorded" beside the code, so the refusal log has them (not the timeline:
    anyone of the tenant may send them)."""
    question = sworld.checkpoint("clarification")
    approval = sworld.checkpoint("approval")
    approver, operator = _client(sworld, "approver"), _client(sworld, "operator")
    rec = Recorder(None)
    approved = _decide(approver, question.pk, seen_hash="0" * 64)
    answered = operator.post(reverse("approvals-answer", args=[approval.pk]), {"answer": "x"})
    assert approved.status_code == answered.status_code == 400
    assert "answer it instead of approving" in _page(approved)
    assert "approve or decline it instead of answering" in _page(answered)
    for response in (approved, answered):
        assert ", recorded)" in _page(response)
    rec.added(refusals={"not_an_approval": 1, "not_a_question": 1})


# -- decisions over the JSON API -------------------------------------------------------
def _api_decide(world: World, principal: str, checkpoint_id: str, seen_hash: str) -> Any:
    _, secret = token_create(user=world.users[principal], name="rejections")
    body = {"verdict": "approve", "seen_hash": seen_hash, "reason": "api"}
    return Client().post(
        f"/api/v1/checkpoints/{checkpoint_id}/decision",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


def test_the_api_refuses_and_records_a_tampered_hash_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    _, secret = token_create(user=sworld.users["approver"], name="rejections")
    rec = Recorder(str(checkpoint.run_id))
    response = Client().post(
        f"/api/v1/checkpoints/{checkpoint.pk}/decision",
        json.dumps({"verdict": "approve", "seen_hash": "f" * 64, "reason": "api"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 409 and response.json()["code"] == "hash_mismatch"
    rec.added(refusals={"hash_mismatch": 1}, events={"decision.refused/hash_mismatch": 1})


def test_the_api_refuses_and_records_self_approval_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("lead_approval")
    _, secret = token_create(user=sworld.users["lead"], name="rejections")
    rec = Recorder(str(checkpoint.run_id))
    response = Client().post(
        f"/api/v1/checkpoints/{checkpoint.pk}/decision",
        json.dumps({"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "x"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 403 and response.json()["code"] == "self_approval"
    rec.added(refusals={"self_approval": 1})


# -- cancellation of an ended run ------------------------------------------------------
def test_cancelling_an_ended_run_is_refused_and_recorded_once(sworld: World) -> None:
    run_id = sworld.runs["completed"]
    client = _client(sworld, "operator")
    rec = Recorder(run_id)
    response = client.post(reverse("runs-cancel", args=[run_id]), {"reason": "too late"})
    assert response.status_code == 409
    rec.added(events={"transition.rejected/run_terminal": 1})


# -- callbacks -------------------------------------------------------------------------
def _callback(body: dict[str, Any], *, key: str | None = None) -> Any:
    raw = json.dumps(body).encode()
    ts = str(int(time.time()))
    return Client().post(
        reverse("api-callback"),
        raw,
        content_type="application/json",
        HTTP_X_FIELDOPS_TIMESTAMP=ts,
        HTTP_X_FIELDOPS_SIGNATURE=sign(raw, ts, key),
    )


def _callback_body(run: Run, **over: Any) -> dict[str, Any]:
    correlation = Correlation.objects.get(pk=run.waiting_correlation)
    return {
        "delivery_id": f"d-{run.pk.hex[:12]}",
        "correlation_id": correlation.pk,
        "attempt": correlation.attempt,
        "owner_epoch": correlation.owner_epoch,
        "response_type": correlation.expected_response_type,
        "payload": {"window": "08:00"},
        **over,
    }


def test_a_forged_callback_is_refused_and_records_nothing(sworld: World) -> None:
    run = sworld.run("external")
    rec = Recorder(str(run.pk))
    response = _callback(_callback_body(run), key="not-the-key")
    assert response.status_code == 401 and response.json()["error"] == "bad_signature"
    rec.added()


def test_a_duplicate_callback_is_recorded_once_per_delivery_and_changes_nothing(
    sworld: World,
) -> None:
    run = sworld.run("external")
    body = _callback_body(run)
    assert _callback(body).status_code == 202
    for _ in range(2):
        rec = Recorder(str(run.pk))
        again = _callback(body)
        assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
        rec.added(events={"duplicate.deduplicated/duplicate_callback": 1})


def test_a_callback_for_an_old_epoch_is_recorded_once(sworld: World) -> None:
    run = sworld.run("external")
    body = _callback_body(run)
    body["owner_epoch"] -= 1
    rec = Recorder(str(run.pk))
    response = _callback(body)
    assert response.status_code == 409 and response.json()["outcome"] == "old_epoch"
    rec.added(events={"stale_owner.rejected/callback_old_epoch": 1}, receipts={"old_epoch": 1})


def test_a_callback_of_the_wrong_type_is_recorded_once(sworld: World) -> None:
    run = sworld.run("external")
    rec = Recorder(str(run.pk))
    response = _callback(_callback_body(run, response_type="something.else"))
    assert response.status_code == 409 and response.json()["outcome"] == "unexpected_type"
    rec.added(
        events={"callback.orphaned/unexpected_response_type": 1},
        receipts={"unexpected_type": 1},
    )


def test_an_orphan_callback_is_kept_as_a_receipt_only(sworld: World) -> None:
    run = sworld.run("external")
    rec = Recorder(str(run.pk))
    response = _callback(_callback_body(run, correlation_id="co-nobody"))
    assert response.status_code == 404 and response.json()["outcome"] == "orphaned"
    rec.added(receipts={"orphaned": 1})


def test_a_callback_after_the_end_is_recorded_once_and_never_reopens(sworld: World) -> None:
    run = sworld.run("external")
    body = _callback_body(run)
    services.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="stop")
    rec = Recorder(str(run.pk))
    response = _callback(body)
    assert response.status_code == 409 and response.json()["outcome"] == "post_terminal"
    rec.added(
        events={"transition.rejected/post_terminal_callback": 1},
        receipts={"post_terminal": 1},
    )


def test_the_recorder_sees_a_change_it_was_not_told_of(sworld: World) -> None:
    rec = Recorder(sworld.runs["waiting"])
    services.run_cancel(run_id=sworld.runs["waiting"], by_ref="user:operator", reason="x")
    with pytest.raises(AssertionError):
        rec.added(events={"run.cancelled/cancelled_no_dispatch": 1})
    assert _counts()["runs.Event"] > 0


def test_a_delivery_id_reused_for_other_content_is_refused_not_taken_for_a_duplicate(
    sworld: World,
) -> None:
    """A sender that reuses a delivery id for another callback must not be told its callback
    arrived (200 duplicate): it was dropped. It is a 409 that says so, recorded once."""
    run = sworld.run("external")
    body = _callback_body(run)
    assert _callback(body).status_code == 202
    for changed in ({"payload": {"window": "14:00"}}, {"correlation_id": "co-other"}):
        rec = Recorder(str(run.pk))
        again = _callback({**body, **changed})
        assert again.status_code == 409, again.content
        assert again.json()["outcome"] == "delivery_id_reused"
        assert "different" in again.json()["detail"]
        rec.added(events={"duplicate.deduplicated/delivery_id_reused": 1})
    # The same content again is still the plain duplicate.
    assert _callback(body).json()["outcome"] == "duplicate"
