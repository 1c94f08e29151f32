"""A console form field or query parameter sent more than once is refused, never read as
its last value (``fieldops.fields``).

Django's ``QueryDict.get`` takes the last of a repeated field: ``verdict=decline&verdict=
approve`` read as an approval, two reasons as the second, ``state=FAILED&state=COMPLETED``
as a filter on completed runs that a bulk cancel then acts on. Every console POST endpoint
(enumerated from the URL resolver) refuses a repeated field with a 400 naming it and changes
nothing; an approval decision or a clarification's answer records the refusal as its other
input refusals are recorded (SPEC §4). The runs list's bulk selection (``run``) is the one
field a form sends several times.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import DecisionRefusal
from catalog.models import CapabilityVersion
from kernel.text import field_name_shown
from operations.models import Operation, SavedView
from runs.models import Event, Run
from tests.security.policy import POLICY, PUBLIC, SIGNED, Obj, Rule, objects_for, url_kwargs
from tests.security.routes import enumerate_routes
from tests.security.world import World, changed, snapshot

BAD_REQUEST = "400 · Bad request"
CSRF_FIELD = "csrfmiddlewaretoken"
# A refused decision or answer is recorded: the refusal log, and the run's timeline.
RECORDED = {
    "approvals-decide": {"approvals.DecisionRefusal", "runs.Event", "runs.Run"},
    "approvals-answer": {"approvals.DecisionRefusal", "runs.Event", "runs.Run"},
}


def _console_post_routes() -> list[str]:
    names = []
    for route in enumerate_routes():
        rule = POLICY.get(route.name)
        if rule is None or "POST" not in rule.may or rule.may["POST"] == SIGNED:
            continue
        names.append(route.name)
    return sorted(set(names))


POST_ROUTES = _console_post_routes()


def _who(world: World, rule: Rule) -> tuple[str, Obj]:
    """A principal who may post to the route, and a north object it may post about."""
    may = rule.may["POST"]
    for obj in objects_for(world, rule.objects):
        if obj.tenant not in (None, "north"):
            continue
        if may == PUBLIC:
            return "anonymous", obj
        for principal in ("operator", "approver", "catalog_admin", "lead"):
            assert callable(may)
            if may(world, principal, obj):
                return principal, obj
    raise AssertionError("nobody may post here")


def _body(world: World, name: str, principal: str, obj: Obj) -> dict[str, Any]:
    rule = POLICY[name]
    body = dict(rule.body(world, principal, obj)) if rule.body else {}
    if name == "runs-bulk-cancel":
        body["run"] = [world.runs["waiting"]]
    return body


def _send(client: Client, url: str, pairs: list[tuple[str, str]], **extra: Any) -> Any:
    return client.post(
        url, urlencode(pairs), content_type="application/x-www-form-urlencoded", **extra
    )


def _pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = []
    for key, value in body.items():
        for one in value if isinstance(value, list) else [value]:
            pairs.append((key, str(one)))
    return pairs


def _repeated(pairs: list[tuple[str, str]]) -> str:
    names = [k for k, _ in pairs]
    return next(k for k in names if names.count(k) > 1)


def _names(response: Any, field: str) -> bool:
    return html.escape(field_name_shown(field)) in response.content.decode()


def test_every_console_post_route_is_covered() -> None:
    assert {"approvals-decide", "runs-cancel", "catalog-decide", "runs-bulk-cancel"} <= set(
        POST_ROUTES
    )
    assert "api-callback" not in POST_ROUTES and "api-v1:runs_cancel" not in POST_ROUTES
    assert len(POST_ROUTES) >= 25


@pytest.mark.parametrize("variant", ["page", "htmx"])
@pytest.mark.parametrize("name", POST_ROUTES)
def test_a_post_with_a_repeated_field_is_refused_and_changes_nothing(
    sworld: World, name: str, variant: str
) -> None:
    rule = POLICY[name]
    principal, obj = _who(sworld, rule)
    body = _body(sworld, name, principal, obj)
    fields = [f for f in body if f != "run"] + [CSRF_FIELD]
    url = reverse(name, kwargs=url_kwargs(obj) or None)
    headers = {"HTTP_HX_REQUEST": "true"} if variant == "htmx" else {}
    for field in fields:
        pairs = _pairs(body)
        value = str(body.get(field, "token"))
        # The field twice: the same value, then (where the body has it) the value again
        # after every other field, so a last-value reader would act on a valid request.
        pairs = [(k, v) for k, v in pairs if k != field]
        pairs = [(field, value), *pairs, (field, value)]
        client = sworld.client(principal, raise_request_exception=False)
        before = snapshot()
        response = _send(client, url, pairs, **headers)
        after = snapshot()
        assert response.status_code == 400, (name, field, response.status_code)
        content = response.content.decode()
        assert BAD_REQUEST in content or "repeated_field" in content, (name, field)
        assert _names(response, field), (name, field, content[:2000])
        assert "more than once" in content
        allowed = RECORDED.get(name, set())
        moved = {entry.split(" ")[0] for entry in changed(before, after)}
        assert moved <= allowed, (name, field, changed(before, after))


# -- targeted: what a last-value reader would have done ---------------------------------
def _operator(sworld: World) -> Client:
    return sworld.client("operator", raise_request_exception=False)


def test_an_approval_decision_with_two_verdicts_is_refused_and_recorded(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    run = checkpoint.run
    events = Event.objects.filter(run=run).count()
    client = sworld.client("approver", raise_request_exception=False)
    pairs = [
        ("verdict", "decline"),
        ("seen_hash", checkpoint.proposal_hash),
        ("reason", "looks right"),
        ("verdict", "approve"),
    ]
    response = _send(client, reverse("approvals-decide", args=[checkpoint.pk]), pairs)
    assert response.status_code == 400
    content = response.content.decode()
    assert "repeated_field" in content and _names(response, "verdict")
    refusal = DecisionRefusal.objects.get(checkpoint=checkpoint)
    assert refusal.code == "repeated_field" and refusal.user == sworld.users["approver"]
    added = Event.objects.filter(run=run).order_by("sequence")[events:]
    assert [(e.type, e.reason_code) for e in added] == [("decision.refused", "repeated_field")]
    checkpoint.refresh_from_db()
    run.refresh_from_db()
    assert checkpoint.status == "PENDING" and run.state == "WAITING_HUMAN"


def test_two_proposal_hashes_or_reasons_are_refused_too(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = sworld.client("approver", raise_request_exception=False)
    url = reverse("approvals-decide", args=[checkpoint.pk])
    good = [("verdict", "approve"), ("reason", "ok")]
    for pairs in (
        [*good, ("seen_hash", "0" * 64), ("seen_hash", checkpoint.proposal_hash)],
        [("verdict", "approve"), ("seen_hash", checkpoint.proposal_hash), ("reason", "a")] * 2,
    ):
        response = _send(client, url, pairs)
        assert response.status_code == 400 and "repeated_field" in response.content.decode()
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == ["repeated_field"] * 2
    checkpoint.refresh_from_db()
    assert checkpoint.status == "PENDING"


def test_an_outsider_s_repeated_decision_is_refused_for_standing_first(sworld: World) -> None:
    """Authority before input: someone who may not decide gets the authority refusal,
    recorded in the refusal log only (never on the run's timeline)."""
    checkpoint = sworld.checkpoint("approval")
    events = Event.objects.filter(run_id=checkpoint.run_id).count()
    client = sworld.client("operator", raise_request_exception=False)
    pairs = [("verdict", "approve"), ("verdict", "approve"), ("reason", "x")]
    response = _send(client, reverse("approvals-decide", args=[checkpoint.pk]), pairs)
    assert response.status_code == 403
    assert DecisionRefusal.objects.get().code in ("not_an_approver", "self_approval")
    assert Event.objects.filter(run_id=checkpoint.run_id).count() == events


def test_a_clarification_answer_sent_twice_is_refused_and_recorded(sworld: World) -> None:
    checkpoint = sworld.checkpoint("clarification")
    pairs = [("answer", "LOC-N1"), ("answer", "LOC-N2")]
    url = reverse("approvals-answer", args=[checkpoint.pk])
    response = _send(_operator(sworld), url, pairs)
    assert response.status_code == 400 and _names(response, "answer")
    assert DecisionRefusal.objects.get(checkpoint=checkpoint).code == "repeated_field"
    checkpoint.refresh_from_db()
    assert checkpoint.status == "PENDING"


def test_a_run_cancel_with_two_reasons_is_refused(sworld: World) -> None:
    run = sworld.run("waiting")
    url = reverse("runs-cancel", args=[run.pk])
    response = _send(_operator(sworld), url, [("reason", "first"), ("reason", "second")])
    assert response.status_code == 400 and _names(response, "reason")
    run.refresh_from_db()
    assert run.state == "WAITING_HUMAN"
    assert not Event.objects.filter(run=run, type="run.cancelled").exists()


def test_a_catalog_decision_with_two_actions_or_confirmations_is_refused(sworld: World) -> None:
    version = sworld.version("reviewed_candidate")
    client = sworld.client("catalog_admin", raise_request_exception=False)
    url = reverse("catalog-decide", args=[version.pk])
    before = snapshot()
    for pairs in (
        [("action", "defer"), ("action", "reject"), ("reason", "matrix")],
        [("action", "defer"), ("reason", "matrix"), ("lifecycle", "X"), ("lifecycle", "Y")],
        [("action", "defer"), ("reason", "matrix"), ("confirms", "a"), ("confirms", "b")],
    ):
        response = _send(client, url, pairs)
        assert response.status_code == 400 and _names(response, _repeated(pairs))
    assert changed(before, snapshot()) == []
    assert CapabilityVersion.objects.get(pk=version.pk).lifecycle == version.lifecycle


def test_the_bulk_selection_may_repeat_but_its_reason_may_not(sworld: World) -> None:
    waiting, lead = sworld.runs["waiting"], sworld.runs["lead_waiting"]
    url = reverse("runs-bulk-cancel")
    pairs = [("run", waiting), ("run", lead), ("reason", "one"), ("reason", "two")]
    client = _operator(sworld)
    before = snapshot()
    response = _send(client, url, pairs)
    assert response.status_code == 400 and _names(response, "reason")
    assert changed(before, snapshot()) == []
    response = _send(client, url, pairs[:3])
    assert response.status_code == 302
    states = set(Run.objects.filter(pk__in=[waiting, lead]).values_list("state", flat=True))
    assert states == {"CANCELLED"}


def test_a_bulk_cancel_posted_under_a_repeated_filter_is_refused(sworld: World) -> None:
    """The runs list posts its bulk cancel to an address that carries the list's filter."""
    url = reverse("runs-bulk-cancel") + "?state=FAILED&state=WAITING_HUMAN"
    client = _operator(sworld)
    before = snapshot()
    response = _send(client, url, [("run", sworld.runs["waiting"]), ("reason", "x")])
    assert response.status_code == 400 and _names(response, "state")
    # Back to the runs list, not to the POST-only address (a 405).
    assert f'<a href="{reverse("runs-list")}">' in response.content.decode()
    assert changed(before, snapshot()) == []


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("operations-cancel-start", {"world": "faultlab", "state": "WAITING_HUMAN"}),
        ("operations-reconcile-start", {"capability": "reserve_part@1.0.0"}),
        ("operations-incident-start", {"capability": "reserve_part@1.0.0"}),
    ],
)
def test_a_bulk_start_with_a_repeated_filter_or_confirmation_is_refused(
    sworld: World, name: str, keys: dict[str, str]
) -> None:
    operations = Operation.objects.count()
    key = next(iter(keys))
    for pairs in (
        [*keys.items(), (key, "other"), ("reason", "x"), ("confirm", "1")],
        [*keys.items(), ("reason", "x"), ("confirm", "1"), ("confirm", "2")],
    ):
        response = _send(_operator(sworld), reverse(name), pairs)
        assert response.status_code == 400 and _names(response, _repeated(pairs))
    assert Operation.objects.count() == operations


def test_a_saved_view_whose_filter_repeats_a_parameter_is_not_saved(sworld: World) -> None:
    views = SavedView.objects.count()
    pairs = [("page", "runs"), ("name", "two"), ("query", "state=FAILED&state=COMPLETED")]
    response = _send(_operator(sworld), reverse("saved-views-create"), pairs)
    assert response.status_code == 400 and _names(response, "state")
    assert SavedView.objects.count() == views


# -- list pages: a repeated filter is refused, never read as its last value -------------
GET_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("runs-list", {}, "state", "FAILED"),
    ("runs-list", {}, "world", "live"),
    ("approvals-queue", {}, "kind", "approval"),
    ("catalog-index", {}, "lifecycle", "ADMITTED"),
    ("catalog-diff", {}, "a", "reserve_part@1.0.0"),
    ("catalog-routing", {}, "k", "2"),
    ("recovery", {}, "q", "k"),
    ("operations-cancel-preview", {}, "state", "WAITING_HUMAN"),
    ("operations-reconcile-preview", {}, "capability", "reserve_part@1.0.0"),
    ("operations-incident-preview", {}, "capability", "reserve_part@1.0.0"),
    ("operations-state-counts", {}, "state", "FAILED"),
    ("operations-runs-export", {"fmt": "csv"}, "state", "FAILED"),
    ("runbooks", {}, "q", "x"),
]


def _get_principal(name: str) -> str:
    return "approver" if name.startswith("approvals") else "operator"


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize(("name", "kwargs", "param", "value"), GET_CASES)
def test_a_list_page_refuses_a_repeated_filter(
    sworld: World, name: str, kwargs: dict[str, Any], param: str, value: str, htmx: bool
) -> None:
    client = sworld.client(_get_principal(name), raise_request_exception=False)
    url = reverse(name, kwargs=kwargs or None)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    assert client.get(f"{url}?{urlencode({param: value})}", **headers).status_code == 200
    response = client.get(f"{url}?{urlencode([(param, value), (param, value)])}", **headers)
    assert response.status_code == 400
    assert _names(response, param) and BAD_REQUEST in response.content.decode()
    # Back to the page without its query; a bulk preview back to the list it acts on.
    back = {
        "operations-cancel-preview": reverse("runs-list"),
        "operations-reconcile-preview": reverse("recovery"),
        "operations-incident-preview": reverse("runbooks"),
    }.get(name, url)
    assert f'<a href="{back}">' in response.content.decode()


def test_a_run_page_refuses_a_repeated_timeline_parameter(sworld: World) -> None:
    run = sworld.run("completed")
    client = _operator(sworld)
    url = reverse("runs-detail", args=[run.pk])
    assert client.get(url + "?kind=effects").status_code == 200
    response = client.get(url + "?kind=effects&kind=all")
    assert response.status_code == 400 and _names(response, "kind")


# -- probes: the body only, empty and odd names ------------------------------------------
def test_a_decision_reads_its_body_not_the_address(sworld: World) -> None:
    checkpoint = sworld.checkpoint("approval")
    client = sworld.client("approver", raise_request_exception=False)
    url = reverse("approvals-decide", args=[checkpoint.pk]) + "?verdict=approve"
    # No verdict in the body: the one in the address is not read.
    response = _send(client, url, [("seen_hash", checkpoint.proposal_hash), ("reason", "r")])
    assert response.status_code == 400 and "Choose approve or decline" in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.status == "PENDING"
    body = [("verdict", "decline"), ("seen_hash", checkpoint.proposal_hash), ("reason", "no")]
    response = _send(client, url, body)
    assert response.status_code == 302
    checkpoint.refresh_from_db()
    assert checkpoint.status == "DECLINED"


@pytest.mark.parametrize(
    "field",
    ["", "reason\u202e", "caf\u00e9", "\u200b", "x" * 300],
    ids=["empty", "bidi", "accent", "zwsp", "long"],
)
def test_a_repeated_field_with_an_odd_name_is_named_escaped(sworld: World, field: str) -> None:
    run = sworld.run("waiting")
    url = reverse("runs-cancel", args=[run.pk])
    pairs = [(field, "a"), ("reason", "ok"), (field, "b")]
    response = _send(_operator(sworld), url, pairs)
    assert response.status_code == 400 and _names(response, field)
    content = response.content.decode()
    assert "\u202e" not in content and "\u200b" not in content and "x" * 100 not in content
    run.refresh_from_db()
    assert run.state == "WAITING_HUMAN"


def test_a_single_empty_named_field_is_ignored(sworld: World) -> None:
    run = sworld.run("waiting")
    url = reverse("runs-cancel", args=[run.pk])
    response = _send(_operator(sworld), url, [("", "x"), ("reason", "done here")])
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == "CANCELLED"


def test_a_nul_in_a_repeated_name_is_the_nul_refusal(sworld: World) -> None:
    run = sworld.run("waiting")
    url = reverse("runs-cancel", args=[run.pk])
    response = _send(_operator(sworld), url, [("a\x00", "1"), ("a\x00", "2"), ("reason", "r")])
    assert response.status_code == 400 and "NUL characters" in response.content.decode()


def test_a_sign_in_with_two_usernames_is_refused(sworld: World) -> None:
    client = Client()
    pairs = [("username", "approver"), ("username", "operator"), ("password", "pw-operator")]
    response = _send(client, reverse("login"), pairs)
    assert response.status_code == 400 and _names(response, "username")
    assert "_auth_user_id" not in client.session


# -- the console's own forms send each field once -----------------------------------------
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
FORM = re.compile(r"<form\b([^>]*)>(.*?)</form>", re.S)
CONTROL = re.compile(r"<(?:input|select|textarea)\b[^>]*>", re.S)


def test_no_console_form_names_a_field_twice() -> None:
    """A form that sent a field twice would now be refused: every POST form of the
    templates names each control once (radio buttons and submit buttons send one of
    theirs; the runs list's selection ``run`` is the multi-valued field)."""
    twice = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for attrs, body in FORM.findall(path.read_text()):
            if 'method="post"' not in attrs.lower():
                continue
            names: list[str] = []
            for tag in CONTROL.findall(body):
                name = re.search(r'\bname="([^"]*)"', tag)
                kind = re.search(r'\btype="([^"]*)"', tag)
                if name is None or (kind is not None and kind.group(1) in ("radio", "submit")):
                    continue
                names.append(name.group(1))
            twice += [f"{path.name}: {n}" for n in set(names) if names.count(n) > 1]
    assert twice == []


@pytest.mark.parametrize(
    ("name", "principal"),
    [("runs-list", "operator"), ("approvals-queue", "approver"), ("recovery", "operator")],
)
def test_a_save_view_form_carries_its_query_once(sworld: World, name: str, principal: str) -> None:
    client = sworld.client(principal, raise_request_exception=False)
    response = client.get(reverse(name) + "?world=faultlab")
    assert response.status_code == 200
    assert response.content.decode().count('name="query"') == 1


def test_the_api_refuses_a_repeated_query_parameter(sworld: World) -> None:
    from tests.api.test_api import bearer, call

    auth = bearer(sworld.users["approver"])
    assert call("GET", "/checkpoints?world=faultlab", auth).status_code == 200
    response = call("GET", "/checkpoints?world=live&world=faultlab", auth)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "'world'" in response.json()["message"]
