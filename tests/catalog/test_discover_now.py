"""Discover now from the console: the request records a running discovery and hands it to
where the deployment runs work; the discovery's page follows it to its outcome. With Celery
(production) a slow server holds a worker, not the admin's web request; embedded, it is
carried out at once. One runs at a time per server; one whose process died is closed.

Real stdio MCP servers (``mcp_servers/changing.py``) over the official SDK; the Celery path
on a real worker is in ``tests/durable/test_catalog_rediscovery.py``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from catalog import servers
from catalog.models import Discovery, DiscoveryOutcome, ToolServer, ToolSighting
from tests.catalog.conftest import ChangingServer

pytestmark = pytest.mark.usefixtures("stdio_commands")


@pytest.fixture
def parts(catalog_admin: Any, changing_server: ChangingServer) -> ToolServer:
    return changing_server.register(catalog_admin, "parts")


def admin_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def poll(client: Client, run: Discovery) -> Any:
    """What the running page's every-second request gets."""
    return client.get(
        reverse("catalog-discovery", args=[run.pk]),
        headers={"HX-Request": "true", "HX-Target": "discovery-progress"},
    )


def test_embedded_discover_now_is_carried_out_in_the_request(
    parts: ToolServer, catalog_admin: Any
) -> None:
    client = admin_client(catalog_admin)
    response = client.post(reverse("catalog-server-discover", args=[parts.pk]))
    run = Discovery.objects.get(server=parts)
    assert response["Location"] == reverse("catalog-discovery", args=[run.pk])
    assert run.ok and run.trigger == "manual" and run.requested_by == catalog_admin
    assert ToolSighting.objects.filter(tool_server=parts).exists()
    page = client.get(response["Location"]).content.decode()
    assert "Discovering…" not in page and run.message in page


def test_with_a_worker_the_request_records_it_and_the_page_follows_it(
    parts: ToolServer, catalog_admin: Any, settings: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "deferred"  # handed over, carried out below
    client = admin_client(catalog_admin)
    response = client.post(reverse("catalog-server-discover", args=[parts.pk]))
    run = Discovery.objects.get(server=parts)
    assert run.outcome == DiscoveryOutcome.RUNNING and run.finished_at is None
    assert not ToolSighting.objects.exists()  # nothing was discovered in the request
    page = client.get(response["Location"]).content.decode()
    assert "Discovering…" in page and 'hx-trigger="every 1s"' in page
    assert "this page shows the outcome when it ends" in page
    assert "Discovery failed" not in page
    # While it runs, the poll gets the progress again; once it ended, a reload.
    running = poll(client, run)
    assert running.status_code == 200 and "Discovering…" in running.content.decode()
    assert "HX-Refresh" not in running

    done = servers.discovery_continue(discovery_id=run.pk)
    assert done is not None and done.pk == run.pk and done.ok, done.message
    assert Discovery.objects.count() == 1
    assert done.started_at == run.started_at and done.requested_by == catalog_admin
    ended = poll(client, run)
    assert ended["HX-Refresh"] == "true"
    page = client.get(response["Location"]).content.decode()
    assert "Discovering…" not in page and done.message in page
    # A second delivery of the same task finds nothing left to do.
    assert servers.discovery_continue(discovery_id=run.pk) is None
    assert Discovery.objects.count() == 1


def test_asking_again_while_it_runs_opens_the_running_one(
    parts: ToolServer, catalog_admin: Any, settings: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "deferred"
    client = admin_client(catalog_admin)
    first = client.post(reverse("catalog-server-discover", args=[parts.pk]))
    again = client.post(reverse("catalog-server-discover", args=[parts.pk]), follow=True)
    assert Discovery.objects.count() == 1
    assert again.redirect_chain[-1][0] == first["Location"]
    assert "already running" in again.content.decode()


def test_a_discovery_whose_process_died_is_closed_and_a_new_one_starts(
    parts: ToolServer, catalog_admin: Any, settings: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "deferred"
    client = admin_client(catalog_admin)
    client.post(reverse("catalog-server-discover", args=[parts.pk]))
    dead = Discovery.objects.get()
    long_ago = dead.started_at - servers.lost_after() - dt.timedelta(seconds=1)
    Discovery.objects.filter(pk=dead.pk).update(started_at=long_ago)

    page = client.get(reverse("catalog-discovery", args=[dead.pk])).content.decode()
    assert "stopped without an outcome" in page and "Discovering…" not in page
    assert poll(client, dead)["HX-Refresh"] == "true"
    assert servers.discovery_continue(discovery_id=dead.pk) is None  # too late to run it

    client.post(reverse("catalog-server-discover", args=[parts.pk]))
    dead.refresh_from_db()
    assert dead.outcome == DiscoveryOutcome.FAILED and dead.code == "worker_lost"
    assert "stopped before it ended" in dead.message and dead.finished_at is not None
    fresh = Discovery.objects.exclude(pk=dead.pk).get()
    assert fresh.outcome == DiscoveryOutcome.RUNNING


def test_only_catalog_admins_discover_and_nothing_is_recorded_otherwise(
    parts: ToolServer, operator: Any, catalog_admin: Any
) -> None:
    refused = admin_client(operator).post(reverse("catalog-server-discover", args=[parts.pk]))
    assert refused.status_code == 403
    missing = admin_client(catalog_admin).post(reverse("catalog-server-discover", args=[999999]))
    assert missing.status_code == 404
    assert not Discovery.objects.exists()


@pytest.mark.parametrize("value", ["7", "true", "-1", "", None, [3], {"id": 3}])
def test_the_task_refuses_a_message_that_names_no_discovery(parts: ToolServer, value: Any) -> None:
    from catalog.tasks import discovery_continue

    assert discovery_continue.run(value).startswith(("refused", "not running"))
    assert not Discovery.objects.exists()


def test_a_worker_that_finishes_after_its_record_was_closed_as_lost_leaves_that_record(
    parts: ToolServer, catalog_admin: Any, settings: Any
) -> None:
    """A worker paused past the deadline (SIGSTOP, a frozen VM) resumes and finishes: the
    record already closed as lost stays as it was (what the admin was told), and what it
    found is recorded as a discovery of its own."""
    settings.FIELDOPS_EXECUTION = "deferred"
    pending, _ = servers.discovery_request(server_id=parts.pk, user=catalog_admin)
    Discovery.objects.filter(pk=pending.pk).update(
        outcome=DiscoveryOutcome.FAILED, code="worker_lost", message="closed meanwhile"
    )
    done = servers.tool_server_discover(
        server_id=parts.pk, user=catalog_admin, trigger="manual", pending=pending
    )
    assert done.ok and done.pk != pending.pk
    closed = Discovery.objects.get(pk=pending.pk)
    assert (closed.outcome, closed.code, closed.message) == (
        "failed",
        "worker_lost",
        "closed meanwhile",
    )
    assert done.started_at == pending.started_at and done.requested_by == catalog_admin
