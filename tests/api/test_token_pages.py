"""The tokens page stays short for someone who has rotated tokens for years.

It listed every token the user ever made: active tokens are capped (ten), but expired and
revoked ones stay for the record, so a weekly rotation grew the page by fifty rows a year,
every one read and rendered on each visit. The page now shows every active token and the
newest expired or revoked ones (``ENDED_PER_PAGE``); older ones are a link away, a page at a
time (a keyset on creation time, the same query at any depth), and back."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from access.roles import ensure_groups
from api import selectors
from api import tokens as token_services
from api.models import ApiToken
from kernel import clock
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _console(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _made(user: Any, n: int, *, revoke: bool) -> list[ApiToken]:
    rows = []
    for i in range(n):
        row, _ = token_services.token_create(user=user, name=f"{'old' if revoke else 'live'} {i}")
        if revoke:
            token_services.token_revoke(user=user, token_id=row.pk)
        rows.append(row)
        clock.advance(60)
    return rows


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr data-token="([0-9a-zA-Z]+)"', html)


def _older_link(html: str) -> str | None:
    found = re.search(r'<a href="(\?older=[0-9]+)"[^>]*>Older', html)
    return found.group(1) if found else None


def test_active_tokens_and_the_newest_ended_ones_then_older_ones_a_page_at_a_time(
    approver: Any,
) -> None:
    per_page = selectors.ENDED_PER_PAGE
    ended = _made(approver, per_page + 5, revoke=True)
    active = _made(approver, 3, revoke=False)
    client = _console(approver)

    first = client.get(reverse("api-tokens")).content.decode()
    newest_ended = [t.prefix for t in reversed(ended)][:per_page]
    assert _listed(first) == [t.prefix for t in reversed(active)] + newest_ended
    assert "5 older expired or revoked tokens" in first
    link = _older_link(first)
    assert link is not None

    second = client.get(reverse("api-tokens") + link).content.decode()
    assert _listed(second) == [t.prefix for t in reversed(ended)][per_page:]
    assert _older_link(second) is None
    assert 'href="/api/tokens/"' in second  # back to the newest
    assert "Create a token" in second  # the form stays on every page


def test_every_page_costs_the_same_queries_however_many_tokens_ended(approver: Any) -> None:
    client = _console(approver)
    _made(approver, selectors.ENDED_PER_PAGE + 2, revoke=True)
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("api-tokens"))
    _made(approver, 3 * selectors.ENDED_PER_PAGE, revoke=True)
    with CaptureQueriesContext(connection) as many:
        page = client.get(reverse("api-tokens"))
    assert len(many) == len(few)
    older = _older_link(page.content.decode())
    assert older is not None
    with CaptureQueriesContext(connection) as deeper:
        client.get(reverse("api-tokens") + older)
    assert len(deeper) <= len(many) + 1  # the cursor's own row


@pytest.mark.parametrize("cursor", ["x", "-1", "1e3", "²", "99999999", "1" * 40, ""])
def test_a_page_link_that_names_no_token_of_yours_says_so(approver: Any, cursor: str) -> None:
    _made(approver, 2, revoke=True)
    page = _console(approver).get(reverse("api-tokens"), {"older": cursor})
    body = page.content.decode()
    if cursor == "":
        assert page.status_code == 200
        return
    assert page.status_code == 400
    assert "That page of tokens does not exist" in body
    assert len(_listed(body)) == 2  # the newest page, so nothing is hidden


def test_another_users_token_is_no_page_of_mine(approver: Any) -> None:
    ensure_groups()
    other = make_user("other-approver", "north", "approver")
    theirs = _made(other, 1, revoke=True)[0]
    mine = _made(approver, 1, revoke=True)[0]
    page = _console(approver).get(reverse("api-tokens"), {"older": str(theirs.pk)})
    assert page.status_code == 400
    assert _listed(page.content.decode()) == [mine.prefix]
