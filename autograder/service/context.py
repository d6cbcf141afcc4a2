"""The app's shared state, and the dependency that hands it to every route (:data:`ServiceDep`).

A route module closes over nothing: what it needs (the database engine, the course as it is now, the Hub,
the rate limits) is the :class:`Service` that :func:`autograder.service.app.create_app` keeps on the app.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from autograder.service.live import Assignments

if TYPE_CHECKING:
    from autograder.course.config import Course

#: How often the one query that serves every waiting read (``?wait=``) looks at the jobs.
LONG_POLL_EVERY = 0.05


class RateLimit:
    """A sliding minute per caller (or address) and kind: how many seconds until the next request may come, or 0."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._seen: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def wait(self, who: str, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen.setdefault(who, collections.deque())
            while seen and seen[0] <= now - 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return max(0.1, seen[0] + 60 - now)
            seen.append(now)
            return 0.0


class Finished:
    """Wakes the reads that wait for their submissions' jobs to finish (``?wait=SECONDS``).

    However many wait, one query every ``every`` seconds asks which of their jobs are done or
    failed (in a thread: the event loop never waits for the database); a read gets its answer as soon
    as the job finishes, instead of a client asking again and again. It runs only while someone waits.
    """

    def __init__(self, engine: Engine, every: float = LONG_POLL_EVERY):
        self.engine, self.every = engine, every
        self._waiting: dict[int, list[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, job: int, seconds: float) -> None:
        """Return when ``job`` has finished, or after ``seconds``."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(job, []).append(future)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch())
        try:
            await asyncio.wait_for(asyncio.shield(future), seconds)
        except asyncio.TimeoutError:
            pass
        finally:
            left = [f for f in self._waiting.get(job, []) if f is not future]
            if left:
                self._waiting[job] = left
            else:
                self._waiting.pop(job, None)

    async def _watch(self) -> None:
        while self._waiting:
            try:
                done = await run_in_threadpool(self._finished, list(self._waiting))
            except Exception:  # noqa: BLE001 - the database is away for a moment: the waits run out, or it is back
                done = []
            for job in done:
                for future in self._waiting.pop(job, []):
                    if not future.done():
                        future.set_result(None)
            await asyncio.sleep(self.every)

    def _finished(self, jobs: list[int]) -> list[int]:
        from autograder.service.tables import Job  # noqa: PLC0415 - loads sqlalchemy

        with self.engine.connect() as conn:
            return list(conn.execute(select(Job.id).where(Job.id.in_(jobs[:1000]),
                                                          Job.state.in_(("done", "failed")))).scalars())


@dataclass
class Service:
    """What the routes share: ``course`` is read afresh at each use (serve hands a live one that reloads)."""

    engine: Engine
    course: Course
    hub: Any
    requests: RateLimit
    strangers: RateLimit
    uploads: RateLimit
    max_queued: int
    finished: Finished
    #: One explanation at a time: each grades one exercise in a cage of its own.
    explaining: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))

    @property
    def assignments(self) -> Any:
        """The course's assignments by id, as they are now (a live view)."""
        return Assignments(self.course)


def service(request: Request) -> Service:
    """The app's :class:`Service` (a dependency)."""
    found: Service = request.app.state.service
    return found


ServiceDep = Annotated[Service, Depends(service)]
