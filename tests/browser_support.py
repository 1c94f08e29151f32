"""Browser support shared by every browser test: one Chromium for the whole session.

Playwright's sync API runs one event loop per thread, so there must be exactly one
``sync_playwright()`` per test session: every browser test uses the ``browser`` fixture.
pytest-playwright is not used; the machine's ``/usr/bin/chromium`` is launched headless.
Playwright's loop also makes Django's async-safety check fire for ORM calls made by the
tests themselves, so it is relaxed here (tests only, never in settings).

Every page is watched for Content-Security-Policy violations (``watch_csp``): a test whose
pages needed anything the policy blocks (an inline script or style, eval, another origin)
fails, so the whole browser suite shows the console works under the policy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"  # repo root
# How Chromium words a violation in the console ("Refused to apply inline style because it
# violates the following Content Security Policy directive: ...").
CSP_MARKERS = ("Content Security Policy", "Content-Security-Policy")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from tests.conftest import require_service

    require_service("Chromium", os.path.exists(CHROMIUM), f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


def watch_csp(page: Any, found: list[str]) -> Any:
    """Record on ``found`` every Content-Security-Policy violation Chromium reports."""

    def note(text: str) -> None:
        if any(marker in text for marker in CSP_MARKERS):
            found.append(f"{page.url}: {text}")

    page.on("console", lambda message: note(message.text))
    page.on("pageerror", lambda error: note(str(error)))
    return page


@pytest.fixture
def csp_violations() -> Iterator[list[str]]:
    """The violations seen by this test's pages; the test fails if there are any."""
    found: list[str] = []
    yield found
    assert not found, "Content-Security-Policy violations:\n" + "\n".join(found)


@pytest.fixture
def new_page(browser: Any, csp_violations: list[str]) -> Iterator[Any]:
    """A factory of fresh pages (each its own context: its own cookies and session)."""
    contexts = []

    def make() -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(15_000)
        contexts.append(context)
        return watch_csp(context.new_page(), csp_violations)

    yield make
    for context in contexts:
        context.close()


def login(page: Any, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"pw-{username}")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
