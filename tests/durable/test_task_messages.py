"""A malformed task message on the broker (a buggy producer, an old version of the code,
someone with access to Redis) is refused by a real worker with one log line, dropped from
the queue, and changes nothing; the worker goes on serving good messages.

Before fieldops/taskmessages.py a body that was not ``[args, kwargs, options]`` stopped the
whole worker ("Unrecoverable error") and went back to the queue to stop the next one, and
arguments that did not fit a task's signature failed in the pool with a traceback."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import redis
from kombu import Producer

from runs import services
from runs.models import Event, Run, WorkerHeartbeat
from tests.durable.conftest import REDIS_URL
from tests.durable.helpers import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.postgres]


def _headers(task: str, **changes: Any) -> dict[str, Any]:
    task_id = str(uuid.uuid4())
    headers = {
        "lang": "py",
        "task": task,
        "id": task_id,
        "root_id": task_id,
        "parent_id": None,
        "group": None,
        "retries": 0,
        "timelimit": [None, None],
        "argsrepr": "",
        "kwargsrepr": "",
        "origin": "test",
    }
    headers.update(changes)
    return {k: v for k, v in headers.items() if v is not DROP}


DROP = object()
ADVANCE = "runs.tasks.run_advance"
HEARTBEAT = "runs.tasks.heartbeat"

# (what is wrong, body, content type, headers); each is refused before any task code runs.
MALFORMED: list[tuple[str, Any, str, dict[str, Any]]] = [
    ("body a string", json.dumps("hello"), "application/json", _headers(ADVANCE)),
    ("body a number", json.dumps(5), "application/json", _headers(ADVANCE)),
    ("args an object", json.dumps([{"a": 1}, {}, {}]), "application/json", _headers(ADVANCE)),
    ("kwargs a list", json.dumps([[], [1], {}]), "application/json", _headers(ADVANCE)),
    ("not JSON", "{{{", "application/json", _headers(ADVANCE)),
    ("pickle", b"\x80\x04K\x01.", "application/x-python-serialize", _headers(ADVANCE)),
    ("no argument", json.dumps([[], {}, {}]), "application/json", _headers(ADVANCE)),
    ("two arguments", json.dumps([["a", "b"], {}, {}]), "application/json", _headers(ADVANCE)),
    (
        "an extra keyword",
        json.dumps([[str(uuid.uuid4())], {"tenant": "south"}, {}]),
        "application/json",
        _headers(ADVANCE),
    ),
    (
        "arguments to the heartbeat",
        json.dumps([[1], {}, {}]),
        "application/json",
        _headers(HEARTBEAT),
    ),
    ("no task id", json.dumps([[], {}, {}]), "application/json", _headers(HEARTBEAT, id=DROP)),
    (
        "time limit text",
        json.dumps([[], {}, {}]),
        "application/json",
        _headers(HEARTBEAT, timelimit="x"),
    ),
    (
        "an ETA in 9999",
        json.dumps([[], {}, {}]),
        "application/json",
        _headers(HEARTBEAT, eta="9999-12-31T23:59:59+00:00"),
    ),
    (
        "a garbage expiry",
        json.dumps([[], {}, {}]),
        "application/json",
        _headers(HEARTBEAT, expires={}),
    ),
    (
        "a huge argsrepr",
        json.dumps([[], {}, {}]),
        "application/json",
        _headers(HEARTBEAT, argsrepr="x" * 10**5),
    ),
    (
        "garbage callbacks",
        json.dumps([[], {}, {"callbacks": "x", "chain": 5}]),
        "application/json",
        _headers(HEARTBEAT),
    ),
    (
        "protocol 1",
        json.dumps({"task": ADVANCE, "id": "x", "args": 5, "kwargs": []}),
        "application/json",
        {},
    ),
]

# Well-formed messages whose values are not ids: the task itself refuses them.
NOT_IDS: list[tuple[str, list[Any]]] = [
    (ADVANCE, ["not-a-uuid"]),
    (ADVANCE, ["x" * 100_000]),
    (ADVANCE, ["1; DROP TABLE runs_run"]),
    (ADVANCE, ["\u202e" + str(uuid.uuid4())]),
    (ADVANCE, [None]),
    (ADVANCE, [{"run_id": str(uuid.uuid4())}]),
    (ADVANCE, [12345678901234567890123456789012]),  # 32 digits: they parse as a UUID's hex
    ("operations.tasks.operation_advance", [12345678901234567890123456789012]),
    ("catalog.tasks.tool_server_discover", ["abc"]),
    ("catalog.tasks.tool_server_discover", [1, ["schedule"]]),
]


def _publish(queue: str, body: Any, content_type: str, headers: dict[str, Any]) -> None:
    from fieldops.celery import app

    with app.connection_for_write() as connection:
        Producer(connection.default_channel).publish(
            body,
            exchange="",
            routing_key=queue,
            content_type=content_type,
            content_encoding="utf-8" if isinstance(body, str) else "binary",
            headers=headers,
            serializer=None,
        )


def _log_lines(path: Any, needle: str, count: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [line for line in path.read_text().splitlines() if needle in line]
        if len(lines) >= count:
            return lines
        time.sleep(0.2)
    raise AssertionError(f"{len(lines)} of {count} {needle!r} lines:\n" + path.read_text()[-3000:])


def test_malformed_task_messages_are_refused_once_and_the_worker_serves_on(cluster, tmp_path):
    from fieldops.celery import app

    cluster.log_dir = tmp_path
    worker = cluster.start_worker()
    log = next(tmp_path.glob("w0-*.log"))
    for _, body, content_type, headers in MALFORMED:
        _publish(cluster.queue, body, content_type, headers)
    for name, args in NOT_IDS:
        app.send_task(name, args=args, queue=cluster.queue)

    refused = _log_lines(log, "task message refused", len(MALFORMED))
    _log_lines(log, " refused: ", len(NOT_IDS) + len(MALFORMED))
    assert len(refused) == len(MALFORMED), refused  # one line each
    assert not Run.objects.exists() and not Event.objects.exists()
    assert not WorkerHeartbeat.objects.exists()  # no task ran, not even the heartbeat

    run = services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", namespace="faultlab"
    )
    assert wait_for(run, ["WAITING_HUMAN"], sweep=False).state == "WAITING_HUMAN"
    assert worker.poll() is None, "the worker stopped"
    text = log.read_text()
    assert "Traceback" not in text and "Unrecoverable" not in text, text[-3000:]
    broker = redis.Redis.from_url(REDIS_URL)
    assert broker.llen(cluster.queue) == 0  # nothing left to redeliver ...
    assert broker.hlen("unacked") == 0  # ... nor held unacknowledged (the ETA one)
