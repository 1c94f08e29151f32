"""Markup rules for the regions htmx refreshes on a timer (every template, so a new region
is held to them too)."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# An opening tag that polls: hx-trigger="every Ns".
POLLING_TAG = re.compile(r"<[a-z]+\b[^>]*\bhx-trigger=\"every [^\"]+\"[^>]*>", re.S)


def polling_tags() -> list[tuple[str, str]]:
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for tag in POLLING_TAG.findall(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(TEMPLATES)), tag))
    return found


def test_the_scan_finds_the_refreshing_regions() -> None:
    names = {name for name, _ in polling_tags()}
    assert {"runs/detail.html", "approvals/queue.html", "operations/detail.html"} <= names


def test_a_region_replaced_whole_is_not_itself_a_live_region() -> None:
    # A screen reader does not announce a live region that is replaced, and may read the
    # whole new node on every refresh: changes are said once by base.html's
    # #live-announcer (static/fieldops.js), which is never swapped.
    offenders = [
        (name, tag)
        for name, tag in polling_tags()
        if 'hx-swap="outerHTML"' in tag and "aria-live" in tag
    ]
    assert offenders == []
