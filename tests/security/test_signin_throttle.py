"""Failed sign-ins are throttled per account and per address, in the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from access import signin
from access.models import SignInFailure


def _login(client, username, password, address="10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_an_account_is_refused_after_repeated_failures_even_with_the_right_password(
    client, approver, operator
):
    for _ in range(signin.PER_ACCOUNT):
        response = _login(client, "approver", "wrong")
        assert response.status_code == 200
        assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content
    refused = _login(client, "approver", "pw-approver")
    assert refused.status_code == 429
    assert b"Too many failed sign-in attempts. Try again in 15 minutes." in refused.content
    assert 0 < int(refused["Retry-After"]) <= signin.WINDOW.total_seconds()
    assert not Session.objects.exists()
    # A refused attempt is not itself counted, and other accounts are unaffected.
    assert SignInFailure.objects.filter(username="approver").count() == signin.PER_ACCOUNT
    assert _login(client, "operator", "pw-operator").status_code == 302


def test_the_refusal_ends_when_the_failures_leave_the_window(client, approver):
    for _ in range(signin.PER_ACCOUNT):
        _login(client, "approver", "wrong")
    assert _login(client, "approver", "pw-approver").status_code == 429
    SignInFailure.objects.update(at=signin.timezone.now() - signin.WINDOW - timedelta(seconds=1))
    assert _login(client, "approver", "pw-approver").status_code == 302
    # A successful sign-in clears the account's failures.
    assert not SignInFailure.objects.filter(username="approver").exists()


def test_fewer_failures_than_the_limit_do_not_lock_and_success_resets_the_count(client, approver):
    for _ in range(signin.PER_ACCOUNT - 1):
        _login(client, "approver", "wrong")
    assert _login(client, "approver", "pw-approver").status_code == 302
    assert SignInFailure.objects.count() == 0


def test_one_address_guessing_many_accounts_is_refused(client, approver):
    for n in range(signin.PER_ADDRESS - 1):  # (each real attempt costs a password hash)
        signin.record_failure(f"guess-{n}", "10.9.9.9")
    assert _login(client, "guess-last", "wrong", address="10.9.9.9").status_code == 200
    assert _login(client, "approver", "pw-approver", address="10.9.9.9").status_code == 429
    # The account itself is fine from elsewhere.
    assert _login(client, "approver", "pw-approver", address="10.0.0.2").status_code == 302


def test_the_password_is_never_stored(client, approver):
    _login(client, "approver", "secret-guess-123")
    row = SignInFailure.objects.get()
    assert "secret-guess-123" not in str(row.__dict__)


# Authentication strips the posted name and normalises it (NFKC): every spelling below
# signs in as ``approver``, so every one must meet the same counter.
def fullwidth(text: str) -> str:
    """``text`` in fullwidth forms (U+FF01..U+FF5E), which NFKC folds back to ASCII."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


RESPELLINGS = [
    "approver ",
    " approver",
    "\tapprover\n",
    "\u00a0approver",
    fullwidth("a") + "pprover",
    fullwidth("approver"),
]


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_a_locked_account_stays_locked_under_any_spelling_of_its_name(client, approver, spelling):
    for _ in range(signin.PER_ACCOUNT):
        _login(client, "approver", "wrong")
    refused = _login(client, spelling, "pw-approver")
    assert refused.status_code == 429
    assert not Session.objects.exists()


def test_failures_under_different_spellings_add_up_on_the_account(client, approver):
    for spelling in RESPELLINGS[: signin.PER_ACCOUNT]:
        assert _login(client, spelling, "wrong").status_code == 200
    assert set(SignInFailure.objects.values_list("username", flat=True)) == {"approver"}
    assert _login(client, "approver", "pw-approver").status_code == 429


def test_a_respelled_name_signs_in_and_clears_the_account_counter(client, approver):
    for _ in range(signin.PER_ACCOUNT - 1):
        _login(client, "approver", "wrong")
    assert _login(client, fullwidth("a") + "pprover ", "pw-approver").status_code == 302
    assert not SignInFailure.objects.exists()


def test_unknown_names_are_counted_under_their_normalised_spelling(client, approver):
    for spelling in ("ghost", "ghost ", " ghost", fullwidth("g") + "host", fullwidth("ghost")):
        _login(client, spelling, "guess")
    assert set(SignInFailure.objects.values_list("username", flat=True)) == {"ghost"}
    assert _login(client, "\u3000ghost", "guess").status_code == 429
    assert signin.throttle_key(f" {fullwidth('g')}host ") == "ghost"
    assert signin.throttle_key("  ") == ""


def _through_proxy(client, username, password, client_address):
    """A sign-in as the TLS-terminating proxy of the production set-up forwards it: the
    connection comes from the proxy; the client's address is the last X-Forwarded-For."""
    return client.post(
        "/login/",
        {"username": username, "password": password},
        REMOTE_ADDR="10.9.9.9",
        HTTP_X_FORWARDED_FOR=f"192.0.2.50, {client_address}",
    )


def test_behind_the_proxy_one_client_s_failures_do_not_lock_everyone_out(
    client, approver, settings
):
    """Production runs behind a proxy, so REMOTE_ADDR was the proxy's for every person:
    PER_ADDRESS failed sign-ins from anyone on the internet refused every sign-in of
    everyone (429) for up to 15 minutes, again and again."""
    settings.FIELDOPS_TRUSTED_PROXIES = 1
    for n in range(signin.PER_ADDRESS):
        _through_proxy(client, f"nobody-{n}", "wrong", "203.0.113.7")
    assert _through_proxy(client, "approver", "pw-approver", "203.0.113.7").status_code == 429
    assert _through_proxy(Client(), "approver", "pw-approver", "198.51.100.4").status_code == 302
    assert set(SignInFailure.objects.values_list("address", flat=True)) == {"203.0.113.7"}


def test_without_a_trusted_proxy_a_forwarded_address_is_ignored(client, approver, settings):
    """The embedded default trusts no proxy: a client cannot escape the per-address limit by
    sending an X-Forwarded-For of its choosing."""
    settings.FIELDOPS_TRUSTED_PROXIES = 0
    for n in range(signin.PER_ADDRESS):
        _through_proxy(client, f"nobody-{n}", "wrong", f"203.0.113.{n}")
    assert _through_proxy(Client(), "approver", "pw-approver", "198.51.100.4").status_code == 429
    assert set(SignInFailure.objects.values_list("address", flat=True)) == {"10.9.9.9"}
