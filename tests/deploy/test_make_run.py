"""``make run`` as the README gives it: the port is the user's choice (``PORT=...``)."""

from __future__ import annotations

import shutil
import subprocess

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
