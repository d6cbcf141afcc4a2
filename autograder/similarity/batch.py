"""Reading a batch's notebooks for the comparison: in this process, or, for a large batch on a machine with
several cores, in worker processes forked from this one, each reading its share.

Reading is most of the report's time (a notebook's bytes through the grader's gate, its cells parsed, its
functions normalized: a few milliseconds each), and notebooks are independent: ``-j`` is the machine's cores
(the CPUs this process may use), and a batch of at least :data:`PARALLEL_FROM` notebooks is read by that many
processes. They are forked only while this process has no other thread (a lock another thread held would stay
held in the copy); otherwise, and where ``fork`` does not exist, the batch is read here. Only
:class:`~autograder.similarity.corpus.Work` objects come back, pickled between processes of this one program.
Nothing of a notebook runs in any of them.

A notebook that cannot be read is named with why (its message names the file), never a stop of the batch.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from autograder.core.errors import AutograderError, NotebookError
from autograder.core.text import line
from autograder.course.config import Course
from autograder.grading.submissions import Discovery, Submission
from autograder.similarity.corpus import Work, read_work

#: The least notebooks read by several processes (fewer: forking costs more than it saves).
PARALLEL_FROM = 120
#: Notebooks a worker process reads per round trip.
CHUNK = 8

#: (path, source, student, assignment, when it came, the sha256 of bytes that passed the gate in discovery)
Task = tuple[Any, str, str, str, Any, "str | None"]
#: The course the forked workers read for (set before they are forked: each has its copy).
_COURSE: list[Course] = []


def tasks_of(found: Discovery) -> tuple[list[Task], list[str]]:
    """The notebooks to read (each as a :data:`Task`), and a line for each discovery could not name."""
    skipped = [line(f"{s.source}: {s.problem}", 400) for s in found.submissions if s.problem]
    todo = [_task(s) for s in found.submissions if not s.problem and s.student and s.assignment]
    return todo, skipped


def _task(sub: Submission) -> Task:
    evidence = sub.evidence.get("notebook")
    passed = sub.sha256 if getattr(evidence, "readable", False) else None
    return sub.path, sub.source, str(sub.student), str(sub.assignment), sub.submitted, passed


def workers(count: int) -> int:
    """How many processes read ``count`` notebooks: this one alone unless the batch is large, the machine has
    several cores and this process may fork."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if count < PARALLEL_FROM or cores < 2 or not hasattr(os, "fork") or not single_threaded():
        return 1
    return min(cores, 8)


def single_threaded() -> bool:
    """Whether this process runs one thread only (Python's and any other), so that a fork copies no held lock."""
    try:
        return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


@contextlib.contextmanager
def reading(tasks: list[Task], course: Course, processes: int) -> Iterator[Iterator[Work | str]]:
    """Each task read, in order (an iterator): its Work, or one line naming the notebook and why it could not be
    read. With ``processes`` > 1 the workers are forked on entering (before the caller starts any thread: a
    progress bar's), and stopped on leaving."""
    if processes <= 1:
        yield (read_one(task, course) for task in tasks)
        return
    _COURSE[:] = [course]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool.map(_forked, tasks, chunksize=CHUNK)      # every task submitted: the workers are forked now


def _forked(task: Task) -> Work | str:
    return read_one(task, _COURSE[0])


def read_one(task: Task, course: Course) -> Work | str:
    """One notebook read (see :func:`autograder.similarity.corpus.read_work`), or why not."""
    path, source, student, assignment, submitted, passed = task
    try:
        return read_work(path, source, student, course.assignment(assignment), course, submitted, passed=passed)
    except NotebookError as exc:            # its message names the notebook already
        return line(exc.message, 400)
    except AutograderError as exc:
        return line(f"{source}: {exc.message}", 400)
    except (RecursionError, MemoryError) as exc:
        return line(f"{source}: not compared ({type(exc).__name__})", 400)


def collect(results: Iterable[Work | str], advance: Callable[[], None]) -> tuple[list[Work], list[str]]:
    """(the works read, a line for each notebook that could not be read, or left a function out)."""
    works: list[Work] = []
    skipped: list[str] = []
    for result in results:
        if isinstance(result, str):
            skipped.append(result)
        else:
            works.append(result)
            skipped += [line(f"{result.source}: {note}", 400) for note in result.notes]
        advance()
    return works, skipped
