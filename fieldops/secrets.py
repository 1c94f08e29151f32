"""Secret hygiene: the values FieldOps must never write into events, evidence, logs or
error reports.

Every configured secret is registered here: SECRET_KEY, the callback signing key, the model
API key, the ops token of /healthz, the database password and the password in the Celery
broker URL; and the values of this process's environment variables that MCP tool servers'
credential references and environment entries may name (``FIELDOPS_MCP_TOKEN_*``,
``FIELDOPS_MCP_ENV_*``), read afresh at each call (they are read so at connect time).
``assert_clean``
refuses to store text that contains one; ``redact`` removes them from anything shown or
logged (the JSON log formatter applies it to every line); ``RedactingExceptionReporter``
removes them from Django's error reports (the DEBUG page and the mail to ADMINS), which
otherwise show settings Django does not recognise as sensitive (a broker URL with a
password) and the local variables of every failing frame (an Authorization header being
built). Session cookies are cleansed from those reports by Django itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from html import escape
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.views.debug import ExceptionReporter

_SETTINGS = (
    "SECRET_KEY",
    "FIELDOPS_CALLBACK_KEY",
    "FIELDOPS_MODEL_API_KEY",
    "FIELDOPS_OPS_TOKEN",
)
_URL_SETTINGS = ("CELERY_BROKER_URL",)
_MIN_LEN = 8
# Environment variables only a tool server's reference may name (catalog/servers.py).
_ENV_PREFIXES = ("FIELDOPS_MCP_TOKEN_", "FIELDOPS_MCP_ENV_")
REDACTED = "[redacted]"


class SecretLeak(ValueError):
    pass


@lru_cache(maxsize=32)
def _url_password(url: str) -> str:
    try:
        return unquote(urlsplit(url).password or "")
    except ValueError:
        return ""


_values: list[str] | None = None


def secret_values() -> list[str]:
    """The configured secret values (8 characters or more). Read once: evidence stores and
    context projections ask for them hundreds of times per run; read again after any
    setting changes (``setting_changed``: tests' overrides)."""
    global _values
    if _values is None:
        _values = _read_secret_values()
    referenced = _referenced_values()
    return [*_values, *referenced] if referenced else _values


# On POSIX ``os.environ`` wraps a dict of bytes (``_data``: CPython's since 3.2, the dict
# its own setters, ``monkeypatch.setenv`` included, update). Scanning that dict is ~5x
# cheaper than ``os.environ.items()``, which decodes every name and value in Python: a
# run's evidence and context asked for the secret values ~220 times (now ~20, each walk
# asking once: ``redactor``), and the decoding was ~8 % of the engine's CPU per run
# (bench/README.md, 2026-12-07 evening). Elsewhere (Windows: str names, upper-cased) the
# plain way is taken.
_RAW_PREFIXES = tuple(prefix.encode() for prefix in _ENV_PREFIXES)


def _referenced_values() -> list[str]:
    """The values (8 characters or more) of the variables tool servers' references may
    name, as the environment holds them now."""
    raw = getattr(os.environ, "_data", None) if os.name == "posix" else None
    if not isinstance(raw, dict):
        return [
            value
            for name, value in os.environ.items()
            if name.startswith(_ENV_PREFIXES) and len(value) >= _MIN_LEN
        ]
    found = [value for name, value in raw.items() if name.startswith(_RAW_PREFIXES)]
    return [text for text in map(os.fsdecode, found) if len(text) >= _MIN_LEN] if found else []


@receiver(setting_changed)
def _forget_secret_values(**_: Any) -> None:
    global _values
    _values = None


def _read_secret_values() -> list[str]:
    values = [str(getattr(settings, name, "") or "") for name in _SETTINGS]
    values.append(str(settings.DATABASES["default"].get("PASSWORD") or ""))
    values.extend(_url_password(str(getattr(settings, name, "") or "")) for name in _URL_SETTINGS)
    return [v for v in values if len(v) >= _MIN_LEN]


def assert_clean(text: str, *, where: str) -> None:
    """Raise SecretLeak if ``text`` contains a configured secret value."""
    for value in secret_values():
        if value in text:
            raise SecretLeak(f"refusing to store a secret in {where}")


def redact(text: str) -> str:
    return _redacted(text, secret_values())


def redactor() -> Callable[[str], str]:
    """``redact`` with the secret values read once, for one walk over the many strings of
    one payload (a model's raw output, a context projection): the values cannot change
    halfway through it."""
    values = secret_values()
    return lambda text: _redacted(text, values)


def _redacted(text: str, values: list[str]) -> str:
    for value in values:
        text = text.replace(value, REDACTED)
    return text


class RedactingExceptionReporter(ExceptionReporter):
    """Django's error report with every configured secret value replaced, wherever it
    appears (settings, frame variables, the exception message). See the module docstring;
    installed as ``DEFAULT_EXCEPTION_REPORTER``."""

    def get_traceback_html(self) -> str:
        html = str(super().get_traceback_html())
        for value in secret_values():
            html = html.replace(value, REDACTED).replace(escape(value), REDACTED)
        return html

    def get_traceback_text(self) -> str:
        return redact(str(super().get_traceback_text()))
