"""Fixtures for deployment tests: the broker this process publishes to, Redis, users."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings

from tests.conftest import require_service
from tests.deploy.servers import REDIS_URL, ClosedPort


@contextmanager
def broker_at(url: str, queue: str | None = None) -> Iterator[None]:
    """Point this process's Celery app at ``url`` (and ``queue``), then restore it.

    Celery reads a ``CELERY_BROKER_URL`` environment variable before its configured
    ``broker_url``, so that is switched too. The connection pool and the producer pool are
    dropped both ways, so the next publish connects to the new broker.
    """
    from fieldops.celery import app

    def reset(broker_url: str | None, default_queue: str) -> None:
        if broker_url is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = broker_url
        app.conf.update(
            broker_url=broker_url or django_settings.CELERY_BROKER_URL,
            task_default_queue=default_queue,
        )
        app._pool = None
        app.amqp._producer_pool = None

    previous = os.environ.get("CELERY_BROKER_URL")
    reset(url, queue or django_settings.CELERY_TASK_DEFAULT_QUEUE)
    try:
        yield
    finally:
        reset(previous, django_settings.CELERY_TASK_DEFAULT_QUEUE)


@pytest.fixture
def closed_port() -> Iterator[ClosedPort]:
    port = ClosedPort()
    yield port
    port.close()


@pytest.fixture
def broker_down(settings: Any, closed_port: ClosedPort) -> Iterator[str]:
    """Celery execution with the broker refusing connections (Redis is down)."""
    settings.FIELDOPS_EXECUTION = "celery"
    url = f"redis://127.0.0.1:{closed_port.port}/0"
    with broker_at(url):
        yield url


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping())
    except redis.RedisError:
        return False


@pytest.fixture
def redis_db() -> Iterator[redis.Redis]:
    """This suite's own Redis database (FIELDOPS_TEST_REDIS_URL)."""
    require_service("Redis", _redis_up(), f"the broker is expected at {REDIS_URL}")
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def queue_name(redis_db: redis.Redis) -> Iterator[str]:
    """A queue nobody else consumes; its lists (one per priority step) are removed
    afterwards."""
    from runs.engine.executor import broker_lists

    name = f"fieldops_test_{uuid.uuid4().hex[:10]}"
    yield name
    redis_db.delete(
        *broker_lists(name), f"_kombu.binding.{name}", f"_kombu.binding_permanent.{name}"
    )
