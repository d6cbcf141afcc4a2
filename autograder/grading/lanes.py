"""Lanes in other processes: trusted grader processes, each with a sandbox of its own, grading
submissions sent as plain JSON and answering with JSON text (also what a Dask worker runs). They are
forked (:class:`ForkedLanes`) from a process with no other thread, as torch needs; where forking is
refused (:func:`fork_problem` says why) they are started with ``spawn`` (:class:`ProcessLanes`).
"""
from __future__ import annotations

import abc
import atexit
import hashlib
import json
import logging
import multiprocessing
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import Pipe, util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from autograder import catalog as C
from autograder.course.config import Course, Limits, load_course
from autograder.core.errors import AutograderError
from autograder.grading.grader import GradingContext, check_catalog, grader_fingerprint
from autograder.grading.outputs import Outputs, render_feedback
from autograder.grading.submission import grade_or_fail
from autograder.grading.submissions import Submission
from autograder.sandbox.affinity import LaneCpus, pin_lane
from autograder.sandbox.launch import write_owner

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


# -- lanes in other processes -------------------------------------------------------------
class PlanFacts(Protocol):
    """What a lane's configuration reads of a batch's plan: :class:`autograder.grading.batch.Plan`, named here,
    not imported (batch.py starts the lanes)."""

    @property
    def outputs(self) -> Outputs: ...

    @property
    def device(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def origin(self) -> str: ...

    @property
    def demos(self) -> dict[str, dict[str, str]]: ...

    @property
    def references(self) -> Mapping[str, Any]: ...


def lane_config(batch: PlanFacts, sandbox: Any, language: str, isolation: str | None = None) -> dict[str, Any]:
    """Everything a lane in another process (or on another machine) needs to grade like this one: plain JSON.

    The lanes cage their workers as ``sandbox`` does (its mode), else as ``isolation`` says ("none" for
    --no-isolation; None: the best the lane's machine offers).
    """
    course = batch.outputs.course
    limits = getattr(sandbox, "limits", None) or course.limits
    chosen = getattr(sandbox, "isolation", None)
    return {"course": course.model_dump(mode="json"), "course_root": str(course.root),
            "device": batch.device, "fingerprint": batch.fingerprint,
            "origin": batch.origin, "demos": batch.demos, "language": language,
            "assignments": sorted({a.id for a in course.assignments
                                   if any(e.id in batch.references for e in a.exercises)}),
            "limits": limits.model_dump(mode="json"),
            "isolation": chosen.mode if chosen is not None else isolation,
            "max_restarts": getattr(sandbox, "max_restarts", 2)}


def submission_json(sub: Submission) -> dict[str, Any]:
    """A submission as plain JSON (its path is where *this* machine has it)."""
    return {"path": str(sub.path), "source": sub.source, "sha256": sub.sha256, "student": sub.student,
            "assignment": sub.assignment, "problem": sub.problem,
            "evidence": json.loads(json.dumps(sub.evidence, default=str))}


class LaneSetupError(AutograderError):
    """A lane cannot grade as the batch asks (another kit version, no sandbox): the batch's fault, not a row's."""


#: This process's lane state: its sandbox (one per process) and a GradingContext per batch configuration.
_LANE: dict[str, Any] = {}


_LANE_LOCK = threading.Lock()


def _lane_sandbox(limits: Any, device: str, isolation: str | None, max_restarts: int = 2) -> Any:
    """This process's sandbox, started on first use (one warm template per lane process)."""
    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    key = json.dumps([limits.model_dump(mode="json"), device, max_restarts], sort_keys=True)
    box = _LANE.get("sandbox")
    if box is not None and _LANE.get("sandbox_key") == key and not box.closed \
            and isolation in (None, box.isolation.mode):
        return box
    if box is not None:
        box.close()
    modes = None if isolation in (None, "none") else (isolation,)
    box = Sandbox(limits, device, isolation=isolation != "none", modes=modes, max_restarts=max_restarts)
    _LANE.update(sandbox=box, sandbox_key=key)
    # A lane process ends without atexit (multiprocessing, Dask's nanny): close the sandbox either way.
    util.Finalize(None, box.close, exitpriority=10)
    atexit.register(box.close)
    return box


def lane_warm(config: dict[str, Any]) -> int:
    """Import what grading needs (torch, the batch's catalog) and start this process's sandbox."""
    import torch


    torch.set_num_threads(1)
    with _LANE_LOCK:
        C.load_catalog(load_course(config["course_root"]), hidden=True, mistakes=True)
        _lane_context(config)
    return os.getpid()


def _lane_context(config: dict[str, Any]) -> GradingContext:
    """The grading context of ``config`` in this process (made once; the caller holds _LANE_LOCK)."""
    # ("spare" is how the batch runs, not what grades: the lane warmed without it is the same lane.)
    same = {k: v for k, v in config.items() if k != "spare"}
    key = hashlib.sha256(json.dumps(same, sort_keys=True, default=str).encode()).hexdigest()
    contexts = _LANE.setdefault("contexts", {})
    if key in contexts:
        return cast(GradingContext, contexts[key])
    import torch


    torch.set_num_threads(1)
    device = config["device"]
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    course = _lane_course(config)
    fingerprint = grader_fingerprint(device, course)
    if fingerprint != config["fingerprint"]:
        raise LaneSetupError(f"this grader's checks, references or course.yml differ from the batch's "
                             f"(fingerprint {fingerprint}, the batch's {config['fingerprint']})",
                             hint="install the same version of the kit on every grading machine")
    references = check_catalog(course, set(config["assignments"]))
    sandbox = _lane_sandbox(Limits.model_validate(config["limits"]), device, config["isolation"],
                            int(config.get("max_restarts", 2)))
    ctx = GradingContext(course, sandbox, device, fingerprint, references, C.LiveDiagnoser(course.tolerances),
                  config["demos"], config["origin"])
    contexts[key] = ctx
    return ctx


def _lane_course(config: dict[str, Any]) -> Course:
    """The batch's course, read from the same folder on this machine (a lane grades with the course's
    checks and references, which are files): it must say what the batch's says."""
    try:
        course = load_course(config["course_root"])
    except AutograderError as exc:
        raise LaneSetupError(f"this grader cannot read the batch's course at {config['course_root']} ({exc.message})",
                             hint="every grading machine needs the course at the same path") from None
    if course.model_dump(mode="json") != config["course"]:
        raise LaneSetupError(f"{course.root / 'course.yml'} on this machine differs from the batch's",
                             hint="every grading machine needs the same course")
    return course


def lane_grade(config: dict[str, Any], sub: dict[str, Any], notebook: bytes | None = None) -> str:
    """Grade one submission in this process's lane: JSON text of {"result", "feedback"} (or null).

    ``sub`` is :func:`submission_json`; ``notebook``, when given, is the file's bytes (a lane on another
    machine cannot read the client's path). The result is :func:`grade_or_fail`'s, so a submission's
    failure is caught and finalized where it always is; only plain JSON text leaves.
    """
    with _LANE_LOCK:
        ctx = _lane_context(config)
        if ctx.sandbox is not None and config.get("spare"):
            # a lane grades one submission after another (see _local_results)
            ctx.sandbox.keep_spare(when_closed=bool(config.get("spare_when_closed")))
    fields = dict(sub)
    fields["path"] = Path(fields["path"])
    submission = Submission(**fields)
    scratch = None
    try:
        if notebook is not None:
            # In the sandbox's folder, which goes with the sandbox (or, if this process is killed, at the
            # next start of a sandbox here): no copy of a submission is left behind in /tmp.
            fd, scratch = tempfile.mkstemp(prefix="autograder-lane-", suffix=".ipynb",
                                           dir=getattr(ctx.sandbox, "folder", None))
            with os.fdopen(fd, "wb") as f:
                f.write(notebook)
            submission.path = Path(scratch)
        result = grade_or_fail(submission, ctx)
    finally:
        if scratch is not None:
            os.unlink(scratch)
    if result is None:
        return "null"
    try:
        feedback: Any = list(render_feedback(result, ctx.course, config["language"]))
    except Exception:  # noqa: BLE001 - the writer renders it again, and names a failure there
        feedback = None
    return json.dumps({"result": result, "feedback": feedback}, ensure_ascii=False, allow_nan=False)


def _lane_process_init() -> None:
    """A lane process: Ctrl-C is the parent's to handle (it stops the lanes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)


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
    anything). Where :class:`ForkedLanes` cannot be used (see :func:`start_lanes`).
    """

    def __init__(self, count: int, config: dict[str, Any]):
        self.count = count
        self.alive = count > 0
        self.problem: BaseException | None = None
        self.pids: list[int] = []
        self._pool = ProcessPoolExecutor(max_workers=max(count, 1), mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_lane_process_init)
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
    _LANE.clear()
    _LANE.update(sandbox=box, sandbox_key=key)
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
