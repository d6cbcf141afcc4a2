"""The cage a sandbox worker enters right after its fork: student code reaches nothing trusted.

One *mode* per batch, the best this machine offers, chosen by the sandbox's first
probe worker and recorded in every result (``isolation``):

``root``
    The grader runs as root. The template clones each worker straight into new
    PID, mount, network and IPC namespaces; the worker mounts a tmpfs capped at
    ``limits.disk_mb`` over its empty work folder, chroots into it and drops to
    a uid of its own.
``userns``
    Not root, and the kernel lets an ordinary user create user namespaces (most
    distributions do). The same, in a user namespace of the worker's own: it
    maps itself to uid 1000 there (the grader's uid outside), mounts the tmpfs,
    chroots and drops every capability.
``landlock``
    User namespaces are refused (some distributions restrict them; containers
    with a default seccomp profile). Landlock denies every file access (the
    template has already loaded all the worker needs), TCP bind and connect,
    abstract Unix sockets and signals outside the worker. What stays open is
    :data:`LANDLOCK_GAPS`.
``none``
    ``--no-isolation`` only (trusted code): resource limits and nothing else.

Every caged mode adds ``no_new_privs``, a default-deny seccomp filter (libseccomp,
through pyseccomp: :data:`ALLOWED_SYSCALLS`, the calls measured and documented
below, some only with the arguments that keep them on the worker itself; anything
else fails with EPERM) and an address-space limit (RLIMIT_AS: the template's own
address space plus ``limits.memory_mb``) that counts every mapping, shared and
anonymous alike. What no rlimit counts is either refused by the filter (memfd,
socket pairs, SysV and POSIX IPC, pipe buffers past 64 KiB) or bounded: 256 open
files, the tmpfs at ``limits.disk_mb``.

The namespaces die with the worker: its tmpfs, its SysV IPC objects and any
process it started (the worker is PID 1 of its PID namespace) go with it.
"""
from __future__ import annotations

import ctypes
import errno
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

MODES = ("root", "userns", "landlock", "none")

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                   CLONE_NEWNET, CLONE_NEWTIME)
_SIGCHLD = 17
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
#: The uid a ``userns`` worker has inside its namespace (any but 0: no root there either).
INSIDE_ID = 1000
#: Files a worker's tmpfs may hold (a flood of empty files fills no disk but the inode table).
TMPFS_INODES = 4096
#: The seccomp filter is an allow-list: a caged worker may make these system calls and no other
#: (anything else fails with EPERM, in every caged mode, including the next call nobody listed).
#: Measured with scripts/measure_syscalls.py: every call the caged workers made while grading the
#: bundled samples and while `autograder validate` graded the course's 90 alternatives and 184 mistakes
#: on every seed (brk, futex, getuid, ioctl, prctl, prlimit64, recvfrom, rt_sigaction, sendto and
#: exit_group; the warm template leaves little to do), and, group by group, the calls Python, glibc,
#: NumPy and torch make on the paths those runs did not take (large tensors, threads, sleeping,
#: randomness, tracebacks, scratch files in the worker's own tmpfs). Each group is a job, not a guess
#: per call; what a group leaves out (chmod, chown, utime and xattrs, memfd, new sockets and socket
#: pairs, POSIX queues, SysV IPC, inotify, exec, ptrace, mount, bpf, keys, namespaces, ...) is denied.
ALLOWED_SYSCALLS: dict[str, tuple[str, ...]] = {
    "memory": ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "get_mempolicy"),
    "threads and signals": ("futex", "futex_waitv", "set_robust_list", "set_tid_address", "rseq", "sched_yield",
                            "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
                            "rt_sigsuspend", "sigaltstack", "restart_syscall", "exit", "exit_group", "arch_prctl",
                            "wait4", "waitid", "alarm", "setitimer", "getitimer", "timer_create", "timer_settime",
                            "timer_gettime", "timer_getoverrun", "timer_delete", "pause"),
    "who am I": ("getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
                 "getgroups", "getpgrp", "getpgid", "getsid", "getcpu", "uname", "sysinfo", "getrlimit",
                 "setrlimit", "getrusage", "times", "umask"),
    "time and randomness": ("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
                            "time", "getrandom"),
    "open descriptors": ("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
                         "preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "fstat",
                         "fstatfs", "ftruncate", "fsync", "fdatasync", "fallocate", "fadvise64", "flock",
                         "sendfile", "copy_file_range", "pipe", "pipe2", "eventfd2", "poll", "ppoll", "select",
                         "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
                         "timerfd_create", "timerfd_settime", "timerfd_gettime"),
    # Paths: in the root and userns cages only the worker's own tmpfs is there; in the Landlock cage no
    # file of the host may be opened, listed, made or removed (its metadata can still be read: LANDLOCK_GAPS).
    "paths": ("openat", "open", "newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
              "readlink", "readlinkat", "getcwd", "chdir", "fchdir", "getdents64", "mkdir", "mkdirat", "rmdir",
              "unlink", "unlinkat", "rename", "renameat", "renameat2", "truncate"),
    # The worker's channel to the grader exists before the cage; no socket can be made afterwards.
    "its channel": ("recvfrom", "recvmsg", "shutdown", "getsockopt", "getsockname", "getpeername"),
}
#: Calls allowed only on the worker itself: name -> index of the argument naming the process, which
#: must be 0 or the worker's own pid (prlimit64 on the grader lowered every later worker's CPU limit).
OWN_PROCESS: dict[str, int] = {
    "prlimit64": 0, "setpriority": 1, "getpriority": 1, "sched_setaffinity": 0, "sched_getaffinity": 0,
    "sched_getparam": 0, "sched_getscheduler": 0, "sched_getattr": 0,
}
#: Calls allowed with some argument values only: name -> (argument index, allowed values).
ARGUMENT_VALUES: dict[str, tuple[int, tuple[int, ...]]] = {
    # TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX: never TIOCSTI or a device's requests.
    "ioctl": (1, (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)),
    # F_DUPFD .. F_SETLKW, the OFD locks, F_DUPFD_CLOEXEC, F_GETPIPE_SZ: not F_SETOWN/F_SETSIG (signals
    # to others), F_SETLEASE, F_NOTIFY (watching folders) or F_SETPIPE_SZ (pipe buffers past 64 KiB).
    "fcntl": (1, (0, 1, 2, 3, 4, 5, 6, 7, 36, 37, 38, 1030, 1032)),
    # PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME, PR_GET_SECCOMP,
    # PR_CAPBSET_READ, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_SET_VMA (naming its own mappings).
    "prctl": (0, (1, 2, 3, 15, 16, 21, 23, 38, 39, 0x53564D41)),
}
#: With --device cuda the driver talks to its device files (opened before the cage) through ioctl
#: requests of its own and starts threads of its own: there ioctl takes any request.
CUDA_SYSCALLS = ("ioctl", "membarrier", "mbind", "set_mempolicy")
#: A socket to send on: only without an address (send(), on the channel), never to a named socket.
#: Signals: in the namespaced cages only the worker's own processes can be named; in the Landlock cage
#: only the worker itself, unless Landlock scopes signals (ABI 6+).
SIGNALS = ("kill", "tgkill")
#: Fails with ENOSYS so that libc falls back to the call above it (clone3's flags sit in memory).
FALL_BACK = ("clone3",)
#: What the landlock mode leaves open, said in the doctor's table and docs/admin/isolation.md.
LANDLOCK_GAPS = ("no namespaces: the worker keeps the host's process ids and, with processes > 0, its children "
                 "may outlive it until the sandbox sweeps them; it can read the metadata of host paths (stat: "
                 "size, times, owner), but neither signal nor set limits or priorities of another process, "
                 "read, change or watch a file, nor open a socket")


class CageError(OSError):
    """A layer of the cage could not be set up (the worker reports it and stops)."""


@dataclass
class Isolation:
    """What a batch's workers run in: recorded in every result JSON."""

    mode: str
    layers: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)     # layer -> why it is not there

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "layers": list(self.layers), "missing": dict(self.missing)}


# -- libc --------------------------------------------------------------------------------------------
_LIBC: Any = None
_PYLIBC: Any = None


def libc() -> Any:
    """libc through ctypes, loaded in the template (a chrooted worker could not load it)."""
    global _LIBC, _PYLIBC
    if _LIBC is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        lib.unshare.argtypes = [ctypes.c_int]
        lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        lib.syscall.restype = ctypes.c_long
        _LIBC = lib
        # The same library called with the GIL held: a clone must not let another thread run in between.
        _PYLIBC = ctypes.PyDLL(None, use_errno=True)
        _PYLIBC.syscall.restype = ctypes.c_long
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise CageError(err, f"{what}: {os.strerror(err)}")


# -- the template side: cloning a worker into its namespaces ---------------------------------------
def clone_flags(mode: str) -> int:
    if mode == "root":
        return CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC
    if mode == "userns":
        return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC
    return 0


def fork_into(mode: str) -> int:
    """``os.fork()``, with the child in the mode's new namespaces (one clone: no second fork).

    Python's own fork bookkeeping runs around the raw clone (PyOS_BeforeFork and the
    After hooks), exactly as ``os.fork`` does it.
    """
    flags = clone_flags(mode)
    if not flags:
        return os.fork()
    number = _SYS_CLONE.get(os.uname().machine)
    if number is None:
        raise CageError(errno.ENOSYS, f"clone with namespaces: unsupported machine {os.uname().machine}")
    libc()
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = _PYLIBC.syscall(ctypes.c_long(number), ctypes.c_ulong(flags | _SIGCHLD), ctypes.c_ulong(0),
                          ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise CageError(err, f"clone into new namespaces: {os.strerror(err)}")
    return int(pid)


# -- seccomp -------------------------------------------------------------------------------------------
_SECCOMP: dict[str, Any] = {}
#: Any of these flags makes a clone a new namespace (CLONE_NEWTIME only exists through clone3).
_NAMESPACE_MASK = 0
for _flag in NAMESPACE_FLAGS:
    if _flag != CLONE_NEWTIME:
        _NAMESPACE_MASK |= _flag


def prepare() -> None:
    """In the template: load libc and libseccomp (a worker builds its filter after the fork: its own pid)."""
    libc()
    try:
        import pyseccomp  # noqa: PLC0415 - optional: the seccomp layer is absent without it
    except (ImportError, OSError):
        return
    try:
        build_filter(mode="root", own_pid=os.getpid(), device="cpu", scoped_signals=False)
    except Exception:  # noqa: BLE001 - no filter: the worker reports the layer missing
        return
    _SECCOMP["module"] = pyseccomp


def allowed_names(device: str = "cpu") -> set[str]:
    """Every system call a caged worker may make at all (some only with the arguments above)."""
    names = {name for group in ALLOWED_SYSCALLS.values() for name in group}
    names |= set(OWN_PROCESS) | set(ARGUMENT_VALUES) | set(SIGNALS) | {"clone", "sendto"}
    if device == "cuda":
        names |= set(CUDA_SYSCALLS)
    return names


def build_filter(*, mode: str, own_pid: int, device: str, scoped_signals: bool) -> Any:
    """The worker's seccomp filter (default deny: EPERM), built in the worker before it is loaded."""
    import pyseccomp as sc  # noqa: PLC0415 - optional: the seccomp layer is absent without it

    f = sc.SyscallFilter(defaction=sc.ERRNO(errno.EPERM))
    _allow_unrestricted(f, sc, device)
    _allow_some_arguments(f, sc, own_pid, device)
    # Threads, and processes where limits.processes allows them (RLIMIT_NPROC counts them): no namespace.
    f.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, _NAMESPACE_MASK, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.add_rule(sc.ALLOW, "sendto", sc.Arg(4, sc.EQ, 0))
    _allow_signals(f, sc, own_pid, any_target=mode in ("root", "userns") or scoped_signals)
    return f


def _allow_unrestricted(f: Any, sc: Any, device: str) -> None:
    """Allow the calls of ALLOWED_SYSCALLS (and, on a GPU, CUDA_SYSCALLS) whatever their arguments."""
    unrestricted = [name for group in ALLOWED_SYSCALLS.values() for name in group]
    if device == "cuda":
        unrestricted += [name for name in CUDA_SYSCALLS if name not in OWN_PROCESS]
    for name in unrestricted:
        try:
            f.add_rule(sc.ALLOW, name)
        except (ValueError, RuntimeError, OSError):
            pass  # a call this architecture does not have (open, stat, ... on aarch64)


def _int_arg(sc: Any, index: int, value: int) -> Any:
    """A rule on an int argument: the kernel reads the register's low 32 bits, whatever the caller left above."""
    return sc.Arg(index, sc.MASKED_EQ, 0xFFFFFFFF, value & 0xFFFFFFFF)


def _allow_some_arguments(f: Any, sc: Any, own_pid: int, device: str) -> None:
    """Allow OWN_PROCESS's calls on the worker itself only, and ARGUMENT_VALUES's with those values only."""
    for name, index in OWN_PROCESS.items():
        for pid in sorted({0, own_pid}):
            f.add_rule(sc.ALLOW, name, _int_arg(sc, index, pid))
    for name, (index, values) in ARGUMENT_VALUES.items():
        if device == "cuda" and name in CUDA_SYSCALLS:
            continue
        for value in values:
            f.add_rule(sc.ALLOW, name, _int_arg(sc, index, value))


def _allow_signals(f: Any, sc: Any, own_pid: int, *, any_target: bool) -> None:
    """Allow SIGNALS to any target where the cage keeps them in (``any_target``), else to the worker only."""
    if any_target:
        for name in SIGNALS:
            f.add_rule(sc.ALLOW, name)
    else:
        for pid in (0, own_pid, -own_pid):      # itself, its process group (it is the group's leader)
            f.add_rule(sc.ALLOW, "kill", _int_arg(sc, 0, pid))
        f.add_rule(sc.ALLOW, "tgkill", _int_arg(sc, 0, own_pid))


def filter_summary(mode: str = "root", device: str = "cpu") -> dict[str, Any]:
    """What `autograder doctor` says of the filter: its default, what it allows, its size in BPF."""
    f = build_filter(mode=mode, own_pid=os.getpid(), device=device, scoped_signals=False)
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        size = out.tell()
    return {"default": "deny (EPERM)", "allowed": len(allowed_names(device)),
            "restricted": len(OWN_PROCESS) + len(ARGUMENT_VALUES) + 2 + (len(SIGNALS) if mode == "landlock" else 0),
            "instructions": size // 8}


# -- the worker side: entering the cage -------------------------------------------------------------
def enter(mode: str, *, workdir: str, uid: int | None, gid: int | None, disk_mb: float,
          outer_uid: int, outer_gid: int, device: str = "cpu") -> Isolation:
    """Set up ``mode``'s cage in this (single-threaded, just forked) worker; returns what holds.

    Raises CageError when a layer the mode promises cannot be set up: the worker then reports the
    failure and stops, and the sandbox tries the next mode or refuses. The resource limits are not
    the cage's: the worker sets them all in one place once it is inside (``worker._limits``).
    """
    if mode not in MODES:
        raise CageError(errno.EINVAL, f"unknown cage mode {mode!r}")
    iso = Isolation(mode)
    lib = libc()
    os.chdir(workdir)
    if mode == "userns" and outer_uid == 0:
        # Its one mapped id would be the grader's: uid 0 of the host, whatever it may still reach.
        raise CageError(errno.EPERM, "userns: the grader runs as root, so the worker's only id would map "
                                     "to uid 0 outside; as root the 'root' mode gives it a uid of its own")
    if mode in ("root", "userns"):
        _enter_namespaces(iso, lib, workdir=workdir, uid=uid, gid=gid, disk_mb=disk_mb, outer_uid=outer_uid,
                          outer_gid=outer_gid)
    elif mode == "landlock" and uid is not None and gid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        iso.layers.append("own-uid")
    _check(lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    iso.layers.append("no-new-privs")
    if mode == "landlock":
        iso.layers += landlock_restrict()
    if mode != "none":
        _load_seccomp(iso, device)
    return iso


def _enter_namespaces(iso: Isolation, lib: Any, *, workdir: str, uid: int | None, gid: int | None, disk_mb: float,
                      outer_uid: int, outer_gid: int) -> None:
    """The namespaced cages' layers (``iso.mode`` root or userns): their ids, the tmpfs root, no privilege left."""
    mode = iso.mode
    iso.layers += ["pid-ns", "mount-ns", "net-ns", "ipc-ns"]
    if mode == "userns":
        _map_ids(outer_uid, outer_gid)
        iso.layers.insert(0, "user-ns")
    _tmpfs_root(lib, workdir=workdir, owner=INSIDE_ID if mode == "userns" else uid,
                group=INSIDE_ID if mode == "userns" else gid, disk_mb=disk_mb)
    iso.layers.append("tmpfs-root")
    if mode == "root":
        if uid is None or gid is None:      # (the sandbox gives both wherever it runs as root)
            raise CageError(errno.EINVAL, "root: the worker was given no uid and gid of its own")
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)        # from root to a uid of its own: every capability goes with it
        iso.layers.append("own-uid")
    else:
        _drop_capabilities()
        iso.layers.append("no-capabilities")


def _tmpfs_root(lib: Any, *, workdir: str, owner: int | None, group: int | None, disk_mb: float) -> None:
    """Make ``/`` private, mount a tmpfs of ``disk_mb`` (owned by ``owner``) on ``workdir`` and chroot into it."""
    _check(lib.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    options = f"size={max(1, int(disk_mb * 1024))}k,nr_inodes={TMPFS_INODES},mode=0700"
    if owner is not None:
        options += f",uid={owner},gid={group}"
    _check(lib.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     options.encode()), "mount the worker's tmpfs")
    os.chdir(workdir)
    os.chroot(workdir)
    os.chdir("/")


def _load_seccomp(iso: Isolation, device: str) -> None:
    """Load the seccomp filter for ``iso.mode``, or say the layer missing where libseccomp could not be loaded."""
    if "module" not in _SECCOMP:
        # A layer missing, said in every result and by `autograder doctor`; the rest of the cage holds.
        iso.missing["seccomp"] = "libseccomp.so.2 (through pyseccomp) could not be loaded"
    else:
        build_filter(mode=iso.mode, own_pid=os.getpid(), device=device,
                     scoped_signals="landlock-scope" in iso.layers).load()
        iso.layers.append("seccomp")


def _map_ids(outer_uid: int, outer_gid: int) -> None:
    """Inside a fresh user namespace: become INSIDE_ID, which is the grader's own uid/gid outside."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{INSIDE_ID} {outer_uid} 1"),
                       ("/proc/self/gid_map", f"{INSIDE_ID} {outer_gid} 1")):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        except OSError as exc:
            raise CageError(exc.errno or errno.EPERM, f"write {path}: {exc.strerror}") from None
        finally:
            os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """Every capability, from every set: the worker keeps none, not even in its own namespace."""
    lib = libc()
    for cap in range(64):
        if lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise CageError(ctypes.get_errno(), f"drop capability {cap} from the bounding set")
    header = _CapHeader(0x20080522, 0)        # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(lib.syscall(ctypes.c_long(126 if os.uname().machine == "x86_64" else 91), ctypes.byref(header),
                       ctypes.byref(data)), "capset")


# -- Landlock (the fallback without user namespaces) ---------------------------------------------------
_LANDLOCK_CREATE, _LANDLOCK_RESTRICT = 444, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
#: Every file-system right of each Landlock ABI version (1..7): all handled, none granted.
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1,
              6: (1 << 16) - 1, 7: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2


class _Ruleset(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is off or unknown."""
    lib = libc()
    version = lib.syscall(ctypes.c_long(_LANDLOCK_CREATE), None, ctypes.c_size_t(0),
                          ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def landlock_restrict() -> list[str]:
    """No file access at all; no TCP (ABI 4+); no abstract Unix sockets or signals outside (ABI 6+)."""
    abi = landlock_abi()
    if abi < 1:
        raise CageError(errno.ENOSYS, "Landlock is not enabled in this kernel")
    layers = ["landlock-fs"]
    ruleset = _Ruleset(_FS_RIGHTS[min(abi, 7)], 0, 0)
    size = 8
    if abi >= 4:
        ruleset.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
        layers.append("landlock-tcp")
    if abi >= 6:
        ruleset.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
        layers.append("landlock-scope")
    lib = libc()
    fd = lib.syscall(ctypes.c_long(_LANDLOCK_CREATE), ctypes.byref(ruleset), ctypes.c_size_t(size),
                     ctypes.c_uint32(0))
    if fd < 0:
        raise CageError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        _check(lib.syscall(ctypes.c_long(_LANDLOCK_RESTRICT), ctypes.c_int(fd), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(fd)
    return layers
