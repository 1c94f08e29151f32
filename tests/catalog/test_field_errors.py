"""A refused catalog form comes back as typed with the refusal beside the field it is
about: the field is aria-invalid, its aria-describedby names the message, and the message
sits in the field's group (class "field"). A refusal about no single field (permission,
the version's state, a field the page no longer shows) stays at the top of the page.
Nothing is stored either way."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.urls import reverse

from catalog import servers, services
from catalog.models import LifecycleDecision, ToolServer
from tests.catalog.conftest import ADMISSION, as_shown, client_for, tool, tool_list
from tests.catalog.conftest import version_row as version

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta"})


class Page(HTMLParser):
    """The elements of a page by id (their attributes), and each field group (an element
    of class "field"): the ids of the elements inside it and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str]] = {}
        self.groups: list[dict[str, Any]] = []
        self._open: list[tuple[str, dict[str, Any] | None]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if "id" in attributes:
            self.by_id[attributes["id"]] = attributes
            for _, group in self._open:
                if group is not None:
                    group["ids"].add(attributes["id"])
        group = None
        if "field" in attributes.get("class", "").split():
            group = {"ids": set(), "text": ""}
            self.groups.append(group)
        if tag not in VOID:
            self._open.append((tag, group))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        for _, group in self._open:
            if group is not None:
                group["text"] += data

    def group_of(self, element_id: str) -> dict[str, Any]:
        (group,) = [g for g in self.groups if element_id in g["ids"]]
        return group

    def invalid(self) -> list[str]:
        return [i for i, a in self.by_id.items() if a.get("aria-invalid") == "true"]


def assert_beside(page: Page, field_id: str, *texts: str) -> None:
    """The refusal is shown beside ``field_id`` only: not at the top of the page."""
    field = page.by_id[field_id]
    assert field.get("aria-invalid") == "true", field
    error_id = field.get("aria-describedby", "")
    assert error_id and error_id in page.by_id, field
    group = page.group_of(field_id)
    assert error_id in group["ids"]
    for text in texts:
        assert text in group["text"]
    # Nothing else is marked (a radio group marks each of its buttons, with one message).
    assert {page.by_id[i]["aria-describedby"] for i in page.invalid()} == {error_id}
    assert "data-form-error" not in str(page.by_id)  # no refusal at the top


def assert_at_the_top(html: str, code: str) -> None:
    page = Page(html)
    assert page.invalid() == []
    assert "data-form-error" in html and f"Refused ({code})" in html
    assert all(code not in g["text"] for g in page.groups)


# -- register a tool server ----------------------------------------------------------------
HTTP = {"name": "tools", "transport": "http", "credential_ref": "env:FIELDOPS_MCP_TOKEN_T"}
STDIO = {"name": "keyed", "transport": "stdio", "command": "mcp-server-time"}


@pytest.mark.parametrize(
    ("post", "field_id", "code"),
    [
        ({**HTTP, "url": "ftp://files.example.invalid/mcp"}, "s-url", "bad_url"),
        ({**HTTP, "url": "https://me:pw@tools.example.invalid/mcp"}, "s-url", "credential_in_url"),
        (
            {**HTTP, "url": "https://tools.example.invalid/mcp", "credential_ref": "ghp_1"},
            "s-cred",
            "credential_ref_invalid",
        ),
        (
            {"name": "time", "transport": "stdio", "command": "/bin/sh"},
            "s-command",
            "command_not_allowed",
        ),
        ({"name": "time", "transport": "stdio", "command": " "}, "s-command", "command_required"),
        (
            {"name": "time", "transport": "stdio", "command": "mcp-server-time", "args": "'x"},
            "s-args",
            "bad_arguments",
        ),
        (
            {"name": "Bad Name", "transport": "stdio", "command": "mcp-server-time"},
            "s-name",
            "bad_name",
        ),
        ({"name": "t", "transport": "carrier-pigeon"}, "t-stdio", "bad_transport"),
        ({**STDIO, "env": "LD_PRELOAD=env:FIELDOPS_MCP_ENV_X"}, "s-env", "env_name_forbidden"),
        ({**STDIO, "env": "NODE_OPTIONS=env:FIELDOPS_MCP_ENV_X"}, "s-env", "env_name_forbidden"),
        ({**STDIO, "env": "PYTHONPATH=env:FIELDOPS_MCP_ENV_X"}, "s-env", "env_name_forbidden"),
        ({**STDIO, "env": "MY-KEY=env:FIELDOPS_MCP_ENV_X"}, "s-env", "env_invalid"),
        ({**STDIO, "env": "API_KEY=env:SECRET_KEY"}, "s-env", "env_ref_invalid"),
        (
            {**HTTP, "url": "https://tools.example.invalid/mcp", "env": "K=env:FIELDOPS_MCP_ENV_K"},
            "s-env",
            "env_http",
        ),
    ],
)
def test_a_refused_registration_marks_the_field_at_fault(
    catalog_admin, settings, post, field_id, code
):
    settings.FIELDOPS_MCP_STDIO_COMMANDS = ["mcp-server-time"]
    response = client_for(catalog_admin).post(reverse("catalog-servers"), post)
    assert response.status_code == 400
    html = response.content.decode()
    assert_beside(Page(html), field_id, f"Refused ({code})", "Nothing was changed.")
    assert not ToolServer.objects.exists()


def test_a_bad_url_is_shown_by_the_url_and_everything_typed_is_kept(catalog_admin):
    post = {**HTTP, "url": "ftp://files.example.invalid/mcp", "scheduled": "on"}
    page = Page(client_for(catalog_admin).post(reverse("catalog-servers"), post).content.decode())
    assert_beside(page, "s-url", "an HTTP server needs an http:// or https:// URL")
    assert page.by_id["s-name"]["value"] == "tools"
    assert "checked" in page.by_id["t-http"] and "checked" not in page.by_id["t-stdio"]
    assert page.by_id["s-url"]["value"] == "ftp://files.example.invalid/mcp"
    assert page.by_id["s-cred"]["value"] == "env:FIELDOPS_MCP_TOKEN_T"
    assert "checked" in page.by_id["s-scheduled"]


def test_a_value_pasted_for_an_environment_entry_is_refused_and_not_shown_again(
    catalog_admin, settings
):
    """An admin who pastes the key itself (API_KEY=sk-...) is told to give a reference; the
    page does not repeat the value, the other entries typed are kept."""
    settings.FIELDOPS_MCP_STDIO_COMMANDS = ["mcp-server-time"]
    typed = "REGION=env:FIELDOPS_MCP_ENV_REGION\nAPI_KEY=sk-live-pasted-4242424242"
    response = client_for(catalog_admin).post(
        reverse("catalog-servers"), {**STDIO, "env": typed, "scheduled": "on"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert_beside(Page(html), "s-env", "Refused (env_ref_invalid)", "line 2")
    assert "sk-live-pasted-4242424242" not in html
    assert ">REGION=env:FIELDOPS_MCP_ENV_REGION\nAPI_KEY=</textarea>" in html
    assert Page(html).by_id["s-command"]["value"] == "mcp-server-time"
    assert not ToolServer.objects.exists()


def test_a_taken_name_is_shown_by_the_name(catalog_admin, settings):
    settings.FIELDOPS_MCP_STDIO_COMMANDS = ["mcp-server-time"]
    servers.tool_server_register(
        user=catalog_admin, name="time", transport="stdio", command="mcp-server-time"
    )
    response = client_for(catalog_admin).post(
        reverse("catalog-servers"),
        {"name": "time", "transport": "stdio", "command": "mcp-server-time"},
    )
    assert_beside(Page(response.content.decode()), "s-name", "Refused (name_taken)")
    assert ToolServer.objects.count() == 1


# -- admit ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "field_id"),
    [
        ({"task_transition": "make it work"}, "task_transition"),
        ({"alternatives": "  \n "}, "alternatives"),
        ({"decision": "ADMIT_FOREVER"}, "decision"),
        ({"expiry": "soon"}, "expiry"),
        ({"reason": "   "}, "admit-reason"),
        ({"alternatives": "keep 1.0.0\nhuman \u202elookup"}, "alternatives"),
        ({"expiry": "expires on \u2066contract change"}, "expiry"),
    ],
)
def test_an_incomplete_admission_marks_the_answer_at_fault(catalog_admin, change, field_id):
    target = version("search_manual@1.1.0")
    before = LifecycleDecision.objects.count()
    typed = as_shown(target, {**ADMISSION, **change})
    response = client_for(catalog_admin).post(reverse("catalog-admit", args=[target.pk]), typed)
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, field_id, "Nothing was changed.")
    # Every answer is kept as typed, the one at fault included.
    assert page.by_id["task_transition"]["value"] == typed["task_transition"]
    assert page.by_id["expiry"]["value"] == typed["expiry"]
    assert page.by_id["admit-reason"]["value"] == typed["reason"]
    assert typed["alternatives"] in response.content.decode()
    target.refresh_from_db()
    assert target.lifecycle == "DISCOVERED"
    assert LifecycleDecision.objects.count() == before


def test_the_importer_is_refused_at_the_top_and_a_missing_contract_by_the_choice(
    catalog_admin, catalog_reviewer
):
    (candidate,) = services.candidate_import(
        text=tool_list(tool("lookup_stock")), server="mcp://x", user=catalog_admin
    ).created
    before = LifecycleDecision.objects.count()
    # About the reviewer (two-person rule), not about an answer: at the top.
    response = client_for(catalog_admin).post(
        reverse("catalog-admit", args=[candidate.pk]),
        as_shown(candidate, {**ADMISSION, "local_ref": ""}),
    )
    assert response.status_code == 409
    html = response.content.decode()
    assert_at_the_top(html, "two_person_rule")
    assert Page(html).by_id["expiry"]["value"] == ADMISSION["expiry"]  # still as typed

    # About the local contract chosen (none): beside that choice.
    response = client_for(catalog_reviewer).post(
        reverse("catalog-admit", args=[candidate.pk]),
        as_shown(candidate, {**ADMISSION, "local_ref": ""}),
    )
    assert response.status_code == 409
    page = Page(response.content.decode())
    assert_beside(page, "local_ref", "Refused (no_local_contract)")
    assert page.by_id["expiry"]["value"] == ADMISSION["expiry"]
    candidate.refresh_from_db()
    assert candidate.lifecycle == "DISCOVERED"
    assert LifecycleDecision.objects.count() == before


# -- lifecycle moves -------------------------------------------------------------------------
def test_a_lifecycle_move_without_a_reason_marks_its_own_reason(catalog_admin):
    target = version("search_manual@1.0.0")
    before = LifecycleDecision.objects.count()
    response = client_for(catalog_admin).post(
        reverse("catalog-decide", args=[target.pk]),
        as_shown(target, {"action": "deprecate", "reason": "   "}),
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "reason-deprecate", "Refused (reason_required)")
    assert page.by_id["reason-deprecate"]["aria-describedby"] == "reason-deprecate-error"
    assert page.by_id["reason-deprecate"]["value"] == "   "
    target.refresh_from_db()
    assert target.lifecycle == "ADMITTED"
    assert LifecycleDecision.objects.count() == before


def test_a_lifecycle_refusal_keeps_the_other_forms_as_they_were(catalog_admin):
    target = version("search_manual@1.1.0")
    response = client_for(catalog_admin).post(
        reverse("catalog-decide", args=[target.pk]),
        as_shown(target, {"action": "defer", "reason": " "}),
    )
    page = Page(response.content.decode())
    assert_beside(page, "reason-defer", "Refused (reason_required)")
    assert page.by_id["admit-reason"]["value"] == ""  # the defer reason is not the admission's
    assert page.by_id["reason-reject"]["value"] == ""


def test_only_a_refusal_about_the_reason_is_shown_beside_it(catalog_admin):
    target = version("search_manual@1.1.0")
    url = reverse("catalog-decide", args=[target.pk])
    c = client_for(catalog_admin)
    # About the version's state: at the top.
    response = c.post(url, as_shown(target, {"action": "deprecate", "reason": "old"}))
    assert response.status_code == 409
    assert_at_the_top(response.content.decode(), "illegal_lifecycle_step")
    # About the reason: beside it.
    response = c.post(url, as_shown(target, {"action": "reject", "reason": " "}))
    assert_beside(Page(response.content.decode()), "reason-reject", "Refused (reason_required)")

    services.capability_decide(
        version_id=target.pk, user=catalog_admin, action="reject", reason="not needed"
    )
    # A deferral without a reason posted as the page shows the version now (a page opened
    # before the rejection is refused as stale first: test_views): the defer form is gone
    # from the page, so the refusal is shown at the top.
    response = c.post(url, as_shown(target, {"action": "defer", "reason": " "}))
    assert response.status_code == 400
    assert_at_the_top(response.content.decode(), "reason_required")


# -- retire -----------------------------------------------------------------------------------
def test_a_retirement_without_a_reason_marks_the_reason(catalog_admin):
    target = version("read_equipment@1.0.0")
    url = reverse("catalog-retire", args=[target.pk])
    response = client_for(catalog_admin).post(
        url, as_shown(target, {"reason": "  ", "acknowledge": "1"})
    )
    assert response.status_code == 400
    assert_beside(Page(response.content.decode()), "retire-reason", "Refused (reason_required)")
    target.refresh_from_db()
    assert target.retire_requested_by is None and target.lifecycle == "ADMITTED"


def test_a_risky_retirement_without_the_acknowledgement_marks_the_box(catalog_admin):
    target = version("read_equipment@1.0.0")
    url = reverse("catalog-retire", args=[target.pk])
    response = client_for(catalog_admin).post(
        url, as_shown(target, {"reason": "replaced by a new reader"})
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "retire-ack", "Refused (acknowledgement_required)")
    assert page.by_id["retire-reason"]["value"] == "replaced by a new reader"
    # The contract page has no retirement form (it links to the retire page): there the
    # same refusal cannot sit beside a field the page does not show.
    response = client_for(catalog_admin).post(
        reverse("catalog-decide", args=[target.pk]),
        as_shown(target, {"action": "retire", "reason": "replaced"}),
    )
    assert response.status_code == 400
    assert_at_the_top(response.content.decode(), "acknowledgement_required")
    target.refresh_from_db()
    assert target.retire_requested_by is None and target.lifecycle == "ADMITTED"


def test_the_requester_confirming_is_refused_at_the_top_a_bare_withdrawal_by_its_reason(
    catalog_admin,
):
    target = version("read_equipment@1.0.0")
    url = reverse("catalog-retire", args=[target.pk])
    c = client_for(catalog_admin)
    assert (
        c.post(url, as_shown(target, {"reason": "replaced", "acknowledge": "1"})).status_code == 302
    )
    before = LifecycleDecision.objects.count()
    response = c.post(url, as_shown(target, {"reason": "confirming myself", "acknowledge": "1"}))
    assert response.status_code == 409
    html = response.content.decode()
    assert_at_the_top(html, "two_person_rule")
    # The page it comes back to offers the requester no confirm form, only the note.
    assert "retire-reason" not in Page(html).by_id and 'id="retire-own-request"' in html
    assert LifecycleDecision.objects.count() == before

    withdraw = c.post(reverse("catalog-retire-withdraw", args=[target.pk]), {"reason": " "})
    assert withdraw.status_code == 400
    assert_beside(Page(withdraw.content.decode()), "withdraw-reason", "Refused (reason_required)")
    target.refresh_from_db()
    assert target.retire_requested_by == catalog_admin
