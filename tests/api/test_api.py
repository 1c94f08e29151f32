"""The JSON API (issue 19): per-user tokens hashed at rest, the same refusals and records as
the console, other tenants' ids 404."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.db import InterfaceError, OperationalError
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.models import ApiToken
from api.tokens import token_create, token_revoke
from approvals.models import Checkpoint, Decision, DecisionRefusal
from runs.models import Event, Run
from tests.conftest import make_user
from tests.helpers import make_run

pytestmark = pytest.mark.django_db

V1 = "/api/v1"


def bearer(user: Any) -> dict[str, str]:
    _, secret = token_create(user=user, name="test")
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def call(method: str, path: str, auth: dict[str, str], body: Any = None) -> Any:
    client = Client()
    if method == "GET":
        return client.get(V1 + path, **auth)
    return client.post(
        V1 + path, data=json.dumps(body or {}), content_type="application/json", **auth
    )


@pytest.fixture
def waiting(world: None, operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def _checkpoint(run: Run) -> Checkpoint:
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)


def test_a_token_is_stored_only_as_a_digest_and_stops_working_when_revoked(approver):
    row, secret = token_create(user=approver, name="ci")
    assert secret.startswith("fo_") and secret not in json.dumps(
        list(ApiToken.objects.values()), default=str
    )
    assert row.digest == hashlib.sha256(secret.encode()).hexdigest()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    assert call("GET", "/checkpoints", auth).status_code == 200
    token_revoke(user=approver, token_id=row.pk)
    denied = call("GET", "/checkpoints", auth)
    assert denied.status_code == 401 and denied.json()["code"] == "unauthenticated"
    assert call("GET", "/checkpoints", {}).status_code == 401
    wrong = {"HTTP_AUTHORIZATION": f"Bearer {secret[:-2]}xx"}
    assert call("GET", "/checkpoints", wrong).status_code == 401


def test_tokens_are_created_and_revoked_in_the_console(approver, operator):
    client = Client()
    client.force_login(approver)
    page = client.post(
        reverse("api-tokens-create"), {"name": "my integration", "lifetime_days": "90"}
    )
    assert page.status_code == 201
    secret = page.context["secret"]
    assert secret in page.content.decode()
    listing = client.get(reverse("api-tokens")).content.decode()
    assert "my integration" in listing and secret not in listing
    row = ApiToken.objects.get(user=approver)
    # Someone else's token is not theirs to revoke.
    other = Client()
    other.force_login(operator)
    url = reverse("api-tokens-revoke", args=[row.pk])
    assert other.post(url, {"confirm": row.prefix}).status_code == 404
    assert client.post(url, {"confirm": row.prefix}).status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert client.post(reverse("api-tokens-create"), {"name": " "}).status_code == 400


def test_an_approver_lists_reads_and_decides_with_the_seen_hash(waiting, approver):
    auth = bearer(approver)
    cp = _checkpoint(waiting)
    listed = call("GET", "/checkpoints", auth).json()
    assert [c["id"] for c in listed] == [cp.pk]
    proposal = call("GET", f"/checkpoints/{cp.pk}", auth).json()
    assert proposal["proposal_hash"] == cp.proposal_hash
    assert proposal["canonical"]["part_id"] == "A17" and proposal["quorum"] == 1
    assert proposal["url"] == reverse("approvals-detail", args=[cp.pk])
    altered = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        auth,
        {"verdict": "approve", "seen_hash": "0" * 64, "reason": "ok"},
    )
    assert altered.status_code == 409 and altered.json()["code"] == "hash_mismatch"
    assert DecisionRefusal.objects.get().code == "hash_mismatch"
    big = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        auth,
        {
            "verdict": "decline",
            "seen_hash": cp.proposal_hash,
            "reason": "x",
            "requested_change": {"slot_id": "S" * 300_000},
        },
    )
    assert big.status_code == 400 and big.json()["code"] == "input_too_large"
    assert "at most 64 characters and the slot_id sent has 300000" in big.json()["message"]
    long_reason = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        auth,
        {"verdict": "approve", "seen_hash": cp.proposal_hash, "reason": "r" * 1001},
    )
    assert long_reason.status_code == 400 and long_reason.json()["code"] == "input_too_large"
    assert "at most 1000 characters and this one has 1001" in long_reason.json()["message"]
    ok = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        auth,
        {"verdict": "approve", "seen_hash": cp.proposal_hash, "reason": "checked"},
    )
    assert ok.status_code == 200 and ok.json()["recorded"] is True
    assert Decision.objects.get().decided_by == approver


def test_the_requester_is_refused_with_403_through_the_api(world):
    lead = make_user("lead", "north", "operator", "approver")
    run = make_run(principal="user:lead", requested_by=lead, namespace="live")
    cp = _checkpoint(run)
    response = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        bearer(lead),
        {"verdict": "approve", "seen_hash": cp.proposal_hash, "reason": "mine"},
    )
    assert response.status_code == 403 and response.json()["code"] == "self_approval"


def test_a_cancellation_reason_over_the_limit_is_refused_whole_not_cut(waiting, operator):
    auth = bearer(operator)
    over = call("POST", f"/runs/{waiting.pk}/cancel", auth, {"reason": "x" * 501})
    assert over.status_code == 400 and over.json()["code"] == "input_too_large"
    assert "at most 500 characters and this one has 501" in over.json()["message"]
    assert "nothing was changed" in over.json()["message"]
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"
    ok = call("POST", f"/runs/{waiting.pk}/cancel", auth, {"reason": "y" * 500})
    assert ok.status_code == 200 and ok.json()["state"] == "CANCELLED"
    event = Event.objects.get(run=waiting, type="run.cancelled")
    assert event.payload["reason"] == "y" * 500


def test_an_operator_starts_reads_and_cancels_a_run(world, operator, approver):
    auth = bearer(operator)
    started = call("POST", "/runs", auth, {"equipment_id": "EQ-17"})
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    run = Run.objects.get(pk=run_id)
    assert run.principal_ref == "user:operator" and run.tenant == "north"
    detail = call("GET", f"/runs/{run_id}", auth).json()
    assert detail["state"] == "CREATED" and detail["revision"] == 0
    assert call("POST", f"/runs/{run_id}/cancel", auth, {"reason": " "}).status_code == 400
    cancelled = call("POST", f"/runs/{run_id}/cancel", auth, {"reason": "not needed"})
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
    again = call("POST", f"/runs/{run_id}/cancel", auth, {"reason": "again"})
    assert again.status_code == 409
    # Whoever cancelled first is named (two clients cancelling at once hear the same).
    told = again.json()["message"]
    assert told.startswith("The run was already cancelled by user:operator at "), told
    assert "(not needed)" in told and "was not recorded" in told
    # An approver without the operator role may read the run but not start or cancel one.
    assert call("POST", "/runs", bearer(approver), {}).status_code == 403
    bad = call("POST", "/runs", auth, {"equipment_id": "nope"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_equipment_id"
    assert call("POST", "/runs", auth, {"quantity": "many"}).status_code == 400


def test_another_tenants_equipment_is_refused_and_starts_no_run(world, operator):
    """Found over HTTP (2026-12-07): a north operator's ``{"equipment_id": "EQ-31"}`` (the
    south tenant's) started a run, which the world denied its first read and escalated to
    an owner. The console offers only the tenant's equipment; the API now refuses another
    tenant's as it refuses another tenant's location: unknown to this tenant, no run."""
    bad = call("POST", "/runs", bearer(operator), {"equipment_id": "EQ-31"})
    assert bad.status_code == 400, bad.content[:300]
    assert bad.json() == {
        "code": "invalid_equipment_id",
        "message": "unknown equipment 'EQ-31'",
    }
    assert not Run.objects.exists()


def test_a_run_started_without_equipment_names_the_tenants_own(world):
    """Without ``equipment_id`` a south operator's run named north's EQ-17 (the field's
    fixed default): the world denied it and the run escalated. The default is now the
    first equipment of the caller's tenant, as the console's form offers it first."""
    south = make_user("operator-south", "south", "operator")
    started = call("POST", "/runs", bearer(south), {"location_id": "LOC-S1"})
    assert started.status_code == 201, started.content[:300]
    run = Run.objects.get(pk=started.json()["id"])
    request = run.evidence.get(pk=f"rq-{run.pk.hex[:20]}").content["data"]
    assert (run.tenant, request["equipment_id"]) == ("south", "EQ-31")


def test_an_unknown_scenario_is_named_not_echoed_whole(world, operator):
    """A 100,000-character scenario came back whole in the message (100 KB), where an
    unknown equipment id is named by its start and length."""
    bad = call("POST", "/runs", bearer(operator), {"scenario": "x" * 100_000})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_scenario"
    message = bad.json()["message"]
    assert len(message) < 200 and "100000 characters" in message, message[:300]
    assert message.startswith("unknown scenario 'xxx")
    assert not Run.objects.exists()


def test_an_unknown_equipment_id_is_named_not_echoed_whole(world, operator):
    """A 10,000-character id came back whole in the message: the answer names its start
    and its length instead."""
    long_id = "EQ-" + "9" * 9_997
    bad = call("POST", "/runs", bearer(operator), {"equipment_id": long_id})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_equipment_id"
    message = bad.json()["message"]
    assert len(message) < 200 and "10000 characters" in message
    assert message.startswith("unknown equipment 'EQ-999")
    assert not Run.objects.exists()


def test_a_run_cannot_name_another_tenants_location(world, operator):
    """LOC-S1 exists, but it is tenant south's: a north run may not target it (and the
    answer does not say it exists)."""
    auth = bearer(operator)
    response = call("POST", "/runs", auth, {"location_id": "LOC-S1"})
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_location_id",
        "message": "unknown location 'LOC-S1'",
    }
    assert not Run.objects.exists()
    assert call("POST", "/runs", auth, {"location_id": "LOC-N2"}).status_code == 201


def test_a_run_reads_with_its_timeline(waiting, operator):
    detail = call("GET", f"/runs/{waiting.pk}", bearer(operator)).json()
    assert detail["state"] == "WAITING_HUMAN"
    sequences = [e["sequence"] for e in detail["timeline"]]
    assert sequences == list(range(1, waiting.revision + 1))
    assert detail["timeline"][-1]["type"] == "approval.required"


def test_other_tenants_ids_are_404(waiting):
    south = make_user("south-all", "south", "approver", "operator")
    auth = bearer(south)
    cp = _checkpoint(waiting)
    assert call("GET", "/checkpoints", auth).json() == []
    for method, path, body in [
        ("GET", f"/checkpoints/{cp.pk}", None),
        (
            "POST",
            f"/checkpoints/{cp.pk}/decision",
            {"verdict": "approve", "seen_hash": cp.proposal_hash, "reason": "x"},
        ),
        ("GET", f"/runs/{waiting.pk}", None),
        ("POST", f"/runs/{waiting.pk}/cancel", {"reason": "x"}),
    ]:
        response = call(method, path, auth, body)
        assert response.status_code == 404, (path, response.content)
        assert str(waiting.pk) not in response.content.decode()
    assert not DecisionRefusal.objects.exists() and not Decision.objects.exists()


def test_the_schema_is_published_without_a_token():
    response = Client().get(V1 + "/schema/")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.") and "/api/v1/checkpoints" in schema["paths"]
    assert "BearerToken" in schema["components"]["securitySchemes"]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    name=st.text(max_size=200) | st.binary(max_size=50).map(lambda b: b.decode("latin-1")),
    token_id=st.integers(min_value=0, max_value=2**31),
)
def test_the_token_forms_answer_every_input_without_a_server_error(approver, name, token_id):
    client = Client(raise_request_exception=False)
    client.force_login(approver)
    created = client.post(reverse("api-tokens-create"), {"name": name, "lifetime_days": "30"})
    assert created.status_code in (201, 400)
    if created.status_code == 201:
        assert 0 < len(name.strip()) <= 80
    # Unconfirmed: a token of theirs is refused (400), any other id is not theirs (404).
    revoked = client.post(reverse("api-tokens-revoke", args=[token_id]))
    mine = ApiToken.objects.filter(pk=token_id, user=approver).exists()
    assert revoked.status_code == (400 if mine else 404)


def post_raw(path: str, auth: dict[str, str], raw: str) -> Any:
    return Client().post(V1 + path, data=raw, content_type="application/json", **auth)


@pytest.mark.parametrize(
    "reason",
    [
        '"stop\\u0000"',  # PostgreSQL text and jsonb hold no NUL: a 500 there before
        '"stop\\ud800"',  # an unpaired surrogate cannot be encoded for the database
        "NaN",
    ],
)
def test_an_unstorable_string_in_a_body_is_400_and_changes_nothing(
    waiting: Run, operator: Any, approver: Any, reason: str
) -> None:
    cp = _checkpoint(waiting)
    cancel = post_raw(f"/runs/{waiting.pk}/cancel", bearer(operator), f'{{"reason": {reason}}}')
    assert cancel.status_code == 400 and cancel.json()["code"] == "invalid_request"
    decide = post_raw(
        f"/checkpoints/{cp.pk}/decision",
        bearer(approver),
        f'{{"verdict": "decline", "seen_hash": {reason}, "reason": {reason},'
        f' "requested_change": {{"slot_id": {reason}}}}}',
    )
    assert decide.status_code == 400 and decide.json()["code"] == "invalid_request"
    waiting.refresh_from_db()
    assert (waiting.state, waiting.revision) == ("WAITING_HUMAN", cp.run.revision)
    assert not DecisionRefusal.objects.exists() and not Decision.objects.exists()


@pytest.mark.parametrize("raw", ["[]", "null", "1", '"x"'])
def test_a_body_that_is_not_a_json_object_starts_no_run(world: None, operator: Any, raw: str):
    response = post_raw("/runs", bearer(operator), raw)
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("reason=stop", "the body is not JSON (Expecting value at line 1 column 1)"),
        ('{"scenario": "reservation",', "the body is not JSON"),
        (b'{"principal": "\xff"}', "the body is not UTF-8 text"),
    ],
)
def test_a_body_that_is_not_json_is_invalid_request_and_starts_no_run(
    world: None, operator: Any, raw: Any, says: str
) -> None:
    response = post_raw("/runs", bearer(operator), raw)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert says in response.json()["message"]
    assert not Run.objects.exists()


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_token_requests_cannot_pass_the_limit(world: None, monkeypatch: Any) -> None:
    """Requests that arrive together count one after the other (each took the last slot
    before: eleven or more active tokens)."""
    import threading
    import time

    from django.db import connection

    from api import tokens

    user = make_user("bursty", "north", "operator")
    for i in range(tokens.MAX_ACTIVE_TOKENS - 1):
        token_create(user=user, name=f"t{i}")
    real_hex = tokens.secrets.token_hex

    def slow_hex(n: int) -> str:  # between the count and the insert: widen the window
        time.sleep(0.3)
        return real_hex(n)

    monkeypatch.setattr(tokens.secrets, "token_hex", slow_hex)
    barrier = threading.Barrier(4, timeout=10)
    outcomes: list[str] = []

    def create() -> None:
        try:
            barrier.wait()
            token_create(user=user, name="burst")
            outcomes.append("created")
        except tokens.TokenError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["created", "refused", "refused", "refused"]
    active = ApiToken.objects.filter(user=user, revoked_at__isnull=True).count()
    assert active == tokens.MAX_ACTIVE_TOKENS


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_a_database_connection_lost_mid_request_is_a_json_503(
    waiting: Run, operator: Any, monkeypatch: Any, error: type[Exception]
) -> None:
    """The chaos drill (scripts/production_chaos.py) terminates the application role's
    PostgreSQL connections: a request whose connection died got the console's HTML 500
    page, which an API client cannot read, and no word on whether to retry."""

    def lost(**_: Any) -> Any:
        raise error("terminating connection due to administrator command")

    monkeypatch.setattr("runs.services.run_cancel", lost)
    response = Client(raise_request_exception=False).post(
        f"{V1}/runs/{waiting.pk}/cancel",
        data=json.dumps({"reason": "stop"}),
        content_type="application/json",
        **bearer(operator),
    )
    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["code"] == "database_unavailable"
    assert "read the object again before you retry" in body["message"]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        # The last of two "verdict"s won: a proxy or a log that reads the first saw
        # "decline" while the server approved.
        (
            '{"verdict": "decline", "verdict": "approve", "seen_hash": "h", "reason": "x"}',
            "the key 'verdict' appears twice in one object",
        ),
        (
            '{"verdict": "decline", "seen_hash": "h", "reason": "x",'
            ' "requested_change": {"quantity": 2, "quantity": 3}}',
            "the key 'quantity' appears twice in one object",
        ),
        # Was the bare "Cannot parse request body" with code "error".
        ('{"a": ' * 5000 + "1" + "}" * 5000, "the body nests objects or arrays too deeply"),
        ("[" * 5000 + "]" * 5000, "the body nests objects or arrays too deeply"),
        (
            '{"verdict": "decline", "seen_hash": ' + "1" * 5000 + ', "reason": "x"}',
            "a number has more than 4300 digits",
        ),
        # Unknown fields were ignored: a typo decided without the field the client meant.
        (
            '{"verdict": "decline", "seen_hash": "h", "reason": "x", "requested_chnage": {}}',
            "body.body.requested_chnage: Extra inputs are not permitted",
        ),
    ],
)
def test_a_decision_body_that_is_ambiguous_or_unreadable_is_a_clear_400_and_decides_nothing(
    waiting: Run, approver: Any, raw: str, says: str
) -> None:
    cp = _checkpoint(waiting)
    response = post_raw(f"/checkpoints/{cp.pk}/decision", bearer(approver), raw)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    assert says in response.json()["message"]
    waiting.refresh_from_db()
    assert (waiting.state, waiting.revision) == ("WAITING_HUMAN", cp.run.revision)
    assert not DecisionRefusal.objects.exists() and not Decision.objects.exists()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"quantity": 2, "quantity": 1}', "the key 'quantity' appears twice in one object"),
        # A typo of a field started a run with the default it meant to change.
        ('{"quantiy": 5}', "body.body.quantiy: Extra inputs are not permitted"),
    ],
)
def test_a_run_start_with_a_repeated_or_unknown_field_starts_no_run(
    world: None, operator: Any, raw: str, says: str
) -> None:
    response = post_raw("/runs", bearer(operator), raw)
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert says in response.json()["message"]
    assert not Run.objects.exists()


def test_a_body_over_the_upload_limit_is_a_json_400_not_the_html_page(
    world: None, operator: Any, settings: Any
) -> None:
    """Django's own 400 page (HTML) answered a client that speaks JSON."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post_raw("/runs", bearer(operator), '{"scenario": "' + "x" * 2000 + '"}')
    assert response.status_code == 400
    assert response.json() == {
        "code": "request_too_large",
        "message": "The request body is larger than the 1000 bytes this API accepts.",
    }
    assert not Run.objects.exists()


@pytest.mark.parametrize("path", ["/checkpoints/", "/runs/", "/", "/nothing-here"])
def test_an_address_the_api_does_not_have_is_a_json_404(world: None, approver: Any, path: str):
    """A trailing slash or a mistyped address answered the console's HTML 404 page."""
    response = Client().get(V1 + path, **bearer(approver))
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "not_found"
    assert path in response.json()["message"]


def test_a_server_error_under_the_api_is_json_without_a_traceback(
    world: None, operator: Any, monkeypatch: Any
) -> None:
    """An unexpected failure answered the console's HTML 500 page to a JSON client."""
    from runs import services

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(services, "run_create", broken)
    response = Client(raise_request_exception=False).post(
        V1 + "/runs", data="{}", content_type="application/json", **bearer(operator)
    )
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "server_error"
    assert b"secret detail" not in response.content and b"Traceback" not in response.content


def test_an_approval_that_also_asks_for_a_change_is_refused_not_approved(
    waiting: Run, approver: Any
) -> None:
    """The requested change was dropped and the proposal approved as it stood: the client
    asked for another quantity and got this one reserved."""
    cp = _checkpoint(waiting)
    response = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        bearer(approver),
        {
            "verdict": "approve",
            "seen_hash": cp.proposal_hash,
            "reason": "ok with two",
            "requested_change": {"quantity": 2},
        },
    )
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_request",
        "message": "requested_change is for a decline only; an approval approves the "
        "proposal as it stands. Decline with the change, or approve without it.",
    }
    waiting.refresh_from_db()
    assert (waiting.state, waiting.revision) == ("WAITING_HUMAN", cp.run.revision)
    assert not Decision.objects.exists()


def test_a_declined_change_to_a_location_outside_the_runs_scope_is_refused(
    waiting: Run, approver: Any
) -> None:
    """The API accepted it: the run then proposed a reservation it may never make and ended
    escalated. It is refused as in the console, with its code, and recorded."""
    cp = _checkpoint(waiting)
    response = call(
        "POST",
        f"/checkpoints/{cp.pk}/decision",
        bearer(approver),
        {
            "verdict": "decline",
            "seen_hash": cp.proposal_hash,
            "reason": "use the van",
            "requested_change": {"location_id": "LOC-N2"},
        },
    )
    assert response.status_code == 400
    assert response.json() == {
        "code": "location_out_of_scope",
        "message": "'LOC-N2' is not a location this run may use (it may use only LOC-N1); "
        "nothing was decided.",
    }
    assert not Decision.objects.exists()
    assert DecisionRefusal.objects.get().code == "location_out_of_scope"
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"
    # The checkpoint says which locations a requested change may name.
    detail = call("GET", f"/checkpoints/{cp.pk}", bearer(approver)).json()
    assert detail["delegated_locations"] == ["LOC-N1"]


@pytest.mark.parametrize("name", ["ci\r\nbot", "ci\u202ebot", "ci\x1bbot"])
def test_a_token_name_with_a_control_character_is_refused(approver: Any, name: str) -> None:
    client = Client()
    client.force_login(approver)
    response = client.post(reverse("api-tokens-create"), {"name": name})
    assert response.status_code == 400
    assert "control characters" in response.content.decode()
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("path", ["/runs", "/runs/{run}/cancel", "/checkpoints/{cp}/decision"])
def test_an_empty_body_is_refused_in_words_not_as_a_missing_body_body(
    world: None, operator: Any, approver: Any, waiting: Run, path: str
) -> None:
    """Over real HTTP an empty POST answered "body.body: Field required"."""
    user = approver if "decision" in path else operator
    url = path.format(run=waiting.pk, cp=waiting.waiting_checkpoint)
    revision = waiting.revision
    response = post_raw(url, bearer(user), "")
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_request",
        "message": "The request body is empty: send a JSON object.",
    }
    waiting.refresh_from_db()
    assert (waiting.state, waiting.revision) == ("WAITING_HUMAN", revision)
    assert Run.objects.count() == 1
