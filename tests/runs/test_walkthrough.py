"""The R-401 walkthrough of the SPEC, read event by event.

observe -> decide -> validate -> execute (three reads), propose, wait for approval,
approve, revalidate, reserve, verify, complete; the ledger holds exactly one effect.
"""

from __future__ import annotations

import itertools

from runs.models import EffectAttempt, Evidence, TerminalRecord
from sim.world.models import LedgerEntry
from tests.helpers import approve, events, make_run

READ_LOOP = ["proposal.emitted", "proposal.allowed", "observation.received", "observation.recorded"]


def test_the_reservation_walkthrough_event_by_event(world, approver):
    run = make_run()
    got = events(run)
    expected_until_wait = (
        ["run.started", "observation.recorded"]
        + READ_LOOP * 3  # read_equipment, search_manual, check_inventory
        + READ_LOOP  # propose_reservation: canonical proposal + hash
        + ["proposal.emitted", "approval.required"]  # reserve_part needs an approval
    )
    assert [e.type for e in got] == expected_until_wait
    assert run.state == "WAITING_HUMAN"

    # Each read was a separate proposal of a named capability, and nothing executed
    # before validation allowed it.
    capabilities = [e.payload.get("capability") for e in got if e.type == "proposal.allowed"]
    assert capabilities == [
        "read_equipment",
        "search_manual",
        "check_inventory",
        "propose_reservation",
    ]
    assert all(e.actor == "model" for e in got if e.type == "proposal.emitted")
    assert not LedgerEntry.objects.exists()

    result = approve(run, approver)
    assert result.recorded
    tail = [e.type for e in events(run)][len(expected_until_wait) :]
    assert tail == [
        "approval.granted",
        "proposal.allowed",
        "effect.recorded",
        "completion.verified",
    ]
    assert run.state == "COMPLETED" and run.disposition == "COMPLETED"

    # Revalidation after approval: the same proposal was validated again and admitted
    # with the live approval, and the dispatch record consumed it.
    revalidated = events(run)[len(expected_until_wait) + 1]
    assert revalidated.reason_code == "effect_admitted_with_live_approval"
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.status == "CONFIRMED" and attempt.pk == revalidated.refs["attempt"]

    ledger = list(LedgerEntry.objects.filter(run_id=str(run.pk)))
    assert len(ledger) == 1
    assert (ledger[0].part_id, ledger[0].slot_id, ledger[0].quantity) == ("A17", "S-N1-01", 1)
    assert ledger[0].idempotency_key == attempt.idempotency_key

    record = TerminalRecord.objects.get(run=run)
    assert record.disposition == "COMPLETED" and record.reason_code == "all_predicates_pass"
    assert record.unresolved == [] and record.final_counters["effects"] == 1
    artifact = Evidence.objects.get(pk=record.artifact_id)
    assert artifact.content["effect_id"] == ledger[0].effect_id

    # Counters: five model turns, four admitted reads/proposals + one effect.
    assert run.counters["turns"] == 5 and run.counters["actions"] == 5
    assert run.counters["effects"] == 1 and run.counters["corrections"] == 0


def test_every_event_links_to_the_previous_one(world, approver):
    run = make_run()
    approve(run, approver)
    chain = events(run)
    assert [e.sequence for e in chain] == list(range(1, len(chain) + 1))
    for before, after in itertools.pairwise(chain):
        assert after.prev_hash == before.hash
    run.refresh_from_db()
    assert run.last_hash == chain[-1].hash and run.revision == chain[-1].sequence
