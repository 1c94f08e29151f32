"""FieldOps settings.

The embedded default needs nothing: SQLite under ``var/`` and in-process execution.
Set ``DATABASE_URL`` (postgres://...) and ``FIELDOPS_EXECUTION=celery`` with
``CELERY_BROKER_URL`` to run on PostgreSQL + Redis + Celery workers.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FIELDOPS_VAR_DIR", BASE_DIR / "var"))


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# The authority's compare-and-set + event insert runs as a prepared statement on
# PostgreSQL. Set to "false" behind a pooler that cannot keep prepared statements
# (PgBouncer in transaction mode before 1.21).
FIELDOPS_PREPARED_STATEMENTS = env("FIELDOPS_PREPARED_STATEMENTS", "true").lower() != "false"


def env_millis(name: str, default: int) -> int:
    """A non-negative whole number of milliseconds from the environment (0: no limit)."""
    raw = os.environ.get(name, str(default)).strip()
    if not raw.isdigit():
        raise ValueError(f"{name} must be a whole number of milliseconds, not {raw!r}")
    return int(raw)


# PostgreSQL: a statement waiting for a lock gives up after FIELDOPS_LOCK_TIMEOUT_MS (so a
# paused process holding a row lock cannot stall every other one), and a session that
# sits inside a transaction doing nothing for FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS is
# ended by the server (its locks released).
FIELDOPS_LOCK_TIMEOUT_MS = env_millis("FIELDOPS_LOCK_TIMEOUT_MS", 5000)
FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS = env_millis(
    "FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60000
)
# Celery worker processes keep their database connection from one task to the next (a
# new PostgreSQL connection costs a backend process and re-prepares every statement:
# measured ~6 ms of server CPU and ~1.4 ms of client CPU, twice per run) for at most
# FIELDOPS_WORKER_CONN_MAX_AGE seconds, and close it once they have been idle for
# FIELDOPS_WORKER_IDLE_DISCONNECT_S seconds, so an idle fleet (every run waiting) holds no
# connection. Web processes use FIELDOPS_CONN_MAX_AGE (default 0: one per request).
FIELDOPS_WORKER_CONN_MAX_AGE = int(env("FIELDOPS_WORKER_CONN_MAX_AGE", "300"))
FIELDOPS_WORKER_IDLE_DISCONNECT_S = float(env("FIELDOPS_WORKER_IDLE_DISCONNECT_S", "1"))
# SQLite (the embedded default): how long a writer waits for the write lock.
FIELDOPS_SQLITE_BUSY_TIMEOUT_S = 20


def database_from_url(
    url: str,
    *,
    lock_timeout_ms: int | None = None,
    idle_in_transaction_timeout_ms: int | None = None,
) -> dict[str, object]:
    """Return a Django DATABASES entry for ``sqlite:///path`` or ``postgres://...``.

    The timeouts default to ``FIELDOPS_LOCK_TIMEOUT_MS`` and
    ``FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS``. Raise ValueError for another scheme.
    """
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("//") else parsed.path)
        if ":memory:" in (parsed.netloc, path.lstrip("/")):  # sqlite://:memory:, sqlite:///:memory:
            path = ":memory:"
        else:
            # No path (sqlite://) is the embedded default; its folder may not exist yet on
            # a fresh clone, and SQLite cannot create one.
            path = path or str(VAR_DIR / "db.sqlite3")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            # Concurrent users queue instead of failing with "database is locked":
            # - every atomic block starts BEGIN IMMEDIATE, taking the write lock up front;
            #   a deferred transaction that reads and then writes cannot wait for it (SQLite
            #   answers the lock upgrade with an immediate SQLITE_BUSY);
            # - "timeout" is the busy timeout: how long a writer waits for that lock;
            # - WAL: readers never block the writer, nor the writer them (synchronous stays
            #   FULL: a commit the page reported survives a power cut).
            "OPTIONS": {
                "timeout": FIELDOPS_SQLITE_BUSY_TIMEOUT_S,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL",
            },
        }
    if parsed.scheme in {"postgres", "postgresql"}:
        lock_ms = FIELDOPS_LOCK_TIMEOUT_MS if lock_timeout_ms is None else lock_timeout_ms
        idle_ms = (
            FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS
            if idle_in_transaction_timeout_ms is None
            else idle_in_transaction_timeout_ms
        )
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "fieldops",
            "USER": unquote(parsed.username or "postgres"),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "127.0.0.1",
            "PORT": str(parsed.port or 5432),
            "CONN_MAX_AGE": int(env("FIELDOPS_CONN_MAX_AGE", "0")),
            # A kept connection is checked before it is reused (after a server restart).
            "CONN_HEALTH_CHECKS": True,
            "TEST": {"NAME": env("FIELDOPS_TEST_DB_NAME") or None},
            # psycopg's own preparation stays off (prepare_threshold None: Django's cursors
            # bind client-side and are never prepared either way). The engine's statements
            # are prepared by fieldops/sql.py under its own names, and only there: psycopg,
            # holding none, never sends the DEALLOCATE ALL it sends after a rollback when
            # it does (see ``execute_prepared``).
            "OPTIONS": {
                "prepare_threshold": None,
                "options": f"-c lock_timeout={lock_ms} "
                f"-c idle_in_transaction_session_timeout={idle_ms}",
            },
        }
    raise ValueError(f"unsupported DATABASE_URL scheme: {parsed.scheme!r}")


SECRET_KEY = env("DJANGO_SECRET_KEY", "embedded-demo-only-not-a-secret-8d1f0c")
# Opt-in only: DEBUG shows every URL pattern on a 404 and a traceback on an error, to
# anyone who can reach the server (users of the other tenant included).
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    h for h in env("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver").split(",") if h
]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: runserver then leaves static files to whitenoise in every mode,
    # so the embedded console (DEBUG off) and DJANGO_DEBUG=true serve them the same way.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "access",
    "sim.world",
    "catalog",
    "runs",
    "approvals",
    "api",
    "operations",
    "sim",
]

MIDDLEWARE = [
    "fieldops.middleware.HeadWithoutBodyMiddleware",  # outermost: drops a HEAD answer's body
    "django.middleware.security.SecurityMiddleware",
    "fieldops.csp.ContentSecurityPolicyMiddleware",  # outermost but one: on every response
    # Outside every middleware that may refuse a request (CommonMiddleware's DisallowedHost
    # 400): the refusal is framed no more than a page is.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Before every middleware that validates the host: a probe naming the process by its
    # own address gets /healthz's liveness, not a 400.
    "fieldops.middleware.ProbeHostMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every console answer varies by the htmx headers (a region or the whole page).
    "fieldops.middleware.VaryOnHtmxMiddleware",
    # After WhiteNoise (static files keep their caching): no cache keeps an answer to a
    # signed-in user or to an API token.
    "fieldops.middleware.NoStoreWhenSignedInMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF: a body that cannot be decoded cannot be checked for a token either.
    "fieldops.middleware.RejectUndecodableBodyMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "fieldops.middleware.RejectNulMiddleware",  # after CSRF: a NUL in any field is a 400
    # After the NUL check: a console form field or query parameter sent twice is a 400.
    "fieldops.fields.RejectRepeatedFieldMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "runs.middleware.UndeliveredKickNoteMiddleware",  # after messages and auth
    "django_htmx.middleware.HtmxMiddleware",
    # After HtmxMiddleware, around everything that may answer with a login redirect.
    "fieldops.middleware.HtmxLoginRedirectMiddleware",
    # After auth and messages (its page is the console's): a bare 405 gets a body.
    "fieldops.middleware.MethodNotAllowedMiddleware",
    # A view whose database connection broke: the console's 503 page, not the 500.
    "fieldops.middleware.DatabaseUnavailableMiddleware",
    # Before any view hook reads the body: the import page's own over-limit refusal.
    "catalog.middleware.ImportBodyLimitMiddleware",
]

ROOT_URLCONF = "fieldops.urls"
WSGI_APPLICATION = "fieldops.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "access.context.roles",
                "access.context.navigation",
                "operations.saved_views.navigation",
            ],
        },
    }
]

DATABASES = {
    "default": database_from_url(env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"))
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# Where collectstatic writes (the production settings serve from there).
STATIC_ROOT = Path(os.environ.get("FIELDOPS_STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
# Plain storage here (tests use it too: manifest storage breaks live_server pages); the
# production settings collect into hashed, compressed files.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Whitenoise serves static files in every mode. The embedded default has no collectstatic
# step (`make run` on a fresh clone), so it serves straight from the finders; production
# serves what collectstatic wrote to STATIC_ROOT. Files at the site root (/favicon.ico).
WHITENOISE_USE_FINDERS = True
WHITENOISE_ROOT = BASE_DIR / "public"

SESSION_COOKIE_HTTPONLY = True
# Error reports (DEBUG page, mail to ADMINS) never show a configured secret (fieldops/secrets.py).
DEFAULT_EXCEPTION_REPORTER = "fieldops.secrets.RedactingExceptionReporter"
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_FAILURE_VIEW = "fieldops.middleware.csrf_failure"  # the 403 page links back to the form's page
X_FRAME_OPTIONS = "DENY"

# --- FieldOps ------------------------------------------------------------------------
# "inprocess": runs advance in the web process after each commit (embedded default).
# "celery": runs advance on Celery workers; the outbox and sweeper keep them moving.
# "deferred": nothing is handed over; the outbox keeps the work and a driver (the effect
# schedule explorer) advances runs itself.
FIELDOPS_EXECUTION = env("FIELDOPS_EXECUTION", "inprocess")
# Demo users (known password) exist only in the embedded demo set-up.
FIELDOPS_ALLOW_DEMO_USERS = env_bool("FIELDOPS_ALLOW_DEMO_USERS", True)
# Proxies in front of the web process whose X-Forwarded-For is trusted for the client's
# address (the sign-in throttle counts failures per address: access/signin.py). 0: none,
# the header is ignored; production defaults to 1 (its TLS-terminating proxy).
FIELDOPS_TRUSTED_PROXIES = int(env("FIELDOPS_TRUSTED_PROXIES", "0"))
FIELDOPS_LEASE_SECONDS = int(env("FIELDOPS_LEASE_SECONDS", "60"))
# A run that should move but shows no owner and no change for this long is re-driven.
FIELDOPS_STUCK_AFTER_SECONDS = float(env("FIELDOPS_STUCK_AFTER_SECONDS", "30"))
# A running bulk operation nobody progressed for this long is handed over again.
FIELDOPS_OPERATION_STALE_SECONDS = float(env("FIELDOPS_OPERATION_STALE_SECONDS", "30"))
# Items per batch of a bulk cancel (one transaction each).
FIELDOPS_OPERATION_BATCH_SIZE = int(env("FIELDOPS_OPERATION_BATCH_SIZE", "100"))
# A reconcile item's claim lasts this long; an item whose claimant died is claimable after.
FIELDOPS_OPERATION_CLAIM_SECONDS = float(env("FIELDOPS_OPERATION_CLAIM_SECONDS", "60"))
# A batch whose every run was held by another transaction waits this long before retrying.
FIELDOPS_OPERATION_RETRY_SECONDS = float(env("FIELDOPS_OPERATION_RETRY_SECONDS", "0.5"))
# Recovery attempts (lease takeovers) before a run that keeps killing workers fails.
FIELDOPS_MAX_ATTEMPTS = int(env("FIELDOPS_MAX_ATTEMPTS", "5"))
# Signed callbacks older than this are refused (replay protection).
FIELDOPS_CALLBACK_MAX_SKEW_SECONDS = int(env("FIELDOPS_CALLBACK_MAX_SKEW_SECONDS", "300"))
FIELDOPS_APPROVAL_TTL_SECONDS = int(env("FIELDOPS_APPROVAL_TTL_SECONDS", "900"))
# Approval notifications (approvals/notify.py, docs/approvals.md): "about to expire" notices
# this long before expiry (0: none); webhook retries with exponential backoff.
FIELDOPS_APPROVAL_REMIND_SECONDS = int(env("FIELDOPS_APPROVAL_REMIND_SECONDS", "180"))
FIELDOPS_NOTIFY_BACKOFF_SECONDS = int(env("FIELDOPS_NOTIFY_BACKOFF_SECONDS", "10"))
FIELDOPS_NOTIFY_MAX_ATTEMPTS = int(env("FIELDOPS_NOTIFY_MAX_ATTEMPTS", "6"))
FIELDOPS_WEBHOOK_TIMEOUT_SECONDS = float(env("FIELDOPS_WEBHOOK_TIMEOUT_SECONDS", "3"))
# Links in notifications point here (the console's public address).
FIELDOPS_BASE_URL = env("FIELDOPS_BASE_URL", "http://127.0.0.1:8000")
# Email: the embedded default writes messages as files under var/mail; a deployment sets
# EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and the EMAIL_* below.
EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = env("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env("EMAIL_PORT", "25"))
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = int(env("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "FieldOps <fieldops@localhost>")
FIELDOPS_EXTERNAL_WAIT_SECONDS = int(env("FIELDOPS_EXTERNAL_WAIT_SECONDS", "600"))
# A constant everyone can read: fine on 127.0.0.1, refused anywhere else (fieldops/checks.py,
# serve_embedded). Production requires its own key.
EMBEDDED_CALLBACK_KEY = "embedded-demo-callback-key"
FIELDOPS_CALLBACK_KEY = env("FIELDOPS_CALLBACK_KEY", EMBEDDED_CALLBACK_KEY)
# Bearer token for the counts in GET /healthz (empty: only signed-in users see them).
FIELDOPS_OPS_TOKEN = env("FIELDOPS_OPS_TOKEN", "")
# Traces go to this OTLP endpoint; none (the default) leaves tracing off.
FIELDOPS_OTLP_ENDPOINT = env(
    "FIELDOPS_OTLP_ENDPOINT", os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
)
FIELDOPS_HISTORY_WARN_EVENTS = int(env("FIELDOPS_HISTORY_WARN_EVENTS", "10000"))
FIELDOPS_HISTORY_MAX_EVENTS = int(env("FIELDOPS_HISTORY_MAX_EVENTS", "50000"))
FIELDOPS_HISTORY_WARN_BYTES = int(env("FIELDOPS_HISTORY_WARN_BYTES", str(10 * 1024 * 1024)))
FIELDOPS_HISTORY_MAX_BYTES = int(env("FIELDOPS_HISTORY_MAX_BYTES", str(50 * 1024 * 1024)))
FIELDOPS_MAX_EVENT_PAYLOAD_BYTES = 256 * 1024
FIELDOPS_SWEEP_INTERVAL_SECONDS = float(env("FIELDOPS_SWEEP_INTERVAL_SECONDS", "5"))
# How long a reconciliation read waits for an in-flight commit of the same key before it
# answers "busy" (the run stays RECOVERING and is asked again later).
FIELDOPS_RECONCILE_LOCK_MS = int(env("FIELDOPS_RECONCILE_LOCK_MS", "1000"))

# Model client (runs/policies/model_client.py). The policy double stays the default policy;
# a run created with the scenario "model" asks the API named here through its official SDK:
# "openai-chat" (Chat Completions, any OpenAI-compatible base URL), "openai-responses"
# (Responses) or "anthropic-messages" (Messages). Without a base URL the SDK's own endpoint
# is used (a key is then required). Timeout is per attempt; the SDK retries transient
# failures MAX_RETRIES times, and the whole call must fit in FIELDOPS_LEASE_SECONDS.
FIELDOPS_MODEL_API = env("FIELDOPS_MODEL_API", "openai-chat")
FIELDOPS_MODEL_BASE_URL = env("FIELDOPS_MODEL_BASE_URL", "")
FIELDOPS_MODEL_NAME = env("FIELDOPS_MODEL_NAME", "")
FIELDOPS_MODEL_API_KEY = env("FIELDOPS_MODEL_API_KEY", "")
FIELDOPS_MODEL_TIMEOUT_SECONDS = float(env("FIELDOPS_MODEL_TIMEOUT_SECONDS", "15"))
FIELDOPS_MODEL_MAX_RETRIES = int(env("FIELDOPS_MODEL_MAX_RETRIES", "2"))
FIELDOPS_MODEL_MAX_TOKENS = int(env("FIELDOPS_MODEL_MAX_TOKENS", "1024"))

# --- Celery (used when FIELDOPS_EXECUTION=celery) -------------------------------------
# Chosen for correctness; see README "Running on PostgreSQL + Redis + Celery".
CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/7")
CELERY_TASK_DEFAULT_QUEUE = env("FIELDOPS_QUEUE", "fieldops")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_TIME_LIMIT = 120
CELERY_TASK_SOFT_TIME_LIMIT = 100
# Publishing is bounded: a kick is sent after its transition committed and the outbox
# row is the real delivery, so a broker that refuses connections costs a web request about
# 0.3 s (three tries), never an error page; one that accepts but does not answer is given
# up after the socket timeouts. The sweeper re-drives what was not sent.
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.1,
    "interval_max": 0.2,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 1.0
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 600,
    "socket_connect_timeout": 1.0,
    "socket_timeout": 2.0,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery's Django fix-up closes a worker's database connections around every task unless
# this is set; it then closes them every this many tasks. Between, the worker applies
# Django's own rules (FIELDOPS_WORKER_CONN_MAX_AGE, health checks, idle disconnect: see
# fieldops/celery.py).
CELERY_DB_REUSE_MAX = 1000

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "fieldops.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "loggers": {
        "fieldops": {
            "handlers": ["console"],
            "level": env("FIELDOPS_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

# Live tool discovery (issue 17). stdio servers run on this host: only these commands may be
# registered (names are looked up beside the Python executable, then on PATH).
FIELDOPS_MCP_STDIO_COMMANDS = [
    c.strip()
    for c in env("FIELDOPS_MCP_STDIO_COMMANDS", "mcp-server-time,mcp-server-git").split(",")
    if c.strip()
]
# Below gunicorn's 30 s worker timeout: "Discover now" runs inside the web request.
FIELDOPS_DISCOVERY_TIMEOUT_SECONDS = float(env("FIELDOPS_DISCOVERY_TIMEOUT_SECONDS", "20"))
# Scheduled re-discovery of every registered server (Celery beat).
FIELDOPS_REDISCOVER_INTERVAL_SECONDS = float(env("FIELDOPS_REDISCOVER_INTERVAL_SECONDS", "3600"))
