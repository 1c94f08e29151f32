"""docs/versions.md, generated from code: the version lifecycle, the dispatch and pinning
rule, the retirement rule, the repeated-denial rule and the implemented versions."""

from __future__ import annotations

from capabilities import registry
from capabilities.reviewed import REVIEWED_VERSIONS
from catalog.domain import lifecycle, versions
from runs.docs import HEADER
from runs.domain import validation


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def lifecycle_sheet() -> str:
    lines = [
        "| state | a new run may pin it | runs pinned to it dispatch it | meaning |",
        "|---|---|---|---|",
    ]
    for state, rule in versions.VERSION_RULES.items():
        lines.append(
            f"| `{state.value}` | {_yes(rule.new_runs)} | {_yes(rule.pinned_runs)} | "
            f"{rule.meaning} |"
        )
    return "\n".join(lines) + "\n"


def steps_sheet() -> str:
    lines = ["| from | action | to |", "|---|---|---|"]
    for (state, action), target in lifecycle.LIFECYCLE_STEPS.items():
        lines.append(f"| `{state.value}` | {action.value} | `{target.value}` |")
    return "\n".join(lines) + "\n"


def implementations_sheet() -> str:
    lines = ["| version | effect class | digest | adapter |", "|---|---|---|---|"]
    for ref, impl in registry.IMPLEMENTATIONS.items():
        c = impl.contract
        lines.append(
            f"| `{ref}` | {c.effect_class.value} | `{c.digest[:16]}` | "
            f"`{impl.handler.__module__}.{impl.handler.__name__}` |"
        )
    for c in REVIEWED_VERSIONS:
        if not registry.dispatchable(c.id, c.version):
            lines.append(
                f"| `{c.ref}` | {c.effect_class.value} | `{c.digest[:16]}` | "
                "none: reviewed, never dispatched |"
            )
    return "\n".join(lines) + "\n"


def risks_sheet() -> str:
    return "\n".join(f"- `{k}`: {v}" for k, v in versions.RETIREMENT_RISKS.items()) + "\n"


def versions_md() -> str:
    owner = ", ".join(f"`{r}`" for r in sorted(validation.OWNER_DENIALS))
    return (
        HEADER + "# Capability versions: lifecycle and dispatch\n\n"
        "Several versions of one capability are live at once. **Pinning:** at creation a "
        "run pins, per capability, the newest ADMITTED version the code implements "
        "(`version#digest`, in its component set and on `run.started`). **Dispatch:** "
        "every call goes to exactly the pinned version's adapter; a run never switches "
        "version mid-run, and a catalog digest that disagrees with the pin fails the run "
        "(`component_version_drift`), never applied.\n\n"
        "## What each lifecycle state means for runs\n\n"
        + lifecycle_sheet()
        + "\n## Lifecycle steps\n\n"
        + steps_sheet()
        + "\nEach decision form of a version page (admit, reject, defer, deprecate) and the "
        "retire page's request and confirm form carries the lifecycle state that page "
        "showed: a decision on a version that moved on since (or a post naming no state) is "
        "refused `lifecycle_changed` with the state it is in now, who made it and when, and "
        "nothing changes, so two admins who press *Reject* and *Defer* at the same moment do "
        "not both apply, and a version deprecated while its retire page is open is not "
        "retired from that page. Staleness is judged before the reason: a stale page with an "
        "empty or invalid reason is told it is stale (its typed reason kept), not asked to "
        "fix a reason first.\n"
        "\n## Retirement\n\n"
        "The retire page shows, from live data, the runs pinned to the version, their "
        "unknown effects and which admitted version replaces it for new runs (the one "
        "new runs pin once it is retired). The catalog is shared by every tenant: the "
        "counts (and the risks below) cover every tenant's runs, but the page lists and "
        "links only the runs and unknown effects of the viewer's tenant, another "
        "tenant's are counted, never named (so are the run ids a recorded retirement or "
        "deprecation keeps, shown under the version's decisions). A retirement needs an explicit "
        "acknowledgement and a second catalog admin (the first records "
        "`retire_requested`, another confirms) when any of these holds (the "
        "confirmation binds the request the retire page showed: one sent from a page "
        "loaded before that request, or after it was withdrawn, is refused "
        "`retirement_request_changed`, naming who withdrew it, when and why, as a second "
        "withdrawal of the same request is (`tests/catalog/test_retire_at_once.py`), so "
        "two admins who press *Request retirement* at "
        "the same moment do not retire the version):\n\n"
        + risks_sheet()
        + "\nA run pinned to a retired version is denied `capability_retired` at "
        "validation step 8 and cannot regain it (a dispatch validation allowed before the "
        "retirement, not yet `SENDING`, is not sent: `NOT_SENT`, `effect.rejected`); its "
        "unknown effects stay owned and "
        "reconcilable in Recovery.\n\n"
        "## Effect gates\n\n"
        "Each effect version has a deployment gate (catalog admins; closed: "
        "`effect_gate_closed` for every tenant) and one gate per tenant (that tenant's "
        "operators; closed: `tenant_effect_gate_closed` for that tenant only). A closed gate "
        "is also read at the send gate, under the lock a gate change takes: a proposal "
        "validation allowed before the gate closed, whose attempt is not yet `SENDING`, is "
        "not sent (the attempt ends `NOT_SENT`, recorded as `effect.rejected` naming the "
        "gate); one already `SENDING` left before the change committed. A post "
        "asking for the state a gate already has (two people closing it at once) changes "
        "nothing and records nothing: it is told who set the gate so, when and why.\n\n"
        "## Exposure and the repeated-denial rule\n\n"
        "A proposal for a capability the decision's context did not show is denied "
        "`not_exposed` at step 3 and charged as a correction. An unchanged request denied "
        f"{validation.REPEATED_DENIAL_LIMIT} times for the same owner reason ({owner}) "
        "escalates with `repeated_denial` (runbook: Repeated denial; fault lab: "
        "`repeated_denial_escalates`). Decision replay (page and `manage.py replay --mode "
        "decision`) reports, per decision, the capabilities today's catalog and exposure "
        "policy would add to or remove from the recorded visible set (with why), and the "
        "run's pins that differ from what a new run pins today: reported, never applied.\n\n"
        "## Implemented versions\n\n" + implementations_sheet()
    )


def generated_files() -> dict[str, str]:
    return {"docs/versions.md": versions_md()}
