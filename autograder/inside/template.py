"""The sandbox's template process: the untrusted side's warm start, which forks the workers.

Started once per batch by :class:`autograder.sandbox.Sandbox` (:func:`template_main`), never in the grader
itself. It imports torch, numpy, matplotlib and the kit's plain-data modules (:data:`TEMPLATE_MODULES`) and
then waits on a Unix socket for the grader's requests: fork a worker (:mod:`autograder.inside.worker`) with
the channel and status pipe handed over by SCM_RIGHTS, copy itself for another grader process (a lane), sweep
leftover memory cgroups. It computes nothing: forking after torch ran parallel ops can deadlock the child, and
CUDA must never be initialized before a fork. It never runs student code. It reaps its workers and reports
each one's exit status (and whether its memory cgroup killed it) on the pipe the grader gave for it.

Before it says ready it runs a worker's usual path once (:mod:`autograder.inside.warm_up`); each worker's
memory cgroup, the next one made ahead, is :mod:`autograder.inside.worker_memory`'s.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any, NoReturn

from autograder.inside.protocol import TEMPLATE_ENV, WorkerConfig
from autograder.inside.warm_up import warm_up
from autograder.inside.worker import task_count, worker_main
from autograder.inside.worker_memory import AHEAD, MEMORY, ahead, drop_ahead, join_home, memory_group, remove_groups

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
    "autograder", "autograder.inside.plain", "autograder.inside.forbidden", "autograder.inside.guards",
    "autograder.inside.probes", "autograder.inside.proxies", "autograder.inside.namespace", "autograder.inside.cage",
    "autograder.core.text",
)
#: Imported only when a worker needs them: torch._dynamo (what optimizers' step and torch.compile pull
#: in) is 1.4 s of a cold start, and a course's usual notebook never touches it. A worker forked before
#: the template imported them remembers any import that misses (:class:`_ImportMisses`) and says so; the
#: grader then asks for a worker of the complete template (the template imports them first) and runs
#: that submission's cells and call again there, so what a worker can import never depends on timing.
TEMPLATE_LATER = ("torch._dynamo",)


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

    from autograder.inside import plain

    sample = plain.encode(((1, 2.5, True, None, "s", numpy.zeros(2)), {"k": [numpy.int64(3)]}))
    plain.decode(sample).to_python()
    plain.decode_trusted(sample).to_python()
    warm_up()
    from autograder.inside import cage

    cage.prepare()     # libc, libseccomp and the seccomp filters, while the file system is there
    from autograder.inside.memcg import find as find_memory_groups

    MEMORY.update(zip(("groups", "why"), find_memory_groups()))
    if MEMORY["groups"] is not None:
        AHEAD["home"] = MEMORY["groups"].home()
    cuda_loaded = _libcuda_loaded()
    ctrl.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": time.perf_counter() - start,
                          "cuda_driver_loaded": cuda_loaded, "threads": task_count()}).encode())
    _template_serve(ctrl, list(TEMPLATE_LATER))


def _template_serve(ctrl: socket.socket, later: list[str]) -> NoReturn:
    """The template's loop: fork a worker per request, report each one's end, until the grader leaves.

    ``later``: what of TEMPLATE_LATER is not imported yet (a request for a complete worker imports it).
    """
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    # worker pid -> (write end of its status pipe, CPU seconds, its memory cgroup or None)
    children: dict[int, tuple[int, int, str | None]] = {}
    leftover: list[str] = []            # memory cgroups still holding a process (a grandchild) when reaped

    watched: list[socket.socket | int] = [ctrl, wake_r]
    try:
        while True:
            ready, _, _ = select.select(watched, [], [])
            if wake_r in ready:
                _drain(wake_r)
                _template_reap(children, leftover)
            if ctrl not in ready:
                continue
            msg, fds, _flags, _addr = socket.recv_fds(ctrl, 1 << 16, 4)
            if not msg:
                break  # the grader is gone
            _template_request(ctrl, msg, fds, children, later, (wake_r, wake_w))
    except BaseException:  # noqa: BLE001 - into the template's log, which the grader shows
        traceback.print_exc()
    finally:
        _template_end(children, leftover)
        os._exit(0)


def _template_request(ctrl: socket.socket, msg: bytes, fds: list[int], children: dict[int, tuple[int, int, str | None]],
                      later: list[str], wake: tuple[int, int]) -> None:
    """One request of the grader's: fork a worker, clone this template or sweep; anything else is refused."""
    try:
        request = json.loads(msg)
        kind = request["t"]
    except (ValueError, KeyError, TypeError):
        _refuse(ctrl, fds, "bad request")
        return
    if kind == "fork" and len(fds) == 2:
        if request.get("complete") and later:
            drop_ahead()     # what the imports allocate is the template's, not the next worker's
        while request.get("complete") and later:
            _import_quietly(later.pop(0))
        _template_fork(ctrl, request, fds, children, partial=bool(later))
    elif kind == "clone" and len(fds) == 1:
        _template_clone(ctrl, fds[0], (*wake, *(entry[0] for entry in children.values())), later)
    elif kind == "sweep":
        _template_sweep(ctrl, request)
    else:
        _refuse(ctrl, fds, f"unknown request {kind!r}")


def _template_end(children: dict[int, tuple[int, int, str | None]], leftover: list[str]) -> None:
    """The template's last act: kill the workers still running, remove every memory group it made."""
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    made_ahead = [AHEAD["group"]] if AHEAD["group"] is not None and join_home() else []
    remove_groups([entry[2] for entry in children.values() if entry[2]] + leftover + made_ahead)


def _drain(fd: int) -> None:
    """Empty the (non-blocking) wake-up pipe."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _refuse(ctrl: socket.socket, fds: list[int], error: str) -> None:
    """Answer a request the template cannot serve, closing the descriptors it came with."""
    for fd in fds:
        os.close(fd)
    ctrl.send(json.dumps({"error": error}).encode())


def _template_reap(children: dict[int, tuple[int, int, str | None]], leftover: list[str]) -> None:
    """Collect the workers that ended and write each one's end to its status pipe (see _template_serve)."""
    if leftover:
        leftover[:] = [g for g in leftover if not MEMORY["groups"].remove(g)]
    while True:
        try:
            # Found, not reaped yet: a zombie's CPU clock can still be read (see _named_status).
            ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if ended is None or ended.si_pid == 0:
            return
        charged = _cpu_charged(ended.si_pid)
        try:
            pid, status, usage = os.wait4(ended.si_pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if pid == 0:
            return
        entry = children.pop(pid, None)
        if entry is not None:
            _template_report(pid, entry, _named_status(status, usage, entry[1], charged), leftover)


def _template_report(pid: int, entry: tuple[int, int, str | None], status: int, leftover: list[str]) -> None:
    """Write one ended worker's end (its status, and its memory group's OOM kill) to its status pipe, and close it;
    its memory group is removed, or left in ``leftover`` while it still holds a process."""
    fd, _cpu_limit, group = entry
    report: dict[str, Any] = {"pid": pid, "status": status}
    if group is not None:
        report["memory"] = MEMORY["groups"].oom_killed(group)
        if not MEMORY["groups"].remove(group):
            leftover.append(group)      # a grandchild is still in it: the sweep will kill it
    try:
        os.write(fd, json.dumps(report).encode())
    except OSError:
        pass
    os.close(fd)


def _template_clone(ctrl: socket.socket, channel: int, own_fds: tuple[int, ...], later: list[str]) -> None:
    """Fork a copy of this template serving ``channel``; the copy never returns. ``own_fds``: this template's
    descriptors (its wake-up pipe, its workers' status pipes), closed in the copy."""
    pid = os.fork()
    if pid == 0:
        # A template of its own for another grader process (a lane): nothing of this one's
        # (its grader's channel, its wake-up pipe, its workers' status pipes) stays open.
        ctrl.close()
        for fd in own_fds:
            os.close(fd)
        if AHEAD["group"] is not None:
            # Born in the group this template made for its own next worker: out of it first.
            if not join_home():
                os._exit(1)     # the grader sees the copy fail and starts lanes another way
            AHEAD["group"] = None
        own = socket.socket(fileno=channel)
        own.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": 0.0,
                             "cuda_driver_loaded": _libcuda_loaded(),
                             "threads": task_count()}).encode())
        _template_serve(own, later)
    os.close(channel)
    ctrl.send(json.dumps({"pid": pid}).encode())




def _import_quietly(name: str) -> None:
    """Import one of TEMPLATE_LATER in the template; a failure goes to its log (the worker then misses it)."""
    import importlib

    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module that fails to import costs speed only: into the log
        traceback.print_exc()


def _template_fork(ctrl: socket.socket, request: dict[str, Any], fds: list[int],
                   children: dict[int, tuple[int, int, str | None]], partial: bool = False) -> None:
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
    from autograder.inside.cage import fork_into

    group, why, born = memory_group(config)
    # Everything the template holds is long-lived: a worker's collections then never walk it (a full one
    # walked the 450,000 objects of torch and the kit, some 100 ms) nor write to its pages (copy on write).
    gc.freeze()
    try:
        pid = fork_into(config.mode)    # os.fork(), or a clone straight into the cage's namespaces
    except OSError as exc:
        os.close(chan_fd)
        os.close(status_fd)
        if group is not None:
            if born:
                AHEAD["group"] = group     # still the template's, for the next fork
            else:
                MEMORY["groups"].remove(group)
        ctrl.send(json.dumps({"error": f"fork failed: {exc}"}).encode())
        return
    if pid == 0:
        worker_main(config, chan_fd, template_pid=os.getppid(), partial=partial, memory=(group, why), born=born)
    os.close(chan_fd)
    children[pid] = (status_fd, config.cpu_seconds, group)
    answer = json.dumps({"pid": pid, "partial": partial}).encode()
    try:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # a kernel before 5.3: the grader falls back to kill(pid)
            ctrl.send(answer)
            return
        try:
            socket.send_fds(ctrl, [answer], [pidfd])
        finally:
            os.close(pidfd)
    finally:
        ahead(config, left=group if born else None)   # out of the new worker's group, whatever happened




def _named_status(status: int, usage: Any, cpu_limit: int, charged: float | None = None) -> int:
    """The wait status to report. The PID-namespace init a caged worker is ignores SIGXCPU, so its
    CPU limit is a SIGKILL at the limit (see worker._limits): a worker killed by SIGKILL whose CPU time
    reached the limit is reported as killed by SIGXCPU, which is what stopped it.

    ``charged``: the CPU time the kernel held against RLIMIT_CPU when the worker died (:func:`_cpu_charged`),
    the very number the kernel compared with the limit, so the verdict holds whatever the load. rusage
    cannot stand in for it: it is the scheduler's exact run time, while the limit counts the ticks at which
    the worker was running, and on a machine busy with short-lived tasks (which run between ticks) a CPU-bound
    worker is charged for theirs too: killed at 1 s of ticks after 0.6 s of its own. Only where that clock
    could not be read does rusage decide, from half the limit on (a guess: under load it fell 40 % short)."""
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        return status
    if charged is not None:
        spent = charged >= cpu_limit
    else:
        spent = usage.ru_utime + usage.ru_stime >= 0.5 * cpu_limit
    return int(signal.SIGXCPU) if spent else status


def _cpu_charged(pid: int) -> float | None:
    """Seconds of CPU time process ``pid`` (a child that ended, not reaped yet) was charged against its
    RLIMIT_CPU: its CPUCLOCK_PROF clock (user plus system time as sampled at the scheduler tick), which
    clock_gettime reads for any process by a clock id made of its pid (the kernel's make_process_cpuclock);
    None where it cannot be read."""
    try:
        return time.clock_gettime((~pid << 3) | _CPUCLOCK_PROF)
    except (OSError, OverflowError):
        return None


#: The kernel's process CPU clock that RLIMIT_CPU counts (include/linux/posix-timers_types.h).
_CPUCLOCK_PROF = 0


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
