"""The signed callback endpoint: request, authentication and every response."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from kernel import clock
from runs import services
from runs.api import sign
from runs.engine import sweeper
from runs.models import CallbackReceipt, Correlation, Event, WorkerHeartbeat
from tests.helpers import make_run

URL = "/api/callbacks/"


def post(client, data, *, key=None, timestamp=None, raw=None):
    body = raw if raw is not None else json.dumps(data).encode()
    ts = timestamp or str(int(time.time()))
    return client.post(
        URL,
        data=body,
        content_type="application/json",
        HTTP_X_FIELDOPS_TIMESTAMP=ts,
        HTTP_X_FIELDOPS_SIGNATURE=sign(body, ts, key),
    )


@pytest.fixture
def waiting(world):
    run = make_run("wait_external")
    assert run.state == "WAITING_EXTERNAL"
    return run


def body_for(run, **over):
    c = Correlation.objects.get(pk=run.waiting_correlation)
    data = {
        "delivery_id": f"d-{run.pk.hex[:10]}",
        "correlation_id": c.pk,
        "attempt": c.attempt,
        "owner_epoch": c.owner_epoch,
        "response_type": c.expected_response_type,
        "payload": {"window": "08:00"},
    }
    data.update(over)
    return data


def test_a_correlated_signed_callback_advances_the_run(client, waiting):
    response = post(client, body_for(waiting))
    assert response.status_code == 202 and response.json()["outcome"] == "accepted"
    assert Event.objects.filter(run=waiting, type="external.observed").exists()
    waiting.refresh_from_db()
    assert waiting.state == "OBSERVING"  # the worker continues from here


def test_a_duplicate_delivery_is_recorded_and_changes_nothing(client, waiting):
    data = body_for(waiting)
    assert post(client, data).status_code == 202
    again = post(client, data)
    assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
    assert Event.objects.filter(run=waiting, type="external.observed").count() == 1
    assert Event.objects.filter(run=waiting, type="duplicate.deduplicated").exists()


def test_an_old_epoch_is_recorded_and_denied(client, waiting):
    data = body_for(waiting)
    data["owner_epoch"] -= 1
    response = post(client, data)
    assert response.status_code == 409 and response.json()["outcome"] == "old_epoch"
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_EXTERNAL"
    assert Event.objects.filter(run=waiting, reason_code="callback_old_epoch").exists()


def test_an_orphan_is_recorded(client, world):
    response = post(
        client,
        {
            "delivery_id": "d-orphan",
            "correlation_id": "co-nothing",
            "attempt": 1,
            "owner_epoch": 1,
            "response_type": "x",
            "payload": {},
        },
    )
    assert response.status_code == 404 and response.json()["outcome"] == "orphaned"
    assert CallbackReceipt.objects.get(delivery_id="d-orphan").outcome == "orphaned"


def test_a_callback_after_the_end_cannot_reopen_the_run(client, waiting):
    data = body_for(waiting)
    services.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="stop")
    response = post(client, data)
    assert response.status_code == 409 and response.json()["outcome"] == "post_terminal"
    waiting.refresh_from_db()
    assert waiting.state == "CANCELLED"
    assert Event.objects.filter(run=waiting, reason_code="post_terminal_callback").exists()


@pytest.mark.parametrize(
    ("mutate", "status", "error"),
    [
        (lambda d: ({}, {"key": "wrong-key"}), 401, "bad_signature"),
        (lambda d: ({}, {"timestamp": "1000"}), 401, "stale_signature"),
        (lambda d: ({}, {"timestamp": "yesterday"}), 401, "bad_timestamp"),
        (lambda d: ({"attempt": "one"}, {}), 400, "invalid_callback"),
        (lambda d: ({"surprise": 1}, {}), 400, "invalid_callback"),
        # Longer than any correlation id can be (its column holds 40): refused as input,
        # not failed on the receipt's column.
        (lambda d: ({"correlation_id": "c" * 41}, {}), 400, "invalid_callback"),
        (lambda d: ({"delivery_id": "d" * 65}, {}), 400, "invalid_callback"),
        (lambda d: ({}, {"raw": b"{not json"}), 400, "malformed_json"),
        (lambda d: ({}, {"raw": b"x" * 70_000}), 413, "too_large"),
    ],
)
def test_bad_requests_are_refused_without_any_change(client, waiting, mutate, status, error):
    changes, options = mutate(None)
    data = {**body_for(waiting), **changes}
    before = Event.objects.filter(run=waiting).count()
    response = post(client, data, **options)
    assert response.status_code == status and response.json()["error"] == error
    assert Event.objects.filter(run=waiting).count() == before
    assert not CallbackReceipt.objects.exists()


def test_unsigned_requests_and_other_methods_are_refused(client, waiting):
    unsigned = client.post(URL, data=json.dumps(body_for(waiting)), content_type="application/json")
    assert unsigned.status_code == 401 and unsigned.json()["error"] == "unsigned"
    assert client.get(URL).status_code == 405


DETAILS = {
    "scope",
    "execution",
    "last_worker_heartbeat_age_s",
    "sweeper_lag_s",
    "runs_per_state",
    "oldest_pending_approval_age_s",
}


def _sweeper_seen(ago: dt.timedelta) -> dt.datetime:
    """The sweeper's heartbeat as a sweep ``ago`` left it; its time as /healthz names it."""
    seen = clock.now() - ago
    WorkerHeartbeat.objects.update_or_create(
        worker="sweeper", defaults={"role": "sweeper", "seen_at": seen}
    )
    return seen


def test_anonymous_health_is_liveness_per_dependency_only(client, waiting, settings):
    settings.FIELDOPS_OPS_TOKEN = "ops-token-for-tests-0123456789"
    seen = _sweeper_seen(dt.timedelta(seconds=2))
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "ops-token"}):
        response = client.get("/healthz", headers=headers)
        assert response.status_code == 200
        assert response.json() == {
            "status": "ok",
            "database": {"ok": True},
            "broker": {"ok": True, "used": False},
            "sweeper": {"ok": True, "status": "ok", "last_seen": seen.isoformat()},
        }


def test_health_says_when_the_sweeper_has_been_silent_without_taking_web_down(
    client, world, settings
):
    # /healthz answered "ok" while beat (the only sweeper) had been silent for many
    # intervals: nothing handed over a run whose worker died, no checkpoint expired, and
    # the recovery page said so but the health endpoint did not. It now reports the
    # sweeper as the recovery page judges it (silent after 3 intervals, never under 60 s)
    # and the report as degraded; the HTTP status stays 200, since the load balancer
    # probes /healthz for the web process, which serves the recovery page and its
    # runbook step (manage.py sweep) and must not be taken out for a beat outage.
    settings.FIELDOPS_SWEEP_INTERVAL_SECONDS = 5
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["sweeper"] == {"ok": False, "status": "silent", "last_seen": None}
    seen = _sweeper_seen(dt.timedelta(minutes=15))
    response = client.get("/healthz")
    assert response.status_code == 200
    report = response.json()
    assert report["status"] == "degraded" and report["database"]["ok"] is True
    assert report["sweeper"] == {"ok": False, "status": "silent", "last_seen": seen.isoformat()}
    seen = _sweeper_seen(dt.timedelta(seconds=50))  # under the 60 s floor: not silent yet
    assert client.get("/healthz").json()["sweeper"]["status"] == "ok"
    assert client.get("/healthz").json()["status"] == "ok"


def test_health_says_starting_not_silent_after_a_fresh_start_until_the_first_sweep_is_due(
    client, world, settings
):
    """A fresh start (``make run``, beat started) was reported silent and degraded until its
    first sweep, a problem that did not exist. A sweeper that started and has not swept yet
    is ``starting`` while its first sweep is not overdue (the same allowance as silence:
    3 intervals, never under 60 s, from its start); one that starts and never sweeps is
    still reported silent after that, and so is one whose last sweep came before."""
    settings.FIELDOPS_SWEEP_INTERVAL_SECONDS = 5
    seen = _sweeper_seen(dt.timedelta(minutes=15))  # the sweep before the restart
    sweeper.sweeper_started()
    report = client.get("/healthz").json()
    assert report["status"] == "ok"
    assert report["sweeper"] == {"ok": True, "status": "starting", "last_seen": seen.isoformat()}
    clock.advance(59)
    assert client.get("/healthz").json()["sweeper"]["status"] == "starting"
    clock.advance(2)  # a minute after its start and still no sweep: silent
    report = client.get("/healthz").json()
    assert report["status"] == "degraded"
    assert report["sweeper"] == {"ok": False, "status": "silent", "last_seen": seen.isoformat()}
    sweeper.sweep()  # it sweeps after all
    report = client.get("/healthz").json()
    assert report["status"] == "ok" and report["sweeper"]["status"] == "ok"
    # A fresh database: no sweep ever, a sweeper just started.
    WorkerHeartbeat.objects.all().delete()
    sweeper.sweeper_started()
    assert client.get("/healthz").json()["sweeper"] == {
        "ok": True,
        "status": "starting",
        "last_seen": None,
    }
    clock.advance(61)
    assert client.get("/healthz").json()["sweeper"]["status"] == "silent"


def test_health_counts_need_the_ops_token_and_cover_every_tenant(client, waiting, settings):
    make_run("wait_external", tenant="south", equipment_id="EQ-31", location_id="LOC-S1")
    settings.FIELDOPS_OPS_TOKEN = "ops-token-for-tests-0123456789"
    auth = {"authorization": "Bearer ops-token-for-tests-0123456789"}
    _sweeper_seen(dt.timedelta(seconds=1))
    report = client.get("/healthz", headers=auth).json()
    assert report["status"] == "ok" and report["database"]["ok"]
    assert report["database"]["vendor"] and "latency_ms" in report["database"]
    assert set(report) >= DETAILS and report["scope"] == "all tenants"
    assert report["runs_per_state"]["WAITING_EXTERNAL"] == 2
    settings.FIELDOPS_OPS_TOKEN = ""  # no token configured: no bearer opens the counts
    bare = client.get("/healthz", headers={"authorization": "Bearer "}).json()
    assert "runs_per_state" not in bare


def test_a_signed_in_user_sees_the_counts_of_their_own_tenant(client, waiting, operator):
    make_run("wait_external", tenant="south", equipment_id="EQ-31", location_id="LOC-S1")
    client.force_login(operator)
    report = client.get("/healthz").json()
    assert report["scope"] == "tenant north"
    assert report["runs_per_state"] == {"WAITING_EXTERNAL": 1}


def test_health_is_degraded_when_the_broker_is_down(client, world, settings, monkeypatch):
    settings.FIELDOPS_EXECUTION = "celery"
    from fieldops.celery import app

    # Celery reads the CELERY_BROKER_URL environment variable before its own setting (a
    # shell that follows the README's deployment steps has it): point both at nothing.
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    app._pool = None
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app._pool = None
    assert response.status_code == 503 and response.json()["broker"]["ok"] is False


def test_a_signed_callback_that_gives_a_key_twice_is_refused_without_any_change(client, waiting):
    """{"owner_epoch": 1, "owner_epoch": 2}: the sender's parser may have meant the first,
    Python's took the last; the callback was judged on a value its sender may not have
    meant. It is a 400 naming the key, nothing recorded."""
    data = body_for(waiting)
    text = json.dumps(data)
    raw = text[:-1] + f', "owner_epoch": {data["owner_epoch"] + 1}}}'
    before = Event.objects.filter(run=waiting).count()
    response = post(client, None, raw=raw.encode())
    assert response.status_code == 400
    assert response.json() == {
        "error": "malformed_json",
        "message": "the key 'owner_epoch' appears twice in one object",
    }
    nested = text.replace('"payload": {', '"payload": {"window": "09:00", ')
    response = post(client, None, raw=nested.encode())
    assert response.status_code == 400 and "'window' appears twice" in response.json()["message"]
    assert Event.objects.filter(run=waiting).count() == before
    assert not CallbackReceipt.objects.exists()


def _post_as(client, body: bytes, content_type: str | None):
    """A signed callback whose body is sent under ``content_type`` (None: no header)."""
    ts = str(int(time.time()))
    headers = {"HTTP_X_FIELDOPS_TIMESTAMP": ts, "HTTP_X_FIELDOPS_SIGNATURE": sign(body, ts)}
    if content_type is None:
        return client.generic("POST", URL, body, **headers)
    return client.generic("POST", URL, body, content_type=content_type, **headers)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=b",
        "text/json",
        "application/json; charset=latin-1",  # JSON is UTF-8 (RFC 8259)
        None,  # no Content-Type at all
    ],
)
def test_a_signed_callback_not_declared_json_is_a_415_and_changes_nothing(
    client, waiting, content_type
):
    """Found over HTTP (2026-12-07): a correlated, signed callback sent as text/plain, as a
    form or with no Content-Type was read as JSON and advanced the run (202). The JSON API
    refuses such a body with a 415; the callback now does the same, and records nothing."""
    before = Event.objects.filter(run=waiting).count()
    response = _post_as(client, json.dumps(body_for(waiting)).encode(), content_type)
    assert response.status_code == 415, response.content[:300]
    answer = response.json()
    assert answer["error"] == "unsupported_media_type"
    assert "Content-Type: application/json" in answer["message"]
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_EXTERNAL"
    assert Event.objects.filter(run=waiting).count() == before
    assert not CallbackReceipt.objects.exists()


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/vnd.depot+json"],
)
def test_a_signed_callback_declared_json_in_any_usual_spelling_is_read(
    client, waiting, content_type
):
    response = _post_as(client, json.dumps(body_for(waiting)).encode(), content_type)
    assert response.status_code == 202 and response.json()["outcome"] == "accepted"


def test_an_unsigned_callback_of_another_type_is_still_the_401(client, waiting):
    # The type is judged after the signature: an unsigned sender learns nothing more.
    body = json.dumps(body_for(waiting)).encode()
    response = client.post(URL, body, content_type="text/plain")
    assert response.status_code == 401 and response.json()["error"] == "unsigned"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"delivery_id": "\xff\xfe"}',  # not UTF-8 at all
        json.dumps({"delivery_id": "d-utf16"}).encode("utf-16"),  # JSON, but not UTF-8
        json.dumps({"delivery_id": "d-utf32"}).encode("utf-32"),
    ],
)
def test_a_signed_callback_that_is_not_utf8_says_so_and_records_nothing(client, waiting, raw):
    """Found over HTTP: invalid UTF-8 was refused as "a number has more than 4300 digits",
    and a UTF-16 or UTF-32 body was read (Python guesses the encoding of bytes)."""
    response = post(client, None, raw=raw)
    assert response.status_code == 400
    assert response.json() == {"error": "malformed_json", "message": "body is not UTF-8 text"}
    assert not CallbackReceipt.objects.exists()


def test_a_signed_callback_in_utf8_with_a_byte_order_mark_is_read(client, waiting):
    # RFC 8259 lets a parser ignore the mark (it was read before the UTF-8 check too).
    response = post(client, None, raw=b"\xef\xbb\xbf" + json.dumps(body_for(waiting)).encode())
    assert response.status_code == 202 and response.json()["outcome"] == "accepted"
