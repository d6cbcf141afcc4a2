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
    abstract Unix sockets and signals outside the worker; seccomp denies SysV
    IPC and creating sockets. What stays open is :data:`LANDLOCK_GAPS`.
``none``
    ``--no-isolation`` only (trusted code): resource limits and nothing else.

Every caged mode adds ``no_new_privs``, a seccomp filter (libseccomp, through
pyseccomp) for what graded code never needs, and an address-space limit
(RLIMIT_AS: the template's own address space plus ``limits.memory_mb``) that
counts every mapping, shared and anonymous alike.

The namespaces die with the worker: its tmpfs, its SysV IPC objects and any
process it started (the worker is PID 1 of its PID namespace) go with it.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
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
#: Syscalls graded code never needs: denied with EPERM in every caged mode.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "bpf",
    "keyctl", "add_key", "request_key", "perf_event_open", "unshare", "setns", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "open_by_handle_at",
    "name_to_handle_at", "userfaultfd", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree",
    "mount_setattr", "quotactl", "syslog", "lookup_dcookie", "io_uring_setup", "kcmp", "pidfd_getfd",
)
#: SysV IPC, denied where the worker has no IPC namespace of its own.
SYSV_IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
            "msgrcv", "msgctl")
#: What the landlock mode leaves open, said in the doctor's table and the README.
LANDLOCK_GAPS = ("no namespaces: the worker keeps the host's process ids and, with processes > 0, its children "
                 "may outlive it until the sandbox sweeps them; it can neither signal, read a file nor open "
                 "a socket")


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
_FILTERS: dict[bool, Any] = {}


def prepare() -> None:
    """In the template: load libc, libseccomp and build the filters once (each worker only loads one)."""
    libc()
    try:
        import pyseccomp  # noqa: F401 - loads libseccomp.so.2 while the file system is still there
    except (ImportError, OSError):
        return
    for ipc_ns in (True, False):
        try:
            _FILTERS[ipc_ns] = _build_filter(ipc_ns)
        except Exception:  # noqa: BLE001 - no filter: the worker reports the layer missing
            pass


def _build_filter(ipc_ns: bool) -> Any:
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(deny, name)
        except (ValueError, RuntimeError, OSError):
            pass  # a syscall this architecture or libseccomp does not know
    for flag in NAMESPACE_FLAGS:
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")          # its flags sit in memory: libc falls back to clone
    # No new socket at all (the worker's channel to the grader exists already), so no address to
    # reach: not the host's named Unix sockets either, which Landlock's file rights do not cover.
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket")
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    if not ipc_ns:
        for name in SYSV_IPC:
            f.add_rule(deny, name)
    return f


# -- the worker side: entering the cage -------------------------------------------------------------
def enter(mode: str, *, workdir: str, uid: int | None, gid: int | None, disk_mb: float,
          outer_uid: int, outer_gid: int) -> Isolation:
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
        iso.layers += ["pid-ns", "mount-ns", "net-ns", "ipc-ns"]
        if mode == "userns":
            _map_ids(outer_uid, outer_gid)
            iso.layers.insert(0, "user-ns")
        _check(lib.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        owner = INSIDE_ID if mode == "userns" else uid
        group = INSIDE_ID if mode == "userns" else gid
        options = f"size={max(1, int(disk_mb * 1024))}k,nr_inodes={TMPFS_INODES},mode=0700"
        if owner is not None:
            options += f",uid={owner},gid={group}"
        _check(lib.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         options.encode()), "mount the worker's tmpfs")
        os.chdir(workdir)
        os.chroot(workdir)
        os.chdir("/")
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
        seccomp = _FILTERS.get(mode in ("root", "userns"))
        if seccomp is None:
            # A layer missing, said in every result and by `autograder doctor`; the rest of the cage holds.
            iso.missing["seccomp"] = "libseccomp.so.2 (through pyseccomp) could not be loaded"
        else:
            seccomp.load()
            iso.layers.append("seccomp")
    return iso


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
