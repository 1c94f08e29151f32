"""The token form's one-time key creates one token, also when the same form's post
arrives twice at the same moment (a resent POST while the first is still answering)."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from api import tokens
from api.models import ApiToken


def _form_key(client: Client) -> str:
    page = client.get(reverse("api-tokens")).content.decode()
    match = re.search(r'name="create_key" value="([0-9a-f]{32})"', page)
    assert match, "the create form carries no one-time key"
    return match.group(1)


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_the_same_create_form_posted_twice_at_once_creates_one_token(
    world: None, operator: Any, monkeypatch: Any
) -> None:
    """Both posts used to pass the key check (the session, read before either had
    answered) and each made an active token: the user saw one secret, the other token
    was live and held by nobody. The key is now checked where the token is created."""
    client = Client()
    client.force_login(operator)
    key = _form_key(client)
    barrier = threading.Barrier(2, timeout=10)
    real_create = tokens.token_create

    def together(**kwargs: Any) -> Any:  # both posts are past their reading of the form
        barrier.wait()
        return real_create(**kwargs)

    monkeypatch.setattr(tokens, "token_create", together)
    answers: list[tuple[int, str]] = []

    def post() -> None:
        tab = Client()
        tab.cookies = client.cookies  # the same browser session
        try:
            response = tab.post(
                reverse("api-tokens-create"),
                {"create_key": key, "name": "nightly export", "lifetime_days": "30"},
            )
            answers.append((response.status_code, response.content.decode()))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(tokens, "token_create", real_create)
    row = ApiToken.objects.get()  # exactly one token
    assert sorted(status for status, _ in answers) == [201, 409]
    shown = next(page for status, page in answers if status == 201)
    assert f"fo_{row.prefix}_" in shown  # the one created is the one whose secret was shown
    refused = next(page for status, page in answers if status == 409)
    assert f"This form already created the token “nightly export” (fo_{row.prefix}_…)" in refused
    assert 'id="new-token"' not in refused
    # A later post of that form (a reload) says the same; a new form creates the next one.
    again = client.post(
        reverse("api-tokens-create"),
        {"create_key": key, "name": "nightly export", "lifetime_days": "30"},
    )
    assert again.status_code == 409 and ApiToken.objects.count() == 1
    fresh = client.post(
        reverse("api-tokens-create"),
        {"create_key": _form_key(client), "name": "weekly export", "lifetime_days": "30"},
    )
    assert fresh.status_code == 201 and ApiToken.objects.count() == 2
