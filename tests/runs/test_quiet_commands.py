"""Commands people run for a report print the report, not the engine's JSON log lines,
unless asked with ``-v 2`` (issue 20: quiet commands)."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from fieldops.logs import JsonFormatter
from tests.helpers import make_run


class Terminal:
    """What a person running the command sees: its stdout and the log lines, in order.

    The suite's own stderr capture hides the configured console handler, so the log lines
    are collected by a handler with the same JSON formatter on the same logger."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter())

    def run(self, *args: str, verbosity: int = 1) -> str:
        self.stream.seek(0)
        self.stream.truncate()
        # replay and faultlab exit non-zero on findings; the output is what counts here
        with contextlib.suppress(SystemExit):
            call_command(*args, verbosity=verbosity, stdout=self.stream)
        return self.stream.getvalue()


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    """At the level a deployment logs at (FIELDOPS_LOG_LEVEL=INFO), not the suite's quiet one."""
    logger = logging.getLogger("fieldops")
    previous = logger.level
    logger.setLevel(logging.INFO)
    shown = Terminal()
    logger.addHandler(shown.handler)
    yield shown
    logger.removeHandler(shown.handler)
    logger.setLevel(previous)


def log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith('{"ts"')]


def test_faultlab_prints_its_table_alone_and_the_log_lines_with_v2(world, terminal):
    shown = terminal.run("faultlab", "reservation")
    assert "PASS reservation" in shown and "1 fixtures, 0 failed" in shown
    assert log_lines(shown) == []
    verbose = terminal.run("faultlab", "reservation", verbosity=2)
    assert "PASS reservation" in verbose
    assert any('"msg": "run.started"' in line for line in log_lines(verbose))


def test_replay_simulation_prints_its_comparison_alone(world, terminal):
    run = make_run("reservation")
    shown = terminal.run("replay", str(run.pk), "--mode", "simulation")
    assert "execution simulation of" in shown and "same disposition" in shown
    assert log_lines(shown) == []
    assert log_lines(terminal.run("replay", str(run.pk), "--mode", "simulation", verbosity=2))
    # The level the deployment configured is back after the command.
    assert logging.getLogger("fieldops").level == logging.INFO


def test_routing_eval_prints_its_report_alone(world, terminal):
    shown = terminal.run("routing_eval", "--registry", "fieldops", "--selector", "double")
    assert "end_to_end_accuracy" in shown
    assert log_lines(shown) == []
