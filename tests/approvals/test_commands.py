"""The commands that configure approval policies and webhook endpoints."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalPolicy, WebhookEndpoint
from tests.conftest import make_user
from tests.helpers import manage_refused

pytestmark = pytest.mark.django_db


@pytest.fixture
def approvers():
    make_user("ana", "north", "approver")
    make_user("bo", "north", "approver")


def test_a_policy_is_created_replaced_and_deleted(approvers):
    call_command(
        "approvals_policy",
        "--tenant=north",
        "--name=big",
        "--quorum=2",
        "--quorum-min-quantity=2",
        "--quorum-part=b22",
        "--user=ana",
        "--user=bo",
    )
    policy = ApprovalPolicy.objects.get()
    assert policy.quorum == 2 and policy.quorum_part_ids == ["B22"]
    assert policy.usernames == ["ana", "bo"]
    call_command("approvals_policy", "--tenant=north", "--name=big", "--quorum=3")
    assert ApprovalPolicy.objects.get().quorum == 3
    with pytest.raises(CommandError):
        call_command("approvals_policy", "--tenant=north", "--name=big", "--quorum=10")
    call_command("approvals_policy", "--tenant=north", "--name=big", "--delete")
    assert not ApprovalPolicy.objects.exists()
    with pytest.raises(CommandError, match="no policy north/big"):
        call_command("approvals_policy", "--tenant=north", "--name=big", "--delete")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--tenant=nowhere"], "unknown tenant 'nowhere'"),
        (["--name= "], "--name must not be empty"),
        (["--name=" + "x" * 81], "at most 80"),
        (["--name=a\x07b"], "control characters"),
        (["--capability=reserve_prat"], "unknown capability 'reserve_prat'"),
        (["--effect-class=weird"], "unknown effect class 'weird'"),
        (["--group=no-such-group"], "unknown group 'no-such-group'"),
        (["--user=ghost"], "no user 'ghost' in tenant 'north'"),
        (["--user=sam"], "no user 'sam' in tenant 'north'"),
        (["--user=olga"], "'olga' does not hold the approver role"),
        (["--user=ana", "--quorum=2"], "only 1 user(s) may decide"),
        (["--quorum=0"], "--quorum must be 1..9"),
        (["--quorum-min-quantity=-1"], "--quorum-min-quantity: '-1' is not a whole number"),
        (["--quorum-min-quantity=70000"], "--quorum-min-quantity must be 1..50"),
        (["--quorum-part= "], "unknown part ''"),
        (["--quorum-part=B52"], "unknown part 'B52'"),
    ],
)
def test_a_policy_that_could_never_be_met_is_refused_and_nothing_is_written(
    approvers, arguments, message
):
    make_user("sam", "south", "approver")
    make_user("olga", "north", "operator")
    given = {a.split("=", 1)[0] for a in arguments}
    defaults = [d for d in ("--tenant=north", "--name=p") if d.split("=")[0] not in given]
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("approvals_policy", *defaults, *arguments)
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
    with pytest.raises(CommandError, match="no webhook endpoint north/nope"):
        call_command("approvals_webhook", "--tenant=north", "--name=nope", "--disable")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--tenant=nowhere"], "unknown tenant 'nowhere'"),
        (["--name="], "--name must not be empty"),
        (["--url=https://ops:hunter2@x.test/h"], "must not carry a user name or password"),
        (["--url=https://x.test/" + "a" * 500], "at most 500"),
        (["--url=https://x.test/a b"], "spaces or control characters"),
        (["--url=https:///nohost"], "must be an http(s) URL"),
        # urlsplit's ValueError escaped as a traceback; a port out of range or not a number
        # was stored, and every delivery to it failed
        (["--url=http://[::1"], "must be an http(s) URL"),
        (["--url=https://x.test:99999/h"], "must be an http(s) URL"),
        (["--url=https://x.test:port/h"], "must be an http(s) URL"),
        (["--secret-env=PATH"], "--secret-env must name FIELDOPS_WEBHOOK_SECRET"),
        (["--secret-env=FIELDOPS_WEBHOOK_SECRET_LONG"], "at most 200"),
    ],
)
def test_a_webhook_with_bad_settings_is_refused_and_nothing_is_written(
    monkeypatch, arguments, message
):
    monkeypatch.setenv("FIELDOPS_WEBHOOK_SECRET", "s" * 32)
    monkeypatch.setenv("FIELDOPS_WEBHOOK_SECRET_LONG", "s" * 201)
    given = {a.split("=", 1)[0] for a in arguments}
    defaults = [
        d
        for d in ("--tenant=north", "--name=ops", "--url=https://x.test/h")
        if d.split("=")[0] not in given
    ]
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("approvals_webhook", *defaults, *arguments)
    assert not WebhookEndpoint.objects.exists()


# What Python's int() reads as a number but a person did not type as one (digits 0-9).
NOT_WHOLE_NUMBERS = ["\u0663", "\uff13", "+5", " 3", "1_0", "1e3", "9" * 5000]


@pytest.mark.parametrize("text", NOT_WHOLE_NUMBERS)
@pytest.mark.parametrize("option", ["--quorum", "--quorum-min-quantity"])
def test_a_number_not_written_in_digits_is_refused_and_nothing_is_written(approvers, option, text):
    with pytest.raises(CommandError, match=f"argument {option}: .* is not a whole number"):
        call_command("approvals_policy", "--tenant=north", "--name=p", f"{option}={text}")
    assert not ApprovalPolicy.objects.exists()


def test_delete_and_disable_take_no_settings_and_change_nothing_with_them(approvers, monkeypatch):
    call_command(
        "approvals_policy", "--tenant=north", "--name=p", "--quorum=2", "--user=ana", "--user=bo"
    )
    with pytest.raises(CommandError, match="--tenant and --name only, not --quorum, --quorum-part"):
        call_command(
            "approvals_policy",
            "--tenant=north",
            "--name=p",
            "--delete",
            "--quorum=3",
            "--quorum-part=A17",
        )
    assert ApprovalPolicy.objects.get().quorum == 2  # not deleted, not changed
    monkeypatch.setenv("FIELDOPS_WEBHOOK_SECRET", "s" * 32)
    call_command("approvals_webhook", "--tenant=north", "--name=ops", "--url=https://x.test/h")
    with pytest.raises(CommandError, match="--tenant and --name only, not --url"):
        call_command(
            "approvals_webhook",
            "--tenant=north",
            "--name=ops",
            "--disable",
            "--url=https://y.test/h",
        )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.active and endpoint.url == "https://x.test/h"


def test_the_commands_refuse_with_one_line_in_a_real_process():
    assert manage_refused(
        "approvals_policy", "--tenant=north", "--name=p", "--quorum=\u0663"
    ).endswith(
        "error: argument --quorum: '\u0663' is not a whole number (at most 18 of the digits 0-9)"
    )
    assert (
        manage_refused(
            "approvals_webhook", "--tenant=north", "--name=ops", "--disable", "--format=slack"
        )
        == "CommandError: --disable names an endpoint by --tenant and --name only, not --format"
    )
    # A URL urlsplit cannot read was a ValueError traceback.
    assert (
        manage_refused(
            "approvals_webhook",
            "--tenant=north",
            "--name=ops",
            "--url=http://[::1",
            FIELDOPS_WEBHOOK_SECRET="s" * 32,
        )
        == "CommandError: --url must be an http(s) URL"
    )
