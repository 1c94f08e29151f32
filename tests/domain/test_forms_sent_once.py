"""Every form that changes something is sent once: a double click or a quick second Enter
must not post twice (a second discovery, a second API token, a second simulation).

A plain form says so with ``data-submit-once`` (static/fieldops.js disables its buttons
after the first submit); an htmx form with ``hx-disabled-elt``, which htmx keeps disabled
while the request is out. Signing in and out are the only exceptions: a second post of
either changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
FORM_TAG = re.compile(r"<form\b[^>]*>", re.S)
EXEMPT = ("{% url 'login' %}", "{% url 'logout' %}")


def _post_forms() -> list[tuple[str, str]]:
    forms = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for tag in FORM_TAG.findall(path.read_text()):
            if re.search(r'method="post"', tag, re.I):
                forms.append((path.relative_to(TEMPLATES).as_posix(), tag))
    return forms


def test_the_scan_finds_the_console_s_post_forms() -> None:
    names = {name for name, _ in _post_forms()}
    assert {"api/tokens.html", "catalog/servers.html", "runs/replay_simulation.html"} <= names


def test_every_form_that_changes_something_is_sent_once() -> None:
    unguarded = [
        f"{name}: {' '.join(tag.split())[:120]}"
        for name, tag in _post_forms()
        if not any(url in tag for url in EXEMPT)
        and "data-submit-once" not in tag
        and "hx-disabled-elt" not in tag
    ]
    assert unguarded == []
