"""The sandbox: student code runs only in caged worker processes; only plain data comes back.

One :class:`Sandbox` per batch starts a warm *template* process (see
:mod:`autograder.inside.template`) that has imported torch and friends but computed
nothing. :meth:`Sandbox.open` asks it to fork a fresh worker for one submission,
hands the worker the notebook's cells and returns a :class:`WorkerHandle`: the
:class:`~autograder.catalog.Runner` the checks call. Each call is a plain-data
request over a socket pair; the reply is validated here (frame, header, blob
through :func:`autograder.inside.plain.decode`) and anything else — garbage, a
truncated frame, a dead or silent worker — becomes a ``Reply`` with status
``crashed``, ``timeout`` or ``too_large``, never an exception of the grader.

The cage (:mod:`autograder.inside.cage`): the first probe worker of a batch finds the best mode
this machine offers (namespaces and an empty tmpfs root as root or in a user namespace of
its own, else Landlock), every worker enters it right after its fork, and
:attr:`Sandbox.isolation` says which, for every result. Where no mode can be set up the
sandbox refuses (SandboxError) unless it was asked for no isolation at all.

Limits (course.yml ``limits``): ``call_seconds`` of wall time per call and per
cell, after which the worker is killed and, for the next call, forked again and
given the cells again (at most ``max_restarts`` times); ``submission_seconds``
for the whole submission, after which every call answers ``timeout`` at once;
``cpu_seconds`` (RLIMIT_CPU); ``memory_mb`` that the student's code may
allocate on top of the warm template (RLIMIT_DATA); ``file_mb``
(RLIMIT_FSIZE); ``processes`` (RLIMIT_NPROC under the worker's own uid);
``output_mb`` of tensor data per reply.

``device``: ``"cpu"`` or ``"cuda"``. The caller resolves ``"auto"`` (for example
``"cuda" if torch.cuda.is_available() else "cpu"``) before starting a sandbox.
With ``"cuda"`` each worker initializes CUDA after its fork, with TF32 off; the
request's tensors are moved to ``request.device`` by :func:`autograder.inside.probes.execute`.

The sandbox holds its template through :mod:`autograder.sandbox.control` and its spare worker (one forked
ahead) through :mod:`autograder.sandbox.spares`.
"""
from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.course.config import Limits
from autograder.core.errors import AutograderError
from autograder.course.notebook import Cell
from autograder.inside.cage import Isolation
from autograder.sandbox.calls import CHANNEL_SEND_BUFFER
from autograder.sandbox.control import TemplateControl
from autograder.sandbox.handle import WorkerHandle
from autograder.sandbox.launch import FOLDER_PREFIX, TemplateLaunch, write_owner
from autograder.sandbox.processes import (
    SLOTS,
    SandboxError,
    SpawnFailed,
    WorkerProcess,
    cage_modes,
    remove_stale_folders,
)
from autograder.sandbox.spares import Spares
from autograder.inside.protocol import MiB, WorkerConfig


log = logging.getLogger(__name__)


# -- the sandbox ----------------------------------------------------------------------------
class Sandbox:
    """One per batch: a warm template process; :meth:`open` forks a fresh worker per submission.

    Thread-safe: several threads may :meth:`open` workers at once (``-j N``); each
    :class:`WorkerHandle` belongs to the thread that uses it.
    """

    def __init__(self, limits: Limits, device: str = "cpu", *, max_restarts: int = 2,
                 start_timeout: float = 300.0, isolation: bool = True, modes: tuple[str, ...] | None = None,
                 launch: TemplateLaunch | None = None):
        if device not in ("cpu", "cuda"):
            raise AutograderError(f"--device {device}: the sandbox runs on 'cpu' or 'cuda'",
                                  hint="resolve 'auto' before starting the sandbox")
        if device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise AutograderError("--device cuda: no CUDA device is available to torch "
                                      f"(torch {torch.__version__}, torch.cuda.is_available() is False)",
                                      hint="grade with --device cpu, or --device auto to use what is there")
        self.limits = limits
        self.device = device
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        # The cages to try, best first (see autograder.inside.cage); the first probe worker that sets one up wins.
        self._modes = ("none",) if not isolation else modes or cage_modes()
        if not self._modes:
            raise SandboxError(f"AUTOGRADER_CAGE={os.environ.get('AUTOGRADER_CAGE')!r} names no cage",
                               hint="unset it, or name root, userns or landlock")
        self.isolation = Isolation(self._modes[0])
        self._reaper_lock = threading.Lock()
        self._workers: set[WorkerHandle] = set()     # open workers, closed with the sandbox if forgotten
        self._workers_lock = threading.Lock()
        self._retired: queue.Queue[WorkerProcess | None] = queue.Queue()
        self._reaper: threading.Thread | None = None
        # The spare worker (see keep_spare): forked by the "sandbox-spare" thread while a submission is graded.
        self._spares = Spares(self._spawn_raw, self.retire, lambda: self.template_pid, lambda: self._closed)
        self._closed = False
        remove_stale_folders()
        if launch is not None and launch.adopt():
            # A template launched earlier (see autograder.sandbox.launch.launch_template): its folder is ours now.
            self._base = Path(launch.folder)
        else:
            launch = None
            self._base = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
            write_owner(self._base)
        # Removed by close(), or at the latest when this object or the interpreter goes.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._base, ignore_errors=True)
        self._control = TemplateControl(self._base, start_timeout)
        self.worker_info: dict[str, Any] = {}
        try:
            self._control.start(launch)
            self._probe()
        except BaseException:
            self.close()
            raise

    def _probe(self) -> None:
        """Start one empty worker per cage mode, best first, until one sets itself up; refuse when none does.

        Fail closed: without ``isolation=False`` (``--no-isolation``) no student code runs uncaged.
        """
        if not self._control.started:
            return
        missing: dict[str, str] = {}
        for mode in self._modes:
            self.isolation = Isolation(mode)
            with self.open([], label="probe") as worker:
                problem = worker.broken
            if problem is None:
                self.worker_info = dict(worker.worker_info)
                reported = self.worker_info.get("isolation") or {}
                self.isolation = Isolation(mode, list(reported.get("layers") or []),
                                           {**missing, **(reported.get("missing") or {})})
                if missing:
                    log.warning("sandbox: isolation %s (%s)", mode,
                                "; ".join(f"{m}: {why}" for m, why in missing.items()))
                return
            missing[mode] = problem.error.removeprefix("the sandbox worker could not set itself up: ")
        tried = "; ".join(f"{mode}: {why}" for mode, why in missing.items())
        raise SandboxError(f"no cage for student code can be set up on this machine ({tried})",
                           hint="run as root or in a container that allows user namespaces, see "
                                "`autograder doctor`; or pass --no-isolation, for trusted code only",
                           missing=missing)     # mode -> why it could not be set up (autograder doctor shows it)

    @property
    def folder(self) -> Path:
        """The sandbox's own folder (its workers' folders are inside): removed when it closes, or at the next
        start of any sandbox here when its grader was killed. Trusted scratch files may go here too."""
        return self._base

    # context manager ----------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the template ---------------------------------------------------------------
    @property
    def template_pid(self) -> int:
        """The pid of the sandbox's template process (a new one after a restart)."""
        return self._control.pid

    @property
    def template_seconds(self) -> float:
        """How long the template took to be ready."""
        return self._control.seconds

    def clone_template(self) -> TemplateLaunch:
        """A copy of this sandbox's warm template, forked by it, for a sandbox in another grader process
        (a lane forked from this one): ready at once, nothing imported twice. The copy serves its own
        channel and stops, killing its workers, when that channel closes."""
        return self._control.clone()

    def _restart_template(self) -> None:
        self._control.restart(self._closed)

    # the spare worker -------------------------------------------------------------
    def keep_spare(self, when_closed: bool = False) -> None:
        """From now on keep one worker forked ahead: each :meth:`spawn` takes it (its fork and its cage set
        up while the previous submission was graded, on another core where there is one) and orders the
        next. For a batch, once its lanes are forked (the spare is made by a thread of this process).
        A spare is a worker like any other, forked from the same template with the same configuration,
        never given cells before it is taken; one that died meanwhile is replaced (see WorkerHandle.launch).

        ``when_closed``: the next spare is ordered when a submission's worker is closed (see
        :meth:`worker_closed`), not when one is taken: where the lanes leave no core free, its fork and cage
        (some 8 ms of CPU) then run while the lane writes that result and reads the next notebook, when its
        worker's CPU has nothing to do, rather than beside the next submission's first calls (where they
        stalled single calls 3 to 7 ms)."""
        self._spares.keep(when_closed)

    def drop_spare(self) -> None:
        """Keep no spare any more: its thread ends and the spare is killed (a batch's end, the sandbox's
        close; lanes fork only from a process with no other thread)."""
        self._spares.drop()

    @property
    def spares_used(self) -> int:
        """How many spares a spawn took."""
        return self._spares.used

    def spawn(self, label: str, limits: Limits, complete: bool = False, spare: bool = True) -> WorkerProcess:
        """A worker forked from the template: the spare where one is kept (see :meth:`keep_spare`) and
        ``spare`` allows it, else forked now (restarting the template once if it died); ``complete``: only
        once the template has imported everything (see TEMPLATE_LATER), else as soon as it can."""
        proc = self._spares.take(limits, complete) if spare and self._spares.on else None
        if proc is None:
            proc = self._spawn_raw(label, limits, complete)
        if not self._spares.when_closed:
            self._spares.order(limits, complete)
        return proc

    def worker_closed(self, limits: Limits, complete: bool) -> None:
        """A submission's worker was closed: where spares are ordered then (see :meth:`keep_spare`), the next."""
        if self._spares.when_closed:
            self._spares.order(limits, complete)

    def _spawn_raw(self, label: str, limits: Limits, complete: bool) -> WorkerProcess:
        for attempt in range(2):
            try:
                return self._spawn_once(label, limits, complete)
            except ConnectionError:
                if attempt:
                    raise SandboxError("the sandbox template keeps dying") from None
                self._restart_template()
        raise AssertionError("unreachable")

    def _spawn_once(self, label: str, limits: Limits, complete: bool = False) -> WorkerProcess:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        mode = self.isolation.mode
        slot = SLOTS.acquire() if os.geteuid() == 0 and mode in ("root", "landlock") else None
        workdir = Path(tempfile.mkdtemp(prefix="w-", dir=self._base))
        ours = theirs = None
        status_r = status_w = -1
        try:
            if slot is not None:
                os.chown(workdir, slot.uid, slot.gid)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                # Room for the requests in flight (WorkerHandle.start): as much as the kernel allows, up to this.
                ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHANNEL_SEND_BUFFER)
            except OSError:
                pass
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            config = WorkerConfig(
                label=label[:200], workdir=str(workdir), uid=slot.uid if slot else None,
                gid=slot.gid if slot else None, device=self.device, cpu_seconds=int(limits.cpu_seconds),
                memory_mb=int(limits.memory_mb), file_mb=float(limits.file_mb), processes=int(limits.processes),
                output_bytes=int(limits.output_mb * MiB), mode=mode, disk_mb=float(limits.disk_mb),
                outer_uid=os.getuid(), outer_gid=os.getgid())
            try:
                reply, fds = self._control.call({"t": "fork", "config": config.to_json(), "complete": complete},
                                                 [theirs.fileno(), status_w])
            finally:
                theirs.close()
                os.close(status_w)
                status_w = -1
            if "error" in reply:
                raise SpawnFailed(f"the sandbox could not start a worker: {reply['error']}")
            proc = WorkerProcess(int(reply["pid"]), fds[0] if fds else None, ours, status_r, slot, workdir)
            # A child the worker may start could outlive it: then kill what is left under its uid.
            proc.sweep = limits.processes > 0 or self.device == "cuda"
            proc.partial = reply.get("partial") is True
            return proc
        except BaseException:
            if ours is not None:
                ours.close()
            if status_r >= 0:
                os.close(status_r)
            if status_w >= 0:
                os.close(status_w)
            if slot is not None:
                SLOTS.release(slot)
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def finish(self, proc: WorkerProcess) -> int | None:
        """Kill ``proc`` (if alive), collect its exit status and free its uid, folder and descriptors."""
        if proc.finished:
            return proc.status
        proc.finished = True
        proc.kill()
        status = proc.wait_status(10.0)
        proc.chan.close()
        os.close(proc.status_fd)
        if proc.pidfd is not None:
            os.close(proc.pidfd)
        if proc.slot is not None:
            if proc.reaped:
                if proc.sweep:
                    try:
                        self._control.call({"t": "sweep", "uid": proc.slot.uid, "gid": proc.slot.gid})
                    except ConnectionError:
                        pass
                SLOTS.release(proc.slot)
            else:
                log.warning("sandbox: worker %d did not report its end; uid %d is not reused", proc.pid,
                            proc.slot.uid)
        shutil.rmtree(proc.workdir, ignore_errors=True)
        return status

    def retire(self, proc: WorkerProcess) -> None:
        """Kill ``proc`` now; wait for its end and free its uid in the background (closing is instant)."""
        proc.kill()
        with self._reaper_lock:
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap_retired, name="sandbox-reaper", daemon=True)
                self._reaper.start()
        self._retired.put(proc)

    def _reap_retired(self) -> None:
        while True:
            proc = self._retired.get()
            try:
                if proc is None:
                    return
                self.finish(proc)
            except Exception:
                log.exception("sandbox: could not clean up worker %d", proc.pid if proc else -1)
            finally:
                self._retired.task_done()

    # what a worker handle and a lane use ---------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def forget(self, worker: WorkerHandle) -> None:
        """A handle closed: the sandbox no longer closes it when it closes."""
        with self._workers_lock:
            self._workers.discard(worker)

    def leave_template(self) -> None:
        """In a process forked from this sandbox's (a lane): close this copy of the template's channel, so
        that the template sees the channel close when the process that started it goes, not this one."""
        self._control.leave()

    # public API -------------------------------------------------------------------
    def settle(self) -> None:
        """Wait until every closed or killed worker is gone and its uid and folder are free."""
        self._retired.join()

    def open(self, cells: list[Cell], *, label: str, limits: Limits | None = None,
             meanwhile: Callable[[], None] | None = None) -> WorkerHandle:
        """Fork a fresh worker for one submission and run its cells; the returned WorkerHandle answers calls.

        ``limits`` replaces the sandbox's limits for this submission only (tests, overrides). ``meanwhile``:
        trusted work done once here while the worker runs the cells (the grader's static scan of the code),
        in the time this thread would wait; what it raises is dropped (its caller does it again where it
        finds it not done).
        Raises SandboxError only when the sandbox itself is broken; a submission that
        cannot run gets cell outcomes and replies that say why.
        """
        if self._closed:
            raise SandboxError("the sandbox is closed")
        worker = WorkerHandle(self, cells, label, limits or self.limits, meanwhile)
        with self._workers_lock:
            self._workers.add(worker)
        try:
            worker.launch()
        except BaseException:
            worker.close()
            raise
        return worker

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.drop_spare()
        with self._workers_lock:
            workers = list(self._workers)
        for worker in workers:
            worker.close()
        self.settle()
        if self._reaper is not None:
            self._retired.put(None)
            self._reaper.join(timeout=10)
        self._control.close()     # the template sees EOF, kills its workers and exits
        self._cleanup()

