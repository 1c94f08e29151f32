"""Nothing only in a hover title: a phone or keyboard user never sees a ``title=``. A
token's exact UTC expiry and last use, a catalog version's digest and why a version runs
nowhere were told only there; each is now text on the page."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

import pytest
from django.urls import reverse

from catalog.models import CapabilityVersion
from kernel import clock
from tests.api.test_token_expiry import DAY, console, create, get

pytestmark = pytest.mark.django_db


def shown_text(html: str) -> str:
    """What a reader sees: the page's text without attributes (titles included)."""
    main = html.split("<main", 1)[1]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", main))


def test_a_tokens_exact_utc_expiry_and_last_use_are_text_on_the_list(approver: Any) -> None:
    row, secret = create(approver, name="nightly export", lifetime="30")
    clock.advance(DAY)
    assert get("/checkpoints", secret).status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None
    text = shown_text(console(approver).get(reverse("api-tokens")).content.decode())
    utc = lambda t: t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")  # noqa: E731
    assert f"expires in 28 days ({utc(row.expires_at)})" in text
    assert f"under a minute ago ({utc(row.last_used_at)})" in text


def test_a_versions_full_digest_and_why_it_runs_nowhere_are_text_on_the_catalog(
    approver: Any,
) -> None:
    html = console(approver).get(reverse("catalog-index")).content.decode()
    text = shown_text(html)
    rows = list(CapabilityVersion.objects.all())
    assert rows
    for row in rows:
        assert row.digest in text, row.ref
    # "no" alone said nothing; the reason was in the title only.
    assert re.search(r"no: \w", text)
    assert not re.search(r'<code title="[0-9a-f]{64}"', html)


def test_an_event_reference_without_a_page_shows_its_value_on_the_run_page(
    operator: Any,
) -> None:
    from runs.console.runs_selectors import ref_links
    from runs.models import Event
    from tests.helpers import make_run

    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    # A reference the console has no page for (a callback's correlation, as the sweeper
    # records one): the newest event again, with such a reference.
    last = Event.objects.filter(run=run).order_by("-sequence").first()
    assert last is not None
    last.pk, last.sequence, last.event_id = None, last.sequence + 1, str(uuid.uuid4())
    last.refs = {"correlation": "c0ffee" * 6}
    last.save()
    others = {
        (ref.name, ref.value)
        for e in Event.objects.filter(run=run)
        for ref in ref_links(e.refs or {})
        if ref.kind == "other"
    }
    assert others == {("correlation", "c0ffee" * 6)}
    html = console(operator).get(reverse("runs-detail", args=[run.pk])).content.decode()
    text = shown_text(html)
    for name, value in others:
        assert f"{name}: {value}" in text or f"{name}: {value[:12]}… (show the full" in text
        assert value in text, name


def test_a_ledger_records_full_key_and_intent_hash_are_text_on_the_recovery_page(
    operator: Any, approver: Any
) -> None:
    from runs.models import EffectAttempt
    from sim.world.models import LedgerEntry
    from tests.helpers import approve, make_run

    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(run, approver)
    attempt = EffectAttempt.objects.get(run=run)
    html = console(operator).get(reverse("recovery"), {"q": attempt.idempotency_key})
    text = shown_text(html.content.decode())
    assert "Ledger records" in text
    assert f"{attempt.idempotency_key[:16]}… (show the full key) {attempt.idempotency_key}" in (
        text
    )
    entry = LedgerEntry.objects.get(idempotency_key=attempt.idempotency_key)
    assert f"{entry.intent_hash[:12]}… (show the full intent hash) {entry.intent_hash}" in text
