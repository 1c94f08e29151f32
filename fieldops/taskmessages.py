"""A worker checks every task message's shape before it accepts it.

Celery's consumer (the worker's main process) builds a request from each message before
any task code runs, and some malformed messages break it there: a body that is not
``[args, kwargs, embed]`` raises inside the consumer, which Celery treats as unrecoverable,
so the whole worker exits and the unacknowledged message goes back to the queue, to stop
the next worker that takes it (a crash loop). Arguments that do not fit the task's
signature reach the pool and fail with a ``TypeError`` traceback.

Every task of the project uses ``checked_strategy`` (``fieldops.celery.FieldOpsTask``): it
refuses such a message with one warning line on ``fieldops.worker`` and rejects it without
requeueing (the broker drops it), so the worker goes on serving the next message. The
values a task takes (an id that is not a run id, ...) are the task's own to check.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable
from typing import Any

from celery.utils.log import get_logger

log = logging.getLogger("fieldops.worker")
_celery_log = get_logger("celery.worker.strategy")  # where Celery logs a failed reject

SHOWN = 80  # characters of a refused value shown in the log line
REPR_MAX = 4096  # Celery's own producer cuts argsrepr and kwargsrepr near 1024
CANVAS = ("callbacks", "errbacks", "chain", "chord")


def message_problem(task: Any, message: Any) -> str:
    """Why ``message`` cannot be a call of ``task`` ("" when it can)."""
    headers = message.headers if isinstance(message.headers, dict) else {}
    if "task" not in headers:
        return "not a task message of protocol 2 (no task header)"
    if not isinstance(headers.get("id"), str) or not headers["id"]:
        return "no task id"
    for name in ("shadow", "argsrepr", "kwargsrepr"):  # written into the worker's log lines
        value = headers.get(name)
        if value is not None and not (isinstance(value, str) and len(value) <= REPR_MAX):
            return f"{name} is not text of at most {REPR_MAX} characters"
    # The project keeps deadlines in PostgreSQL and publishes no ETA, expiry or canvas: a
    # message with one was not written by it (an ETA message would sit in a worker's memory
    # and come back from Redis after every visibility timeout).
    for name in ("eta", "expires"):
        if headers.get(name) is not None:
            return f"the project sends no {name}"
    limits = headers.get("timelimit")
    if limits is not None and not (
        isinstance(limits, (list, tuple))
        and len(limits) == 2
        and all(_number_or_none(limit) for limit in limits)
    ):
        return "timelimit is not [hard, soft] seconds"
    try:
        body = message.payload
    except Exception as exc:  # any decoder's error: the body is unreadable, say which
        return f"unreadable body ({message.content_type}): {type(exc).__name__}"
    if not (isinstance(body, (list, tuple)) and len(body) == 3):
        return "the body is not [args, kwargs, options]"
    args, kwargs, options = body
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        return "the body's args are not a list, or its kwargs not an object"
    if options is not None and not isinstance(options, dict):
        return "the body's options are not an object"
    canvas = [k for k in CANVAS if (options or {}).get(k)]
    if canvas:
        return f"the project sends no {', '.join(canvas)}"
    try:
        _signature(task).bind(*args, **kwargs)
    except TypeError as exc:
        return f"arguments do not fit {task.name}: {exc}"
    return ""


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


_signatures: dict[str, inspect.Signature] = {}


def _signature(task: Any) -> inspect.Signature:
    if task.name not in _signatures:
        _signatures[task.name] = inspect.signature(task.run)
    return _signatures[task.name]


def checked_strategy(task: Any, app: Any, consumer: Any, **options: Any) -> Callable[..., Any]:
    """Celery's default strategy for ``task``, behind ``message_problem``."""
    from celery.worker.strategy import default as default_strategy  # the worker's side only

    handle = default_strategy(task, app, consumer, **options)
    connection_errors = consumer.connection_errors

    def on_message(
        message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kw: Any
    ) -> Any:
        problem = message_problem(task, message)
        if not problem:
            return handle(message, body, ack, reject, callbacks, **kw)
        task_id = message.headers.get("id") if isinstance(message.headers, dict) else None
        log.warning(
            "task message refused: %s [%s]: %s",
            task.name,
            str(task_id)[:SHOWN],
            problem[:200],
        )
        reject(_celery_log, connection_errors, False)  # not requeued: the broker drops it
        return None

    return on_message


def canonical_id(value: object) -> str | None:
    """A task's id argument as the outbox writes it (a UUID's canonical text), or None when
    it is none: ids travel as text, so a number whose digits happen to parse is refused."""
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
