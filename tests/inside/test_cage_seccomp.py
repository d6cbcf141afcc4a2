"""Issue 23: the worker's seccomp filter is default-deny (an allow-list), in every caged mode.

Each refused call is made from a cell in a real caged worker, through libc's ``syscall()``
with arguments that would succeed without the filter, and must fail with EPERM; the calls
that are allowed on the worker itself only (prlimit64, setpriority, sched_setaffinity) work
there and fail on any other process. That torch's operations in the course still run is
shown by the broad workload in tests/sandbox/test_host.py, the golden snapshot and validate's corpora,
all graded in the same cage.
"""
from __future__ import annotations

import errno

import pyseccomp

from autograder.course.config import Limits
from autograder.course.notebook import Cell
from autograder.sandbox import Sandbox
from autograder.inside import cage

LIMITS = Limits(call_seconds=10.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)

#: Calls nobody graded needs, each with arguments that succeed when no filter stands in the way.
#: name -> the Python expression of its arguments (in the probe cell below).
REFUSED = {
    "memfd_create": "name, 0",                                   # memory no rlimit counts
    "socketpair": "AF_UNIX, SOCK_DGRAM, 0, pair",                # sendto() any named socket of the host
    "socket": "AF_UNIX, SOCK_STREAM, 0",
    "mq_open": "qname, os.O_CREAT | os.O_RDWR, 0o600, None",     # a POSIX queue outliving the batch
    "inotify_init1": "0",                                        # watching the host's folders
    "chmod": "here, 0o777",                                      # the instructor's files' metadata
    "fchmodat": "AT_FDCWD, here, 0o777, 0",
    "chown": "here, os.getuid(), os.getgid()",
    "fchownat": "AT_FDCWD, here, os.getuid(), os.getgid(), 0",
    "utimensat": "AT_FDCWD, here, None, 0",
    "setxattr": "here, b'user.x', b'1', 1, 0",
    "removexattr": "here, b'user.x'",
    "symlink": "here, b'link'",
    "link": "here, b'hard'",
    "mknod": "b'node', 0o10600, 0",
    "shmget": "0, 4096, 0o1600",                                 # SysV IPC in every mode
    "msgget": "0, 0o1600",
    "semget": "0, 1, 0o1600",
    "execve": "b'/bin/true', None, None",
    "ptrace": "0, 0, 0, 0",
    "unshare": "0",
    "personality": "0xFFFFFFFF",
    "pidfd_open": "os.getpid(), 0",
    "kcmp": "os.getpid(), os.getpid(), 0, 0, 0",
    "io_uring_setup": "1, params",
    "mlock": "buf, 4096",
    "statfs": "here, statbuf",                                   # the host's file systems
    "ioprio_set": "1, 0, 0",
    "sched_setscheduler": "0, 0, params",
}
#: Allowed on the worker itself, refused on any other process: name -> (own call, another's call).
OWN_ONLY = {
    "prlimit64": ("0, RLIMIT_CPU, None, old", "other, RLIMIT_CPU, None, old"),
    "setpriority": ("PRIO_PROCESS, 0, 1", "PRIO_PROCESS, other, 1"),
    "sched_getaffinity": ("0, 128, cpus", "other, 128, cpus"),
    "sched_setaffinity": ("0, 128, cpus", "other, 128, cpus"),
}
#: Allowed with some arguments only: (allowed call, refused call).
SOME_ARGUMENTS = {
    "ioctl": ("fd, 0x5421, byref(one)", "fd, 0x5412, byref(ch)"),            # FIONBIO yes, TIOCSTI no
    "fcntl": ("fd, 1, 0", "fd, 1031, 1 << 20"),                              # F_GETFD yes, F_SETPIPE_SZ no
    "prctl": ("15, name, 0, 0, 0", "4, 1, 0, 0, 0"),                         # PR_SET_NAME yes, SET_DUMPABLE no
    "sendto": ("fd, buf, 1, 0, None, 0", "fd, buf, 1, 0, addr, 110"),       # send() yes, to an address no
}

PROBE = '''
import ctypes, os
from ctypes import byref
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AF_UNIX, SOCK_STREAM, SOCK_DGRAM, AT_FDCWD = 1, 1, 2, -100
RLIMIT_CPU, PRIO_PROCESS = 0, 0
name, qname, here = b"x", b"autograder-test-queue", b"f"
open("f", "w").close()
pair, old, params = (ctypes.c_int * 2)(), (ctypes.c_ulong * 2)(), (ctypes.c_ubyte * 256)()
statbuf, cpus, buf = (ctypes.c_ubyte * 256)(), (ctypes.c_ubyte * 128)(), ctypes.create_string_buffer(4096)
one, ch, addr = ctypes.c_int(1), ctypes.c_char(b"x"), ctypes.create_string_buffer(b"\\x01\\x00/dev/log", 110)
r, w = os.pipe()
fd = w
other = os.getppid() or 2      # a process not the worker (in a PID namespace: none at all)
errors = {{}}
for key, (number, args) in {calls}.items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[a if not isinstance(a, int) else ctypes.c_long(a)
                                                   for a in eval("(" + args + ",)" if args else "()")])
    errors[key] = 0 if result >= 0 else ctypes.get_errno()
'''


def _number(name: str) -> int:
    return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)


def run_probe(calls: dict[str, tuple[str, str]]) -> tuple[dict[str, int], list[str]]:
    """Make each call (key: (system call, arguments)) in a caged worker: the errno each got, 0 for none."""
    table = {key: (_number(name), args) for key, (name, args) in calls.items()}
    source = PROBE.format(calls=repr(table)) + "\ndef result():\n    return [errors[k] for k in sorted(errors)]\n"
    from autograder.inside.probes import Request

    with Sandbox(LIMITS) as sandbox:
        with sandbox.open([Cell(0, None, source, source, None)], label="seccomp") as worker:
            cell = worker.cells[0]
            assert cell.status == "ok", cell.message
            reply = worker(Request("result", (), {}))
            assert reply.status == "ok", reply
            layers = list(sandbox.isolation.layers)
            return dict(zip(sorted(table), reply.value().to_python(), strict=True)), layers


def test_every_call_off_the_list_is_refused_with_eperm():
    got, layers = run_probe({name: (name, args) for name, args in REFUSED.items()})
    assert "seccomp" in layers
    assert got == {name: errno.EPERM for name in REFUSED}


def test_calls_on_the_worker_itself_pass_and_on_another_process_are_refused():
    calls = {}
    for name, (own, another) in OWN_ONLY.items():
        calls[f"{name} own"] = (name, own)
        calls[f"{name} other"] = (name, another)
    for name, (allowed, refused) in SOME_ARGUMENTS.items():
        calls[f"{name} allowed"] = (name, allowed)
        calls[f"{name} refused"] = (name, refused)
    got, _ = run_probe(calls)
    for name in OWN_ONLY:
        assert got[f"{name} own"] == 0, (name, got)
        assert got[f"{name} other"] == errno.EPERM, (name, got)
    for name in SOME_ARGUMENTS:
        assert got[f"{name} allowed"] != errno.EPERM, (name, got)      # sendto on a pipe: ENOTSOCK
        assert got[f"{name} refused"] == errno.EPERM, (name, got)


def test_the_list_covers_every_call_the_course_was_measured_making():
    """The calls scripts/measure_syscalls.py saw caged workers make (samples and validate) are allowed."""
    measured = {"brk", "futex", "getuid", "ioctl", "prctl", "prlimit64", "recvfrom", "rt_sigaction", "sendto",
                "exit_group", "openat"}
    assert measured <= cage.allowed_names()
    # Nothing the old deny-list named slipped into the allow-list.
    for name in ("ptrace", "mount", "bpf", "keyctl", "unshare", "setns", "memfd_create", "socket", "socketpair",
                 "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "utimensat", "setxattr", "fsetxattr",
                 "mq_open", "shmget", "msgget", "inotify_init1", "fanotify_init", "execve", "io_uring_setup",
                 "userfaultfd", "perf_event_open", "process_vm_readv", "pidfd_getfd", "open_by_handle_at"):
        assert name not in cage.allowed_names(), name


def test_the_doctor_summary_describes_the_filter():
    summary = cage.filter_summary()
    assert summary["default"] == "deny (EPERM)"
    assert summary["allowed"] == len(cage.allowed_names())
    assert 50 < summary["instructions"] < 2000
