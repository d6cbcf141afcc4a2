"""The untrusted side of the sandbox: the warm template process and the workers it forks.

This module runs in two processes the grader starts, never in the grader itself:

* the **template** (:func:`template_main`), started once per batch by
  :class:`autograder.sandbox.Sandbox`. It imports torch, numpy, matplotlib and
  the kit's plain-data modules and then waits on a Unix socket. It computes
  nothing: forking after torch ran parallel ops can deadlock the child, and
  CUDA must never be initialized before a fork. It never runs student code.
* a **worker** per submission, forked from the template on request. The
  grader hands over, with SCM_RIGHTS, one end of a socket pair (the channel)
  and the write end of a pipe (where the template reports the worker's exit
  status). The worker closes every other descriptor, sends stdout/stderr to
  /dev/null, drops to an unprivileged uid inside an empty chroot when started
  as root, applies the resource limits, runs the notebook's cells in one
  namespace and then answers calls (:func:`autograder.probes.execute`).

Only plain data travels on the channel, in frames: a fixed head (magic, JSON
header length, blob length), a small JSON header and a blob that is
:func:`autograder.plain.encode` output or JSON. No pickle in either direction.
"""
from __future__ import annotations

import builtins
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

MAGIC = b"AGW1"
FRAME = struct.Struct("<4sIQ")  # magic, header length, blob length
MAX_HEADER = 1 << 20
MiB = 1 << 20

#: Modules the template imports so that a worker inside an empty chroot never needs
#: the file system: lazy imports of torch (optimizers pull in torch._dynamo, tensor
#: printing pulls in schema_check_mode), numpy.random and matplotlib's Agg backend.
TEMPLATE_MODULES = (
    "math", "cmath", "random", "statistics", "itertools", "functools", "collections", "collections.abc",
    "typing", "dataclasses", "enum", "time", "json", "re", "copy", "string", "operator", "fractions",
    "decimal", "numbers", "heapq", "bisect", "textwrap", "pprint", "warnings", "contextlib", "abc",
    "inspect", "traceback", "io", "ctypes", "zipfile", "encodings.cp437", "encodings.latin_1", "encodings.ascii",
    "encodings.utf_16", "encodings.utf_32", "encodings.idna",
    "numpy", "numpy.random", "numpy.linalg", "numpy.fft",
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.optim", "torch.autograd",
    "torch.linalg", "torch.fft", "torch.special", "torch.distributions", "torch.utils.data",
    "torch.testing", "torch._subclasses.schema_check_mode", "torch.profiler._cupti_monitor",
    "matplotlib", "matplotlib.pyplot", "matplotlib.backends.backend_agg",
    "autograder", "autograder.plain", "autograder.probes", "autograder.notebook", "autograder.sandbox.cage",
    "autograder.text",
)
#: Imported only when a worker needs them: torch._dynamo (what optimizers' step and torch.compile pull
#: in) is 1.4 s of a cold start, and a course's usual notebook never touches it. A worker forked before
#: the template imported them remembers any import that misses (:class:`_ImportMisses`) and says so; the
#: grader then asks for a worker of the complete template (the template imports them first) and runs
#: that submission's cells and call again there, so what a worker can import never depends on timing.
TEMPLATE_LATER = ("torch._dynamo",)
#: Set before torch/numpy load, in the template's environment: one thread everywhere,
#: so the template holds no thread pool a fork could copy half-way.
TEMPLATE_ENV = {
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
#: The whole environment a worker sees (the grader's is scrubbed).
WORKER_ENV = {"PATH": "/nonexistent", "HOME": "/", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

PR_SET_PDEATHSIG = 1


# -- frames ----------------------------------------------------------------------
class FrameError(Exception):
    """A frame that is not one: wrong magic, absurd lengths, header not a JSON object."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, limit: int):
        super().__init__(f"{size} bytes announced, at most {limit} accepted")
        self.size = size
        self.limit = limit


#: A frame whose blob is at most this large goes out in one write (see send_frame).
MERGED_FRAME_BYTES = 1 << 20


def send_frame(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    prefix = FRAME.pack(MAGIC, len(head), len(blob)) + head
    if len(blob) <= MERGED_FRAME_BYTES:
        # One write: the reader wakes once per frame instead of once for the head and again for the blob
        # (a call is two frames; the second wake-up cost as much as the rest of a small call's transport).
        sock.sendall(prefix + blob)
    else:
        sock.sendall(prefix)
        sock.sendall(blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is None:
            sock.settimeout(None)
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], min(n - got, 4 * MiB))
        if k == 0:
            raise EOFError("the other side closed the channel")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, deadline: float | None, max_blob: int,
               max_header: int = MAX_HEADER) -> tuple[dict[str, Any], bytes]:
    """One frame; TimeoutError past ``deadline``, EOFError if closed, FrameError if malformed."""
    magic, n_head, n_blob = FRAME.unpack(_recv_exact(sock, FRAME.size, deadline))
    if magic != MAGIC:
        raise FrameError("not a frame (bad magic)")
    if n_head > max_header:
        raise FrameError(f"header of {n_head} bytes")
    if n_blob > max_blob:
        raise FrameTooLarge(n_blob, max_blob)
    raw = _recv_exact(sock, n_head, deadline)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise FrameError("header is not JSON") from None
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    blob = _recv_exact(sock, n_blob, deadline) if n_blob else b""
    return header, blob


#: What the template inherits from the grader's environment (a worker's memory still holds the
#: environment its process started with, whatever it clears): what Python, torch, CUDA and
#: matplotlib need, and no token or password the grader may have been given.
_ENV_KEEP = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
             "CONDA_PREFIX", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "PYTHONPATH",
             "PYTHONHASHSEED", "PYTHONHOME", "PYTHONNOUSERSITE", "CUDA_HOME", "CUDA_PATH")
_ENV_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_")


def template_environment(environ: Any) -> dict[str, str]:
    """The template's environment: the kept part of ``environ``, one thread, Agg, this package first."""
    env = {k: v for k, v in environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)}
    env.update(TEMPLATE_ENV)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


#: The sandbox's folders in the temporary directory: its template's cwd and log, the workers' folders.
_FOLDER_PREFIX = "autograder-sandbox-"


def write_owner(folder: str | os.PathLike[str]) -> None:
    """Name this process as the owner of a sandbox folder, atomically: a process killed half way leaves
    the earlier owner or none, never a truncated name (see processes._remove_stale_folders)."""
    tmp = os.path.join(folder, f".owner.{os.getpid()}")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(_process_identity(os.getpid()))
    os.replace(tmp, os.path.join(folder, "owner"))


def _process_identity(pid: int) -> str:
    """pid and start time: a pid that was reused by another process does not match."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return f"{pid} {fields[19]}"
    except (OSError, IndexError):
        return f"{pid} ?"


@dataclass
class TemplateLaunch:
    """A template process started, not yet ready: :class:`autograder.sandbox.Sandbox` adopts it (``launch=``).

    :func:`launch_template` needs neither torch nor the sandbox module, so ``autograder grade`` starts the
    template first thing and imports torch while the template imports it too.
    """

    proc: Any                  # subprocess.Popen
    sock: socket.socket        # the grader's end of the control channel
    folder: str
    log_path: str
    started: float             # time.perf_counter() at launch
    adopted: bool = False
    own_folder: bool = False   # launch_template made the folder (and removes it when not adopted)

    def adopt(self) -> bool:
        """Hand the template to a sandbox (once); False when it was closed or adopted already."""
        if self.adopted:
            return False
        self.adopted = True
        return True

    def close(self) -> None:
        """Stop a template no sandbox adopted (the batch stopped before its sandbox started)."""
        if self.adopted:
            return
        self.adopted = True
        self.sock.close()
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001, S110 - already gone
            pass
        if self.own_folder:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)


def launch_template(folder: str | None = None) -> TemplateLaunch:
    """Start the template process (:func:`template_main`) in ``folder`` (default: a new sandbox folder)."""
    import subprocess
    import tempfile

    started = time.perf_counter()
    own = folder is None
    if folder is None:
        folder = tempfile.mkdtemp(prefix=_FOLDER_PREFIX)
        write_owner(folder)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log_path = os.path.join(folder, "template.log")
    try:
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-c",
                 f"from autograder.sandbox.worker import template_main; template_main({theirs.fileno()})"],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=log_file, cwd=folder, env=template_environment(os.environ), start_new_session=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return TemplateLaunch(proc, ours, folder, log_path, started, own_folder=own)


def kill_process(pid: int, pidfd: int | None) -> None:
    """SIGKILL through the pidfd when there is one (no pid reuse can misdirect it), else by pid; a
    process already gone is no error."""
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class ClonedTemplate:
    """The process of a template cloned from another (``Sandbox.clone_template``), as a sandbox holds its
    template: not this process's child (the first template reaps it), so it is killed and waited for
    through its pidfd, with the part of ``subprocess.Popen``'s interface a sandbox uses."""

    def __init__(self, pid: int, pidfd: int | None):
        self.pid = pid
        self.pidfd = pidfd

    def kill(self) -> None:
        kill_process(self.pid, self.pidfd)

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        if self.pidfd is not None:
            ready, _, _ = select.select([self.pidfd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"template {self.pid}", timeout or 0)
            os.close(self.pidfd)
            self.pidfd = None
        return 0


#: A template started by :func:`launch_early`, until the command takes it (:func:`take_early_launch`).
_EARLY: list[TemplateLaunch] = []


def launch_early() -> None:
    """Start the template before the command imports anything else (see ``autograder.cli.EARLY``): its
    torch import then overlaps all of the command's. Closed at exit if the command never takes it."""
    import atexit

    while _EARLY:                  # one an earlier command line in this process left (tests)
        _EARLY.pop().close()
    launch = launch_template()
    _EARLY.append(launch)
    atexit.register(launch.close)


def take_early_launch() -> TemplateLaunch | None:
    """The template :func:`launch_early` started, if any (once)."""
    return _EARLY.pop() if _EARLY else None


# -- configuration the grader sends with each fork --------------------------------
@dataclass(frozen=True)
class WorkerConfig:
    label: str
    workdir: str
    uid: int | None            # a uid of the worker's own (the grader is root), else None
    gid: int | None
    device: str                # "cpu" or "cuda"
    cpu_seconds: int
    memory_mb: int
    file_mb: float
    processes: int
    output_bytes: int
    mode: str = "none"         # the cage: see autograder.sandbox.cage
    disk_mb: float = 256.0     # the worker's tmpfs
    outer_uid: int = 0         # the grader's uid and gid: what a userns worker maps itself to
    outer_gid: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerConfig:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


# -- the template -------------------------------------------------------------------
def template_main(ctrl_fd: int) -> NoReturn:
    """Import everything, say ready, then fork one worker per request until the grader leaves."""
    for key, value in TEMPLATE_ENV.items():
        os.environ.setdefault(key, value)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctrl = socket.socket(fileno=ctrl_fd)
    start = time.perf_counter()
    import importlib

    for name in TEMPLATE_MODULES:
        importlib.import_module(name)
    import torch

    # cpuinfo reads /proc/cpuinfo lazily; a worker in a chroot has no /proc.
    torch.backends.cpu.get_cpu_capability()
    # The plain-data path once, on numpy data only (no torch op runs here): its lazy imports happen now.
    import numpy

    from autograder import plain

    plain.decode(plain.encode(((1, 2.5, True, None, "s", numpy.zeros(2)), {"k": [numpy.int64(3)]}))).to_python()
    from autograder.sandbox import cage

    cage.prepare()     # libc, libseccomp and the seccomp filters, while the file system is there
    cuda_loaded = _libcuda_loaded()
    ctrl.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": time.perf_counter() - start,
                          "cuda_driver_loaded": cuda_loaded, "threads": _task_count()}).encode())
    _template_serve(ctrl, list(TEMPLATE_LATER))


def _template_serve(ctrl: socket.socket, later: list[str]) -> NoReturn:
    """The template's loop: fork a worker per request, report each one's end, until the grader leaves.

    ``later``: what of TEMPLATE_LATER is not imported yet (a request for a complete worker imports it).
    """
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    children: dict[int, tuple[int, int]] = {}  # worker pid -> (write end of its status pipe, CPU seconds)

    def reap() -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = children.pop(pid, None)
            if entry is not None:
                fd, cpu_limit = entry
                status = _named_status(status, usage, cpu_limit)
                try:
                    os.write(fd, json.dumps({"pid": pid, "status": status}).encode())
                except OSError:
                    pass
                os.close(fd)

    try:
        while True:
            ready, _, _ = select.select([ctrl, wake_r], [], [])
            if wake_r in ready:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                reap()
            if ctrl not in ready:
                continue
            msg, fds, _flags, _addr = socket.recv_fds(ctrl, 1 << 16, 4)
            if not msg:
                break  # the grader is gone
            try:
                request = json.loads(msg)
                kind = request["t"]
            except (ValueError, KeyError, TypeError):
                for fd in fds:
                    os.close(fd)
                ctrl.send(json.dumps({"error": "bad request"}).encode())
                continue
            if kind == "fork" and len(fds) == 2:
                while request.get("complete") and later:
                    _import_quietly(later.pop(0))
                _template_fork(ctrl, request, fds, children, partial=bool(later))
            elif kind == "clone" and len(fds) == 1:
                pid = os.fork()
                if pid == 0:
                    # A template of its own for another grader process (a lane): nothing of this one's
                    # (its grader's channel, its wake-up pipe, its workers' status pipes) stays open.
                    ctrl.close()
                    for fd in (wake_r, wake_w, *(fd for fd, _ in children.values())):
                        os.close(fd)
                    own = socket.socket(fileno=fds[0])
                    own.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": 0.0,
                                         "cuda_driver_loaded": _libcuda_loaded(),
                                         "threads": _task_count()}).encode())
                    _template_serve(own, later)
                os.close(fds[0])
                ctrl.send(json.dumps({"pid": pid}).encode())
            elif kind == "sweep":
                _template_sweep(ctrl, request)
            else:
                for fd in fds:
                    os.close(fd)
                ctrl.send(json.dumps({"error": f"unknown request {kind!r}"}).encode())
    except BaseException:  # noqa: BLE001 - into the template's log, which the grader shows
        traceback.print_exc()
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)


def _import_quietly(name: str) -> None:
    """Import one of TEMPLATE_LATER in the template; a failure goes to its log (the worker then misses it)."""
    import importlib

    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001
        traceback.print_exc()


def _template_fork(ctrl: socket.socket, request: dict[str, Any], fds: list[int],
                   children: dict[int, int], partial: bool = False) -> None:
    chan_fd, status_fd = fds
    try:
        config = WorkerConfig.from_json(request["config"])
    except (KeyError, TypeError) as exc:
        os.close(chan_fd)
        os.close(status_fd)
        ctrl.send(json.dumps({"error": f"bad config: {exc}"}).encode())
        return
    sys.stdout.flush()
    sys.stderr.flush()
    from autograder.sandbox.cage import fork_into

    try:
        pid = fork_into(config.mode)    # os.fork(), or a clone straight into the cage's namespaces
    except OSError as exc:
        os.close(chan_fd)
        os.close(status_fd)
        ctrl.send(json.dumps({"error": f"fork failed: {exc}"}).encode())
        return
    if pid == 0:
        worker_main(config, chan_fd, template_pid=os.getppid(), partial=partial)
    os.close(chan_fd)
    children[pid] = (status_fd, config.cpu_seconds)
    answer = json.dumps({"pid": pid, "partial": partial}).encode()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # a kernel before 5.3: the grader falls back to kill(pid)
        ctrl.send(answer)
        return
    try:
        socket.send_fds(ctrl, [answer], [pidfd])
    finally:
        os.close(pidfd)


def _named_status(status: int, usage: Any, cpu_limit: int) -> int:
    """The wait status to report. The PID-namespace init a caged worker is ignores SIGXCPU, so its
    CPU limit is a SIGKILL at the limit (see _setup): one that used up its CPU time is reported as
    killed by SIGXCPU, which is what stopped it. (The kernel fires the limit from its CPU timer, while
    rusage is sampled at the scheduler's tick: on a busy machine the two differ by tenths of a second.)"""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL \
            and usage.ru_utime + usage.ru_stime >= 0.9 * cpu_limit - 0.05:
        return int(signal.SIGXCPU)
    return status


def _template_sweep(ctrl: socket.socket, request: dict[str, Any]) -> None:
    """Kill every process left running under a worker uid (grandchildren, when processes > 0)."""
    uid, gid = int(request["uid"]), int(request["gid"])
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # as that uid: every process of that uid but this one
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    ctrl.send(json.dumps({"t": "swept"}).encode())


def _libcuda_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return False


def _task_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


# -- the worker -------------------------------------------------------------------------
def worker_main(config: WorkerConfig, chan_fd: int, template_pid: int, partial: bool = False) -> NoReturn:
    """Runs in the forked child: set up the cage, then serve the grader; never returns.

    ``partial``: forked before the template imported all of TEMPLATE_LATER (imports that miss are told).
    """
    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # Nothing of the template's (its control socket, other workers' status pipes) stays open.
        os.closerange(3, chan_fd)
        os.closerange(chan_fd + 1, os.sysconf("SC_OPEN_MAX"))
        chan = socket.socket(fileno=chan_fd)
        chan.setblocking(True)
        try:
            info = _setup(config, template_pid)
        except BaseException as exc:  # noqa: BLE001 - report any setup failure, then stop
            send_frame(chan, {"t": "setup_error", "error": f"{type(exc).__name__}: {exc}"[:500]})
            os._exit(3)
        send_frame(chan, {"t": "ready", **info})
        misses = _ImportMisses() if partial else None
        if misses is not None:
            sys.meta_path.insert(0, misses)
        _serve(chan, config, misses)
    except BaseException:  # noqa: BLE001 - the channel is gone or broken: just stop
        code = 4
    os._exit(code)


def _setup(config: WorkerConfig, template_pid: int) -> dict[str, Any]:
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    import torch

    if config.device == "cuda":
        _init_cuda(config)
    # Measured before the cage: /proc is not there afterwards.
    data_now = _vm_kib("VmData") * 1024
    tasks = _task_count()
    address_space = _vm_kib("VmSize") * 1024 + config.memory_mb * MiB
    from autograder.sandbox.cage import enter, libc

    # CUDA reserves far more address space than it uses: there RLIMIT_DATA (below) is the memory limit.
    started = time.perf_counter()
    isolation = enter(config.mode, workdir=config.workdir, uid=config.uid, gid=config.gid, disk_mb=config.disk_mb,
                      address_space=address_space if config.device != "cuda" else None,
                      outer_uid=config.outer_uid, outer_gid=config.outer_gid)
    cage_seconds = time.perf_counter() - started
    lib = libc()
    caged = config.uid is not None
    # Cleared by the uid change in the cage, so set after it. Without a PID namespace, make sure the
    # template still lives (in one, the parent is outside and getppid() says 0).
    lib.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)     # (no_new_privs: set by the cage, every mode)
    if "pid-ns" not in isolation.layers and os.getppid() != template_pid:
        os._exit(5)
    # Memory the student's code may add on top of what the template already mapped.
    data_limit = data_now + config.memory_mb * MiB
    _limit(resource.RLIMIT_DATA, data_limit)
    # SIGXCPU at the soft limit, SIGKILL at the hard one; PID 1 of a namespace (pid-ns) ignores SIGXCPU,
    # so there the limit is the SIGKILL itself (the template names it, see _named_status).
    grace = 0 if "pid-ns" in isolation.layers else 2
    _limit(resource.RLIMIT_CPU, config.cpu_seconds, config.cpu_seconds + grace)
    _limit(resource.RLIMIT_FSIZE, int(config.file_mb * MiB))
    _limit(resource.RLIMIT_CORE, 0)
    # RLIMIT_NPROC counts the tasks of the real uid: with a uid of its own the worker may hold
    # exactly the tasks it has plus `processes`. Without root the grader's own processes share
    # the uid, so only "none at all" can be enforced.
    nproc: int | None
    if caged:
        nproc = tasks + config.processes
    elif config.processes == 0:
        nproc = 0
    else:
        nproc = None
    if nproc is not None:
        _limit(resource.RLIMIT_NPROC, nproc)
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(WORKER_ENV)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import autograder

    # `from autograder import check` in a notebook must not start the self-check here.
    autograder.check = _no_check
    return {"uid": os.getuid(), "caged": isolation.mode != "none",
            # Whether student code could still open a connection: no net-ns, no Landlock TCP rule, no seccomp.
            "network": not {"net-ns", "landlock-tcp", "seccomp"} & set(isolation.layers),
            "nproc": nproc, "data_limit": data_limit, "tasks": tasks, "isolation": isolation.to_json(),
            "cage_seconds": cage_seconds}


def _no_check(*_args: Any, **_kwargs: Any) -> None:
    return None


def _init_cuda(config: WorkerConfig) -> None:
    """CUDA in the worker only, after the fork; warmed up before the chroot hides the driver's files."""
    import warnings

    import torch
    import torch.nn.functional as F

    torch.cuda.init()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, config.memory_mb * MiB / total))
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(2, 3, 5, 8, device="cuda", dtype=dtype, requires_grad=True)
        mask = torch.ones(5, 5, dtype=torch.bool, device="cuda").triu(1)
        w = (x @ x.transpose(-2, -1)).masked_fill(mask, float("-inf")).softmax(-1)
        y = F.scaled_dot_product_attention(x, x, x) + w @ x
        loss = F.cross_entropy(y.flatten(0, 2), torch.zeros(30, dtype=torch.long, device="cuda"))
        loss.backward()
        F.linear(x.detach(), torch.randn(4, 8, device="cuda", dtype=dtype)).tanh().cpu()
    torch.cuda.synchronize()


def _vm_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    resource.setrlimit(which, (soft, soft if hard is None else hard))


class _ImportMisses:
    """The first finder of a worker forked before the template imported TEMPLATE_LATER: remembers
    that an import needed a module the template did not hold yet (in the cage its files are out of
    reach) and lets the import go on as it would. The grader, told, runs the submission again in a
    worker of the complete template; a worker that lies about it only costs itself that second run.
    """

    def __init__(self) -> None:
        self.missed = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname not in sys.builtin_module_names:
            self.missed = True
        return None


def _serve(chan: socket.socket, config: WorkerConfig, misses: _ImportMisses | None = None) -> None:
    from autograder import plain, probes
    from autograder.notebook import fresh_namespace

    # Bound before any cell runs: a cell that replaces attributes of autograder.sandbox.worker,
    # autograder.probes or autograder.plain afterwards changes nothing this loop calls.
    calls = _Calls(plain.decode, probes.Request, probes.Reply, probes.execute, config.output_bytes,
                   _asker(chan, plain.encode, plain.decode), probes.stand_in)
    send, recv, cell = send_frame, recv_frame, run_cell
    clock, loads = time.perf_counter, json.loads
    namespace = fresh_namespace()
    while True:
        header, blob = recv(chan, None, max_blob=1 << 40)
        kind = header.get("t")
        if kind == "cells":
            for item in loads(blob):
                send(chan, {"t": "cell", **cell(namespace, item["index"], item["code"])})
            send(chan, {"t": "cells_done", "missed": misses is not None and misses.missed})
        elif kind == "call":
            start = clock()
            reply = calls(namespace, header, blob)
            # "busy": the whole call here (decode, student code, encode), for the grader's profile only.
            send(chan, {"t": "reply", "seq": header.get("seq"), "status": reply.status,
                        "error_type": reply.error_type, "error": reply.error,
                        "forbidden": list(reply.forbidden), "seconds": float(reply.seconds),
                        "busy": clock() - start, "missed": misses is not None and misses.missed},
                 reply.blob)
        else:
            return


def run_cell(namespace: dict[str, Any], index: int, code: str) -> dict[str, Any]:
    """Execute one cell; whatever it raises (SystemExit and KeyboardInterrupt too) is recorded."""
    start = time.perf_counter()
    try:
        exec(builtins.compile(code, f"<cell {index}>", "exec"), namespace)  # noqa: S102 - what a worker is for
    except BaseException as exc:  # noqa: BLE001 - student code may raise anything
        return {"index": index, "status": "error", "error_type": _type_name(exc),
                "message": _describe_cell_error(exc, index), "seconds": time.perf_counter() - start}
    return {"index": index, "status": "ok", "error_type": "", "message": "",
            "seconds": time.perf_counter() - start}


def _asker(chan: socket.socket, encode: Any, decode: Any) -> Any:
    """``ask(name, phase, payload)`` for :func:`autograder.probes.stand_in`: one ``stand_in`` frame to the
    grader in the middle of a call, and its answer (the grader alone decides what it answers, and for which
    call; a worker that asks for anything else has its call fail)."""
    send, recv = send_frame, recv_frame

    def ask(name: str, phase: str, payload: Any) -> Any:
        send(chan, {"t": "stand_in", "name": name, "phase": phase}, encode(payload))
        header, blob = recv(chan, None, max_blob=1 << 40)
        if header.get("t") != "stand_in_reply":
            raise RuntimeError(f"the grader did not answer the call of {name}")
        if header.get("status") != "ok":
            raise RuntimeError(str(header.get("error") or f"the grader refused the call of {name}"))
        return decode(blob).to_python()

    return ask


class _Calls:
    """Answers one call request: decode it, run it through :func:`autograder.probes.execute`.

    Holds the functions it uses, taken before the cells ran (see :func:`_serve`). A request may name
    functions of earlier exercises that the grader answers while it runs (``stand_ins``).
    """

    def __init__(self, decode: Any, request: Any, reply: Any, execute: Any, output_bytes: int, ask: Any = None,
                 stand_in: Any = None):
        self.decode, self.request, self.reply, self.execute = decode, request, reply, execute
        self.output_bytes, self.ask, self.stand_in = output_bytes, ask, stand_in
        self.clock, self.type_name, self.safe_str = time.perf_counter, _type_name, _safe_str

    def __call__(self, namespace: dict[str, Any], header: dict[str, Any], blob: bytes) -> Any:
        try:
            args, kwargs = self.decode(blob).to_python()
            names = header.get("stand_ins") or []
            stand_ins = {str(n): self.stand_in(str(n), self.ask) for n in names[:16]} if self.ask else {}
            request = self.request(str(header["function"]), tuple(args), dict(kwargs),
                                   probe=str(header["probe"]), forbidden=tuple(header["forbidden"]),
                                   device=str(header["device"]), stand_ins=stand_ins)
        except Exception as exc:  # noqa: BLE001 - a request the worker cannot read
            return self.reply("error", error_type="SandboxError", error=f"unreadable request: {exc}"[:500])
        start = self.clock()
        try:
            return self.execute(namespace, request, max_bytes=self.output_bytes)
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, a device move...
            return self.reply("error", error_type=self.type_name(exc), error=self.safe_str(exc),
                              seconds=self.clock() - start)


def _type_name(exc: BaseException) -> str:
    try:
        return str(type(exc).__name__)[:100]
    except Exception:  # noqa: BLE001
        return "BaseException"


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except Exception:  # noqa: BLE001 - a hostile __str__
        return "(unprintable)"


def _describe_cell_error(exc: BaseException, index: int) -> str:
    text = _safe_str(exc).strip().splitlines()
    first = text[0][:240] if text else ""
    line = None
    if isinstance(exc, SyntaxError):
        line = exc.lineno
    else:
        try:
            for frame in traceback.extract_tb(exc.__traceback__):
                if frame.filename == f"<cell {index}>":
                    line = frame.lineno
        except Exception:  # noqa: BLE001
            line = None
    where = f" (line {line})" if line else ""
    return f"{_type_name(exc)}: {first}{where}" if first else f"{_type_name(exc)}{where}"
