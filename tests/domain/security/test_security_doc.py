"""docs/security.md names the tests behind its promises: every test file it names exists,
and every security test module is named there (so the page cannot fall behind)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "security.md").read_text()


def test_every_test_file_the_page_names_exists():
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", DOC))
    assert len(named) > 15
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


def test_every_security_test_module_is_named_on_the_page():
    modules = sorted(p.name for p in (ROOT / "tests" / "security").glob("test_*.py"))
    missing = [m for m in modules if m not in DOC]
    assert missing == []


def test_the_page_states_what_is_not_promised_and_how_to_report():
    for heading in (
        "## What FieldOps promises",
        "## What FieldOps does not promise",
        "## How each promise is tested",
        "## Reporting a security problem",
    ):
        assert heading in DOC
    for phrase in ("No exactly-once", "Synthetic effects only", ".bandit-baseline.json"):
        assert phrase in DOC
