"""A production deployment has no demo users (``seed`` adds none): ``manage.py set_user``
gives its people an account, a tenant and their roles. Before the command existed the
documented production set-up ended with a console nobody could act in: ``createsuperuser``
makes a user without a tenant or a role, and there is no admin site."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from access.roles import roles_of, tenant_of
from tests.helpers import manage_refused

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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dana", "--tenant", "nowhere"], "unknown tenant 'nowhere' (known: north, south)"),
        (["dana", "--tenant", "\u202enorth"], "unknown tenant '\\u202enorth'"),  # shown escaped
        (["dana", "--tenant", "n" * 40], "unknown tenant"),  # the column holds 32
        (["d a n a", "--tenant", "north"], "username 'd a n a': Enter a valid username"),
        (["dana\u202e", "--tenant", "north"], "Enter a valid username"),
        (["d" * 151, "--tenant", "north"], "the username is 151 characters; at most 150"),
        (
            ["dana", "--tenant", "north", "--email", "dana"],
            "--email 'dana' is not an email address",
        ),
        (
            ["dana", "--tenant", "north", "--email", "d" * 250 + "@x.io"],
            "--email is 255 characters; at most 254",
        ),
    ],
)
def test_a_user_the_deployment_could_not_hold_is_refused_and_nothing_is_written(
    monkeypatch: Any, argv: list[str], message: str
) -> None:
    _set_user(monkeypatch, "dana", "--tenant", "north", "--role", "operator", "--email", "d@x.io")
    with pytest.raises(CommandError, match=re.escape(message)):
        _set_user(monkeypatch, *argv, "--role", "approver")
    users = get_user_model().objects.all()
    assert [(u.username, tenant_of(u), roles_of(u), u.email) for u in users] == [
        ("dana", "north", {"operator"}, "d@x.io")
    ]


def test_set_user_refuses_an_unknown_tenant_with_one_line_in_a_real_process() -> None:
    # Checked before the password: no prompt, no variable needed to hear it.
    assert manage_refused("set_user", "dana", "--tenant", "nowhere", "--role", "operator") == (
        "CommandError: unknown tenant 'nowhere' (known: north, south)"
    )
