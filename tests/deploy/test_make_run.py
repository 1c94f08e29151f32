"""``make run`` as the README gives it: the port is the user's choice (``PORT=...``)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.servers import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _serve_line(*args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "run", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return next(line for line in done.stdout.splitlines() if "serve_embedded" in line)


def test_make_run_serves_on_port_8000_by_default() -> None:
    assert _serve_line().endswith("serve_embedded 127.0.0.1:8000")


def test_make_run_takes_another_port() -> None:
    """Someone whose port 8000 is taken must not have to edit the Makefile."""
    assert _serve_line("PORT=8730").endswith("serve_embedded 127.0.0.1:8730")


def test_make_run_seeds_quietly_and_only_once(tmp_path: Path) -> None:
    """``make run``'s ``seed_demo`` prints what it made, not a wall of JSON log lines of the
    demo runs it drives; run again (the second ``make run``) it adds no users or runs."""
    env = {k: v for k, v in os.environ.items() if k != "FIELDOPS_LOG_LEVEL"}
    env |= {
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "FIELDOPS_VAR_DIR": str(tmp_path),
        "FIELDOPS_EXECUTION": "inprocess",
        "DJANGO_SETTINGS_MODULE": "fieldops.settings",
    }

    def manage(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done

    manage("migrate", "--noinput", "-v0")
    first = manage("seed_demo")
    assert first.stdout.count("demo run ") == 4, first.stdout
    assert '"level": "INFO"' not in first.stderr, first.stderr[:2000]
    again = manage("seed_demo")
    assert "demo run " not in again.stdout
    assert "none (already present)" in again.stdout


def test_a_first_seed_interrupted_after_the_users_still_gets_its_demo_runs(db: Any) -> None:
    """The demo runs are made while the demo tenant has none: a first ``seed_demo`` stopped
    after it made the users (Ctrl-C during ``make run``'s first start) still gets them on
    the next start, and a seed after that adds none."""
    from django.core.management import call_command

    from runs.models import Run
    from sim.setup import DEMO_TENANT, seed

    seed(demo_users=True)  # what the interrupted first seed_demo had stored
    assert not Run.objects.filter(tenant=DEMO_TENANT).exists()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert out.getvalue().count("demo run ") == 4, out.getvalue()
    assert Run.objects.filter(tenant=DEMO_TENANT).count() == 4
    again = io.StringIO()
    call_command("seed_demo", stdout=again)
    assert "demo run " not in again.getvalue()
    assert Run.objects.filter(tenant=DEMO_TENANT).count() == 4
