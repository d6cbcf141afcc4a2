"""CPUs per grading lane: a lane's grader thread and the workers it forks run on CPUs of their own.

A call into a worker is a ping-pong: the grader sends, sleeps until the worker answers, the worker sleeps
until the next call. Where the two sit on different CPUs and sleep, each wake-up crosses CPUs (an
inter-processor interrupt, a cold cache: 50 µs a round trip on the development machine, 8 µs on one CPU)
and the scheduler moves both about; 80 calls a notebook make that a tenth of a notebook's time.

Two ways out, by how many CPUs the lanes leave:

* where every lane can have *two* CPUs (``2 * jobs`` at most the CPUs this process may use), the grader
  thread takes one and its workers the other, and each side keeps reading its channel for
  :data:`SPIN_SECONDS` before it sleeps on it (:func:`spin_seconds`, see
  :func:`autograder.inside.protocol.recv_frame`): an answer that comes within that time is read in
  microseconds by a CPU that never went idle, and both sides' work runs at once on two CPUs;
* else, where every lane gets one CPU (``jobs`` at most the CPUs), the grader thread and its workers share
  it and sleep: one CPU's wake-up is the cheap one, and the lanes stop taking each other's CPU.

``AUTOGRADER_LANE_CPUS=1`` in the environment gives every lane one CPU even where two would fit (a
grader that should leave the machine's other CPUs alone). Otherwise (more lanes than CPUs, one CPU,
``AUTOGRADER_PIN=0``) the scheduler places them, and nothing spins.
Affinity is a hint to the scheduler and never a limit the grader relies on: any failure is ignored.
"""
from __future__ import annotations

import os
import threading
from typing import NamedTuple

#: How long a lane with two CPUs keeps reading its channel before it sleeps on it (see the module's text).
#: Most calls of a check come back sooner (the student's code of one call, a reference between two calls).
SPIN_SECONDS = 0.002


class LaneCpus(NamedTuple):
    """A lane's CPUs: its grader thread's and its workers' (the same one where the lanes leave no CPU over)."""

    grader: int
    worker: int

    @property
    def split(self) -> bool:
        return self.grader != self.worker


#: ``cpus``: the LaneCpus of this thread's lane, where :func:`pin_lane` set them (per thread, as
#: ``sched_setaffinity(0)`` sets the calling thread's; a thread-local, so a later thread that gets an ended
#: one's identifier inherits nothing).
_LANE = threading.local()
#: The CPUs this process may use, as they were before any lane was pinned (where a stopped worker goes).
_FREE: set[int] = set()


def lane_cpus(jobs: int) -> list[LaneCpus] | None:
    """The CPUs lanes 0..jobs-1 take, or None where they should not be pinned (``AUTOGRADER_PIN=0`` in the
    environment: never): two each where there are ``2 * jobs`` CPUs (unless ``AUTOGRADER_LANE_CPUS=1``: a
    grader on a shared machine that leaves the other CPUs alone), else one each."""
    if os.environ.get("AUTOGRADER_PIN", "1") == "0":
        return None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2 or not 1 <= jobs <= len(allowed):
        return None
    if 2 * jobs <= len(allowed) and os.environ.get("AUTOGRADER_LANE_CPUS", "2") != "1":
        pairs = allowed[-2 * jobs:]
        return [LaneCpus(pairs[2 * k], pairs[2 * k + 1]) for k in range(jobs)]
    return [LaneCpus(cpu, cpu) for cpu in allowed[-jobs:]]      # the last ones: CPU 0 takes most interrupts


def core_to_spare(jobs: int) -> bool:
    """Whether ``jobs`` lanes leave a CPU of this process's unused (where a spare worker can set itself up
    while the lanes grade, see Sandbox.keep_spare): fewer CPUs taken by the lanes (two each where they have a
    CPU for each side, see :func:`lane_cpus`) than it may use.

    Where the lanes take every CPU, a spare ordered when one is taken has its fork and cage (some 8 ms of CPU)
    run on theirs, at the start of the next submission: at -j 1 on 2 CPUs 05's first exercise took 11 to 18 ms
    instead of 7, single calls stalling 3 to 7 ms. There the batch orders it when a worker closes instead, or
    keeps none (see grading.batch and Sandbox.keep_spare)."""
    try:
        allowed = len(_FREE) or len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    lanes = lane_cpus(jobs)
    taken = sum(2 if cpus.split else 1 for cpus in lanes) if lanes else jobs
    return taken < allowed


def split_lanes(jobs: int) -> bool:
    """Whether ``jobs`` lanes each get a CPU for each side, grader and worker (see :func:`lane_cpus`)."""
    lanes = lane_cpus(jobs)
    return lanes is not None and len(lanes) > 0 and all(cpus.split for cpus in lanes)


def pin_lane(cpus: LaneCpus | None) -> None:
    """Run the calling thread on ``cpus.grader`` (and the workers its sandbox forks on ``cpus.worker``, see
    :func:`follow`)."""
    if cpus is None:
        return
    try:
        if not _FREE:
            _FREE.update(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus.grader})
    except (AttributeError, OSError):
        return
    _LANE.cpus = cpus


def follow(pid: int) -> None:
    """Put process ``pid`` (a worker just forked for this thread's lane) on the lane's worker CPU, if it has one."""
    cpus = getattr(_LANE, "cpus", None)
    if cpus is None:
        return
    try:
        os.sched_setaffinity(pid, {cpus.worker})
    except (AttributeError, OSError):
        pass


def spin_seconds() -> float:
    """How long this thread's lane reads a channel before sleeping on it: :data:`SPIN_SECONDS` where the lane
    has two CPUs, else 0 (a spinning side would take the CPU its other side needs)."""
    cpus = getattr(_LANE, "cpus", None)
    return SPIN_SECONDS if cpus is not None and cpus.split else 0.0


def release(pid: int) -> None:
    """Let process ``pid`` (a worker about to be killed) run on any CPU again: the kernel tears a killed
    process down in its own context, and that work (its whole address space) then runs beside the lane's
    next submission instead of before it on the lane's CPU."""
    if _FREE and getattr(_LANE, "cpus", None) is not None:
        try:
            os.sched_setaffinity(pid, _FREE)
        except (AttributeError, OSError):
            pass
