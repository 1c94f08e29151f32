"""Shared fixtures: a seeded world, fixed users per role, small ``make_*`` helpers.

Services the suite needs (PostgreSQL for ``postgres`` tests, Redis for ``celery`` tests)
are probed once; on a developer laptop an unreachable service skips with the reason, but
under CI=true it fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from kernel import clock

CI = os.environ.get("CI") == "true"

pytest_plugins = ["tests.browser_support"]


def require_service(name: str, reachable: bool, why: str) -> None:
    if reachable:
        return
    if CI:
        pytest.fail(f"{name} is unreachable and CI=true: {why}")
    pytest.skip(f"{name} is unreachable on this machine: {why}")


@pytest.fixture(autouse=True)
def _postgres_marker(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("postgres") is None:
        return
    if "db" not in request.fixturenames and "transactional_db" not in request.fixturenames:
        return
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "this test needs real PostgreSQL semantics; the suite runs on "
        f"{connection.vendor} (set DATABASE_URL=postgres://...)",
    )


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    """Keep INFO event logs out of test output (tests that need logs lower this)."""
    logging.getLogger("fieldops").setLevel(logging.WARNING)


@pytest.fixture(autouse=True)
def _reset_clock() -> Iterator[None]:
    clock.reset()
    yield
    clock.reset()


@pytest.fixture
def production_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment ``fieldops.settings_production`` requires, with made-up values."""
    for name, value in {
        "DJANGO_SECRET_KEY": "k" * 60,
        "DJANGO_ALLOWED_HOSTS": "x.example",
        "FIELDOPS_CALLBACK_KEY": "c" * 40,
        "DATABASE_URL": "postgres://u@127.0.0.1:5432/db",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def world(db: Any) -> None:
    """The reviewed catalog, the synthetic world (live + faultlab) and system users."""
    from sim.setup import seed

    seed(demo_users=False)


def make_user(username: str, tenant: str, *roles: str) -> Any:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from access.models import Membership
    from access.roles import ensure_groups

    ensure_groups()
    user = get_user_model().objects.create_user(username=username, password="pw-" + username)
    Membership.objects.create(user=user, tenant=tenant)
    user.groups.set(Group.objects.filter(name__in=roles))
    return user


@pytest.fixture
def approver(world: None) -> Any:
    return make_user("approver", "north", "approver")


@pytest.fixture
def operator(world: None) -> Any:
    return make_user("operator", "north", "operator")


@pytest.fixture
def catalog_admin(world: None) -> Any:
    return make_user("catalog-admin", "north", "catalog-admin")


@pytest.fixture
def outsider(world: None) -> Any:
    """An approver of the other tenant."""
    return make_user("approver-south", "south", "approver")


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``collectstatic`` run once on the production settings into a directory of the
    session, as a release does: the web process on those settings refuses to start
    without it (``FIELDOPS_STATIC_ROOT`` points a process at it)."""
    import subprocess
    import sys

    from tests.deploy.servers import PRODUCTION, ROOT

    root = tmp_path_factory.mktemp("staticfiles")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env={
            **os.environ,
            **PRODUCTION,
            # read by the settings only: collectstatic opens no connection
            "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/fieldops_collectstatic",
            "FIELDOPS_STATIC_ROOT": str(root),
        },
        check=True,
        capture_output=True,
        timeout=120,
    )
    return root
