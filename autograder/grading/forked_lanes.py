"""Lanes forked from this process: trusted grader processes, each a copy of this one once its sandbox is
warm (torch, the catalog and the references loaded already), with a sandbox of its own whose template is a
copy of this one's (:class:`ForkedLanes`). Ready in milliseconds where a spawned lane
(:class:`~autograder.grading.lanes.ProcessLanes`) takes seconds, but safe only from a process with no other
thread and no CUDA context (:func:`fork_problem` says why not); :func:`start_lanes` forks where it may and
spawns otherwise.

Both ends of a lane's pipe are the kit's own processes and trust each other: plain JSON crosses it, a
submission one way and :func:`~autograder.grading.lane_grading.lane_grade`'s JSON text the other.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from multiprocessing import Pipe
from typing import TYPE_CHECKING, Any

from autograder.core.errors import AutograderError
from autograder.grading.lane_grading import adopt_sandbox, lane_grade, submission_json
from autograder.grading.lanes import Lanes, ProcessLanes
from autograder.grading.submissions import Submission
from autograder.sandbox.affinity import LaneCpus, pin_lane
from autograder.sandbox.launch import write_owner

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


# -- lanes forked from this process -----------------------------------------------------------
class LaneStopped(Exception):
    """A forked lane process died or answered something other than a result."""


def fork_problem() -> str | None:
    """Why this process should not fork grader lanes now (None: it may).

    A fork copies one thread: a lock another thread holds (an import half done, a torch thread pool
    after a parallel op) would stay held in the copy forever. Python's own threads other than the
    sandbox's reaper (idle once :meth:`Sandbox.settle` returned), any thread Python did not start
    (torch's or a BLAS library's pool) and an initialized CUDA make the answer no.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialized in this process (a CUDA context does not survive a fork)"

    # A Python thread just joined (the import thread) may still be an exiting task of the kernel's for a
    # moment: count again for up to half a second before calling a thread foreign.
    deadline = time.monotonic() + 0.5
    while True:
        try:
            tasks = len(os.listdir("/proc/self/task"))
        except OSError:
            return "no /proc/self/task to count this process's threads"
        python = threading.enumerate()
        if tasks <= len(python):
            break
        if time.monotonic() > deadline:
            return f"{tasks - len(python)} threads not started by Python (a library's thread pool)"
        time.sleep(0.01)
    others = [t.name for t in python if t is not threading.current_thread() and t.name != "sandbox-reaper"]
    if others:
        return f"threads running: {', '.join(others[:3])}"
    return None


class ForkedLanes(Lanes):
    """``count`` trusted grader processes forked from this one once its sandbox is warm: each holds a copy
    of everything imported and loaded here (torch, the catalog, the references) and a sandbox of its own,
    whose template is a copy of this sandbox's (:meth:`Sandbox.clone_template`). Ready in milliseconds,
    where a spawned lane (:class:`ProcessLanes`) imports torch and starts a template for seconds.

    The same interface as ProcessLanes: :meth:`submit` gives a Future of :func:`lane_grade`'s JSON text.
    Plain JSON both ways on a pipe (the standard library's framing, :func:`multiprocessing.Pipe`: both
    ends are trusted grader processes); this process writes every result, as with every lane.
    Start only where :func:`fork_problem` says None.
    """

    def __init__(self, count: int, sandbox: Any, cpus: list[LaneCpus] | None = None):
        self.count = 0
        self.alive = count > 0
        self.problem: BaseException | None = None
        self.pids: list[int] = []
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._socks: list[Connection] = []
        self._threads: list[threading.Thread] = []
        sandbox.settle()
        try:
            for i in range(count):
                self._fork_one(sandbox, cpus[i] if cpus is not None and i < len(cpus) else None)
        except BaseException:
            self.close(kill=True)      # the lanes forked so far: none is left behind
            raise
        # Threads only now: every fork above copied a process with no thread but the idle reaper.
        for sock in self._socks:
            thread = threading.Thread(target=self._pump, args=(sock,), name="lane-pump", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _fork_one(self, sandbox: Any, cpus: LaneCpus | None = None) -> None:
        launch = sandbox.clone_template()
        try:
            ours, theirs = Pipe(duplex=True)
        except BaseException:
            launch.close()     # the copy of the template sees its channel close and stops
            raise
        try:
            pid = os.fork()
        except BaseException:
            for end in (ours, theirs):
                end.close()
            launch.close()
            raise
        if pid == 0:   # the lane
            code = 70
            try:
                ours.close()
                for sock in self._socks:
                    sock.close()
                pin_lane(cpus)      # this lane and the workers it forks on CPUs of their own
                code = _forked_lane(theirs, launch, sandbox)
            except BaseException:  # noqa: BLE001 - said on stderr; the parent sees the channel close
                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        launch.sock.close()
        if launch.proc.pidfd is not None:
            os.close(launch.proc.pidfd)
        self._socks.append(ours)
        self.pids.append(pid)
        self.count += 1

    def _pump(self, sock: Connection) -> None:
        """Hand this lane one submission at a time; its answer (or its death) completes the Future."""
        while True:
            item = self._jobs.get()
            if item is None:
                return
            fut, payload = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                sock.send_bytes(payload)
                reply = json.loads(sock.recv_bytes())
                if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
                    raise LaneStopped(str(reply.get("error") if isinstance(reply, dict) else reply)[:500])
            except BaseException as exc:  # noqa: BLE001 - the lane is gone: its submission goes back
                fut.set_exception(exc if isinstance(exc, LaneStopped) else LaneStopped(f"{type(exc).__name__}: {exc}"))
                return
            fut.set_result(reply["text"])

    def submit(self, config: dict[str, Any], sub: Submission) -> Future[str]:
        fut: Future[str] = Future()
        self._jobs.put((fut, json.dumps({"config": config, "sub": submission_json(sub)}).encode()))
        return fut

    def close(self, kill: bool = False) -> None:
        """Stop the lanes: each sees its channel close, stops its sandbox and exits (at once with ``kill``)."""
        self.alive = False
        for _ in self._threads:
            self._jobs.put(None)
        for sock in self._socks:
            try:
                sock.close()
            except OSError:
                pass
        if kill:
            for pid in self.pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        deadline = time.monotonic() + 15
        for pid in self.pids:
            _reap(pid, deadline)
        self.pids = []


def _reap(pid: int, deadline: float) -> None:
    """Wait for the lane process ``pid`` to exit; past ``deadline`` (time.monotonic) kill it, then wait."""
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        time.sleep(0.01)


def _forked_lane(chan: Connection, launch: Any, parent_sandbox: Any) -> int:
    """The loop of a lane forked by :class:`ForkedLanes`: grade each submission sent, answer JSON text."""
    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's: it stops the lanes
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The parent's template must see its channel close when the parent goes, not when this lane does.
    parent_sandbox.leave_template()
    write_owner(launch.folder)
    box = Sandbox(parent_sandbox.limits, parent_sandbox.device, isolation=parent_sandbox.isolation.mode != "none",
                  modes=(parent_sandbox.isolation.mode,), max_restarts=parent_sandbox.max_restarts, launch=launch)
    key = json.dumps([parent_sandbox.limits.model_dump(mode="json"), parent_sandbox.device,
                      parent_sandbox.max_restarts], sort_keys=True)
    adopt_sandbox(box, key)
    try:
        while True:
            try:
                request = json.loads(chan.recv_bytes())
            except (EOFError, OSError):
                return 0
            try:
                reply = {"text": lane_grade(request["config"], request["sub"])}
            except Exception as exc:  # noqa: BLE001 - a batch this lane cannot grade (LaneSetupError...)
                reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            chan.send_bytes(json.dumps(reply).encode("ascii"))    # ASCII: a lone surrogate survives
    finally:
        box.close()


def start_lanes(count: int, sandbox: Any, config: dict[str, Any],
                spawn_count: int, cpus: list[LaneCpus] | None = None) -> tuple[Lanes | None, str | None]:
    """``count`` lanes in other processes, forked from this one where :func:`fork_problem` allows, else
    ``spawn_count`` of them spawned (seconds each to start: only for batches worth it; None for none),
    and why they were not forked (None when they were, or none were wanted); forked lane i runs on
    ``cpus[i]`` where given (see :mod:`autograder.sandbox.affinity`)."""
    problem = None
    if count > 0:
        problem = fork_problem() if callable(getattr(sandbox, "clone_template", None)) else \
            "the sandbox cannot copy its template"
    if count > 0 and problem is None:
        try:
            return ForkedLanes(count, sandbox, cpus), None
        except (OSError, AutograderError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        logging.getLogger(__name__).info("grading lanes are not forked (%s)", problem)
    return (ProcessLanes(spawn_count, config) if spawn_count > 0 else None), problem
