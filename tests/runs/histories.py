"""Long, valid run histories built in bulk (the domain's own build_event/apply)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from kernel import clock
from runs import event_rows, services
from runs.authority import snapshot_of
from runs.domain.events import apply, build_event
from runs.domain.states import Actor, EventType, State
from runs.models import Event, Evidence, Run

CYCLE = (
    (EventType.OBSERVATION_RECORDED, Actor.HARNESS, State.DECIDING, None),
    (EventType.PROPOSAL_EMITTED, Actor.MODEL, State.VALIDATING, {"turns": 1, "proposals": 1}),
    (EventType.PROPOSAL_ALLOWED, Actor.HARNESS, State.EXECUTING, {"actions": 1}),
    (EventType.OBSERVATION_RECEIVED, Actor.CAPABILITY_ADAPTER, State.OBSERVING, None),
)


# Control events a long history can carry (state unchanged), in turn: a refused transition
# ("rejected" in the timeline) and a deduplicated callback (control, not rejected).
CONTROL = (
    (EventType.TRANSITION_REJECTED, "illegal_transition", {"attempted": "approval.granted"}),
    (EventType.DUPLICATE_DEDUPLICATED, "duplicate_callback", {"first_outcome": "accepted"}),
)


def long_run(
    count: int,
    alter: dict[int, dict[str, Any]] | None = None,
    *,
    control_at: frozenset[int] = frozenset(),
) -> Run:
    """A run with a valid, hash-linked history of ``count`` events, every reference to
    evidence stored for it (one evidence row per 50 events: each chunk looks its own up).
    ``alter``: stored columns to change, by sequence, after the event was built (the
    table is append-only, so a corrupt row is stored corrupt). ``control_at``: sequences
    that are control events instead (alternately rejected and deduplicated, see CONTROL);
    the cycle of transitions goes on after them."""
    run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref="user:operator",
        limits={"turns": 10**6, "proposals": 10**6, "actions": 10**6},
        start=False,
    )
    now = clock.now()
    evidence_ids = [f"ev-{uuid.uuid4().hex[:20]}" for _ in range(count // 50 + 1)]
    Evidence.objects.bulk_create(
        Evidence(
            id=i,
            run=run,
            kind="observation",
            content={"n": n},
            content_hash="0" * 64,
            size=8,
            created_at=now,
        )
        for n, i in enumerate(evidence_ids)
    )
    snapshot = snapshot_of(run)
    rows = []
    step = 0  # position in the cycle of transitions (control events do not advance it)
    controls = 0
    for i in range(count):
        refs: dict[str, str]
        payload: dict[str, Any] = {"i": i}
        reason = "ok"
        if i == 0:
            etype, actor, target, delta = (
                EventType.RUN_STARTED,
                Actor.HARNESS,
                State.OBSERVING,
                None,
            )
            refs = {"observation": f"rq-{run.pk.hex[:20]}"}  # stored by run_create
        elif i + 1 in control_at:
            etype, reason, payload = CONTROL[controls % 2]
            actor, target, delta, refs = Actor.HARNESS, snapshot.state, None, {}
            controls += 1
        else:
            etype, actor, target, delta = CYCLE[step % 4]
            step += 1
            refs = {"observation": evidence_ids[i // 50]}
        event = build_event(
            snapshot,
            event_id=str(uuid.uuid4()),
            type=etype,
            actor=actor,
            next_state=target,
            occurred_at=clock.iso(run.created_at + dt.timedelta(milliseconds=i + 1)),
            counters_delta=delta,
            elapsed_ms=i + 1,
            reason_code=reason,
            refs=refs,
            payload=payload,
        )
        snapshot = apply(snapshot, event)
        rows.append(Event(**{**event_rows.model_fields(event), **(alter or {}).get(i + 1, {})}))
    Event.objects.bulk_create(rows, batch_size=1000)
    Run.objects.filter(pk=run.pk).update(**event_rows.run_state(snapshot), updated_at=clock.now())
    run.refresh_from_db()
    return run
