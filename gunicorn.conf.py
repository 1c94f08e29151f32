"""gunicorn's settings for the FieldOps web process. Every documented command names this
file (`gunicorn -c /app/gunicorn.conf.py fieldops.wsgi:application`): without `-c`
gunicorn reads `./gunicorn.conf.py` only when started in the directory holding it, and a
web process started anywhere else ran silently without it; with a `-c` path that does
not exist gunicorn refuses to start.

Shutdown: on SIGTERM each worker finishes the request it is serving (up to
``graceful_timeout``), then exits. Exiting used to take each worker 1.3-1.7 s of CPU after
its last request: CPython's teardown runs full garbage collections over every object the
loaded project holds (~180,000), and three workers on two cores took 3-7 s to stop an idle
server. ``post_worker_init`` freezes what loading the project created (``gc.freeze``), so
neither those collections nor the ones while serving walk them again; nothing
else about the exit changes (atexit handlers, trace export, logs).
"""

from __future__ import annotations

import gc
import os
from typing import Any


def _workers() -> int:
    """``WEB_CONCURRENCY`` when set (gunicorn's own variable), else two per CPU and one,
    at most 9. gunicorn's default is one sync worker: one request waiting on a row lock
    (up to 5 s) then stalls every user of the console. The cap keeps a large host from
    opening more database connections than PostgreSQL's default ``max_connections``
    leaves for the Celery workers (each web worker holds one)."""
    value = os.environ.get("WEB_CONCURRENCY", "").strip()
    if value:
        return int(value)  # gunicorn read it already, and stops at a malformed one
    return min(2 * (os.cpu_count() or 1) + 1, 9)


# `--workers` on the command line still overrides this.
workers = _workers()

# A request in flight at SIGTERM gets this long to complete before its worker is killed.
graceful_timeout = 30

# No control socket. gunicorn 24+ opens one by default at a single path per user
# ($XDG_RUNTIME_DIR/gunicorn.ctl or ~/.gunicorn/gunicorn.ctl): every web process of that
# user binds the same path, the last one started takes it over, and whoever reaches it
# can stop or reload that server's workers. FieldOps uses signals (SIGTERM, SIGHUP) only.
control_socket_disable = True


def post_worker_init(worker: Any) -> None:
    """Load the URL configuration (the views and what they import), then freeze the
    objects loading created: they live as long as the worker."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (imported now, before the freeze)
    gc.freeze()
    worker.log.info("froze the project's objects (%d) after loading it", gc.get_freeze_count())
