"""Approval notifications: email to the eligible approvers and signed webhooks, through a
durable outbox (``Delivery`` rows written in the transaction that opened, decided or
expired the checkpoint), sent by the sweeper with retries and backoff; every attempt is
logged (``DeliveryAttempt``) and shown on the delivery log page.

A notification carries what an approver may see on the queue (the effect summary, the
expiry, the quorum) and a link to the exact proposal page; never a secret, never the
canonical proposal, never a way to decide: deciding needs signing in and the hash shown
there. Webhook bodies are signed: ``X-FieldOps-Signature: sha256=<hex>`` is
HMAC-SHA256(secret, ``<X-FieldOps-Timestamp>.<body>``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from access.roles import APPROVER
from approvals import rows
from approvals.models import Checkpoint, Delivery, DeliveryAttempt, WebhookEndpoint
from kernel import clock

log = logging.getLogger("fieldops.notify")

EVENTS = ("opened", "expiring", "decided", "expired")
SIGNATURE_HEADER = "X-FieldOps-Signature"
TIMESTAMP_HEADER = "X-FieldOps-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str, timestamp: str, body: bytes, signature: str, *, max_skew: int = 300
) -> bool:
    """What a receiver checks: the signature matches and the timestamp is recent."""
    try:
        age = abs(time.time() - int(timestamp))
    except ValueError:
        return False
    return age <= max_skew and hmac.compare_digest(sign(secret, timestamp, body), signature)


def proposal_url(checkpoint: Checkpoint) -> str:
    base = settings.FIELDOPS_BASE_URL.rstrip("/")
    return base + reverse("approvals-detail", args=[checkpoint.pk])


def message(checkpoint: Checkpoint, event: str) -> dict[str, Any]:
    """The notification's content (what an approver may see on the queue, and the link)."""
    headline = {
        "opened": "Approval needed",
        "expiring": "Approval about to expire",
        "decided": f"Checkpoint {checkpoint.status.lower()}",
        "expired": "Checkpoint expired",
    }[event]
    return {
        "event": f"checkpoint.{event}",
        "tenant": checkpoint.tenant,
        "checkpoint": checkpoint.pk,
        "run": str(checkpoint.run_id),
        "status": checkpoint.status,
        "summary": checkpoint.effect_summary,
        "expires_at": clock.iso(checkpoint.expires_at),
        "quorum": checkpoint.quorum,
        "url": proposal_url(checkpoint),
        "subject": f"[FieldOps] {headline}: {checkpoint.effect_summary[:120]}",
    }


def _recipients(checkpoint: Checkpoint) -> list[str]:
    return rows.recipients(
        tenant=checkpoint.tenant,
        role=APPROVER,
        requester=checkpoint.requested_by_ref.removeprefix("user:"),
        group=checkpoint.eligible_group,
        usernames=[str(name) for name in checkpoint.eligible_users],
    )


def checkpoint_notify(*, checkpoint: Checkpoint, event: str) -> int:
    """Queue the notifications of ``event`` on an approval checkpoint (call inside the
    transaction that caused it); return how many were queued. A repeated call queues
    nothing twice."""
    assert event in EVENTS
    if checkpoint.kind != Checkpoint.Kind.APPROVAL:
        return 0
    now = clock.now()
    content = message(checkpoint, event)
    deliveries = [
        Delivery(
            tenant=checkpoint.tenant,
            checkpoint=checkpoint,
            event=event,
            channel=Delivery.Channel.EMAIL,
            target=address,
            payload=content,
            next_attempt_at=now,
            created_at=now,
        )
        for address in _recipients(checkpoint)
    ]
    deliveries += [
        Delivery(
            tenant=checkpoint.tenant,
            checkpoint=checkpoint,
            event=event,
            channel=Delivery.Channel.WEBHOOK,
            target=endpoint.name,
            endpoint=endpoint,
            payload=content,
            next_attempt_at=now,
            created_at=now,
        )
        for endpoint in rows.webhook_endpoints(checkpoint.tenant)
    ]
    Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
    return len(deliveries)


def checkpoints_remind(*, now: dt.datetime | None = None, limit: int = 100) -> int:
    """Queue "about to expire" notices for pending approvals that expire within
    ``FIELDOPS_APPROVAL_REMIND_SECONDS`` (0 turns reminders off)."""
    ahead = settings.FIELDOPS_APPROVAL_REMIND_SECONDS
    if ahead <= 0:
        return 0
    now = now or clock.now()
    due = (
        Checkpoint.objects.filter(
            kind=Checkpoint.Kind.APPROVAL,
            status=Checkpoint.Status.PENDING,
            expires_at__gt=now,
            expires_at__lte=now + dt.timedelta(seconds=ahead),
        )
        .exclude(deliveries__event="expiring")
        .order_by("expires_at")[:limit]
    )
    queued = 0
    for checkpoint in due:
        with transaction.atomic():
            queued += checkpoint_notify(checkpoint=checkpoint, event="expiring")
    return queued


def backoff(attempts: int) -> dt.timedelta:
    """Wait after the ``attempts``-th failure: base, 2x base, 4x base, ... (capped)."""
    base = settings.FIELDOPS_NOTIFY_BACKOFF_SECONDS
    return dt.timedelta(seconds=min(base * 2 ** max(0, attempts - 1), 3600))


def deliveries_send_due(*, now: dt.datetime | None = None, limit: int = 20) -> int:
    """Claim and attempt due deliveries (compare-and-set claims: one sender per row);
    return how many were attempted. Never raises for a failed delivery."""
    now = now or clock.now()
    due = list(
        Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:limit]
    )
    attempted = 0
    for delivery_id in due:
        claimed = (
            Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .update(claimed_until=now + dt.timedelta(seconds=60))
        )
        if claimed == 1:
            _attempt(Delivery.objects.select_related("endpoint").get(pk=delivery_id))
            attempted += 1
    return attempted


def _attempt(delivery: Delivery) -> None:
    started = time.monotonic()
    number = delivery.attempts + 1
    try:
        if delivery.channel == Delivery.Channel.EMAIL:
            ok, code, error = _send_email(delivery)
        else:
            ok, code, error = _send_webhook(delivery)
    except Exception as exc:  # a broken transport must not stop the other deliveries
        log.exception("delivery %s failed", delivery.pk)
        ok, code, error = False, None, f"{type(exc).__name__}: {exc}"[:300]
    now = clock.now()
    with transaction.atomic():
        DeliveryAttempt.objects.create(
            delivery=delivery,
            number=number,
            at=now,
            ok=ok,
            status_code=code,
            error=error[:300],
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        if ok:
            status, next_at = Delivery.Status.DELIVERED, delivery.next_attempt_at
        elif number >= settings.FIELDOPS_NOTIFY_MAX_ATTEMPTS:
            status, next_at = Delivery.Status.FAILED, delivery.next_attempt_at
        else:
            status, next_at = Delivery.Status.PENDING, now + backoff(number)
        Delivery.objects.filter(pk=delivery.pk).update(
            attempts=number,
            status=status,
            next_attempt_at=next_at,
            claimed_until=None,
            delivered_at=now if ok else None,
        )


def _send_email(delivery: Delivery) -> tuple[bool, int | None, str]:
    payload = delivery.payload
    body = (
        f"{payload['summary']}\n\n"
        f"Status: {payload['status']}. Expires at {payload['expires_at']} UTC. "
        f"Approvals needed: {payload['quorum']}.\n\n"
        f"Review the exact proposal (sign in; a decision binds the hash shown there):\n"
        f"{payload['url']}\n"
    )
    send_mail(
        payload["subject"],
        body,
        settings.DEFAULT_FROM_EMAIL,
        [delivery.target],
        fail_silently=False,
    )
    return True, None, ""


def webhook_body(delivery: Delivery) -> bytes:
    payload = delivery.payload
    if delivery.endpoint is not None and delivery.endpoint.format == WebhookEndpoint.Format.SLACK:
        content: dict[str, Any] = {
            "text": f"{payload['subject']}\n<{payload['url']}|Review the exact proposal>"
            f" (expires {payload['expires_at']} UTC)"
        }
    else:
        content = {k: v for k, v in payload.items() if k != "subject"}
    return json.dumps(content, sort_keys=True, separators=(",", ":")).encode()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook is delivered to the address configured, never where its answer points:
    urllib followed a 301/302/303 as a GET (with the signature headers) to any http, https
    or ftp address, so an endpoint could make this server request an internal address and
    learn its status from the delivery log."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _send_webhook(delivery: Delivery) -> tuple[bool, int | None, str]:
    endpoint = delivery.endpoint
    if endpoint is None or not endpoint.active:
        return False, None, "endpoint removed or inactive"
    if urlsplit(endpoint.url).scheme not in ("http", "https"):
        return False, None, "only http and https endpoints are called"
    body = webhook_body(delivery)
    timestamp = str(int(time.time()))
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        endpoint.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "FieldOps-Webhooks/1",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(endpoint.secret, timestamp, body),
            "X-FieldOps-Delivery": str(delivery.pk),
        },
    )
    try:
        # The scheme is checked above (http or https only).
        with _OPENER.open(  # nosec B310
            request, timeout=settings.FIELDOPS_WEBHOOK_TIMEOUT_SECONDS
        ) as response:
            code = response.status
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            where = str(exc.headers.get("Location", ""))[:200]
            return (
                False,
                exc.code,
                (
                    f"HTTP {exc.code} redirect to {where!r}: not followed; configure the "
                    "endpoint's final address"
                ),
            )
        return False, exc.code, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, None, str(getattr(exc, "reason", exc))[:300]
    return 200 <= code < 300, code, "" if 200 <= code < 300 else f"HTTP {code}"
