"""A bulk cancel by filter through a real browser: filter the runs list, preview, confirm
the count, watch the progress bar reach 100 % and open the per-run results."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from operations import services
from operations.models import Operation, OperationItem
from runs.domain.states import State
from runs.models import Run
from tests.browser_support import login, screenshot
from tests.helpers import bulk_cancel_in_progress, make_run

# PostgreSQL: the drain thread writes while the page polls; the SQLite test database (in
# memory, shared cache) answers that with "table is locked".
pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RUNS = 12


def test_an_operator_cancels_every_run_of_a_filter_and_watches_it_finish(
    live_server: Any, new_page: Any, operator: Any, settings: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "inprocess"  # the embedded default: drained in the server
    runs = [make_run(advance=False) for _ in range(RUNS)]
    make_run(advance=False, namespace="live")  # another world: not selected
    base = live_server.url
    page = new_page()
    login(page, base, "operator")

    page.get_by_label("World").select_option("faultlab")
    page.get_by_label("State").select_option("CREATED")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"world=faultlab"))
    page.get_by_role("link", name="Cancel every run matching this filter…").click()

    expect(page.locator("#preview-count")).to_have_text(f"{RUNS} runs match now")
    screenshot(page, "operations-preview")
    page.get_by_label("Reason (recorded on the operation and on every item's run)").fill(
        "Capability version misbehaves; its gate is closed."
    )
    page.get_by_label(f"Type {RUNS} to confirm the number of runs").fill(str(RUNS - 1))
    page.get_by_role("button", name="Start the bulk cancel").click()
    expect(page.get_by_role("alert")).to_contain_text(
        f"The number you typed ({RUNS - 1}) does not match the {RUNS} runs this filter "
        "matches: nothing was cancelled."
    )
    assert not Operation.objects.exists()

    page.get_by_label(f"Type {RUNS} to confirm the number of runs").fill(str(RUNS))
    page.get_by_role("button", name="Start the bulk cancel").click()
    page.wait_for_url(re.compile(r"/operations/[0-9a-f-]{36}/$"))
    expect(page.locator("#op-percent")).to_have_text("100 %", timeout=30_000)
    expect(page.locator("#op-status")).to_have_text("finished")
    expect(page.locator("#op-done")).to_have_text(str(RUNS))
    expect(page.locator("#op-remaining")).to_have_text("0")
    expect(page.locator("#op-progress")).not_to_have_attribute("hx-trigger", "every 1s")
    screenshot(page, "operations-finished")

    page.get_by_role("link", name="done", exact=True).click()
    expect(page.locator("#op-results tbody tr")).to_have_count(RUNS)
    first = runs[0]
    page.get_by_role("link", name=str(first.pk)[:8]).click()
    page.wait_for_url(re.compile(rf"/runs/{first.pk}/"))
    expect(page.locator("#live-state")).to_have_text(State.CANCELLED.value)
    assert set(Run.objects.filter(namespace="faultlab").values_list("state", flat=True)) == {
        State.CANCELLED.value
    }
    assert Run.objects.get(namespace="live").state == State.CREATED.value


def test_an_operation_that_finishes_under_the_operator_drops_its_pause_and_cancel_buttons(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Watching the progress with the keyboard on "Pause the operation": when the operation
    finished, the progress card said so but the pause and cancel buttons stayed (a press was
    refused: "the operation is finished") and the per-run results still said "pending". Now
    the buttons give way to a line saying why, which takes the focus, and the results show
    what was done."""
    run = make_run(advance=False)
    operation = bulk_cancel_in_progress(reason="end of shift", total=1)
    OperationItem.objects.create(operation=operation, position=0, run=run)
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/operations/{operation.pk}/")
    expect(page.locator("#op-results")).to_contain_text("pending")
    page.get_by_role("button", name="Pause the operation").focus()

    services.operation_drain(operation_id=operation.pk)
    expect(page.locator("#op-status")).to_have_text("finished")
    expect(page.get_by_role("button", name="Pause the operation")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel the operation")).to_have_count(0)
    expect(page.locator("#op-moves")).to_contain_text("nothing left to pause, resume or cancel")
    expect(page.locator("#op-results tbody")).to_contain_text("Done")
    expect(page.locator("#op-results tbody")).to_contain_text(State.CANCELLED.value)
    page.wait_for_function("() => document.activeElement.id === 'op-moves'", timeout=3_000)


def test_the_operation_progress_bar_is_named_and_says_its_count(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """A screen reader met an unnamed progress bar on the operation page ("progress bar,
    0 %"); it is now named for the operation and says the items done of the total."""
    run = make_run(advance=False)
    operation = bulk_cancel_in_progress(reason="end of shift", total=1)
    OperationItem.objects.create(operation=operation, position=0, run=run)
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/operations/{operation.pk}/")
    bar = page.get_by_role("progressbar", name=f"progress of operation {operation.short_id}")
    expect(bar).to_have_attribute("aria-valuetext", "0 of 1 items processed")
