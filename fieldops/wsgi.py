import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")
application = get_wsgi_application()

from fieldops.checks import missing_static_manifest  # noqa: E402 (needs the settings loaded)

# A web process that could render no page stops at boot, saying why (gunicorn then exits).
if (problem := missing_static_manifest()) is not None:
    raise ImproperlyConfigured(problem)
