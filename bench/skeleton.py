"""The end-to-end baseline: a skeleton run is a chain of 30 no-op Celery tasks, each doing
one compare-and-set transition (UPDATE ... WHERE revision = %s plus a ~1 KB event INSERT,
one transaction) and enqueueing the next step after its commit.

Loaded into the benchmark's worker processes with ``celery worker --include bench.skeleton``,
so the skeleton runs on the same workers, broker, settings and database as FieldOps runs.
"""

from __future__ import annotations

import json
import uuid

from celery import shared_task
from django.db import connection, transaction

STEPS = 30
NOTE = "skeleton step: no policy, no capability, one compare-and-set transition. " * 12

_UPDATE = (
    "UPDATE runs_run SET revision = %s, state = %s, last_hash = %s, updated_at = now() "
    "WHERE id = %s AND revision = %s"
)
_INSERT = (
    "INSERT INTO runs_event (event_id, run_id, sequence, attempt, owner_epoch, type, actor, "
    "prev_state, next_state, contract_version, policy_version, component_set, budget, "
    "cancel_revision, reason_code, refs, payload, occurred_at, schema_version, prev_hash, "
    "content_hash, hash) VALUES (%s, %s, %s, 1, 1, 'skeleton.step', 'harness', 'OBSERVING', "
    "%s, 'skeleton', 'skeleton', 'skeleton', %s::jsonb, 0, 'ok', %s::jsonb, %s::jsonb, "
    "now()::text, 1, %s, %s, %s)"
)


@shared_task(name="bench.skeleton.step", acks_late=True, reject_on_worker_lost=True)
def step(run_id: str, n: int) -> None:
    """Transition ``run_id`` from revision n-1 to n; enqueue step n+1 after the commit."""
    state = "COMPLETED" if n == STEPS else "OBSERVING"
    link = uuid.uuid4().hex * 2
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_UPDATE, [n, state, link, run_id, n - 1])
        if cursor.rowcount != 1:
            return  # lost the compare-and-set: another delivery already moved it
        cursor.execute(
            _INSERT,
            [
                str(uuid.uuid4()),
                run_id,
                n,
                state,
                json.dumps({"turns": n, "proposals": n, "actions": n}),
                json.dumps({"observation": f"ev-{n:020d}"}),
                json.dumps({"step": n, "note": NOTE[:900]}),
                link,
                link,
                link,
            ],
        )
        if n < STEPS:
            transaction.on_commit(lambda: step.apply_async(args=[run_id, n + 1]))
