"""Structured logs: one JSON object per line, carrying run id, attempt, epoch and sequence
when the caller passes them as ``extra``. Secret-looking keys are never logged, and
configured secret values are redacted from every line (``fieldops.secrets.redact``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fieldops import secrets

RUN_FIELDS = (
    "run_id",
    "attempt",
    "owner_epoch",
    "sequence",
    "event_type",
    "worker",
    "reason_code",
    "state",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in RUN_FIELDS:
            if hasattr(record, key):
                payload[key] = getattr(record, key)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        # A configured secret never reaches a log line, even inside an exception message.
        return secrets.redact(json.dumps(payload, default=str))


def run_extra(run: Any, **more: Any) -> dict[str, Any]:
    """Return the ``extra`` mapping for a log line about ``run`` (a Run or snapshot)."""
    extra = {
        "run_id": str(getattr(run, "run_id", getattr(run, "pk", ""))),
        "attempt": getattr(run, "attempt", None),
        "owner_epoch": getattr(run, "owner_epoch", None),
        "sequence": getattr(run, "revision", None),
        "state": str(getattr(run, "state", "")),
    }
    extra.update(more)
    return extra


@contextmanager
def report_verbosity(verbosity: int) -> Iterator[None]:
    """Keep FieldOps' JSON log lines out of a command's report unless ``-v 2`` or more.

    The report (a table people read) goes to stdout and the log lines to stderr, so in a
    terminal they interleave: below verbosity 2 the ``fieldops`` loggers are silenced for
    the command's duration (a failure still raises and prints); 2 keeps the configured
    level and 3 shows DEBUG."""
    logger = logging.getLogger("fieldops")
    previous = logger.level
    if verbosity < 2:
        logger.setLevel(logging.CRITICAL + 1)
    elif verbosity >= 3:
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.setLevel(previous)
