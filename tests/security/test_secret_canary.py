"""Secret canary: plant a unique value in every secret, run the scenarios, find none of
them anywhere they could leak to.

Secrets: the database password (the connection really reconnects with it: PostgreSQL on
127.0.0.1 trusts local connections, so a canary password still connects), SECRET_KEY
(it signs the session cookies), the callback signing key, the model API key, the Celery
broker password, the session cookie value of every signed-in client, and the API key a
stdio MCP tool server is started with (an environment entry's referenced variable,
``FIELDOPS_MCP_ENV_*``).

Scenarios: the world of the other security tests built with the canaries in place, fault
lab fixtures through ``sim.faultlab`` (all of them on PostgreSQL, a representative set on
SQLite), real sign-ins, a run started and approved through the console, signed callbacks,
model-client runs against a fake server on 127.0.0.1 (one whose error bodies echo the key,
one that answers garbage), stdio tool servers registered and discovered through the console
and ``catalog_discover`` (one that lists its tools with the key, one that quotes the key on
stderr as it fails, one that writes it into a tool it serves, one whose reference is unset,
and a registration with the key pasted in place of its reference), the same console flow
with Celery execution on an in-memory broker, every GET route rendered for every role, and
error reports: 400/403/404/405/409 pages, a CSRF refusal and forced 500s with DEBUG False,
plus the technical report Django would mail to ADMINS or show with DEBUG on.

Searched: every table (events and evidence in every column; the session table only for
the other secrets, since it holds session keys by design), captured logs (every record as
the JSON formatter writes it, with its extra fields), Celery messages as published and as
they sit on the broker, every rendered page, every error report and the output of the
management commands run.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from celery.signals import before_task_publish
from django.apps import apps
from django.conf import settings as django_settings
from django.core import mail
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils.log import AdminEmailHandler
from django.views.debug import get_exception_reporter_class

from approvals.models import Checkpoint
from fieldops import secrets
from fieldops.logs import JsonFormatter
from runs import services
from runs.api import sign
from runs.models import Correlation, Run
from runs.policies import model_client
from sim import faultlab
from tests.runs.policies.fake_model import FakeModel, serve
from tests.security.policy import POLICY, crawl_objects, url_kwargs
from tests.security.routes import send
from tests.security.test_secrets import read_request
from tests.security.world import USERS, World, build_world

pytestmark = pytest.mark.django_db(transaction=True)

# Fault-lab fixtures that cover every path a secret could travel (approvals, effects,
# recovery, callbacks, clarifications, hostile model output); all of them on PostgreSQL.
REPRESENTATIVE_FIXTURES = (
    "reservation",
    "approval_decline",
    "external_wait",
    "post_terminal_callback",
    "clarification",
    "ambiguous_effect",
    "ledger_outage",
    "malformed_result",
    "prompt_injection",
    "forged_trusted_field",
    "cross_tenant_result",
    "mixed_output",
    "stale_owner",
)


@dataclass
class Canaries:
    values: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, value: str) -> None:
        assert len(value) >= 16 and value not in self.values.values()
        self.values[name] = value

    def found(self, text: str, *, skip: tuple[str, ...] = ()) -> list[str]:
        return [name for name, value in self.values.items() if name not in skip and value in text]


@pytest.fixture
def canaries(transactional_db: Any, settings: Any) -> Iterator[Canaries]:
    tag = uuid.uuid4().hex[:12]
    planted = Canaries()
    for name in (
        "SECRET_KEY",
        "FIELDOPS_CALLBACK_KEY",
        "FIELDOPS_MODEL_API_KEY",
        "FIELDOPS_OPS_TOKEN",
    ):
        value = f"canary-{name.lower().replace('_', '-')}-{tag}"
        setattr(settings, name, value)
        planted.add(name, value)
    broker_password = f"canary-broker-{tag}"
    settings.CELERY_BROKER_URL = f"memory://fieldops:{broker_password}@localhost//"
    planted.add("broker password", broker_password)
    password = f"canary-db-password-{tag}"
    planted.add("database password", password)
    old = connection.settings_dict.get("PASSWORD", "")
    configured = django_settings.DATABASES["default"]
    connection.close()
    connection.settings_dict["PASSWORD"] = configured["PASSWORD"] = password
    connection.ensure_connection()
    if connection.vendor == "postgresql":  # the live connection authenticated with it
        assert connection.connection.info.password == password
    try:
        yield planted
    finally:
        connection.close()
        connection.settings_dict["PASSWORD"] = configured["PASSWORD"] = old


class LogCapture(logging.Handler):
    """Every record, as the JSON formatter writes it, plus its extra fields."""

    LOGGERS = ("", "fieldops", "django", "django.request", "celery", "kombu", "py.warnings")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self.lines.append(repr({k: v for k, v in record.__dict__.items() if k != "exc_info"}))


@pytest.fixture
def logs(caplog: Any) -> Iterator[LogCapture]:
    capture = LogCapture()
    levels = {}
    for name in LogCapture.LOGGERS:
        logger = logging.getLogger(name)
        levels[name] = logger.level
        logger.addHandler(capture)
        if name in ("fieldops", "django.request"):
            logger.setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    try:
        yield capture
    finally:
        for name, level in levels.items():
            logging.getLogger(name).removeHandler(capture)
            logging.getLogger(name).setLevel(level)


def login(username: str, **kwargs: Any) -> Client:
    """A real sign-in with the password (so the session cookie is a real one)."""
    client = Client(**kwargs)
    client.get(reverse("login"))  # the sign-in form sets the CSRF cookie
    form = {"username": username, "password": f"pw-{username}"}
    response = client.post(reverse("login"), {**form, "csrfmiddlewaretoken": _csrf(client)})
    assert response.status_code == 302, response.status_code
    return client


def _csrf(client: Client) -> str:
    return client.cookies["csrftoken"].value


def token(client: Client) -> str:
    client.get(reverse("runs-list"))
    return _csrf(client)


@dataclass
class Collected:
    pages: list[tuple[str, str]] = field(default_factory=list)
    reports: list[tuple[str, str]] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)

    def page(self, where: str, response: Any) -> Any:
        # A streamed export (issue 22) is read to its end like any other page.
        body = (
            b"".join(response.streaming_content)
            if getattr(response, "streaming", False)
            else response.content
        )
        self.pages.append((where, body.decode("utf-8", "replace")))
        for key, value in response.items():
            self.pages.append((f"{where} header {key}", value))
        return response


# -- scenarios -------------------------------------------------------------------------
def console_reservation(collected: Collected, *, label: str) -> Run:
    """operator starts a run in the console; approver approves exactly its proposal."""
    operator = login("operator", enforce_csrf_checks=True)
    approver = login("approver", enforce_csrf_checks=True)
    start = operator.post(
        reverse("runs-start"),
        {
            "scenario": "reservation",
            "equipment_id": "EQ-17",
            "location_id": "LOC-N1",
            "csrfmiddlewaretoken": token(operator),
        },
    )
    collected.page(f"{label}: start", start)
    assert start.status_code == 302
    run = Run.objects.filter(principal_ref="user:operator").latest("created_at")
    drive(run)
    run.refresh_from_db()
    assert run.state == "WAITING_HUMAN", run.state
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    collected.page(f"{label}: queue", approver.get(reverse("approvals-queue")))
    collected.page(
        f"{label}: proposal", approver.get(reverse("approvals-detail", args=[checkpoint.pk]))
    )
    decided = approver.post(
        reverse("approvals-decide", args=[checkpoint.pk]),
        {
            "verdict": "approve",
            "seen_hash": checkpoint.proposal_hash,
            "reason": "canary run",
            "csrfmiddlewaretoken": token(approver),
        },
    )
    collected.page(f"{label}: decide", decided)
    assert decided.status_code == 302
    drive(run)
    run.refresh_from_db()
    assert run.state == "COMPLETED", (run.state, run.terminal_reason)
    collected.page(f"{label}: run", operator.get(reverse("runs-detail", args=[run.pk])))
    collected.page(f"{label}: export", operator.get(reverse("runs-export", args=[run.pk])))
    return run


DRIVERS: list[Any] = []  # what "the worker" does between console steps (see drive)


def drive(run: Run) -> None:
    for driver in DRIVERS:
        driver(run)


def signed_callbacks(collected: Collected) -> None:
    run = services.run_create(
        scenario="wait_external", tenant="north", principal_ref="user:operator"
    )  # in-process execution: advances after commit
    run.refresh_from_db()
    assert run.state == "WAITING_EXTERNAL", run.state
    correlation = Correlation.objects.get(pk=run.waiting_correlation)
    body = json.dumps(
        {
            "delivery_id": f"canary-{run.pk.hex[:8]}",
            "correlation_id": correlation.pk,
            "attempt": correlation.attempt,
            "owner_epoch": correlation.owner_epoch,
            "response_type": correlation.expected_response_type,
            "payload": {"window": "08:00"},
        }
    ).encode()
    client = Client()
    for attempt in range(2):  # accepted, then the duplicate
        ts = str(int(time.time()))
        response = client.post(
            reverse("api-callback"),
            body,
            content_type="application/json",
            HTTP_X_FIELDOPS_TIMESTAMP=ts,
            HTTP_X_FIELDOPS_SIGNATURE=sign(body, ts),
        )
        collected.page(f"callback {attempt}", response)
        assert response.status_code == (202, 200)[attempt]
    unsigned = client.post(reverse("api-callback"), body, content_type="application/json")
    collected.page("callback unsigned", unsigned)
    assert unsigned.status_code == 401


@contextmanager
def garbage_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that answers anything with bytes that are not HTTP."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve_forever() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                read_request(conn)
                conn.sendall(b"SSH-2.0-not-http\r\n\r\n")

    thread = threading.Thread(target=serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def model_runs(collected: Collected, settings: Any) -> None:
    settings.FIELDOPS_MODEL_NAME = "fake-model"
    settings.FIELDOPS_MODEL_TIMEOUT_SECONDS = 5.0
    with serve(FakeModel("double:reservation")) as fake:
        settings.FIELDOPS_MODEL_BASE_URL = fake.url
        run = services.run_create(
            scenario=model_client.SCENARIO, tenant="north", principal_ref="user:operator"
        )
        run.refresh_from_db()
        assert run.state == "WAITING_HUMAN", (run.state, run.terminal_reason)
        # The key went where it belongs (the Authorization header) and nowhere else.
        assert fake.received[0].headers["Authorization"].endswith(settings.FIELDOPS_MODEL_API_KEY)
    with serve(FakeModel("status:401")) as fake:  # error bodies that echo the key back
        settings.FIELDOPS_MODEL_BASE_URL = fake.url
        run = services.run_create(
            scenario=model_client.SCENARIO,
            tenant="north",
            principal_ref="user:operator",
            limits={"corrections": 1},
        )
        run.refresh_from_db()
        assert run.terminal_reason == "correction_budget_exhausted"
        # The fake's 401 body echoes the Authorization header it received: the key.
        assert settings.FIELDOPS_MODEL_API_KEY in fake.received[0].headers["Authorization"]
    with garbage_server() as url:  # not HTTP at all: a stable provider error, not a crash
        settings.FIELDOPS_MODEL_BASE_URL = url
        run = services.run_create(
            scenario=model_client.SCENARIO,
            tenant="north",
            principal_ref="user:operator",
            limits={"corrections": 1},
        )
        run.refresh_from_db()
        assert run.terminal_reason == "correction_budget_exhausted", run.terminal_reason
    settings.FIELDOPS_MODEL_BASE_URL = ""


def celery_flow(collected: Collected, settings: Any) -> None:
    """The console flow again with Celery execution on an in-memory broker: every message
    is captured as published and as it sits on the broker, then run as a worker would."""
    from kombu.transport import memory

    from fieldops.celery import app
    from runs.engine import tasks

    published: list[str] = []

    def capture(body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        published.append(repr(body) + repr(headers) + repr(kwargs.get("properties")))

    settings.FIELDOPS_EXECUTION = "celery"
    previous = (app.conf.broker_url, app.conf.task_default_queue)
    app.conf.broker_url = settings.CELERY_BROKER_URL
    app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
    app._pool = None
    app.amqp._producer_pool = None  # producers of an earlier broker (other tests) must go
    memory.Channel.queues = {}
    before_task_publish.connect(capture, weak=False, dispatch_uid="canary")

    def worker(run: Run) -> None:
        for _ in range(10):
            queued = [q for q in memory.Channel.queues.values() if q.qsize()]
            if not queued:
                return
            for queue in queued:
                while queue.qsize():
                    message = queue.get()
                    raw = json.dumps(message, default=str)
                    body = base64.b64decode(message["body"]).decode()
                    collected.messages.append(("broker", raw + body))
                    args, kwargs, _ = json.loads(body)
                    getattr(tasks, message["headers"]["task"].rsplit(".", 1)[1])(*args, **kwargs)

    DRIVERS.append(worker)
    try:
        console_reservation(collected, label="celery")
        with app.connection_for_write() as conn:  # what a log line would show of the broker
            collected.messages.append(("broker uri", conn.as_uri()))
    finally:
        DRIVERS.remove(worker)
        before_task_publish.disconnect(dispatch_uid="canary")
        app.conf.broker_url, app.conf.task_default_queue = previous
        app._pool = None
        app.amqp._producer_pool = None
        settings.FIELDOPS_EXECUTION = "inprocess"
    assert published and collected.messages, "nothing was published"
    collected.messages.extend(("published", p) for p in published)


MCP_KEY_ENTRY = "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_CANARY"


def stdio_server_keys(
    collected: Collected, canaries: Canaries, settings: Any, monkeypatch: Any, capsys: Any
) -> None:
    """Stdio tool servers that need an API key, registered with an environment entry and
    discovered through the console and the command (``tests/catalog/mcp_servers/keyed.py``)."""
    from django.core.management import CommandError, call_command

    from catalog.models import Discovery, ToolServer

    key = f"canary-mcp-env-key-{uuid.uuid4().hex[:12]}"
    canaries.add("FIELDOPS_MCP_ENV_CANARY", key)
    monkeypatch.setenv("FIELDOPS_MCP_ENV_CANARY", key)
    monkeypatch.delenv("FIELDOPS_MCP_ENV_ABSENT", raising=False)
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable]
    script = str(Path(__file__).resolve().parents[1] / "catalog" / "mcp_servers" / "keyed.py")
    admin = login(USERS["catalog_admin"][0])
    pasted = admin.post(
        reverse("catalog-servers"),
        {
            "name": "keyed-pasted",
            "transport": "stdio",
            "command": sys.executable,
            "args": script,
            "env": f"EXAMPLE_API_KEY={key}",
            "csrfmiddlewaretoken": token(admin),
        },
    )
    collected.page("tool server registration with the key pasted", pasted)
    assert pasted.status_code == 400 and b"env_ref_invalid" in pasted.content
    for name, args, entry in (
        ("keyed", script, MCP_KEY_ENTRY),
        ("keyed-refused", f"{script} refused", MCP_KEY_ENTRY),
        ("keyed-echo", f"{script} echo", MCP_KEY_ENTRY),
        ("keyed-unset", script, "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_ABSENT"),
    ):
        registered = admin.post(
            reverse("catalog-servers"),
            {
                "name": name,
                "transport": "stdio",
                "command": sys.executable,
                "args": args,
                "env": entry,
                "scheduled": "on",
                "csrfmiddlewaretoken": token(admin),
            },
        )
        assert registered.status_code == 302, registered.content[:2000]
        server = ToolServer.objects.get(name=name)
        collected.page(f"tool server {name}", admin.get(registered["Location"]))
        ran = admin.post(
            reverse("catalog-server-discover", args=[server.pk]),
            {"csrfmiddlewaretoken": token(admin)},
        )
        collected.page(f"discover {name}", ran)
        collected.page(f"discovery of {name}", admin.get(ran["Location"]))
        collected.page(f"tool server {name} after", admin.get(registered["Location"]))
    outcomes = dict(
        Discovery.objects.filter(server__name__startswith="keyed").values_list(
            "server__name", "code"
        )
    )
    assert outcomes == {
        "keyed": "",
        "keyed-refused": "connection_closed",
        "keyed-echo": "secret_echoed",
        "keyed-unset": "credential_missing",
    }, outcomes
    capsys.readouterr()
    with pytest.raises(CommandError):
        call_command("catalog_discover", "--all", "--timeout", "20")
    printed = capsys.readouterr()
    assert "the API refused the key [redacted]" in printed.out, printed.out
    collected.reports.append(("catalog_discover --all output", printed.out + printed.err))
    collected.page("tool servers", admin.get(reverse("catalog-servers")))
    collected.page("catalog", admin.get(reverse("catalog-index")))


def crawl_pages(collected: Collected, world: World) -> None:
    clients = {"anonymous": Client()}
    for key in ("approver", "operator", "catalog_admin", "lead", "outsider"):
        clients[key] = login(USERS[key][0])
    for name in sorted(n for n, r in POLICY.items() if "GET" in r.may):
        rule = POLICY[name]
        for obj in crawl_objects(world, rule.objects)[:4]:
            for variant in rule.variants:
                for principal, client in clients.items():
                    response = send(
                        client,
                        "GET",
                        name,
                        url_kwargs(obj),
                        query=dict(variant.query),
                        headers=dict(variant.headers),
                    )
                    collected.page(
                        f"GET {name}[{obj.label}] {variant.name} as {principal}", response
                    )


def error_reports(collected: Collected, world: World, monkeypatch: Any, settings: Any) -> None:
    settings.DEBUG = False
    operator = login("operator", raise_request_exception=False)
    approver = login("approver", raise_request_exception=False)
    strict = login("operator", enforce_csrf_checks=True)
    waiting = world.runs["waiting"]
    completed = world.runs["completed"]
    for where, response, status in (
        ("404", operator.get(reverse("runs-detail", args=[uuid.uuid4()])), 404),
        (
            "404 other tenant",
            operator.get(reverse("runs-detail", args=[world.runs["south_waiting"]])),
            404,
        ),
        ("403", approver.post(reverse("runs-cancel", args=[waiting]), {"reason": "x"}), 403),
        ("409", operator.post(reverse("runs-cancel", args=[completed]), {"reason": "x"}), 409),
        ("400", operator.post(reverse("runs-budget", args=[waiting]), {"budget": "x"}), 400),
        ("400 NUL", operator.get(reverse("recovery"), {"q": "\x00"}), 400),
        ("405", operator.get(reverse("runs-cancel", args=[waiting])), 405),
        ("403 CSRF", strict.post(reverse("runs-cancel", args=[waiting]), {"reason": "x"}), 403),
        (
            "400 charset",
            strict.generic(
                "POST",
                reverse("runs-cancel", args=[waiting]),
                b"reason=x",
                content_type="application/x-www-form-urlencoded; charset=utf-16",
            ),
            400,
        ),
        (
            "health with the ops token",
            operator.get(
                reverse("health"),
                headers={"authorization": f"Bearer {settings.FIELDOPS_OPS_TOKEN}"},
            ),
            200,
        ),
    ):
        assert response.status_code == status, (where, response.status_code)
        collected.page(f"error page {where}", response)

    def technical(where: str, request: Any, exc_info: Any) -> None:
        for is_email in (True, False):  # the configured reporter, as Django would use it
            reporter = get_exception_reporter_class(request)(request, *exc_info, is_email=is_email)
            collected.reports.append((f"{where} text", reporter.get_traceback_text()))
            collected.reports.append((f"{where} html", reporter.get_traceback_html()))

    # A forced 500 in a view (DEBUG False): the page, the log line and the report.
    from runs.console import runs_selectors as selectors

    def broken(run: Any) -> Any:
        raise RuntimeError(f"forced failure exporting {run.pk}")

    monkeypatch.setattr(selectors, "run_export", broken)
    settings.ADMINS = [("ops", "ops@example.invalid")]
    mailer = AdminEmailHandler(include_html=True)
    logging.getLogger("django.request").addHandler(mailer)
    try:
        response = operator.get(reverse("runs-export", args=[completed]))
    finally:
        logging.getLogger("django.request").removeHandler(mailer)
    assert response.status_code == 500
    collected.page("error page 500", response)
    technical("forced 500 in a view", response.wsgi_request, response.exc_info)
    [report] = mail.outbox  # the error mail to ADMINS, text and HTML
    collected.reports.append(("error mail to ADMINS", report.body))
    collected.reports.extend(
        ("error mail to ADMINS (html)", str(c)) for c, _ in report.alternatives
    )
    settings.DEBUG = True  # DJANGO_DEBUG=true: the technical 500 page
    debug_page = operator.get(reverse("runs-export", args=[completed]))
    settings.DEBUG = False
    assert debug_page.status_code == 500 and b"forced failure" in debug_page.content
    collected.reports.append(("DEBUG 500 page", debug_page.content.decode()))
    monkeypatch.undo()

    # Failures where the secrets are in the failing frames' variables.
    def failing(where: str, call: Any) -> None:
        try:
            call()
        except Exception:
            technical(where, None, sys.exc_info())
        else:
            raise AssertionError(f"{where} did not fail")

    def unexpected(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("unexpected failure inside the HTTP client")

    with override_settings(
        FIELDOPS_MODEL_BASE_URL="http://127.0.0.1:9/v1", FIELDOPS_MODEL_NAME="fake-model"
    ):
        # Raised while the SDK's own failure is handled: its frames (headers with the key)
        # are in the report as the chained exception.
        monkeypatch.setattr(model_client, "_classify", unexpected)
        policy = model_client.ModelClientPolicy()
        failing("inside the model client", lambda: policy.decide({"objective": "x"}))
        monkeypatch.undo()
    monkeypatch.setattr("runs.api.hmac.compare_digest", unexpected)
    failing("inside the callback signature check", lambda: _check_signature())
    monkeypatch.undo()


def _check_signature() -> Any:
    from django.test import RequestFactory

    from runs.api import _authenticated

    body = b"{}"
    ts = str(int(time.time()))
    request = RequestFactory().post(
        "/api/callbacks/",
        body,
        content_type="application/json",
        HTTP_X_FIELDOPS_TIMESTAMP=ts,
        HTTP_X_FIELDOPS_SIGNATURE=sign(body, ts),
    )
    return _authenticated(request, body)


# -- the search ------------------------------------------------------------------------
def database_text() -> list[tuple[str, str]]:
    out = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608
            out.append((model._meta.label, repr(cursor.fetchall())))
    return out


def test_no_secret_reaches_records_logs_messages_pages_or_error_reports(
    canaries: Canaries,
    logs: LogCapture,
    settings: Any,
    monkeypatch: Any,
    caplog: Any,
    capsys: Any,
) -> None:
    collected = Collected()
    world = build_world()
    fixtures = (
        [f.name for f in faultlab.FIXTURES]
        if connection.vendor == "postgresql"
        else list(REPRESENTATIVE_FIXTURES)
    )
    for name in fixtures:
        faultlab.run_fixture(faultlab.BY_NAME[name])
    operator = login("operator")
    ran = operator.post(reverse("faultlab-run"), {"fixture": "reservation"}, HTTP_HX_REQUEST="true")
    collected.page("fault lab through the console", ran)
    console_reservation(collected, label="in-process")
    signed_callbacks(collected)
    model_runs(collected, settings)
    celery_flow(collected, settings)
    stdio_server_keys(collected, canaries, settings, monkeypatch, capsys)
    crawl_pages(collected, world)
    error_reports(collected, world, monkeypatch, settings)
    # Every signed-in client of this test had a real session cookie: they are secrets too.
    from django.contrib.sessions.models import Session

    for number, key in enumerate(Session.objects.values_list("session_key", flat=True)):
        canaries.add(f"session cookie {number}", key)
    assert len(canaries.values) > 10

    leaks: list[str] = []
    for label, text in database_text():
        skip = tuple(n for n in canaries.values if n.startswith("session cookie"))
        found = canaries.found(text, skip=skip if label == "sessions.Session" else ())
        leaks += [f"table {label}: {name}" for name in found]
    for line in [*logs.lines, caplog.text]:
        leaks += [f"log: {name} in {line[:200]!r}" for name in canaries.found(line)]
    for where, text in collected.messages:
        leaks += [f"Celery message ({where}): {name}" for name in canaries.found(text)]
    for where, text in collected.pages:
        leaks += [f"page {where}: {name}" for name in canaries.found(text)]
    for where, text in collected.reports:
        leaks += [f"error report {where}: {name}" for name in canaries.found(text)]
    assert not leaks, "\n".join(sorted(set(leaks)))
    # The search had something to search.
    assert len(collected.pages) > 500 and len(collected.reports) >= 15
    assert len(logs.lines) > 50 and collected.messages
    assert Run.objects.count() > 20


def test_the_search_would_find_a_leak(canaries: Canaries, logs: LogCapture, settings: Any) -> None:
    """The places the canary test searches are not blind: a planted value is found."""
    from runs import evidence
    from sim.setup import seed

    seed(demo_users=False)
    run = services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", start=False
    )
    with pytest.raises(secrets.SecretLeak):  # evidence refuses a configured secret outright
        evidence.store(
            run_id=str(run.pk), kind="observation", content={"k": settings.FIELDOPS_CALLBACK_KEY}
        )
    Run.objects.filter(pk=run.pk).update(objective=f"x{settings.FIELDOPS_MODEL_API_KEY}x")
    found = [canaries.found(text) for label, text in database_text() if label == "runs.Run"]
    assert found == [["FIELDOPS_MODEL_API_KEY"]]
    logging.getLogger("fieldops.test").warning("seen", extra={"worker": settings.SECRET_KEY})
    assert any(canaries.found(line) == ["SECRET_KEY"] for line in logs.lines)
