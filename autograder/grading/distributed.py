"""``autograder grade SUBMISSIONS -o OUT --scheduler ADDRESS``: grade on a Dask distributed cluster.

An optional extra (``pip install '.[dask]'``): Dask is imported only here, and this module only when
``--scheduler`` is given, so the kit works without it.

The client (the ``autograder grade`` process) discovers the submissions, decides what is already done
(resuming as a local run does) and sends each remaining one to the cluster as one task:
:func:`autograder.grading.lane_grade` with the batch's configuration (plain JSON: course, device,
grader fingerprint, limits, cage mode) and the notebook's bytes. Each Dask worker process builds its
grading context once and holds its own warm sandbox (:func:`autograder.grading.lane_grading._lane_sandbox`), so
student code runs caged on the worker machines exactly as it does locally, and only JSON text comes
back: the finalized result and its rendered feedback. The client stays the one writer of
``results/``, ``feedback/``, ``grades.csv``, the LMS CSVs and ``report.html``.

A worker that dies mid-batch loses nothing: Dask's scheduler gives its tasks to another worker (a
task whose workers keep dying, ``distributed.scheduler.allowed-failures`` times, becomes this
submission's grader-fault row, retried on the next run). A worker whose kit differs from the
client's (another grader fingerprint) stops the batch with an error rather than grade differently.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from autograder.core.errors import AutograderError
from autograder.grading.lane_grading import LaneSetupError, lane_grade, submission_json
from autograder.grading.submission import finalize, grade_or_fail, grader_fault
from autograder.grading.submissions import Submission

if TYPE_CHECKING:
    from autograder.grading.grader import GradingContext

#: Tasks in flight at once per worker thread of the cluster (at least MIN_WINDOW): bounded memory on the
#: scheduler for thousands of notebooks, and every worker kept busy.
TASKS_PER_THREAD = 4
MIN_WINDOW = 16


def connect(scheduler: Any) -> tuple[Any, bool]:
    """A Dask Client for ``scheduler`` (an address such as ``tcp://host:8786``, or a Client already made):
    (client, whether we made it and so must close it)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise AutograderError("--scheduler needs Dask's distributed scheduler, which is not installed",
                              hint="pip install '.[dask]' (or pip install 'dask[distributed]')") from None
    if isinstance(scheduler, Client):
        return scheduler, False
    try:
        return Client(scheduler, timeout="30s", set_as_default=False), True
    except (OSError, TimeoutError) as exc:
        raise AutograderError(f"--scheduler {scheduler}: cannot connect ({type(exc).__name__}: {exc})",
                              hint="give the address the scheduler prints (tcp://HOST:8786), and check "
                                   "that this machine can reach it") from None


def _threads(client: Any) -> int:
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # noqa: BLE001 - a guess is enough for the window
        return 1


def _sendable(sub: Submission, limit: int) -> bytes | None:
    """The notebook's bytes to send to the cluster; None for one unreadable, empty or over ``limit`` bytes."""
    try:
        return sub.path.read_bytes() if 0 < sub.path.stat().st_size <= limit else None
    except OSError:
        return None


def cluster_results(scheduler: Any, config: dict[str, Any], subs: list[Submission], ctx: GradingContext, *,
                    local: Sequence[Submission] = ()) -> Generator[tuple[Submission, dict[str, Any], Any], None, None]:
    """Grade ``subs`` on the cluster; yield (submission, result, (markdown, html) or None) as each is ready.

    ``local`` (submissions that fail before any code runs: no student, unknown assignment) and notebooks
    that cannot be sent (unreadable, over ``limits.notebook_mb``: they fail reading, without a sandbox)
    are graded here, through :func:`autograder.grading.grade_or_fail` like every other.
    """
    for sub in local:
        yield from _here(sub, ctx)
    if not subs:
        return
    client, owned = connect(scheduler)
    from dask.distributed import as_completed

    limit = int(ctx.course.limits.notebook_mb * 2**20)
    window = max(MIN_WINDOW, TASKS_PER_THREAD * _threads(client))
    queue = list(reversed(subs))
    running: dict[Any, Submission] = {}
    batch_id = uuid.uuid4().hex[:8]
    # This client's own loop: as_completed() would otherwise look for a default client, and the one made by
    # connect() is not (set_as_default=False: this process may hold a client of its own, a test's).
    done = as_completed(loop=client.loop)

    def submit_more() -> Iterator[tuple[Submission, dict[str, Any], Any]]:
        while queue and len(running) < window:
            sub = queue.pop()
            data = _sendable(sub, limit)
            if data is None:
                yield from _here(sub, ctx)
                continue
            future = client.submit(lane_grade, config, submission_json(sub), data, pure=False, retries=1,
                                   key=f"autograder-grade-{batch_id}-{len(queue)}")
            running[future] = sub
            done.add(future)

    try:
        yield from submit_more()
        while running:
            future = next(done)
            sub = running.pop(future)
            try:
                row = _task_row(future, sub, ctx)
                if row is not None:
                    yield row
            finally:
                future.release()
            yield from submit_more()
    finally:
        _cancel_and_close(running, client, owned)


def _here(sub: Submission, ctx: GradingContext) -> Iterator[tuple[Submission, dict[str, Any], Any]]:
    """Grade ``sub`` in this process, without the cluster: its row, unless there is none to write."""
    result = grade_or_fail(sub, ctx)
    if result is not None:
        yield sub, result, None


def _task_row(future: Any, sub: Submission, ctx: GradingContext) -> tuple[Submission, dict[str, Any], Any] | None:
    """What a finished task gives to write: the worker's result and feedback, or this submission's grader-fault row."""
    try:
        text = future.result()
    except LaneSetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - KilledWorker and the like: this submission's row
        result = finalize(grader_fault(sub, ctx, exc, step="on the cluster"))
        result["graded_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return sub, result, None
    payload = json.loads(text)
    if payload is None:
        return None
    feedback = payload.get("feedback")
    return sub, payload["result"], tuple(feedback) if feedback else None


def _cancel_and_close(running: dict[Any, Submission], client: Any, owned: bool) -> None:
    """Cancel the tasks still on the cluster, and close the client if this batch made it."""
    for future in running:
        future.cancel()
    if owned:
        client.close()


def cluster_description(scheduler: Any) -> str:
    """One line on the cluster: its workers and threads (for the first lines of ``autograder grade``)."""
    client, owned = connect(scheduler)
    try:
        threads = client.nthreads()
        return f"{len(threads)} Dask workers, {sum(threads.values())} threads at {client.scheduler.address}"
    except Exception:  # noqa: BLE001 - only a description
        return f"Dask scheduler {scheduler}"
    finally:
        if owned:
            client.close()


__all__ = ["cluster_description", "cluster_results", "connect"]
