"""The embedded server's sweeper thread (``serve_embedded``) outlives any one failed sweep:
a sweep that raises, or a database connection that cannot be closed after it, is logged and
the thread sweeps again at the next interval (a dead thread would leave every interrupted
run stuck until the server restarts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from runs.engine import sweeper
from runs.management.commands import serve_embedded
from tests.deploy.servers import ROOT, WebProcess


@pytest.mark.parametrize("failing", ["sweep", "close"])
def test_the_sweeper_thread_survives_a_failed_sweep_or_close(monkeypatch, caplog, failing):
    swept = threading.Semaphore(0)
    calls = {"sweep": 0, "close": 0}

    def sweep() -> None:
        calls["sweep"] += 1
        swept.release()
        if failing == "sweep" and calls["sweep"] == 1:
            raise RuntimeError("the database went away")

    def close() -> None:
        calls["close"] += 1
        if failing == "close" and calls["close"] == 1:
            raise RuntimeError("the connection cannot be closed")

    monkeypatch.setattr(sweeper, "sweep", sweep)
    monkeypatch.setattr(sweeper, "sweeper_started", lambda: None)
    monkeypatch.setattr("operations.services.operation_sweep", lambda: None)
    monkeypatch.setattr(serve_embedded, "close_old_connections", close)
    stop = threading.Event()
    thread = threading.Thread(target=serve_embedded._sweep_forever, args=(stop, 0.01))
    thread.start()
    try:
        for _ in range(3):  # the failing sweep, then two more: the thread is still there
            assert swept.acquire(timeout=10), f"sweeps stopped after {calls}"
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert "sweep failed" in caplog.text


def test_the_sweeper_thread_records_its_start_then_sweeps_at_once(monkeypatch):
    """A server started again sweeps right away, not one interval later: the runs a killed
    predecessor held are handed over then (``tests/deploy/test_dead_owner.py``), and its
    start is recorded first, so /healthz says "starting" until that sweep reports."""
    calls: list[str] = []
    swept = threading.Event()

    def sweep() -> None:
        calls.append("sweep")
        swept.set()

    monkeypatch.setattr(sweeper, "sweep", sweep)
    monkeypatch.setattr(sweeper, "sweeper_started", lambda: calls.append("started"))
    monkeypatch.setattr("operations.services.operation_sweep", lambda: None)
    monkeypatch.setattr(serve_embedded, "close_old_connections", lambda: None)
    stop = threading.Event()
    thread = threading.Thread(target=serve_embedded._sweep_forever, args=(stop, 3600.0))
    thread.start()
    try:
        assert swept.wait(timeout=10), "no sweep at start: the first came an interval later"
    finally:
        stop.set()
        thread.join(timeout=10)
    assert calls == ["started", "sweep"]


def test_a_fresh_server_is_not_reported_silent_before_its_first_sweep(tmp_path: Path) -> None:
    """``make run`` on a new database: /healthz said the sweeper was silent (and the report
    degraded) until the first sweep, an interval after the start. The sweeper records its
    start and sweeps at once: from the first answer on it is ``starting`` or ``ok``."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "FIELDOPS_VAR_DIR": str(tmp_path),
        "FIELDOPS_EXECUTION": "inprocess",
        "FIELDOPS_LOG_LEVEL": "WARNING",
        "FIELDOPS_SWEEP_INTERVAL_SECONDS": "30",
        "DJANGO_SETTINGS_MODULE": "fieldops.settings",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    server = WebProcess(
        [sys.executable, "manage.py", "serve_embedded", "127.0.0.1:{port}"],
        env,
        tmp_path / "server.log",
    )
    server.start(timeout=60)
    try:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as response:
            report = json.loads(response.read())
    finally:
        server.stop()
    assert report["sweeper"]["status"] in ("starting", "ok"), report
    assert report["status"] == "ok", report
