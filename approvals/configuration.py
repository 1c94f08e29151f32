"""Checks for the commands that configure approvals (approval policies, webhook endpoints).

A policy or endpoint that names something that does not exist is not a configuration a
production console should accept quietly: a policy naming an unknown group or user, or
asking a quorum its named users cannot reach, leaves every checkpoint it matches waiting
until it expires. Each check returns a problem (one sentence) or ``""``.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.roles import APPROVER
from capabilities import ports
from capabilities.contracts import EffectClass
from capabilities.registry import ALL_CONTRACTS
from catalog.models import CapabilityVersion
from kernel.text import quoted_shortly

NAME_MAX = 80  # ApprovalPolicy.name, WebhookEndpoint.name
URL_MAX = 500  # WebhookEndpoint.url
SECRET_MAX = 200  # WebhookEndpoint.secret
SECRET_ENV_PREFIX = "FIELDOPS_WEBHOOK_SECRET"  # noqa: S105  # a variable name, not a secret


def _listed(values: Sequence[str]) -> str:
    return ", ".join(sorted(values)) or "none"


def tenant_problem(tenant: str) -> str:
    tenants = ports.world().reference.tenants
    if tenant not in tenants:
        return f"unknown tenant {quoted_shortly(tenant)} (known: {_listed(list(tenants))})"
    return ""


def name_problem(name: str) -> str:
    if not name.strip():
        return "--name must not be empty"
    if len(name) > NAME_MAX:
        return f"--name is {len(name)} characters; at most {NAME_MAX}"
    if not name.isprintable():
        return "--name must not contain control characters"
    return ""


def policy_problem(
    *,
    tenant: str,
    capability: str,
    effect_class: str,
    group: str,
    usernames: Sequence[str],
    quorum: int,
    quorum_min_quantity: int | None,
    part_ids: Sequence[str],
) -> str:
    """The first problem of an approval policy's settings, or ``""``."""
    if not 1 <= quorum <= 9:
        return "--quorum must be 1..9"
    known = capability in ALL_CONTRACTS  # reviewed here; catalog_sync stores it
    if not known and not CapabilityVersion.objects.filter(capability_id=capability).exists():
        return (
            f"unknown capability {quoted_shortly(capability)}: no version of it is in the catalog"
        )
    if effect_class and effect_class not in set(EffectClass):
        known_classes = _listed(list(EffectClass))
        return f"unknown effect class {quoted_shortly(effect_class)} (known: {known_classes})"
    if group and not Group.objects.filter(name=group).exists():
        return f"unknown group {quoted_shortly(group)}"
    for problem in (_users_problem(tenant, usernames), _quorum_problem(quorum, usernames)):
        if problem:
            return problem
    if quorum_min_quantity is not None and not 1 <= quorum_min_quantity <= 50:
        return "--quorum-min-quantity must be 1..50 (a run reserves 1 to 50 units)"
    parts = ports.world().reference.parts
    for part in part_ids:
        if part not in parts:
            known_parts = _listed(list(parts))
            return f"unknown part {quoted_shortly(part)} for --quorum-part (known: {known_parts})"
    return ""


def _users_problem(tenant: str, usernames: Sequence[str]) -> str:
    found = {
        user.get_username(): user
        for user in get_user_model()
        .objects.filter(username__in=usernames)
        .select_related("membership")
        .prefetch_related("groups")
    }
    for username in usernames:
        user = found.get(username)
        membership = getattr(user, "membership", None) if user is not None else None
        if user is None or membership is None or membership.tenant != tenant:
            return f"no user {quoted_shortly(username)} in tenant {quoted_shortly(tenant)}"
        if not any(g.name == APPROVER for g in user.groups.all()):
            return f"user {username!r} does not hold the approver role"
    return ""


def _quorum_problem(quorum: int, usernames: Sequence[str]) -> str:
    if usernames and quorum > len(usernames):
        return (
            f"--quorum {quorum} needs {quorum} distinct approvers, but only "
            f"{len(usernames)} user(s) may decide"
        )
    return ""


def webhook_url_problem(url: str) -> str:
    try:
        # An unclosed "[::1" raises here, a port out of range or not a number on ``.port``
        # (every delivery to such an address would fail).
        parts = urlsplit(url)
        parts.port  # noqa: B018
    except ValueError:
        return "--url must be an http(s) URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "--url must be an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "--url must not carry a user name or password (the body is signed instead)"
    if len(url) > URL_MAX:
        return f"--url is {len(url)} characters; at most {URL_MAX}"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "--url must not contain spaces or control characters"
    return ""


def secret_env_problem(name: str, secret: str) -> str:
    if not (name == SECRET_ENV_PREFIX or name.startswith(SECRET_ENV_PREFIX + "_")):
        return (
            f"--secret-env must name {SECRET_ENV_PREFIX} or {SECRET_ENV_PREFIX}_<NAME> "
            "(no other variable of the process can become a signing key)"
        )
    if len(secret) < 16:
        return f"set {name} to a signing secret of 16+ characters"
    if len(secret) > SECRET_MAX:
        return f"{name} is {len(secret)} characters; at most {SECRET_MAX}"
    return ""
