"""Content-Security-Policy: on every response, no inline script or style, no other origin.

The header is checked on pages, partials, JSON, static files and every error page; every
template and every page the crawl renders is checked for what the policy would block.
The browser suite (tests/browser, tests/catalog/test_browser.py) fails on any violation
Chromium reports, so every page is also shown to work under the policy.
"""

from __future__ import annotations

import re
import uuid
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from fieldops.csp import HEADER, POLICY
from tests.security.policy import POLICY as ROUTES
from tests.security.policy import crawl_objects, url_kwargs
from tests.security.routes import send
from tests.security.world import World

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def test_the_policy_allows_no_inline_code_no_eval_and_no_other_origin():
    policy = directives(POLICY)
    for name in ("default-src", "script-src", "style-src", "img-src", "connect-src"):
        assert policy[name] == ["'self'"], name
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["form-action"] == ["'self'"]
    for forbidden in ("'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:", "data:"):
        assert forbidden not in POLICY.split(), forbidden


def test_every_kind_of_response_carries_the_policy(sworld: World, settings: Any):
    operator = sworld.client("operator")
    anonymous = Client(raise_request_exception=False)
    strict = sworld.client("operator", enforce_csrf_checks=True)
    run = sworld.run("waiting")
    responses = {
        "login page": anonymous.get(reverse("login")),
        "runs list": operator.get(reverse("runs-list")),
        "runs list partial": operator.get(reverse("runs-list"), headers={"hx-request": "true"}),
        "run page": operator.get(reverse("runs-detail", args=[run.pk])),
        "health JSON": anonymous.get(reverse("health")),
        "unsigned callback 401": anonymous.post(reverse("api-callback"), {}),
        "static file": anonymous.get("/static/fieldops.css"),
        "favicon": anonymous.get("/favicon.ico"),
        "404": operator.get(reverse("runs-detail", args=[uuid.uuid4()])),
        "403 role": sworld.client("approver").post(reverse("runs-cancel", args=[run.pk])),
        "403 CSRF": strict.post(reverse("runs-cancel", args=[run.pk]), {"reason": "x"}),
        "400 charset": strict.generic(
            "POST",
            reverse("runs-cancel", args=[run.pk]),
            b"reason=x",
            content_type="application/x-www-form-urlencoded; charset=utf-16",
        ),
        "405": operator.get(reverse("runs-cancel", args=[run.pk])),
    }
    for where, response in responses.items():
        assert response.get(HEADER) == POLICY, where
    assert responses["static file"].status_code == 200
    assert responses["favicon"].status_code == 200


def test_a_server_error_page_carries_the_policy(sworld: World, monkeypatch: Any):
    from runs.console import runs_selectors as selectors

    def broken(run: Any) -> Any:
        raise RuntimeError("forced failure")

    monkeypatch.setattr(selectors, "run_export", broken)
    client = sworld.client("operator", raise_request_exception=False)
    response = client.get(reverse("runs-export", args=[sworld.run("completed").pk]))
    assert response.status_code == 500
    assert response[HEADER] == POLICY
    assert "500 · Something failed on our side" in response.content.decode()
    assert_nothing_the_policy_blocks(response.content.decode(), "500 page")


class Blocked(HTMLParser):
    """Collect what the policy would block: inline scripts and handlers, style blocks and
    attributes, javascript: URLs and resources from another origin."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script":
            self._in_script = "src" not in values
        if tag == "style":
            self.found.append("<style> block")
        for name, value in attrs:
            if name == "style":
                self.found.append(f"style attribute on <{tag}>")
            if name.startswith("on"):
                self.found.append(f"{name} handler on <{tag}>")
            if name in ("href", "src", "action") and value:
                if value.strip().lower().startswith("javascript:"):
                    self.found.append(f"javascript: URL on <{tag}>")
                if re.match(r"^(https?:)?//", value.strip()) and name != "href":
                    self.found.append(f"{name} from another origin on <{tag}>: {value}")
        if tag == "link" and re.match(r"^(https?:)?//", values.get("href") or ""):
            self.found.append(f"<link> to another origin: {values['href']}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.found.append("inline <script>")


def assert_nothing_the_policy_blocks(html: str, where: str) -> None:
    parser = Blocked()
    parser.feed(html)
    assert not parser.found, f"{where}: {parser.found}"


@pytest.mark.parametrize(
    "template", sorted(str(p.relative_to(TEMPLATES)) for p in TEMPLATES.rglob("*.html"))
)
def test_no_template_carries_inline_script_or_style(template: str):
    source = (TEMPLATES / template).read_text()
    source = re.sub(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}", "", source, flags=re.S)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", source), "inline <script>"
    assert "<style" not in source, "<style> block"
    assert not re.search(r"\sstyle\s*=", source), "style attribute"
    assert not re.search(r"\son[a-z]+\s*=", source), "inline event handler"
    assert "javascript:" not in source.lower()


def test_every_page_the_crawl_renders_needs_nothing_the_policy_blocks(sworld: World):
    clients = {p: sworld.client(p) for p in ("operator", "approver", "catalog_admin")}
    pages = 0
    for name in sorted(n for n, r in ROUTES.items() if "GET" in r.may):
        rule = ROUTES[name]
        for obj in crawl_objects(sworld, rule.objects)[:3]:
            for variant in rule.variants:
                for principal, client in clients.items():
                    response = send(
                        client,
                        "GET",
                        name,
                        url_kwargs(obj),
                        query=dict(variant.query),
                        headers=dict(variant.headers),
                    )
                    if response.get("Content-Type", "").startswith("text/html"):
                        assert response[HEADER] == POLICY
                        where = f"GET {name}[{obj.label}] {variant.name} as {principal}"
                        assert_nothing_the_policy_blocks(response.content.decode(), where)
                        pages += 1
    assert pages > 100
