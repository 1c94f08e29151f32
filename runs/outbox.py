"""The durable outbox: work committed with the transition that needs it, relayed after commit.

A writer (the authority, ``run_create``) calls ``put`` inside its transaction: the row is
committed with the event, and once the transaction commits the relay hands the run over.
A row's kind says how urgent it is: ``RESUME`` for a waiting run a person or an external
system just answered (an approval decided, a clarification answered, a callback
correlated), which the relay hands over ahead of queued work; ``ADVANCE`` for everything
else (a new run, a re-drive).
The relay is registered by the engine when the app is ready (``runs.apps``); writers know
nothing about who executes runs. A relay that could not hand a run over leaves its row
pending, and the sweeper re-arms pending rows (``rearm``), so a lost hand-over costs a
delay, never the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from fieldops.sql import Statement, param
from kernel import clock
from runs import rows
from runs.models import Outbox

log = logging.getLogger("fieldops.outbox")

# Written with every event that needs follow-up work: a prepared statement (fieldops/sql.py).
_PUT = Statement(
    "INSERT INTO runs_outbox (run_id, kind, created_at, attempts) VALUES (%s, %s, %s, 0) "
    "RETURNING id"
)
_CREATED_AT = Outbox._meta.get_field("created_at")

ADVANCE = "advance"
RESUME = "resume"

# The relay is told the run and, when it comes from ``put``, the row it hands over and its
# kind (so it need not look the run's pending rows up); from ``rearm``, None and None:
# every pending row, whose kinds it reads.
Relay = Callable[[str, int | None, str | None], object]
_relay: Relay | None = None


def register_relay(relay: Relay) -> None:
    """The one function that hands a run over after commit (the engine's executor)."""
    global _relay
    _relay = relay


def put(*, run_id: str, kind: str = ADVANCE) -> None:
    """Record that ``run_id`` needs ``kind`` and relay it when the transaction commits."""
    ((row_id,),) = _PUT.rows([rows.run_pk(run_id), kind, param(_CREATED_AT, clock.now())])
    transaction.on_commit(lambda: relay(run_id, int(row_id), kind))


def relay(run_id: str, row_id: int | None = None, kind: str | None = None) -> None:
    """Hand ``run_id`` over now (``row_id`` and ``kind``: the pending row this hand-over is
    for, or None for every pending row of the run); never raises (the row stays pending if
    nothing took it)."""
    if _relay is None:
        log.warning("no outbox relay registered; the sweeper will re-arm", extra={"run_id": run_id})
        return
    try:
        _relay(run_id, row_id, kind)
    except Exception:
        log.exception("relay failed; the sweeper re-arms the run", extra={"run_id": run_id})


def rearm(run_id: str) -> None:
    """The sweeper's hand-over of a run that should move (its message was lost, or its
    owner died): make sure a pending row says so, then relay it now."""
    if not Outbox.objects.filter(run_id=run_id, dispatched_at__isnull=True).exists():
        Outbox.objects.create(run_id=run_id, kind=ADVANCE, created_at=clock.now())
    relay(run_id)


def pending_run_ids(*, created_before: object, limit: int) -> list[str]:
    """Runs with a row no relay has delivered, created before ``created_before``."""
    rows = Outbox.objects.filter(dispatched_at__isnull=True, created_at__lt=created_before)
    return [str(r) for r in rows.values_list("run_id", flat=True)[:limit]]
