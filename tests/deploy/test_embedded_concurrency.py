"""The embedded default takes concurrent users (issue 14, item 7).

``make run`` as a user gets it: a fresh SQLite database, ``migrate``, ``seed_demo`` (the
demo users), ``serve_embedded`` (in-process execution and the sweeper thread). People act
at once over HTTP from their own browsers: an operator starting and cancelling runs while
an approver approves, then two approvers deciding the same checkpoint at the same moment.
Writers must queue: no 500, no ``database is locked``, and of two simultaneous approvals
exactly one is recorded while the other gets the page's normal refusal (409).

The server has its own database, so this runs the same on either suite pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sim.demo import DEMO_PASSWORD
from tests.deploy.servers import ROOT, Browser, Response, WebProcess, run_id_of
from tests.helpers import together

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
CHECKPOINT_LINK = re.compile(r'href="/approvals/((?!history/)[^/"]+)/"')
SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[WebProcess]:
    """``make run`` on a fresh database: migrate, seed_demo, serve_embedded."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "FIELDOPS_VAR_DIR": str(tmp_path),
        "FIELDOPS_EXECUTION": "inprocess",
        "FIELDOPS_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "fieldops.settings",
    }
    manage = [sys.executable, "manage.py"]
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        done = subprocess.run(
            manage + command,
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
    server = WebProcess(
        [*manage, "serve_embedded", "127.0.0.1:{port}"], env, tmp_path / "server.log"
    )
    server.start()
    yield server
    server.stop()


class Recorder:
    """Every answer each person got: (who, what, status)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answers: list[tuple[str, str, int]] = []

    def note(self, who: str, what: str, response: Response) -> Response:
        with self.lock:
            self.answers.append((who, what, response.status))
        return response

    def statuses(self, what: str) -> list[int]:
        return [status for _, w, status in self.answers if w == what]


def _signed_in(server: WebProcess, username: str) -> Browser:
    browser = Browser(server.url)
    browser.login(username, DEMO_PASSWORD)
    return browser


def _approve(browser: Browser, checkpoint_id: str, record: Recorder, who: str) -> int:
    page = browser.get(f"/approvals/{checkpoint_id}/")
    seen = SEEN_HASH.search(page.body)
    if seen is None:  # already decided, or the run moved on: nothing to approve here
        return page.status
    response = browser.post(
        f"/approvals/{checkpoint_id}/decide/",
        {"verdict": "approve", "seen_hash": seen.group(1), "reason": "matches the manual"},
    )
    return record.note(who, "approve", response).status


def test_two_people_writing_at_once_queue_instead_of_failing(embedded: WebProcess) -> None:
    record = Recorder()
    operator = _signed_in(embedded, "operator")
    approver = _signed_in(embedded, "approver")
    done = threading.Event()

    def operate() -> list[str]:
        started = []
        try:
            for _ in range(5):
                response = record.note(
                    "operator", "start", operator.post("/runs/start/", START_FORM)
                )
                if response.status == 302:
                    started.append(run_id_of(response))
            for run_id in started[:2]:
                response = operator.post(f"/runs/{run_id}/cancel/", {"reason": "duplicate"})
                record.note("operator", "cancel", response)
        finally:
            done.set()
        return started

    def approve_what_appears() -> int:
        approved = 0
        while True:
            finished = done.is_set()
            queue = record.note("approver", "queue", approver.get("/approvals/"))
            for checkpoint_id in dict.fromkeys(CHECKPOINT_LINK.findall(queue.body)):
                approved += _approve(approver, checkpoint_id, record, "approver") == 302
            if finished:
                return approved
            time.sleep(0.05)

    started, approved = together(operate, approve_what_appears)

    assert 500 not in [status for _, _, status in record.answers], record.answers
    assert record.statuses("start") == [302] * 5
    # A cancel can meet a run the approver just completed: that is the page's 409.
    assert set(record.statuses("cancel")) <= {302, 409}
    assert set(record.statuses("approve")) <= {302, 409}
    assert approved >= 1 and len(started) == 5
    assert "database is locked" not in embedded.log()

    # Two approvers decide the same checkpoint at the same moment, three times over.
    other = _signed_in(embedded, "lead")
    for round_ in range(3):
        response = operator.post("/runs/start/", START_FORM)
        assert response.status == 302, response.status
        # The run's page as an approver sees it: it links the checkpoint (an operator's
        # names it, without a link to a page that would answer the operator 403).
        page = approver.follow(response)
        checkpoint_id = CHECKPOINT_LINK.search(page.body)
        assert checkpoint_id, f"round {round_}: the new run shows no checkpoint"
        hashes = [
            SEEN_HASH.search(b.get(f"/approvals/{checkpoint_id.group(1)}/").body)
            for b in (approver, other)
        ]
        assert all(hashes)
        statuses = together(
            *[
                _post_decision(browser, checkpoint_id.group(1), found.group(1), record, name)
                for browser, found, name in zip(
                    (approver, other), hashes, ("approver", "lead"), strict=True
                )
            ]
        )
        assert sorted(statuses) == [302, 409], f"round {round_}: {statuses}"

    assert "database is locked" not in embedded.log()
    assert " 500 " not in embedded.log()


def _post_decision(
    browser: Browser, checkpoint_id: str, seen_hash: str, record: Recorder, who: str
) -> Callable[[], int]:
    def post() -> int:
        response = browser.post(
            f"/approvals/{checkpoint_id}/decide/",
            {"verdict": "approve", "seen_hash": seen_hash, "reason": "same moment"},
        )
        return record.note(who, "race", response).status

    return post


def test_a_fresh_start_prints_no_static_files_warning(embedded: WebProcess) -> None:
    """A fresh clone has no ``staticfiles/`` (no ``collectstatic``: whitenoise serves the
    source tree). ``make run`` must not greet the user with a warning about it."""
    browser = Browser(embedded.url)
    assert browser.get("/login/").status == 200
    assert browser.get("/static/fieldops.css").status == 200
    assert "No directory at" not in embedded.log()
    assert "UserWarning" not in embedded.log()
