"""Secret hygiene: the values FieldOps must never write into events, evidence or logs.

Every configured secret is registered here; ``assert_clean`` refuses to store text that
contains one, and ``redact`` removes them from anything shown or logged.
"""

from __future__ import annotations

from django.conf import settings

_SETTINGS = ("SECRET_KEY", "FIELDOPS_CALLBACK_KEY", "FIELDOPS_MODEL_API_KEY")
_MIN_LEN = 8


class SecretLeak(ValueError):
    pass


def secret_values() -> list[str]:
    values = [str(getattr(settings, name, "") or "") for name in _SETTINGS]
    password = str(settings.DATABASES["default"].get("PASSWORD") or "")
    values.append(password)
    return [v for v in values if len(v) >= _MIN_LEN]


def assert_clean(text: str, *, where: str) -> None:
    """Raise SecretLeak if ``text`` contains a configured secret value."""
    for value in secret_values():
        if value in text:
            raise SecretLeak(f"refusing to store a secret in {where}")


def redact(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, "[redacted]")
    return text
