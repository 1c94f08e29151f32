"""Start-up checks: settings that are only safe on a loopback address, and a web process
that could render no page (production static files never collected).

The embedded default's callback signing key is a constant in the source, so anyone could
sign a callback with it: it is refused (an error, so ``manage.py`` commands, runserver and
``check --deploy`` stop) whenever the settings say the site answers on any name but the
loopback ones. ``serve_embedded`` refuses to listen anywhere but loopback with it.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Error, register

LOOPBACK_NAMES = frozenset({"localhost", "testserver", ".localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 possibly in brackets) is loopback."""
    name = host.strip().lower().strip("[]")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def uses_embedded_callback_key() -> bool:
    return bool(settings.FIELDOPS_CALLBACK_KEY == settings.EMBEDDED_CALLBACK_KEY)


@register("security")
def embedded_callback_key_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    outside = [h for h in settings.ALLOWED_HOSTS if not is_loopback(h)]
    if not (uses_embedded_callback_key() and outside):
        return []
    return [
        Error(
            "FIELDOPS_CALLBACK_KEY is the embedded demo constant while ALLOWED_HOSTS "
            f"admits {', '.join(outside[:3])}: anyone could sign callbacks.",
            hint="Set FIELDOPS_CALLBACK_KEY to a random secret (python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'), or serve on 127.0.0.1 only.",
            id="fieldops.E001",
        )
    ]


def missing_static_manifest() -> str | None:
    """What to run, when the static files storage needs collectstatic's manifest and there
    is none (the production settings: every page, the error pages too, would answer 500
    "Missing staticfiles manifest entry"); None when pages can be rendered."""
    from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage

    if not isinstance(staticfiles_storage, ManifestFilesMixin):
        return None
    if staticfiles_storage.manifest_storage.exists(staticfiles_storage.manifest_name):
        return None
    manifest = Path(settings.STATIC_ROOT) / staticfiles_storage.manifest_name
    return (
        f"{manifest} is missing: run `python manage.py collectstatic --noinput` on these "
        "settings (once per release; FIELDOPS_STATIC_ROOT says where it writes) before "
        "starting the web process"
    )
