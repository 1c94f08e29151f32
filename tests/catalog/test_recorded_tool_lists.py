"""Recorded tools/list results of real servers and the specification's examples: every
tool of every one is accepted (no refusal), unknown fields stay untrusted data, and
importing them all through the service stores candidates only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from catalog import services
from catalog.domain.diff import ChangeClass, diff_definitions
from catalog.domain.discovery import parse_tool_list
from catalog.models import CapabilityVersion, Lifecycle, ToolSighting
from tests.catalog.test_services import admit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_tools"
FILES = sorted(FIXTURES.glob("*.json"))
EXPECTED = {
    "aws-documentation": 5,
    "brave-search": 2,
    "chrome-devtools": 32,
    "context7": 2,
    "everything": 13,
    "executeautomation-playwright": 33,
    "fastmcp": 4,
    "fetch": 1,
    "filesystem": 14,
    "firecrawl": 26,
    "git": 12,
    "github": 26,
    "gitlab": 9,
    "google-maps": 7,
    "kubernetes": 23,
    "memory": 9,
    "mongodb": 27,
    "mongodb-http": 27,
    "notion": 24,
    "postgres": 1,
    "puppeteer": 7,
    "slack": 8,
    "sqlite": 6,
    "time": 2,
    "spec-2025-11-25-listing": 1,
    "spec-2025-11-25-output-schema": 1,
    "spec-2026-07-28-listing": 1,
    "spec-2026-07-28-output-schema": 1,
}


def test_every_fixture_names_its_source():
    assert {f.stem for f in FILES} == set(EXPECTED)
    for path in FILES:
        source = json.loads(path.read_text())["_source"]
        assert source["how"], path.name


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_a_recorded_list_is_imported_without_refusal(path):
    listing = parse_tool_list(path.read_text(encoding="utf-8"))
    assert listing.refused == ()
    assert len(listing.tools) == EXPECTED[path.stem]


def test_the_filesystem_servers_execution_field_and_the_specs_icons_are_kept():
    # The reported failure: all 14 tools refused for "unknown field(s) execution".
    listing = parse_tool_list((FIXTURES / "filesystem.json").read_text())
    assert all(t.definition["execution"]["taskSupport"] for t in listing.tools)
    (weather,) = parse_tool_list((FIXTURES / "spec-2025-11-25-listing.json").read_text()).tools
    assert weather.definition["icons"][0]["src"] == "https://example.com/weather-icon.png"
    assert weather.definition["execution"] == {"taskSupport": "optional"}


def test_the_spec_listing_warns_that_it_is_one_page():
    listing = parse_tool_list((FIXTURES / "spec-2026-07-28-listing.json").read_text())
    assert listing.next_cursor == "next-page-cursor"
    assert "one page" in listing.warnings[0]


def test_importing_every_recorded_list_stores_candidates_only(catalog_admin):
    for path in FILES:
        result = services.candidate_import(
            text=path.read_text(), server=f"recorded:{path.stem}", user=catalog_admin
        )
        assert result.refused == [], path.name
    discovered = CapabilityVersion.objects.filter(source="discovered")
    assert discovered.count() >= 75  # a few definitions are shared between files
    assert set(discovered.values_list("lifecycle", flat=True)) == {Lifecycle.DISCOVERED}
    assert not discovered.filter(effect_gate_open=True).exists()
    # The specification's get_weather appears in two files as the same definition? No:
    # the 2025-11-25 example has `execution`, the 2026-07-28 one does not: two candidates.
    assert discovered.filter(capability_id="get_weather").count() == 2
    assert ToolSighting.objects.filter(version__capability_id="get_weather").count() == 2


@pytest.mark.parametrize(
    ("fixture", "name"), [("kubernetes", "kubectl_delete"), ("notion", "API-delete-a-block")]
)
def test_a_tool_that_declares_only_destructive_hint_disagrees_with_a_read_contract(
    catalog_admin, catalog_reviewer, fixture, name
):
    # Both servers mark their mutating tools with destructiveHint: true alone (readOnlyHint
    # false is its default, and destructiveHint only means something when it is false).
    # That claim disagrees with a read contract as plainly as readOnlyHint: false does.
    result = services.candidate_import(
        text=(FIXTURES / f"{fixture}.json").read_text(),
        server=f"recorded:{fixture}",
        user=catalog_admin,
    )
    (row,) = [r for r in result.created if r.capability_id == name]
    assert row.hints == {"destructiveHint": True}
    admitted = admit(row, catalog_reviewer, local_ref="read_equipment@1.0.0")
    warnings = admitted.decisions.get(action="admit").details["hint_warnings"]
    assert warnings == [
        "the server says the tool may be destructive; the local contract classifies it as "
        "read_only_observation"
    ]


def test_a_changed_meta_is_explained_as_the_servers_metadata_not_an_unknown_field():
    # The MongoDB server's tools differ between its stdio and Streamable HTTP transports
    # only in _meta, a Tool field the catalog knows (and shows verbatim, never reads).
    stdio, http = (
        {t.name: t.definition for t in parse_tool_list((FIXTURES / f"{f}.json").read_text()).tools}
        for f in ("mongodb", "mongodb-http")
    )
    diff = diff_definitions(stdio["aggregate-db"], http["aggregate-db"])
    assert [c.path for c in diff.changes] == [
        "_meta.com.mongodb/maxRequestPayloadBytes",
        "_meta.com.mongodb/transport",
    ]
    for change in diff.changes:
        assert change.change_class is ChangeClass.UNCLASSIFIED  # never a lighter review
        assert "does not know" not in change.why
        assert change.why == "the server's _meta (untrusted metadata) changed: review it"


def test_a_title_declared_only_in_annotations_is_shown_as_the_tools_title(catalog_admin):
    # Notion and MongoDB give each tool its title in annotations.title (MCP 2025-03-26),
    # which the specification says to show when the tool has no top-level title.
    result = services.candidate_import(
        text=(FIXTURES / "notion.json").read_text(), server="recorded:notion", user=catalog_admin
    )
    (row,) = [r for r in result.created if r.capability_id == "API-get-user"]
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-candidate", args=[row.pk])).content.decode()
    assert re.search(
        r'<dt>Title .*?\(annotations\.title\)</span></dt><dd class="untrusted-text">Get User</dd>',
        page,
    ), page[page.find("<dt>Name") : page.find("<dt>Effect")]


def test_the_event_stream_a_streamable_http_server_answers_is_imported_as_printed(catalog_admin):
    """``curl`` against a Streamable HTTP server prints its answer as an event stream (a
    priming event with empty data, then ``event: message`` / ``data: {...}``): recorded
    from server-everything's streamableHttp mode, it imports the same 13 tools as its
    stdio listing, through the console's import page."""
    text = (FIXTURES / "everything-streamable-http.sse").read_text(encoding="utf-8")
    assert text.startswith("id: ") and "\nevent: message\n" in text
    listing = parse_tool_list(text)
    assert listing.refused == ()
    stdio = parse_tool_list((FIXTURES / "everything.json").read_text())
    assert sorted(t.name for t in listing.tools) == sorted(t.name for t in stdio.tools)
    client = Client()
    client.force_login(catalog_admin)
    response = client.post(
        reverse("catalog-import"), {"server": "recorded:everything-http", "tool_list": text}
    )
    assert response.status_code == 302, response.content.decode()[:500]
    assert ToolSighting.objects.filter(server_label="recorded:everything-http").count() == 13
