"""Lanes in other processes: trusted grader processes, each with a sandbox of its own, grading
submissions sent as plain JSON and answering with JSON text (also what a Dask worker runs). They are
forked (:class:`~autograder.grading.forked_lanes.ForkedLanes`) from a process with no other thread, as torch
needs; where forking is refused (:func:`~autograder.grading.forked_lanes.fork_problem` says why) they are
started with ``spawn`` (:class:`ProcessLanes`); :func:`~autograder.grading.forked_lanes.start_lanes` chooses.

This module holds what the batch needs of lanes either way (:class:`Lanes`) and the spawned ones. What a lane
runs is :mod:`autograder.grading.lane_grading`'s; the lane processes are the kit's own, and trusted.
"""
from __future__ import annotations

import abc
import logging
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from autograder.grading.lane_grading import lane_grade, lane_process_init, lane_warm, submission_json
from autograder.grading.submissions import Submission


# -- lanes in other processes -------------------------------------------------------------
class Lanes(abc.ABC):
    """What the batch needs of lanes in other processes, whichever way they started."""

    count: int                          # lane processes started
    alive: bool
    problem: BaseException | None
    pids: list[int]

    @abc.abstractmethod
    def submit(self, config: dict[str, Any], sub: Submission) -> Future[str]:
        """Grade ``sub`` in a lane process: a Future of :func:`lane_grade`'s JSON text."""

    @abc.abstractmethod
    def close(self, kill: bool = False) -> None:
        """Stop the lane processes (at once with ``kill``)."""

    def failed(self, exc: BaseException) -> None:
        """A lane process could not grade (its start failed, it died, it refused the batch): the threads
        here take over."""
        if self.alive:
            logging.getLogger(__name__).warning("grading lanes in other processes stopped (%s: %s); "
                                                "this process grades the rest", type(exc).__name__, exc)
        self.alive = False
        self.problem = exc


class ProcessLanes(Lanes):
    """``count`` trusted grader processes (multiprocessing, ``spawn``), each with a sandbox of its own.

    ``spawn`` starts a fresh interpreter: nothing of the parent's threads, torch state or CUDA context
    is forked, and each process starts its own sandbox template (which forks workers before it computes
    anything). Where :class:`~autograder.grading.forked_lanes.ForkedLanes` cannot be used (see
    :func:`~autograder.grading.forked_lanes.start_lanes`).
    """

    def __init__(self, count: int, config: dict[str, Any]):
        self.count = count
        self.alive = count > 0
        self.problem: BaseException | None = None
        self.pids: list[int] = []
        self._pool = ProcessPoolExecutor(max_workers=max(count, 1), mp_context=multiprocessing.get_context("spawn"),
                                         initializer=lane_process_init)
        self._warming = [self._pool.submit(lane_warm, config) for _ in range(count)]

    def submit(self, config: dict[str, Any], sub: Submission) -> Future[str]:
        return self._pool.submit(lane_grade, config, submission_json(sub))

    def ready(self, timeout: float | None = None) -> list[int]:
        """Wait until every lane process has warmed up; their pids."""
        pids = []
        for fut in self._warming:
            try:
                pids.append(fut.result(timeout=timeout))
            except Exception as exc:  # noqa: BLE001 - a lane that could not start: failed() says so, this process grades
                self.failed(exc)
        self.pids = pids
        return pids

    def close(self, kill: bool = False) -> None:
        """Stop the lane processes: at once with ``kill`` or while one still starts (nothing left to grade)."""
        if kill or not all(fut.done() for fut in self._warming):
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                try:
                    proc.terminate()
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self._pool.shutdown(wait=not kill and all(fut.done() for fut in self._warming), cancel_futures=True)
        self.alive = False
