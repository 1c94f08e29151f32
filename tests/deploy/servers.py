"""The deployment as it runs: web processes started as subprocesses, driven over real HTTP.

``WebProcess`` starts gunicorn (``fieldops.wsgi:application``) or ``manage.py
serve_embedded`` on a free 127.0.0.1 port with the environment a deployment would give
it; ``Browser`` is a urllib client with a cookie jar that signs in through the login form
and posts forms with the CSRF token, as a person's browser does (redirects are returned,
not followed, so a test sees the 302 itself). On the production settings it reaches the
server as through the TLS-terminating proxy they require (``TLS_PROXY``). A request whose
connection is cut before an answer (its web worker killed) raises ``NoAnswer``.
"""

from __future__ import annotations

import contextlib
import http.client
import http.cookiejar
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from base64 import b64decode
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("FIELDOPS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


def free_port() -> int:
    """A free 127.0.0.1 port: any the system gives, or one of FIELDOPS_TEST_PORTS
    ("18100-18199") when several suites share a host and each keeps to its own range."""
    low, _, high = os.environ.get("FIELDOPS_TEST_PORTS", "").partition("-")
    candidates = [0]
    if low and high:
        # Shuffled: two processes created before either binds its port get different ones.
        candidates = random.sample(range(int(low), int(high) + 1), int(high) - int(low) + 1)
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError(f"no free port in FIELDOPS_TEST_PORTS={low}-{high}")


class ClosedPort:
    """A 127.0.0.1 port that refuses connections: bound, never listening, so no other
    process can take it while the test runs."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])

    def close(self) -> None:
        self._socket.close()


# The production settings' required environment (DATABASE_URL apart: each test's own).
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "fieldops.settings_production",
    "DJANGO_SECRET_KEY": "s" * 60,
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    "FIELDOPS_CALLBACK_KEY": "c" * 40,
    "CELERY_BROKER_URL": REDIS_URL,
}


# What the one TLS-terminating proxy the production settings expect adds to each request
# it forwards over plain HTTP (fieldops/settings_production.py): the scheme the browser
# used, and the client's address appended to X-Forwarded-For (the sign-in throttle's).
TLS_PROXY = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "127.0.0.1"}


class NoAnswer(ConnectionError):
    """The connection closed before an answer came (the web worker serving it was killed):
    whether the request took effect is unknown. A ``ConnectionError``, as urllib's own
    were before, for the tests that kill a server under a request and ignore OSError."""


class Writes:
    """How many writes (requests with a body) some clients have under way now: the chaos
    drill kills a web worker while one is, so that the kill may cut a write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @contextlib.contextmanager
    def under_way(self, request: urllib.request.Request) -> Any:
        counted = request.data is not None
        with self._lock:
            self._count += counted
        try:
            yield
        finally:
            with self._lock:
                self._count -= counted

    def any(self) -> bool:
        with self._lock:
            return self._count > 0


def no_answer(exc: BaseException) -> bool:
    """Whether ``exc``, raised by urllib, is a connection cut before the answer."""
    if isinstance(exc, urllib.error.HTTPError):
        return False
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    return isinstance(exc, ConnectionError | http.client.HTTPException)


def shared_database_url() -> str:
    """The URL of the test database this process uses (for a subprocess to share it)."""
    db = connection.settings_dict
    host = db["HOST"] or "127.0.0.1"
    return f"postgres://{db['USER']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


@dataclass
class WebProcess:
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    cwd: Path = ROOT  # the directory it is started in (a deployment's may be any)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 25.0, ready: str = "/login/") -> WebProcess:
        """Start the process and wait until ``ready`` answers 200 (the production settings
        redirect the login page to HTTPS: wait for ``/healthz`` there)."""
        argv = [a.replace("{port}", str(self.port)) for a in self.argv]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env={**os.environ, "DJANGO_SETTINGS_MODULE": "fieldops.settings", **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"web process exited early:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}{ready}", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"web process did not answer within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)


def gunicorn(env: dict[str, str], log_path: Path) -> WebProcess:
    """The web process as deployed (README, docker-compose): gunicorn, one sync worker."""
    argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py")]
    argv += ["fieldops.wsgi:application"]
    argv += ["--bind", "127.0.0.1:{port}", "--workers", "1", "--timeout", "30"]
    return WebProcess(argv, {"FIELDOPS_LOG_LEVEL": "WARNING", **env}, log_path)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _HttpsBeyondTheProxy(http.cookiejar.DefaultCookiePolicy):
    """The browser's side of the TLS proxy is HTTPS: it sends its ``Secure`` cookies."""

    def return_ok_secure(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return True


class Browser:
    """One person's browser: its own cookies (session, CSRF) against one server.

    ``behind_tls_proxy``: the server runs the production settings, and each request comes
    as their TLS-terminating proxy forwards it (``TLS_PROXY`` headers; the browser's
    ``Origin`` is the HTTPS address, as CSRF checks it on a secure request)."""

    def __init__(
        self, base_url: str, *, behind_tls_proxy: bool = False, writes: Writes | None = None
    ) -> None:
        self.base_url = base_url
        self.writes = writes or Writes()
        self.headers = dict(TLS_PROXY) if behind_tls_proxy else {}
        self.jar = http.cookiejar.CookieJar(_HttpsBeyondTheProxy() if behind_tls_proxy else None)
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()
        )

    def _open(self, request: urllib.request.Request) -> Response:
        for name, value in self.headers.items():
            request.add_header(name, value)
        if self.headers and request.data is not None:
            request.add_header("Origin", self.base_url.replace("http://", "https://", 1))
        try:
            with self.writes.under_way(request), self.opener.open(request, timeout=30) as r:
                return Response(r.status, {k.lower(): v for k, v in r.headers.items()}, _text(r))
        except urllib.error.HTTPError as r:
            return Response(r.code, {k.lower(): v for k, v in r.headers.items()}, _text(r))
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
            if no_answer(exc):
                raise NoAnswer(f"{request.get_method()} {request.full_url}: {exc!r}") from exc
            raise

    def get(self, path: str) -> Response:
        return self._open(urllib.request.Request(self.base_url + path))

    def post(self, path: str, data: dict[str, str]) -> Response:
        """Post a form the way the page does: with the CSRF token of this browser."""
        if not self._csrf():
            self.get("/login/")
        body = urllib.parse.urlencode({"csrfmiddlewaretoken": self._csrf(), **data}).encode()
        request = urllib.request.Request(self.base_url + path, data=body, method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        return self._open(request)

    def follow(self, response: Response) -> Response:
        assert response.status == 302, response.status
        parts = urllib.parse.urlsplit(response.location)
        return self.get(parts.path + (f"?{parts.query}" if parts.query else ""))

    def login(self, username: str, password: str) -> None:
        self.get("/login/")
        response = self.post("/login/", {"username": username, "password": password})
        assert response.status == 302, f"sign-in as {username} failed: {response.status}"

    def _csrf(self) -> str:
        return next((c.value or "" for c in self.jar if c.name == "csrftoken"), "")


def _text(response: Any) -> str:
    return response.read().decode("utf-8", errors="replace")


def run_id_of(response: Response) -> str:
    """The run id of a redirect to the run's page."""
    match = re.search(r"/runs/([0-9a-f-]{36})/", response.location)
    assert match, f"not a redirect to a run: {response.status} {response.location!r}"
    return match.group(1)


def queued_tasks(redis_client: Any, queue: str) -> list[tuple[str, list[Any]]]:
    """(task name, args) of every message kombu's Redis transport holds for ``queue``, at
    every priority."""
    tasks = []
    from runs.engine.executor import broker_lists

    for key in broker_lists(queue):
        for raw in redis_client.lrange(key, 0, -1):
            message = json.loads(raw)
            args = json.loads(b64decode(message["body"]))[0]
            tasks.append((message["headers"]["task"], args))
    return tasks
