"""Documents of the simulated world generated from its code (the fault lab's fixtures)."""

from __future__ import annotations

from runs.docs import HEADER
from sim.faultlab import FIXTURES


def fault_sheet() -> str:
    lines = ["| fixture | group | injects | must reach |", "|---|---|---|---|"]
    for f in FIXTURES:
        lines.append(
            f"| `{f.name}` | {f.group} | {f.injects} | "
            f"{f.expect_state} {('`' + f.expect_reason + '`') if f.expect_reason else ''} |"
        )
    return "\n".join(lines) + "\n"


def faultlab_md() -> str:
    return (
        HEADER + "# Fault lab\n\nEach fixture is an automated test "
        "(`tests/sim/test_faultlab.py`), runs from `manage.py faultlab`, and from the "
        "console's fault lab page. Fixtures run in the `faultlab` world namespace: the "
        "live ledger and inventory are never touched. The page and the command keep each "
        "fixture's latest result (who ran it, when, its checks and notes; the command as "
        "`system:manage.py faultlab`) for the fault lab page, the runbooks' fixture tables "
        "and the review packet; each result opens at `/faultlab/<fixture>/`, with a link to "
        "its run. A fixture that changes the live catalog (`retired_pinned_version`, "
        "`tenant_gate_closed`, `repeated_denial_escalates`: a retirement is final and a gate "
        "applies to every run) rolls its transaction back after its checks, so the change "
        "never outlives it and its run goes with it; its result keeps that run's history "
        "(disposition and events) and shows it instead.\n\n" + fault_sheet()
    )


def generated_files() -> dict[str, str]:
    return {"docs/faultlab.md": faultlab_md()}
