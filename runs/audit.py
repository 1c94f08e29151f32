"""Audit replay of a stored run: load its events and fold them (no policy, no capability)."""

from __future__ import annotations

from runs.authority import config_of, record_of
from runs.domain.replay import Finding, ReplayResult, compare_with_stored, replay
from runs.models import Event, Evidence, Run


def audit_replay(run: Run) -> tuple[ReplayResult, list[Finding]]:
    """Return the replay result and every finding, including disagreements with the row."""
    rows = Event.objects.filter(run=run).order_by("sequence", "id")
    records = []
    undecodable = None
    for row in rows:
        try:
            records.append(record_of(row))
        except ValueError as exc:  # a stored value outside the vocabulary: corruption
            undecodable = Finding("undecodable_event", row.sequence, str(exc)[:200])
            break
    evidence_ids = frozenset(Evidence.objects.filter(run=run).values_list("id", flat=True))
    result = replay(config_of(run), records, evidence_ids=evidence_ids)
    findings = list(result.findings)
    if undecodable is not None:
        findings.append(undecodable)
        return result, findings
    if result.stopped_at is None:
        stored = {
            "state": run.state,
            "revision": run.revision,
            "counters": run.counters,
            "limits": run.budget_limits,
            "cancel_revision": run.cancel_revision,
            "disposition": run.disposition,
            "terminal_reason": run.terminal_reason,
            "waiting_checkpoint": run.waiting_checkpoint,
            "waiting_correlation": run.waiting_correlation,
        }
        findings.extend(compare_with_stored(result, stored))
    return result, findings
