"""The production web process refuses to start without collectstatic's output.

The production settings serve hashed static files through a manifest storage, which needs
the manifest ``collectstatic`` writes: without it gunicorn started, answered ``/healthz``,
and every page (the error pages too) was a 500 "Missing staticfiles manifest entry". Now a
worker that finds no manifest stops at boot, saying what to run, and gunicorn exits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.servers import PRODUCTION, gunicorn, shared_database_url

pytestmark = [pytest.mark.postgres]


def test_gunicorn_without_collected_static_files_exits_saying_what_to_run(
    transactional_db: Any, tmp_path: Path
) -> None:
    empty = tmp_path / "never-collected"
    empty.mkdir()
    web = gunicorn(
        {**PRODUCTION, "DATABASE_URL": shared_database_url(), "FIELDOPS_STATIC_ROOT": str(empty)},
        tmp_path / "web.log",
    )
    try:
        with pytest.raises(RuntimeError, match="exited early"):
            web.start(ready="/healthz")
        assert web.process is not None
        web.process.wait(timeout=30)
    finally:
        web.stop()  # a web process that did start (the test failing) is not left running
    assert web.process.returncode != 0
    log = web.log()
    assert "collectstatic" in log, log[-3000:]
    assert str(empty / "staticfiles.json") in log, log[-3000:]


def test_gunicorn_with_collected_static_files_serves_pages(
    transactional_db: Any, tmp_path: Path, collected_static: Path
) -> None:
    web = gunicorn(
        {
            **PRODUCTION,
            "DATABASE_URL": shared_database_url(),
            "FIELDOPS_STATIC_ROOT": str(collected_static),
        },
        tmp_path / "web.log",
    ).start(ready="/healthz")
    try:
        import urllib.request

        request = urllib.request.Request(
            f"{web.url}/login/", headers={"X-Forwarded-Proto": "https", "Host": "127.0.0.1"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            page = response.read().decode()
        assert response.status == 200
        assert "/static/fieldops." in page  # the hashed name from the manifest
    finally:
        web.stop()
