"""Approval notifications (issue 19): email to eligible approvers and signed webhooks,
queued with the checkpoint change, delivered with retries and backoff, every attempt
logged."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail
from django.test import Client, override_settings
from django.urls import reverse

from approvals import notify
from approvals.models import ApprovalPolicy, Checkpoint, Delivery, DeliveryAttempt, WebhookEndpoint
from kernel import clock
from runs.engine import sweeper
from tests.conftest import make_user
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db


def _with_email(user: Any, address: str) -> Any:
    user.email = address
    user.save(update_fields=["email"])
    return user


class Receiver(http.server.BaseHTTPRequestHandler):
    """Fails the first ``fail`` requests with 500, then answers 200; records each one."""

    seen: list[dict[str, Any]]
    fail: int

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        status = 500 if len(self.seen) <= self.fail else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"ok" if status == 200 else b"boom")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[Receiver]]]:
    handler = type("FlakyReceiver", (Receiver,), {"seen": [], "fail": 2})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    finally:
        server.shutdown()
        server.server_close()


def test_eligible_approvers_get_an_email_with_a_link_to_the_exact_proposal(world, operator):
    _with_email(make_user("ana", "north", "approver"), "ana@example.test")
    _with_email(make_user("bo", "north", "approver"), "bo@example.test")
    _with_email(operator, "operator@example.test")  # the requester: never asked
    _with_email(make_user("south-appr", "south", "approver"), "south@example.test")
    ApprovalPolicy.objects.create(
        tenant="north", name="ana-only", capability="reserve_part", usernames=["ana"]
    )
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    cp = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    queued = Delivery.objects.filter(checkpoint=cp)
    assert [(d.event, d.channel, d.target) for d in queued] == [
        ("opened", "email", "ana@example.test")
    ]
    assert notify.deliveries_send_due() == 1
    [message] = mail.outbox
    assert message.to == ["ana@example.test"]
    assert "Approval needed" in message.subject
    link = f"http://127.0.0.1:8000{reverse('approvals-detail', args=[cp.pk])}"
    assert link in message.body
    # No proposal hash, no canonical content, nothing to decide with.
    assert cp.proposal_hash not in message.body and "seen_hash" not in message.body
    assert Delivery.objects.get(checkpoint=cp).status == "DELIVERED"
    assert [a.ok for a in DeliveryAttempt.objects.all()] == [True]


def test_a_webhook_that_fails_twice_is_delivered_once_on_the_third_attempt(
    world, operator, receiver
):
    url, handler = receiver
    WebhookEndpoint.objects.create(tenant="north", name="ops-hook", url=url, secret="s3cret")
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    delivery = Delivery.objects.get(channel="webhook")
    assert delivery.event == "opened" and delivery.target == "ops-hook"
    assert notify.deliveries_send_due() == 1
    delivery.refresh_from_db()
    assert delivery.status == "PENDING" and delivery.attempts == 1
    assert notify.deliveries_send_due() == 0  # backing off: not due yet
    clock.advance(10)
    assert notify.deliveries_send_due() == 1
    clock.advance(19)
    assert notify.deliveries_send_due() == 0  # the second wait is twice as long
    clock.advance(1)
    sweeper.sweep()  # the sweeper drives deliveries too
    delivery.refresh_from_db()
    assert delivery.status == "DELIVERED" and delivery.attempts == 3
    attempts = list(DeliveryAttempt.objects.filter(delivery=delivery).order_by("number"))
    assert [(a.number, a.ok, a.status_code) for a in attempts] == [
        (1, False, 500),
        (2, False, 500),
        (3, True, 200),
    ]
    assert len(handler.seen) == 3
    bodies = {r["body"] for r in handler.seen}
    assert len(bodies) == 1  # the same delivery each time
    for request in handler.seen:
        headers = request["headers"]
        assert notify.verify(
            "s3cret",
            headers[notify.TIMESTAMP_HEADER.lower()],
            request["body"],
            headers[notify.SIGNATURE_HEADER.lower()],
        )
        assert not notify.verify(
            "wrong",
            headers[notify.TIMESTAMP_HEADER.lower()],
            request["body"],
            headers[notify.SIGNATURE_HEADER.lower()],
        )
        assert headers["x-fieldops-delivery"] == str(delivery.pk)
    payload = json.loads(bodies.pop())
    assert payload["event"] == "checkpoint.opened" and payload["run"] == str(run.pk)
    assert "canonical" not in payload and "proposal_hash" not in payload
    # Delivered once: nothing more is sent.
    clock.advance(3600)
    assert notify.deliveries_send_due() == 0
    assert Delivery.objects.filter(status="DELIVERED").count() == 1


def test_a_slack_endpoint_gets_a_slack_payload(world, operator, receiver):
    url, handler = receiver
    handler.fail = 0
    WebhookEndpoint.objects.create(
        tenant="north", name="slack", url=url, secret="k", format="slack"
    )
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    notify.deliveries_send_due()
    body = json.loads(handler.seen[0]["body"])
    assert set(body) == {"text"} and "|Review the exact proposal>" in body["text"]


@override_settings(FIELDOPS_NOTIFY_MAX_ATTEMPTS=2)
def test_a_delivery_gives_up_after_its_attempts(world, operator):
    WebhookEndpoint.objects.create(
        tenant="north", name="dead", url="http://127.0.0.1:9/none", secret="k"
    )
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    notify.deliveries_send_due()
    clock.advance(60)
    notify.deliveries_send_due()
    delivery = Delivery.objects.get()
    assert delivery.status == "FAILED" and delivery.attempts == 2
    assert all(not a.ok and a.error for a in DeliveryAttempt.objects.all())


def test_decided_expiring_and_expired_are_notified(world, operator, approver):
    WebhookEndpoint.objects.create(tenant="north", name="h", url="http://127.0.0.1:9/", secret="k")
    decided = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(decided, approver)
    events = set(Delivery.objects.values_list("event", flat=True))
    assert events == {"opened", "decided"}
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    cp = Checkpoint.objects.get(pk=waiting.waiting_checkpoint)
    clock.advance((cp.expires_at - clock.now()).total_seconds() - 60)
    assert notify.checkpoints_remind() == 1
    assert notify.checkpoints_remind() == 0  # once
    clock.advance(120)
    sweeper.sweep()
    assert set(Delivery.objects.filter(checkpoint=cp).values_list("event", flat=True)) == {
        "opened",
        "expiring",
        "expired",
    }


def test_the_delivery_log_page_lists_each_attempt_for_the_tenant_only(world, operator, receiver):
    url, _ = receiver
    WebhookEndpoint.objects.create(tenant="north", name="ops-hook", url=url, secret="s")
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    notify.deliveries_send_due()
    client = Client()
    client.force_login(operator)
    page = client.get(reverse("approvals-deliveries")).content.decode()
    assert "ops-hook" in page and "HTTP 500" in page and "PENDING" in page
    south = make_user("south-op", "south", "operator")
    client.force_login(south)
    assert "ops-hook" not in client.get(reverse("approvals-deliveries")).content.decode()
    client.force_login(make_user("nobody", "north"))
    assert client.get(reverse("approvals-deliveries")).status_code == 403
