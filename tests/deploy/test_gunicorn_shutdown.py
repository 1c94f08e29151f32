"""gunicorn on the production settings stops promptly on SIGTERM (a deploy, a scale-down,
``docker compose stop``) and still completes a request in flight.

Each idle worker took 1.3-1.7 s of CPU to exit after SIGTERM (CPython's teardown collecting
the ~180,000 objects the loaded project holds), so three workers on two cores took 3-7 s
to stop, against 0.5 s for a trivial app; ``gunicorn.conf.py`` freezes those objects once
the worker has loaded the project."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.servers import PRODUCTION, WebProcess, gunicorn, shared_database_url

pytestmark = [pytest.mark.postgres]

# compose's web service runs three workers; the trivial app's exit takes about 0.5 s here.
WORKERS = "3"
IDLE_EXIT_LIMIT = 2.0


def _production(tmp_path: Path, static_root: Path) -> WebProcess:
    process = gunicorn(
        {
            **PRODUCTION,
            "DATABASE_URL": shared_database_url(),
            "FIELDOPS_STATIC_ROOT": str(static_root),
        },
        tmp_path / "web.log",
    )
    process.argv[process.argv.index("--workers") + 1] = WORKERS
    return process.start(ready="/healthz")


def _get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        return conn.recv(200)


def _stop_time(process: subprocess.Popen[bytes]) -> float:
    started = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    process.wait(timeout=40)
    return time.monotonic() - started


def test_an_idle_server_exits_promptly_on_sigterm(
    transactional_db: Any, tmp_path: Path, collected_static: Path
) -> None:
    server = _production(tmp_path, collected_static)
    assert server.process is not None
    for _ in range(20):  # every worker loads what serving pages and the API imports
        for path in ("/healthz", "/api/v1/schema/", "/api/v1/checkpoints"):
            assert _get(server.port, path).startswith(b"HTTP/1.1 "), server.log()
    time.sleep(0.5)
    took = _stop_time(server.process)
    assert server.process.returncode == 0, server.log()
    assert took < IDLE_EXIT_LIMIT, f"{took:.2f}s to exit\n{server.log()[-2000:]}"


def test_a_request_in_flight_at_sigterm_still_completes(
    transactional_db: Any, tmp_path: Path, collected_static: Path
) -> None:
    server = _production(tmp_path, collected_static)
    assert server.process is not None
    body = b'{"delivery_id": "d-1", "padding": "' + b"x" * 40 + b'"}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as conn:
        # The headers and half the body: the worker is inside the request, reading it (the
        # signed callback reads its whole body before it checks the signature).
        conn.sendall(
            b"POST /api/callbacks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(body[:20])
        time.sleep(0.5)
        os.kill(server.process.pid, signal.SIGTERM)
        time.sleep(1.0)
        assert server.process.poll() is None, "gunicorn exited under a request in flight"
        conn.sendall(body[20:])
        answer = conn.recv(200)
    # Answered in full: the callback's refusal of a body that carries no signature.
    assert answer.startswith(b"HTTP/1.1 401"), (answer, server.log()[-2000:])
    server.process.wait(timeout=40)
    assert server.process.returncode == 0, server.log()
