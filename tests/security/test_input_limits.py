"""Every form field whose text is recorded declares, as its maxlength, the limit its service
enforces: the browser stops where the service would refuse, and a scripted post beyond it
is refused by the service (never cut). A new reason field without a known limit fails here."""

from __future__ import annotations

import re
from pathlib import Path

from api import tokens
from approvals import domain as approvals
from catalog import servers
from catalog import services as catalog
from catalog.domain import lifecycle
from operations import saved_views
from operations.models import REASON_MAX as OPERATION_REASON_MAX
from runs import services as runs

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
FIELD = re.compile(r"<(?:input|textarea)\b[^>]*>")

# (template, the field's id up to its first template tag) -> the service's limit
LIMITS: dict[tuple[str, str], int] = {
    ("runs/detail.html", "cancel-reason"): runs.REASON_MAX,
    ("runs/detail.html", "budget-reason"): runs.REASON_MAX,
    ("runs/list.html", "bulk-reason"): runs.REASON_MAX,
    ("runs/runbook_detail.html", "own-reason-"): runs.REASON_MAX,
    ("runs/runbook_detail.html", "gate-reason-"): catalog.MAX_REASON,
    ("operations/preview.html", "op-reason"): OPERATION_REASON_MAX,
    ("operations/_save_view.html", "save-view-name"): saved_views.NAME_MAX,
    ("api/tokens.html", "token-name"): tokens.NAME_MAX,
    ("catalog/_admit_form.html", "admit-reason"): catalog.MAX_REASON,
    ("catalog/_admit_form.html", "expiry"): lifecycle.MAX_EXPIRY_CHARS,
    ("catalog/_lifecycle_forms.html", "reason-"): catalog.MAX_REASON,
    ("catalog/_drifts.html", "drift-reason-"): catalog.MAX_REASON,
    ("catalog/contract.html", "gate-reason"): catalog.MAX_REASON,
    ("catalog/contract.html", "tenant-gate-reason"): catalog.MAX_REASON,
    ("catalog/retire.html", "retire-reason"): catalog.MAX_REASON,
    ("catalog/servers.html", "s-env"): servers.MAX_ENV_TEXT,
    ("catalog/retire.html", "withdraw-reason"): catalog.MAX_REASON,
    ("approvals/detail.html", "decision-reason"): approvals.MAX_REASON_CHARS,
    ("approvals/detail.html", "answer"): approvals.MAX_ANSWER_CHARS,
}


def _fields() -> dict[tuple[str, str], str]:
    """Every input and textarea of the templates by (template, id up to a template tag)."""
    found = {}
    for path in TEMPLATES.rglob("*.html"):
        for tag in FIELD.findall(path.read_text(encoding="utf-8")):
            element_id = re.search(r'\bid="([^"{]*)', tag)
            if element_id:
                found[(str(path.relative_to(TEMPLATES)), element_id.group(1))] = tag
    return found


def test_each_recorded_fields_maxlength_is_its_services_limit() -> None:
    fields = _fields()
    for (template, element_id), limit in LIMITS.items():
        tag = fields[(template, element_id)]
        assert f'maxlength="{limit}"' in tag, (template, element_id, tag)
    # A reason field not listed above would have no checked limit.
    reasons = {key for key, tag in fields.items() if 'name="reason"' in tag}
    assert reasons <= set(LIMITS), reasons - set(LIMITS)
