"""Refusals the spec says to record, through the doors test_recorded_rejections.py does not
use (round three, 2026-12-07): the JSON API's cancel and late decision, and the console's
bulk cancel. Each is recorded exactly once, as the console's single-run form records it,
and nothing else changes.

What was audited and needs no record (the spec and docs ask for none; a refused request
changes no state): a follow-up refused (run not ended, an effect exists or is unknown, a
follow-up taken), a catalog step refused (``catalog.domain.lifecycle.Refusal``: the
rejection log holds *reject* decisions, which are recorded as LifecycleDecision rows),
an API token refused (over the limit, another user's, already revoked), and a bulk
cancel's id of another tenant or of no run (``not_found``: recording it would grow another
tenant's run history). An operation's batch records a run that ended before its turn as
its item's ``already_terminal`` result (operations/services.py).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from api.tokens import token_create
from approvals.models import Checkpoint
from runs import services
from tests.security.test_recorded_rejections import Recorder
from tests.security.world import World

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _api(world: World, principal: str, path: str, body: dict[str, Any]) -> Any:
    _, secret = token_create(user=world.users[principal], name="rejections")
    return lambda: Client().post(
        "/api/v1" + path,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


def test_the_api_refuses_cancelling_an_ended_run_and_records_it_once(sworld: World) -> None:
    run_id = sworld.runs["completed"]
    send = _api(sworld, "operator", f"/runs/{run_id}/cancel", {"reason": "too late"})
    rec = Recorder(run_id)
    response = send()
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "run_terminal"
    rec.added(events={"transition.rejected/run_terminal": 1})


def test_the_api_records_an_approval_of_a_cancelled_run_as_late_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    services.run_cancel(run_id=str(checkpoint.run_id), by_ref="user:operator", reason="stop")
    body = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"}
    send = _api(sworld, "approver", f"/checkpoints/{checkpoint.pk}/decision", body)
    rec = Recorder(str(checkpoint.run_id))
    response = send()
    assert response.status_code == 409 and response.json()["code"] == "run_cancelled"
    rec.added(
        refusals={"run_cancelled": 1},
        events={"late_approval.rejected/run_cancelled": 1},
    )


def test_the_api_records_a_second_use_of_an_approval_once(sworld: World) -> None:
    checkpoint = sworld.checkpoint("decided")
    assert checkpoint.status == Checkpoint.Status.USED
    body = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "again"}
    send = _api(sworld, "approver", f"/checkpoints/{checkpoint.pk}/decision", body)
    rec = Recorder(str(checkpoint.run_id))
    assert send().status_code == 409
    rec.added(
        refusals={"already_decided": 1},
        events={"late_approval.rejected/already_decided": 1},
    )


@pytest.mark.parametrize("ended", ["completed", "failed"])
def test_a_bulk_cancel_records_each_ended_run_it_names_once(sworld: World, ended: str) -> None:
    """An ended run in a bulk cancel is refused and recorded as the single-run form records
    it; another tenant's run and an id of no run are ``not_found`` and record nothing."""
    run_id = sworld.runs[ended]
    client = sworld.client("operator", raise_request_exception=False)
    rec = Recorder(run_id)
    response = client.post(
        reverse("runs-bulk-cancel"),
        {"run": [run_id, sworld.runs["south_waiting"], str(uuid.uuid4())], "reason": "sweep"},
    )
    assert response.status_code == 302, response.content[:500]
    page = client.get(response["Location"]).content.decode()
    assert page.count("<code>run_terminal</code>") == 1
    assert page.count("<code>not_found</code>") == 2
    rec.added(events={"transition.rejected/run_terminal": 1})
