"""A production deployment has no demo users (``seed`` adds none): ``manage.py set_user``
gives its people an account, a tenant and their roles. Before the command existed the
documented production set-up ended with a console nobody could act in: ``createsuperuser``
makes a user without a tenant or a role, and there is no admin site."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from access.roles import roles_of, tenant_of

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-enough-operator-password"


def _set_user(monkeypatch: Any, *argv: str, password: str | None = PASSWORD) -> str:
    if password is None:
        monkeypatch.delenv("FIELDOPS_USER_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("FIELDOPS_USER_PASSWORD", password)
    out = StringIO()
    call_command("set_user", *argv, stdout=out)
    return out.getvalue()


def test_a_new_user_gets_a_tenant_roles_and_can_sign_in_and_act(monkeypatch: Any) -> None:
    out = _set_user(
        monkeypatch, "dana", "--tenant", "north", "--role", "operator", "--role", "approver"
    )
    assert "created dana: tenant north, roles approver, operator" in out
    user = get_user_model().objects.get(username="dana")
    assert tenant_of(user) == "north"
    assert roles_of(user) == {"operator", "approver"}
    client = Client()
    assert client.login(username="dana", password=PASSWORD)
    page = client.get("/")
    assert page.status_code == 200
    assert 'action="/runs/start/"' in page.content.decode()


def test_updating_replaces_the_roles_and_keeps_the_password(monkeypatch: Any) -> None:
    _set_user(monkeypatch, "sam", "--tenant", "north", "--role", "operator")
    out = _set_user(
        monkeypatch,
        "sam",
        "--tenant",
        "south",
        "--role",
        "catalog-admin",
        "--email",
        "sam@example.com",
        password=None,
    )
    assert "updated sam: tenant south, roles catalog-admin" in out
    user = get_user_model().objects.get(username="sam")
    assert (tenant_of(user), roles_of(user), user.email) == (
        "south",
        {"catalog-admin"},
        "sam@example.com",
    )
    assert user.check_password(PASSWORD)


def test_a_new_user_needs_a_password_a_role_and_a_valid_one(monkeypatch: Any) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(CommandError, match="FIELDOPS_USER_PASSWORD"):
        _set_user(monkeypatch, "kim", "--tenant", "north", "--role", "operator", password=None)
    with pytest.raises(CommandError, match="at least one --role"):
        _set_user(monkeypatch, "kim", "--tenant", "north")
    with pytest.raises(CommandError, match="too short"):
        _set_user(monkeypatch, "kim", "--tenant", "north", "--role", "operator", password="x")
    assert not get_user_model().objects.filter(username="kim").exists()
