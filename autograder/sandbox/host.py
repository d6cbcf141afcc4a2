"""The sandbox: student code runs only in caged worker processes; only plain data comes back.

One :class:`Sandbox` per batch starts a warm *template* process (see
:mod:`autograder.sandbox.worker`) that has imported torch and friends but computed
nothing. :meth:`Sandbox.open` asks it to fork a fresh worker for one submission,
hands the worker the notebook's cells and returns a :class:`WorkerHandle`: the
:class:`~autograder.catalog.Runner` the checks call. Each call is a plain-data
request over a socket pair; the reply is validated here (frame, header, blob
through :func:`autograder.plain.decode`) and anything else — garbage, a
truncated frame, a dead or silent worker — becomes a ``Reply`` with status
``crashed``, ``timeout`` or ``too_large``, never an exception of the grader.

The cage (:mod:`autograder.sandbox.cage`): the first probe worker of a batch finds the best mode
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
request's tensors are moved to ``request.device`` by :func:`autograder.probes.execute`.
"""
from __future__ import annotations

import fcntl
import grp
import json
import logging
import math
import os
import pwd
import queue
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autograder import plain
from autograder.config import Limits
from autograder.errors import AutograderError
from autograder.messages import Msg, as_dict, say
from autograder.notebook import Cell
from autograder.probes import Reply, Request
from autograder.sandbox.cage import Isolation
from autograder.stopwatch import Stopwatch
# TEMPLATE_ENV and template_environment: re-exported (tests, doctor).
from autograder.sandbox.worker import (_FOLDER_PREFIX, TEMPLATE_ENV, FrameError, FrameTooLarge, MiB,  # noqa: F401
                                       TemplateLaunch, WorkerConfig, _process_identity, launch_template, recv_frame,
                                       send_frame, template_environment)

log = logging.getLogger(__name__)

#: Worker uids are taken from here on, skipping any that /etc/passwd or /etc/group names.
UID_BASE = 61000
UID_SLOTS = 1024
#: Statuses a worker may report for a call; the sandbox adds timeout and crashed itself.
WORKER_STATUSES = frozenset({"ok", "error", "missing", "not_attempted", "too_large"})
CELL_STATUSES = ("ok", "error", "skipped", "timeout", "crashed")
#: How long a worker may take to set itself up after the fork (CUDA init is the slow part).
SETUP_SECONDS = {"cpu": 30.0, "cuda": 180.0}
_SMALL_HEADER = 64 * 1024
#: Signals whose cause the message names (messages.CATALOGUE["sandbox.hint.<NAME>"]).
_SIGNAL_HINTS = frozenset({signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV, signal.SIGBUS,
                           signal.SIGABRT, signal.SIGFPE})


class SandboxError(AutograderError):
    """The sandbox itself cannot run (its template does not start, or keeps dying)."""


class _SpawnFailed(Exception):
    """One worker could not be started (the template could not fork, or its setup failed)."""


@dataclass
class CheckedReply(Reply):
    """A reply whose blob the sandbox already decoded and validated: :meth:`value` reuses that."""

    decoded: plain.Value | None = field(default=None, repr=False, compare=False)

    def value(self) -> plain.Value:
        return self.decoded if self.decoded is not None else super().value()


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one code cell: ok, error, skipped, timeout or crashed.

    ``message`` is the student's exception text or, when the sandbox stopped the cell, its
    words in English; ``said`` then holds them in both languages ({"zh", "en"}).
    """

    index: int
    status: str
    error_type: str = ""
    message: str = ""
    seconds: float = 0.0
    said: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _cell_said(index: int, status: str, msg: Msg, seconds: float = 0.0) -> CellOutcome:
    return CellOutcome(index, status, "", msg.en, seconds, as_dict(msg))


def exit_message(status: int | None) -> Msg:
    """A wait status in words, both languages: ``killed by SIGKILL (memory limit?)``, ``exited with status 0 ...``."""
    if status is None:
        return say("sandbox.stopped_unknown")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            sig = signal.Signals(number)
            name = sig.name
        except ValueError:
            sig, name = None, f"signal {number}"
        hint = f"sandbox.hint.{sig.name}" if sig is not None and sig in _SIGNAL_HINTS else None
        if hint is None:
            return say("sandbox.killed_signal", signal=name)
        return say("sandbox.killed_signal_hint", signal=name, hint=say(hint))
    if os.WIFEXITED(status):
        return say("sandbox.exit_status", status=os.WEXITSTATUS(status))
    return say("sandbox.stopped_status", status=status)


def describe_exit(status: int | None) -> str:
    """:func:`exit_message` in English (the instructor's logs)."""
    return exit_message(status).en


def _said(status: str, msg: Msg, **extra: Any) -> Reply:
    """A reply in the sandbox's own words: English in ``error`` (logs), both languages in ``message``."""
    return Reply(status, error=msg.en, message=msg, **extra)


# -- the sandbox's folders -------------------------------------------------------------------


def _remove_stale_folders() -> None:
    """Remove the folders of sandboxes whose grader was killed (SIGKILL leaves no chance to clean up)."""
    for folder in Path(tempfile.gettempdir()).glob(_FOLDER_PREFIX + "*"):
        try:
            info = os.lstat(folder)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            owner = (folder / "owner").read_text(encoding="ascii").strip()
            pid = int(owner.split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if _process_identity(pid) != owner:
            shutil.rmtree(folder, ignore_errors=True)


# -- worker uids -------------------------------------------------------------------------
@dataclass
class _Slot:
    uid: int
    gid: int
    fd: int


class _UidSlots:
    """One unprivileged uid per live worker, process-wide; flock keeps other graders off it too."""

    def __init__(self, base: int = UID_BASE, count: int = UID_SLOTS):
        self.base = base
        self.count = count
        self._lock = threading.Lock()
        self._dir: Path | None = None

    def _lock_dir(self) -> Path:
        if self._dir is None:
            path = Path(tempfile.gettempdir()) / "autograder-uid-locks"
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                pass
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
                raise SandboxError(f"{path}: expected a directory owned by uid {os.geteuid()}, "
                                   "writable by it alone", hint="remove it and grade again")
            self._dir = path
        return self._dir

    def acquire(self) -> _Slot:
        with self._lock:
            folder = self._lock_dir()
            for n in range(self.count):
                uid = self.base + n
                if _named(uid):
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return _Slot(uid, uid, fd)
        raise SandboxError(f"no free worker uid in {self.base}..{self.base + self.count - 1}")

    @staticmethod
    def release(slot: _Slot) -> None:
        os.close(slot.fd)  # closing the only descriptor drops the flock


def _named(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return True
    except KeyError:
        return False


_SLOTS = _UidSlots()


def cage_modes() -> tuple[str, ...]:
    """The cages to try here, best first: namespaces as root or in a user namespace, then Landlock.

    ``AUTOGRADER_CAGE`` (a comma-separated list of modes) narrows the list: tests force the
    fallback with it, and an instructor can pin a mode.
    """
    wanted = [m.strip() for m in os.environ.get("AUTOGRADER_CAGE", "").split(",") if m.strip()]
    if wanted:
        return tuple(m for m in ("root", "userns", "landlock") if m in wanted)
    return ("root", "landlock") if os.geteuid() == 0 else ("userns", "landlock")


# -- one forked worker process ---------------------------------------------------------------
class _Process:
    def __init__(self, pid: int, pidfd: int | None, chan: socket.socket, status_fd: int,
                 slot: _Slot | None, workdir: Path):
        self.pid = pid
        self.pidfd = pidfd
        self.chan = chan
        self.status_fd = status_fd
        self.slot = slot
        self.workdir = workdir
        self.status: int | None = None
        self.reaped = False
        self.finished = False
        self.sweep = False

    def kill(self) -> None:
        if self.reaped:
            return
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass  # already gone

    def wait_status(self, timeout: float) -> int | None:
        """The raw wait status, as the template reports it once it reaped the worker."""
        if self.reaped:
            return self.status
        ready, _, _ = select.select([self.status_fd], [], [], timeout)
        if not ready:
            return None
        try:
            data = json.loads(os.read(self.status_fd, 4096) or b"null")
            self.status = int(data["status"])
        except (ValueError, TypeError, KeyError, OSError):
            self.status = None
        self.reaped = True
        return self.status


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
        # The cages to try, best first (see autograder.sandbox.cage); the first probe worker that sets one up wins.
        self._modes = ("none",) if not isolation else modes or cage_modes()
        if not self._modes:
            raise SandboxError(f"AUTOGRADER_CAGE={os.environ.get('AUTOGRADER_CAGE')!r} names no cage",
                               hint="unset it, or name root, userns or landlock")
        self.isolation = Isolation(self._modes[0])
        self._ctrl_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._workers: set[WorkerHandle] = set()     # open workers, closed with the sandbox if forgotten
        self._workers_lock = threading.Lock()
        self._retired: queue.Queue[_Process | None] = queue.Queue()
        self._reaper: threading.Thread | None = None
        self._closed = False
        self._template_restarts = 0
        _remove_stale_folders()
        if launch is not None and launch.adopt():
            # A template launched earlier (see autograder.sandbox.worker.launch_template): its folder is ours now.
            self._base = Path(launch.folder)
        else:
            launch = None
            self._base = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))
            (self._base / "owner").write_text(_process_identity(os.getpid()), encoding="ascii")
        # Removed by close(), or at the latest when this object or the interpreter goes.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._base, ignore_errors=True)
        self._ctrl: socket.socket | None = None
        self._template: subprocess.Popen[bytes] | None = None
        self.worker_info: dict[str, Any] = {}
        try:
            self._start_template(launch)
            self._probe()
        except BaseException:
            self.close()
            raise

    def _probe(self) -> None:
        """Start one empty worker per cage mode, best first, until one sets itself up; refuse when none does.

        Fail closed: without ``isolation=False`` (``--no-isolation``) no student code runs uncaged.
        """
        if self._template is None:
            return
        missing: dict[str, str] = {}
        for mode in self._modes:
            self.isolation = Isolation(mode)
            with self.open([], label="probe") as worker:
                problem = worker._broken
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
        refused = SandboxError(f"no cage for student code can be set up on this machine ({tried})",
                               hint="run as root or in a container that allows user namespaces, see "
                                    "`autograder doctor`; or pass --no-isolation, for trusted code only")
        refused.missing = missing     # mode -> why it could not be set up (autograder doctor shows it)
        raise refused

    # context manager ----------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the template ---------------------------------------------------------------
    def _start_template(self, launch: TemplateLaunch | None = None) -> None:
        start = launch.started if launch is not None else time.perf_counter()
        if launch is None:
            launch = launch_template(str(self._base))
        proc, ours, log_path = launch.proc, launch.sock, Path(launch.log_path)
        ours.settimeout(self.start_timeout)
        try:
            msg = ours.recv(1 << 16)
        except (TimeoutError, OSError):
            msg = b""
        if not msg:
            proc.kill()
            proc.wait()
            ours.close()
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:].strip()
            raise SandboxError(f"the sandbox template process did not start: {tail or 'no output'}")
        info = json.loads(msg)
        if info.get("cuda_driver_loaded"):
            log.warning("sandbox: the template loaded the CUDA driver before forking; workers may fail on CUDA")
        self._ctrl, self._template = ours, proc
        self.template_pid = int(info["pid"])
        self.template_seconds = time.perf_counter() - start
        log.debug("sandbox template %d ready in %.2f s (imports %.2f s)", self.template_pid,
                  self.template_seconds, info.get("seconds", 0.0))

    def _template_call(self, header: dict[str, Any], fds: Iterable[int] = ()) -> tuple[dict[str, Any], list[int]]:
        with self._ctrl_lock:
            sock = self._ctrl
            if sock is None:
                raise ConnectionError("the template is gone")
            try:
                sock.settimeout(60)
                socket.send_fds(sock, [json.dumps(header).encode()], list(fds))
                msg, got, _flags, _addr = socket.recv_fds(sock, 1 << 16, 2)
            except OSError as exc:
                self._ctrl = None
                raise ConnectionError(f"the template stopped answering ({exc})") from None
            if not msg:
                self._ctrl = None
                raise ConnectionError("the template exited")
            return json.loads(msg), got

    def _restart_template(self) -> None:
        with self._restart_lock:
            if self._ctrl is not None or self._closed:
                return
            if self._template_restarts >= 2:
                raise SandboxError("the sandbox template died three times; giving up on this batch")
            self._template_restarts += 1
            log.warning("sandbox: the template process died; starting a new one")
            if self._template is not None:
                self._template.kill()
                self._template.wait()
            self._start_template()

    def _spawn(self, label: str, limits: Limits) -> _Process:
        """Fork one worker from the template (restarting the template once if it died)."""
        for attempt in range(2):
            try:
                return self._spawn_once(label, limits)
            except ConnectionError:
                if attempt:
                    raise SandboxError("the sandbox template keeps dying") from None
                self._restart_template()
        raise AssertionError("unreachable")

    def _spawn_once(self, label: str, limits: Limits) -> _Process:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        mode = self.isolation.mode
        slot = _SLOTS.acquire() if os.geteuid() == 0 and mode in ("root", "landlock") else None
        workdir = Path(tempfile.mkdtemp(prefix="w-", dir=self._base))
        ours = theirs = None
        status_r = status_w = -1
        try:
            if slot is not None:
                os.chown(workdir, slot.uid, slot.gid)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            config = WorkerConfig(
                label=label[:200], workdir=str(workdir), uid=slot.uid if slot else None,
                gid=slot.gid if slot else None, device=self.device, cpu_seconds=int(limits.cpu_seconds),
                memory_mb=int(limits.memory_mb), file_mb=float(limits.file_mb), processes=int(limits.processes),
                output_bytes=int(limits.output_mb * MiB), mode=mode, disk_mb=float(limits.disk_mb),
                outer_uid=os.getuid(), outer_gid=os.getgid())
            try:
                reply, fds = self._template_call({"t": "fork", "config": config.to_json()},
                                                 [theirs.fileno(), status_w])
            finally:
                theirs.close()
                os.close(status_w)
                status_w = -1
            if "error" in reply:
                raise _SpawnFailed(f"the sandbox could not start a worker: {reply['error']}")
            proc = _Process(int(reply["pid"]), fds[0] if fds else None, ours, status_r, slot, workdir)
            # A child the worker may start could outlive it: then kill what is left under its uid.
            proc.sweep = limits.processes > 0 or self.device == "cuda"
            return proc
        except BaseException:
            if ours is not None:
                ours.close()
            if status_r >= 0:
                os.close(status_r)
            if status_w >= 0:
                os.close(status_w)
            if slot is not None:
                _SLOTS.release(slot)
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def _finish(self, proc: _Process) -> int | None:
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
                        self._template_call({"t": "sweep", "uid": proc.slot.uid, "gid": proc.slot.gid})
                    except ConnectionError:
                        pass
                _SLOTS.release(proc.slot)
            else:
                log.warning("sandbox: worker %d did not report its end; uid %d is not reused", proc.pid,
                            proc.slot.uid)
        shutil.rmtree(proc.workdir, ignore_errors=True)
        return status

    def _retire(self, proc: _Process) -> None:
        """Kill ``proc`` now; wait for its end and free its uid in the background (closing is instant)."""
        proc.kill()
        with self._restart_lock:
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
                self._finish(proc)
            except Exception:
                log.exception("sandbox: could not clean up worker %d", proc.pid if proc else -1)
            finally:
                self._retired.task_done()

    # public API -------------------------------------------------------------------
    def settle(self) -> None:
        """Wait until every closed or killed worker is gone and its uid and folder are free."""
        self._retired.join()

    def open(self, cells: list[Cell], *, label: str, limits: Limits | None = None) -> WorkerHandle:
        """Fork a fresh worker for one submission and run its cells; the returned WorkerHandle answers calls.

        ``limits`` replaces the sandbox's limits for this submission only (tests, overrides).
        Raises SandboxError only when the sandbox itself is broken; a submission that
        cannot run gets cell outcomes and replies that say why.
        """
        if self._closed:
            raise SandboxError("the sandbox is closed")
        worker = WorkerHandle(self, cells, label, limits or self.limits)
        with self._workers_lock:
            self._workers.add(worker)
        try:
            worker._launch()
        except BaseException:
            worker.close()
            raise
        return worker

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._workers_lock:
            workers = list(self._workers)
        for worker in workers:
            worker.close()
        self.settle()
        if self._reaper is not None:
            self._retired.put(None)
            self._reaper.join(timeout=10)
        with self._ctrl_lock:
            if self._ctrl is not None:
                self._ctrl.close()  # the template sees EOF, kills its workers and exits
                self._ctrl = None
        if self._template is not None:
            try:
                self._template.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._template.kill()
                self._template.wait()
        self._cleanup()


class WorkerHandle:
    """The sandboxed run of one submission: cell outcomes, then calls (a checks ``Runner``)."""

    def __init__(self, sandbox: Sandbox, cells: list[Cell], label: str, limits: Limits):
        self.label = label
        self.cells: list[CellOutcome] = []
        self.restarts = 0      # re-forks after a call killed the worker
        self.spawns = 0        # forks in all, cells' re-runs included
        self._sandbox = sandbox
        self._limits = limits
        self._source = list(cells)
        self._deadline = time.monotonic() + self._limits.submission_seconds
        self._bad: dict[int, CellOutcome] = {}       # cells that time out or crash: not run again
        self._proc: _Process | None = None
        self._poisoned: dict[str, Reply] = {}        # function -> the answer to any further call
        self._crashes: Counter[str] = Counter()
        self._broken: Reply | None = None            # set when no worker can be started any more
        self._last_failure: Msg = say("sandbox.stopped_unknown")
        self._seq = 0
        self._closed = False
        self._ran: dict[int, CellOutcome] = {}       # outcomes of the latest run of the cells
        self._complete = False                       # the cells ran to the end at least once
        self.worker_info: dict[str, Any] = {}
        self._max_blob = int(self._limits.output_mb * MiB) + 4 * MiB
        #: Seconds per section of this submission's sandbox side: ``fork`` (fork and worker set-up),
        #: ``cells`` (running the notebook's cells), ``encode`` / ``roundtrip`` / ``decode`` of calls
        #: (``roundtrip`` includes ``worker``: the worker's own decoding, the student's code and its
        #: encoding, as the worker reports it).
        self.timer = Stopwatch()     # fork, cage, cells, encode, roundtrip, decode, worker: seconds

    # context manager -------------------------------------------------------------
    def __enter__(self) -> WorkerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop(wait=False)
        with self._sandbox._workers_lock:
            self._sandbox._workers.discard(self)

    @property
    def pid(self) -> int | None:
        """The live worker's pid (None between a crash and the next call)."""
        return self._proc.pid if self._proc is not None else None

    # lifecycle -------------------------------------------------------------------
    def _time_left(self) -> float:
        return self._deadline - time.monotonic()

    def _budget_message(self) -> Msg:
        return say("sandbox.budget", seconds=f"{self._limits.submission_seconds:g}")

    def _stop(self, wait: bool = True) -> int | None:
        """Kill the live worker; with ``wait``, also its exit status (else it is reaped in the background)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if wait:
            return self._sandbox._finish(proc)
        self._sandbox._retire(proc)
        return None

    def _launch(self) -> bool:
        """Fork a worker and run the cells, leaving out those that timed out or crashed before.

        A cell that times out or kills the worker is recorded and the cells run again
        in a fresh worker without it. True when a worker is ready for calls.
        """
        max_spawns = self.spawns + len(self._source) + 2
        while self.spawns < max_spawns:
            if self._time_left() <= 0:
                self._give_up(_said("timeout", self._budget_message()), "timeout")
                return False
            self.spawns += 1
            start = time.perf_counter()
            try:
                proc = self._sandbox._spawn(self.label, self._limits)
            except _SpawnFailed as exc:
                self._give_up(_said("crashed", say("sandbox.not_started", detail=str(exc))), "crashed")
                return False
            self._proc = proc
            problem = self._await_ready(proc)
            self.timer.since("fork", start)
            if problem is not None:
                self._stop()
                self._give_up(_said("crashed", say("sandbox.not_started", detail=problem)), "crashed")
                return False
            start = time.perf_counter()
            try:
                failed = self._run_cells(proc)
            except _SpawnFailed as exc:
                self._stop(wait=False)
                self._give_up(_said("crashed", say("sandbox.not_started", detail=str(exc))), "crashed")
                return False
            finally:
                self.timer.since("cells", start)
            if failed is None:
                return True
            self._bad[failed.index] = failed
            self._stop(wait=False)
        self._give_up(_said("crashed", say("sandbox.keeps_stopping")), "crashed")
        return False

    def _give_up(self, reply: Reply, cell_status: str) -> None:
        """No worker any more: every call answers ``reply``; cells never run get ``cell_status``."""
        self._broken = reply
        if not self._complete:
            said = reply.message if isinstance(reply.message, Msg) else Msg(reply.error, reply.error)
            self.cells = self._outcomes((cell_status, say("sandbox.not_run", detail=said)))

    def _await_ready(self, proc: _Process) -> str | None:
        deadline = time.monotonic() + SETUP_SECONDS[self._sandbox.device]
        try:
            header, _ = recv_frame(proc.chan, deadline, max_blob=0, max_header=_SMALL_HEADER)
        except TimeoutError:
            return "the sandbox worker did not start in time"
        except (EOFError, OSError, FrameError):
            return f"the sandbox worker did not start: {describe_exit(self._stop())}"
        if header.get("t") == "setup_error":
            return f"the sandbox worker could not set itself up: {_text(header.get('error'), 300)}"
        if header.get("t") != "ready":
            return "the sandbox worker sent an unexpected first message"
        self.worker_info = {k: header.get(k) for k in ("uid", "caged", "network", "nproc", "data_limit", "tasks",
                                                       "isolation")}
        cage = header.get("cage_seconds")
        if type(cage) is float and 0 <= cage < 60:
            # The worker's word, for the profile only: setting up its cage, inside the "fork" section.
            self.timer.add("cage", cage)
        return None

    def _outcomes(self, not_run: tuple[str, Msg]) -> list[CellOutcome]:
        """One outcome per cell, in order, from the latest run (``not_run`` for cells it did not reach)."""
        out = []
        for cell in self._source:
            if cell.skipped:
                out.append(CellOutcome(cell.index, "skipped", "", cell.skipped))
            elif cell.index in self._bad:
                out.append(self._bad[cell.index])
            elif cell.index in self._ran:
                out.append(self._ran[cell.index])
            else:
                out.append(_cell_said(cell.index, not_run[0], not_run[1]))
        return out

    def _run_cells(self, proc: _Process) -> CellOutcome | None:
        """Run the cells in ``proc``; the first cell that timed out or stopped the worker, or None."""
        runnable = [c for c in self._source if not c.skipped and c.index not in self._bad]
        self._ran = {}
        payload = json.dumps([{"index": c.index, "code": c.code} for c in runnable]).encode()
        try:
            proc.chan.settimeout(max(self._limits.call_seconds, 1.0))
            send_frame(proc.chan, {"t": "cells"}, payload)
        except OSError:
            status = self._stop()
            if not runnable:
                raise _SpawnFailed(f"the sandbox worker stopped: {describe_exit(status)}") from None
            return _cell_said(runnable[0].index, "crashed", exit_message(status))
        for cell in runnable:
            start = time.monotonic()
            deadline = min(start + self._limits.call_seconds, self._deadline)
            try:
                header, _ = recv_frame(proc.chan, deadline, max_blob=0, max_header=_SMALL_HEADER)
            except TimeoutError:
                message = (self._budget_message() if self._time_left() <= 0 else
                           say("sandbox.cell_timeout", seconds=f"{self._limits.call_seconds:g}"))
                return _cell_said(cell.index, "timeout", message, time.monotonic() - start)
            except FrameError:
                return _cell_said(cell.index, "crashed", say("sandbox.malformed"))
            except (EOFError, OSError):
                status = self._stop()
                return _cell_said(cell.index, "crashed", exit_message(status), time.monotonic() - start)
            outcome = _cell_outcome(header, cell.index)
            if outcome is None:
                return _cell_said(cell.index, "crashed", say("sandbox.unexpected"))
            self._ran[cell.index] = outcome
        try:
            header, _ = recv_frame(proc.chan, time.monotonic() + 5, max_blob=0, max_header=_SMALL_HEADER)
        except (TimeoutError, EOFError, OSError, FrameError):
            header = {}
        if header.get("t") != "cells_done":
            if not runnable:
                raise _SpawnFailed("the sandbox worker stopped before running any cell")
            return _cell_said(runnable[-1].index, "crashed", say("sandbox.stopped_after_cell"))
        self.cells = self._outcomes(("skipped", say("sandbox.not_run_plain")))
        self._complete = True
        return None

    # calls --------------------------------------------------------------------------
    def __call__(self, request: Request) -> Reply:
        """Run one request in the worker; every failure is a Reply, never an exception."""
        if self._closed:
            return _said("crashed", say("sandbox.closed"))
        known = self._poisoned.get(request.function)
        if known is not None:
            return Reply(known.status, error_type=known.error_type, error=known.error, message=known.message)
        if self._time_left() <= 0:
            self._stop(wait=False)
            return _said("timeout", self._budget_message())
        if request.device != self._sandbox.device and not request.device.startswith(self._sandbox.device):
            return Reply("error", error_type="SandboxError",
                         error=f"this sandbox runs on {self._sandbox.device}, the request asks for {request.device}")
        start = time.perf_counter()
        blob = encode_request(request)  # a grader bug (not plain data) raises here, loudly
        self.timer.since("encode", start)
        if self._proc is None:
            if self._broken is not None:
                return Reply(self._broken.status, error=self._broken.error, message=self._broken.message)
            if self.restarts >= self._sandbox.max_restarts:
                return _said("crashed", say("sandbox.restarts", detail=self._last_failure, count=self.restarts + 1))
            self.restarts += 1
            if not self._launch():
                broken = self._broken or _said("crashed", say("sandbox.not_restarted"))
                return Reply(broken.status, error=broken.error, message=broken.message)
        proc = self._proc
        if proc is None:  # _launch said yes but holds no worker: cannot happen, answer anyway
            return _said("crashed", say("sandbox.gone"))
        self._seq += 1
        header = {"t": "call", "seq": self._seq, "function": request.function, "probe": request.probe,
                  "forbidden": list(request.forbidden), "device": request.device}
        start = time.monotonic()
        sent = time.perf_counter()
        deadline = min(start + self._limits.call_seconds, self._deadline)
        try:
            proc.chan.settimeout(max(deadline - start, 0.001))
            send_frame(proc.chan, header, blob)
            got, reply_blob = recv_frame(proc.chan, deadline, max_blob=self._max_blob, max_header=_SMALL_HEADER)
            self.timer.since("roundtrip", sent)
        except (TimeoutError, FrameError, EOFError, OSError) as exc:   # FrameTooLarge is a FrameError
            return self._call_failed(exc, request.function, time.monotonic() - start)
        elapsed = time.monotonic() - start
        received = time.perf_counter()
        try:
            return self._validate(got, reply_blob, request, elapsed)
        except Exception as exc:  # noqa: BLE001 - whatever the worker sent is its outcome, never the grader's fault
            # The type only: the message could quote the worker's bytes.
            log.warning("sandbox: a worker's reply could not be read (%s)", type(exc).__name__)
            return self._failed("crashed", say("sandbox.unreadable"), elapsed)
        finally:
            self.timer.since("decode", received)

    def _call_failed(self, exc: BaseException, function: str, seconds: float) -> Reply:
        """What a call that did not come back means, by what stopped it: the one place a failed call
        becomes the worker's state (see :meth:`_failed`) and the call's Reply."""
        if isinstance(exc, TimeoutError):
            if self._time_left() <= 0:      # the submission's budget, not this call, ran out
                return self._failed("timeout", self._budget_message(), seconds, remember=self._last_failure)
            limit = f"{self._limits.call_seconds:g}"
            return self._failed("timeout", say("sandbox.call_timeout", seconds=limit), seconds,
                                poison=(function, say("sandbox.slow_again", function=function, seconds=limit)))
        if isinstance(exc, FrameTooLarge):
            return self._failed("too_large", say("sandbox.output_too_large", size=f"{exc.size / MiB:.0f}",
                                                 limit=f"{self._limits.output_mb:g}"),
                                seconds, remember=say("check.too_large_hidden"))
        if isinstance(exc, FrameError):
            return self._failed("crashed", say("sandbox.malformed"), seconds)
        # EOF or a broken channel: the worker died. Its exit status says how; a second death of the same
        # function answers its later calls without running it again.
        status = self._stop()
        message = exit_message(status)
        self._crashes[function] += 1
        twice = self._crashes[function] >= 2
        return self._failed("crashed", message, seconds, stopped=True,
                            poison=(function, say("sandbox.stopped_twice", detail=message, function=function))
                            if twice else None)

    def _failed(self, status: str, message: Msg, seconds: float, *, remember: Msg | None = None,
                poison: tuple[str, Msg] | None = None, stopped: bool = False, **extra: Any) -> Reply:
        """A call failed in a way that leaves the worker unusable: stop it (unless ``stopped``), remember
        what went wrong (``remember``, default ``message``: a restart's message names it), answer the
        function's later calls with ``poison``'s message when given, and return the call's Reply."""
        if not stopped:
            self._stop(wait=False)
        self._last_failure = remember if remember is not None else message
        if poison is not None:
            self._poisoned[poison[0]] = _said(status, poison[1])
        return _said(status, message, seconds=seconds, **extra)

    def _validate(self, header: dict[str, Any], blob: bytes, request: Request, elapsed: float) -> Reply:
        """Believe nothing but plain data: the header's fields are checked one by one."""
        status = header.get("status")
        if header.get("t") != "reply" or header.get("seq") != self._seq or type(status) is not str \
                or status not in WORKER_STATUSES:
            return self._failed("crashed", say("sandbox.unexpected"), elapsed)
        forbidden = header.get("forbidden")
        names = [f for f in forbidden if type(f) is str and f in request.forbidden] \
            if type(forbidden) is list else []
        seconds = header.get("seconds")
        if type(seconds) not in (int, float) or not math.isfinite(seconds) or seconds < 0:
            seconds = elapsed
        busy = header.get("busy")
        if type(busy) in (int, float) and math.isfinite(busy) and busy >= 0:
            # The worker's word, used only to split the profile's round trip (never for a score).
            self.timer.add("worker", min(float(busy), elapsed))
        reply = Reply(status, error_type=_text(header.get("error_type"), 100),
                      error=_text(header.get("error"), 500), forbidden=list(dict.fromkeys(names)),
                      seconds=min(float(seconds), elapsed))
        if status == "ok":
            try:
                decoded = plain.decode(blob)
                readable(decoded)
            except Exception:  # noqa: BLE001 - PlainDataError, or whatever else a forged blob provokes
                # Only a tampered worker sends such a frame: do not trust its channel any further.
                return self._failed("error", say("sandbox.unreadable"), reply.seconds, error_type="PlainDataError",
                                    forbidden=reply.forbidden)
            return CheckedReply(status, blob, reply.error_type, reply.error, reply.forbidden, reply.seconds,
                                decoded=decoded)
        return reply


#: What a student is told when the worker's reply is not what an honest worker sends (a forged frame,
#: a patched encoder): the student's outcome, like a crash, never "the check itself failed".
UNREADABLE_REPLY = say("sandbox.unreadable").en
#: The array an honest worker sends for each tensor dtype (bfloat16 travels as float32, see plain.encode).
_TENSOR_ARRAYS = {"torch.float16": "float16", "torch.bfloat16": "float32", "torch.float32": "float32",
                  "torch.float64": "float64", "torch.int8": "int8", "torch.int16": "int16", "torch.int32": "int32",
                  "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool"}


def readable(value: plain.Value) -> None:
    """PlainDataError unless every array is as :func:`plain.encode` writes it.

    :func:`plain.decode` checks what it needs to build the arrays, and cleans the texts; a
    check then reads more: a tensor's numpy array (a big-endian or 16-byte one makes
    ``torch.from_numpy`` raise), an array's dtype name (``np.dtype`` of a forged one raises).
    Either would fail inside a check, where it reads as a fault of the kit: so the arrays
    are checked here, once, on the trusted side.
    """
    stack = [value.spec]
    while stack:
        spec = stack.pop()
        kind = spec["t"]
        if kind == "tensor":
            arr = value.arrays[spec["k"]]
            if arr.dtype != np.dtype(_TENSOR_ARRAYS[spec["dtype"]]) or not arr.dtype.isnative:
                raise plain.PlainDataError("a tensor's data does not match its dtype")
        elif kind == "ndarray":
            if spec.get("dtype") != str(value.arrays[spec["k"]].dtype):
                raise plain.PlainDataError("an array's dtype does not match its data")
        elif kind in ("tuple", "list"):
            stack.extend(spec["items"])
        elif kind == "dict":
            stack.extend(spec["items"].values())


def encode_request(request: Request) -> bytes:
    """The call's arguments as a plain blob; PlainDataError if any of them is not plain data."""
    payload = (tuple(request.args), dict(request.kwargs))
    bad = _undescribed(plain.Encoder().spec(payload))
    if bad:
        raise plain.PlainDataError(f"cannot send {bad} to the sandbox worker (arguments must be tensors, "
                                   "arrays, numbers, strings, None, and tuples/lists/dicts of them)")
    return plain.encode(payload)


def _undescribed(spec: dict[str, Any]) -> str | None:
    kind = spec.get("t")
    if kind == "other":
        return f"an object of type {spec.get('type')}"
    items = spec.get("items")
    children = items.values() if isinstance(items, dict) else items if isinstance(items, list) else ()
    for child in children:
        found = _undescribed(child)
        if found:
            return found
    return None


def _cell_outcome(header: dict[str, Any], index: int) -> CellOutcome | None:
    if header.get("t") != "cell" or header.get("index") != index or header.get("status") not in ("ok", "error"):
        return None
    seconds = header.get("seconds")
    if type(seconds) not in (int, float) or not math.isfinite(seconds) or seconds < 0:
        seconds = 0.0
    return CellOutcome(index, header["status"], _text(header.get("error_type"), 100),
                       _text(header.get("message"), 300), float(seconds))


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


__all__ = ["UNREADABLE_REPLY", "CellOutcome", "CheckedReply", "Sandbox", "SandboxError", "WorkerHandle", "describe_exit",
           "encode_request", "readable"]
