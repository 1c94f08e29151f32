"""Security test fixtures.

``security_world`` builds the world once per module inside a transaction that is rolled
back when the module ends; each test still runs in its own savepoint (pytest-django's
``db``), so nothing a test does leaks into the next one. Modules that use it must not use
``transactional_db``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from tests.security.world import World, build_world


@pytest.fixture(scope="module")
def security_world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    with django_db_blocker.unblock(), transaction.atomic():
        world = build_world()
        yield world
        transaction.set_rollback(True)


@pytest.fixture
def sworld(security_world: World, db: Any) -> World:
    """The module's world inside this test's own savepoint."""
    return security_world
