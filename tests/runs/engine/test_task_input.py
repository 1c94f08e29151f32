"""A worker task takes an id from a broker message: anything else is refused with
one log line, not a failed task with a traceback, and nothing is written."""

from __future__ import annotations

import logging

import pytest

from runs.engine import tasks
from runs.models import Event, Run, WorkerHeartbeat

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "run_id",
    [
        "not-a-uuid",
        "a" * 10_000,
        "",
        "1; DROP TABLE runs_run",
        None,
        ["00000000-0000-0000-0000-000000000000"],
        12345678901234567890123456789012,  # a number, though its digits parse as a UUID's hex
    ],
)
def test_a_message_without_a_run_id_is_refused(world, caplog, run_id):
    with caplog.at_level(logging.WARNING, logger="fieldops.runner"):
        assert tasks.run_advance.run(run_id) == "MISSING"
    assert "is not a run id" in caplog.text
    assert not WorkerHeartbeat.objects.exists()
    assert not Run.objects.exists() and not Event.objects.exists()


def test_an_unknown_run_id_is_missing(world):
    assert tasks.run_advance.run("00000000-0000-0000-0000-000000000000") == "MISSING"


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("abc",), "refused: not a server id"),
        ((True,), "refused: not a server id"),
        ((999_999,), "refused: unknown_server"),
        ((1, "weird"), "refused: unknown trigger"),
    ],
)
def test_a_discovery_message_for_no_server_is_refused(world, caplog, args, answer):
    from catalog import tasks as catalog_tasks
    from catalog.models import Discovery

    with caplog.at_level(logging.WARNING, logger="fieldops.catalog"):
        assert catalog_tasks.tool_server_discover.run(*args) == answer
    assert "tool_server_discover refused" in caplog.text
    assert not Discovery.objects.exists()


def test_an_operation_message_without_an_operation_id_is_refused(world, caplog):
    from operations import tasks as operation_tasks

    with caplog.at_level(logging.WARNING, logger="fieldops.operations"):
        assert operation_tasks.operation_advance.run("not-a-uuid") == "missing"
    assert "is not an operation id" in caplog.text
