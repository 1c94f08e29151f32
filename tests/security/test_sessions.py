"""Sessions: a new id at login, destroyed server-side at logout; production cookies secure."""

from __future__ import annotations

import importlib
import os

import pytest
from django.contrib.sessions.models import Session
from django.core.exceptions import ImproperlyConfigured


def test_the_session_id_rotates_at_login(client, approver):
    client.get("/login/")
    client.cookies["sessionid"] = "attacker-fixed-session"
    response = client.post("/login/", {"username": "approver", "password": "pw-approver"})
    assert response.status_code == 302
    assert client.cookies["sessionid"].value != "attacker-fixed-session"
    assert Session.objects.filter(session_key=client.cookies["sessionid"].value).exists()


def test_logout_kills_the_session_on_the_server(client, approver):
    client.post("/login/", {"username": "approver", "password": "pw-approver"})
    key = client.cookies["sessionid"].value
    assert Session.objects.filter(session_key=key).exists()
    client.post("/logout/")
    assert not Session.objects.filter(session_key=key).exists()
    # The old cookie no longer authenticates anything.
    client.cookies["sessionid"] = key
    assert client.get("/").status_code == 302


def test_logout_requires_post(client, approver):
    client.post("/login/", {"username": "approver", "password": "pw-approver"})
    assert client.get("/logout/").status_code == 405


def test_production_settings_are_secure_and_refuse_missing_secrets(monkeypatch, production_env):
    import fieldops.settings_production as production

    production = importlib.reload(production)
    assert production.DEBUG is False
    assert production.SESSION_COOKIE_SECURE and production.CSRF_COOKIE_SECURE
    assert production.SESSION_COOKIE_HTTPONLY and production.SECURE_SSL_REDIRECT
    assert production.SECURE_HSTS_SECONDS >= 31536000
    assert production.FIELDOPS_ALLOW_DEMO_USERS is False
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY"):
        importlib.reload(production)
    assert os.environ.get("DJANGO_SECRET_KEY") is None
