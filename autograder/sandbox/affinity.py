"""One CPU per grading lane: a lane's grader thread and the workers it forks run on the same CPU.

A call into a worker is a ping-pong: the grader sends, sleeps until the worker answers, the worker sleeps
until the next call. Where the two sit on different CPUs each wake-up crosses CPUs (an inter-processor
interrupt, a cold cache: 50 µs a round trip on the development machine, 8 µs on one CPU) and the
scheduler moves both about; 80 calls a notebook make that a tenth of a notebook's time. Pinned together,
the lanes also stop taking each other's CPU. Only where every lane gets a CPU of its own (``jobs`` at most
the CPUs this process may use) and more than one is there: otherwise the scheduler places them.

Affinity is a hint to the scheduler and never a limit the grader relies on: any failure is ignored.
"""
from __future__ import annotations

import os
import threading

#: ``cpu``: the CPU of this thread's lane, where :func:`pin_lane` set one (per thread, as
#: ``sched_setaffinity(0)`` sets the calling thread's; a thread-local, so a later thread that gets an ended
#: one's identifier inherits nothing).
_LANE = threading.local()
#: The CPUs this process may use, as they were before any lane was pinned (where a stopped worker goes).
_FREE: set[int] = set()


def lane_cpus(jobs: int) -> list[int] | None:
    """The CPUs lanes 0..jobs-1 take, one each, or None where they should not be pinned
    (``AUTOGRADER_PIN=0`` in the environment: never)."""
    if os.environ.get("AUTOGRADER_PIN", "1") == "0":
        return None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2 or not 1 <= jobs <= len(allowed):
        return None
    return allowed[-jobs:]      # the last ones: CPU 0 takes most of the machine's interrupts


def core_to_spare(jobs: int) -> bool:
    """Whether ``jobs`` lanes leave a CPU of this process's unused (where a spare worker can set itself up
    while the lanes grade, see Sandbox.keep_spare): fewer lanes than the CPUs it may use."""
    try:
        allowed = len(_FREE) or len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    return jobs < allowed


def pin_lane(cpu: int | None) -> None:
    """Run the calling thread (and the workers its sandbox forks, see :func:`follow`) on ``cpu``."""
    if cpu is None:
        return
    try:
        if not _FREE:
            _FREE.update(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError):
        return
    _LANE.cpu = cpu


def follow(pid: int) -> None:
    """Put process ``pid`` (a worker just forked for this thread's lane) on the lane's CPU, if it has one."""
    cpu = getattr(_LANE, "cpu", None)
    if cpu is None:
        return
    try:
        os.sched_setaffinity(pid, {cpu})
    except (AttributeError, OSError):
        pass


def release(pid: int) -> None:
    """Let process ``pid`` (a worker about to be killed) run on any CPU again: the kernel tears a killed
    process down in its own context, and that work (its whole address space) then runs beside the lane's
    next submission instead of before it on the lane's CPU."""
    if _FREE and getattr(_LANE, "cpu", None) is not None:
        try:
            os.sched_setaffinity(pid, _FREE)
        except (AttributeError, OSError):
            pass
