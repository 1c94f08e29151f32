"""The secret registry (fieldops/secrets.py) and the places that apply it: evidence refuses
secrets, log lines and Django's error reports redact them; the model client never lets
its key reach an error message."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import RequestFactory
from django.views.debug import get_exception_reporter_class

from fieldops import secrets
from fieldops.logs import JsonFormatter
from runs.models import Event, Evidence
from runs.policies import model_client
from tests.helpers import make_run
from tests.runs.policies.fake_model import FakeModel, serve

KEY = "sk-canary-0123456789abcdef"


def test_every_configured_secret_is_registered(settings):
    settings.SECRET_KEY = "secret-key-value-1234"
    settings.FIELDOPS_CALLBACK_KEY = "callback-key-value-1234"
    settings.FIELDOPS_MODEL_API_KEY = KEY
    settings.CELERY_BROKER_URL = "redis://:broker%2Fpass-1234@127.0.0.1:6379/7"
    values = secrets.secret_values()
    for value in ("secret-key-value-1234", "callback-key-value-1234", KEY, "broker/pass-1234"):
        assert value in values
    assert django_settings.DATABASES["default"].get("PASSWORD", "") in [*values, ""]
    settings.CELERY_BROKER_URL = "memory://"
    settings.FIELDOPS_MODEL_API_KEY = "short"  # too short to be a secret worth matching
    assert "short" not in secrets.secret_values()
    assert secrets.redact(f"x{settings.SECRET_KEY}y") == "x[redacted]y"


def test_the_values_tool_server_references_may_name_are_secrets_too(monkeypatch):
    """A stdio server's environment entries and an HTTP server's credential reference name
    variables of these prefixes: their values are read at each use, so one set after start
    (or changed) is redacted all the same; other variables are not taken for secrets."""
    monkeypatch.setenv("FIELDOPS_MCP_ENV_BRAVE", "brave-key-value-1234")
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_TOOLS", "tools-token-value-1234")
    monkeypatch.setenv("FIELDOPS_MCP_ENV_SHORT", "short")
    monkeypatch.setenv("EXAMPLE_PLAIN_SETTING", "plain-setting-value-1234")
    values = secrets.secret_values()
    assert {"brave-key-value-1234", "tools-token-value-1234"} <= set(values)
    assert "short" not in values and "plain-setting-value-1234" not in values
    assert secrets.redact("the key brave-key-value-1234 was refused") == (
        "the key [redacted] was refused"
    )
    with pytest.raises(secrets.SecretLeak):
        secrets.assert_clean("token tools-token-value-1234", where="a test")


def test_a_referenced_variable_changed_after_use_is_redacted_by_its_new_value(monkeypatch):
    """The environment is read as it is at each use (the values are not kept from the
    first): a credential rotated in the process, or one holding non-ASCII text, is a
    secret by the value the process now holds, and the old value no longer is."""
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_ROTATED", "first-token-value-1234")
    assert "first-token-value-1234" in secrets.secret_values()
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_ROTATED", "clé-secrète-deuxième")
    values = secrets.secret_values()
    assert "clé-secrète-deuxième" in values and "first-token-value-1234" not in values
    assert secrets.redact("sent clé-secrète-deuxième") == "sent [redacted]"
    monkeypatch.delenv("FIELDOPS_MCP_TOKEN_ROTATED")
    assert "clé-secrète-deuxième" not in secrets.secret_values()


def test_a_log_line_never_carries_a_configured_secret(settings):
    settings.FIELDOPS_CALLBACK_KEY = "callback-key-in-a-message"
    try:
        raise ValueError(f"signature check failed for {settings.FIELDOPS_CALLBACK_KEY}")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "fieldops.test",
        logging.ERROR,
        __file__,
        1,
        "key %s",
        ("callback-key-in-a-message",),
        exc_info,
    )
    line = JsonFormatter().format(record)
    assert "callback-key-in-a-message" not in line
    assert json.loads(line)["msg"] == "key [redacted]"


def test_error_reports_redact_secrets_from_settings_variables_and_messages(settings):
    settings.CELERY_BROKER_URL = "redis://:broker-password-1234@127.0.0.1:6379/7"
    settings.FIELDOPS_MODEL_API_KEY = KEY
    assert settings.DEFAULT_EXCEPTION_REPORTER == "fieldops.secrets.RedactingExceptionReporter"

    def failing() -> None:
        headers = {"Authorization": f"Bearer {KEY}"}  # a secret in a frame variable
        raise RuntimeError(f"request with {headers['Authorization']} failed")

    try:
        failing()
    except RuntimeError:
        exc_info = sys.exc_info()
    request = RequestFactory().get("/", HTTP_COOKIE="sessionid=session-cookie-value-1234")
    reporter = get_exception_reporter_class(request)(request, *exc_info, is_email=True)
    for report in (reporter.get_traceback_text(), reporter.get_traceback_html()):
        assert "RuntimeError" in report and "CELERY_BROKER_URL" in report
        for secret in (KEY, "broker-password-1234", "session-cookie-value-1234"):
            assert secret not in report


def test_a_model_key_with_a_line_break_is_not_configured_and_never_sent(world, caplog, settings):
    caplog.set_level(logging.DEBUG)
    with serve(FakeModel("double:reservation")) as fake:
        settings.FIELDOPS_MODEL_BASE_URL = fake.url
        settings.FIELDOPS_MODEL_NAME = "fake-model"
        settings.FIELDOPS_MODEL_API_KEY = KEY + "\n"  # pasted with its line break
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert fake.received == []
    assert run.terminal_reason == "correction_budget_exhausted"
    reasons = set(Event.objects.filter(run=run).values_list("reason_code", flat=True))
    assert "invalid_proposal:provider_error:not_configured" in reasons
    stored = json.dumps(list(Evidence.objects.filter(run=run).values_list("content", flat=True)))
    assert KEY not in stored and KEY not in caplog.text


def read_request(conn: Any) -> None:
    """Read one whole HTTP request (headers and body) from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)


@pytest.mark.parametrize(
    "answer", [b"SSH-2.0-not-http\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{"]
)
def test_an_endpoint_that_does_not_speak_http_is_a_stable_provider_error(world, settings, answer):
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def reply() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                read_request(conn)  # all of it: closing on unread data would be a reset
                conn.sendall(answer)

    thread = threading.Thread(target=reply, daemon=True)
    thread.start()
    settings.FIELDOPS_MODEL_BASE_URL = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    settings.FIELDOPS_MODEL_NAME = "fake-model"
    settings.FIELDOPS_MODEL_TIMEOUT_SECONDS = 5.0
    settings.FIELDOPS_MODEL_MAX_RETRIES = 0  # the server answers two calls, not SDK retries
    try:
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    finally:
        thread.join(timeout=5)
        server.close()
    assert run.terminal_reason == "correction_budget_exhausted"
    reasons = set(Event.objects.filter(run=run).values_list("reason_code", flat=True))
    assert "invalid_proposal:provider_error:malformed_response" in reasons
