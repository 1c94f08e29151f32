"""Metrics across gunicorn workers: with PROMETHEUS_MULTIPROC_DIR, runs started over HTTP
on several web workers are counted by the worker that served them, and a scrape answered
by any worker shows the sum."""

from __future__ import annotations

import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from runs.models import Run
from tests.deploy.servers import Browser, WebProcess, run_id_of, shared_database_url

pytestmark = [pytest.mark.postgres]

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
TOKEN = "ops-token-for-the-metrics-test"
STARTED = ("fieldops_transitions_total", (("event_type", "run.started"), ("state", "OBSERVING")))


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _started_in(path: Path) -> float:
    """run.started as counted in one process's file."""
    return sum(
        value
        for key, value, *_ in MmapedDict.read_all_values_from_file(str(path))
        if '"run.started"' in key and key.startswith('["fieldops_transitions"')
    )


def test_a_scrape_on_any_gunicorn_worker_sums_what_every_worker_counted(
    transactional_db: Any, operator: Any, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "metrics"
    argv = [sys.executable, "-m", "gunicorn", "fieldops.wsgi:application"]
    argv += ["--bind", "127.0.0.1:{port}", "--workers", "3", "--timeout", "60"]
    server = WebProcess(
        argv,
        {
            "FIELDOPS_LOG_LEVEL": "WARNING",
            "FIELDOPS_EXECUTION": "inprocess",
            "DATABASE_URL": shared_database_url(),
            "FIELDOPS_OPS_TOKEN": TOKEN,
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        },
        tmp_path / "web.log",
    ).start(timeout=40)
    try:
        browsers = [Browser(server.url) for _ in range(6)]
        for browser in browsers:
            browser.login("operator", "pw-operator")
        answers: list[Any] = []

        def start(browser: Browser) -> None:
            answers.append(browser.post("/runs/start/", START_FORM))

        threads = [threading.Thread(target=start, args=(b,)) for b in browsers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert [a.status for a in answers] == [302] * 6, server.log()
        run_ids = {run_id_of(a) for a in answers}
        assert Run.objects.filter(pk__in=run_ids, state="WAITING_HUMAN").count() == 6

        # The six starts were counted by more than one web worker ...
        files = sorted(metrics_dir.glob("counter_*.db"))
        counted = [_started_in(f) for f in files]
        assert sum(counted) == 6, counted
        assert len([c for c in counted if c]) >= 2, (counted, server.log())
        # ... and every scrape, whichever worker answers it, shows all six.
        for _ in range(6):
            samples = _scrape(server.url)
            assert samples[STARTED] == 6
            assert samples[("fieldops_runs", (("state", "WAITING_HUMAN"),))] == 6
    finally:
        server.stop()
