"""API tokens expire: a lifetime is chosen from the offered set when a token is created,
an expired token is a 401 ``token_expired`` (told apart from an unknown or revoked one),
the list tells each token's expiry and last use, and the token surfaces refuse what a
hostile client tries (a token in the address, another user's token, a deactivated user)."""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from access.roles import ensure_groups
from api.models import ApiToken
from kernel import clock

pytestmark = pytest.mark.django_db

V1 = "/api/v1"
DAY = 24 * 3600


def console(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def create(user: Any, name: str = "ci", lifetime: str = "7") -> tuple[ApiToken, str]:
    """A token made through the console form, as a user makes one."""
    page = console(user).post(
        reverse("api-tokens-create"), {"name": name, "lifetime_days": lifetime}
    )
    assert page.status_code == 201, page.content.decode()[:500]
    secret = page.context["secret"]
    return ApiToken.objects.get(prefix=secret.split("_")[1]), secret


def revoke(client: Client, row: ApiToken) -> Any:
    """Revoke confirmed, as the confirmation page's form sends it."""
    return client.post(reverse("api-tokens-revoke", args=[row.pk]), {"confirm": row.prefix})


def get(path: str, secret: str | None = None, **extra: Any) -> Any:
    if secret is not None:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return Client().get(V1 + path, **extra)


def test_a_token_works_until_its_lifetime_ends_then_is_refused_as_expired(approver: Any) -> None:
    row, secret = create(approver, lifetime="7")
    assert row.expires_at == row.created_at + dt.timedelta(days=7)
    assert get("/checkpoints", secret).status_code == 200
    clock.advance(7 * DAY - 60)  # a minute before the end
    assert get("/checkpoints", secret).status_code == 200
    row.refresh_from_db()
    before = (row.last_used_at, row.revoked_at, row.expires_at)
    clock.advance(61)
    with CaptureQueriesContext(connection) as queries:
        refused = get("/checkpoints", secret)
    assert refused.status_code == 401
    body = refused.json()
    expires = row.expires_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert body == {
        "code": "token_expired",
        "message": f"This API token expired at {expires}; create a new one on the console's "
        "API tokens page (the expired one can be revoked there).",
    }
    assert secret not in refused.content.decode() and row.digest not in refused.content.decode()
    assert "invalid_token" in refused["WWW-Authenticate"]
    # No state change: nothing written, the row as it was.
    assert not [q for q in queries if not q["sql"].lstrip().upper().startswith("SELECT")]
    row.refresh_from_db()
    assert (row.last_used_at, row.revoked_at, row.expires_at) == before


def test_an_unknown_or_revoked_token_is_not_told_apart_as_expired(approver: Any) -> None:
    row, secret = create(approver, lifetime="7")
    clock.advance(8 * DAY)
    # The right prefix with a wrong secret says nothing about the token.
    forged = get("/checkpoints", secret[:-4] + "AAAA")
    assert (forged.status_code, forged.json()["code"]) == (401, "unauthenticated")
    assert forged["WWW-Authenticate"] == "Bearer"
    # An expired token can still be revoked; revoked, it is "unauthenticated".
    client = console(approver)
    assert revoke(client, row).status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert get("/checkpoints", secret).json()["code"] == "unauthenticated"


def test_the_list_tells_expiry_last_use_and_marks_expired_tokens(approver: Any) -> None:
    expired, _ = create(approver, name="old sync", lifetime="7")
    clock.advance(10 * DAY)
    fresh, secret = create(approver, name="nightly export", lifetime="30")
    soon, _ = create(approver, name="short job", lifetime="7")
    revoked, _ = create(approver, name="gone", lifetime="90")
    revoke(console(approver), revoked)
    clock.advance(2 * DAY)
    assert get("/checkpoints", secret).status_code == 200
    clock.advance(3 * 3600)
    fresh.refresh_from_db()
    page = console(approver).get(reverse("api-tokens"))
    html = page.content.decode()

    def row_of(token: ApiToken) -> str:
        found = re.search(rf'<tr data-token="{token.prefix}"[^>]*>.*?</tr>', html, re.S)
        assert found, token.name
        return found.group(0)

    utc = lambda t: t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")  # noqa: E731
    assert 'data-status="active"' in row_of(fresh)
    assert f'>expires in 27 days</time> <span class="small muted">({utc(fresh.expires_at)})' in (
        row_of(fresh)
    )
    assert f'>3 hours ago</time> <span class="small muted">({utc(fresh.last_used_at)})' in (
        row_of(fresh)
    )
    assert "expires soon" in row_of(soon) and "expires in 4 days" in row_of(soon)
    assert "never" in row_of(soon)
    old = row_of(expired)
    assert 'data-status="expired"' in old and ">expired 5 days ago</time>" in old
    assert '<span class="badge bad">expired</span>' in old
    assert "Revoke" in old  # an expired token can still be revoked
    gone = row_of(revoked)
    assert 'data-status="revoked"' in gone and "Revoke" not in gone
    # The form offers the lifetimes, 90 days chosen, and no "never".
    form = re.search(r'<select id="token-lifetime".*?</select>', html, re.S)
    assert form is not None
    options = re.findall(r'<option value="(\d+)"( selected)?>', form.group(0))
    assert options == [("7", ""), ("30", ""), ("90", " selected"), ("365", "")]


@pytest.mark.parametrize(
    "lifetime",
    [
        ["-7"],
        ["0"],
        ["1"],
        ["99999999999999999999999999"],
        ["٩٠"],  # Arabic-Indic digits: int() would read 90
        ["\uff19\uff10"],  # fullwidth digits
        [" 90"],
        ["090"],
        ["+90"],
        ["90.0"],
        ["never"],
        [""],
        [],  # not given
    ],
)
def test_a_lifetime_not_offered_is_refused_and_the_name_is_kept(
    approver: Any, lifetime: list[str]
) -> None:
    response = console(approver).post(
        reverse("api-tokens-create"), {"name": "billing sync", "lifetime_days": lifetime}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "lifetime" in html and "7, 30, 90 or 365 days" in html
    assert "no token was created" in html.lower()
    assert 'value="billing sync"' in html
    assert re.search(r'<select id="token-lifetime"[^>]*aria-invalid="true"', html)
    assert not ApiToken.objects.exists()


def test_a_lifetime_given_twice_is_refused_naming_the_field(approver: Any) -> None:
    # Refused before the view reads the form (fieldops/fields.py): no value is chosen.
    response = console(approver).post(
        reverse("api-tokens-create"), {"name": "billing sync", "lifetime_days": ["7", "90"]}
    )
    assert response.status_code == 400
    assert "lifetime_days" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_refused_name_keeps_the_chosen_lifetime(approver: Any) -> None:
    response = console(approver).post(
        reverse("api-tokens-create"), {"name": "x\ty", "lifetime_days": "365"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert '<option value="365" selected>' in html and 'value="x\ty"' in html
    assert not ApiToken.objects.exists()


def test_the_migration_gives_tokens_made_before_it_ninety_days(transactional_db: Any) -> None:
    from django.db.migrations.executor import MigrationExecutor

    ensure_groups()
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="old-integration", password="pw")
    executor = MigrationExecutor(connection)
    executor.migrate([("api", "0001_api_tokens")])
    try:
        old_apps = executor.loader.project_state([("api", "0001_api_tokens")]).apps
        OldToken = old_apps.get_model("api", "ApiToken")
        made = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        OldToken.objects.create(
            user_id=user.pk, name="legacy", prefix="0123456789ab", digest="0" * 64, created_at=made
        )
        OldToken.objects.create(
            user_id=user.pk,
            name="revoked legacy",
            prefix="ba9876543210",
            digest="1" * 64,
            created_at=made,
            revoked_at=made,
        )
        started = dt.datetime.now(dt.UTC)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("api"))
    finished = dt.datetime.now(dt.UTC)
    ninety = dt.timedelta(days=90)
    for token in ApiToken.objects.all():
        assert started + ninety <= token.expires_at <= finished + ninety, token.name
    legacy = ApiToken.objects.get(name="legacy")
    assert legacy.revoked_at is None and not legacy.expired_at(clock.now())
    assert ApiToken.objects.get(name="revoked legacy").revoked


def test_last_use_is_recorded_at_most_once_a_minute(approver: Any) -> None:
    row, secret = create(approver, lifetime="30")
    assert row.last_used_at is None
    assert get("/checkpoints", secret).status_code == 200
    row.refresh_from_db()
    first = row.last_used_at
    assert first is not None
    clock.advance(30)
    with CaptureQueriesContext(connection) as queries:
        assert get("/checkpoints", secret).status_code == 200
    assert not [q for q in queries if "UPDATE" in q["sql"] and "api_apitoken" in q["sql"]]
    row.refresh_from_db()
    assert row.last_used_at == first
    clock.advance(31)
    assert get("/checkpoints", secret).status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None and row.last_used_at > first


def test_expired_tokens_do_not_count_against_the_active_limit(approver: Any) -> None:
    from api.tokens import MAX_ACTIVE_TOKENS

    for i in range(MAX_ACTIVE_TOKENS):
        create(approver, name=f"t{i}", lifetime="7")
    full = console(approver).post(
        reverse("api-tokens-create"), {"name": "one more", "lifetime_days": "7"}
    )
    assert full.status_code == 400 and "revoke one first" in full.content.decode()
    clock.advance(7 * DAY + 1)
    create(approver, name="after expiry", lifetime="7")


def test_the_page_that_shows_the_secret_is_not_stored_by_any_cache(approver: Any) -> None:
    page = console(approver).post(
        reverse("api-tokens-create"), {"name": "ci", "lifetime_days": "90"}
    )
    assert page.status_code == 201
    assert "no-store" in page["Cache-Control"] and "private" in page["Cache-Control"]


def test_a_token_in_the_address_is_refused_even_beside_a_good_header(approver: Any) -> None:
    row, secret = create(approver, lifetime="30")
    for query in ({"access_token": secret}, {"token": secret}, {"world": secret}):
        alone = Client().get(V1 + "/checkpoints", query)
        assert alone.status_code == 401 and alone.json()["code"] == "token_in_query"
        assert secret not in alone.content.decode()
        both = Client().get(V1 + "/checkpoints", query, HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert both.status_code == 401 and both.json()["code"] == "token_in_query"
    row.refresh_from_db()
    assert row.last_used_at is None  # it was never accepted


def test_a_token_without_the_bearer_scheme_is_not_written_to_the_log(
    approver: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.DEBUG = True
    _, secret = create(approver, lifetime="30")
    with caplog.at_level(logging.DEBUG):
        for header in (secret, f"Token {secret}", f"Basic {secret}"):
            response = get("/checkpoints", HTTP_AUTHORIZATION=header)
            assert response.json()["code"] == "unauthenticated"
    assert secret not in caplog.text


def test_a_token_follows_its_user_deactivated_or_without_the_role(approver: Any) -> None:
    _, secret = create(approver, lifetime="30")
    approver.groups.clear()
    lost_role = get("/checkpoints", secret)
    assert (lost_role.status_code, lost_role.json()["code"]) == (403, "forbidden")
    approver.is_active = False
    approver.save(update_fields=["is_active"])
    gone = get("/checkpoints", secret)
    assert (gone.status_code, gone.json()["code"]) == (401, "unauthenticated")


def test_a_second_revoke_or_another_users_token_changes_nothing(
    approver: Any, operator: Any, outsider: Any
) -> None:
    row, secret = create(approver, lifetime="30")
    for stranger in (operator, outsider):  # same tenant, other tenant
        assert revoke(console(stranger), row).status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None and get("/checkpoints", secret).status_code == 200
    client = console(approver)
    assert revoke(client, row).status_code == 302
    row.refresh_from_db()
    first = row.revoked_at
    clock.advance(60)
    assert revoke(client, row).status_code == 409  # already revoked: said, nothing written
    row.refresh_from_db()
    assert row.revoked_at == first
    assert get("/checkpoints", secret).json()["code"] == "unauthenticated"


def test_a_token_cannot_mint_or_list_tokens(approver: Any) -> None:
    # Otherwise a leaked token could renew itself past its expiry for ever.
    _, secret = create(approver, lifetime="7")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    minted = Client().post(
        reverse("api-tokens-create"), {"name": "renewal", "lifetime_days": "365"}, **auth
    )
    assert minted.status_code == 302 and minted["Location"].startswith("/login/")
    listed = Client().get(reverse("api-tokens"), **auth)
    assert listed.status_code == 302 and listed["Location"].startswith("/login/")
    assert ApiToken.objects.count() == 1
