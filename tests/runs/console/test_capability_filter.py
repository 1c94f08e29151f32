"""The runs list's capability filter (SPEC §10: runs filtered by capability): the runs in
which validation admitted a call of a capability, from the ``CapabilityUse`` projection the
authority writes with each such ``proposal.allowed`` event."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test import Client
from django.urls import reverse

from runs.console import runs_selectors as selectors
from runs.models import CapabilityUse, Event, Run
from tests.helpers import approve, make_run
from tests.runs.console.test_console_indexes import plan_of

pytestmark = pytest.mark.django_db


def uses(run: Run) -> list[tuple[str, int]]:
    return list(
        CapabilityUse.objects.filter(run=run)
        .order_by("first_sequence")
        .values_list("capability_id", "first_sequence")
    )


def allowed_calls(run: Run) -> list[tuple[str, int]]:
    """Each capability's first ``proposal.allowed`` event, read from the history."""
    first: dict[str, int] = {}
    for e in Event.objects.filter(run=run, type="proposal.allowed").order_by("sequence"):
        first.setdefault(e.payload["capability"], e.sequence)
    return sorted(first.items(), key=lambda item: item[1])


@pytest.fixture
def completed(world: None, approver: Any) -> Run:
    """A live reservation run, approved and completed: it called reserve_part."""
    run = make_run(namespace="live")
    approve(run, approver)
    assert run.state == "COMPLETED"
    return run


def test_the_authority_records_each_capabilitys_first_admitted_call(
    world: None, approver: Any
) -> None:
    waiting = make_run(namespace="live")
    assert [c for c, _ in uses(waiting)] == [
        "read_equipment",
        "search_manual",
        "check_inventory",
        "propose_reservation",
    ]
    assert uses(waiting) == allowed_calls(waiting)
    approve(waiting, approver)
    assert waiting.state == "COMPLETED"
    assert uses(waiting) == allowed_calls(waiting)
    assert "reserve_part" in dict(uses(waiting))
    use = CapabilityUse.objects.get(run=waiting, capability_id="reserve_part")
    assert (use.tenant, use.run_created_at) == (waiting.tenant, waiting.created_at)
    # A run that called nothing (every call it proposed was denied) has no uses.
    assert uses(make_run("unavailable_tool")) == []


def test_the_filter_lists_the_runs_that_called_the_capability(
    as_operator: Client, completed: Run
) -> None:
    waiting = make_run(namespace="live")
    failed = make_run("unavailable_tool", namespace="live")

    def listed(**query: str) -> str:
        return as_operator.get(reverse("runs-list"), query).content.decode()

    body = listed(capability="reserve_part")
    assert str(completed.pk) in body
    assert str(waiting.pk) not in body and str(failed.pk) not in body
    body = listed(capability="check_inventory")
    assert str(completed.pk) in body and str(waiting.pk) in body and str(failed.pk) not in body
    # Combined with the other filters.
    body = listed(capability="check_inventory", state="WAITING_HUMAN")
    assert str(waiting.pk) in body and str(completed.pk) not in body
    # The select offers every capability a run can call, and keeps the choice.
    assert '<option value="reserve_part" selected>' in listed(capability="reserve_part")
    # An unknown capability is ignored, not an error (as every filter value is).
    body = listed(capability="drop table runs_run")
    assert all(str(r.pk) in body for r in (completed, waiting, failed))


def test_another_tenants_uses_never_show(as_operator: Client, world: None) -> None:
    south = make_run(namespace="live", tenant="south")
    assert uses(south)
    body = as_operator.get(reverse("runs-list"), {"capability": "read_equipment"}).content
    assert str(south.pk) not in body.decode()


def test_keyset_pages_under_the_filter_cover_every_run_once(world: None) -> None:
    made = {str(make_run(namespace="live").pk) for _ in range(5)}
    make_run("unavailable_tool", namespace="live")  # called nothing: never listed
    filters = selectors.RunFilters.from_query({"capability": "read_equipment"})
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        page = selectors.run_list_for_tenant(
            tenant="north", filters=filters, cursor=cursor, page_size=2
        )
        seen += [str(r.pk) for r in page.runs]
        cursor = page.next_cursor
        if not cursor:
            break
    assert seen == sorted(seen, key=lambda pk: Run.objects.get(pk=pk).created_at, reverse=True)
    assert len(seen) == len(set(seen)) and set(seen) == made


def test_keyset_pages_under_the_filter_read_backward_in_the_same_order(world: None) -> None:
    from tests.runs.console.test_runs_pages import _walk_back

    made = {str(make_run(namespace="live").pk) for _ in range(5)}
    filters = selectors.RunFilters.from_query({"capability": "read_equipment"})
    forward, backward = _walk_back(filters, page_size=2)
    assert backward == forward and set(forward) == made and len(forward) == 5


def test_bulk_cancel_and_exports_select_what_the_filter_lists(
    as_operator: Client, completed: Run
) -> None:
    waiting = make_run(namespace="live")
    query = {"capability": "propose_reservation", "disposition": ""}
    preview = as_operator.get(reverse("operations-cancel-preview"), query).content.decode()
    assert str(waiting.pk)[:8] in preview and str(completed.pk)[:8] in preview
    export = as_operator.get(
        reverse("operations-runs-export", args=["csv"]), {"capability": "reserve_part"}
    )
    text = b"".join(export.streaming_content).decode()
    assert str(completed.pk) in text and str(waiting.pk) not in text


def test_a_page_under_the_filter_seeks_the_listing_index(world: None) -> None:
    make_run(namespace="live")
    filters = selectors.RunFilters.from_query({"capability": "search_manual"})
    read = lambda: selectors.run_list_for_tenant(tenant="north", filters=filters)  # noqa: E731
    assert "capability_use_listing" in plan_of(read)


def test_the_migration_fills_the_uses_of_runs_made_before_it(world: None) -> None:
    run = make_run(namespace="live")
    expected = uses(run)
    CapabilityUse.objects.all().delete()
    migration = importlib.import_module("runs.migrations.0010_capability_use")
    migration.record_uses(django_apps, connection.schema_editor())
    assert uses(run) == expected
    migration.record_uses(django_apps, connection.schema_editor())  # twice: nothing more
    assert uses(run) == expected


def test_audit_replay_checks_the_uses_against_the_events(world: None) -> None:
    from runs.replay.audit import audit_replay

    run = make_run(namespace="live")
    assert audit_replay(run)[1] == []
    CapabilityUse.objects.filter(run=run, capability_id="search_manual").update(first_sequence=3)
    CapabilityUse.objects.filter(run=run, capability_id="check_inventory").delete()
    CapabilityUse.objects.create(
        run=run,
        capability_id="reserve_part",
        tenant=run.tenant,
        run_created_at=run.created_at,
        first_sequence=99,
    )
    found = {(f.kind, f.detail.split(":")[0]) for f in audit_replay(run)[1]}
    assert found == {
        ("capability_use_mismatch", "search_manual"),
        ("capability_use_mismatch", "check_inventory"),
        ("capability_use_mismatch", "reserve_part"),
    }


def test_a_held_row_writes_a_capabilitys_use_once_and_a_fresh_row_changes_nothing(
    world: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs import authority
    from runs.domain.states import Actor, EventType
    from runs.engine import ownership

    run = make_run(advance=False)
    claim = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(claim, ownership.Claim)
    sent_uses: list[bool] = []
    real_sql = authority._cas_insert_sql

    def spy(changed: tuple[str, ...], **kw: bool) -> str:
        sent_uses.append(kw.get("with_use", False))
        return real_sql(changed, **kw)

    monkeypatch.setattr(authority, "_cas_insert_sql", spy)

    def cycle(row: Run, i: int) -> None:
        steps = [
            (EventType.OBSERVATION_RECORDED, Actor.HARNESS, None),
            (EventType.PROPOSAL_EMITTED, Actor.MODEL, {"turns": 1, "proposals": 1}),
            (EventType.PROPOSAL_ALLOWED, Actor.HARNESS, {"actions": 1}),
            (EventType.OBSERVATION_RECEIVED, Actor.CAPABILITY_ADAPTER, None),
        ]
        for type_, actor, delta in steps:
            result = authority.append(
                run_id=str(row.pk),
                expected_revision=row.revision,
                expected_epoch=claim.epoch,
                type=type_,
                actor=actor,
                reason_code="ok",
                refs={"observation": f"ev-{i}-{type_}"},
                payload={"capability": "check_inventory", "i": i},
                counters_delta=delta,
                run=row,
            )
            assert result.applied, result.refusal

    held = claim.row
    started = authority.append(
        run_id=str(run.pk),
        expected_revision=held.revision,
        expected_epoch=claim.epoch,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="contract_valid",
        refs={"observation": "rq-uses"},
        run=held,
    )
    assert started.applied
    cycle(held, 1)
    first = uses(run)
    assert dict(first)["check_inventory"] > 0
    cycle(held, 2)  # the same row object: the use is known stored, not sent again
    cycle(Run.objects.get(pk=run.pk), 3)  # a fresh row: sent again, and nothing changes
    if connection.vendor == "postgresql":  # (SQLite stores through the ORM)
        assert sent_uses.count(True) == 2
    assert uses(run) == first
    assert audit_replay_findings(run) == []


def audit_replay_findings(run: Run) -> list[Any]:
    from runs.replay.audit import audit_replay

    return [f for f in audit_replay(Run.objects.get(pk=run.pk))[1] if f.kind != "missing_evidence"]
