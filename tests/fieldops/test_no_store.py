"""Nothing answered to a signed-in person or to an API token is kept by a cache: every such
answer says ``Cache-Control: no-store`` (``NoStoreWhenSignedInMiddleware``), so neither a
shared proxy nor the browser (Back after Log out, a shared machine's history) shows a run,
a proposal or a token again. Anonymous answers (the public schema, static files) keep their
caching. The requests go through the production settings' middleware."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from api.tokens import token_create

pytestmark = pytest.mark.django_db


def _cache_control(response: Any) -> set[str]:
    return {v.strip().lower() for v in response.get("Cache-Control", "").split(",") if v.strip()}


def test_the_middleware_under_test_is_the_production_settings(production_env: None) -> None:
    production = importlib.reload(importlib.import_module("fieldops.settings_production"))
    assert production.MIDDLEWARE == settings.MIDDLEWARE
    assert "fieldops.middleware.NoStoreWhenSignedInMiddleware" in production.MIDDLEWARE


def test_every_answer_to_a_signed_in_person_is_no_store(operator: Any) -> None:
    client = Client()
    client.force_login(operator)
    answers = {
        "page": client.get(reverse("runs-list")),
        "htmx region": client.get(
            reverse("runs-list") + "?state=WAITING_HUMAN",
            headers={"HX-Request": "true", "HX-Target": "run-table"},
        ),
        "live counts": client.get(
            reverse("operations-state-counts"), headers={"HX-Request": "true"}
        ),
        "csv export": client.get(reverse("operations-runs-export", kwargs={"fmt": "csv"})),
        "tokens page": client.get(reverse("api-tokens")),
        "a 404": client.get("/runs/00000000-0000-4000-8000-000000000000/"),
    }
    for what, response in answers.items():
        assert response.status_code in (200, 404), (what, response.status_code)
        assert {"no-store", "private"} <= _cache_control(response), (
            what,
            response.get("Cache-Control"),
        )


def test_every_answer_to_an_api_token_is_no_store(approver: Any) -> None:
    _, secret = token_create(user=approver, name="cache")
    auth = {"Authorization": f"Bearer {secret}"}
    answers = {
        "read": Client().get("/api/v1/checkpoints", headers=auth),
        "a 404": Client().get("/api/v1/runs/00000000-0000-4000-8000-000000000000", headers=auth),
        "a refused token": Client().get(
            "/api/v1/checkpoints", headers={"Authorization": "Bearer fo_nope_nope"}
        ),
    }
    for what, response in answers.items():
        assert response.status_code in (200, 401, 404), (what, response.status_code)
        assert "no-store" in _cache_control(response), (what, response.get("Cache-Control"))


def test_anonymous_answers_keep_their_caching(world: None) -> None:
    # The login page keeps Django's own never_cache; the public schema stays cacheable,
    # also for a browser whose session cookie names no session (signed out elsewhere).
    stale = Client()
    stale.cookies[settings.SESSION_COOKIE_NAME] = "no-such-session"
    for client in (Client(), stale):
        schema = client.get(reverse("api-v1-schema"))
        assert schema.status_code == 200
        assert "no-store" not in _cache_control(schema), schema.get("Cache-Control")
