"""A memory cgroup per worker, where the machine lets the grader make one: every byte counted.

RLIMIT_AS counts a worker's mappings; what it does not count (the pages of the worker's tmpfs,
kernel memory: page tables, pipe and socket buffers) the seccomp allow-list bounds, and a memory
cgroup counts: the template makes one group per worker before it forks it, with a limit of the
template's own resident memory (pages the worker may copy on write) plus ``limits.memory_mb``
plus :data:`MARGIN_MB`, and no swap; the worker joins it before it enters its cage. A worker past
it is killed by the kernel, and the template names the kill (``memory_killed`` in its status).

Found (:func:`find`) in this order: cgroup v2, the nearest group at or above the grader's own whose
``cgroup.subtree_control`` enables ``memory`` and which this user may write (root; or a subtree
systemd delegated, e.g. ``systemd-run --user --scope -p Delegate=yes``); cgroup v1's ``memory``
hierarchy, the grader's own group there. Elsewhere no group is made, and ``autograder doctor``
and every result's isolation say why. ``AUTOGRADER_MEMCG=off`` turns them off.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

MiB = 1 << 20
#: Room for the worker's kernel memory (page tables, its channel's buffers, its pipes).
MARGIN_MB = 64
LAYER = "memory-cgroup"


@dataclass(frozen=True)
class MemoryCgroups:
    """Where worker groups are made, and how to read and set them (v1 and v2 name their files apart)."""

    version: int
    base: str

    def describe(self) -> str:
        return f"cgroup v{self.version} at {self.base}"

    def make(self, name: str, limit_bytes: int) -> str:
        """A new group with ``limit_bytes`` of memory and no swap; its path."""
        path = os.path.join(self.base, name)
        os.mkdir(path)
        try:
            if self.version == 2:
                _write(path, "memory.max", limit_bytes)
                _write(path, "memory.swap.max", 0, optional=True)
                _write(path, "memory.oom.group", 1, optional=True)
            else:
                _write(path, "memory.limit_in_bytes", limit_bytes)
                _write(path, "memory.memsw.limit_in_bytes", limit_bytes, optional=True)
        except OSError:
            self.remove(path)
            raise
        return path

    def set_limit(self, path: str, limit_bytes: int) -> None:
        """Change the group's limit (v1 keeps memory + swap at or above memory alone: the order matters)."""
        if self.version == 2:
            _write(path, "memory.max", limit_bytes)
            return
        try:
            _write(path, "memory.limit_in_bytes", limit_bytes)
            _write(path, "memory.memsw.limit_in_bytes", limit_bytes, optional=True)
        except OSError:     # raising it: memory + swap first, then memory alone
            _write(path, "memory.memsw.limit_in_bytes", limit_bytes, optional=True)
            _write(path, "memory.limit_in_bytes", limit_bytes)

    @staticmethod
    def join(path: str) -> None:
        """Move the calling process into the group (the template, ahead of its next fork; else the worker,
        before its cage). Slow: the kernel waits for an RCU grace period (milliseconds, more on a busy
        machine), which is why the template does it between forks."""
        _write(path, "cgroup.procs", 0)

    def home(self) -> str | None:
        """The folder of the calling process's own group in this hierarchy (where the template goes back)."""
        if self.version == 1:
            return self.base            # v1: the workers' groups are made in the grader's own group
        groups = _own_groups()
        for mount_root, point, kind, _options in _mounts():
            if kind == "cgroup2" and "" in groups:
                return _inside(mount_root, point, groups[""])
        return None

    def oom_killed(self, path: str) -> bool:
        """Whether the kernel killed a process of the group for its memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(path, name), encoding="ascii") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        except (OSError, ValueError):
            pass
        return False     # (cgroup v1 before Linux 4.13 counts no oom_kill: the kill is then unnamed)

    @staticmethod
    def remove(path: str) -> bool:
        """Remove an empty group; False while a process is still in it."""
        try:
            os.rmdir(path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                return False
            raise
        return True


def _controllers(folder: str) -> list[str]:
    try:
        with open(os.path.join(folder, "cgroup.subtree_control"), encoding="ascii") as f:
            return f.read().split()
    except OSError:
        return []


def _write(path: str, name: str, value: int, optional: bool = False) -> None:
    try:
        fd = os.open(os.path.join(path, name), os.O_WRONLY)
    except FileNotFoundError:
        if optional:
            return
        raise
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root within the hierarchy, mount point, file-system type, super options) of each cgroup mount."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    out.append((fields[3], fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return out


def _own_groups() -> dict[str, str]:
    """Controller list ('' for v2) -> this process's group path, from /proc/self/cgroup."""
    out = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    out[parts[1]] = parts[2]
    except OSError:
        pass
    return out


def _inside(mount_root: str, mount_point: str, group: str) -> str | None:
    """The folder of ``group`` under a mount of the hierarchy whose root is ``mount_root``."""
    root = mount_root.rstrip("/")
    if group != root and not group.startswith(root + "/"):
        return None
    return os.path.join(mount_point, group[len(root):].lstrip("/"))


def _usable(cg: MemoryCgroups) -> str | None:
    """Why groups cannot be made there (a probe group made and removed), or None."""
    try:
        path = cg.make(f"autograder-probe-{os.getpid()}", 256 * MiB)
    except OSError as exc:
        return f"{cg.describe()}: {exc.strerror or exc}"
    cg.remove(path)
    return None


def find() -> tuple[MemoryCgroups | None, str]:
    """Where this process can make workers' memory groups, or None; and, in words, where or why not."""
    if os.environ.get("AUTOGRADER_MEMCG", "").lower() in ("off", "0", "no"):
        return None, "turned off (AUTOGRADER_MEMCG=off)"
    groups, problems = _own_groups(), []
    for mount_root, point, kind, options in _mounts():
        if kind == "cgroup2" and "" in groups:
            found = _v2_folder(mount_root, point, groups[""])
            if found is None:
                problems.append("cgroup v2: no group at or above this one enables memory for its children "
                                "and is writable by this user")
                continue
            cg = MemoryCgroups(2, found)
        elif kind == "cgroup" and "memory" in options.split(","):
            folder = _v1_folder(mount_root, point, groups)
            if folder is None:
                continue
            cg = MemoryCgroups(1, folder)
        else:
            continue
        problem = _usable(cg)
        if problem is None:
            return cg, cg.describe()
        problems.append(problem)
    return None, "; ".join(problems) or "no cgroup memory controller is mounted"


def _v2_folder(mount_root: str, point: str, group: str) -> str | None:
    """The nearest folder at or above ``group`` (up to the mount) that enables memory and is writable, or None."""
    folder, top = _inside(mount_root, point, group), point.rstrip("/") or "/"
    while folder is not None:
        if "memory" in _controllers(folder) and os.access(folder, os.W_OK):
            return folder
        if folder.rstrip("/") == top:
            break
        folder = os.path.dirname(folder)
    return None


def _v1_folder(mount_root: str, point: str, groups: dict[str, str]) -> str | None:
    """The folder of this process's v1 memory group under the mount, where it exists; else None."""
    group = next((path for controllers, path in groups.items() if "memory" in controllers.split(",")), None)
    folder = _inside(mount_root, point, group) if group is not None else None
    if folder is None or not os.path.isdir(folder):
        return None
    return folder
