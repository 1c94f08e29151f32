"""The commands that configure approval policies and webhook endpoints."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalPolicy, WebhookEndpoint

pytestmark = pytest.mark.django_db


def test_a_policy_is_created_replaced_and_deleted():
    call_command(
        "approvals_policy",
        "--tenant=north",
        "--name=big",
        "--quorum=2",
        "--quorum-min-quantity=2",
        "--quorum-part=b52",
        "--user=ana",
        "--user=bo",
    )
    policy = ApprovalPolicy.objects.get()
    assert policy.quorum == 2 and policy.quorum_part_ids == ["B52"]
    assert policy.usernames == ["ana", "bo"]
    call_command("approvals_policy", "--tenant=north", "--name=big", "--quorum=3")
    assert ApprovalPolicy.objects.get().quorum == 3
    with pytest.raises(CommandError):
        call_command("approvals_policy", "--tenant=north", "--name=big", "--quorum=10")
    call_command("approvals_policy", "--tenant=north", "--name=big", "--delete")
    assert not ApprovalPolicy.objects.exists()


def test_a_webhook_takes_its_secret_from_the_environment(monkeypatch):
    with pytest.raises(CommandError, match="FIELDOPS_WEBHOOK_SECRET"):
        call_command("approvals_webhook", "--tenant=north", "--name=ops", "--url=https://x.test/h")
    monkeypatch.setenv("FIELDOPS_WEBHOOK_SECRET", "s" * 32)
    with pytest.raises(CommandError, match="http"):
        call_command("approvals_webhook", "--tenant=north", "--name=ops", "--url=file:///etc/x")
    call_command(
        "approvals_webhook",
        "--tenant=north",
        "--name=ops",
        "--url=https://x.test/h",
        "--format=slack",
    )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret == "s" * 32 and endpoint.format == "slack" and endpoint.active
    call_command("approvals_webhook", "--tenant=north", "--name=ops", "--disable")
    endpoint.refresh_from_db()
    assert not endpoint.active
