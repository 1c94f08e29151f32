"""A lease whose owner is provably gone ends at once; any other lease is waited out.

A run's lease owner names its process (host, pid, and when the process started). When
that process died on this host (a SIGKILLed embedded server, an OOM-killed Celery pool
process), the claim and the sweeper treat its lease as expired right away and the run is
recovered as after any expired lease (``run.recovered``, attempt + 1). Never a live
owner's lease (a paused one included), never one whose pid now names the owner still,
never another host's, never a name without a start time. The owners here are real
processes: a Python child that prints its own lease owner name and sleeps.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel import clock
from runs.domain.states import EventType
from runs.engine import liveness, ownership, sweeper
from runs.models import Event, Run
from tests.helpers import make_run

ROOT = Path(__file__).resolve().parents[3]


class Child:
    """A real process of this host, as a lease owner would be."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import time; from runs.engine import liveness; "
                "print(liveness.owner_name(), flush=True); time.sleep(300)",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.name = self.process.stdout.readline().strip()
        self.pid = self.process.pid

    def state(self) -> str:
        text = Path(f"/proc/{self.pid}/stat").read_text()
        return text[text.rfind(")") + 2]

    def kill(self, *, reap: bool = True) -> None:
        self.process.kill()
        if reap:
            self.process.wait(timeout=10)
            return
        deadline = time.monotonic() + 10
        while self.state() != "Z":  # dead, its exit status not yet collected
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def close(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def child() -> Iterator[Child]:
    process = Child()
    yield process
    process.close()


def _with(name: str, **changes: object) -> str:
    """``name`` with some of its parts (host, pid, start, scope) replaced."""
    named = liveness.parse(name)
    assert named is not None, name
    parts = {**named.__dict__, **changes}
    return f"{parts['host']}:{parts['pid']}:{parts['start']}:{parts['scope']}"


pytestmark = pytest.mark.skipif(
    liveness.current() is None, reason="needs /proc (Linux) to tell when a process started"
)


# -- whether an owner is gone ---------------------------------------------------------------
def test_a_live_owner_is_not_gone_even_stopped(child: Child) -> None:
    assert not liveness.gone(child.name)
    os.kill(child.pid, signal.SIGSTOP)  # a paused worker (a long GC pause, SIGSTOP) lives
    assert not liveness.gone(child.name)


def test_a_killed_owner_is_gone_reaped_or_not(child: Child) -> None:
    child.kill(reap=False)
    assert liveness.gone(child.name)  # a zombie is dead: it will never renew or write
    child.process.wait(timeout=10)
    assert liveness.gone(child.name)


def test_a_pid_reused_by_a_later_process_is_not_mistaken_for_the_owner(child: Child) -> None:
    """The owner had the pid and died; a process that started later holds the pid now."""
    named = liveness.parse(child.name)
    assert named is not None
    earlier_owner = _with(child.name, start=named.start - 1)
    assert liveness.gone(earlier_owner)
    # A name that claims a start after the present holder's proves nothing: kept.
    assert not liveness.gone(_with(child.name, start=named.start + 1))


def test_this_process_is_not_gone_but_an_earlier_one_with_its_pid_is() -> None:
    """A restarted container's server can get its predecessor's pid: the lease is that
    predecessor's (dead) only if it started before this process did."""
    me = liveness.owner_name()
    named = liveness.parse(me)
    assert named is not None and named.pid == os.getpid()
    assert not liveness.gone(me)
    assert not liveness.gone(f"celery@{me}")  # the role prefix names the same process
    assert liveness.gone(_with(me, start=named.start - 1))
    assert not liveness.gone(_with(me, start=named.start + 1))


def test_another_hosts_or_scopes_owner_is_never_judged(child: Child) -> None:
    name = child.name
    child.kill()
    assert liveness.gone(name)
    assert not liveness.gone(_with(name, host="elsewhere"))
    assert not liveness.gone(_with(name, host=f"{liveness.parse(name).host}.example"))  # type: ignore[union-attr]
    # Another boot, or another pid namespace (a container with the same hostname).
    assert not liveness.gone(_with(name, scope="00000000"))


def test_a_name_without_a_start_time_is_never_judged(child: Child) -> None:
    named = liveness.parse(child.name)
    assert named is not None
    child.kill()
    pid_zero = _with(child.name, pid=0)
    for name in (
        f"{named.host}:{named.pid}",
        f"celery@{named.host}:{named.pid}",
        "worker-b",
        "inprocess",
        pid_zero,
    ):
        assert liveness.parse(name) is None
        assert not liveness.gone(name)


# -- the claim and the sweeper ----------------------------------------------------------------
def _leased(owner: str, *, seconds: float = 300) -> Run:
    """A run whose lease ``owner`` took (owner epoch 1) and holds for ``seconds`` more."""
    run = make_run(advance=False)
    Run.objects.filter(pk=run.pk).update(
        lease_owner=owner,
        lease_expires_at=clock.now() + dt.timedelta(seconds=seconds),
        owner_epoch=1,
    )
    run.refresh_from_db()
    return run


def _recoveries(run: Run) -> list[Event]:
    return list(Event.objects.filter(run=run, type=EventType.RUN_RECOVERED.value))


def test_a_claim_takes_over_at_once_from_a_dead_owner(world: None, child: Child) -> None:
    run = _leased(child.name)
    child.kill()
    claim = ownership.claim(str(run.pk), "worker-b")
    assert isinstance(claim, ownership.Claim) and claim.recovered
    assert (claim.epoch, claim.attempt) == (2, run.attempt + 1)
    (recovered,) = _recoveries(run)
    assert recovered.reason_code == "lease_expired"
    assert recovered.payload["previous_owner"] == child.name
    assert recovered.payload["previous_epoch"] == 1


def test_a_claim_never_takes_a_live_owners_lease(world: None, child: Child) -> None:
    run = _leased(child.name)
    os.kill(child.pid, signal.SIGSTOP)
    claim = ownership.claim(str(run.pk), "worker-b")
    assert not claim and claim.reason == "held"
    after = Run.objects.get(pk=run.pk)
    assert (after.lease_owner, after.owner_epoch) == (child.name, 1)
    assert after.lease_expires_at == run.lease_expires_at
    assert not _recoveries(run)


def test_the_sweeper_ends_a_dead_owners_lease_and_redrives_the_run(
    world: None, child: Child
) -> None:
    run = _leased(child.name)
    child.kill()
    report = sweeper.sweep()
    assert report.owners_gone == [str(run.pk)]
    assert str(run.pk) in report.redriven
    run.refresh_from_db()
    # Re-driven through the usual recovery: a new owner (this process), attempt + 1.
    (recovered,) = _recoveries(run)
    assert recovered.payload["previous_owner"] == child.name
    assert run.attempt == recovered.payload["attempt"] and run.owner_epoch >= 2
    assert run.state == "WAITING_HUMAN"
    assert sweeper.sweep().owners_gone == []  # nothing left to end


def test_the_sweeper_leaves_live_other_host_and_unnamed_leases_alone(
    world: None, child: Child
) -> None:
    dead = Child()
    try:
        dead.kill()
        named = liveness.parse(dead.name)
        assert named is not None
        leases = {
            "live": _leased(child.name),
            "other host": _leased(_with(dead.name, host="elsewhere")),
            "other namespace": _leased(_with(dead.name, scope="00000000")),
            "no start time": _leased(f"{named.host}:{named.pid}"),
        }
    finally:
        dead.close()
    report = sweeper.sweep()
    assert report.owners_gone == []
    for what, run in leases.items():
        after = Run.objects.get(pk=run.pk)
        assert (after.lease_owner, after.owner_epoch, after.lease_expires_at) == (
            run.lease_owner,
            1,
            run.lease_expires_at,
        ), what
        assert not _recoveries(run), what


def test_two_recoverers_take_a_dead_owners_run_once(world: None, child: Child) -> None:
    """Ending the lease and taking the run are compare-and-sets on the owner and epoch: a
    second sweeper, or a claim racing the first, finds nothing left to take."""
    run = _leased(child.name)
    child.kill()
    assert ownership.end_gone_leases() == [str(run.pk)]
    assert ownership.end_gone_leases() == []  # the first one ended it
    first = ownership.claim(str(run.pk), liveness.owner_name())
    assert isinstance(first, ownership.Claim) and first.recovered
    # The new owner is this (live) process: a second recoverer neither ends its lease nor
    # takes the run.
    assert ownership.end_gone_leases() == []
    second = ownership.claim(str(run.pk), "worker-c")
    assert not second and second.reason == "held"
    assert len(_recoveries(run)) == 1
