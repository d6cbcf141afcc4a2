"""``autograder worker --database URL``: grade the service's queued submissions, one at a time.

A worker is a process of its own (never the web process: its threads would make forking unsafe).
It starts the sandbox once, then claims a job, grades the stored notebook exactly as ``autograder
grade`` does (the same discovery of its assignment, the same cage, catalog and hidden seed, the late
policy with the server's receipt time as the submission time), records the result and claims the
next. Its lease covers the submission's whole time budget; a worker killed mid-grade leaves a lease
that runs out, and another worker grades the job again (the same file gives the same score, and the
result is one row per submission). SIGTERM or SIGINT: the current job is finished, then the worker
stops (a drain); a second signal stops at once, the lease then hands the job on.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from autograder import catalog as C
from autograder.grading.process import prepare_grader_process, trusted_torch
from autograder.grading.times import SubmittedAt
from autograder.core.messages import say
from autograder.service import history, mail
from autograder.service import queue as Q
from autograder.service.db import engine_for, upgrade
from autograder.service.tables import granted_extensions
from autograder.service.loops import Rounds

if TYPE_CHECKING:
    from autograder.course.config import Course


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", required=True, metavar="URL",
                        help="the service's database: a SQLite file, or postgresql+psycopg://USER@HOST/DB")
    parser.add_argument("--once", action="store_true", help="stop when the queue is empty (for scripts and tests)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where student code runs")
    parser.add_argument("--poll", type=float, default=0.2, metavar="SECONDS",
                        help="how long to wait before looking again at an empty queue")
    parser.add_argument("--lease", type=float, default=None, metavar="SECONDS",
                        help="how long a claimed job stays this worker's without a heartbeat (default: twice "
                             "limits.submission_seconds plus a minute; the worker renews it every third of it)")
    parser.add_argument("--parent", type=int, default=None, metavar="PID",
                        help="stop (after the job in hand) when this process ends: autograder serve starts its "
                             "workers with it, so none outlives the service")


@dataclass
class Tally:
    """What a worker did: how many jobs it graded and the time spent grading them, on ``clock`` (its shutdown line
    says both; the time it was up is another thing, mostly an empty queue waited on)."""

    graded: int = 0
    seconds: float = 0.0
    clock: Callable[[], float] = time.perf_counter


def stopped(tally: Tally, uptime: float) -> str:
    """The line a worker prints when it stops."""
    return f"worker: graded {tally.graded} submission(s) in {tally.seconds:.1f} s of grading (uptime {uptime:.1f} s)"


def lease_seconds(course: Course) -> float:
    """A lease outlasts the longest grade: the submission's time budget, its worker's set-up, a margin."""
    return float(course.limits.submission_seconds) * 2 + 60.0


def grade_claimed(claimed: Q.Claimed, ctx: Any, folder: Path, extensions: list[Any] | None = None) -> dict[str, Any]:
    """One stored notebook graded as ``autograder grade`` grades it: its result, the late policy applied."""
    # Under a folder named for the student (the service knows who sent it); the file name is the
    # service's, never the student's.
    home = folder / f"job-{claimed.job}" / "student"
    home.mkdir(parents=True)
    try:
        return _grade_in(home, claimed, ctx, extensions or [])
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)    # a graded notebook is the database's, not /tmp's


def _grade_in(home: Path, claimed: Q.Claimed, ctx: Any, extensions: list[Any]) -> dict[str, Any]:
    from autograder.grading.deadlines import Deadlines, submitted_json  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.grading.submission import grade_or_fail  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.grading.submissions import Submission, discover  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    (home / f"{claimed.assignment}.ipynb").write_bytes(claimed.data)
    found = discover(home.parent, ctx.course, assignment=claimed.assignment, files_trusted=False)
    if found.submissions:
        sub = found.submissions[0]
    else:                       # the notebook says it is another assignment
        sub = Submission(home / f"{claimed.assignment}.ipynb", claimed.filename, student=claimed.student,
                         assignment=claimed.assignment)
        sub.fail(f"wrong assignment: the notebook is not {claimed.assignment}",
                 say("submission.wrong_assignment", said="?", wanted=claimed.assignment))
    sub.student = claimed.student
    sub.source = claimed.filename
    received = submitted_json(SubmittedAt(claimed.received_at, "the service's receipt"))
    result = grade_or_fail(sub, ctx)      # finalized there: the text gate, the size cap, the result model
    if result is None:
        raise InterruptedError("the worker is stopping")
    return Deadlines.load(ctx.course, more=extensions).settle(result, received)


class StopFlag:
    """A stop flag that a signal handler may set: a plain attribute, no lock. (``threading.Event.set`` takes a
    lock: a handler that ran again while an earlier run of it held that lock, as the parent-death signal does
    once per thread of a dying parent, deadlocked the worker for good.) ``wait`` looks at it every 50 ms."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._set:
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                break
            time.sleep(left)
        return self._set


class _Stop:
    """SIGTERM/SIGINT once: finish the job in hand, then stop. Twice: stop now. SIGUSR1 (the parent died,
    :func:`follow_parent`), however often: finish the job in hand, then stop."""

    def __init__(self) -> None:
        self.event = StopFlag()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._signalled)
        signal.signal(signal.SIGUSR1, self._orphaned)

    def _signalled(self, signum: int, _frame: Any) -> None:
        if self.event.is_set():
            os._exit(128 + signum)
        self.event.set()

    def _orphaned(self, _signum: int, _frame: Any) -> None:
        self.event.set()


def follow_parent() -> None:
    """Have the kernel send this process SIGUSR1 when its parent dies (Linux's PR_SET_PDEATHSIG; :class:`_Stop`
    then stops it after the job in hand). Its own signal, not SIGTERM: the kernel sends it each time the thread
    that started this process ends, and a parent with threads (a web server) can end in several steps, which as
    SIGTERMs would read as "stop now". The loop also looks at the parent between jobs (a parent that died before
    this was asked, another system). No thread: the sandbox starts after this."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(1, signal.SIGUSR1, 0, 0, 0)          # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):
        pass


class _Heartbeat:
    """Renews the lease of the job in hand every third of the lease, from a thread of its own (it only
    talks to the database: the worker never forks after it started). A beat that fails (the database away) is
    logged once per kind and the next beat tries again (:mod:`autograder.service.loops`)."""

    def __init__(self, engine: Any, owner: str, lease: float):
        self.engine, self.owner, self.lease = engine, owner, lease
        self.job: int | None = None
        self.rounds = Rounds(f"worker {owner}: the lease heartbeat")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.lease / 3):
            job = self.job
            if job is not None:
                self.rounds.run(Q.renew, self.engine, job, self.owner, self.lease)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def serve(database: str, *, once: bool = False, device: str = "cpu", poll: float = 0.2,
          owner: str | None = None, stop: threading.Event | StopFlag | None = None, lease: float | None = None,
          parent: int | None = None, tally: Tally | None = None) -> int:
    """Claim and grade jobs until told to stop (or, with ``once``, until the queue is empty; with ``parent``,
    until that process has ended): how many (``tally``, where given, counts them and the time they took)."""
    prepare_grader_process()       # before numpy and torch load
    from autograder.course.config import load_course  # noqa: PLC0415 - after prepare_grader_process, as all below
    from autograder.grading.cells import demo_cells  # noqa: PLC0415
    from autograder.grading.grader import GradingContext, check_catalog, grader_fingerprint  # noqa: PLC0415
    from autograder.sandbox import Sandbox  # noqa: PLC0415

    trusted_torch(device)
    engine = engine_for(database)
    upgrade(engine)
    course = load_course()
    owner = owner or f"{socket.gethostname()}:{os.getpid()}"
    stop = stop or threading.Event()
    lease = lease or lease_seconds(course)
    tally = tally or Tally()
    with Sandbox(course.limits, device) as sandbox, tempfile.TemporaryDirectory(prefix="autograder-worker-") as tmp:
        references = check_catalog(course, {a.id for a in course.assignments})
        ctx = GradingContext(course, sandbox, device, grader_fingerprint(device, course), references,
                             C.LiveDiagnoser(course.tolerances), demo_cells(course), "service")
        beat = _Heartbeat(engine, owner, lease)
        try:
            _loop(engine, ctx, owner, lease, beat, stop, once, poll, Path(tmp), tally, parent)
        finally:
            beat.close()
    engine.dispose()
    return tally.graded


def _loop(engine: Any, ctx: Any, owner: str, lease: float, beat: _Heartbeat, stop: threading.Event | StopFlag,
          once: bool, poll: float, tmp: Path, tally: Tally, parent: int | None = None) -> None:
    while not stop.is_set() and (parent is None or os.getppid() == parent):
        try:
            claimed = Q.claim(engine, owner, lease)
        except DBAPIError:          # the database is away (PostgreSQL restarting): look again in a moment
            stop.wait(1.0)
            continue
        if claimed is None:
            if once:
                break
            stop.wait(poll)
            continue
        beat.job = claimed.job
        began = tally.clock()
        try:
            # The extensions granted from the dashboard as they are now (the course's extensions file wins).
            result = grade_claimed(claimed, ctx, tmp, granted_extensions(engine))
        except InterruptedError:    # told to stop mid-grade: the job goes back to the queue for the next worker
            _again(Q.release, engine, owner, claimed.job, seconds=10.0)
            break
        except Exception as exc:  # noqa: BLE001 - the grader's own fault: the job is kept, named
            _again(Q.fail, engine, claimed.job, owner, f"{type(exc).__name__}: {exc}")
            continue
        finally:
            beat.job = None
        done = _again(Q.complete, engine, claimed.job, owner, result, verdict_mail(ctx.course, claimed))
        if done:
            # (the grade and its recording: a job released or failed is not one graded)
            tally.graded, tally.seconds = tally.graded + 1, tally.seconds + (tally.clock() - began)
            # The counted score's history: a first grade or a regrade that moved it is recorded.
            _again(_note_grade, engine, ctx.course, claimed, done)


def verdict_mail(course: Any, claimed: Q.Claimed) -> Any:
    """What records a first result also queues its student's mail of it, in that transaction (:mod:`.mail`)."""
    def queue_it(session: Any, submission: int) -> bool:
        return mail.add(session, course, "verdict", student=claimed.student, assignment=claimed.assignment,
                        item=str(submission), ref=submission)
    return queue_it


def _note_grade(engine: Any, course: Any, claimed: Q.Claimed, why: str) -> int:
    return history.note(engine, course, [(claimed.student, claimed.assignment)], why=why, who=history.WORKER,
                        detail=f"submission {claimed.submission}")


def _again(write: Any, *args: Any, seconds: float = 120.0) -> Any:
    """``write(*args)``, tried again while the database is away (a restart) for up to ``seconds``: a graded result
    is not thrown away for a moment's outage, during a drain too (past it, the job's lease hands it to another
    worker)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write(*args)
        except DBAPIError:
            if time.monotonic() > deadline:
                return False
            time.sleep(1.0)


def run(args: argparse.Namespace) -> int:
    stop = _Stop()
    if args.parent is not None:
        follow_parent()
    start, tally = time.perf_counter(), Tally()
    serve(args.database, once=args.once, device=args.device, poll=args.poll, stop=stop.event, lease=args.lease,
          parent=args.parent, tally=tally)
    print(stopped(tally, time.perf_counter() - start))
    return 0
