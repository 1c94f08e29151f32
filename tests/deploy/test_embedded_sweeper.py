"""The embedded server's sweeper thread (``serve_embedded``) outlives any one failed sweep:
a sweep that raises, or a database connection that cannot be closed after it, is logged and
the thread sweeps again at the next interval (a dead thread would leave every interrupted
run stuck until the server restarts)."""

from __future__ import annotations

import threading

import pytest

from runs.engine import sweeper
from runs.management.commands import serve_embedded


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
