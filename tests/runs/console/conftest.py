"""Console test fixtures: logged-in clients per role and runs in known states."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals.models import Checkpoint
from tests.conftest import make_user
from tests.helpers import make_run


@pytest.fixture
def lead(world: None) -> Any:
    """Operator and approver at once: requests runs, and must not approve its own."""
    return make_user("lead", "north", "operator", "approver")


@pytest.fixture
def operator_south(world: None) -> Any:
    return make_user("operator-south", "south", "operator")


def client_for(user: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def as_operator(operator: Any) -> Client:
    return client_for(operator)


@pytest.fixture
def as_approver(approver: Any) -> Client:
    return client_for(approver)


@pytest.fixture
def as_outsider(outsider: Any) -> Client:
    return client_for(outsider)


@pytest.fixture
def waiting_run(operator: Any) -> Any:
    """A reservation run requested by ``operator`` in the live world (what the console's
    lists and queue show by default), waiting for approval."""
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert run.state == "WAITING_HUMAN"
    return run


def checkpoint_of(run: Any) -> Checkpoint:
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)
