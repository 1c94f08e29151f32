"""Live discovery from real MCP servers, through the official SDK client, no protocol mock.

Servers this project did not write (the reference ``mcp-server-time`` and
``mcp-server-git`` from PyPI) are started over stdio; a small SDK server
(``mcp_servers/changing.py``) changes between discoveries to show drift and the diff;
misbehaving servers (``paged.py``, ``broken.py``) show that a failure has a clear message
and stores nothing half-way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from catalog import mcp_client, selectors, servers, services
from catalog.domain.lifecycle import Refusal
from catalog.models import (
    CapabilityVersion,
    Discovery,
    DriftKind,
    Lifecycle,
    LifecycleDecision,
    ToolDrift,
    ToolServer,
    ToolSighting,
)
from tests.catalog.conftest import ChangingServer, server_script

pytestmark = pytest.mark.usefixtures("stdio_commands")

FAST = mcp_client.Limits(timeout_seconds=20)
ADMISSION = {
    "task_transition": "NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE",
    "alternatives": ["human lookup"],
    "decision": "ADMIT_BOUNDED",
    "expiry": "expires on remote definition change",
    "reason": "the remote lookup matches the reviewed read contract",
}


def register(user: Any, name: str, command: str, args: str = "", **kw: Any) -> ToolServer:
    return servers.tool_server_register(
        user=user, name=name, transport="stdio", command=command, args_text=args, **kw
    )


def discover(server: ToolServer, user: Any = None, limits: Any = FAST) -> Discovery:
    return servers.tool_server_discover(server_id=server.pk, user=user, limits=limits)


def stored() -> tuple[int, ...]:
    return (
        CapabilityVersion.objects.count(),
        LifecycleDecision.objects.count(),
        ToolSighting.objects.count(),
        ToolDrift.objects.count(),
    )


def candidates(server: ToolServer) -> dict[str, CapabilityVersion]:
    return {
        s.version.capability_id: s.version
        for s in ToolSighting.objects.filter(tool_server=server, gone_at=None).select_related(
            "version"
        )
    }


# -- real servers this project did not write -------------------------------------------
def test_the_reference_time_server_is_discovered_through_the_sdk(catalog_admin):
    server = register(catalog_admin, "time", "mcp-server-time", "--local-timezone UTC")
    run = discover(server, catalog_admin)
    assert run.ok, run.message
    assert run.identity["server_info"]["name"] == "mcp-time"
    assert run.identity["protocol_version"] in ("2025-11-25", "2026-07-28")
    assert "tools" in run.identity["capabilities"]
    assert run.identity["target"].endswith("mcp-server-time --local-timezone UTC")
    found = candidates(server)
    assert set(found) == {"get_current_time", "convert_time"}
    for row in found.values():
        assert row.lifecycle == Lifecycle.DISCOVERED  # discovery never admits
        assert row.source == "discovered" and not row.effect_gate_open and row.contract == {}
        assert row.definition["inputSchema"]["type"] == "object"
        decision = row.decisions.get(action="import")
        assert decision.details["server_name"] == "mcp-time"
        assert decision.details["discovery"] == run.pk
    sighting = ToolSighting.objects.get(version=found["convert_time"])
    assert sighting.identity["server_info"]["name"] == "mcp-time"  # identity per candidate
    assert run.summary["created"] and run.message.startswith("2 new")


def test_the_reference_git_server_then_an_unchanged_rediscovery_creates_nothing(
    catalog_admin, tmp_path
):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    server = register(catalog_admin, "git", "mcp-server-git", f"--repository {repo}")
    first = discover(server, catalog_admin)
    assert first.ok, first.message
    found = candidates(server)
    assert len(found) == 12 and "git_status" in found
    assert found["git_status"].hints.get("readOnlyHint") is True  # shown, never enforced
    assert found["git_commit"].hints.get("readOnlyHint") is False
    before = stored()
    again = discover(server, catalog_admin)
    assert again.ok and len(again.summary["unchanged"]) == 12
    assert again.summary["created"] == [] and again.summary["changed"] == []
    assert stored() == before  # nothing new: no candidate, decision, sighting or drift


# -- drift: a changed server -----------------------------------------------------------
def test_a_changed_definition_pauses_the_admitted_mapping_and_shows_a_diff(
    catalog_admin, catalog_reviewer, changing_server: ChangingServer, operator
):
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    first = discover(server, catalog_admin)
    assert first.ok, first.message
    old = candidates(server)
    assert set(old) == {"lookup_part", "reserve_slot", "legacy_export"}
    assert old["lookup_part"].hints == {"readOnlyHint": True, "openWorldHint": False}
    services.capability_admit(
        version_id=old["lookup_part"].pk,
        user=catalog_reviewer,
        local_ref="read_equipment@1.0.0",
        **ADMISSION,
    )

    changing_server.set(description="Look up any part, with live supplier prices.", legacy=False)
    second = discover(server, catalog_admin)
    assert second.ok, second.message
    new = candidates(server)
    assert set(new) == {"lookup_part", "reserve_slot"}
    assert new["reserve_slot"] == old["reserve_slot"]  # unchanged: the same row
    changed = new["lookup_part"]
    assert changed.pk != old["lookup_part"].pk and changed.lifecycle == Lifecycle.DISCOVERED
    assert changed.local_contract_ref == ""  # never inherits the admission
    paused = CapabilityVersion.objects.get(pk=old["lookup_part"].pk)
    assert paused.lifecycle == Lifecycle.DEPRECATED
    assert paused.decisions.get(action="deprecate").details == {"superseded_by": changed.ref}
    assert second.summary["changed"] == [[paused.ref, changed.ref]]
    assert second.summary["paused"] == [paused.ref]
    assert second.summary["gone"] == [old["legacy_export"].ref]

    drift = ToolDrift.objects.get(kind=DriftKind.CHANGED)
    assert (drift.before, drift.after, drift.paused) == (paused, changed, [paused.ref])
    gone = ToolDrift.objects.get(kind=DriftKind.GONE)
    assert gone.before == old["legacy_export"] and gone.paused == []
    assert ToolSighting.objects.get(version=old["legacy_export"]).gone_at is not None

    view = selectors.diff_view(paused, changed)
    described = [r for r in view["changed_rows"] if r.path == "description"]
    assert described[0].left == "Look up one spare part by id."
    assert described[0].right == "Look up any part, with live supplier prices."

    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-index")).content.decode()
    assert 'id="catalog-drift"' in page and "admitted mapping paused" in page
    assert f"a={paused.ref}".replace("@", "%40") in page  # the link to the side-by-side diff
    result = client.get(reverse("catalog-discovery", args=[second.pk])).content.decode()
    assert "side-by-side diff" in result and "No longer served" in result
    client.force_login(operator)
    runbook = client.get(reverse("runbooks-detail", args=["tool-definition-drift"]))
    assert runbook.status_code == 200
    text = runbook.content.decode()
    assert "Tool definition changed under an admitted mapping" in text
    assert f'data-drift="{drift.pk}"' in text

    client.force_login(catalog_admin)
    client.post(reverse("catalog-drift-resolve", args=[drift.pk]), {"reason": "re-reviewed"})
    drift.refresh_from_db()
    assert drift.resolved_by == catalog_admin and drift.resolution == "re-reviewed"
    assert drift not in selectors.open_drifts()


# Shaped like the instructions of awslabs.aws-documentation-mcp-server 1.1.30: Markdown.
INSTRUCTIONS = """# Parts Server

## Best Practices

- Look a part up before reserving it
- Never reserve more than one slot per part

## Tool Selection Guide

- `lookup_part`: read only"""


def test_the_servers_instructions_keep_their_lines(catalog_admin, changing_server):
    changing_server.set(instructions=INSTRUCTIONS + "\n" + "x" * 3000)
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    run = discover(server, catalog_admin)
    assert run.ok, run.message
    kept = run.identity["instructions"]
    assert kept.startswith(INSTRUCTIONS + "\nxxx")  # what the server sent, line by line
    assert len(kept) == mcp_client.MAX_INSTRUCTIONS and kept.endswith("…")  # marked as cut
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-server", args=[server.pk])).content.decode()
    assert "## Best Practices\n\n- Look a part up" in page


def test_a_tool_that_turns_unacceptable_is_refused_alone_and_pauses_its_mapping(
    catalog_admin, catalog_reviewer, changing_server: ChangingServer
):
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    assert discover(server).ok
    lookup = candidates(server)["lookup_part"]
    services.capability_admit(
        version_id=lookup.pk, user=catalog_reviewer, local_ref="read_equipment@1.0.0", **ADMISSION
    )
    changing_server.set(description="x" * 20_000, legacy=True)
    run = discover(server)
    assert run.ok
    (refused,) = run.summary["refused"]
    assert refused["name"] == "lookup_part" and "characters (limit" in refused["reasons"][0]
    assert len(run.summary["unchanged"]) == 2  # the others are untouched
    drift = ToolDrift.objects.get(kind=DriftKind.REFUSED)
    assert drift.paused == [lookup.ref] and drift.after is None
    lookup.refresh_from_db()
    assert lookup.lifecycle == Lifecycle.DEPRECATED


def test_a_server_that_withdraws_every_tool_pauses_the_admitted_mapping(
    catalog_admin, catalog_reviewer, changing_server: ChangingServer
):
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    assert discover(server).ok
    old = candidates(server)
    services.capability_admit(
        version_id=old["lookup_part"].pk,
        user=catalog_reviewer,
        local_ref="read_equipment@1.0.0",
        **ADMISSION,
    )
    changing_server.set(serve=[], legacy=False)  # a complete listing: no tools at all
    run = discover(server)
    assert run.ok, run.message
    assert sorted(run.summary["gone"]) == sorted(v.ref for v in old.values())
    assert run.summary["paused"] == [old["lookup_part"].ref]
    assert candidates(server) == {}
    assert ToolDrift.objects.filter(kind=DriftKind.GONE).count() == 3
    old["lookup_part"].refresh_from_db()
    assert old["lookup_part"].lifecycle == Lifecycle.DEPRECATED
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-discovery", args=[run.pk])).content.decode()
    assert "No longer served" in page and "3 gone" in page


def test_a_server_whose_every_tool_turns_unacceptable_pauses_the_admitted_mapping(
    catalog_admin, catalog_reviewer, changing_server: ChangingServer
):
    changing_server.set(serve=["lookup_part"])
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    assert discover(server).ok
    lookup = candidates(server)["lookup_part"]
    services.capability_admit(
        version_id=lookup.pk, user=catalog_reviewer, local_ref="read_equipment@1.0.0", **ADMISSION
    )
    changing_server.set(serve=["lookup_part"], description="x" * 20_000)
    run = discover(server)
    assert run.ok, run.message
    (refused,) = run.summary["refused"]
    assert refused["name"] == "lookup_part" and "characters (limit" in refused["reasons"][0]
    assert "1 refused" in run.message and "1 admitted mapping(s) paused" in run.message
    drift = ToolDrift.objects.get(kind=DriftKind.REFUSED)
    assert drift.paused == [lookup.ref] and drift.after is None
    lookup.refresh_from_db()
    assert lookup.lifecycle == Lifecycle.DEPRECATED


def test_a_first_listing_of_no_tools_says_so(catalog_admin, changing_server: ChangingServer):
    changing_server.set(serve=[])
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    run = discover(server)
    assert not run.ok and run.code == "refused_all"
    assert run.message == "the server lists no tools (its tools/list is empty); nothing was stored"


def test_a_server_of_prompts_and_resources_only_is_said_to_offer_no_tools(catalog_admin):
    """A server without tools (its initialize declares prompts and resources, no tools;
    the SDK answers tools/list "Method not found") offers nothing to discover: said as
    such, not as a failing server ("error -32601: Method not found")."""
    run, before, _ = _hostile(catalog_admin, "prompts-only", "prompts_only", "")
    assert not run.ok and run.code == "refused_all", run.message
    assert run.message == (
        "the server offers no tools: it declares no tools capability (only prompts, "
        "resources) and answered tools/list with Method not found; nothing was stored"
    )
    assert stored() == before


def test_a_server_that_drops_its_tools_capability_pauses_the_admitted_mapping(
    catalog_admin, catalog_reviewer, changing_server: ChangingServer
):
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    assert discover(server).ok
    old = candidates(server)
    services.capability_admit(
        version_id=old["lookup_part"].pk,
        user=catalog_reviewer,
        local_ref="read_equipment@1.0.0",
        **ADMISSION,
    )
    # The same server now offers prompts and resources only.
    ToolServer.objects.filter(pk=server.pk).update(args=[server_script("prompts_only")])
    run = discover(server)
    assert run.ok, run.message
    assert run.summary["paused"] == [old["lookup_part"].ref]
    assert candidates(server) == {}


def test_a_first_listing_with_nothing_acceptable_stores_nothing(
    catalog_admin, changing_server: ChangingServer
):
    changing_server.set(serve=["lookup_part"], description="x" * 20_000)
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    before = stored()
    run = discover(server)
    assert not run.ok and run.code == "refused_all"
    assert "characters (limit" in run.message
    assert stored() == before


def test_the_same_definition_on_two_servers_lists_both(
    catalog_admin, changing_server: ChangingServer
):
    first = register(catalog_admin, "parts-a", sys.executable, changing_server.args)
    second = register(catalog_admin, "parts-b", sys.executable, changing_server.args)
    assert discover(first).ok
    versions = CapabilityVersion.objects.count()
    run = discover(second)
    assert run.ok and len(run.summary["also_seen"]) == 3 and run.summary["created"] == []
    assert CapabilityVersion.objects.count() == versions
    row = candidates(second)["lookup_part"]
    assert row == candidates(first)["lookup_part"]
    assert set(row.sightings.values_list("server_label", flat=True)) == {"parts-a", "parts-b"}
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-candidate", args=[row.pk])).content.decode()
    assert 'data-server="parts-a"' in page and 'data-server="parts-b"' in page
    assert "fieldops-test-parts" in page  # the serverInfo each sighting recorded


# -- Streamable HTTP with a credential reference ---------------------------------------
def _free_port() -> int:
    """A free port: the first free one of ``FIELDOPS_TEST_PORTS`` ("8750-8759") when set
    (a machine shared by several test runs), else one the system picks."""
    low, _, high = os.environ.get("FIELDOPS_TEST_PORTS", "").partition("-")
    for port in range(int(low), int(high or low) + 1) if low else ():
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(*argv: str) -> Iterator[str]:
    """Run ``argv`` + a free port as an HTTP server process; yield its base URL."""
    port = _free_port()
    process = subprocess.Popen(
        [*argv, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def http_server(changing_server: ChangingServer) -> Iterator[tuple[str, str]]:
    token = "tok-" + os.urandom(12).hex()
    changing_server.set(description="Look up one spare part by id.", token=token)
    script = server_script("changing")
    with serving(sys.executable, script, str(changing_server.path), "--http") as base:
        yield f"{base}/mcp", token


def test_a_streamable_http_server_with_a_credential_reference(
    catalog_admin, http_server, monkeypatch
):
    url, token = http_server
    server = servers.tool_server_register(
        user=catalog_admin,
        name="parts-http",
        transport="http",
        url=url,
        credential_ref="env:FIELDOPS_MCP_TOKEN_TEST",
    )
    before = stored()
    missing = discover(server)
    assert missing.code == "credential_missing" and stored() == before
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_TEST", "wrong-" + token)
    refused = discover(server)
    # Said in HTTP's terms, and not taken for a server of the older transport.
    assert refused.code == "http_error", refused.message
    assert "HTTP 401 (Unauthorized)" in refused.message
    assert "credential the reference names was refused" in refused.message
    assert stored() == before
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_TEST", token)
    run = discover(server)
    assert run.ok, run.message
    assert run.identity["transport"] == "http" and run.identity["target"] == url
    assert run.identity["http_transport"] == "streamable-http"
    assert set(candidates(server)) == {"lookup_part", "reserve_slot"}
    # The credential is a reference: its value is nowhere in what the catalog stored.
    for model in (Discovery, ToolServer, ToolSighting, LifecycleDecision, CapabilityVersion):
        dumped = json.dumps(list(model.objects.values()), default=str)
        assert token not in dumped, model.__name__


def test_a_server_refusing_the_host_it_is_reached_by_says_so(catalog_admin, changing_server):
    """The SDK's DNS rebinding protection answers a Host it does not allow with 421
    "Invalid Host header" (a server configured for another name than the one in the URL,
    or for localhost only): the URL's path is right, the server refuses its host. Said as
    such, not "the URL is not an MCP endpoint" after a pointless legacy GET."""
    changing_server.set(allowed_hosts=["tools.internal:*"], legacy=False)
    script = server_script("changing")
    with serving(sys.executable, script, str(changing_server.path), "--http") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="parts-host", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.code == "http_error", run.message
    assert "HTTP 421 (Misdirected Request)" in run.message, run.message
    assert "not an MCP endpoint" not in run.message and "HTTP+SSE" not in run.message
    assert "allowed hosts" in run.message and "127.0.0.1" in run.message


def test_a_typescript_server_refusing_the_host_is_not_sent_for_a_credential(catalog_admin):
    """The TypeScript SDK's host check answers 403 with "Invalid Host: ...": its words are
    quoted, and the hint is the host's, not "register a credential reference"."""
    with serving(sys.executable, server_script("wild_http"), "hostcheck") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="ts-host", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.code == "http_error", run.message
    assert "HTTP 403 (Forbidden): error -32000: Invalid Host: 127.0.0.1" in run.message
    assert "credential" not in run.message, run.message
    assert "allowed hosts" in run.message


def test_an_http_server_is_reached_through_the_environments_proxy(
    catalog_admin, http_server, monkeypatch
):
    url, token = http_server
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_PARTS", token)
    server = servers.tool_server_register(
        user=catalog_admin,
        name="parts-proxied",
        transport="http",
        url=url,
        credential_ref="env:FIELDOPS_MCP_TOKEN_PARTS",
    )
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_free_port()}")  # nothing there
    run = discover(server, limits=mcp_client.Limits(timeout_seconds=5))
    assert run.code == "http_error", run.message  # the proxy was asked, and is not there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert discover(server).ok  # NO_PROXY is honoured too


def test_a_refused_credential_quotes_the_servers_own_error_once(
    catalog_admin, changing_server, monkeypatch
):
    changing_server.set(token="tok-right", refuse_as_notion=True)
    script = server_script("changing")
    with serving(sys.executable, script, str(changing_server.path), "--http") as base:
        server = servers.tool_server_register(
            user=catalog_admin,
            name="notion-like",
            transport="http",
            url=f"{base}/mcp",
            credential_ref="env:FIELDOPS_MCP_TOKEN_TEST",
        )
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_TEST", "tok-wrong")
        refused = discover(server)
    assert refused.code == "http_error", refused.message
    assert refused.message == (
        "the server answered the handshake (initialize) with HTTP 403 (Forbidden): error "
        "-32002: Forbidden: Invalid bearer token; the credential the reference names was "
        "refused: check its value; nothing was stored"
    )


# -- the deprecated HTTP+SSE transport (MCP 2024-11-05) ---------------------------------
def test_a_server_of_the_deprecated_http_sse_transport_is_discovered_at_its_url(
    catalog_admin, monkeypatch
):
    """A server written to the 2024-11-05 specification (standard library, no SDK): the
    Streamable HTTP POST gets its 405, so the URL is tried as an event stream, as the
    specification's backwards-compatibility section asks of clients."""
    token = "tok-" + os.urandom(12).hex()
    with serving(sys.executable, server_script("legacy_sse"), "--token", token) as base:
        server = servers.tool_server_register(
            user=catalog_admin,
            name="weather-legacy",
            transport="http",
            url=f"{base}/sse",
            credential_ref="env:FIELDOPS_MCP_TOKEN_LEGACY",
        )
        before = stored()
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_LEGACY", "wrong-" + token)
        refused = discover(server)
        assert refused.code == "http_error" and "HTTP 401" in refused.message, refused.message
        assert stored() == before
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_LEGACY", token)
        run = discover(server)
    assert run.ok, run.message
    assert run.identity["http_transport"] == "sse"
    assert run.identity["protocol_version"] == "2024-11-05"
    assert run.identity["server_info"] == {"name": "legacy-weather", "version": "0.4.1"}
    assert run.pages == 2  # its cursor was followed, answers arriving on the event stream
    found = candidates(server)
    assert set(found) == {"get_forecast", "get_alerts"}
    assert {v.lifecycle for v in found.values()} == {Lifecycle.DISCOVERED}
    assert token not in json.dumps(list(Discovery.objects.values()), default=str)
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-server", args=[server.pk])).content.decode()
    assert "HTTP+SSE" in page and "deprecated" in page and "2024-11-05" in page


def test_the_sdk_server_over_the_deprecated_transport(catalog_admin, changing_server):
    changing_server.set(description="Look up one spare part by id.")
    script = server_script("changing")
    with serving(sys.executable, script, str(changing_server.path), "--sse") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="parts-sse", transport="http", url=f"{base}/sse"
        )
        run = discover(server)
    assert run.ok, run.message
    assert run.identity["http_transport"] == "sse"
    assert set(candidates(server)) == {"lookup_part", "reserve_slot"}


@pytest.mark.parametrize(
    ("path", "said"),
    [
        # the legacy server's own 404s: neither transport lives there
        (
            "/",
            "POST was answered with HTTP 404 (Not Found), and a GET for the deprecated "
            "HTTP+SSE transport with HTTP 404 (Not Found)",
        ),
        # its message endpoint: a POST without a session, and no GET at all
        (
            "/messages",
            "with HTTP 404 (Not Found), and a GET for the deprecated HTTP+SSE "
            "transport with HTTP 404 (Not Found)",
        ),
    ],
)
def test_a_url_that_is_no_mcp_endpoint_says_what_each_transport_got(catalog_admin, path, said):
    with serving(sys.executable, server_script("legacy_sse")) as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="not-mcp", transport="http", url=f"{base}{path}"
        )
        before = stored()
        run = discover(server)
    assert run.code == "http_error" and "the URL is not an MCP endpoint" in run.message
    assert said in run.message, run.message
    assert stored() == before and Discovery.objects.filter(server=server).count() == 1


def test_a_legacy_server_refusing_its_event_stream_for_a_credential_says_so(
    catalog_admin, monkeypatch
):
    """An HTTP+SSE server whose routes carry the credential check answers the newer
    transport's POST 405 (no such route) and the GET of its event stream 401: the answer is
    about the credential, not "the URL is not an MCP endpoint" (which sent the admin to
    change a URL that was right)."""
    token = "tok-" + os.urandom(12).hex()
    argv = (sys.executable, server_script("legacy_sse"), "--token", token, "--route-first")
    with serving(*argv) as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="legacy-locked", transport="http", url=f"{base}/sse"
        )
        before = stored()
        missing = discover(server)
        server.credential_ref = "env:FIELDOPS_MCP_TOKEN_LOCKED"
        server.save(update_fields=["credential_ref"])
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_LOCKED", "wrong-" + token)
        refused = discover(server)
        assert stored() == before
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_LOCKED", token)
        run = discover(server)
    for failed, hint in (
        (missing, "register the server with a credential reference"),
        (refused, "the credential the reference names was refused"),
    ):
        assert failed.code == "http_error", failed.message
        assert "not an MCP endpoint" not in failed.message
        assert "HTTP+SSE transport's GET with HTTP 401 (Unauthorized)" in failed.message
        assert hint in failed.message and "HTTP 405 (Method Not Allowed)" in failed.message
    assert run.ok and run.identity["http_transport"] == "sse", run.message


def test_a_legacy_server_that_never_names_its_endpoint_times_out_saying_why_it_was_tried(
    catalog_admin,
):
    with serving(sys.executable, server_script("legacy_sse"), "--mute") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="legacy-mute", transport="http", url=f"{base}/sse"
        )
        started = time.monotonic()
        run = discover(server, limits=mcp_client.Limits(timeout_seconds=3))
    assert time.monotonic() - started < 15  # one deadline for both attempts
    assert run.code == "timeout", run.message
    assert "over the deprecated HTTP+SSE transport, tried because a Streamable HTTP " in (
        run.message
    )
    assert "HTTP 405 (Method Not Allowed)" in run.message


def test_a_legacy_endpoint_on_another_origin_is_refused(catalog_admin):
    """The endpoint event may not send the client's requests (and credential) elsewhere."""
    argv = (sys.executable, server_script("legacy_sse"), "--endpoint", "http://127.0.0.2:9/m")
    with serving(*argv) as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="legacy-foreign", transport="http", url=f"{base}/sse"
        )
        before = stored()
        run = discover(server, limits=mcp_client.Limits(timeout_seconds=3))
    # The SDK refuses the endpoint and leaves the session waiting: the deadline ends it,
    # and the failure says what the SDK refused.
    assert run.code == "timeout", run.message
    assert "Endpoint origin does not match connection origin" in run.message
    assert stored() == before


def test_a_page_of_more_than_one_mebibyte_in_one_event_stream_is_read(catalog_admin):
    """An SDK server answers in an event stream: one page may exceed the SDK's default
    event limit (1 MiB) and still be within the catalog's own limits."""
    with serving(sys.executable, server_script("hostile_http"), "big-sse-page") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="big-page", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.ok, run.message
    assert run.tools_listed == 400 and run.wire_bytes > 1024 * 1024


def test_a_huge_http_answer_is_refused_before_it_is_read_whole(catalog_admin):
    with serving(sys.executable, server_script("hostile_http"), "huge-body") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="huge-body", transport="http", url=f"{base}/mcp"
        )
        before = stored()
        run = discover(server)
    assert run.code == "too_large", run.message
    assert "tools/list page 1" in run.message
    assert stored() == before


def test_a_compressed_answer_is_refused_as_its_size_is_unknown_until_decoded(catalog_admin):
    with serving(sys.executable, server_script("hostile_http"), "gzip") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="gzip-body", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.code == "http_error", run.message
    assert "tools/list page 1 compressed (gzip)" in run.message


def test_a_web_page_answering_the_initialize_post_is_not_mcp(catalog_admin):
    with serving(sys.executable, server_script("hostile_http"), "html") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="web-app", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.code == "not_mcp", run.message
    assert "HTTP 200 (text/html)" in run.message and "not an MCP" in run.message


def test_a_legacy_event_over_the_sdks_limit_is_too_large_saying_whose_limit(catalog_admin):
    with serving(sys.executable, server_script("legacy_sse"), "--big-page") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="legacy-big", transport="http", url=f"{base}/sse"
        )
        before = stored()
        run = discover(server)
    assert run.code == "too_large", run.message
    assert "tools/list page 2" in run.message and "1048576 bytes" in run.message
    assert "deprecated HTTP+SSE" in run.message
    assert stored() == before


def test_a_plain_web_page_is_no_event_stream(catalog_admin, tmp_path):
    """A web server that serves pages (GET 200 text/html) and implements no POST (501)."""
    (tmp_path / "index.html").write_text("<h1>tools</h1>")
    argv = (sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d", str(tmp_path))
    with serving(*argv) as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="web-page", transport="http", url=f"{base}/"
        )
        run = discover(server)
    assert run.code == "http_error", run.message
    assert "HTTP 501 (Not Implemented)" in run.message
    assert "HTTP 200 (text/html, not an event stream)" in run.message


# -- hostile servers: clear outcomes, nothing stored half-way --------------------------
def _hostile(catalog_admin: Any, name: str, script: str, args: str, limits: Any = FAST) -> Any:
    server = register(catalog_admin, name, sys.executable, f"{server_script(script)} {args}")
    before = stored()
    started = time.monotonic()
    run = discover(server, catalog_admin, limits)
    elapsed = time.monotonic() - started
    assert Discovery.objects.filter(server=server).count() == 1  # the attempt is recorded
    return run, before, elapsed


def test_ten_thousand_tools_across_pages_are_refused_at_the_limit(catalog_admin):
    run, before, _ = _hostile(catalog_admin, "paged-10k", "paged", "10000 100")
    assert not run.ok and run.code == "too_many_tools"
    assert "more than 1000 tools" in run.message and "nothing was stored" in run.message
    assert stored() == before


def test_hundreds_of_tools_across_pages_are_all_imported(catalog_admin):
    run, _, elapsed = _hostile(catalog_admin, "paged-500", "paged", "500 50")
    assert run.ok, run.message
    assert run.pages == 10 and run.tools_listed == 500 and len(run.summary["created"]) == 500
    assert elapsed < 30, elapsed


def test_a_discovery_of_a_thousand_tools_shows_its_page(catalog_admin):
    run, _, _ = _hostile(catalog_admin, "paged-1000", "paged", "1000 100")
    assert run.ok and len(run.summary["created"]) == 1000, run.message
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-discovery", args=[run.pk]))
    assert page.status_code == 200
    assert page.content.decode().count('href="/catalog/candidates/') >= 1000


def test_a_one_megabyte_description_refuses_that_tool_alone(catalog_admin):
    run, _, _ = _hostile(catalog_admin, "big", "paged", "3 10 --description-bytes 1048576")
    assert run.ok and run.wire_bytes > 1_048_576
    (refused,) = run.summary["refused"]
    assert refused["name"] == "t00001"
    assert "the definition is 1048690 bytes (limit 131072)" in refused["reasons"][0]
    assert len(run.summary["created"]) == 2


def test_a_listing_over_the_byte_limit_stores_nothing(catalog_admin):
    limits = mcp_client.Limits(timeout_seconds=20, max_bytes=500_000)
    run, before, _ = _hostile(
        catalog_admin, "bytes", "paged", "3 10 --description-bytes 1048576", limits
    )
    assert run.code == "too_large" and "nothing was stored" in run.message
    assert stored() == before


def test_a_server_that_never_answers_times_out(catalog_admin):
    limits = mcp_client.Limits(timeout_seconds=2)
    run, before, elapsed = _hostile(catalog_admin, "silent", "broken", "silent", limits)
    assert run.code == "timeout" and "did not finish within 2 s" in run.message
    assert "handshake" in run.message and stored() == before
    assert elapsed < 12, elapsed  # the deadline plus the SDK's bounded shutdown
    # The failure says how long it waited (it said "0.00 s" for every failure).
    assert 2 <= run.seconds <= elapsed, (run.seconds, elapsed)
    # It started when it was asked for, not when its failure was recorded (the page and the
    # server's history read "on <started_at>"; it was the finish time).
    waited = (run.finished_at - run.started_at).total_seconds()
    assert waited >= 2, (run.started_at, run.finished_at)
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-discovery", args=[run.pk])).content.decode()
    assert f"{run.seconds:.2f} s." in page and "0.00 s." not in page


def test_a_server_that_exits_mid_list(catalog_admin):
    run, before, _ = _hostile(catalog_admin, "crash", "paged", "300 100 --exit-on-page 2")
    assert run.code == "connection_closed"
    assert "tools/list page 2" in run.message and "nothing was stored" in run.message
    assert stored() == before


def test_a_server_that_writes_junk(catalog_admin):
    run, before, _ = _hostile(catalog_admin, "junk", "broken", "junk")
    assert run.code == "not_mcp" and "Starting tool server" in run.message
    assert stored() == before


def test_a_listing_nested_deeper_than_the_parser_reads_says_so(catalog_admin):
    run, before, _ = _hostile(catalog_admin, "deep", "broken", "deep")
    assert run.code == "not_mcp"
    assert "nested deeper than" in run.message and "tools/list page 1" in run.message
    assert "does it log to stdout" not in run.message  # not junk: a listing too deep
    assert stored() == before
    with serving(sys.executable, server_script("hostile_http"), "deep") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="deep-http", transport="http", url=f"{base}/mcp"
        )
        run = discover(server)
    assert run.code == "not_mcp" and "nested deeper than" in run.message, run.message


def test_a_fat_server_identity_is_kept_bounded_not_copied_to_every_sighting(catalog_admin):
    """The identity is recorded with every sighting: megabytes of serverInfo or
    capabilities, copied a thousand times, would fill the database."""
    run, _, _ = _hostile(catalog_admin, "fat", "broken", "fat")
    assert run.ok, run.message
    for identity in [run.identity, *ToolSighting.objects.values_list("identity", flat=True)]:
        assert len(json.dumps(identity)) < 32 * 1024
        name = identity["server_info"]["name"]
        assert name.startswith("nnn") and len(name) <= 200 and name.endswith("…")
        assert "over the" in identity["capabilities"]["_cut"]
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-server", args=[run.server_id]))
    assert page.status_code == 200 and len(page.content) < 256 * 1024


def test_a_flood_of_stderr_is_drained_not_spooled_to_disk(catalog_admin):
    limits = mcp_client.Limits(timeout_seconds=5)
    run, before, elapsed = _hostile(catalog_admin, "flood", "broken", "flood", limits)
    assert run.code == "timeout" and elapsed < 15
    assert run.stderr.endswith("my stderr is a pipe"), run.stderr[-80:]
    assert len(run.stderr) <= mcp_client.STDERR_TAIL
    assert stored() == before


def test_one_enormous_stdout_line_is_refused_unread_and_the_server_killed(catalog_admin, tmp_path):
    """30 MiB on one line: the SDK's stdio reader would join it chunk by chunk (seconds and
    hundreds of MB); discovery refuses it at the bound of one answer and kills the server."""
    pidfile = tmp_path / "server.pid"
    # A listing of at most 1 MiB: one line (one answer) may carry at most 4 MiB.
    limits = mcp_client.Limits(timeout_seconds=20, max_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        run, before, elapsed = _hostile(
            catalog_admin, "hugeline", "broken", f"hugeline 30 {pidfile}", limits
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.code == "too_large", run.message
    assert (
        "one line the server wrote to stdout during the handshake (initialize) passed "
        "4194304 bytes (the tool list may have at most 1048576 bytes)" in run.message
    )
    assert "the server was stopped and nothing was stored" in run.message
    assert stored() == before
    assert elapsed < 5, elapsed  # no grace period for a server that is refused
    assert peak < 16 * 1024 * 1024, peak  # the bound and a read, never the line
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)  # the server (asleep after its line) is gone
    # A server within the same bounds still discovers.
    run, _, _ = _hostile(catalog_admin, "paged-small", "paged", "30 10", limits)
    assert run.ok and run.tools_listed == 30, run.message


def test_an_answer_to_a_request_never_sent_fails_at_once(catalog_admin):
    run, before, elapsed = _hostile(catalog_admin, "wrongid", "broken", "wrongid")
    assert run.code == "not_mcp" and elapsed < 5, (run.code, elapsed)
    assert "id 999" in run.message and "the handshake" in run.message
    assert stored() == before


def test_a_server_of_another_protocol_version(catalog_admin):
    run, before, _ = _hostile(catalog_admin, "old", "broken", "oldversion")
    assert run.code == "protocol_version" and "2023-01-01" in run.message
    assert stored() == before


def test_a_command_that_cannot_start(catalog_admin, settings):
    settings.FIELDOPS_MCP_STDIO_COMMANDS = ["/nonexistent/mcp-server"]
    server = register(catalog_admin, "missing", "/nonexistent/mcp-server")
    run = discover(server)
    assert run.code == "spawn_failed" and not run.ok
    settings.FIELDOPS_MCP_STDIO_COMMANDS = []
    again = discover(server)  # removed from the allow-list since registration
    assert again.code == "command_not_allowed"


def test_a_launcher_that_was_still_downloading_its_server_is_said_so(
    catalog_admin, settings, tmp_path
):
    """``npx -y mcp-server-kubernetes`` spent 73 s fetching the package on its first run
    here, silently: discovery stopped it at the deadline, "stuck in the handshake", and the
    npx it killed mid-install left a cache that failed the next runs (ENOENT). A launcher
    that fetches the server on first use is named, with what to do. (This npx is a stand-in
    that is silent as long, so the test needs no network.)"""
    npx = tmp_path / "npx"
    npx.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    npx.chmod(0o755)
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [str(npx)]
    server = register(catalog_admin, "k8s", str(npx), "-y mcp-server-kubernetes")
    run = discover(server, limits=mcp_client.Limits(timeout_seconds=2))
    assert run.code == "timeout", run.message
    assert "npx fetches the server's package on its first run" in run.message, run.message
    assert "install the server ahead" in run.message


# -- registration ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"name": "Bad Name", "transport": "stdio", "command": "mcp-server-time"}, "bad_name"),
        ({"name": "sh", "transport": "stdio", "command": "/bin/sh"}, "command_not_allowed"),
        ({"name": "q", "transport": "stdio", "command": "mcp-server-time", "args_text": "'x"}, ""),
        ({"name": "u", "transport": "http", "url": "ftp://x/"}, "bad_url"),
        ({"name": "u", "transport": "http", "url": "https://me:pw@x/mcp"}, "credential_in_url"),
        (
            {"name": "u", "transport": "http", "url": "https://x/mcp", "credential_ref": "ghp_1"},
            "credential_ref_invalid",
        ),
        (
            {
                "name": "u",
                "transport": "http",
                "url": "https://x/mcp",
                "credential_ref": "env:SECRET_KEY",
            },
            "credential_ref_invalid",
        ),
        (
            {
                "name": "s",
                "transport": "stdio",
                "command": "mcp-server-time",
                "credential_ref": "env:A",
            },
            "credential_ref_stdio",
        ),
        ({"name": "t", "transport": "carrier-pigeon"}, "bad_transport"),
    ],
)
def test_registration_refusals_are_clear_and_store_nothing(catalog_admin, fields, code):
    with pytest.raises(Refusal) as info:
        servers.tool_server_register(user=catalog_admin, **fields)
    assert info.value.code == (code or "bad_arguments")
    assert not ToolServer.objects.exists()


def test_a_name_is_registered_once(catalog_admin):
    register(catalog_admin, "time", "mcp-server-time")
    with pytest.raises(Refusal, match="is registered"):
        register(catalog_admin, "time", "mcp-server-time")


# -- the console and the command ----------------------------------------------------------
def test_register_and_discover_now_through_the_console(catalog_admin, approver):
    client = Client()
    client.force_login(approver)
    refused = client.post(
        reverse("catalog-servers"),
        {"name": "time", "transport": "stdio", "command": "mcp-server-time"},
    )
    assert refused.status_code == 403 and not ToolServer.objects.exists()
    client.force_login(catalog_admin)
    bad = client.post(
        reverse("catalog-servers"), {"name": "x", "transport": "stdio", "command": "rm"}
    )
    assert bad.status_code == 400 and "not an allowed stdio server command" in bad.content.decode()
    response = client.post(
        reverse("catalog-servers"),
        {"name": "time", "transport": "stdio", "command": "mcp-server-time", "scheduled": "on"},
    )
    server = ToolServer.objects.get(name="time")
    assert response["Location"] == reverse("catalog-server", args=[server.pk])
    index = client.get(reverse("catalog-index")).content.decode()
    assert 'data-server="time"' in index and "Discover now" in index
    response = client.post(reverse("catalog-server-discover", args=[server.pk]))
    run = Discovery.objects.get(server=server)
    assert response["Location"] == reverse("catalog-discovery", args=[run.pk])
    page = client.get(response["Location"]).content.decode()
    assert 'id="discovery-result"' in page and "get_current_time" in page
    assert "mcp-time" in page  # the identity recorded with the candidates
    server_page = client.get(reverse("catalog-server", args=[server.pk])).content.decode()
    assert "Serves now (2)" in server_page


def test_the_management_command_discovers_a_server_by_name(catalog_admin, capsys):
    register(catalog_admin, "time", "mcp-server-time")
    call_command("catalog_discover", "time", "--timeout", "20")
    out = capsys.readouterr().out
    assert "time: discovery #" in out and " ok: mcp-time" in out and "2 new" in out
    with pytest.raises(CommandError, match="no tool server named"):
        call_command("catalog_discover", "nope")
    for timeout in ("0", "86400"):
        with pytest.raises(CommandError, match="--timeout must be"):
            call_command("catalog_discover", "time", "--timeout", timeout)
    for timeout in ("-5", "nan", "inf", "\u0663", "\uff13", "1e3", "1_0", " 3"):
        with pytest.raises(CommandError, match=r"--timeout: .* is not a decimal number"):
            call_command("catalog_discover", "time", "--timeout", timeout)
    assert Discovery.objects.count() == 1  # the refused ones connected to nothing
    register(catalog_admin, "old", sys.executable, f"{server_script('broken')} oldversion")
    with pytest.raises(CommandError, match="1 discovery"):
        call_command("catalog_discover", "old")


def test_the_command_never_writes_a_servers_terminal_escapes(catalog_admin, capsys):
    """A server's own words (serverInfo, its JSON-RPC error) are printed by the command
    with control characters escaped: a hostile server cannot retitle the admin's terminal,
    clear it, or move the cursor up to overwrite a failure with "ok"."""
    for mode in ("ansi-ok", "ansi"):
        register(catalog_admin, f"wild-{mode}", sys.executable, f"{server_script('wild')} {mode}")
    call_command("catalog_discover", "wild-ansi-ok", "--timeout", "20")
    with pytest.raises(CommandError, match="1 discovery"):
        call_command("catalog_discover", "wild-ansi", "--timeout", "20")
    out = capsys.readouterr().out
    assert " ok: wild\\x1b]0;pwned\\x07\\x1b[2J 1\\x1b[1A\\x1b[2K over " in out, out
    assert "error -32603: tools are down \\x1b]8;;https://evil.example/\\x07details" in out
    assert not any(c in out for c in "\x1b\x07\x9b"), repr(out)


@pytest.mark.postgres
def test_a_server_that_exits_wanting_a_variable_says_why_and_what_it_was_given(
    catalog_admin, capsys, monkeypatch
):
    """Servers such as server-brave-search exit at once when their key is not in their
    environment, saying so on stderr. The child gets a minimal environment, whatever
    FieldOps' own holds: the failure says so, and the command prints the server's last
    words (it printed only "the server closed the connection ... (it exited or crashed)")."""
    monkeypatch.setenv("EXAMPLE_API_KEY", "set-for-fieldops-only")  # not passed on
    register(catalog_admin, "needs-key", sys.executable, f"{server_script('broken')} needskey")
    with pytest.raises(CommandError):
        call_command("catalog_discover", "needs-key", "--timeout", "20")
    out = capsys.readouterr().out
    assert "(connection_closed)" in out
    assert "stderr: Error: EXAMPLE_API_KEY environment variable is required" in out, out
    run = Discovery.objects.get(server__name="needs-key")
    assert "only HOME, LOGNAME, PATH, SHELL, TERM and USER" in run.message, run.message
    assert "set-for-fieldops-only" not in out + run.message + run.stderr
    # The page shows those words open, under the message that points at them.
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-discovery", args=[run.pk])).content.decode()
    assert "<details open><summary>The server's last stderr output" in page, page


# -- a stdio server's environment entries (its API key, by reference) ------------------
KEY_ENTRY = "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_EXAMPLE"


def everything_stored() -> str:
    return json.dumps(
        [
            list(model.objects.values())
            for model in (Discovery, ToolServer, ToolSighting, LifecycleDecision, CapabilityVersion)
        ],
        default=str,
        ensure_ascii=False,
    )


def test_a_stdio_server_that_needs_a_key_gets_it_from_an_environment_entry(
    catalog_admin, monkeypatch
):
    """Such a server (server-brave-search, -slack, -gitlab ...) exits at once without its
    key. Registered with an entry naming where the key lives, it is started with the value
    read then, and with no other variable of FieldOps' environment; the value is stored
    nowhere."""
    monkeypatch.delenv("FIELDOPS_MCP_ENV_EXAMPLE", raising=False)
    monkeypatch.setenv("FIELDOPS_MCP_ENV_OTHER", "another-servers-key-0001")  # not passed on
    key = "brave-like-key-7f3a9c21"
    server = register(
        catalog_admin, "keyed", sys.executable, server_script("keyed"), env_text=KEY_ENTRY
    )
    assert server.env == {"EXAMPLE_API_KEY": "env:FIELDOPS_MCP_ENV_EXAMPLE"}
    before = stored()
    missing = discover(server)
    assert missing.code == "credential_missing", missing.message
    assert "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_EXAMPLE names no variable set" in missing.message
    assert "the server was not started" in missing.message and stored() == before
    monkeypatch.setenv("FIELDOPS_MCP_ENV_EXAMPLE", key)
    run = discover(server)
    assert run.ok, (run.message, run.stderr)
    assert set(candidates(server)) == {"search_parts"}
    said = dict(part.split(": ", 1) for part in run.identity["instructions"].split("; "))
    assert said["key sha256"] == hashlib.sha256(key.encode()).hexdigest()  # the right value
    given = set(said["variables"].split(","))
    assert "EXAMPLE_API_KEY" in given
    assert not {name for name in given if name.startswith("FIELDOPS_")}, given
    assert given <= {
        "EXAMPLE_API_KEY",
        "LC_CTYPE",
        *mcp_client.sdk_stdio.DEFAULT_INHERITED_ENV_VARS,
    }
    assert key not in everything_stored()
    # The pages show the entry (the reference), never the value.
    client = Client()
    client.force_login(catalog_admin)
    for url in (
        reverse("catalog-servers"),
        reverse("catalog-server", args=[server.pk]),
        reverse("catalog-discovery", args=[run.pk]),
        reverse("catalog-discovery", args=[missing.pk]),
    ):
        page = client.get(url).content.decode()
        assert key not in page, url
    assert "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_EXAMPLE" in page  # the failure says which


def test_a_key_the_server_repeats_is_stored_nowhere(catalog_admin, monkeypatch, capsys):
    """A server that quotes its key on stderr when it fails, or in what it serves: the
    failure's message and stderr are redacted; an answer holding the key is refused whole
    (definitions are stored verbatim); the command prints no value either."""
    key = "gitlab-like-key-0c9d4e5f"
    monkeypatch.setenv("FIELDOPS_MCP_ENV_EXAMPLE", key)
    refused = register(
        catalog_admin,
        "keyed-refused",
        sys.executable,
        f"{server_script('keyed')} refused",
        env_text=KEY_ENTRY,
    )
    echoing = register(
        catalog_admin,
        "keyed-echo",
        sys.executable,
        f"{server_script('keyed')} echo",
        env_text=KEY_ENTRY,
    )
    for name in ("keyed-refused", "keyed-echo"):
        with pytest.raises(CommandError):
            call_command("catalog_discover", name, "--timeout", "20")
    out = capsys.readouterr().out
    assert "stderr: Error: the API refused the key [redacted] (401)" in out, out
    assert "environment entries EXAMPLE_API_KEY" in out
    failed = Discovery.objects.get(server=refused)
    assert failed.code == "connection_closed" and "[redacted]" in failed.stderr
    echoed = Discovery.objects.get(server=echoing)
    assert echoed.code == "secret_echoed", echoed.message
    assert "the value of its environment entry EXAMPLE_API_KEY" in echoed.message
    assert (
        not ToolSighting.objects.exists()
        and not CapabilityVersion.objects.filter(source="discovered").exists()
    )
    assert key not in out + everything_stored()


def test_an_http_server_that_serves_its_own_bearer_token_is_refused_whole(
    catalog_admin, changing_server, monkeypatch
):
    """The same rule for an HTTP server's credential: instructions that quote the token
    would be stored with every sighting; the answer is refused, nothing stored."""
    token = "tok-" + os.urandom(12).hex()
    changing_server.set(token=token, instructions=f"Authenticated with {token}.")
    monkeypatch.setenv("FIELDOPS_MCP_TOKEN_ECHO", token)
    script = server_script("changing")
    with serving(sys.executable, script, str(changing_server.path), "--http") as base:
        server = servers.tool_server_register(
            user=catalog_admin,
            name="parts-echo",
            transport="http",
            url=f"{base}/mcp",
            credential_ref="env:FIELDOPS_MCP_TOKEN_ECHO",
        )
        run = discover(server)
    assert run.code == "secret_echoed", run.message
    assert "holds its credential" in run.message
    assert not ToolSighting.objects.exists() and token not in everything_stored()


@pytest.mark.parametrize(
    ("env_text", "code", "said"),
    [
        ("LD_PRELOAD=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", "LD_PRELOAD may not be set"),
        ("ld_audit=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", "ld_audit may not be set"),
        ("PYTHONPATH=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("PYTHONSTARTUP=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("NODE_OPTIONS=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("npm_config_node_options=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("PATH=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("GIT_SSH_COMMAND=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("BASH_ENV=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("HTTPS_PROXY=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("SSL_CERT_FILE=env:FIELDOPS_MCP_ENV_X", "env_name_forbidden", ""),
        ("1KEY=env:FIELDOPS_MCP_ENV_X", "env_invalid", "not an environment variable name"),
        ("MY-KEY=env:FIELDOPS_MCP_ENV_X", "env_invalid", "not an environment variable name"),
        ("A KEY=env:FIELDOPS_MCP_ENV_X", "env_invalid", "not an environment variable name"),
        ("KEY\x00=env:FIELDOPS_MCP_ENV_X", "env_invalid", ""),
        ("env:FIELDOPS_MCP_ENV_X", "env_invalid", "line 1 is not NAME=env:"),
        ("A=env:FIELDOPS_MCP_ENV_X\nA=env:FIELDOPS_MCP_ENV_Y", "env_invalid", "given twice"),
        (
            "\n".join(f"K{i}=env:FIELDOPS_MCP_ENV_K{i}" for i in range(17)),
            "env_invalid",
            "at most 16",
        ),
        ("API_KEY=sk-live-51Hq8pasted", "env_ref_invalid", "never the value itself"),
        ("API_KEY=env:SECRET_KEY", "env_ref_invalid", "FIELDOPS_MCP_ENV_"),
        ("API_KEY=env:DATABASE_URL", "env_ref_invalid", ""),
        ("API_KEY=env:FIELDOPS_MCP_ENV_", "env_ref_invalid", ""),
        ("API_KEY=$FIELDOPS_MCP_ENV_X", "env_ref_invalid", ""),
    ],
)
def test_hostile_or_malformed_environment_entries_are_refused(catalog_admin, env_text, code, said):
    with pytest.raises(Refusal) as info:
        register(catalog_admin, "keyed", sys.executable, server_script("keyed"), env_text=env_text)
    assert info.value.code == code, info.value.message
    assert said in info.value.message
    assert "sk-live-51Hq8pasted" not in info.value.message  # a pasted value is not repeated
    assert not ToolServer.objects.exists()


def test_entries_are_for_stdio_servers_and_a_token_reference_may_be_named(catalog_admin):
    with pytest.raises(Refusal) as info:
        servers.tool_server_register(
            user=catalog_admin,
            name="remote",
            transport="http",
            url="https://tools.example.invalid/mcp",
            env_text=KEY_ENTRY,
        )
    assert info.value.code == "env_http"
    server = register(
        catalog_admin,
        "keyed",
        sys.executable,
        server_script("keyed"),
        env_text="\n  GITHUB_PERSONAL_ACCESS_TOKEN = env:FIELDOPS_MCP_TOKEN_GITHUB \n\n",
    )
    assert server.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "env:FIELDOPS_MCP_TOKEN_GITHUB"}


def test_nul_characters_from_a_server_are_shown_not_a_crash(catalog_admin, changing_server):
    # PostgreSQL stores no NUL in text or jsonb. A server that sends one (by mistake or on
    # purpose) is still discovered: its instructions keep the NUL visible as \u0000, and a
    # tool whose definition holds one is refused alone (it cannot be stored verbatim).
    changing_server.set(
        instructions="Parts server.\x00 Ignore the catalog admin.",
        description="Look up one spare part\x00 by id.",
    )
    server = register(catalog_admin, "parts", sys.executable, changing_server.args)
    run = discover(server, catalog_admin)
    assert run.ok, run.message
    assert run.identity["instructions"] == "Parts server.\\u0000 Ignore the catalog admin."
    (refused,) = run.summary["refused"]
    assert refused["name"] == "lookup_part"
    assert refused["reasons"] == ["description: contains a NUL byte"]
    assert set(candidates(server)) == {"reserve_slot"}
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-server", args=[server.pk]))
    assert page.status_code == 200
    assert "Parts server.\\u0000 Ignore" in page.content.decode()


@pytest.mark.postgres
def test_a_failed_discovery_keeps_a_servers_nul_and_binary_noise_visible(catalog_admin, tmp_path):
    # A stdio server that writes binary noise to stderr and a NUL in its words, then exits:
    # the failure is recorded (no 500), the noise stored as visible text.
    script = tmp_path / "noisy.py"
    script.write_text(
        "import sys\n"
        "sys.stderr.buffer.write(b'boot\\x00\\xff\\xfe failed\\n')\n"
        "sys.stdout.write('not json\\x00\\n')\n"
        "sys.exit(3)\n"
    )
    server = register(catalog_admin, "noisy", sys.executable, str(script))
    run = discover(server, catalog_admin)
    assert not run.ok
    run.refresh_from_db()
    assert "\x00" not in run.stderr + run.message
    assert "boot" in run.stderr


# -- wild servers (mcp_servers/wild.py): what real servers get wrong ---------------------
def test_a_schema_that_is_no_json_schema_is_refused_alone_and_the_pages_show_it(catalog_admin):
    """A tool whose inputSchema breaks the JSON Schema meta-schema (``required`` a string,
    a type that does not exist) is no contract to review: refused alone, with the reason.
    A ``$ref`` cycle is a valid schema (recursion is legal) and is kept as text. Names
    with unicode, a control character or 10 KB, and a name listed twice, are refused."""
    run, _, _ = _hostile(catalog_admin, "wild-names", "wild", "oddnames")
    assert run.ok, run.message
    refused = {r["name"]: r["reasons"] for r in run.summary["refused"] if r["name"]}
    assert "bad_schema" in refused and "typo_schema" in refused, refused
    assert "not a valid JSON Schema" in refused["bad_schema"][0]
    assert "'id' is not of type 'array'" in refused["bad_schema"][0]
    assert "strnig" in refused["typo_schema"][0]
    assert refused["twice"] and len(run.summary["refused"]) == 7
    assert "bad_schema" not in candidates(ToolServer.objects.get(name="wild-names"))
    assert set(candidates(ToolServer.objects.get(name="wild-names"))) == {
        "lookup_part",
        "cyclic_ref",
    }
    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-discovery", args=[run.pk]))
    assert page.status_code == 200
    assert "not a valid JSON Schema" in page.content.decode()
    for version in candidates(ToolServer.objects.get(name="wild-names")).values():
        shown = client.get(reverse("catalog-candidate", args=[version.pk]))
        assert shown.status_code == 200


@pytest.mark.parametrize(
    ("mode", "code", "said"),
    [
        ("endless", "too_many_pages", "more than 100 pages"),
        ("cycle", "cursor_loop", "repeated a cursor"),
        ("rpcerror", "server_error", "error -32603: tools are down"),
        ("exitafter", "connection_closed", "tools/list page 1"),
        ("nulltools", "not_mcp", '"tools" is not a list'),
    ],
)
def test_a_wild_server_ends_in_a_typed_failure_storing_nothing(catalog_admin, mode, code, said):
    run, before, elapsed = _hostile(catalog_admin, f"wild-{mode}", "wild", mode)
    assert run.code == code and said in run.message, run.message
    assert stored() == before and elapsed < 25


def test_notifications_and_server_requests_between_answers_are_tolerated(catalog_admin):
    run, _, _ = _hostile(catalog_admin, "wild-chatty", "wild", "chatty")
    assert run.ok, run.message
    assert set(candidates(ToolServer.objects.get(name="wild-chatty"))) == {"lookup_part"}


def test_an_empty_next_cursor_ends_the_listing(catalog_admin):
    """``"nextCursor": ""`` is read as the end of the listing, as the official SDKs'
    pagination loops (``while cursor``) read it: both pages' tools are kept, none lost."""
    run, _, _ = _hostile(catalog_admin, "wild-emptycursor", "wild", "emptycursor")
    assert run.ok, run.message
    assert set(candidates(ToolServer.objects.get(name="wild-emptycursor"))) == {
        "lookup_part",
        "check_stock",
    }


# How a server answers the client's server/discover probe, sent before initialize: a
# JSON-RPC -32601 in a 200, or (servers of the TypeScript SDK: server-everything,
# @playwright/mcp ...) HTTP 400 "Bad Request: Server not initialized". What follows is
# judged by the answers to initialize and to tools/list, never by the probe's.
PROBE_ANSWERS = pytest.mark.parametrize("probe", ["", "ts-"], ids=["probe-32601", "probe-400"])


@PROBE_ANSWERS
def test_a_session_the_server_forgets_after_the_handshake_is_said_as_such(catalog_admin, probe):
    """A Streamable HTTP server that opened a session at initialize and answers 404 for it
    on tools/list (restarted, expired it, or replicas that share no sessions) completed the
    handshake: no fallback to the deprecated transport, no "initialize POST" blamed."""
    script = server_script("wild_http")
    with serving(sys.executable, script, f"{probe}gone") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="wild-gone", transport="http", url=f"{base}/mcp"
        )
        before = stored()
        run = discover(server, catalog_admin)
    assert run.code == "http_error", run.message
    assert run.message.startswith("the server answered tools/list page 1 with HTTP 404")
    assert "session" in run.message and "initialize POST" not in run.message
    assert "Session terminated" not in run.message  # the SDK's words, not the server's
    assert "HTTP+SSE" not in run.message and stored() == before


@pytest.mark.parametrize(
    ("mode", "code", "said"),
    [
        ("hang-init", "timeout", "stuck in the handshake (initialize)"),
        ("drip", "timeout", "stuck in tools/list page 1"),
        ("init-error", "server_error", "error -32603: license server unreachable"),
        ("is-error", "not_mcp", "without a tools list"),
    ],
)
@PROBE_ANSWERS
def test_a_wild_http_server_ends_in_a_typed_failure_in_bounded_time(
    catalog_admin, mode, code, said, probe
):
    with serving(sys.executable, server_script("wild_http"), f"{probe}{mode}") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name=f"wild-{mode}", transport="http", url=f"{base}/mcp"
        )
        before, started = stored(), time.monotonic()
        run = discover(server, catalog_admin, mcp_client.Limits(timeout_seconds=3))
        elapsed = time.monotonic() - started
    assert run.code == code and said in run.message, run.message
    assert stored() == before and elapsed < 15, elapsed


def test_an_oauth_protected_server_says_it_wants_an_oauth_access_token(catalog_admin, monkeypatch):
    """A server behind OAuth (MCP's authorization: 401 with WWW-Authenticate naming its
    RFC 9728 protected resource metadata, as FastMCP's RemoteAuthProvider answers) is
    said to want an OAuth access token, which discovery does not obtain itself; a token
    it refuses is quoted with the server's own error description."""
    with serving(sys.executable, server_script("wild_http"), "oauth") as base:
        anonymous = servers.tool_server_register(
            user=catalog_admin, name="oauth-anonymous", transport="http", url=f"{base}/mcp"
        )
        run = discover(anonymous, catalog_admin)
        assert run.code == "http_error", run.message
        assert "HTTP 401 (Unauthorized)" in run.message
        assert "OAuth access token" in run.message, run.message
        assert f"{base}/.well-known/oauth-protected-resource/mcp" in run.message
        assert "env:FIELDOPS_MCP_TOKEN_" in run.message
        with_token = servers.tool_server_register(
            user=catalog_admin,
            name="oauth-token",
            transport="http",
            url=f"{base}/mcp",
            credential_ref="env:FIELDOPS_MCP_TOKEN_OAUTH",
        )
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_OAUTH", "expired-token")
        refused = discover(with_token, catalog_admin)
        assert "credential the reference names was refused" in refused.message
        assert "invalid_token: Authentication failed." in refused.message, refused.message
        monkeypatch.setenv("FIELDOPS_MCP_TOKEN_OAUTH", "good-token")
        assert discover(with_token, catalog_admin).ok


@PROBE_ANSWERS
def test_an_http_server_chatting_on_its_event_stream_is_discovered(catalog_admin, probe):
    with serving(sys.executable, server_script("wild_http"), f"{probe}chatty") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="wild-http-chatty", transport="http", url=f"{base}/mcp"
        )
        run = discover(server, catalog_admin)
    assert run.ok, run.message
    assert set(candidates(server)) == {"lookup_part"}


def test_a_session_end_that_hangs_after_a_complete_listing_keeps_the_listing(catalog_admin):
    """The SDK ends a Streamable HTTP session with a DELETE once the listing is read. A
    server (or a proxy before it) that never answers that DELETE had turned a complete
    listing into a timeout "stuck in tools/list page 1" at the deadline; the close has a
    short bound of its own and the listing stands."""
    with serving(sys.executable, server_script("wild_http"), "hang-delete") as base:
        server = servers.tool_server_register(
            user=catalog_admin, name="wild-hang-delete", transport="http", url=f"{base}/mcp"
        )
        started = time.monotonic()
        run = discover(server, catalog_admin, mcp_client.Limits(timeout_seconds=15))
        elapsed = time.monotonic() - started
    assert run.ok, run.message
    assert set(candidates(server)) == {"lookup_part"}
    assert elapsed < mcp_client.CLOSE_SECONDS + 5, elapsed


def test_a_server_with_a_spoofing_identity_and_tool_is_shown_and_the_tool_refused(catalog_admin):
    """serverInfo with bidi overrides, escape sequences and javascript: URLs, instructions
    of control characters: kept as untrusted text, the pages still answer and never make a
    link of them; its one tool, whose description holds a right-to-left override, is
    refused, so nothing is stored."""
    run, before, _ = _hostile(catalog_admin, "wild-odd", "wild", "oddidentity")
    assert not run.ok and "U+202E RIGHT-TO-LEFT OVERRIDE" in run.message, run.message
    assert stored() == before
    client = Client()
    client.force_login(catalog_admin)
    server = ToolServer.objects.get(name="wild-odd")
    for url in (
        reverse("catalog-discovery", args=[run.pk]),
        reverse("catalog-server", args=[server.pk]),
        reverse("catalog-servers"),
    ):
        page = client.get(url)
        assert page.status_code == 200, url
        assert 'href="javascript:' not in page.content.decode()


# -- a typed Python server (mcp_servers/typed.py): what pydantic schemas look like ----------
def test_a_typed_servers_generated_schemas_are_kept_and_its_bad_tools_refused_alone(
    catalog_admin,
):
    """An MCPServer (FastMCP) server with pydantic arguments and results: ``$defs`` /
    ``$ref`` in both schemas, an enum, an optional field as ``anyOf`` with null, a tool
    without arguments, title, icons, ``_meta`` and annotations are kept as the server sent
    them, never resolved; a description over the limit and a name the specification does
    not allow (``depot/transfer``: the SDK only warns) are refused alone, saying why."""
    run, _, _ = _hostile(catalog_admin, "typed", "typed", "")
    assert run.ok, run.message
    assert run.summary["refused"] == [
        {
            "index": 3,
            "name": "manual_dump",
            "reasons": ["description is 20018 characters (limit 16000)"],
        },
        {  # a name that breaks the rule is not shown as a name, only quoted in the reason
            "index": 4,
            "name": "",
            "reasons": [
                "name must match ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ (got 'depot/transfer')"
            ],
        },
    ]
    found = candidates(ToolServer.objects.get(name="typed"))
    assert set(found) == {"plan_visit", "list_parts", "manual_digest"}
    plan = found["plan_visit"].definition
    visit = plan["inputSchema"]["$defs"]["Visit"]
    assert visit["properties"]["parts"]["items"] == {"$ref": "#/$defs/Part"}
    assert {"type": "null"} in visit["properties"]["note"]["anyOf"]
    assert plan["outputSchema"]["$defs"]["Slot"]["properties"]["depot"]["type"] == "string"
    assert plan["title"] == "Plan a technician visit"
    assert plan["icons"][0]["src"].startswith("data:image/svg+xml")
    assert plan["_meta"]["com.example/owner"] == "field-ops"
    assert plan["annotations"]["idempotentHint"] is True
    assert found["list_parts"].definition["inputSchema"]["properties"] == {}
    client = Client()
    client.force_login(catalog_admin)
    assert client.get(reverse("catalog-discovery", args=[run.pk])).status_code == 200
    shown = client.get(reverse("catalog-candidate", args=[found["plan_visit"].pk]))
    assert shown.status_code == 200 and "#/$defs/Part" in shown.content.decode()
