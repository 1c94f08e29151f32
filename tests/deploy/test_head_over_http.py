"""A HEAD answer leaves the application without a body, as it reaches gunicorn.

Django's test client drops a HEAD answer's body itself (tests/security/test_head_requests.py
cannot see it); gunicorn drops it too, but logs a warning for every such answer ("WSGI app
sent body bytes on a no-body response"): an uptime monitor sending HEAD to ``/healthz``
every few seconds filled the web process's log (found over real HTTP).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.servers import gunicorn, shared_database_url

pytestmark = [pytest.mark.postgres]


def _raw(port: int, method: str, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
        conn.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_head_answers_carry_the_get_status_and_no_body_and_log_nothing(
    transactional_db: Any, tmp_path: Path
) -> None:
    web = gunicorn(
        {"DATABASE_URL": shared_database_url(), "FIELDOPS_EXECUTION": "inprocess"},
        tmp_path / "web.log",
    ).start(ready="/healthz")
    try:
        for path in ("/healthz", "/login/", "/no-such-page/", "/api/v1/schema/"):
            got = _raw(web.port, "GET", path)
            head = _raw(web.port, "HEAD", path)
            status = got.split(b"\r\n", 1)[0]
            assert head.split(b"\r\n", 1)[0] == status, (path, head[:200])
            _, _, body = head.partition(b"\r\n\r\n")
            assert body == b"", (path, body[:200])
    finally:
        web.stop()
    log = web.log()
    assert "no-body response" not in log, log[-3000:]
