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
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any, NoReturn

from autograder.sandbox.protocol import TEMPLATE_ENV, MiB, WorkerConfig, recv_frame, send_frame

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
    "autograder", "autograder.plain", "autograder.forbidden", "autograder.probes", "autograder.notebook",
    "autograder.sandbox.cage",
    "autograder.text",
)
#: Imported only when a worker needs them: torch._dynamo (what optimizers' step and torch.compile pull
#: in) is 1.4 s of a cold start, and a course's usual notebook never touches it. A worker forked before
#: the template imported them remembers any import that misses (:class:`_ImportMisses`) and says so; the
#: grader then asks for a worker of the complete template (the template imports them first) and runs
#: that submission's cells and call again there, so what a worker can import never depends on timing.
TEMPLATE_LATER = ("torch._dynamo",)
#: Descriptors a worker may hold (its channel, stdio and what graded code opens): 128 pipes, 8 MiB of buffers.
OPEN_FILES = 256
#: The whole environment a worker sees (the grader's is scrubbed).
WORKER_ENV = {"PATH": "/nonexistent", "HOME": "/", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

PR_SET_PDEATHSIG = 1
#: The template's memory cgroups (memcg.find(): where to make a group per worker, or None and why not).
_MEMORY: dict[str, Any] = {"groups": None, "why": "not looked for"}
#: The next worker's memory cgroup, made ahead and holding the template itself (``group``), so that the
#: worker is born in it: a process joins a group only after an RCU grace period (milliseconds, tens of
#: them on a busy machine), which the template then spends between forks instead of each worker before
#: its first cell. ``home``: the template's own group, where it goes back when it leaves one; ``off``:
#: made-ahead groups failed once here and are not tried again (workers join groups made at fork time).
_AHEAD: dict[str, Any] = {"group": None, "home": None, "off": False}


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

    sample = plain.encode(((1, 2.5, True, None, "s", numpy.zeros(2)), {"k": [numpy.int64(3)]}))
    plain.decode(sample).to_python()
    plain.decode_trusted(sample).to_python()
    _warm_up()
    from autograder.sandbox import cage

    cage.prepare()     # libc, libseccomp and the seccomp filters, while the file system is there
    from autograder.sandbox.memcg import find as find_memory_groups

    _MEMORY.update(zip(("groups", "why"), find_memory_groups()))
    if _MEMORY["groups"] is not None:
        _AHEAD["home"] = _MEMORY["groups"].home()
    cuda_loaded = _libcuda_loaded()
    ctrl.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": time.perf_counter() - start,
                          "cuda_driver_loaded": cuda_loaded, "threads": _task_count()}).encode())
    _template_serve(ctrl, list(TEMPLATE_LATER))


#: Forbidden names the warm-up's calls run under (so both guard levels run): names of the catalog that
#: the warm-up itself never calls.
WARM_UP_FORBIDDEN = ("F.scaled_dot_product_attention", "nn.MultiheadAttention")


def _warm_up() -> list[str]:
    """A worker's usual path once in the template, before it says ready: each worker is forked with it
    warm instead of paying for it on its first calls (a first call of a function through the guards
    costs a millisecond or more: torch builds its operator objects and dispatch caches, CPython
    specializes the bytecode that runs, only once per process). The calls go through probes.execute
    as a grader's do, under the guards and through each probe, on tensors of both float dtypes.

    Neutral on purpose: torch operations one by one on constant tensors, no exercise's computation. No
    random number is drawn from a generator that stays drawn (torch's default generator is put back as
    it was: a module's initialization draws), no thread is started (the template's thread settings are
    1), and what it imports is imported before ready, in every template alike. Returns each call's status."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from autograder import plain, probes

    def ops(x: torch.Tensor, mask: torch.Tensor) -> Any:
        y = (x @ x.transpose(-2, -1)) / x.shape[-1] ** 0.5
        y = y.masked_fill(mask, float("-inf")).softmax(-1).nan_to_num()
        z = torch.where(mask, torch.zeros_like(y), y).sum(-1, keepdim=True) + y.amax(-1, keepdim=True)
        w = torch.exp(x - x.max(-1, keepdim=True).values).log1p() + torch.tanh(x) * torch.sigmoid(x)
        w = w + torch.log(x.abs() + 1) - x.mean(-1, keepdim=True) / torch.sqrt(x.var(-1, keepdim=True) + 1)
        v = torch.cat([x, w], -1).reshape(*x.shape[:-1], 2, -1).chunk(2, -1)[0].squeeze(-1).unsqueeze(0)
        u = torch.stack([x, x]).permute(1, 0, 2, 3).contiguous().view(-1, x.shape[-1]).split(1)[0]
        t = torch.einsum("btd,bsd->bts", x, x) + torch.bmm(x, x.transpose(1, 2)) + torch.matmul(x, x.mT)
        r = F.relu(x) + F.gelu(x) + F.silu(x) + torch.sin(x) * torch.cos(x) + x.pow(2) + x.clamp(-1, 1)
        n = F.layer_norm(x, x.shape[-1:]) + F.linear(x, x[0].T @ x[0], x[0, 0]) + F.dropout(x, 0.0)
        k = torch.arange(x.shape[-1]).float().to(x.dtype) + torch.ones(x.shape[-1], dtype=x.dtype)
        c = torch.ones(3, 3, dtype=torch.bool).triu(1) | torch.tril(torch.ones(3, 3, dtype=torch.bool))
        g = x.gather(-1, torch.zeros(*x.shape[:-1], 1, dtype=torch.long)).expand_as(x) + x.new_zeros(x.shape)
        e = F.cross_entropy(x.reshape(-1, x.shape[-1]), torch.zeros(x.shape[0] * x.shape[1], dtype=torch.long),
                            reduction="none") + F.log_softmax(x, -1).flatten()[: x.shape[0] * x.shape[1]]
        i = x.argmax(-1) + torch.isinf(x).sum(-1) + torch.isnan(x).any(-1).long() + torch.isfinite(x).all(-1)
        total = y.sum() + z.sum() + w.sum() + v.sum() + u.sum() + t.sum() + r.sum() + n.sum() + k.sum() + e.sum()
        return total + g.sum() + i.sum() + c.sum(), (x.numel(), x.dim(), x.element_size(), float(total.item()))

    class Layer(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)
            self.scale = nn.Parameter(torch.ones(d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(self.proj(x)) * self.scale

    state = torch.random.get_rng_state()
    namespace = {"ops": ops, "Layer": Layer, "__name__": "__main__"}
    statuses: list[str] = []
    try:
        for dtype in (torch.float32, torch.float64):
            x = torch.linspace(-2, 2, 2 * 3 * 4, dtype=dtype).reshape(2, 3, 4)
            mask = torch.tensor([False, False, True]).expand(2, 3, 3)
            weights = {"proj.weight": torch.eye(4, dtype=dtype), "proj.bias": torch.zeros(4, dtype=dtype),
                       "norm.weight": torch.ones(4, dtype=dtype), "norm.bias": torch.zeros(4, dtype=dtype)}
            requests = [probes.Request("ops", (x, mask)), probes.Request("ops", (x, mask), probe="inputs"),
                        probes.Request("ops", (x, mask), probe="random"),
                        probes.Request("ops", ((0,), (torch.ones((), dtype=dtype), None), x, mask), probe="grad"),
                        probes.Request("Layer", ((4,), {}, weights, (x,), {}, torch.ones_like(x), (0,)),
                                       probe="module")]
            for request in requests:
                for forbidden in ((), WARM_UP_FORBIDDEN):
                    request.forbidden = forbidden
                    blob = plain.encode((request.args, request.kwargs))
                    plain.decode_trusted(blob).to_python()
                    reply = probes.execute(namespace, request)
                    statuses.append(reply.status if reply.status == "ok" else f"{reply.status}: {reply.error}")
                    if reply.status == "ok":
                        plain.decode(reply.blob).to_python()
    except Exception:  # noqa: BLE001 - a warm-up that fails costs speed only: into the template's log
        traceback.print_exc()
    finally:
        torch.random.set_rng_state(state)
    return statuses


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
            try:
                request = json.loads(msg)
                kind = request["t"]
            except (ValueError, KeyError, TypeError):
                _refuse(ctrl, fds, "bad request")
                continue
            if kind == "fork" and len(fds) == 2:
                if request.get("complete") and later:
                    _drop_ahead()     # what the imports allocate is the template's, not the next worker's
                while request.get("complete") and later:
                    _import_quietly(later.pop(0))
                _template_fork(ctrl, request, fds, children, partial=bool(later))
            elif kind == "clone" and len(fds) == 1:
                _template_clone(ctrl, fds[0], (wake_r, wake_w, *(entry[0] for entry in children.values())), later)
            elif kind == "sweep":
                _template_sweep(ctrl, request)
            else:
                _refuse(ctrl, fds, f"unknown request {kind!r}")
    except BaseException:  # noqa: BLE001 - into the template's log, which the grader shows
        traceback.print_exc()
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        ahead = [_AHEAD["group"]] if _AHEAD["group"] is not None and _join_home() else []
        _remove_groups([entry[2] for entry in children.values() if entry[2]] + leftover + ahead)
        os._exit(0)


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
        leftover[:] = [g for g in leftover if not _MEMORY["groups"].remove(g)]
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        entry = children.pop(pid, None)
        if entry is not None:
            fd, cpu_limit, group = entry
            status = _named_status(status, usage, cpu_limit)
            report: dict[str, Any] = {"pid": pid, "status": status}
            if group is not None:
                report["memory"] = _MEMORY["groups"].oom_killed(group)
                if not _MEMORY["groups"].remove(group):
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
        if _AHEAD["group"] is not None:
            # Born in the group this template made for its own next worker: out of it first.
            if not _join_home():
                os._exit(1)     # the grader sees the copy fail and starts lanes another way
            _AHEAD["group"] = None
        own = socket.socket(fileno=channel)
        own.send(json.dumps({"t": "ready", "pid": os.getpid(), "seconds": 0.0,
                             "cuda_driver_loaded": _libcuda_loaded(),
                             "threads": _task_count()}).encode())
        _template_serve(own, later)
    os.close(channel)
    ctrl.send(json.dumps({"pid": pid}).encode())


def _remove_groups(groups: list[str]) -> None:
    """The template's last act: its workers' memory cgroups go (a killed worker leaves its group in a moment)."""
    deadline = time.monotonic() + 2.0
    while groups and time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        groups = [g for g in groups if not _MEMORY["groups"].remove(g)]
        if groups:
            time.sleep(0.02)


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
    from autograder.sandbox.cage import fork_into

    group, why, born = _memory_group(config)
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
                _AHEAD["group"] = group     # still the template's, for the next fork
            else:
                _MEMORY["groups"].remove(group)
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
        _ahead(config, left=group if born else None)   # out of the new worker's group, whatever happened


def _ahead(config: WorkerConfig, left: str | None) -> None:
    """After a fork (the grader already has its answer): make the next worker's group and move this
    template into it; ``left``: the group the template was in, now the new worker's alone. Where that
    fails the template goes home, and makes no group ahead any more."""
    groups = _MEMORY["groups"]
    if groups is None or config.mode == "none" or _AHEAD["off"] or _AHEAD["home"] is None:
        return
    from autograder.sandbox.memcg import MARGIN_MB

    _GROUPS_MADE[0] += 1
    path = None
    try:
        # A provisional limit (set again at the fork): room for what the template itself allocates meanwhile.
        path = groups.make(f"autograder-{os.getpid()}-{_GROUPS_MADE[0]}",
                           _vm_kib("VmRSS") * 1024 + (config.memory_mb + MARGIN_MB) * MiB)
        groups.join(path)
        _AHEAD["group"] = path
        return
    except OSError:
        traceback.print_exc()
    _AHEAD["off"] = True
    if left is not None and not _join_home():
        print(f"autograder: the template could not leave the memory cgroup {left}", file=sys.stderr)
    if path is not None:
        groups.remove(path)


def _join_home() -> bool:
    try:
        _MEMORY["groups"].join(_AHEAD["home"])
        return True
    except (OSError, TypeError):
        traceback.print_exc()
        return False


def _drop_ahead() -> None:
    """Back to the template's own group; the group made ahead goes (the next fork makes one as before)."""
    group, _AHEAD["group"] = _AHEAD["group"], None
    if group is not None:
        if _join_home():
            _MEMORY["groups"].remove(group)
        else:
            _AHEAD["off"] = True


_GROUPS_MADE = [0]


def _memory_group(config: WorkerConfig) -> tuple[str | None, str, bool]:
    """A memory cgroup for the next worker (None where there is none, and why): the template's resident
    memory (what the worker may copy on write) plus limits.memory_mb plus room for kernel memory. True
    when it is the group made ahead, which holds the template: the worker is born in it."""
    groups = _MEMORY["groups"]
    if groups is None or config.mode == "none":
        return None, _MEMORY["why"] if groups is None else "not caged (--no-isolation)", False
    from autograder.sandbox.memcg import MARGIN_MB

    limit = _vm_kib("VmRSS") * 1024 + (config.memory_mb + MARGIN_MB) * MiB
    ahead = _AHEAD["group"]
    if ahead is not None:
        _AHEAD["group"] = None
        try:
            groups.set_limit(ahead, limit)
            return ahead, "", True
        except OSError:
            traceback.print_exc()
            _AHEAD["group"] = ahead
            _drop_ahead()
            _AHEAD["off"] = True
    _GROUPS_MADE[0] += 1
    try:
        return groups.make(f"autograder-{os.getpid()}-{_GROUPS_MADE[0]}", limit), "", False
    except OSError as exc:
        return None, f"{groups.describe()}: {exc.strerror or exc}", False


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
def worker_main(config: WorkerConfig, chan_fd: int, template_pid: int, partial: bool = False,
                memory: tuple[str | None, str] = (None, ""), born: bool = False) -> NoReturn:
    """Runs in the forked child: set up the cage, then serve the grader; never returns.

    ``partial``: forked before the template imported all of TEMPLATE_LATER (imports that miss are told).
    ``born``: the worker is already in its memory group (``memory``'s), made ahead by the template.
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
            info = _setup(config, template_pid, memory, born)
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


def _setup(config: WorkerConfig, template_pid: int, memory: tuple[str | None, str] = (None, ""),
           born: bool = False) -> dict[str, Any]:
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
    from autograder.sandbox.memcg import LAYER, MemoryCgroups

    group, why = memory
    if group is not None and not born:
        try:
            MemoryCgroups.join(group)       # before the cage: its files are out of reach afterwards
        except OSError as exc:
            group, why = None, f"joining {group}: {exc.strerror or exc}"
    started = time.perf_counter()
    isolation = enter(config.mode, workdir=config.workdir, uid=config.uid, gid=config.gid, disk_mb=config.disk_mb,
                      outer_uid=config.outer_uid, outer_gid=config.outer_gid, device=config.device)
    cage_seconds = time.perf_counter() - started
    if isolation.mode != "none":
        if group is not None:
            isolation.layers.append(LAYER)
        else:
            isolation.missing[LAYER] = why
    lib = libc()
    # Cleared by the uid change in the cage, so set after it. Without a PID namespace, make sure the
    # template still lives (in one, the parent is outside and getppid() says 0).
    lib.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)     # (no_new_privs: set by the cage, every mode)
    if "pid-ns" not in isolation.layers and os.getppid() != template_pid:
        os._exit(5)
    data_limit, nproc = _limits(config, isolation, address_space=address_space, data_now=data_now, tasks=tasks)
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(WORKER_ENV)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    # `from autograder import check` in a notebook must not start the self-check here (nor `submit` hand
    # anything to a grading service). The package that holds this module is loaded already: its student API is
    # switched off in place, and nothing of it (the self-check, the catalog) is imported into the worker.
    kit = sys.modules["autograder"]
    kit.check = _no_check       # type: ignore[attr-defined]
    kit.submit = _no_check      # type: ignore[attr-defined]
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


def _limits(config: WorkerConfig, isolation: Any, *, address_space: int, data_now: int,
            tasks: int) -> tuple[int, int | None]:
    """Every resource limit of a worker, in one place, once it is in its cage: (RLIMIT_DATA, RLIMIT_NPROC).

    ``address_space`` and ``data_now`` were measured before the cage hid /proc: the template's own
    mappings, on top of which the student's code gets ``limits.memory_mb``. RLIMIT_AS counts every
    mapping (a 4 GiB shared mmap fails like a 4 GiB bytearray); CUDA reserves far more address space than
    it uses, so there RLIMIT_DATA is the memory limit.
    """
    if config.device != "cuda":
        _limit(resource.RLIMIT_AS, address_space)
        isolation.layers.append("address-space-limit")
    # Memory the student's code may add on top of what the template already mapped.
    data_limit = data_now + config.memory_mb * MiB
    _limit(resource.RLIMIT_DATA, data_limit)
    # SIGXCPU at the soft limit, SIGKILL at the hard one; PID 1 of a namespace (pid-ns) ignores SIGXCPU,
    # so there the limit is the SIGKILL itself (the template names it, see _named_status).
    grace = 0 if "pid-ns" in isolation.layers else 2
    _limit(resource.RLIMIT_CPU, config.cpu_seconds, config.cpu_seconds + grace)
    _limit(resource.RLIMIT_FSIZE, int(config.file_mb * MiB))
    _limit(resource.RLIMIT_CORE, 0)
    # Open files bound what the allow-list leaves of kernel memory outside RLIMIT_AS: pipes (64 KiB each,
    # F_SETPIPE_SZ is refused), epoll, eventfd and timerfd objects.
    _limit(resource.RLIMIT_NOFILE, OPEN_FILES)
    # RLIMIT_NPROC counts the tasks of the real uid: with a uid of its own the worker may hold
    # exactly the tasks it has plus `processes`. Without root the grader's own processes share
    # the uid, so only "none at all" can be enforced.
    nproc: int | None
    if config.uid is not None:
        nproc = tasks + config.processes
    elif config.processes == 0:
        nproc = 0
    else:
        nproc = None
    if nproc is not None:
        _limit(resource.RLIMIT_NPROC, nproc)
    return data_limit, nproc


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
    # What the grader sends is decoded as trusted data (plain.decode_trusted): the checks of plain.decode
    # guard the grader against a worker, not a worker against its grader.
    # How long to read the channel awake before sleeping on it: what the grader's last frame said (it spins
    # too, where its lane has a CPU for each side; see autograder.sandbox.affinity), at most a hundredth.
    wait = _Wait()
    calls = _Calls(plain.decode_trusted, probes.Request, probes.Reply, probes.execute, config.output_bytes,
                   _asker(chan, plain.encode, plain.decode_trusted, wait), probes.stand_in, probes.stand_in_module)
    send, recv, cell = send_frame, recv_frame, run_cell
    clock, loads = time.perf_counter, json.loads
    namespace = fresh_namespace()
    while True:
        header, blob = recv(chan, None, max_blob=1 << 40, spin=wait.spin)
        wait.told(header)
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
        exec(builtins.compile(code, f"<cell {index}>", "exec"), namespace)  # what a worker is for
    except BaseException as exc:  # noqa: BLE001 - student code may raise anything
        return {"index": index, "status": "error", "error_type": _type_name(exc),
                "message": _describe_cell_error(exc, index), "seconds": time.perf_counter() - start}
    return {"index": index, "status": "ok", "error_type": "", "message": "",
            "seconds": time.perf_counter() - start}


class _Wait:
    """The spin the grader asked for with its last frame (seconds, bounded)."""

    def __init__(self) -> None:
        self.spin = 0.0

    def told(self, header: dict[str, Any]) -> None:
        spin = header.get("spin")
        self.spin = min(float(spin), 0.01) if type(spin) is float and spin > 0 else 0.0


def _asker(chan: socket.socket, encode: Any, decode: Any, wait: _Wait) -> Any:
    """``ask(name, phase, payload)`` for :func:`autograder.probes.stand_in`: one ``stand_in`` frame to the
    grader in the middle of a call, and its answer (the grader alone decides what it answers, and for which
    call; a worker that asks for anything else has its call fail)."""
    send, recv = send_frame, recv_frame

    def ask(name: str, phase: str, payload: Any) -> Any:
        send(chan, {"t": "stand_in", "name": name, "phase": phase}, encode(payload))
        header, blob = recv(chan, None, max_blob=1 << 40, spin=wait.spin)
        if header.get("t") != "stand_in_reply":
            raise RuntimeError(f"the grader did not answer the call of {name}")
        if header.get("status") != "ok":
            # The reference's own kind where it is a plain one (a ValueError for sizes that do not divide,
            # as the student's own code would raise); anything else, the grader's refusal, a RuntimeError.
            kind = raised.get(str(header.get("error_type")), RuntimeError)
            raise kind(str(header.get("error") or f"the grader refused the call of {name}"))
        return decode(blob).to_python()

    raised = {k.__name__: k for k in (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
                                       NotImplementedError, AssertionError)}
    return ask


class _Calls:
    """Answers one call request: decode it, run it through :func:`autograder.probes.execute`.

    Holds the functions it uses, taken before the cells ran (see :func:`_serve`). A request may name
    functions of earlier exercises that the grader answers while it runs (``stand_ins``).
    """

    def __init__(self, decode: Any, request: Any, reply: Any, execute: Any, output_bytes: int, ask: Any = None,
                 stand_in: Any = None, stand_in_module: Any = None):
        self.decode, self.request, self.reply, self.execute = decode, request, reply, execute
        self.output_bytes, self.ask, self.stand_in, self.stand_in_module = output_bytes, ask, stand_in, stand_in_module
        self.clock, self.type_name, self.safe_str = time.perf_counter, _type_name, _safe_str

    def __call__(self, namespace: dict[str, Any], header: dict[str, Any], blob: bytes) -> Any:
        try:
            args, kwargs = self.decode(blob).to_python()
            names = header.get("stand_ins") or []
            modules = set(header.get("stand_in_modules") or [])        # classes: an nn.Module answered by the grader
            stand_ins = {str(n): (self.stand_in_module if n in modules else self.stand_in)(str(n), self.ask)
                         for n in names[:16]} if self.ask else {}
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
    except Exception:  # noqa: BLE001 - a hostile metaclass: the reply still goes out
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
        except Exception:  # noqa: BLE001 - a forged traceback: the message just names no line
            line = None
    where = f" (line {line})" if line else ""
    return f"{_type_name(exc)}: {first}{where}" if first else f"{_type_name(exc)}{where}"
