"""A batch: discover the submissions, check the grader can grade them, and grade them on N lanes
(threads here, processes, or a Dask cluster), the parent the one writer.
"""
from __future__ import annotations

import collections
import difflib
import itertools
import json
import time
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder.course.config import Course
from autograder.core.errors import AutograderError
from autograder.grading.cells import demo_cells
from autograder.grading.deadlines import Deadlines
from autograder.grading.distributed import cluster_results
from autograder.grading.grader import GradingContext, check_catalog, grader_fingerprint
from autograder.grading.forked_lanes import ForkedLanes, start_lanes
from autograder.grading.lane_grading import lane_config
from autograder.grading.lanes import Lanes
from autograder.grading.outputs import Outputs, keep_earlier, record_or_fail
from autograder.grading.submission import grade_or_fail
from autograder.grading.submissions import Discovery, Submission, discover
from autograder.grading.times_csv import load_times_csv
from autograder.sandbox.affinity import core_to_spare, lane_cpus, pin_lane, split_lanes


@dataclass
class BatchOutcome:
    results: list[dict[str, Any]]
    graded: int                   # graded (or failed) in this run
    resumed: int                  # kept from an earlier run
    seconds: float                # wall time of the grading loop (template start excluded)
    interrupted: bool = False
    write_seconds: float = 0.0    # of which writing results, feedback and grades.csv
    unwritten: list[str] = field(default_factory=list)   # submissions whose row could not be written
    lanes: str = ""               # the lanes in other processes: "1 forked", "3 spawned" ("" for none)


@dataclass
class Plan:
    """A batch ready to grade: what was found, where it goes, and what grades it."""

    found: Discovery
    outputs: Outputs
    references: dict[str, Callable[..., Any]]
    fingerprint: str
    device: str
    origin: str                    # SUBMISSIONS as given (a folder or a zip), resolved
    demos: dict[str, dict[str, str]] = field(default_factory=dict)
    deadlines: Deadlines | None = None


def plan(root: Path, course: Course, out: Path, *, refused: dict[str, str] | None = None,
         assignment: str | None = None, language: str | None = None, device: str = "cpu",
         origin: Path | None = None, student: str | None = None, times: Path | None = None,
         as_of: datetime | None = None, gradebook: tuple[dict[Any, Any], list[Any]] | None = None) -> Plan:
    """Discover the submissions under ``root`` and check the grader can grade them (before any sandbox).

    ``student``: only that student's (``--student``); an unknown one is an error naming who was found.
    ``times``: a CSV of submission times (``--times``); ``as_of``: ``--as-of`` (see grading/deadlines.py);
    ``gradebook``: nbgrader's word (exports.nbgrader.gradebook_times): its times, trusted after the CSV's,
    and its extensions, where the extensions file has none for that student and assignment."""
    out = Path(out).resolve()
    if out.is_relative_to(Path(root).resolve()):
        raise AutograderError(f"{out}: the output folder is inside SUBMISSIONS",
                              hint="write results elsewhere, or they would be graded next time")
    given = Path(origin if origin is not None else root)
    # A folder named on the command line (not a zip's extraction): its own name and its parent's may
    # name the student, as when one student's folder is graded alone.
    around = tuple(p.name for p in (given.resolve().parent, given.resolve())) if given.is_dir() else ()
    if times is not None and not Path(times).is_file():
        raise AutograderError(f"--times {times}: no such file", hint="a CSV with student and submitted_at columns")
    table = dict(gradebook[0]) if gradebook else {}
    if times is not None:
        table.update(load_times_csv(Path(times), default_tz=course.timezone))
    # A zip's members are the student's: nothing beside a notebook in it (timestamp.txt) is trusted.
    trusted = not (origin is not None and Path(origin).is_file())
    found = discover(root, course, assignment=assignment, refused=refused, around=around, student=student,
                     times=table, files_trusted=trusted)
    if student is not None and not found.submissions:
        everyone = discover(root, course, assignment=assignment, refused=refused, around=around)
        names = sorted({s.student for s in everyone.submissions if s.student})

        close = difflib.get_close_matches(student, names, n=3, cutoff=0.5)
        raise AutograderError(f"--student {student}: no notebook of that student in {given}",
                              hint=(f"did you mean {', '.join(close)}? " if close else "")
                              + f"{len(names)} students found" + (f", e.g. {', '.join(names[:5])}" if names else ""))
    present = {s.assignment for s in found.submissions if s.assignment and not s.problem}
    references = check_catalog(course, present)
    # An extension is checked against the roster where course.yml names one (a typo is an error naming its row);
    # one for a student with no notebook here (not handed in yet, or not in this --student run) is no error.
    deadlines = Deadlines.load(course, students=course.roster_students(), as_of=as_of,
                               more=gradebook[1] if gradebook else ())
    outputs = Outputs(out, course, language or course.language.value, deadlines)
    return Plan(found, outputs, references, grader_fingerprint(device, course), device,
                str(Path(origin if origin is not None else root).resolve()), demo_cells(course), deadlines)


#: Submissions to grade per extra lane process where lanes cannot be forked from this process but must be
#: spawned: fewer, and the lanes stay threads of this process (a spawned lane imports torch and starts a
#: sandbox template: seconds that a short batch never recovers). Measured on 2 cores
#: (bench/bench_peers.py): at 40 submissions a second spawned lane gave 0.91x the throughput of -j 1
#: (threads: 1.2x), at 160 it gave 1.54x. A forked lane (ForkedLanes) is ready in milliseconds.
PROCESS_MIN_SUBMISSIONS = 64


def lane_processes(jobs: int, todo: int, *, forked: bool = True) -> int:
    """How many of ``jobs`` lanes run in grader processes of their own for ``todo`` submissions: forked,
    one for each submission beyond the first; spawned, one per PROCESS_MIN_SUBMISSIONS."""
    if forked:
        return max(0, min(jobs - 1, todo - 1))
    return max(0, min(jobs - 1, todo // PROCESS_MIN_SUBMISSIONS))


def batch_lanes(jobs: int, todo: int, sandbox: Any, config: dict[str, Any],
                processes: int | None = None) -> tuple[Lanes | None, str | None]:
    """The lanes in other processes for ``todo`` submissions at ``jobs`` (``processes`` of them when given,
    else :func:`lane_processes`'s count), and why they were not forked (see start_lanes)."""
    if processes is None:
        wanted, spawned = lane_processes(jobs, todo), lane_processes(jobs, todo, forked=False)
    else:
        wanted = spawned = max(0, min(processes, jobs - 1))
    if not wanted or todo < 2:
        return None, None
    cpus = lane_cpus(jobs)      # the forked lanes take the last of them, this process's threads the first
    return start_lanes(wanted, sandbox, config, spawned, cpus[len(cpus) - wanted:] if cpus else None)


def grade_batch(batch: Plan, sandbox: Any, *, jobs: int, force: bool = False, progress: Any = None,
                on_result: Callable[[dict[str, Any]], None] | None = None, processes: int | None = None,
                lanes: Lanes | None = None, scheduler: Any = None,
                isolation: str | None = None) -> BatchOutcome:
    """Grade every submission not already done; each result is written as soon as it exists.

    ``jobs`` lanes in all: ``processes`` of them (default: :func:`lane_processes`) in grader processes of
    their own (``lanes``, when the caller started them early), the rest as threads here. ``scheduler`` (a
    Dask scheduler address or Client) grades on a Dask cluster instead (``sandbox`` may be None then).
    Whatever grades, this process writes every result, feedback file and grades.csv.
    """
    course, outputs = batch.outputs.course, batch.outputs
    ctx = GradingContext(course, sandbox, batch.device, batch.fingerprint, batch.references,
                  C.LiveDiagnoser(course.tolerances), batch.demos, batch.origin)
    unwritten: list[str] = []
    outputs.retire(batch.origin, batch.found)
    results, todo = _kept_and_todo(batch, force)
    outputs.write_csv()
    resumed = len(results)
    task = progress.add_task("grading", total=len(batch.found.submissions), completed=resumed) if progress else None
    start = time.perf_counter()
    write_seconds = 0.0
    # A submission that cannot be graded (no student, unknown assignment) fails here at once: no sandbox.
    local = [s for s in todo if s.problem]
    rest = [s for s in todo if not s.problem]
    config = lane_config(batch, sandbox, outputs.language, isolation)
    # The lanes this batch starts, and so closes: none on a cluster, none where the caller started them.
    if scheduler is None and lanes is None and sandbox is not None:
        lanes = owned = batch_lanes(jobs, len(rest), sandbox, config, processes)[0]
    else:
        owned = None
    stream = (cluster_results(scheduler, config, rest, ctx, local=local) if scheduler is not None
              else _local_results(ctx, local + rest, jobs, lanes, config))
    try:
        for sub, result, rendered in stream:
            t0 = time.perf_counter()
            written = record_or_fail(outputs, result, sub, ctx, unwritten, rendered)
            write_seconds += time.perf_counter() - t0
            if written is None:
                continue
            results[written["key"]] = written
            if on_result:
                on_result(written)
            if progress:
                progress.advance(task)
    except BaseException:
        ctx.stopping.set()  # before the sandbox goes: no half-graded submission gets written
        raise
    finally:
        stream.close()
        if owned is not None:
            owned.close()
        outputs.write_csv()
    seconds = time.perf_counter() - start
    ordered = [results[s.key] for s in batch.found.submissions if s.key in results]
    return BatchOutcome(ordered, len(ordered) - resumed, resumed, seconds, write_seconds=write_seconds,
                        unwritten=unwritten, lanes=_described(lanes))


def _kept_and_todo(batch: Plan, force: bool) -> tuple[dict[str, dict[str, Any]], list[Submission]]:
    """Split the batch: the results an earlier run left that still stand (by key), and the submissions to grade."""
    outputs = batch.outputs
    results: dict[str, dict[str, Any]] = {}
    todo: list[Submission] = []
    for sub in batch.found.submissions:
        old = None if force else outputs.existing(sub, batch.fingerprint)
        if old is not None and old.get("origin") == batch.origin and keep_earlier(outputs, old, sub.submitted):
            results[sub.key] = old
        else:
            todo.append(sub)
    return results, todo


def _described(lanes: Lanes | None) -> str:
    """The lanes in other processes as BatchOutcome.lanes says them: "3 forked", "1 spawned (stopped early...)"."""
    described = ""
    if lanes is not None and lanes.count:
        described = f"{lanes.count} {'forked' if isinstance(lanes, ForkedLanes) else 'spawned'}"
        if lanes.problem is not None:
            described += " (stopped early; this process graded the rest)"
    return described


def _pinner(jobs: int, remote: int) -> Callable[[], None]:
    """A grading thread's initializer: each thread here on a CPU of its own (see autograder.sandbox.affinity);
    the lane processes hold the last ``remote`` of them."""
    cpus = lane_cpus(jobs)
    started = itertools.count()

    def pin() -> None:
        k = next(started)
        pin_lane(cpus[k] if cpus is not None and k < len(cpus) - remote else None)

    return pin


def _local_results(ctx: GradingContext, todo: list[Submission], jobs: int, lanes: Lanes | None,
                   config: dict[str, Any]) -> Generator[tuple[Submission, dict[str, Any], Any], None, None]:
    """Grade ``todo`` with threads here and the ``lanes`` processes; yield each result as it is ready.

    Each lane process holds one submission at a time, so a lane that is still starting takes none from the
    threads; a lane process that fails or dies gives its submission back to the threads (nothing is lost).
    """
    # A submission that cannot be graded (no student, unknown assignment) is named here at once, never by
    # a lane: it needs no sandbox, and its message in the course's language stays with it.
    quick = collections.deque(s for s in todo if s.problem)
    queue = collections.deque(s for s in todo if not s.problem)
    remote = lanes.count if lanes is not None and lanes.alive else 0
    threads = max(1, jobs - remote)
    # Each next worker forked while this one's submission is graded, where the lanes leave a core for it to
    # set itself up on; where they leave none but each lane has a CPU for each side, ordered when a worker
    # closes (its set-up then runs while the lane writes that result and reads the next notebook: see
    # Sandbox.keep_spare); else none (it would only take the lanes' CPUs). The lanes are forked already. The
    # spare and its thread go when the batch ends; the lane processes are told in the config.
    free_core = core_to_spare(jobs)
    spares = len(queue) > 1 and (free_core or split_lanes(jobs))
    config = {**config, "spare": spares, "spare_when_closed": spares and not free_core}
    spare = ctx.sandbox if spares and hasattr(ctx.sandbox, "keep_spare") else None
    if spare is not None:
        spare.keep_spare(when_closed=not free_core)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade",
                              initializer=_pinner(jobs, remote))
    handout = _Handout(ctx, lanes, config, pool, threads, jobs, quick, queue)
    interrupted = False
    try:
        handout.feed()
        while handout.pending:
            done, _ = wait(handout.pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                finished = handout.finished(fut)
                if finished is not None:
                    yield finished
            handout.feed()
    except BaseException:
        interrupted = True
        ctx.stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if lanes is not None:
            lanes.close(kill=True)
        raise
    finally:
        if not interrupted:
            pool.shutdown(wait=True)
        if spare is not None:
            spare.drop_spare()


@dataclass
class _Handout:
    """Who grades what in :func:`_local_results`: a lane process one submission at a time, the threads here the rest."""

    ctx: GradingContext
    lanes: Lanes | None
    config: dict[str, Any]
    pool: ThreadPoolExecutor
    threads: int
    jobs: int
    quick: collections.deque[Submission]      # fail at once, always here
    queue: collections.deque[Submission]      # to grade, in a lane process or here
    pending: dict[Future[Any], tuple[Submission, bool]] = field(default_factory=dict)   # -> (sub, in a lane)

    def feed(self) -> None:
        """Hand out waiting submissions: one to each idle lane process, then one to each idle thread here."""
        lanes, queue, quick, pending = self.lanes, self.queue, self.quick, self.pending
        here = sum(1 for _s, far in pending.values() if not far)
        away = len(pending) - here
        while queue and lanes is not None and lanes.alive and away < lanes.count:
            sub = queue.popleft()
            pending[lanes.submit(self.config, sub)] = (sub, True)
            away += 1
        # Lanes here: the threads left to this process, or all of them once the lane processes have stopped.
        while (quick or queue) and here < (self.threads if lanes is not None and lanes.alive else max(1, self.jobs)):
            sub = quick.popleft() if quick else queue.popleft()
            pending[self.pool.submit(grade_or_fail, sub, self.ctx)] = (sub, False)
            here += 1

    def finished(self, fut: Future[Any]) -> tuple[Submission, dict[str, Any], Any] | None:
        """Take a finished grading off the pending: what to yield, or None (nothing to write, or back to the queue)."""
        sub, far = self.pending.pop(fut)
        if not far:
            result = fut.result()
            return None if result is None else (sub, result, None)
        try:
            payload = json.loads(fut.result())
        except Exception as exc:  # noqa: BLE001 - the lane process died or could not start
            assert self.lanes is not None     # far: it went to a lane process
            self.lanes.failed(exc)
            self.queue.appendleft(sub)      # graded again, here
            return None
        if payload is None:
            return None
        feedback = payload.get("feedback")
        return sub, payload["result"], tuple(feedback) if feedback else None
