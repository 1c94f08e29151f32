"""Hostile input the other security modules do not send, each found over real HTTP against
the production settings behind gunicorn on PostgreSQL (a fresh pair of eyes, 2026-12-07).

Each test sends what an attacker (or an unlucky user) sent and checks the answer says what
happened, and that nothing was stored when the input was refused.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from access.roles import roles_of, tenant_of
from api.models import ApiToken
from approvals import notify
from approvals.models import (
    Checkpoint,
    Decision,
    DecisionRefusal,
    Delivery,
    DeliveryAttempt,
    WebhookEndpoint,
)
from catalog import services as catalog
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion, LifecycleDecision, ToolListImport
from operations import services as ops
from operations.models import Operation, SavedView
from runs import services as runs
from runs.models import CallbackReceipt, Event
from tests.api.test_api import bearer, call
from tests.catalog.conftest import client_for, tool, tool_list
from tests.durable.test_callbacks_http import post
from tests.helpers import make_run, types


# -- the catalog's tool-list import ----------------------------------------------------------
def _import(user, **fields):
    return client_for(user).post(reverse("catalog-import"), {"server": "mcp://x", **fields})


def test_a_tool_list_naming_a_key_twice_is_refused_and_nothing_is_stored(catalog_admin):
    # Python's parser took the last of two names ("b", then refused for its missing
    # inputSchema); another reader of the same text takes the first. Every other JSON from
    # outside (the API's bodies, callbacks, model arguments) refuses a repeated key.
    before = (CapabilityVersion.objects.count(), ToolListImport.objects.count())
    text = (
        '{"tools": [{"name": "lookup_a", "name": "lookup_b", "inputSchema": {"type": "object"}}]}'
    )
    response = _import(catalog_admin, tool_list=text)
    assert response.status_code == 400
    page = response.content.decode()
    assert "the key &#x27;name&#x27; appears twice in one object" in page
    annotations = (
        '{"tools": [{"name": "lookup_c", "inputSchema": {"type": "object"}, '
        '"annotations": {"readOnlyHint": false, "readOnlyHint": true}}]}'
    )
    response = _import(catalog_admin, tool_list=annotations)
    assert response.status_code == 400
    assert "the key &#x27;readOnlyHint&#x27; appears twice" in response.content.decode()
    assert (CapabilityVersion.objects.count(), ToolListImport.objects.count()) == before


def test_a_tool_list_with_a_number_over_the_digit_limit_is_refused_in_words(catalog_admin):
    # The refusal quoted Python's own advice: "use sys.set_int_max_str_digits() to increase
    # the limit", which a catalog admin cannot follow.
    before = CapabilityVersion.objects.count()
    text = '{"tools": [{"name": "a", "inputSchema": {"type": "object", "x": %s}}]}' % ("1" * 5000)
    response = _import(catalog_admin, tool_list=text)
    assert response.status_code == 400
    page = response.content.decode()
    assert "not valid JSON: a number has more than 4300 digits" in page
    assert "set_int_max_str_digits" not in page
    nan = '{"tools": [{"name": "a", "inputSchema": {"type": "object", "maximum": NaN}}]}'
    assert "NaN is not allowed" in _import(catalog_admin, tool_list=nan).content.decode()
    assert CapabilityVersion.objects.count() == before


def test_an_uploaded_tool_list_saved_with_a_byte_order_mark_is_imported(catalog_admin):
    # Editors on Windows save UTF-8 with a byte order mark; the upload was refused with
    # "Unexpected UTF-8 BOM (decode using utf-8-sig)".
    data = b"\xef\xbb\xbf" + tool_list(tool("lookup_bom")).encode()
    upload = SimpleUploadedFile("tools.json", data, "application/json")
    response = _import(catalog_admin, file=upload)
    assert response.status_code == 302, response.content.decode()[:2000]
    created = CapabilityVersion.objects.get(capability_id="lookup_bom")
    assert created.discovery["source"] == "file tools.json"


def test_a_tool_list_parsed_twice_reads_the_same(catalog_admin):
    # The fix reads lists the way it did before for every well-formed list.
    text = json.dumps({"tools": [tool("lookup_same")]})
    assert _import(catalog_admin, tool_list=text).status_code == 302
    assert CapabilityVersion.objects.filter(capability_id="lookup_same").count() == 1


# -- manage.py set_user: names that pass for another person's ---------------------------------
def _set_user(monkeypatch, *argv):
    monkeypatch.setenv("FIELDOPS_USER_PASSWORD", "a-long-enough-operator-password")
    out = StringIO()
    call_command("set_user", *argv, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # Fullwidth letters: sign-in reads the name NFKC-normalised, so this account could
        # never sign in (its name reads as "lead"), yet the audit trail showed it as
        # user:lead in fullwidth letters.
        ("\uff4c\uff45\uff41\uff44", "signs in as 'lead' (sign-in normalises the name)"),
        # A Cyrillic "\u0435" in a Latin name: it and user:lead look the same.
        ("l\u0435ad", "mixes letters of the scripts CYRILLIC, LATIN"),
        ("Lead", "differs from the existing user 'lead' only in case"),
    ],
)
@pytest.mark.django_db
def test_set_user_refuses_a_new_name_that_passes_for_another_and_writes_nothing(
    monkeypatch, name, message
):
    _set_user(monkeypatch, "lead", "--tenant", "north", "--role", "operator")
    with pytest.raises(CommandError, match=re.escape(message)):
        _set_user(monkeypatch, name, "--tenant", "south", "--role", "approver")
    users = get_user_model().objects.all()
    assert [(u.username, tenant_of(u), roles_of(u)) for u in users] == [
        ("lead", "north", {"operator"})
    ]


# Names wholly in another script that read as an existing user's (round three): Cyrillic
# "\u0440\u043e\u0440\u0440\u0443" is one script (so the mixed-script rule let it pass) and
# reads as "poppy"; the same for all-Greek and all-Cyrillic capitals, and either way round.
@pytest.mark.parametrize(
    ("existing", "name"),
    [
        ("poppy", "\u0440\u043e\u0440\u0440\u0443"),  # Cyrillic only
        ("KEMP", "\u039a\u0395\u039c\u03a1"),  # Greek capitals
        ("kemp", "\u039a\u0395\u039c\u03a1"),  # ... and any case of the existing name
        ("TOM", "\u0422\u041e\u041c"),  # Cyrillic capitals
        ("\u0440\u0430\u0441\u0435", "pace"),  # an existing Cyrillic name, a new Latin one
        ("bob3", "\u0412\u041e\u0412\u0417"),  # Cyrillic capitals; ZE reads as the digit 3
    ],
)
@pytest.mark.django_db
def test_set_user_refuses_a_new_name_in_one_script_that_reads_as_an_existing_one(
    monkeypatch, existing, name
):
    _set_user(monkeypatch, existing, "--tenant", "north", "--role", "operator")
    with pytest.raises(CommandError, match=re.escape(f"reads as the existing user {existing!r}")):
        _set_user(monkeypatch, name, "--tenant", "south", "--role", "approver")
    users = get_user_model().objects.all()
    assert [(u.username, tenant_of(u), roles_of(u)) for u in users] == [
        (existing, "north", {"operator"})
    ]


@pytest.mark.django_db
def test_set_user_still_creates_names_in_one_script_and_updates_existing_ones(monkeypatch):
    assert "created jürgen" in _set_user(
        monkeypatch, "jürgen", "--tenant", "north", "--role", "operator"
    )
    assert "created дана" in _set_user(
        monkeypatch, "дана", "--tenant", "north", "--role", "operator"
    )
    # An account made before the rule (here: straight in the database) stays manageable.
    get_user_model().objects.create_user("Jürgen", password="x-long-enough-password-1")
    out = _set_user(monkeypatch, "Jürgen", "--tenant", "south", "--role", "approver")
    assert "updated Jürgen: tenant south, roles approver" in out


# -- required text made of characters that show nothing --------------------------------------
# A required reason of one U+200B ZERO WIDTH SPACE passed every "needs a reason" check
# (str.strip() keeps it): a run was cancelled over real HTTP, and the audit trail showed an
# empty reason. The same for an operation's reason, a catalog decision's, an approval's, a
# clarification's answer, a saved view's or a token's name (a Hangul filler is printable).
INVISIBLE = ["\u200b", "\u2060\ufeff", "\u00ad", "\u3164", " \u200c\u200d "]


@pytest.fixture
def waiting_run(world, operator):
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert run.state == "WAITING_HUMAN"
    return run


@pytest.mark.parametrize("blank", INVISIBLE)
def test_a_cancellation_whose_reason_shows_nothing_is_refused_and_changes_nothing(
    operator, waiting_run, blank
):
    before = types(waiting_run)
    response = client_for(operator).post(
        reverse("runs-cancel", args=[waiting_run.pk]), {"reason": blank}
    )
    assert response.status_code == 400
    assert "a cancellation needs a reason; it holds only characters that show nothing" in (
        response.content.decode()
    )
    api = call("POST", f"/runs/{waiting_run.pk}/cancel", bearer(operator), {"reason": blank})
    assert api.status_code == 400 and api.json()["code"] == "invalid_reason"
    bulk_page = client_for(operator).post(
        reverse("runs-bulk-cancel"), {"run": [str(waiting_run.pk)], "reason": blank}
    )
    assert bulk_page.status_code == 400
    with pytest.raises(runs.RunInputError, match="needs a reason"):
        runs.run_budget_change(
            run_id=str(waiting_run.pk),
            by_ref="user:operator",
            budget="actions",
            limit=20,
            reason=blank,
        )
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN" and types(waiting_run) == before


def test_the_refusal_names_the_invisible_character_and_empty_stays_as_it_was(operator):
    with pytest.raises(runs.RunInputError) as named:
        runs.clean_reason("\u200b", what="a cancellation")
    assert str(named.value) == (
        "a cancellation needs a reason; it holds only characters that show nothing, "
        "such as U+200B ZERO WIDTH SPACE"
    )
    with pytest.raises(runs.RunInputError) as empty:
        runs.clean_reason("  ", what="a cancellation")
    assert str(empty.value) == "a cancellation needs a reason"
    # Text with something to read keeps its invisible characters (recorded as written).
    assert runs.clean_reason("ok\u200b", what="a cancellation") == "ok\u200b"
    assert runs.clean_reason("\u05e9\u05dc\u05d5\u05dd", what="x") == "\u05e9\u05dc\u05d5\u05dd"


def test_an_operation_view_name_or_token_name_that_shows_nothing_is_refused(operator):
    make_run(advance=False)
    with pytest.raises(ops.OperationInputError, match="an operation needs a reason; it holds"):
        ops.operation_start_cancel(
            tenant="north",
            by_ref="user:operator",
            query={"world": "faultlab"},
            reason="\u200b",
            confirm=1,
        )
    assert not Operation.objects.exists()
    response = client_for(operator).post(
        reverse("saved-views-create"),
        {"page": "runs", "name": "\u3164\u3164", "query": "world=faultlab"},
    )
    assert response.status_code == 400
    assert "U+3164 HANGUL FILLER" in response.content.decode()
    assert not SavedView.objects.exists()
    token = client_for(operator).post(
        reverse("api-tokens-create"), {"name": "\u3164", "lifetime_days": "30"}
    )
    assert token.status_code == 400
    assert "A token needs a name" in token.content.decode()
    assert not ApiToken.objects.exists()


def test_a_catalog_decision_whose_reason_shows_nothing_changes_nothing(catalog_admin):
    target = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    before = LifecycleDecision.objects.count()
    with pytest.raises(Refusal) as refused:
        catalog.capability_decide(
            version_id=target.pk, user=catalog_admin, action="deprecate", reason="\u200b"
        )
    assert refused.value.code == "reason_required"
    assert "U+200B ZERO WIDTH SPACE" in refused.value.message
    page = client_for(catalog_admin).post(
        reverse("catalog-gate", args=[target.pk]), {"open": "0", "reason": "\u2060"}
    )
    assert page.status_code == 400
    target.refresh_from_db()
    assert target.lifecycle == "ADMITTED" and target.effect_gate_open
    assert LifecycleDecision.objects.count() == before


def test_a_decision_or_answer_that_shows_nothing_is_refused_and_recorded(
    approver, operator, waiting_run
):
    waiting_run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=waiting_run.waiting_checkpoint)
    before = Event.objects.filter(run=waiting_run).count()
    form = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "\u200b"}
    response = client_for(approver).post(reverse("approvals-decide", args=[checkpoint.pk]), form)
    assert response.status_code == 400
    api = call("POST", f"/checkpoints/{checkpoint.pk}/decision", bearer(approver), form)
    assert api.status_code == 400 and api.json()["code"] == "reason_required"
    added = Event.objects.filter(run=waiting_run, sequence__gt=before)
    assert [(e.type, e.reason_code) for e in added] == [("decision.refused", "reason_required")] * 2
    assert not Decision.objects.exists()
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"
    question = make_run("clarify", principal="user:operator", requested_by=operator)
    question.refresh_from_db()
    asked = Checkpoint.objects.get(pk=question.waiting_checkpoint)
    answer = client_for(operator).post(
        reverse("approvals-answer", args=[asked.pk]), {"answer": "\u200b\u200b"}
    )
    assert answer.status_code == 400
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == [
        "reason_required",
        "reason_required",
        "answer_required",
    ]
    assert "clarification.answered" not in types(question)


def test_an_admission_whose_answers_show_nothing_is_incomplete():
    from catalog.domain import lifecycle

    answers = {
        "contract": {},
        "local_ref": "search_manual@1.1.0",
        "reviewer": "user:a",
        "task_transition": "NEED_INVENTORY -> HAVE_INVENTORY_EVIDENCE",
        "alternatives": ["keep 1.0.0"],
        "decision": "ADMIT_BOUNDED",
        "expiry": "when the manual's index changes",
    }
    for blank, field in (
        ({"alternatives": ["\u200b", "\u2060\u2060"]}, "alternatives"),
        ({"expiry": "\u200b" * 12}, "expiry"),
    ):
        with pytest.raises(Refusal) as refused:
            lifecycle.admission_record(**{**answers, **blank})
        assert (refused.value.code, refused.value.field) == ("admission_incomplete", field)
    kept = lifecycle.admission_record(**{**answers, "alternatives": ["keep 1.0.0", "\u200b"]})
    assert kept.alternatives == ("keep 1.0.0",)


# -- the signed callback: why its JSON was refused ------------------------------------------
@pytest.mark.parametrize(
    ("raw", "told"),
    [
        # Was "body is not valid JSON" for each: the sender could not tell an integer over
        # Python's digit limit (valid JSON) from a typo.
        ('{"payload": {"x": ' + "1" * 5000 + "}}", "a number has more than 4300 digits"),
        ('{"payload": {"x": NaN}}', "NaN is not JSON"),
        ('{"payload": {"x": 1,}}', "Expecting property name enclosed in double quotes at line 1"),
        ("[" * 30000 + "]" * 30000, "body nests objects or arrays too deeply"),
    ],
)
@pytest.mark.django_db
def test_a_signed_callback_whose_json_is_refused_says_why_and_records_nothing(raw, told):
    response = post(Client(), None, raw=raw.encode())
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"
    assert told in response.json()["message"]
    assert not CallbackReceipt.objects.exists()


# -- approval webhooks: an endpoint's redirect is not followed -------------------------------
class _Hits(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``status`` (and ``location``), recording each one."""

    hits: list[tuple[str, str]]
    status = 200
    location = ""

    def _answer(self) -> None:
        self.hits.append((self.command, self.path))
        self.send_response(self.status)
        if self.location:
            self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def servers():
    started = []

    def start(**attrs):
        handler = type("Hits", (_Hits,), {"hits": [], **attrs})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", handler

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_webhook_endpoint_that_redirects_is_not_followed_and_the_log_says_so(
    world, operator, servers, status
):
    # urllib followed the redirect (a 302 to a POST became a GET, with the signature
    # headers) to wherever it pointed: an endpoint could make this server request an
    # internal address (http://169.254.169.254/...) and read its status in the log.
    inside, inner = servers()
    hook, outer = servers(status=status, location=f"{inside}/latest/meta-data/")
    WebhookEndpoint.objects.create(tenant="north", name="hook", url=f"{hook}/h", secret="s3cret")
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert notify.deliveries_send_due() == 1
    assert outer.hits == [("POST", "/h")]
    assert inner.hits == []
    (attempt,) = DeliveryAttempt.objects.all()
    assert not attempt.ok and attempt.status_code == status
    assert f"HTTP {status} redirect to '{inside}/latest/meta-data/': not followed" in (
        attempt.error
    )
    assert Delivery.objects.get().status == "PENDING"  # retried later, never delivered there


# -- a decline's requested quantity ------------------------------------------------------------
@pytest.mark.parametrize(
    ("asked", "shown"),
    [(10**30, "a number of 31 digits"), (-5, "-5"), (0, "0"), ("many", "'many'"), (51, "51")],
)
def test_a_decline_asking_for_a_quantity_no_proposal_may_have_is_refused_and_recorded(
    approver, waiting_run, asked, shown
):
    # Declined and recorded with requested_change {"quantity": 10**30} over the API (the
    # next proposal would be validated, but the record kept it as what was asked for).
    waiting_run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=waiting_run.waiting_checkpoint)
    body = {
        "verdict": "decline",
        "seen_hash": checkpoint.proposal_hash,
        "reason": "fewer",
        "requested_change": {"quantity": asked},
    }
    api = call("POST", f"/checkpoints/{checkpoint.pk}/decision", bearer(approver), body)
    assert api.status_code == 400 and api.json()["code"] == "invalid_requested_change"
    assert (
        f"The requested quantity {shown} is not one a proposal may have" in (api.json()["message"])
    )
    assert not Decision.objects.exists()
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == [
        "invalid_requested_change"
    ]
    checkpoint.refresh_from_db()
    assert checkpoint.status == "PENDING"


def test_a_console_decline_asking_for_many_is_refused_and_a_quantity_is_kept(approver, waiting_run):
    waiting_run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=waiting_run.waiting_checkpoint)
    form = {
        "verdict": "decline",
        "seen_hash": checkpoint.proposal_hash,
        "reason": "fewer",
        "change_quantity": "many",
    }
    url = reverse("approvals-decide", args=[checkpoint.pk])
    refused = client_for(approver).post(url, form)
    assert refused.status_code == 400
    assert "The requested quantity &#x27;many&#x27; is not one" in refused.content.decode()
    assert client_for(approver).post(url, {**form, "change_quantity": "2"}).status_code == 302
    assert Decision.objects.get().requested_change == {"quantity": "2"}
