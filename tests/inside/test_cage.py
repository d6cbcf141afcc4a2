"""Issue 10: the cage on every Linux machine, tested as the instructor runs it.

``autograder grade`` runs as a subprocess on its own copy of the course: as root (CI is
root), as an ordinary user (the test drops to uid 65534 itself, with its own HOME), and
as that user with user namespaces forced off (the Landlock fallback). One hostile
submission tries every way out in its own cell; a cell raises ``BREACH <what>`` when
the attempt got through. Honest submissions in the same batch keep their exact scores,
and nothing of the attack remains after the batch.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest
import yaml

from conftest import copy_course
from support import make_samples as MS
from autograder.course.config import load_course
import unprivileged

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
SHM_KEY = 0x4711AB
DISK_MB = 32

ATTACKS = {
    "read-home": "open(SECRET).read()",
    "read-solutions": "open(SOLUTIONS).read()",
    "read-other-student": "open(OTHER).read()",
    "write-home": "open(os.path.join(HOME, 'pwned'), 'w').write('x')",
    "write-out": "open(os.path.join(OUT, 'pwned'), 'w').write('x')",
    "tcp": "socket.create_connection(('127.0.0.1', PORT), timeout=2).close()",
    "environ": "open(f'/proc/{GRADER}/environ', 'rb').read()",
    "signal": "alive(GRADER) or fail()",
    "ptrace": "ctypes.CDLL(None, use_errno=True).ptrace(16, GRADER, 0, 0) == 0 or fail()",
    "mmap": "mmap.mmap(-1, 8 << 30)",
    # Issue 23: the instructor's processes (the template is the parent where there is no PID namespace),
    # the instructor's files' metadata, memory no rlimit counts, host sockets, IPC left behind, watches.
    "prlimit": "resource.prlimit(os.getppid() or fail(), resource.RLIMIT_CPU, (cpu := "
               "resource.prlimit(os.getppid(), resource.RLIMIT_CPU)))",
    "setpriority": "os.setpriority(os.PRIO_PROCESS, os.getppid() or fail(), 0)",
    "affinity": "os.sched_setaffinity(os.getppid() or fail(), os.sched_getaffinity(0))",
    "chmod": "os.chmod(SECRET, 0o600)",
    "chown": "os.chown(SECRET, -1, -1)",
    "utime": "os.utime(SECRET, ns=((st := os.stat(SECRET)).st_atime_ns, st.st_mtime_ns))",
    "memfd": "os.write(os.memfd_create('m'), b'x' * 4096)",
    "socketpair": "socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)",
    "mq-open": "ctypes.CDLL(None, use_errno=True).mq_open(MQ_NAME, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0 "
               "or fail()",
    "inotify": "(lambda fd: fd >= 0 and ctypes.CDLL(None).inotify_add_watch(fd, HOME.encode(), 0xFFF) >= 0)("
               "ctypes.CDLL(None).inotify_init1(0)) or fail()",
}
MQ_NAME = b"/autograder-cage-test"
PRELUDE = '''
import ctypes, errno, mmap, os, resource, socket
SECRET, SOLUTIONS, OTHER, HOME, OUT, PORT, GRADER, SHM_KEY, MQ_NAME = {consts}
class Blocked(Exception):
    pass
def fail():
    raise Blocked()
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
def put_shm():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shm = libc.shmget(SHM_KEY, 4096, 0o1666)
    if shm < 0:
        fail()
    addr = libc.shmat(shm, None, 0)
    ctypes.memmove(addr, b"left by mallory", 15)
def attempt(name, code):
    try:
        exec(code, globals())
    except (OSError, Blocked, MemoryError, ValueError):
        return
    raise RuntimeError(f"BREACH {{name}}")
'''
READ_SHM = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget({key}, 0, 0)
if shm >= 0:
    raise RuntimeError("BREACH shm-left: " + ctypes.string_at(libc.shmat(shm, None, 0), 15).decode())
'''
DISK = '''
written = 0
try:
    for i in range(64):
        with open(f"f{{i}}", "wb") as f:
            f.write(b"x" * (8 << 20))
        written += 8 << 20
except OSError:
    pass
if written > {limit} << 20:
    raise RuntimeError(f"BREACH disk: {{written >> 20}} MiB written")
'''


def notebook(*cells: str) -> nbformat.NotebookNode:
    nb = MS.submission(QKV, solved="all")
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections (none may arrive)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self._stop.set()
        self.thread.join()
        self.sock.close()


def shm_keys() -> set[int]:
    with open("/proc/sysvipc/shm", encoding="ascii") as f:
        return {int(line.split()[0]) for line in list(f)[1:]}


def mq_left() -> bool:
    """Whether the attack's POSIX message queue exists (removing it: the test leaves nothing either)."""
    return ctypes.CDLL(None, use_errno=True).mq_unlink(MQ_NAME) == 0


def templates_running(course: Path) -> list[str]:
    """Sandbox templates of this course copy still alive (their PYTHONPATH names it)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"template_main" not in f.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if str(course).encode() in f.read():
                    out.append(pid)
        except OSError:
            continue
    return out


@pytest.fixture
def world(tmp_path_factory):
    """An instructor's world in /tmp (an ordinary user must reach it): HOME with a secret, a course copy,
    submissions (an honest one, the attacker, and one graded after the attacker)."""
    base = Path(tempfile.mkdtemp(prefix="cage-test-"))
    os.chmod(base, 0o755)
    home, course, subs = base / "home", copy_course(base / "course"), base / "subs"
    home.mkdir(mode=0o700)
    (home / "secret.txt").write_text("the instructor's secret")
    os.chmod(home / "secret.txt", 0o600)
    out = home / "out"
    config = yaml.safe_load((course / "course.yml").read_text(encoding="utf-8"))
    config["limits"].update(disk_mb=DISK_MB, memory_mb=512, call_seconds=20, submission_seconds=120)
    (course / "course.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    assert SHM_KEY not in shm_keys(), f"a segment with key {SHM_KEY:#x} is left from elsewhere: ipcrm -M {SHM_KEY:#x}"
    listener = Listener()
    consts = (str(home / "secret.txt"), str(course / "solutions" / "qkv_attention.py"),
              str(subs / "ada" / "02_qkv_attention.ipynb"), str(home), str(out), listener.port, os.getpid(), SHM_KEY,
              MQ_NAME)
    mq_left()
    attack = [PRELUDE.format(consts=repr(consts))]
    attack += [f"attempt({name!r}, {code!r})" for name, code in ATTACKS.items()]
    # Creating shared memory is no breach where the worker has an IPC namespace of its own; what must
    # not happen is that zoe, graded next, finds it, or that it is still there after the batch.
    attack += ["try:\n    put_shm()\nexcept (OSError, Blocked):\n    pass", DISK.format(limit=DISK_MB)]
    for student, nb in (("ada", notebook()), ("mallory", notebook(*attack)),
                        ("zoe", notebook(READ_SHM.format(key=SHM_KEY)))):
        path = subs / student / "02_qkv_attention.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(nb), encoding="utf-8")
    yield {"base": base, "home": home, "course": course, "subs": subs, "out": out, "listener": listener,
           "secret_stat": (home / "secret.txt").stat().st_mtime_ns}
    listener.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def ordinary_user() -> None:
    """The test drops to uid 65534 itself (util-linux's unshare and setpriv, on every Debian)."""
    why = unprivileged.available()
    if why:
        pytest.skip(f"cannot drop to an ordinary user here: {why}")


def grade_as(world: dict, *, user: bool, env: dict[str, str] | None = None,
             extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    # -j 2: one lane here and one forked lane whose template is a copy of this one's: both cage every worker.
    argv = [sys.executable, "-m", "autograder", "grade", str(world["subs"]), "-o", str(world["out"]), "-j", "2",
            "--force", *extra]
    env = {"PYTHONPATH": str(world["course"]), **(env or {})}
    if user:
        unprivileged.give(world["home"])
        return unprivileged.run_as_user(argv, home=world["home"], env=env, cwd=world["course"])
    # As the instructor runs it: in the course's folder, which names the course (nothing else may).
    inherited = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_COURSE"}
    return subprocess.run(argv, env={**inherited, "HOME": str(world["home"]), **env}, cwd=world["course"],
                          capture_output=True, text=True, timeout=600)


def check_contained(world: dict, done: subprocess.CompletedProcess[str], mode: str) -> dict[str, dict]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "lanes in other processes: 1 forked" in " ".join(done.stdout.split()), done.stdout[-3000:]
    results = {}
    for path in (world["out"] / "results").glob("*.json"):
        r = json.loads(path.read_text(encoding="utf-8"))
        results[r["student"]] = r
    assert set(results) == {"ada", "mallory", "zoe"}
    for r in results.values():
        assert r["isolation"]["mode"] == mode, r["isolation"]
    assert results["ada"]["points"] == QKV.points and results["zoe"]["points"] == QKV.points
    breaches = [c["message"] for r in results.values() for c in r["cells"] if "BREACH" in (c["message"] or "")]
    assert breaches == []
    attack_cells = [c for c in results["mallory"]["cells"] if c["index"] >= len(MS.submission(QKV, solved="all").cells)]
    assert len(attack_cells) == len(ATTACKS) + 3
    assert all(c["status"] == "ok" for c in attack_cells), attack_cells      # each attempt ran and was stopped
    assert results["mallory"]["points"] == QKV.points                        # and its honest part still counts
    # Nothing remains: no file written, no connection, no shared memory, no process.
    assert not (world["home"] / "pwned").exists() and not (world["out"] / "pwned").exists()
    secret = (world["home"] / "secret.txt").stat()
    assert (secret.st_mode & 0o7777, secret.st_mtime_ns) == (0o600, world["secret_stat"]), "secret.txt changed"
    assert not mq_left()
    assert world["listener"].accepted == 0
    assert SHM_KEY not in shm_keys()
    assert templates_running(world["course"]) == []
    return results


@pytest.mark.slow
def test_as_root_every_attempt_is_denied_or_contained(world):
    if os.geteuid() != 0:
        pytest.skip("this machine's tests do not run as root (the ordinary-user tests below cover it)")
    results = check_contained(world, grade_as(world, user=False), "root")
    layers = results["mallory"]["isolation"]["layers"]
    assert {"pid-ns", "mount-ns", "net-ns", "ipc-ns", "tmpfs-root", "own-uid", "seccomp"} <= set(layers)


@pytest.mark.slow
def test_as_an_ordinary_user_the_user_namespace_cage_holds(world, ordinary_user):
    done = grade_as(world, user=True)
    results = check_contained(world, done, "userns")
    assert "isolation: userns" in done.stdout
    assert {"user-ns", "pid-ns", "tmpfs-root", "no-capabilities", "seccomp"} <= set(
        results["ada"]["isolation"]["layers"])


@pytest.mark.slow
def test_without_user_namespaces_the_landlock_fallback_holds(world, ordinary_user):
    done = grade_as(world, user=True, env={"AUTOGRADER_CAGE": "landlock"})
    results = check_contained(world, done, "landlock")
    assert {"landlock-fs", "seccomp"} <= set(results["ada"]["isolation"]["layers"])


@pytest.mark.slow
def test_with_no_cage_at_all_grading_refuses_or_runs_only_when_told(world, ordinary_user):
    # An ordinary user cannot have the root cage: with only that allowed, nothing can be set up.
    done = grade_as(world, user=True, env={"AUTOGRADER_CAGE": "root"})
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "no cage for student code" in errors[0], done.stderr
    assert "--no-isolation" in done.stderr and "Traceback" not in done.stderr
    assert not (world["out"] / "results").exists() or not any((world["out"] / "results").iterdir())
    # Told, it runs uncaged: honest code only (the attacker's shared memory would really be left behind).
    shutil.rmtree(world["subs"] / "mallory")
    done = grade_as(world, user=True, env={"AUTOGRADER_CAGE": "root"}, extra=("--no-isolation",))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--no-isolation" in done.stdout
    ada = json.loads((world["out"] / "results" / "ada__02_qkv_attention.json").read_text(encoding="utf-8"))
    assert ada["isolation"]["mode"] == "none" and ada["points"] == QKV.points


@pytest.mark.slow
def test_as_root_the_user_namespace_cage_is_refused_never_mapped_to_root(world):
    """In a user namespace the worker's one id maps to the grader's: as root that is uid 0 outside."""
    if os.geteuid() != 0:
        pytest.skip("only a grader running as root could map a worker to uid 0 (this run is not root)")
    done = grade_as(world, user=False, env={"AUTOGRADER_CAGE": "userns"})
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "no cage for student code" in errors[0], done.stderr
    assert "uid 0 outside" in done.stderr and "Traceback" not in done.stderr
    assert not (world["out"] / "results").exists() or not any((world["out"] / "results").iterdir())
