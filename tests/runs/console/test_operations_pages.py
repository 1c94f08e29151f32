"""Recovery, runbooks, fault lab, review packet, error pages and the demo set-up."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from catalog.models import CapabilityVersion, LifecycleDecision
from catalog.services import tenant_gate_open
from runs.console.filters import DISPOSITIONS
from runs.domain.states import EventType, State
from runs.domain.transitions import TRANSITION_LIST
from runs.engine import runner
from runs.models import EffectAttempt, Event, FaultLabResult, Run
from runs.runbooks import RUNBOOKS
from sim import faultlab
from sim.setup import demo_runs
from sim.world.models import LedgerEntry
from tests.helpers import approve, make_run, types
from tests.operations.test_batch_cancel import sending
from tests.runs.console.conftest import checkpoint_of, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def outage_run(world: None) -> Run:
    """An escalated run whose ambiguous reservation the ledger could not reconcile."""
    result = faultlab.run_fixture(faultlab.BY_NAME["ledger_outage"])
    assert result.passed
    return Run.objects.get(pk=result.run_id)


# -- recovery ----------------------------------------------------------------------------
def test_recovery_lists_unknown_effects(as_operator: Client, outage_run: Run) -> None:
    attempt = EffectAttempt.objects.get(run=outage_run, status="UNRESOLVED")
    body = as_operator.get(reverse("recovery")).content.decode()
    assert attempt.pk in body and "Reconcile with ledger" in body
    assert outage_run.short_id in body


def test_recovery_is_empty_and_says_so(as_operator: Client, world: None) -> None:
    body = as_operator.get(reverse("recovery")).content.decode()
    assert "No unknown or conflicting effects" in body


def test_recovery_is_for_operators_and_hides_other_tenants(
    as_approver: Client, operator_south: Any, outage_run: Run
) -> None:
    assert as_approver.get(reverse("recovery")).status_code == 403
    attempt = EffectAttempt.objects.get(run=outage_run)
    south = client_for(operator_south)
    body = south.get(reverse("recovery"), {"q": attempt.idempotency_key}).content.decode()
    assert attempt.pk not in body
    response = south.post(reverse("recovery-reconcile"), {"attempt_id": attempt.pk})
    assert response.status_code == 404


def test_ledger_lookup_shows_the_recorded_outcome(
    as_operator: Client, approver: Any, waiting_run: Run
) -> None:
    approve(waiting_run, approver)
    assert waiting_run.state == "COMPLETED"
    entry = LedgerEntry.objects.get(run_id=str(waiting_run.pk))
    for query in (entry.idempotency_key, entry.effect_id):
        response = as_operator.get(reverse("recovery"), {"q": query})
        lookup = response.context["lookup"]
        assert [e.effect_id for e in lookup.entries] == [entry.effect_id]
        assert [a.status for a in lookup.attempts] == ["CONFIRMED"]
        assert entry.effect_id in response.content.decode()
    missing = as_operator.get(reverse("recovery"), {"q": "no-such-key"}).content.decode()
    assert "The ledger holds no record" in missing


def test_reconciling_an_ended_runs_attempt_records_the_ledger_outcome(
    as_operator: Client, outage_run: Run
) -> None:
    attempt = EffectAttempt.objects.get(run=outage_run, status="UNRESOLVED")
    response = as_operator.post(
        reverse("recovery-reconcile"), {"attempt_id": attempt.pk}, follow=True
    )
    attempt.refresh_from_db()
    assert attempt.status == "CONFIRMED"
    event = Event.objects.filter(run=outage_run, type=EventType.EFFECT_RECONCILED).get()
    assert event.reason_code == "obligation_matched" and event.payload["by"] == "user:operator"
    assert "reconciled" in response.content.decode()
    again = as_operator.post(reverse("recovery-reconcile"), {"attempt_id": attempt.pk})
    assert again.status_code == 409


def test_reconcile_is_refused_for_an_attempt_its_run_still_owns(
    as_operator: Client, as_approver: Client, approver: Any, waiting_run: Run
) -> None:
    # Approve without advancing: the run holds a live approval, then dispatch stops
    # before sending (dispatch recorded), leaving an attempt the runner owns.
    approve(waiting_run, approver, advance=False)
    attempt = EffectAttempt.objects.create(
        id="at-console-owned",
        run=waiting_run,
        idempotency_key="k" * 64,
        proposal_hash=checkpoint_of_hash(waiting_run),
        attempt=1,
        owner_epoch=waiting_run.owner_epoch,
        dispatch_sequence=waiting_run.revision,
        status=EffectAttempt.Status.DISPATCH_RECORDED,
        created_at=waiting_run.created_at,
    )
    assert (
        as_approver.post(reverse("recovery-reconcile"), {"attempt_id": attempt.pk}).status_code
        == 403
    )
    response = as_operator.post(reverse("recovery-reconcile"), {"attempt_id": attempt.pk})
    assert response.status_code == 409
    assert "its owner reconciles this attempt" in response.content.decode()
    assert (
        as_operator.post(reverse("recovery-reconcile"), {"attempt_id": "nope"}).status_code == 404
    )


def checkpoint_of_hash(run: Run) -> str:
    return run.checkpoints.order_by("-created_at").first().proposal_hash


# -- runbooks ----------------------------------------------------------------------------
def test_every_runbook_renders_its_steps_for_operators(
    as_operator: Client, as_approver: Client, world: None
) -> None:
    index = as_operator.get(reverse("runbooks")).content.decode()
    assert as_approver.get(reverse("runbooks")).status_code == 403
    for book in RUNBOOKS:
        url = reverse("runbooks-detail", args=[book.slug])
        assert url in index
        body = as_operator.get(url).content.decode()
        for step in book.steps:
            assert escape(step.title) in body
        for name in book.fixtures:
            assert name in body
        assert as_approver.get(url).status_code == 403
    assert as_operator.get(reverse("runbooks-detail", args=["no-such-book"])).status_code == 404


def test_runbooks_show_live_data(as_operator: Client, outage_run: Run) -> None:
    denied = faultlab.run_fixture(faultlab.BY_NAME["denied_scope"])
    malformed = faultlab.run_fixture(faultlab.BY_NAME["malformed_result"])

    def page(slug: str) -> Any:
        return as_operator.get(reverse("runbooks-detail", args=[slug]))

    outage = page("ledger-outage")
    assert outage_run.short_id in outage.content.decode()
    assert [e.run_id for e in outage.context["data"]["ledger_outage"]] == [outage_run.pk]
    repeated = page("repeated-denial").context["data"]["repeated_denials"]
    assert str(repeated[0].run_id) == denied.run_id
    bad = page("malformed-success").context["data"]["malformed"]
    assert any(str(e.run_id) == malformed.run_id for e in bad)
    intents = page("repeated-reservation-attempts").context["data"]["intents"]
    classes = {row.run.pk: row.classification for row in intents["rows"]}
    assert classes[outage_run.pk] == "ambiguous"
    assert intents["counts"]["ambiguous"] >= 1


def test_closing_the_effect_gate_is_audited_and_stops_new_effects(
    as_operator: Client, operator: Any, approver: Any, world: None
) -> None:
    version = CapabilityVersion.objects.get(capability_id="reserve_part", lifecycle="ADMITTED")
    url = reverse("runbooks-gate", args=["repeated-reservation-attempts"])
    form = {"capability_id": "reserve_part", "version": version.version, "open": "0"}
    refused = as_operator.post(url, {**form, "reason": ""}, follow=True)
    assert "a gate change needs a reason" in refused.content.decode()
    assert tenant_gate_open(version, "north")
    as_operator.post(url, {**form, "reason": "repeated attempts alert"})
    # Issue 16: the runbook closes the operator's own tenant's gate, not the deployment's.
    version.refresh_from_db()
    assert version.effect_gate_open and not tenant_gate_open(version, "north")
    assert tenant_gate_open(version, "south")
    decision = LifecycleDecision.objects.filter(version=version, action="close_tenant_gate").get()
    assert decision.reviewer == operator and decision.reason == "repeated attempts alert"
    assert decision.details == {"tenant": "north"}
    # A new effect proposal is denied at validation step 8; the reads before it continued.
    run = make_run(principal="user:operator")
    assert "observation.received" in types(run)
    assert "tenant_effect_gate_closed" in [
        e.reason_code for e in Event.objects.filter(run=run, type="proposal.denied")
    ]
    assert not LedgerEntry.objects.filter(run_id=str(run.pk)).exists()
    as_operator.post(url, {**form, "open": "1", "reason": "fixed"})
    assert tenant_gate_open(version, "north")


def _gate_form(body: str, version: CapabilityVersion) -> str:
    """The runbook's gate form of ``version`` (its row's whole form)."""
    at = body.index(f'name="version" value="{version.version}"')
    return body[body.rindex("<form", 0, at) : body.index("</form>", at)]


def test_the_runbook_gate_forms_are_sent_once_and_name_their_version(
    as_operator: Client, world: None
) -> None:
    versions = CapabilityVersion.objects.filter(capability_id="reserve_part")
    assert versions.count() > 1  # the rows a screen reader must tell apart
    body = as_operator.get(reverse("runbooks-detail", args=["ledger-outage"])).content.decode()
    for version in versions:
        form = _gate_form(body, version)
        assert "data-submit-once" in form.split(">", 1)[0]
        label = f"Close gate for reserve_part v{version.version}"
        assert f'aria-label="{label}">Close gate</button>' in form
    names = [f"reserve_part v{v.version}" for v in versions]
    for name in names:
        assert f'aria-label="Close gate and cancel its waiting runs… for {name}"' in body


def test_a_refused_gate_change_comes_back_as_typed_beside_its_reason(
    as_operator: Client, world: None
) -> None:
    version = CapabilityVersion.objects.get(capability_id="reserve_part", lifecycle="ADMITTED")
    url = reverse("runbooks-gate", args=["ledger-outage"])
    typed = "r" * 1001
    form = {"capability_id": "reserve_part", "version": version.version, "open": "0"}
    response = as_operator.post(url, {**form, "reason": typed})
    assert response.status_code == 400
    body = response.content.decode()
    row = _gate_form(body, version)
    field = row[row.index('<input type="text"') :]
    field = field[: field.index(">")]
    assert f'value="{typed}"' in field and 'aria-invalid="true"' in field
    assert "Refused (reason_too_long)" in row and "this one has 1001" in row
    assert "Nothing was changed." in row
    # A reason of white space only is refused beside the field as well.
    blank = as_operator.post(url, {**form, "reason": "   "})
    assert blank.status_code == 400
    row = _gate_form(blank.content.decode(), version)
    assert 'aria-invalid="true"' in row and "Refused (reason_required)" in row
    # A posted version the page does not list: the refusal is at the top, not lost.
    elsewhere = as_operator.post(
        url, {**form, "capability_id": "no_such_capability", "reason": typed}
    )
    assert elsewhere.status_code == 400
    top = elsewhere.content.decode()
    assert 'class="refusal" role="alert"' in top and "Refused (reason_too_long)" in top
    assert tenant_gate_open(version, "north")
    assert not LifecycleDecision.objects.filter(action="close_tenant_gate").exists()


def _owning_runs_form(body: str) -> str:
    """The runbook's "owning runs" cancel form (the whole form)."""
    at = body.index('name="runbook"')
    return body[body.rindex("<form", 0, at) : body.index("</form>", at)]


def test_a_refused_owning_runs_cancel_comes_back_on_the_runbook_as_typed(
    as_operator: Client, approver: Any
) -> None:
    """The runbook's "owning runs" cancel form, refused (no reason, too long a reason, no
    run), came back on the runs list: the operator lost the runbook they were following.
    It now comes back on that runbook, the refusal beside the field at fault, the reason
    and the selection as typed; nothing is cancelled."""
    run = sending(approver=approver)  # active, holding an effect attempt
    other = sending(approver=approver)
    slug = "repeated-reservation-attempts"
    page = as_operator.get(reverse("runbooks-detail", args=[slug])).content.decode()
    form = _owning_runs_form(page)
    assert f'value="{run.pk}"' in form and f'value="{slug}"' in form
    url = reverse("runs-bulk-cancel")
    for typed, told in (("   ", "needs a reason"), ("r" * 501, "at most 500")):
        response = as_operator.post(url, {"run": [str(run.pk)], "reason": typed, "runbook": slug})
        assert response.status_code == 400
        assert response.templates[0].name == "runs/runbook_detail.html"
        form = _owning_runs_form(response.content.decode())
        field = form[form.index('name="reason"') :]
        field = field[: field.index(">")]
        assert f'value="{typed}"' in field and 'aria-invalid="true"' in field
        assert "Refused:" in form and told in form and "Nothing was cancelled." in form
        # The selection as sent: the run left unticked stays unticked.
        ticked = form[form.index(f'value="{run.pk}"') :]
        assert " checked>" in ticked[: ticked.index(">") + 1]
        unticked = form[form.index(f'value="{other.pk}"') :]
        assert " checked" not in unticked[: unticked.index(">") + 1]
    nothing = as_operator.post(url, {"reason": "incident", "runbook": slug})
    assert nothing.status_code == 400
    form = _owning_runs_form(nothing.content.decode())
    assert "select at least one run" in form and 'value="incident"' in form
    run.refresh_from_db()
    other.refresh_from_db()
    assert run.state not in DISPOSITIONS and other.state not in DISPOSITIONS


def test_the_gate_action_needs_the_operator_role(as_approver: Client, world: None) -> None:
    version = CapabilityVersion.objects.get(capability_id="reserve_part", lifecycle="ADMITTED")
    response = as_approver.post(
        reverse("runbooks-gate", args=["ledger-outage"]),
        {"capability_id": "reserve_part", "version": version.version, "open": "0", "reason": "x"},
    )
    assert response.status_code == 403
    version.refresh_from_db()
    assert version.effect_gate_open and tenant_gate_open(version, "north")


# -- fault lab ---------------------------------------------------------------------------
def test_the_fault_lab_lists_every_fixture(
    as_operator: Client, as_approver: Client, world: None
) -> None:
    body = as_operator.get(reverse("faultlab")).content.decode()
    for fixture in faultlab.FIXTURES:
        assert f'id="fx-{fixture.name}"' in body and escape(fixture.injects) in body
    assert as_approver.get(reverse("faultlab")).status_code == 403
    assert as_approver.post(reverse("faultlab-run"), {"fixture": "abstain"}).status_code == 403


def test_running_a_fixture_from_the_browser_keeps_its_result(
    as_operator: Client, world: None
) -> None:
    first, second = faultlab.FIXTURES[0].name, faultlab.FIXTURES[1].name
    response = as_operator.post(
        reverse("faultlab-run"), {"fixture": first, "chain": "1"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert body.lstrip().startswith(f'<tr id="fx-{first}"')
    assert "PASS" in body
    # The row asks for the next fixture as soon as it is swapped in.
    assert f'"fixture": "{second}"' in body and 'hx-trigger="load"' in body
    result = FaultLabResult.objects.get(fixture=first)
    assert result.passed and result.ran_by == "user:operator"
    assert reverse("runs-detail", args=[result.run_id]) in body
    single = as_operator.post(reverse("faultlab-run"), {"fixture": second}, HTTP_HX_REQUEST="true")
    assert 'hx-trigger="load"' not in single.content.decode()
    plain = as_operator.post(reverse("faultlab-run"), {"fixture": "abstain"})
    assert plain.status_code == 302 and FaultLabResult.objects.filter(fixture="abstain").exists()
    assert as_operator.post(reverse("faultlab-run"), {"fixture": "nope"}).status_code == 404


# -- review packet -----------------------------------------------------------------------
def test_the_review_packet_is_generated_from_the_code(
    as_operator: Client, as_approver: Client, world: None
) -> None:
    body = as_approver.get(reverse("review-packet")).content.decode()
    for state in State:
        assert state.value in body
    for edge in TRANSITION_LIST:
        assert edge.guard in body
    for event in EventType:
        assert f"<code>{event.value}</code>" in body
    for fixture in faultlab.FIXTURES:
        assert fixture.name in body
    for text in ("action_budget_exhausted", "ledger.exactly_one_effect", "run.identity.stable"):
        assert text in body
    assert "No fixture has been run from the console yet" in body
    as_operator.post(reverse("faultlab-run"), {"fixture": "abstain"})
    after = as_approver.get(reverse("review-packet"))
    assert after.context["ran"] == 1 and after.context["passed"] == 1
    assert "1 of 1 fixtures passed" in after.content.decode()


# -- errors ------------------------------------------------------------------------------
def test_error_pages_are_the_consoles(
    as_operator: Client, as_approver: Client, world: None
) -> None:
    missing = as_operator.get("/runs/00000000-0000-0000-0000-000000000000/")
    assert missing.status_code == 404 and "404 · Not found" in missing.content.decode()
    forbidden = as_approver.get(reverse("faultlab"))
    assert forbidden.status_code == 403 and "403 · Not allowed" in forbidden.content.decode()


def test_the_server_error_page_stands_alone(client: Client) -> None:
    from django.template.loader import render_to_string

    assert "500 · Something failed on our side" in render_to_string("500.html")


# -- demo ----------------------------------------------------------------------------------
def test_the_first_demo_seed_starts_runs_in_every_demo_state(world: None) -> None:
    call_command("seed_demo", verbosity=0)
    states = sorted(Run.objects.values_list("state", flat=True))
    assert states == ["COMPLETED", "ESCALATED", "FAILED", "WAITING_HUMAN"]
    call_command("seed_demo", verbosity=0)
    assert Run.objects.count() == 4


def test_demo_runs_are_real_runs(world: None) -> None:
    from sim.demo import create_demo_users

    create_demo_users()
    demo_runs()
    completed = Run.objects.get(state="COMPLETED")
    assert "approval.granted" in types(completed) and "effect.recorded" in types(completed)
    waiting = Run.objects.get(state="WAITING_HUMAN")
    assert checkpoint_of(waiting).status == "PENDING"
    runner.advance(str(waiting.pk), worker="test")
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"


@pytest.mark.parametrize(
    "name", ["retired_pinned_version", "tenant_gate_closed", "repeated_denial_escalates"]
)
def test_a_rolled_back_fixture_leaves_a_result_an_operator_can_open(
    as_operator: Client, world: None, name: str
) -> None:
    """These fixtures change the live catalog (a retirement, a gate) and roll back so that
    change never outlives them: their run goes with it. What the run did is stored with the
    result and shown on the fixture's result page, linked from the fault lab and runbooks."""
    from catalog.models import CapabilityVersion, LifecycleDecision

    columns = ("pk", "lifecycle", "effect_gate_open")
    catalog_before = list(CapabilityVersion.objects.values_list(*columns))
    decisions_before = LifecycleDecision.objects.count()
    row = as_operator.post(reverse("faultlab-run"), {"fixture": name}, HTTP_HX_REQUEST="true")
    result = FaultLabResult.objects.get(fixture=name)
    assert result.passed and result.run_id == ""
    events = result.history["events"]
    assert result.history["state"] == "ESCALATED" and events[-1]["type"] == "escalation.admitted"
    page_url = reverse("faultlab-result", args=[name])
    assert page_url in row.content.decode()
    assert page_url in as_operator.get(reverse("faultlab")).content.decode()
    page = as_operator.get(page_url)
    body = page.content.decode()
    assert page.status_code == 200 and "rolled back" in body
    for event in events:
        assert f"<code>{event['type']}</code>" in body
    assert "escalation.admitted" in body and "repeated_denial" in body
    # The catalog change never outlived the fixture.
    assert list(CapabilityVersion.objects.values_list(*columns)) == catalog_before
    assert LifecycleDecision.objects.count() == decisions_before
    runbook = as_operator.get(reverse("runbooks-detail", args=["repeated-denial"])).content
    if name != "retired_pinned_version":
        assert page_url in runbook.decode()


def test_a_fixture_result_page_needs_an_operator_and_a_known_fixture(
    as_operator: Client, as_approver: Client, world: None
) -> None:
    assert as_operator.get(reverse("faultlab-result", args=["nope"])).status_code == 404
    unrun = as_operator.get(reverse("faultlab-result", args=["abstain"]))
    assert unrun.status_code == 200 and "not been run yet" in unrun.content.decode()
    as_operator.post(reverse("faultlab-run"), {"fixture": "abstain"})
    kept = as_operator.get(reverse("faultlab-result", args=["abstain"]))
    result = FaultLabResult.objects.get(fixture="abstain")
    assert kept.status_code == 200
    assert reverse("runs-detail", args=[result.run_id]) in kept.content.decode()
    assert as_approver.get(reverse("faultlab-result", args=["abstain"])).status_code == 403
