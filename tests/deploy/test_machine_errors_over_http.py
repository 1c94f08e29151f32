"""Every machine endpoint answers its refusals in its own format, over real HTTP.

``GET /healthz?x=1&x=2`` answered the console's HTML 400 page: the repeated-parameter and
NUL checks answered in JSON under ``/api/`` only, and a load balancer or a scraper could log
nothing but markup. So did a query of more than 1,000 parameters under ``/api/`` (Django's
``TooManyFieldsSent``, handled by ``handler400``), and a POST to ``/healthz`` or ``/metrics``
(the CSRF page). Each machine endpoint now answers in its format: the API and ``/healthz``
JSON ``{"code", "message"}``, the signed callback ``{"error", "message"}``, ``/metrics``
plain text (``fieldops.middleware.machine_error``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.servers import gunicorn, shared_database_url

pytestmark = [pytest.mark.postgres]

QUERIES = [
    "x=1&x=2",
    "x=%00",
    "%00=1",
    "&" * 1200,  # over DATA_UPLOAD_MAX_NUMBER_FIELDS, within gunicorn's request line
    "page=-1&page=99999999999999999999",
    "=&=",
]
# Address, the key its JSON errors carry (None: plain text), the methods to send.
ENDPOINTS = [
    ("/healthz", "code", ("GET", "POST")),
    ("/metrics", None, ("GET", "POST")),
    ("/api/v1/runs", "code", ("GET", "POST")),
    ("/api/v1/schema/", "code", ("GET", "POST")),
    ("/api/callbacks/", "error", ("POST",)),
]


def _raw(port: int, method: str, target: str) -> tuple[str, dict[str, str], bytes]:
    request = (
        f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
        conn.sendall(request.encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def test_machine_endpoints_refuse_odd_queries_and_methods_in_their_own_format(
    transactional_db: Any, tmp_path: Path
) -> None:
    web = gunicorn(
        {"DATABASE_URL": shared_database_url(), "FIELDOPS_EXECUTION": "inprocess"},
        tmp_path / "web.log",
    ).start(ready="/healthz")
    wrong = []
    try:
        for path, key, methods in ENDPOINTS:
            for method in methods:
                for query in QUERIES:
                    status, headers, body = _raw(web.port, method, f"{path}?{query}")
                    kind = headers.get("content-type", "")
                    where = (method, path, query[:30], status, kind, body[:120])
                    if b"<html" in body.lower() or "html" in kind:
                        wrong.append(where)
                    elif key is None:
                        if not kind.startswith("text/plain"):
                            wrong.append(where)
                    elif " 200 " not in status + " ":
                        answer = json.loads(body)
                        if set(answer) != {key, "message"} or not answer["message"]:
                            wrong.append(where)
    finally:
        web.stop()
    assert not wrong, "\n".join(map(str, wrong))
