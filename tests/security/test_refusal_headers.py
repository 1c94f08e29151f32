"""A refusal made before the view (a Host header not in ALLOWED_HOSTS, answered by
CommonMiddleware's DisallowedHost) carries the same security headers as every page.

Found over real HTTP against the production settings: ``Host: evil.example`` got the
400 page with CSP, HSTS and nosniff but no ``X-Frame-Options`` (its middleware sat
inside the one that refused).
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


# /healthz answers a host it does not serve its liveness (a probe addressing the process
# directly: tests/deploy/test_production_probes.py), with the same headers.
@pytest.mark.parametrize(("name", "status"), [("runs-list", 400), ("login", 400), ("health", 200)])
def test_a_refused_host_gets_the_pages_security_headers(name: str, status: int) -> None:
    response = Client().get(reverse(name), HTTP_HOST="evil.example")
    assert response.status_code == status
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
