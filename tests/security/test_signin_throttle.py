"""Failed sign-ins are throttled per account and per address, in the database."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.sessions.models import Session

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
