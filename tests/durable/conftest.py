"""Real Celery worker processes on their own Redis database and queue, against the test
PostgreSQL database. Workers are stopped before the test database is dropped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection

from tests.conftest import require_service

REDIS_URL = os.environ.get("FIELDOPS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
ROOT = Path(__file__).resolve().parents[2]


def redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping())
    except redis.RedisError:
        return False


@dataclass
class Cluster:
    queue: str
    database_url: str
    drill_dir: str
    lease_seconds: int = 3
    log_dir: Path | None = None  # set: each worker's output goes to <log_dir>/<name>.log
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_worker(self, *, concurrency: int = 1, **env: str) -> subprocess.Popen[bytes]:
        name = f"w{len(self.workers)}-{uuid.uuid4().hex[:6]}@fieldops-test"
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "fieldops.settings",
            "DATABASE_URL": self.database_url,
            "CELERY_BROKER_URL": REDIS_URL,
            "FIELDOPS_QUEUE": self.queue,
            "FIELDOPS_EXECUTION": "celery",
            "FIELDOPS_LEASE_SECONDS": str(self.lease_seconds),
            "FIELDOPS_DRILL_DIR": self.drill_dir,
            "FIELDOPS_LOG_LEVEL": "WARNING",
            **env,
        }
        output = (
            (self.log_dir / f"{name.split('@')[0]}.log").open("ab")
            if self.log_dir
            else subprocess.DEVNULL
        )
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "fieldops",
                "worker",
                "-Q",
                self.queue,
                "-n",
                name,
                "--concurrency",
                str(concurrency),
                "--pool",
                "prefork",
                "-l",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT if self.log_dir else subprocess.DEVNULL,
            start_new_session=True,
        )
        if self.log_dir:
            output.close()  # the child holds its own copy
        self.workers.append(process)
        self._wait_ready(name)
        return process

    def _wait_ready(self, name: str) -> None:
        from fieldops.celery import app

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if app.control.ping(destination=[name], timeout=0.5):
                return
        raise RuntimeError(f"worker {name} did not answer a ping")

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)

    def stop_all(self) -> None:
        for process in self.workers:
            self.stop(process)


@pytest.fixture
def cluster(transactional_db, world, settings, tmp_path) -> Iterator[Cluster]:
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "worker processes share the database of record over the network",
    )
    require_service("Redis", redis_up(), f"Celery needs its broker at {REDIS_URL}")
    from fieldops.celery import app

    queue = f"fieldops_test_{uuid.uuid4().hex[:8]}"
    settings.FIELDOPS_EXECUTION = "celery"
    settings.FIELDOPS_LEASE_SECONDS = 3
    settings.FIELDOPS_STUCK_AFTER_SECONDS = 2
    app.conf.update(broker_url=REDIS_URL, task_default_queue=queue)
    app._pool = None
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    c = Cluster(queue=queue, database_url=url, drill_dir=str(tmp_path / "drills"))
    try:
        yield c
    finally:
        c.stop_all()
        redis.Redis.from_url(REDIS_URL).flushdb()
        app.conf.update(
            broker_url=django_settings.CELERY_BROKER_URL,
            task_default_queue=django_settings.CELERY_TASK_DEFAULT_QUEUE,
        )
        app._pool = None
