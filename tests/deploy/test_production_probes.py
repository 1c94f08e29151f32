"""The production settings redirect plain HTTP to HTTPS (``SECURE_SSL_REDIRECT``), but a
load balancer's or an orchestrator's probe reaches the web process directly, over plain
HTTP and without the proxy's ``X-Forwarded-Proto``. ``GET /healthz`` answered those probes
301 whatever the state of the database and the broker, so a probe following redirects
or counting 3xx as success saw a healthy process with PostgreSQL down."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.deploy.servers import ROOT
from tests.domain.deploy.test_compose import EXAMPLE, environment, interpolate

PROBE = """
import json, django
django.setup()
from django.test import Client
client = Client(HTTP_HOST="fieldops.example.com")
answers = {}
for path in ("/healthz", "/login/"):
    r = client.get(path)
    answers[path] = [r.status_code, r.get("Content-Type", ""), r.content.decode()[:300]]
print(json.dumps(answers))
"""


def _probe() -> dict[str, list[object]]:
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
        [sys.executable, "-c", PROBE],
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
