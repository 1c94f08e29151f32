"""The production settings redirect plain HTTP to HTTPS (``SECURE_SSL_REDIRECT``), but a
load balancer's or an orchestrator's probe reaches the web process directly, over plain
HTTP and without the proxy's ``X-Forwarded-Proto``. ``GET /healthz`` answered those probes
301 whatever the state of the database and the broker, so a probe following redirects
or counting 3xx as success saw a healthy process with PostgreSQL down. Such a probe also
addresses the process by its own address (a pod's IP, ``localhost:8000`` in a container's
health check), never by a name in ``DJANGO_ALLOWED_HOSTS``: ``/healthz`` answered it
"Bad Request (400)" (Django's DisallowedHost), whatever the state of the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.deploy.servers import ROOT
from tests.domain.deploy.test_compose import EXAMPLE, environment, interpolate

# A clean checkout has no collectstatic output, which the production settings' manifest
# storage needs to render any page (the 400 page too); compose's web service runs
# collectstatic first (tests/domain/deploy/test_compose.py). The probe serves static files
# from the source instead: how the pages are stored is not what these tests are about.
PROBE = """
import json, django
import fieldops.settings_production as production
production.STORAGES = {
    **production.STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
django.setup()
import sys
from django.test import Client
client = Client(HTTP_HOST=sys.argv[1])
answers = {}
for path in ("/healthz", "/login/"):
    r = client.get(path)
    answers[path] = [r.status_code, r.get("Content-Type", ""), r.content.decode()[:300]]
r = client.head("/healthz")
answers["HEAD /healthz"] = [r.status_code, r.get("Content-Type", ""), r.content.decode()[:300]]
print(json.dumps(answers))
"""


def _probe(host: str = "fieldops.example.com") -> dict[str, list[object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    env.update(EXAMPLE)
    env.update({k: interpolate(v, EXAMPLE) for k, v in environment("web").items()})
    # Nothing listens there: the probe must say so itself, not redirect.
    env.update(
        DATABASE_URL="postgres://fieldops_app:x@127.0.0.1:9/fieldops",
        CELERY_BROKER_URL="redis://127.0.0.1:9/0",
        FIELDOPS_LOG_LEVEL="CRITICAL",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, host],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_plain_http_probe_of_healthz_gets_the_health_and_pages_still_redirect() -> None:
    answers = _probe()
    status, content_type, body = answers["/healthz"]
    assert status == 503, answers
    assert str(content_type).startswith("application/json")
    health = json.loads(str(body))
    assert health["status"] != "ok" and health["database"]["ok"] is False
    assert answers["/login/"][0] == 301  # everything else still goes to HTTPS


@pytest.mark.parametrize("host", ["10.42.0.17:8000", "localhost:8000", "web:8000"])
def test_a_probe_addressing_the_process_directly_gets_the_health_not_a_bad_host(host) -> None:
    answers = _probe(host)
    status, content_type, body = answers["/healthz"]
    assert status == 503, answers
    assert str(content_type).startswith("application/json")
    health = json.loads(str(body))
    assert health == {"status": "unhealthy", "database": {"ok": False}}
    assert answers["HEAD /healthz"][:2] == [503, content_type] and answers["HEAD /healthz"][2] == ""
    # Every other address still refuses a host it does not serve.
    assert answers["/login/"][0] == 400
