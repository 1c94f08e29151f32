"""Where operations are processed: on the Celery workers, or in this process.

The operation row is the durable work (a running operation with pending items); a hand-over
is only a nudge. Celery: publish one ``operation_advance`` task (one batch; it re-publishes
itself while items remain). In-process (the embedded default): drain the operation in a
background thread of this process, so the page that started it can watch it move. A lost
nudge (broker down, process killed) costs a delay: the sweep re-hands running operations
nobody progressed.
"""

from __future__ import annotations

import logging
import threading

from django.db import connection

from runs.engine import executor as run_executor

log = logging.getLogger("fieldops.operations")


def kick(operation_id: str) -> None:
    """Hand ``operation_id`` over now; never raise (the sweep re-hands it)."""
    try:
        mode = run_executor.mode()
        if mode == "deferred":
            return
        if mode == "celery":
            from operations import tasks

            tasks.operation_advance.apply_async(args=[operation_id])
            return
        threading.Thread(
            target=_drain_here,
            args=(operation_id,),
            name=f"operation-{operation_id[:8]}",
            daemon=True,
        ).start()
    except Exception:
        log.exception(
            "operation hand-over failed; the sweep re-hands it", extra={"operation": operation_id}
        )


def _drain_here(operation_id: str) -> None:
    from operations import services

    try:
        services.operation_drain(operation_id=operation_id)
    except Exception:
        log.exception(
            "operation batch failed; the sweep re-hands it", extra={"operation": operation_id}
        )
    finally:
        connection.close()
