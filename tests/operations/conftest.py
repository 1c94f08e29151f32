"""Fixtures for the operations tests: clients per role and waiting runs in two tenants."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.conftest import make_user
from tests.helpers import make_run


@pytest.fixture
def operator_south(world: None) -> Any:
    return make_user("operator-south", "south", "operator")


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def waiting_runs(n: int, *, tenant: str = "north") -> list[Any]:
    """``n`` runs created and not started (CREATED: waiting to be dispatched to a worker)."""
    return [make_run(tenant=tenant, advance=False) for _ in range(n)]


FAULTLAB = {"world": "faultlab"}
