"""Which process holds a lease, and whether that process is provably gone.

A lease owner names its process: ``[role@]host:pid:start:scope``, where ``start`` is the
process's start time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and ``scope``
a short digest of the kernel's boot id and the process's pid namespace. ``host:pid``
alone cannot tell the owner from a later process that got the same pid (a restarted
container starts its server with the pid its predecessor had); the start time can, and
the scope says whether this process may judge the pid at all (the same machine, booted
once, the same pid namespace: a container with the same hostname on another machine, or
beside this one in its own pid namespace, is out of scope).

``gone(owner)`` is True only when the owner is proven dead from here: its host is this
exact hostname, its scope this process's, and its pid is either free, a zombie, or held
by a process that started later than the owner did (or, for this process's own pid, the
owner started before this process). Anything else (another host, another scope, a name
without a start time, a ``/proc`` that cannot be read, a stopped or paused process) is
not proof: that lease is waited out as before. Where ``/proc`` is missing (not Linux) the
name carries no start time and nothing is ever judged gone.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    host: str
    pid: int
    start: int  # clock ticks after boot (/proc/<pid>/stat starttime)
    scope: str  # digest of the boot id and the pid namespace


def _stat(pid: int) -> tuple[str, int] | None:
    """The state letter and start time of ``pid`` (None: it cannot be read)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime)
    except (IndexError, ValueError):
        return None


def _scope() -> str | None:
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:8]


_current: Process | None = None
_current_pid = 0


def current() -> Process | None:
    """This process (None where ``/proc`` cannot say when it started). Computed once per
    pid: a forked Celery pool process is a new process."""
    global _current, _current_pid
    pid = os.getpid()
    if _current_pid != pid:
        stat, scope = _stat(pid), _scope()
        found = None
        if stat is not None and scope is not None:
            found = Process(host=socket.gethostname(), pid=pid, start=stat[1], scope=scope)
        _current, _current_pid = found, pid
    return _current


def owner_name(role: str = "") -> str:
    """The lease owner name of this process (``role`` prefixes it, e.g. ``celery@``)."""
    me = current()
    if me is None:
        return f"{role}{socket.gethostname()}:{os.getpid()}"
    return f"{role}{me.host}:{me.pid}:{me.start}:{me.scope}"


def parse(owner: str) -> Process | None:
    """The process a lease owner name names (None: a name without a start time, e.g. a
    worker named by hand or before start times were recorded)."""
    who, _, rest = owner.partition(":")
    parts = rest.split(":")
    if len(parts) != 3 or not who or not all(p.isdigit() for p in parts[:2]):
        return None
    if int(parts[0]) <= 0:
        return None  # no process has it (and kill(0, ...) would mean a process group)
    host = who.rpartition("@")[2]  # a hostname holds no '@': what precedes it is a role
    return Process(host=host, pid=int(parts[0]), start=int(parts[1]), scope=parts[2])


def gone(owner: str) -> bool:
    """Whether the process named ``owner`` is provably dead, judged from this process."""
    named, me = parse(owner), current()
    if named is None or me is None or named.host != me.host or named.scope != me.scope:
        return False
    if named.pid == me.pid:
        # This process has the pid now: the owner was an earlier process that had it
        # (a restarted container) only if it started before this one did.
        return named.start < me.start
    try:
        os.kill(named.pid, 0)
    except ProcessLookupError:
        return True  # no process has the pid
    except PermissionError:
        pass  # a process of another user has it: its start time says whether it is ours
    stat = _stat(named.pid)
    if stat is None:
        return False  # it exists but cannot be looked at (hidepid, or it just exited)
    state, start = stat
    if start != named.start:
        return start > named.start  # the pid was reused by a later process
    return state in ("Z", "X")  # the owner exited and awaits its parent (a stopped one lives)
