"""An API token revoked while one of its requests is in flight: once ``token_revoke`` has
returned, no action made with that token commits (docs/security.md, API tokens).

The token was checked once, when the request authenticated, and the action ran later in a
transaction of its own: a run was seen created 18 ms after its token's ``revoked_at``.
Each writing action (start, cancel, decide) now reads its token again, with a share lock,
inside its own transaction; a revoke waits for it.

A user deactivated in that moment (``is_active=False`` saved) got the action through the
same way: the re-read joins the user's row, refuses an inactive user, and holds that row
too, so a deactivation waits for the action in flight as a revoke does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from api import v1
from api.models import ApiToken
from api.tokens import token_create, token_revoke
from approvals.models import Checkpoint
from fieldops import points
from runs.models import Run
from tests.helpers import make_run
from tests.security.test_recorded_rejections import Recorder

V1 = "/api/v1"


def _post(secret: str, path: str, body: dict[str, Any]) -> Any:
    return Client().post(
        V1 + path,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


@pytest.fixture
def hook() -> Iterator[Callable[[Callable[[str, str], None]], None]]:
    previous = points.HOOK

    def install(h: Callable[[str, str], None]) -> None:
        points.install(h)

    yield install
    points.install(previous)


def _action(name: str, operator: Any, approver: Any) -> tuple[Any, str, dict[str, Any], str]:
    """(the token's user, path, body, the run the action would touch or '')."""
    if name == "start":
        return operator, "/runs", {"equipment_id": "EQ-17"}, ""
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    if name == "cancel":
        return operator, f"/runs/{run.pk}/cancel", {"reason": "not needed"}, str(run.pk)
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    body = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "fine"}
    return approver, f"/checkpoints/{checkpoint.pk}/decision", body, str(run.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["start", "cancel", "decide"])
def test_an_action_whose_token_is_revoked_after_authentication_is_refused_unwritten(
    world: None, operator: Any, approver: Any, hook: Any, name: str
) -> None:
    """The revoke lands between the bearer check and the action's transaction: the action
    answers the 401 every revoked token gets, and writes nothing (no run, no event, no
    recorded refusal: an unauthenticated request records nothing)."""
    user, path, body, run_id = _action(name, operator, approver)
    row, secret = token_create(user=user, name="in flight")
    runs_before = Run.objects.count()

    def revoke_now(point: str, token_id: str) -> None:
        if point == v1.AUTHENTICATED_POINT and token_id == str(row.pk):
            token_revoke(user=user, token_id=row.pk)

    rec = Recorder(run_id or None)
    hook(revoke_now)
    response = _post(secret, path, body)
    assert response.status_code == 401, response.content
    assert response.json() == {
        "code": "unauthenticated",
        "message": "A valid API token is required.",
    }
    assert response["WWW-Authenticate"] == "Bearer"
    rec.added()  # nothing recorded, nothing else changed (the token row aside)
    assert Run.objects.count() == runs_before
    assert ApiToken.objects.get(pk=row.pk).revoked_at is not None


@pytest.mark.django_db
def test_a_token_not_revoked_passes_the_second_check(world: None, operator: Any, hook: Any) -> None:
    """The re-check refuses a revoked token only: the point is reached and the run starts."""
    row, secret = token_create(user=operator, name="in flight")
    held: list[str] = []
    hook(lambda point, token_id: held.append(token_id) if point == v1.HELD_POINT else None)
    response = _post(secret, "/runs", {"equipment_id": "EQ-17"})
    assert response.status_code == 201, response.content
    assert held == [str(row.pk)]


def _deactivate(user: Any) -> None:
    """How a user is deactivated here (no console page, no admin: a shell or a script
    saves the user with ``is_active=False``): an UPDATE of the user's row."""
    user.is_active = False
    user.save(update_fields=["is_active"])


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["start", "cancel", "decide"])
def test_an_action_whose_user_is_deactivated_after_authentication_is_refused_unwritten(
    world: None, operator: Any, approver: Any, hook: Any, name: str
) -> None:
    """The user is deactivated between the bearer check and the action's transaction: the
    same 401 as a deactivated user's token gets at the door, nothing written or recorded."""
    user, path, body, run_id = _action(name, operator, approver)
    row, secret = token_create(user=user, name="in flight")
    runs_before = Run.objects.count()

    recs: list[Recorder] = []

    def deactivate_now(point: str, token_id: str) -> None:
        if point == v1.AUTHENTICATED_POINT and token_id == str(row.pk):
            _deactivate(type(user).objects.get(pk=user.pk))
            recs.append(Recorder(run_id or None))  # from here on, nothing may change

    hook(deactivate_now)
    response = _post(secret, path, body)
    assert response.status_code == 401, response.content
    assert response.json() == {
        "code": "unauthenticated",
        "message": "A valid API token is required.",
    }
    assert response["WWW-Authenticate"] == "Bearer"
    assert len(recs) == 1
    recs[0].added()
    assert Run.objects.count() == runs_before
    assert ApiToken.objects.get(pk=row.pk).revoked_at is None  # the token itself is intact


@pytest.mark.postgres  # two connections at once (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["revoke", "deactivate"])
def test_a_revoke_or_deactivation_waits_for_the_action_in_flight_and_later_requests_are_refused(
    world: None, operator: Any, hook: Any, change: str
) -> None:
    """The action holds its token's row and its user's (FOR SHARE) until it commits: a
    revoke or a deactivation made meanwhile waits for that commit, and when it returns the
    run is committed already; the next request with the token is refused."""
    row, secret = token_create(user=operator, name="in flight")
    before = Run.objects.count()
    held, release = threading.Event(), threading.Event()
    answers: list[Any] = []
    runs_when_done: list[int] = []

    def pause(point: str, token_id: str) -> None:
        if point == v1.HELD_POINT and token_id == str(row.pk):
            held.set()
            assert release.wait(timeout=30)

    def start() -> None:
        try:
            answers.append(_post(secret, "/runs", {"equipment_id": "EQ-17"}))
        finally:
            connection.close()

    def make_the_change() -> None:
        try:
            if change == "revoke":
                assert token_revoke(user=operator, token_id=row.pk).revoked_at is not None
            else:
                _deactivate(type(operator).objects.get(pk=operator.pk))
            runs_when_done.append(Run.objects.count())
        finally:
            connection.close()

    hook(pause)
    action = threading.Thread(target=start)
    action.start()
    try:
        assert held.wait(timeout=30), "the action never reached its token check"
        changer = threading.Thread(target=make_the_change)
        changer.start()
        changer.join(timeout=1.0)
        assert changer.is_alive(), f"the {change} did not wait for the action in flight"
        assert not runs_when_done
    finally:
        release.set()
        action.join(timeout=30)
    changer.join(timeout=30)
    assert not changer.is_alive()
    assert answers and answers[0].status_code == 201, answers and answers[0].content
    assert runs_when_done == [before + 1]  # the run committed before the change returned
    assert Run.objects.get(pk=answers[0].json()["id"]).principal_ref == "user:operator"
    after = _post(secret, "/runs", {"equipment_id": "EQ-17"})
    assert after.status_code == 401 and after.json()["code"] == "unauthenticated"
    assert Run.objects.count() == before + 1
