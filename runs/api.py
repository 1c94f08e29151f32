"""Machine endpoints: the signed callback receiver and the health report.

The health report is liveness for anyone; its counts need the ops token or a session.

Callbacks are authenticated with an HMAC-SHA256 signature over ``timestamp.body`` using
the callback signing key (settings.FIELDOPS_CALLBACK_KEY), so they are exempt from CSRF
but never from authentication. See docs/callbacks.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import sys
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.db.models import Count, Min
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from access.roles import tenant_of
from approvals.models import Checkpoint
from fieldops.http import declares_json
from kernel import clock
from kernel.canonical import RepeatedKey, object_without_repeated_keys, unstorable
from runs import callbacks
from runs.models import CallbackReceipt, Correlation, Run, WorkerHeartbeat

MAX_CALLBACK_BYTES = 64 * 1024
SIGNATURE_HEADER = "X-FieldOps-Signature"
TIMESTAMP_HEADER = "X-FieldOps-Timestamp"

# outcome -> HTTP status. Everything but "accepted" was recorded and changed nothing.
CALLBACK_STATUS = {
    "accepted": 202,
    "duplicate": 200,
    "delivery_id_reused": 409,
    "orphaned": 404,
    "old_epoch": 409,
    "post_terminal": 409,
    "wrong_state": 409,
    "unexpected_type": 409,
}


def sign(body: bytes, timestamp: str, key: str | None = None) -> str:
    """Return the signature header value for ``body`` sent at ``timestamp``."""
    secret = (key if key is not None else settings.FIELDOPS_CALLBACK_KEY).encode()
    digest = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": code, "message": message}, status=status)


def _authenticated(request: HttpRequest, body: bytes) -> JsonResponse | None:
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not timestamp or not signature:
        return _error(401, "unsigned", f"{SIGNATURE_HEADER} and {TIMESTAMP_HEADER} are required")
    try:
        sent = float(timestamp)
    except ValueError:
        return _error(401, "bad_timestamp", "timestamp must be Unix seconds")
    if not math.isfinite(sent):  # "nan" would pass every window comparison
        return _error(401, "bad_timestamp", "timestamp must be Unix seconds")
    if abs(time.time() - sent) > settings.FIELDOPS_CALLBACK_MAX_SKEW_SECONDS:
        return _error(401, "stale_signature", "timestamp outside the accepted window")
    if not hmac.compare_digest(signature, sign(body, timestamp)):
        return _error(401, "bad_signature", "signature does not match")
    return None


def _too_many_digits() -> str:
    return f"a number has more than {sys.get_int_max_str_digits()} digits"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# A callback's text fields and the longest each may be: what the columns that record them
# hold (a correlation id names a Correlation row and is kept on the receipt).
_TEXT_FIELDS = {
    "delivery_id": CallbackReceipt._meta.get_field("delivery_id").max_length or 64,
    "correlation_id": min(
        Correlation._meta.get_field("id").max_length or 40,
        CallbackReceipt._meta.get_field("correlation_id").max_length or 40,
    ),
    "response_type": Correlation._meta.get_field("expected_response_type").max_length or 64,
}


def _fields(data: Any) -> dict[str, Any] | str:
    if not isinstance(data, dict):
        return "body must be a JSON object"
    problem = unstorable(data)
    if problem:
        return problem
    out: dict[str, Any] = {}
    for name, longest in _TEXT_FIELDS.items():
        value = data.get(name)
        if not isinstance(value, str) or not 0 < len(value) <= longest:
            return f"{name} must be a string of 1 to {longest} characters"
        out[name] = value
    for name in ("attempt", "owner_epoch"):
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{name} must be a non-negative integer"
        out[name] = value
    payload = data.get("payload", {})
    if not isinstance(payload, dict):
        return "payload must be a JSON object"
    out["payload"] = payload
    extra = set(data) - {
        "delivery_id",
        "correlation_id",
        "response_type",
        "attempt",
        "owner_epoch",
        "payload",
    }
    if extra:
        return f"unknown fields: {', '.join(sorted(extra))}"
    return out


@csrf_exempt
@require_POST
def callback(request: HttpRequest) -> JsonResponse:
    """Receive one external callback for a WAITING_EXTERNAL run (signed, correlated)."""
    too_large = _error(413, "too_large", f"callbacks are limited to {MAX_CALLBACK_BYTES} bytes")
    try:
        body = request.body
    except RequestDataTooBig:  # over DATA_UPLOAD_MAX_MEMORY_SIZE: Django's HTML 400 otherwise
        return too_large
    if len(body) > MAX_CALLBACK_BYTES:
        return too_large
    refused = _authenticated(request, body)
    if refused is not None:
        return refused
    # Like the JSON API: a body is read only when it is declared JSON (after the signature,
    # so an unsigned sender learns nothing more), and only as UTF-8 (given bytes, Python's
    # json guesses UTF-16 and UTF-32 too, and calls invalid UTF-8 an over-long number); a
    # leading byte order mark is ignored (RFC 8259 allows it).
    if not declares_json(request):
        sent = request.headers.get("Content-Type", "")
        how = f"as {sent[:80]!r}" if sent else "with no Content-Type"
        return _error(
            415,
            "unsupported_media_type",
            "the body must be JSON sent with Content-Type: application/json "
            f"(this one was sent {how}); nothing was recorded",
        )
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        return _error(400, "malformed_json", "body is not UTF-8 text")
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=object_without_repeated_keys
        )
    except RepeatedKey as exc:
        return _error(400, "malformed_json", str(exc))
    except json.JSONDecodeError as exc:  # where, so the sender can find it
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        return _error(400, "malformed_json", f"body is not valid JSON ({where})")
    except RecursionError:  # nesting deeper than the parser's
        return _error(400, "malformed_json", "body nests objects or arrays too deeply")
    except ValueError as exc:  # NaN/Infinity (their own words) or an over-long integer
        told = str(exc) if str(exc).endswith("is not JSON") else _too_many_digits()
        return _error(400, "malformed_json", f"body is not valid JSON ({told})")
    fields = _fields(data)
    if isinstance(fields, str):
        return _error(400, "invalid_callback", fields)
    outcome = callbacks.callback_receive(**fields)
    return JsonResponse(
        {"outcome": outcome.outcome, "run_id": outcome.run_id, "detail": outcome.detail},
        status=CALLBACK_STATUS.get(outcome.outcome, 409),
    )


def _ops_token_given(request: HttpRequest) -> bool:
    token = str(settings.FIELDOPS_OPS_TOKEN or "")
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def _counts_scope(request: HttpRequest) -> tuple[bool, str | None]:
    """Whether this request may see the counts, and for which tenant (None: every one).

    The ops token sees every tenant; a signed-in user sees their own tenant; anyone else
    sees liveness only."""
    if _ops_token_given(request):
        return True, None
    user = getattr(request, "user", None)
    tenant = tenant_of(user) if user is not None else None
    return (tenant is not None), tenant


# Read-only, read by programs that hold no CSRF token: a POST gets its 405 in this
# endpoint's own format (fieldops.middleware.machine_error), not the console's CSRF page.
@csrf_exempt
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """Liveness for anyone: ``status`` and ``ok`` per dependency (database, broker).

    With the ops token (``Authorization: Bearer $FIELDOPS_OPS_TOKEN``, every tenant) or a
    signed-in session (that user's tenant) it adds the details: database latency, worker
    heartbeat age, sweeper lag, runs per state and the oldest pending approval. 503 when
    the database or the configured broker is down; a silent sweeper is ``degraded`` with
    200 (``sweeper``: see below)."""
    allowed, tenant = _counts_scope(request)
    try:
        started = time.monotonic()
        with connection.cursor() as cursor:
            # A table every process reads (db_roles grants it to the application role), not
            # just ``SELECT 1``: a role that connects but was never granted the tables
            # (``manage.py db_roles`` not run) answers every page with a 500.
            cursor.execute("SELECT 1 FROM django_migrations LIMIT 1")
        latency_ms = round((time.monotonic() - started) * 1000, 2)
    except Exception as exc:  # the report must answer even when the database cannot
        database: dict[str, Any] = {"ok": False}
        if allowed:
            database["error"] = type(exc).__name__
            if getattr(exc.__cause__, "sqlstate", None) == "42501":  # insufficient_privilege
                database["hint"] = (
                    "this database role may not read the tables: run "
                    "`manage.py db_roles --app-role ROLE` as the tables' owner (docs/security.md)"
                )
        return JsonResponse({"status": "unhealthy", "database": database}, status=503)
    broker = _broker()
    healthy = bool(broker.get("ok", True))
    sweeper = _sweeper()
    report: dict[str, Any] = {
        "status": "ok" if healthy and sweeper["ok"] else "degraded",
        "database": {"ok": True},
        "broker": {k: v for k, v in broker.items() if allowed or k != "error"},
        "sweeper": sweeper,
    }
    if allowed:
        report["database"].update(vendor=connection.vendor, latency_ms=latency_ms)
        report.update(_details(tenant))
    # A silent sweeper (beat down) degrades the report but not the HTTP status: the load
    # balancer probes this address for the web process, which still serves every page,
    # the recovery page that lists what is stuck among them (there is no separate
    # readiness address to fail instead). Monitors alert on ``sweeper.status``.
    return JsonResponse(report, status=200 if healthy else 503)


def _sweeper() -> dict[str, Any]:
    """The sweeper (Celery beat's sweep; the embedded server's sweeper thread) as the
    recovery page judges it: ``silent`` after 3 sweep intervals (never under 60 s) without
    a sweep, or when none ever reported; ``starting`` (not a problem) while a sweeper that
    just started has not swept yet and its first sweep is not overdue; ``unknown`` when
    its heartbeat cannot be read; ``last_seen`` its last sweep (None: never)."""
    from runs.console.recovery_selectors import sweeper_report

    try:
        seen = sweeper_report()
    except Exception:  # report, never raise, from a health check (a database not migrated)
        return {"ok": False, "status": "unknown", "last_seen": None}
    return {
        "ok": not seen.late,
        "status": "silent" if seen.late else "starting" if seen.starting else "ok",
        "last_seen": seen.seen_at.isoformat() if seen.seen_at else None,
    }


def _details(tenant: str | None) -> dict[str, Any]:
    """What operators monitor, for ``tenant`` (None: every tenant)."""
    now = clock.now()
    beats = list(WorkerHeartbeat.objects.values("worker", "role", "seen_at"))
    workers = [b for b in beats if b["role"] not in WorkerHeartbeat.SWEEPER_ROLES]
    sweeper = next((b for b in beats if b["role"] == WorkerHeartbeat.SWEEPER), None)
    last = max((b["seen_at"] for b in workers), default=None)
    runs = Run.objects.all() if tenant is None else Run.objects.filter(tenant=tenant)
    pending = Checkpoint.objects.filter(status=Checkpoint.Status.PENDING)
    if tenant is not None:
        pending = pending.filter(tenant=tenant)
    oldest = pending.aggregate(oldest=Min("created_at"))["oldest"]
    return {
        "scope": "all tenants" if tenant is None else f"tenant {tenant}",
        "execution": settings.FIELDOPS_EXECUTION,
        "last_worker_heartbeat_age_s": (now - last).total_seconds() if last else None,
        "sweeper_lag_s": (now - sweeper["seen_at"]).total_seconds() if sweeper else None,
        "runs_per_state": dict(runs.values_list("state").annotate(n=Count("id")).order_by()),
        "oldest_pending_approval_age_s": (now - oldest).total_seconds() if oldest else None,
    }


def _broker() -> dict[str, Any]:
    if settings.FIELDOPS_EXECUTION != "celery":
        return {"ok": True, "used": False}
    try:
        from fieldops.celery import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True, "used": True}
    except Exception as exc:  # report, never raise, from a health check
        return {"ok": False, "used": True, "error": type(exc).__name__}
