"""The untrusted side of the sandbox: one worker per submission, forked from the template.

A worker is forked from the template (:mod:`autograder.inside.template`) on the grader's request, never in
the grader itself. The grader hands over, with SCM_RIGHTS, one end of a socket pair (the channel) and the
write end of a pipe (where the template reports the worker's exit status). The worker closes every other
descriptor, sends stdout/stderr to /dev/null, drops to an unprivileged uid inside an empty chroot when started
as root, applies the resource limits, runs the notebook's cells in one namespace and then answers calls
(:func:`autograder.inside.probes.execute`).

Only plain data travels on the channel, in frames: a fixed head (magic, JSON header length, blob length), a
small JSON header and a blob that is :func:`autograder.inside.plain.encode` output or JSON. No pickle in either
direction.
"""
from __future__ import annotations

import builtins
import json
import os
import resource
import signal
import socket
import sys
import time
import traceback
from typing import Any, NoReturn

from autograder.inside.protocol import MiB, WorkerConfig, recv_frame, send_frame

#: Descriptors a worker may hold (its channel, stdio and what graded code opens): 128 pipes, 8 MiB of buffers.
OPEN_FILES = 256
#: The whole environment a worker sees (the grader's is scrubbed).
WORKER_ENV = {"PATH": "/nonexistent", "HOME": "/", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
PR_SET_PDEATHSIG = 1


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
    data_now = vm_kib("VmData") * 1024
    tasks = task_count()
    address_space = vm_kib("VmSize") * 1024 + config.memory_mb * MiB
    from autograder.inside.cage import enter, libc
    from autograder.inside.memcg import LAYER, MemoryCgroups

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


def vm_kib(field: str) -> int:
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
    from autograder.inside import plain, probes, proxies
    from autograder.inside.namespace import fresh_namespace

    # Bound before any cell runs: a cell that replaces attributes of autograder.inside.worker, .probes,
    # .proxies or .plain afterwards changes nothing this loop calls.
    # What the grader sends is decoded as trusted data (plain.decode_trusted): the checks of plain.decode
    # guard the grader against a worker, not a worker against its grader.
    # How long to read the channel awake before sleeping on it: what the grader's last frame said (it spins
    # too, where its lane has a CPU for each side; see autograder.sandbox.affinity), at most a hundredth.
    wait = _Wait()
    calls = _Calls(plain.decode_trusted, probes.Request, probes.Reply, probes.execute, config.output_bytes,
                   _asker(chan, plain.encode, plain.decode_trusted, wait), proxies.stand_in,
                   proxies.stand_in_module)
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
    """``ask(name, phase, payload)`` for :func:`autograder.inside.proxies.stand_in`: one ``stand_in`` frame to the
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
    """Answers one call request: decode it, run it through :func:`autograder.inside.probes.execute`.

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


def task_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1
