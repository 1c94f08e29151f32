"""Production settings: everything secure by default, nothing embedded.

Required environment: DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS, DATABASE_URL (PostgreSQL,
as the application role: see docs/security.md), CELERY_BROKER_URL, FIELDOPS_CALLBACK_KEY;
optional FIELDOPS_OPS_TOKEN (the counts of /healthz and GET /metrics) and
OTEL_EXPORTER_OTLP_ENDPOINT (traces: docs/observability.md). docker-compose.yml reads them from
.env (.env.example lists them). `manage.py check --deploy` must report nothing
with these settings (the test command checks it).
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from fieldops.settings import *  # noqa: F403
from fieldops.settings import database_from_url, env


def required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(f"{name} must be set in production")
    return value


DEBUG = False
SECRET_KEY = required("DJANGO_SECRET_KEY")
ALLOWED_HOSTS = [h for h in required("DJANGO_ALLOWED_HOSTS").split(",") if h]
FIELDOPS_CALLBACK_KEY = required("FIELDOPS_CALLBACK_KEY")
FIELDOPS_EXECUTION = env("FIELDOPS_EXECUTION", "celery")
if FIELDOPS_EXECUTION == "celery":
    # No embedded default: web, workers and beat must all name the same broker.
    CELERY_BROKER_URL = required("CELERY_BROKER_URL")
FIELDOPS_ALLOW_DEMO_USERS = False
DATABASES = {"default": database_from_url(required("DATABASE_URL"))}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("production runs on PostgreSQL (set DATABASE_URL=postgres://...)")

# Transport and cookies.
SECURE_SSL_REDIRECT = True
# Behind one TLS-terminating proxy, which must send X-Forwarded-Proto (https), keep Host,
# and append the client's address to X-Forwarded-For (the sign-in throttle's address).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
FIELDOPS_TRUSTED_PROXIES = int(env("FIELDOPS_TRUSTED_PROXIES", "1"))
# Probes reach the process directly over plain HTTP (no proxy header): /healthz answers
# them (liveness, nothing secret), instead of a 301 that says nothing about health.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = 60 * 60 * 24 * 365
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = 8 * 60 * 60
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True  # htmx sends the token from the page, never from the cookie
X_FRAME_OPTIONS = "DENY"

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Serve what collectstatic wrote (hashed, compressed, cached forever), not the source tree.
WHITENOISE_USE_FINDERS = False
