"""Scheduled re-discovery through a real Celery worker: the beat task fans out one
discovery per scheduled server, the worker starts the MCP server over stdio with the SDK,
and the drift it finds is on the catalog page and in the incident runbook."""

from __future__ import annotations

import sys
import time

import pytest
from django.test import Client
from django.urls import reverse

from catalog import servers, services
from catalog.models import Discovery, DriftKind, Lifecycle, ToolDrift, ToolSighting
from catalog.tasks import catalog_rediscover_all
from fieldops.celery import app
from tests.catalog.conftest import ChangingServer
from tests.conftest import make_user

pytestmark = [pytest.mark.celery, pytest.mark.postgres]


def _poll(fetch, timeout: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = fetch()
        if found is not None:
            return found
        time.sleep(0.3)
    raise AssertionError("the worker recorded no scheduled discovery in time")


def test_the_beat_entry_is_registered():
    entry = app.conf.beat_schedule["catalog-rediscover"]
    assert entry["task"] == "catalog.tasks.catalog_rediscover_all"
    assert entry["schedule"] > 0


def test_scheduled_rediscovery_raises_drift_on_the_catalog_page_and_in_the_runbook(
    cluster, catalog_admin, operator, settings, tmp_path
):
    catalog_reviewer = make_user("catalog-reviewer", "north", "catalog-admin")
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable]
    state = ChangingServer(tmp_path / "state.json")
    server = state.register(catalog_admin, "parts")
    first = servers.tool_server_discover(server_id=server.pk, user=catalog_admin)
    assert first.ok, first.message
    lookup = ToolSighting.objects.get(server_label="parts", version__capability_id="lookup_part")
    services.capability_admit(
        version_id=lookup.version_id,
        user=catalog_reviewer,
        task_transition="NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE",
        alternatives=["human lookup"],
        decision="ADMIT_BOUNDED",
        expiry="expires on a remote definition change",
        reason="matches the reviewed read contract",
        local_ref="read_equipment@1.0.0",
    )
    state.set(description="Look up a part; now also reserves it.", legacy=True)

    cluster.start_worker(FIELDOPS_MCP_STDIO_COMMANDS=sys.executable)
    catalog_rediscover_all.delay()  # what beat sends on its schedule
    run = _poll(lambda: Discovery.objects.filter(server=server, trigger="schedule").first(), 60)
    assert run.ok, run.message
    assert run.requested_ref == "system:schedule"
    drift = ToolDrift.objects.get(kind=DriftKind.CHANGED, discovery=run)
    assert drift.paused == [drift.before.ref]
    drift.before.refresh_from_db()
    assert drift.before.lifecycle == Lifecycle.DEPRECATED

    client = Client()
    client.force_login(catalog_admin)
    page = client.get(reverse("catalog-index")).content.decode()
    assert f'data-drift="{drift.pk}"' in page and "admitted mapping paused" in page
    client.force_login(operator)
    runbook = client.get(reverse("runbooks-detail", args=["tool-definition-drift"]))
    assert f'data-drift="{drift.pk}"' in runbook.content.decode()


def test_discover_now_runs_on_a_worker_and_its_page_follows_it(
    cluster, catalog_admin, settings, tmp_path
):
    """With Celery the admin's request only records the discovery and hands it over: the
    worker starts the server and lists it; the page the admin was sent to shows it running,
    then (its poll answered with a reload) the outcome."""
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable]
    state = ChangingServer(tmp_path / "state.json")
    server = state.register(catalog_admin, "parts-now")
    client = Client()
    client.force_login(catalog_admin)
    response = client.post(reverse("catalog-server-discover", args=[server.pk]))
    requested = Discovery.objects.get(server=server)
    assert response["Location"] == reverse("catalog-discovery", args=[requested.pk])
    assert requested.trigger == "manual" and requested.requested_by == catalog_admin
    assert "Discovering…" in client.get(response["Location"]).content.decode()

    cluster.start_worker(FIELDOPS_MCP_STDIO_COMMANDS=sys.executable)
    run = _poll(
        lambda: Discovery.objects.filter(pk=requested.pk).exclude(outcome="running").first(), 60
    )
    assert run.ok, run.message
    assert Discovery.objects.filter(server=server).count() == 1
    assert ToolSighting.objects.filter(tool_server=server).exists()
    ended = client.get(
        response["Location"], headers={"HX-Request": "true", "HX-Target": "discovery-progress"}
    )
    assert ended["HX-Refresh"] == "true"
    page = client.get(response["Location"]).content.decode()
    assert "Discovering…" not in page and run.message in page
