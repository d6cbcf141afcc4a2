"""The sandbox against hostile submissions: each one is a graded outcome, never a crash or a hang.

Student code is given as code cells (plain strings). What a worker sends back is
compared *here*, on the trusted side, with this process's own torch and numpy.
Tests about the cage (own uid, chroot) need root and say so when skipped.
"""
from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.inside import plain
from autograder.course.config import Limits
from autograder.core.errors import AutograderError
from autograder.course.notebook import Cell
from autograder.inside.probes import Reply, Request
from autograder.sandbox import UID_BASE, Sandbox, encode_request, template_environment
from autograder.inside.worker import WORKER_ENV
from support import running

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the cage (own uid, chroot) needs the grader to run as root")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA device: torch.cuda.is_available() is False")

LIMITS = Limits(call_seconds=1.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)


def cells(*sources: str, skipped: dict[int, str] | None = None) -> list[Cell]:
    skipped = skipped or {}
    return [Cell(i, None, s, "" if i in skipped else s, skipped.get(i)) for i, s in enumerate(sources)]


def call(worker, function: str, *args, **kwargs) -> Reply:
    return worker(Request(function, args, kwargs))


def value(reply: Reply) -> plain.Value:
    assert reply.status == "ok", reply
    return reply.value()


def py(reply: Reply):
    return value(reply).to_python()


# -- cells ---------------------------------------------------------------------------
def test_cells_are_recorded_and_an_error_does_not_stop_later_cells(sandbox):
    src = cells("import torch", "x = 2", "raise ValueError('boom')", "def f(t):\n    return t * x",
                "def broken(:", "%%bash\nls", "y = undefined_name", skipped={5: "cell magic %%bash"})
    with sandbox.open(src, label="alice") as worker:
        got = [(c.index, c.status, c.error_type) for c in worker.cells]
        assert got == [(0, "ok", ""), (1, "ok", ""), (2, "error", "ValueError"), (3, "ok", ""),
                       (4, "error", "SyntaxError"), (5, "skipped", ""), (6, "error", "NameError")]
        assert worker.cells[2].message == "ValueError: boom (line 1)"
        assert worker.cells[5].message == "cell magic %%bash"
        t = torch.randn(3, 4)
        assert torch.equal(value(call(worker, "f", t)).tensor(), t * 2)
        assert call(worker, "nothing_here").status == "missing"


def test_plain_values_round_trip(sandbox):
    src = cells("import torch, numpy as np\n"
                "def many(t):\n"
                "    return (t.double(), np.arange(3), 3, 2.5, None, 's', [1, 2], {'a': t}, True)")
    with sandbox.open(src, label="plain") as worker:
        t = torch.randn(2, 3)
        out = py(call(worker, "many", t))
        assert torch.equal(out[0], t.double()) and out[0].dtype == torch.float64
        assert np.array_equal(out[1], np.arange(3))
        assert out[2:7] == (3, 2.5, None, "s", [1, 2])
        assert torch.equal(out[7]["a"], t) and out[8] is True


def test_a_broad_student_workload_runs_inside_the_cage(sandbox):
    """Lazy imports inside torch/numpy/matplotlib must not need the file system the cage hides."""
    workload = """
import math, random, itertools, collections
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import matplotlib.pyplot as plt
from torch.utils.data import DataLoader, TensorDataset
from autograder import check
torch.manual_seed(0); np.random.seed(0); random.seed(0)
x = torch.randn(4, 5, 8)
print(x)
mha = nn.MultiheadAttention(8, 2, batch_first=True)
out, w = mha(x, x, x)
F.scaled_dot_product_attention(x, x, x, is_causal=True)
loss = F.cross_entropy(torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 4, 0]), ignore_index=0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.LayerNorm(8))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(x).sum().backward(); opt.step()
torch.testing.assert_close(torch.ones(2), torch.ones(2))
torch.linalg.inv(torch.eye(3)); torch.einsum('bij,bkj->bik', x, x); torch.fft.fft(torch.randn(8))
np.linalg.norm(np.random.default_rng(0).normal(size=(3, 3)))
list(DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2))
fig, ax = plt.subplots(); ax.plot([1, 2, 3]); ax.set_title('decay'); plt.show(); plt.close(fig)
check("2.4")
"""
    roomy = LIMITS.model_copy(update={"call_seconds": 120.0, "submission_seconds": 300})  # imports on a busy machine
    with sandbox.open(cells(workload), label="workload", limits=roomy) as worker:
        assert worker.cells[0].status == "ok", worker.cells[0].message


# -- monkeypatching and odd return values ------------------------------------------------
def test_monkeypatched_comparisons_stay_in_the_worker(sandbox):
    src = cells("import torch, numpy as np, torch.testing\n"
                "torch.allclose = lambda *a, **k: True\n"
                "torch.testing.assert_close = lambda *a, **k: None\n"
                "np.allclose = lambda *a, **k: True\n"
                "torch.Tensor.__eq__ = lambda self, other: True\n"
                "def softmax(x):\n    return torch.zeros_like(x)\n"
                "def patched():\n    return torch.allclose(torch.zeros(1), torch.ones(1)), np.allclose(0, 1)")
    with sandbox.open(src, label="patcher") as worker:
        assert py(call(worker, "patched")) == (True, True)  # the patch is live in the worker...
        x = torch.randn(3, 5)
        got = value(call(worker, "softmax", x)).tensor()
    # ...and nowhere else: the trusted side compares with its own, untouched functions.
    assert type(torch.allclose).__name__ == "builtin_function_or_method"
    assert not torch.allclose(got, x.softmax(-1))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got, x.softmax(-1))
    assert not np.allclose(got.numpy(), x.softmax(-1).numpy())
    assert not bool((got == x.softmax(-1)).all())


def test_tensor_subclasses_and_always_equal_objects_arrive_described_not_sent(sandbox):
    src = cells("import torch\n"
                "class Sneaky(torch.Tensor):\n    pass\n"
                "class AlwaysEqual:\n"
                "    def __eq__(self, other):\n        return True\n"
                "    def __float__(self):\n        return 1.0\n"
                "class Fn:\n"
                "    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        return True\n"
                "def subclass(x):\n    return x.as_subclass(Sneaky)\n"
                "def equal(x):\n    return AlwaysEqual()\n"
                "def torch_function(x):\n    return Fn()\n"
                "def nested(x):\n    return (x, AlwaysEqual())\n")
    with sandbox.open(src, label="sneaky") as worker:
        x = torch.randn(2, 2)
        for name in ("subclass", "equal", "torch_function"):
            got = value(call(worker, name, x))
            assert got.kind == "other"
            with pytest.raises(plain.PlainDataError):
                got.tensor()
        assert value(call(worker, "subclass", x)).spec["type"].endswith("Sneaky")
        first, second = value(call(worker, "nested", x)).items()
        assert first.kind == "tensor" and second.kind == "other"


def test_nan_and_the_wrong_dtype_come_back_as_they_are(sandbox):
    src = cells("import torch\n"
                "def nan(x):\n    return torch.full_like(x, float('nan'))\n"
                "def half(x):\n    return x.half()\n"
                "def number(x):\n    return float('inf')\n"
                "def meta(x):\n    return x.to('meta')\n")
    with sandbox.open(src, label="odd") as worker:
        x = torch.randn(2, 3)
        assert call(worker, "meta", x).status == "error"       # a device the trusted side cannot read
        assert torch.isnan(value(call(worker, "nan", x)).tensor()).all()
        half = value(call(worker, "half", x))
        assert half.spec["dtype"] == "torch.float16" and half.tensor().dtype == torch.float16
        assert math.isinf(py(call(worker, "number", x)))


def test_a_fifty_megabyte_output_is_too_large_and_the_worker_lives_on(sandbox):
    src = cells("import torch\n"
                "def big():\n    return torch.zeros(13 * 2**20)\n"   # 52 MiB of float32
                "def small():\n    return torch.ones(2)\n")
    with sandbox.open(src, label="big") as worker:
        reply = call(worker, "big")
        assert reply.status == "too_large" and "too large" in reply.error
        assert torch.equal(value(call(worker, "small")).tensor(), torch.ones(2))
        assert worker.restarts == 0


# -- leaving early -------------------------------------------------------------------------
def test_exits_at_top_level_and_inside_functions(sandbox):
    src = cells("import os, sys", "sys.exit(0)", "def a():\n    return 1", "os._exit(0)", "def b():\n    return 2",
                "def soft():\n    sys.exit(3)\ndef hard():\n    os._exit(0)",
                "raise KeyboardInterrupt", "class Boom(BaseException):\n    pass\nraise Boom('x')")
    with sandbox.open(src, label="exiter") as worker:
        assert [c.status for c in worker.cells] == ["ok", "error", "ok", "crashed", "ok", "ok", "error", "error"]
        assert worker.cells[1].error_type == "SystemExit"
        assert "exited with status 0" in worker.cells[3].message
        assert [worker.cells[6].error_type, worker.cells[7].error_type] == ["KeyboardInterrupt", "Boom"]
        assert py(call(worker, "a")) == 1 and py(call(worker, "b")) == 2
        soft = call(worker, "soft")
        assert (soft.status, soft.error_type) == ("error", "SystemExit")
        hard = call(worker, "hard")
        assert hard.status == "crashed" and "exited with status 0" in hard.error
        # The next call forks a fresh worker and runs the cells again: grading goes on.
        assert py(call(worker, "b")) == 2
        assert worker.restarts == 1


SIGKILL_NOT_OURS = "not one of the sandbox's own limits: the machine ran short of memory, or someone stopped it"


def test_a_killed_worker_is_named_by_its_signal(sandbox):
    src = cells("import os, signal, ctypes, time\n"
                "def segv():\n    ctypes.string_at(0)\n"
                "def kill9():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                "def nap():\n    time.sleep(10)\n"
                "def fine():\n    return 1\n")
    with sandbox.open(src, label="signals") as worker:
        segv = call(worker, "segv")
        assert segv.status == "crashed" and segv.error == "killed by SIGSEGV (segmentation fault)"
        if "pid-ns" in sandbox.isolation.layers:
            # PID 1 of its own namespace: a signal from inside with its default action does nothing.
            assert call(worker, "kill9").status == "ok"
        else:
            kill9 = call(worker, "kill9")
            assert kill9.status == "crashed" and kill9.error == f"killed by SIGKILL ({SIGKILL_NOT_OURS})"
        pid = worker.pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()     # the kernel's OOM killer, say
        killed = call(worker, "nap")
        # Neither its memory cgroup nor its CPU limit: said so, never guessed as the memory limit.
        assert killed.status == "crashed" and killed.error == f"killed by SIGKILL ({SIGKILL_NOT_OURS})"
        assert py(call(worker, "fine")) == 1


@pytest.mark.slow
def test_endless_loops_time_out_and_the_next_call_still_works(sandbox):
    src = cells("while True:\n    pass",
                "import time\n"
                "def spin(x):\n    while True:\n        pass\n"
                "def stubborn(x):\n    while True:\n        try:\n            time.sleep(10)\n"
                "        except BaseException:\n            pass\n"
                "def fine(x):\n    return x + 1\n")
    with sandbox.open(src, label="looper") as worker:
        assert [c.status for c in worker.cells] == ["timeout", "ok"]
        assert "1 s" in worker.cells[0].message
        start = time.monotonic()
        reply = call(worker, "spin", 1)
        assert reply.status == "timeout" and 0.9 < time.monotonic() - start < 3
        assert py(call(worker, "fine", 1)) == 2
        start = time.monotonic()
        again = call(worker, "spin", 2)  # answered at once: the same function is not run again
        assert again.status == "timeout" and "not run again" in again.error and time.monotonic() - start < 0.9
        assert call(worker, "stubborn", 1).status == "timeout"
        assert py(call(worker, "fine", 2)) == 3
        assert worker.restarts == 2


@pytest.mark.slow
def test_cpu_and_submission_time_limits(sandbox):
    burn = cells("def burn():\n    while True:\n        pass\n")
    cpu = Limits(call_seconds=20.0, cpu_seconds=1, memory_mb=512, file_mb=1)
    with sandbox.open(burn, label="burner", limits=cpu) as worker:
        reply = call(worker, "burn")
        assert reply.status == "crashed" and reply.error == "killed by SIGXCPU (CPU time limit)"
    nap = cells("import time\ndef nap(n):\n    time.sleep(100)\ndef doze(n):\n    time.sleep(100)\n")
    wall = Limits(call_seconds=1.0, submission_seconds=1.8, memory_mb=512, file_mb=1)
    with sandbox.open(nap, label="sleeper", limits=wall) as worker:
        assert call(worker, "nap", 1).status == "timeout"          # the call limit, 1 s
        second = call(worker, "doze", 2)                             # what is left of the 1.8 s
        assert second.status == "timeout" and "submission" in second.error
        # The budget is spent: the third call is answered here, never sent to the worker (so it waits for
        # nothing; a wall-clock bound here failed on a loaded machine).
        sent = worker.calls._seq
        third = call(worker, "doze", 3)
        assert third.status == "timeout" and "submission" in third.error and worker.calls._seq == sent


#: A busy machine as the CPU limit sees it: processes that each run a fraction of a millisecond and sleep, so
#: they run between the scheduler's ticks, and the CPU-bound worker, running at each tick, is charged for their
#: time too (killed at its 1 s of ticks after some 0.6 s of its own), and plain busy loops beside them.
BURSTS = ("import time\nwhile True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.0003:\n"
          "        pass\n    time.sleep(0.0002)\n")


def test_a_cpu_limit_kill_is_named_so_on_a_busy_machine(sandbox):
    """Under load the kernel's RLIMIT_CPU kill (a SIGKILL: the worker is its PID namespace's init) comes when rusage
    shows well under the limit, since the limit counts ticks: still named the CPU limit, never "not one of the
    sandbox's own limits" (issue 66, item 3b)."""
    import subprocess
    import sys

    burn = cells("def burn():\n    while True:\n        pass\n")
    cpu = Limits(call_seconds=60.0, cpu_seconds=1, memory_mb=512, file_mb=1)
    cores = min(len(os.sched_getaffinity(0)), 4)     # (a busy 2-core CI runner is where it failed)
    hogs = [subprocess.Popen([sys.executable, "-c", BURSTS]) for _ in range(6 * cores)]
    hogs += [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"]) for _ in range(cores)]
    try:
        for n in range(3):
            with sandbox.open(burn, label=f"burner-{n}", limits=cpu) as worker:
                reply = call(worker, "burn")
                assert (reply.status, reply.error) == ("crashed", "killed by SIGXCPU (CPU time limit)"), (n, reply)
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


# -- resources ------------------------------------------------------------------------------
def test_allocating_far_past_the_memory_limit_is_an_error_not_a_crash(sandbox):
    src = cells("import torch, numpy as np\n"
                "def big_torch():\n    return torch.empty(2**34)\n"
                "def big_numpy():\n    return np.ones(2**33)\n"
                "def big_list():\n    return [0] * 2**33\n"
                "def grow():\n    chunks = []\n    while True:\n        chunks.append(np.empty(2**23))\n"
                "def fine():\n    return 1\n")
    with sandbox.open(src, label="hog") as worker:
        torch_reply = call(worker, "big_torch")
        assert torch_reply.status == "error" and "allocate" in torch_reply.error
        for name in ("big_numpy", "big_list", "grow"):
            reply = call(worker, name)
            assert (reply.status, reply.error_type) == ("error", "MemoryError"), (name, reply)
        assert py(call(worker, "fine")) == 1
        assert worker.restarts == 0


def test_files_past_the_size_limit_fail_to_write(sandbox):
    src = cells("def write(n):\n    with open('scratch.bin', 'wb') as f:\n        f.write(b'x' * n)\n    return n\n")
    with sandbox.open(src, label="writer") as worker:
        assert py(call(worker, "write", 1000)) == 1000     # its own folder is writable
        reply = call(worker, "write", 2 * 2**20)           # file_mb is 1
        assert (reply.status, reply.error_type) == ("error", "OSError") and "too large" in reply.error.lower()


def test_no_child_processes(sandbox):
    src = cells("import os, subprocess, threading\n"
                "def spawn():\n"
                "    try:\n        pid = os.fork()\n    except OSError as exc:\n        return exc.errno\n"
                "    if pid == 0:\n        os._exit(0)\n    return 'forked'\n"
                "def shell():\n    subprocess.run(['true'])\n"
                "def thread():\n    threading.Thread(target=print).start()\n")
    with sandbox.open(src, label="forker") as worker:
        assert py(call(worker, "spawn")) == 11                    # EAGAIN from RLIMIT_NPROC
        assert call(worker, "shell").status == "error"
        assert call(worker, "thread").status == "error"


# -- what the worker can see -------------------------------------------------------------------
FAKE_REPLY = '{"t": "reply", "seq": 1, "status": "ok", "error_type": "", "error": "", "forbidden": [], "seconds": 0}'
CHANNEL = ("import json, os, stat, struct, sys\n"
           "def channel():\n"
           "    return [fd for fd in range(3, 64) if _is_socket(fd)]\n"
           "def _is_socket(fd):\n"
           "    try:\n        return stat.S_ISSOCK(os.fstat(fd).st_mode)\n    except OSError:\n        return False\n"
           "def frame(head, blob=b''):\n"
           "    return struct.pack('<4sIQ', b'AGW1', len(head), len(blob)) + head + blob\n"
           "def seq():\n"
           "    f = sys._getframe()\n"
           "    while 'header' not in f.f_locals:\n        f = f.f_back\n"
           "    return f.f_locals['header']['seq']\n")


def test_printing_fake_results_changes_nothing(sandbox):
    src = cells(f"import os, sys\nprint({FAKE_REPLY!r})\nos.write(1, b'AGW1' + bytes(12))\n"
                f"sys.stderr.write({FAKE_REPLY!r})\n"
                f"def liar(x):\n    print({FAKE_REPLY!r})\n    os.write(2, b'AGW1garbage')\n    return 'wrong'\n")
    with sandbox.open(src, label="liar") as worker:
        assert worker.cells[0].status == "ok"
        assert py(call(worker, "liar", 1)) == "wrong"


@pytest.mark.parametrize("attack, expected", [
    ("os.write(fd, b'not a frame at all' * 10)", "crashed"),
    ("os.write(fd, struct.pack('<4sIQ', b'AGW1', 10, 2**40))", "too_large"),
    ("os.write(fd, frame(b'[1, 2, 3]'))", "crashed"),
    (("os.write(fd, frame(json.dumps({'t': 'reply', 'seq': seq(), 'status': 'ok'}).encode(), "
      "b'\\x05' + bytes(7) + b'junk'))"), "error"),
    ("os.write(fd, frame(json.dumps({'t': 'reply', 'seq': seq(), 'status': 'passed'}).encode()))", "crashed"),
    ("os.write(fd, struct.pack('<4sIQ', b'AGW1', 100, 0) + b'{\"t\": \"re')", "crashed"),
])
def test_garbage_on_the_channel_is_a_graded_outcome(sandbox, attack, expected):
    src = cells(CHANNEL + f"def attack(x):\n    for fd in channel():\n        {attack}\n    os._exit(0)\n"
                "def fine(x):\n    return x\n")
    with sandbox.open(src, label="forger") as worker:
        reply = call(worker, "attack", 1)
        assert reply.status == expected, reply
        assert reply.blob == b""
        assert py(call(worker, "fine", 7)) == 7


@needs_root
def test_solutions_and_the_output_folder_are_out_of_reach(sandbox, tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    secret = solutions / "qkv_attention.py"
    secret.write_text("SECRET = 'the reference'\n")
    secret.chmod(0o644)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    repo_solution = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(plain.__file__))),
                                 "solutions", "qkv_attention.py")
    src = cells("import os, sys\n"
                "def steal(path):\n"
                "    try:\n        with open(path) as f:\n            return f.read()\n"
                "    except OSError as exc:\n        return 'blocked: ' + type(exc).__name__\n"
                "def vandalize(folder):\n"
                "    try:\n        with open(folder + '/grades.csv', 'w') as f:\n            f.write('alice,100')\n"
                "        return 'written'\n"
                "    except OSError as exc:\n        return 'blocked: ' + type(exc).__name__\n"
                "def look():\n    return sorted(os.listdir('/')), os.getcwd()\n"
                "def imports():\n"
                "    found = [m for m in sys.modules if m.startswith(('solutions', 'autograder_course',\n"
                "                                                      'autograder.sandbox.host',\n"
                "                                                      'autograder.grading'))]\n"
                "    for name in ('solutions', 'autograder_course'):\n"
                "        try:\n            __import__(name)\n            found.append(name)\n"
                "        except ImportError:\n            pass\n"
                "    return found\n")
    with sandbox.open(src, label="thief") as worker:
        for path in (str(secret), repo_solution, "/etc/passwd", "/proc/self/environ"):
            assert py(call(worker, "steal", path)).startswith("blocked"), path
        assert py(call(worker, "vandalize", str(out))).startswith("blocked")
        assert py(call(worker, "look")) == ([], "/")
        assert py(call(worker, "imports")) == []
    assert list(out.iterdir()) == []


@needs_root
def test_the_worker_runs_as_an_unprivileged_user_with_a_scrubbed_environment(sandbox):
    src = cells("import os\n"
                "def me():\n    return os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), dict(os.environ)\n")
    with sandbox.open(src, label="whoami") as worker:
        uid, euid, gid, groups, env = py(call(worker, "me"))
    assert uid == euid == gid and uid >= UID_BASE
    assert groups == [] and env == WORKER_ENV


@needs_root
def test_the_worker_has_no_network(sandbox):
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        src = cells("import socket\n"
                    "def connect(port):\n"
                    "    try:\n        socket.create_connection(('127.0.0.1', port), timeout=0.5)\n"
                    "        return 'connected'\n"
                    "    except OSError as exc:\n        return 'blocked'\n")
        with sandbox.open(src, label="caller") as worker:
            if worker.worker_info["network"]:
                pytest.skip("this machine forbids network namespaces (unshare CLONE_NEWNET)")
            assert py(call(worker, "connect", port)) == "blocked"
    finally:
        server.close()


@needs_root
def test_concurrent_workers_get_their_own_uid_and_cannot_touch_each_other(sandbox):
    src = cells("import os, signal\n"
                "def me():\n    return os.getuid()\n"
                "def kill(pid):\n"
                "    try:\n        os.kill(pid, signal.SIGKILL)\n        return 'killed'\n"
                "    except OSError as exc:\n        return type(exc).__name__\n")
    workers = [None, None]

    def open_one(i: int) -> None:
        workers[i] = sandbox.open(src, label=f"student{i}")

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first, second = workers
    try:
        assert py(call(first, "me")) != py(call(second, "me"))
        # Another uid (root cage), and another PID namespace: the other worker is not even there to name.
        assert py(call(first, "kill", second.pid)) in ("PermissionError", "ProcessLookupError")
        assert py(call(second, "me")) >= UID_BASE
    finally:
        first.close()
        second.close()


def test_uncaged_workers_run_only_when_asked_and_the_limits_still_hold(sandbox, monkeypatch):
    from autograder.inside.cage import Isolation

    # What `--no-isolation` gives (the same template, workers forked without a cage): limits still hold.
    monkeypatch.setattr(sandbox, "isolation", Isolation("none"))
    src = cells("import os, numpy as np\n"
                "def where():\n    return os.getcwd(), dict(os.environ)\n"
                "def hog():\n    return np.ones(2**33)\n"
                "def write(n):\n    with open('f.bin', 'wb') as f:\n        f.write(b'x' * n)\n")
    with sandbox.open(src, label="uncaged") as worker:
        assert worker.worker_info["caged"] is False
        assert worker.worker_info["isolation"]["mode"] == "none"
        cwd, env = py(call(worker, "where"))
        assert os.path.basename(cwd).startswith("w-") and env == WORKER_ENV
        assert call(worker, "hog").error_type == "MemoryError"
        assert call(worker, "write", 2 * 2**20).error_type == "OSError"


def test_a_closed_worker_leaves_no_process_behind(sandbox):
    worker = sandbox.open(cells("x = 1"), label="done")
    pid = worker.pid
    worker.close()
    sandbox.settle()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert call(worker, "anything").status == "crashed"


def test_the_template_inherits_no_secrets_from_the_grader():
    env = template_environment({"GITHUB_TOKEN": "ghp_x", "AWS_SECRET_ACCESS_KEY": "k", "PATH": "/usr/bin",
                                "CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "8"})
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "0" and env["OMP_NUM_THREADS"] == "1"


def test_folders_of_killed_graders_and_abandoned_ones_are_removed_at_the_next_start():
    import tempfile

    from autograder.sandbox.launch import process_identity
    from autograder.sandbox.processes import remove_stale_folders

    from autograder.sandbox.launch import write_owner

    dead = tempfile.mkdtemp(prefix="autograder-sandbox-")
    alive = tempfile.mkdtemp(prefix="autograder-sandbox-")
    fresh = tempfile.mkdtemp(prefix="autograder-sandbox-")        # being made right now: no owner yet
    abandoned = tempfile.mkdtemp(prefix="autograder-sandbox-")    # killed before naming itself, long ago
    with open(os.path.join(dead, "owner"), "w") as f:
        f.write(f"{os.getpid()} 0")   # this pid, another start time: a killed grader's pid reused
    write_owner(alive)
    assert Path(alive, "owner").read_text() == process_identity(os.getpid())
    Path(abandoned, "owner").write_text("")                        # a name cut off by a kill
    os.utime(abandoned, (time.time() - 7200, time.time() - 7200))
    try:
        remove_stale_folders()
        assert not os.path.exists(dead) and not os.path.exists(abandoned)
        assert os.path.exists(alive) and os.path.exists(fresh)
    finally:
        import shutil

        for folder in (alive, dead, fresh, abandoned):
            shutil.rmtree(folder, ignore_errors=True)


def test_requests_must_be_plain_data():
    with pytest.raises(plain.PlainDataError, match="cannot send"):
        encode_request(Request("f", (object(),)))


# -- devices -------------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_a_clear_error(sandbox):
    with sandbox.open(cells("def f(x):\n    return x"), label="cpu") as worker:
        reply = worker(Request("f", (torch.ones(1),), device="cuda"))
    assert (reply.status, reply.error_type) == ("error", "SandboxError") and "runs on cpu" in reply.error
    with pytest.raises(AutograderError, match="--device cuda: no CUDA device"):
        Sandbox(LIMITS, device="cuda")
    with pytest.raises(AutograderError, match="auto"):
        Sandbox(LIMITS, device="auto")


@needs_gpu
@pytest.mark.gpu
@pytest.mark.slow
def test_cuda_requests_run_on_the_gpu_with_tf32_off():
    src = cells("import torch\n"
                "def matmul(a, b):\n    return a @ b\n"
                "def flags():\n    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32\n")
    with Sandbox(LIMITS, device="cuda") as sb, sb.open(src, label="gpu") as worker:
        a, b = torch.randn(64, 64), torch.randn(64, 64)
        reply = worker(Request("matmul", (a, b), device="cuda"))
        got = value(reply)
        assert got.spec["device"].startswith("cuda")
        torch.testing.assert_close(got.tensor().double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
        assert py(worker(Request("flags", device="cuda"))) == (False, False)


# -- the template: imported in two steps, and copied for another grader process -----------------
@pytest.mark.slow
def test_a_worker_that_needs_what_the_template_has_not_imported_runs_again_in_a_complete_one():
    """torch._dynamo (TEMPLATE_LATER) is imported only when a worker needs it: a worker forked before
    that says an import missed (in the cage it would fail), and its submission runs again, cells and
    call, in a worker of the complete template; later workers need no second run."""
    from autograder.inside.template import TEMPLATE_LATER

    assert "torch._dynamo" in TEMPLATE_LATER
    lazy = "import torch\n\ndef f(x):\n    import torch._dynamo\n    return x + 1\n"
    with Sandbox(LIMITS) as sb:
        with sb.open(cells("import math\n"), label="plain") as worker:   # needs nothing later: one fork
            assert worker.cells[0].status == "ok" and worker.spawns == 1
        with sb.open(cells(lazy), label="call") as worker:
            assert worker.cells[0].status == "ok" and worker.spawns == 1
            assert py(call(worker, "f", 1)) == 2          # the miss came with the reply: run again, complete
            assert worker.spawns == 2 and worker.restarts == 0
            assert py(call(worker, "f", 2)) == 3 and worker.spawns == 2
        with sb.open(cells("import torch._dynamo\nok = 1\n"), label="after") as worker:
            assert worker.cells[0].status == "ok" and worker.spawns == 1   # the template is complete now
    with Sandbox(LIMITS) as sb, sb.open(cells("import torch._dynamo\n\ndef g():\n    return 7\n"),
                                        label="cells") as worker:
        assert worker.cells[0].status == "ok" and worker.spawns == 2       # the cells' miss: run again
        assert py(call(worker, "g")) == 7


def test_a_cloned_template_serves_another_sandbox_and_stops_with_it(sandbox):
    """Sandbox.clone_template: a copy of the warm template (forked by it, nothing imported again) that a
    sandbox in another grader process adopts; closing that sandbox stops the copy and its workers."""
    launch = sandbox.clone_template()
    copy = Sandbox(LIMITS, modes=(sandbox.isolation.mode,), launch=launch)
    try:
        assert copy.template_pid not in (sandbox.template_pid, os.getpid())
        assert copy.template_seconds < 5 and copy.isolation.mode == sandbox.isolation.mode
        with copy.open(cells("def f(x):\n    return x * 2\n"), label="copy") as worker:
            assert py(call(worker, "f", 21)) == 42
            assert worker.worker_info["caged"] == (sandbox.isolation.mode != "none")
            worker_pid = worker.pid
        with sandbox.open(cells("y = 1\n"), label="original") as worker:   # the original serves on
            assert worker.cells[0].status == "ok"
    finally:
        copy.close()
    clone_pid = copy.template_pid
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in (clone_pid, worker_pid)):
        time.sleep(0.05)
    assert not running(clone_pid) and not running(worker_pid)
    assert not os.path.exists(launch.folder)



def test_memory_no_rlimit_counts_is_counted_by_the_workers_memory_cgroup():
    """Issue 23: files in the worker's tmpfs are memory RLIMIT_AS does not see; the worker's memory cgroup
    counts them with the rest, and a worker past it is killed, named, and the next one runs as before."""
    from autograder.inside import memcg

    groups, why = memcg.find()
    if groups is None:
        pytest.skip(f"this machine offers no memory cgroup to the grader: {why}")
    roomy = LIMITS.model_copy(update={"memory_mb": 256, "disk_mb": 4096, "file_mb": 64, "call_seconds": 60.0})
    # 8 MiB at a time (one block is far inside RLIMIT_AS), 64 MiB a file, up to 4 GiB: the tmpfs would take it all.
    fill = ("block = b'x' * (8 << 20)\n"
            "for i in range(64):\n"
            "    with open(f'f{i}', 'wb') as f:\n"
            "        for _ in range(8):\n"
            "            f.write(block)\n")
    with Sandbox(roomy) as sandbox:
        assert "memory-cgroup" in sandbox.isolation.layers, sandbox.isolation
        with sandbox.open(cells(fill), label="filler") as worker:
            outcome = worker.cells[0]
            assert outcome.status == "crashed", outcome
            assert "killed by the kernel" in outcome.message and "memory" in outcome.message
            assert "内存" in outcome.said["zh"]
        with sandbox.open(cells("x = sum(range(10))"), label="next") as worker:
            assert worker.cells[0].status == "ok"
            ours = f"autograder-{sandbox.template_pid}-"
            assert [n for n in os.listdir(groups.base) if n.startswith(ours)] != []      # this worker's group
            # Born in a group the template made ahead, which the template left as soon as it had forked.
            # The template moves on once it has answered the grader (off the worker's critical path), so on
            # a loaded machine it may still be on its way when the worker's first cell is done: give it time.
            mine = _memory_group_of(worker.pid)
            deadline = time.monotonic() + 20
            while (template := _memory_group_of(sandbox.template_pid)) == mine and time.monotonic() < deadline:
                time.sleep(0.01)
            assert mine.split("/")[-1].startswith(ours) and mine != template
            assert template.split("/")[-1].startswith(ours)      # already in the next worker's group
        # A worker born in a group made ahead is held to its limit like one that joined its group.
        with sandbox.open(cells(fill), label="filler again") as worker:
            assert worker.cells[0].status == "crashed" and "memory" in worker.cells[0].message, worker.cells[0]
    # Each group goes with its worker, the one made ahead with the template; none is left once it has stopped.
    assert [n for n in os.listdir(groups.base) if n.startswith(ours)] == []


def _memory_group_of(pid: int) -> str:
    """The memory cgroup of process ``pid`` (v1's memory controller line, or v2's single one)."""
    with open(f"/proc/{pid}/cgroup", encoding="ascii") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    return next(path for _n, controllers, path in lines if "memory" in controllers.split(",") or controllers == "")


def _the_spare(sb: Sandbox) -> int:
    """The pid of the spare worker once it is forked."""
    with sb._spares.lock:
        assert sb._spares.lock.wait_for(lambda: sb._spares.spare is not None, timeout=30)
        assert sb._spares.spare is not None
        return sb._spares.spare[1].pid


def test_a_spare_worker_forked_ahead_serves_the_next_submission_and_goes_with_the_sandbox():
    """Sandbox.keep_spare: the next worker is forked (and caged) while a submission is graded; each
    submission still gets a worker of its own, a spare that died meanwhile or was made for other limits
    is replaced, and closing the sandbox kills the spare."""
    with Sandbox(LIMITS) as sb:
        sb.keep_spare()
        pids = []
        for i in range(3):
            spare = _the_spare(sb) if i else None
            with sb.open(cells("state = []\n", f"def f(x):\n    state.append(x)\n    return x + {i}, len(state)\n"),
                         label=f"s{i}") as worker:
                assert worker.spawns == 1 and worker.cells[1].status == "ok"
                assert py(call(worker, "f", 1)) == (1 + i, 1)      # nothing of an earlier submission is left
                if spare is not None:
                    assert worker.pid == spare
                pids.append(worker.pid)
        assert len(set(pids)) == 3 and sb.spares_used == 2
        dead = _the_spare(sb)
        with sb._spares.lock:
            assert sb._spares.spare is not None
            chan = sb._spares.spare[1].chan
        import select
        assert select.select([chan], [], [], 30)[0]     # it said it is ready, then it dies while it waits:
        os.kill(dead, signal.SIGKILL)                   # a fresh worker takes its place, no cell is lost
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and running(dead):
            time.sleep(0.02)
        with sb.open(cells("def g():\n    return 5\n"), label="after a dead spare") as worker:
            assert py(call(worker, "g")) == 5 and worker.cells[0].status == "ok"
        wider = LIMITS.model_copy(update={"memory_mb": 600})
        unfit = _the_spare(sb)
        with sb.open(cells("def g():\n    return 6\n"), label="other limits", limits=wider) as worker:
            assert py(call(worker, "g")) == 6 and worker.pid != unfit
        last = _the_spare(sb)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in (unfit, last)):
        time.sleep(0.05)
    assert not running(unfit) and not running(last)


def test_a_spare_ordered_when_a_worker_closes_is_forked_between_submissions_not_during_one():
    """keep_spare(when_closed=True) (lanes with a CPU for each side and none free): no spare is forked while a
    submission's worker runs; closing it orders the next, which the next submission takes."""
    with Sandbox(LIMITS) as sb:
        sb.keep_spare(when_closed=True)
        pids = []
        for i in range(3):
            with sb.open(cells(f"def f(x):\n    return x + {i}\n"), label=f"c{i}") as worker:
                assert py(call(worker, "f", 1)) == 1 + i
                with sb._spares.lock:        # none forked beside this submission's calls
                    assert sb._spares.spare is None and not sb._spares.busy
                pids.append(worker.pid)
            if i < 2:
                spare = _the_spare(sb)      # forked once the worker closed
                pids.append(spare)
        assert sb.spares_used == 2 and pids[1] == pids[2] and pids[3] == pids[4]
        assert len(set(pids)) == 3


def test_a_spare_is_kept_only_where_the_lanes_leave_a_core_for_it(monkeypatch):
    """A lane with a CPU for each side (grader and worker) takes two: at -j 1 on 2 CPUs it leaves none, and the
    spare's set-up would run on the lane's own CPUs in the middle of the next submission."""
    from autograder.sandbox import affinity
    from autograder.sandbox.affinity import core_to_spare

    monkeypatch.delenv("AUTOGRADER_PIN", raising=False)
    monkeypatch.delenv("AUTOGRADER_LANE_CPUS", raising=False)
    monkeypatch.setattr(affinity, "_FREE", set())
    for cpus, spare in ((2, {1: False, 2: False, 3: False}), (4, {1: True, 2: False, 3: True, 4: False, 5: False}),
                        (8, {1: True, 3: True, 4: False, 5: True, 7: True, 8: False})):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cpus: set(range(n)))
        assert {jobs: core_to_spare(jobs) for jobs in spare} == spare, cpus
    monkeypatch.setenv("AUTOGRADER_LANE_CPUS", "1")        # a CPU per lane: one lane on 2 CPUs leaves one
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert core_to_spare(1) and not core_to_spare(2)


def test_the_templates_warm_up_runs_every_probe_and_changes_nothing_a_worker_sees(sandbox):
    """The template runs a worker's usual path once before it says ready (warm_up.warm_up): every call of
    it succeeds, it starts no thread and imports nothing, and a worker's unseeded random numbers are
    still those of a fresh process (the default generator is put back as it was)."""
    import subprocess
    import sys

    from autograder.inside.protocol import TEMPLATE_ENV

    script = ("import importlib, os, sys, torch\n"
              "from autograder.inside import template as W, warm_up\n"
              "for name in W.TEMPLATE_MODULES: importlib.import_module(name)\n"
              "before, rng = set(sys.modules), torch.random.get_rng_state()\n"
              "statuses = warm_up.warm_up()\n"
              "print(statuses, len(statuses), sorted(set(sys.modules) - before),\n"
              "      torch.equal(rng, torch.random.get_rng_state()), len(os.listdir('/proc/self/task')))\n")
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, **TEMPLATE_ENV}, capture_output=True,
                         text=True, timeout=300, check=True).stdout.strip()
    from autograder.inside.probes import PROBES

    runs = 2 * 2 * len(PROBES)          # every probe, under both guard levels, in both float dtypes
    assert out == f"{['ok'] * runs} {runs} [] True 1", out
    with sandbox.open(cells("import torch\ndef draw():\n    return str(torch.initial_seed()), torch.randn(4)"),
                      label="rng") as worker:
        seed, drawn = py(call(worker, "draw"))
    assert torch.equal(drawn, torch.randn(4, generator=torch.Generator().manual_seed(int(seed))))
