"""serve_embedded ADDRPORT: the console with in-process execution and a sweeper thread.

The embedded default has no Celery and no beat: runs advance in the web process after each
commit, and this command runs the one sweeper (expiries, deadlines, re-drives) in a
background thread of the same process. The thread sweeps once as soon as the server
starts: the runs a killed predecessor was advancing (their lease owner a process of this
host that is gone) are handed over then, not after their lease ran out.

It listens on loopback only while the callback signing key is the embedded constant
(anyone can read it in the source): set ``FIELDOPS_CALLBACK_KEY`` to serve elsewhere.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.management.commands.runserver import naiveip_re
from django.db import close_old_connections

from fieldops.checks import is_loopback, uses_embedded_callback_key
from fieldops.commands import FieldOpsCommand

log = logging.getLogger("fieldops.sweeper")


def listen_host(addrport: str) -> str:
    """The host part of runserver's ``[host:]port`` (127.0.0.1 when only a port is given)."""
    if addrport.startswith("["):
        return addrport[1:].partition("]")[0]
    host, sep, _port = addrport.rpartition(":")
    if not sep:
        return "127.0.0.1" if addrport.isdigit() else addrport
    return host or "127.0.0.1"


def addrport_problem(addrport: str) -> str:
    """Why runserver could not listen on ``addrport`` ("" when it can). runserver reads
    any Unicode digits as its port and leaves one above 65535 to a traceback from bind()."""
    match = re.match(naiveip_re, addrport)
    port = match["port"] if match else ""
    if not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
        return (
            f"{addrport[:80]!r} is not [host:]port with a port from 1 to 65535 "
            "(e.g. 127.0.0.1:8000)"
        )
    return ""


def _sweep_forever(stop: threading.Event, interval: float) -> None:
    """Sweep now, then every ``interval`` seconds until ``stop`` is set."""
    from operations import services as operations
    from runs.engine import sweeper

    try:
        sweeper.sweeper_started()  # a fresh start reads as starting, not silent
    except Exception:
        log.exception("the sweeper's start could not be recorded")
    while not stop.is_set():
        try:
            sweeper.sweep()
            operations.operation_sweep()  # bulk operations a restart interrupted
        except Exception:  # keep sweeping; the next sweep retries idempotently
            log.exception("sweep failed")
        try:
            close_old_connections()
        except Exception:  # a connection that cannot even be closed: the next sweep reopens
            log.exception("sweep failed to close its database connection")
        stop.wait(interval)


class Command(FieldOpsCommand):
    help = "Serve the console (embedded mode: in-process execution + a sweeper thread)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "addrport",
            nargs="?",
            default="127.0.0.1:8000",
            help="[host:]port to listen on (loopback unless FIELDOPS_CALLBACK_KEY is set)",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        if settings.FIELDOPS_EXECUTION != "inprocess":
            raise CommandError(
                "serve_embedded is for FIELDOPS_EXECUTION=inprocess; with "
                "Celery run gunicorn, `make worker` and `make beat` instead"
            )
        problem = addrport_problem(options["addrport"])
        if problem:
            raise CommandError(problem)
        host = listen_host(options["addrport"])
        if uses_embedded_callback_key() and not is_loopback(host):
            raise CommandError(
                f"refusing to listen on {host}: FIELDOPS_CALLBACK_KEY is the embedded demo "
                "constant, so anyone could sign callbacks. Set FIELDOPS_CALLBACK_KEY to a "
                "random secret, or listen on 127.0.0.1."
            )
        # Whitenoise serves the source tree through the finders here (no collectstatic on a
        # fresh clone), so a missing STATIC_ROOT is expected, not worth a warning.
        warnings.filterwarnings("ignore", message="No directory at: ", category=UserWarning)
        stop = threading.Event()
        thread = threading.Thread(
            target=_sweep_forever,
            name="sweeper",
            daemon=True,
            args=(stop, settings.FIELDOPS_SWEEP_INTERVAL_SECONDS),
        )
        thread.start()
        self.stdout.write(
            f"FieldOps console on http://{options['addrport']}/ "
            "(embedded: SQLite, in-process execution, sweeper thread)"
        )
        try:
            call_command("runserver", options["addrport"], use_reloader=False)
        finally:
            stop.set()
            time.sleep(0)
