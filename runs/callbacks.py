"""Correlated external callbacks for WAITING_EXTERNAL runs (SPEC §1 Waits).

A callback advances a run only when it matches an open correlation record for the run's
current attempt and owner epoch. Everything else is recorded and changes nothing: an
orphan (no record), an old epoch, a duplicate delivery, and a callback after the run ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from kernel import clock, retry
from kernel.canonical import digest
from runs import authority, evidence
from runs.domain.states import Actor, EventType, State, is_terminal
from runs.models import CallbackReceipt, Correlation, Run

OUTCOMES = (
    "accepted",
    "orphaned",
    "old_epoch",
    "duplicate",
    "delivery_id_reused",
    "post_terminal",
    "wrong_state",
    "unexpected_type",
)


@dataclass(frozen=True)
class CallbackOutcome:
    outcome: str
    run_id: str = ""
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.outcome == "accepted"


def callback_receive(
    *,
    delivery_id: str,
    correlation_id: str,
    attempt: int,
    owner_epoch: int,
    response_type: str,
    payload: Mapping[str, Any],
) -> CallbackOutcome:
    """Record one delivery and admit it if (and only if) it is correlated and current."""
    payload_digest = digest(dict(payload))
    prior = CallbackReceipt.objects.filter(delivery_id=delivery_id).first()
    if prior is not None:
        # The same delivery again is a duplicate; the id reused for another callback (other
        # content or record) is not: that callback was dropped, and its sender must know.
        same = (prior.payload_digest, prior.correlation_id) == (payload_digest, correlation_id)
        if prior.run_id:
            authority.append_control(
                run_id=str(prior.run_id),
                type=EventType.DUPLICATE_DEDUPLICATED,
                actor=Actor.HARNESS,
                reason_code="duplicate_callback" if same else "delivery_id_reused",
                refs={"correlation": prior.correlation_id},
                payload={"delivery_id": delivery_id, "first_outcome": prior.outcome},
            )
        if not same:
            return CallbackOutcome(
                "delivery_id_reused",
                str(prior.run_id or ""),
                "this delivery_id was used before for a different callback; nothing of this "
                "one was recorded: send it with its own delivery_id",
            )
        return CallbackOutcome("duplicate", str(prior.run_id or ""), prior.outcome)
    correlation = Correlation.objects.select_related("run").filter(pk=correlation_id).first()
    if correlation is None:
        return _receipt(
            delivery_id, correlation_id, None, "orphaned", payload_digest, "no correlation record"
        )
    run = correlation.run
    if is_terminal(run.state):
        result = authority.append(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.EXTERNAL_OBSERVED,
            actor=Actor.RESOURCE_SERVICE,
            reason_code="callback",
            refs={"correlation": correlation.pk},
            payload={"delivery_id": delivery_id},
        )
        assert not result.applied
        return _receipt(
            delivery_id, correlation_id, run, "post_terminal", payload_digest, f"run is {run.state}"
        )
    if (attempt, owner_epoch) != (correlation.attempt, correlation.owner_epoch) or (
        correlation.status != "OPEN"
    ):
        authority.append_control(
            run_id=str(run.pk),
            type=EventType.STALE_OWNER_REJECTED,
            actor=Actor.HARNESS,
            reason_code="callback_old_epoch",
            refs={"correlation": correlation.pk},
            payload={
                "delivery_id": delivery_id,
                "attempt": attempt,
                "owner_epoch": owner_epoch,
                "expected": [correlation.attempt, correlation.owner_epoch],
                "correlation_status": correlation.status,
            },
        )
        return _receipt(
            delivery_id,
            correlation_id,
            run,
            "old_epoch",
            payload_digest,
            "callback for an old attempt or epoch",
        )
    if response_type != correlation.expected_response_type:
        authority.append_control(
            run_id=str(run.pk),
            type=EventType.CALLBACK_ORPHANED,
            actor=Actor.HARNESS,
            reason_code="unexpected_response_type",
            refs={"correlation": correlation.pk},
            payload={"delivery_id": delivery_id, "response_type": response_type[:64]},
        )
        return _receipt(
            delivery_id,
            correlation_id,
            run,
            "unexpected_type",
            payload_digest,
            f"expected {correlation.expected_response_type}",
        )
    if run.state not in correlation.allowed_states or run.waiting_correlation != correlation.pk:
        authority.append_control(
            run_id=str(run.pk),
            type=EventType.TRANSITION_REJECTED,
            actor=Actor.HARNESS,
            reason_code="callback_wrong_state",
            refs={"correlation": correlation.pk},
            payload={"delivery_id": delivery_id, "state": run.state},
        )
        return _receipt(
            delivery_id, correlation_id, run, "wrong_state", payload_digest, f"run is {run.state}"
        )
    return _admit(run, correlation, delivery_id, response_type, payload, payload_digest)


def _admit(
    run: Run,
    correlation: Correlation,
    delivery_id: str,
    response_type: str,
    payload: Mapping[str, Any],
    payload_digest: str,
) -> CallbackOutcome:
    observation = evidence.store(
        run_id=str(run.pk),
        kind="callback",
        content={
            "capability": "external",
            "ok": True,
            "error": "",
            "data": {"response_type": response_type, "payload": dict(payload)},
            "observed_at": clock.iso(clock.now()),
        },
    )

    def attempt() -> CallbackOutcome | None:
        run.refresh_from_db()
        try:
            with transaction.atomic():
                CallbackReceipt.objects.create(
                    delivery_id=delivery_id,
                    correlation_id=correlation.pk,
                    run=run,
                    outcome="accepted",
                    payload_digest=payload_digest,
                    received_at=clock.now(),
                )

                def within(row: Run, event: Any) -> None:
                    Correlation.objects.filter(pk=correlation.pk).update(status="CONSUMED")

                result = authority.append(
                    run_id=str(run.pk),
                    expected_revision=run.revision,
                    expected_epoch=None,
                    type=EventType.EXTERNAL_OBSERVED,
                    actor=Actor.RESOURCE_SERVICE,
                    reason_code="correlated",
                    refs={"correlation": correlation.pk, "observation": observation},
                    payload={"delivery_id": delivery_id},
                    within=within,
                    advance_after=True,
                )
                if not result.applied:
                    transaction.set_rollback(True)
        except IntegrityError:
            return CallbackOutcome("duplicate", str(run.pk), "concurrent delivery")
        if result.applied:
            return CallbackOutcome("accepted", str(run.pk))
        run.refresh_from_db()
        if run.state != State.WAITING_EXTERNAL.value:
            return callback_receive(
                delivery_id=delivery_id,
                correlation_id=correlation.pk,
                attempt=correlation.attempt,
                owner_epoch=correlation.owner_epoch,
                response_type=response_type,
                payload=payload,
            )
        return None

    outcome = retry.until_settled(attempt, what=f"accept callback {delivery_id}")
    if isinstance(outcome, CallbackOutcome):
        return outcome
    return CallbackOutcome("wrong_state", str(run.pk), "the run kept changing")


def _receipt(
    delivery_id: str,
    correlation_id: str,
    run: Run | None,
    outcome: str,
    payload_digest: str,
    detail: str,
) -> CallbackOutcome:
    try:
        CallbackReceipt.objects.create(
            delivery_id=delivery_id,
            correlation_id=correlation_id,
            run=run,
            outcome=outcome,
            payload_digest=payload_digest,
            received_at=clock.now(),
        )
    except IntegrityError:
        return CallbackOutcome("duplicate", str(run.pk) if run else "", detail)
    return CallbackOutcome(outcome, str(run.pk) if run else "", detail)
