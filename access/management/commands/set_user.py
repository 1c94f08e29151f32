"""set_user NAME --tenant T --role R...: a console user of a production deployment.

The production settings never create demo users (``seed`` adds none), so this is how the
people of a deployment get an account: a tenant (``Membership``) and their roles (groups).
Creates the user or updates an existing one; the roles given replace the user's roles.
A new user's password comes from ``$FIELDOPS_USER_PASSWORD`` or is asked for twice on a
terminal (never from the command line, where ``ps`` and shell history would keep it).
"""

from __future__ import annotations

import getpass
import os
import sys
import unicodedata
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.core.validators import validate_email
from django.db import transaction

from access.confusables import skeleton
from access.models import Membership
from access.roles import ROLES, ensure_groups
from capabilities import ports
from fieldops.commands import FieldOpsCommand

PASSWORD_VARIABLE = "FIELDOPS_USER_PASSWORD"  # noqa: S105 - the variable's name, not a secret


class Command(FieldOpsCommand):
    help = (
        "Create or update a console user: tenant and roles (approver, operator, "
        f"catalog-admin). A new user's password comes from ${PASSWORD_VARIABLE} or a prompt."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="the tenant the user acts for")
        parser.add_argument(
            "--role",
            action="append",
            default=[],
            choices=ROLES,
            help="a role (repeat for several); the roles given replace the user's roles",
        )
        parser.add_argument("--email", default=None, help="where approval notices go")
        parser.add_argument(
            "--staff", action="store_true", help="may read GET /metrics with a session"
        )
        parser.add_argument(
            "--password",
            action="store_true",
            help=f"set a new password for an existing user too (${PASSWORD_VARIABLE} or prompt)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"].strip()
        tenant = options["tenant"].strip()
        if not username or not tenant:
            raise CommandError("a username and a tenant are required")
        if not options["role"]:
            raise CommandError(f"give at least one --role ({', '.join(ROLES)})")
        user_model = get_user_model()
        # Everything is checked before the password prompt and before any write: a value
        # the database would refuse (a long name or address) is a message, not a traceback.
        problem = (
            _username_problem(user_model, username)
            or _tenant_problem(tenant)
            or _email_problem(user_model, options["email"])
        )
        if problem:
            raise CommandError(problem)
        exists = user_model.objects.filter(username=username).exists()
        if not exists and (problem := _new_username_problem(user_model, username)):
            raise CommandError(problem)
        password = self._password(username) if not exists or options["password"] else None
        ensure_groups()
        with transaction.atomic():
            user, created = user_model.objects.get_or_create(username=username)
            if password is not None:
                user.set_password(password)
            if options["email"] is not None:
                user.email = options["email"]
            if options["staff"]:
                user.is_staff = True
            user.save()
            Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
            user.groups.set(Group.objects.filter(name__in=options["role"]))
        roles = ", ".join(sorted(set(options["role"])))
        self.stdout.write(
            f"{'created' if created else 'updated'} {username}: tenant {tenant}, roles {roles}"
        )

    def _password(self, username: str) -> str:
        password = os.environ.get(PASSWORD_VARIABLE, "")
        if not password:
            if not sys.stdin.isatty():
                raise CommandError(
                    f"no password: set ${PASSWORD_VARIABLE} or run the command on a terminal"
                )
            password = getpass.getpass(f"Password for {username}: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("the passwords differ")
        try:
            validate_password(password)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        return password


def _username_problem(user_model: Any, username: str) -> str:
    field = user_model._meta.get_field(user_model.USERNAME_FIELD)
    if len(username) > field.max_length:
        return f"the username is {len(username)} characters; at most {field.max_length}"
    try:
        user_model.username_validator(username)
    except ValidationError as exc:
        return f"username {username[:80]!r}: {' '.join(exc.messages)}"
    return ""


def _new_username_problem(user_model: Any, username: str) -> str:
    """Why a new account may not have this name: one that passes for another person's in
    the audit trail (``user:<name>``) or cannot sign in at all. An existing account is
    updated whatever its name (refusing it would leave it unmanageable)."""
    signs_in_as = unicodedata.normalize("NFKC", username)
    if signs_in_as != username:
        # Sign-in reads the name NFKC-normalised (access/signin.py, Django's UsernameField):
        # "lead" in fullwidth letters (U+FF4C U+FF45 U+FF41 U+FF44) would sign in as "lead",
        # so this account could never sign in.
        return (
            f"username {username[:80]!r} signs in as {signs_in_as[:80]!r} (sign-in "
            "normalises the name); give it as that spelling"
        )
    scripts = sorted({unicodedata.name(ch, "?").split()[0] for ch in username if ch.isalpha()})
    if len(scripts) > 1:
        return (
            f"username {username[:80]!r} mixes letters of the scripts {', '.join(scripts)}, "
            "so it can pass for another name (a Cyrillic '\u0435' reads as a Latin 'e'); "
            "write it in one script"
        )
    # A name wholly in one other script can still read as an existing one: "poppy" in the
    # Cyrillic letters er, o, er, er, u (access/confusables.py says which letters count).
    looks_like = skeleton(username)
    names = user_model.objects.values_list("username", flat=True).order_by("pk").iterator()
    taken = next((name for name in names if skeleton(name) == looks_like), None)
    if taken is None:
        return ""
    if taken.lower() == username.lower():
        return (
            f"username {username[:80]!r} differs from the existing user {taken!r} only in "
            f"case and would read as the same person; update {taken!r} or choose another name"
        )
    return (
        f"username {username[:80]!r} reads as the existing user {taken!r} (its letters "
        f"look like theirs) and would pass for the same person; choose another name"
    )


def _tenant_problem(tenant: str) -> str:
    tenants = ports.world().reference.tenants
    if tenant not in tenants:
        return f"unknown tenant {tenant[:80]!r} (known: {', '.join(sorted(tenants))})"
    return ""


def _email_problem(user_model: Any, email: str | None) -> str:
    if not email:  # not given, or given empty: no address
        return ""
    limit = user_model._meta.get_field("email").max_length
    if len(email) > limit:
        return f"--email is {len(email)} characters; at most {limit}"
    try:
        validate_email(email)
    except ValidationError:
        return f"--email {email[:80]!r} is not an email address"
    return ""
