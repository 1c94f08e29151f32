"""Database connections as configured by ``fieldops/settings.py::database_from_url``.

PostgreSQL: lock waits and idle transactions are bounded on the app's own connections
(issue 14, item 4). SQLite: the embedded default queues concurrent writers (item 7; the
concurrency itself is shown over HTTP in test_embedded_concurrency.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.utils import ConnectionHandler

from fieldops.settings import database_from_url
from tests.deploy.servers import ROOT, shared_database_url


def _setting(cursor: Any, name: str) -> str:
    cursor.execute("SELECT setting FROM pg_settings WHERE name = %s", [name])
    return str(cursor.fetchone()[0])


@pytest.fixture
def row_locked_elsewhere(db: Any) -> Iterator[int]:
    """A committed row held FOR UPDATE by another session (a paused worker, say)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id) FROM django_content_type")
        row_id = int(cursor.fetchone()[0])
    db_settings = connection.settings_dict
    holder = psycopg.connect(
        host=db_settings["HOST"] or "127.0.0.1",
        port=int(db_settings["PORT"] or 5432),
        user=db_settings["USER"],
        dbname=db_settings["NAME"],
    )
    holder.execute("SELECT id FROM django_content_type WHERE id = %s FOR UPDATE", [row_id])
    yield row_id
    holder.rollback()
    holder.close()


@pytest.mark.postgres
def test_the_app_connection_carries_the_configured_timeouts(db: Any) -> None:
    with connection.cursor() as cursor:
        assert _setting(cursor, "lock_timeout") == str(settings.FIELDOPS_LOCK_TIMEOUT_MS)
        assert _setting(cursor, "idle_in_transaction_session_timeout") == str(
            settings.FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS
        )
    if "FIELDOPS_LOCK_TIMEOUT_MS" not in os.environ:
        assert settings.FIELDOPS_LOCK_TIMEOUT_MS == 5000
    if "FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS" not in os.environ:
        assert settings.FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS == 60000
    # The prepared-statement option is kept beside the new ones.
    assert connection.settings_dict["OPTIONS"]["prepare_threshold"] in (5, None)


@pytest.mark.postgres
def test_a_statement_waiting_on_a_row_lock_gives_up_after_the_lock_timeout(
    row_locked_elsewhere: int,
) -> None:
    limit = settings.FIELDOPS_LOCK_TIMEOUT_MS / 1000
    started = time.monotonic()
    with (
        pytest.raises(OperationalError) as raised,
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "SELECT id FROM django_content_type WHERE id = %s FOR UPDATE",
            [row_locked_elsewhere],
        )
    waited = time.monotonic() - started
    assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
    assert limit * 0.9 <= waited < limit + 3, f"waited {waited:.2f}s for a {limit}s limit"


@pytest.fixture
def configured(db: Any) -> Iterator[Any]:
    """A connection of the test database built by database_from_url with short limits."""
    entry = database_from_url(
        shared_database_url(), lock_timeout_ms=300, idle_in_transaction_timeout_ms=500
    )
    handler = ConnectionHandler({"default": entry})
    wrapper = handler["default"]
    yield wrapper
    wrapper.close()


@pytest.mark.postgres
def test_configured_limits_apply_to_lock_waits_and_idle_transactions(
    configured: Any, row_locked_elsewhere: int
) -> None:
    with configured.cursor() as cursor:
        assert _setting(cursor, "lock_timeout") == "300"
        assert _setting(cursor, "idle_in_transaction_session_timeout") == "500"
    # (``configured`` is not one of django.db.connections: its transactions are explicit.)
    configured.set_autocommit(False)
    started = time.monotonic()
    with pytest.raises(OperationalError) as raised, configured.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM django_content_type WHERE id = %s FOR UPDATE",
            [row_locked_elsewhere],
        )
    assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
    assert time.monotonic() - started < 2
    configured.rollback()
    # Sit inside a transaction doing nothing: the server ends the session (releasing any
    # locks it held), so the next statement finds the connection gone.
    with pytest.raises(DatabaseError) as ended, configured.cursor() as cursor:
        cursor.execute("SELECT 1")
        time.sleep(1.0)
        cursor.execute("SELECT 1")
    assert isinstance(ended.value.__cause__, psycopg.errors.IdleInTransactionSessionTimeout)


def _settings_in_subprocess(**env: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import json; from fieldops import settings as s; "
        "print(json.dumps(s.DATABASES['default']['OPTIONS']))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": "postgres://u@db.invalid/x", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_timeouts_come_from_the_environment() -> None:
    done = _settings_in_subprocess(
        FIELDOPS_LOCK_TIMEOUT_MS="1234", FIELDOPS_IDLE_IN_TRANSACTION_TIMEOUT_MS="0"
    )
    assert done.returncode == 0, done.stderr
    options = json.loads(done.stdout)
    assert options["options"] == "-c lock_timeout=1234 -c idle_in_transaction_session_timeout=0"
    bad = _settings_in_subprocess(FIELDOPS_LOCK_TIMEOUT_MS="5s")
    assert bad.returncode != 0
    assert "FIELDOPS_LOCK_TIMEOUT_MS must be a whole number of milliseconds" in bad.stderr


def test_sqlite_queues_writers_wal_immediate_and_a_busy_timeout(
    tmp_path: Any, django_db_blocker: Any
) -> None:
    entry = database_from_url(f"sqlite:///{tmp_path}/db.sqlite3")
    options = entry["OPTIONS"]
    assert isinstance(options, dict)
    assert options["transaction_mode"] == "IMMEDIATE"
    assert options["timeout"] >= 5
    handler = ConnectionHandler({"default": entry})
    wrapper = handler["default"]
    try:
        with django_db_blocker.unblock(), wrapper.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] == options["timeout"] * 1000
    finally:
        wrapper.close()


@pytest.mark.parametrize(
    ("url", "name"),
    [("sqlite://:memory:", ":memory:"), ("sqlite:///:memory:", ":memory:")],
)
def test_sqlite_memory_urls_name_an_in_memory_database(url: str, name: str) -> None:
    assert database_from_url(url)["NAME"] == name


def test_a_sqlite_url_without_a_path_is_the_embedded_file_and_its_folder_is_made(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """On a fresh clone ``var/`` does not exist yet; SQLite cannot create a folder."""
    from fieldops import settings

    monkeypatch.setattr(settings, "VAR_DIR", tmp_path / "var")
    entry = database_from_url("sqlite://")
    assert entry["NAME"] == str(tmp_path / "var" / "db.sqlite3")
    assert (tmp_path / "var").is_dir()
