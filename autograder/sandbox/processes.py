"""The sandbox's processes and folders: worker uids (one slot per live worker, none that /etc/passwd
names), the scratch folders of batches that died, and one forked worker process as the grader holds it.
"""
from __future__ import annotations

import fcntl
import grp
import json
import os
import pwd
import select
import shutil
import socket
import stat
import tempfile
import time
import threading
from dataclasses import dataclass
from pathlib import Path

from autograder.core.errors import AutograderError
from autograder.sandbox.launch import FOLDER_PREFIX, process_identity, kill_process


#: Worker uids are taken from here on, skipping any that /etc/passwd or /etc/group names.
UID_BASE = 61000


UID_SLOTS = 1024


#: How long a worker may take to set itself up after the fork (CUDA init is the slow part).
SETUP_SECONDS = {"cpu": 30.0, "cuda": 180.0}


class SandboxError(AutograderError):
    """The sandbox itself cannot run (its template does not start, or keeps dying). ``missing``: where no
    cage can be set up, each mode tried -> why it could not be (autograder doctor shows it)."""

    def __init__(self, message: str, hint: str | None = None, missing: dict[str, str] | None = None):
        super().__init__(message, hint)
        self.missing = dict(missing or {})


class SpawnFailed(Exception):
    """One worker could not be started (the template could not fork, or its setup failed)."""


# -- the sandbox's folders -------------------------------------------------------------------


#: A sandbox folder that names no owner this long after it last changed was abandoned half made.
UNOWNED_SECONDS = 3600


def remove_stale_folders() -> None:
    """Remove the folders of sandboxes whose grader was killed (SIGKILL leaves no chance to clean up), and
    those that name no owner an hour after they last changed (a process killed between making one and
    naming itself in it: the name is written atomically, see worker.write_owner)."""
    for folder in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        try:
            info = os.lstat(folder)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
        except OSError:
            continue
        try:
            owner = (folder / "owner").read_text(encoding="ascii").strip()
            pid = int(owner.split()[0])
        except (OSError, ValueError, IndexError):
            if time.time() - info.st_mtime > UNOWNED_SECONDS:
                shutil.rmtree(folder, ignore_errors=True)
            continue
        if process_identity(pid) != owner:
            shutil.rmtree(folder, ignore_errors=True)


# -- worker uids -------------------------------------------------------------------------
@dataclass
class _Slot:
    uid: int
    gid: int
    fd: int


class _UidSlots:
    """One unprivileged uid per live worker, process-wide; flock keeps other graders off it too."""

    def __init__(self, base: int = UID_BASE, count: int = UID_SLOTS):
        self.base = base
        self.count = count
        self._lock = threading.Lock()
        self._dir: Path | None = None

    def _lock_dir(self) -> Path:
        if self._dir is None:
            path = Path(tempfile.gettempdir()) / "autograder-uid-locks"
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                pass
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
                raise SandboxError(f"{path}: expected a directory owned by uid {os.geteuid()}, "
                                   "writable by it alone", hint="remove it and grade again")
            self._dir = path
        return self._dir

    def acquire(self) -> _Slot:
        with self._lock:
            folder = self._lock_dir()
            for n in range(self.count):
                uid = self.base + n
                if _named(uid):
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return _Slot(uid, uid, fd)
        raise SandboxError(f"no free worker uid in {self.base}..{self.base + self.count - 1}")

    @staticmethod
    def release(slot: _Slot) -> None:
        os.close(slot.fd)  # closing the only descriptor drops the flock


def _named(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return True
    except KeyError:
        return False


SLOTS = _UidSlots()


def cage_modes() -> tuple[str, ...]:
    """The cages to try here, best first: namespaces as root or in a user namespace, then Landlock.

    ``AUTOGRADER_CAGE`` (a comma-separated list of modes) narrows the list: tests force the
    fallback with it, and an instructor can pin a mode.
    """
    wanted = [m.strip() for m in os.environ.get("AUTOGRADER_CAGE", "").split(",") if m.strip()]
    if wanted:
        return tuple(m for m in ("root", "userns", "landlock") if m in wanted)
    return ("root", "landlock") if os.geteuid() == 0 else ("userns", "landlock")


# -- one forked worker process ---------------------------------------------------------------
class WorkerProcess:
    def __init__(self, pid: int, pidfd: int | None, chan: socket.socket, status_fd: int,
                 slot: _Slot | None, workdir: Path):
        self.pid = pid
        self.pidfd = pidfd
        self.chan = chan
        self.status_fd = status_fd
        self.slot = slot
        self.workdir = workdir
        self.status: int | None = None
        self.memory_killed = False    # killed by the kernel for its memory cgroup (the template says so)
        self.reaped = False
        self.finished = False
        self.sweep = False
        self.partial = False      # forked before the template had imported everything (see TEMPLATE_LATER)
        self.spare: int | None = None   # forked ahead by this template pid (see Sandbox.keep_spare)

    def exited(self) -> bool:
        """Whether the process is known to have ended (its pidfd readable, or reaped); False where unknown."""
        if self.reaped:
            return True
        if self.pidfd is None:
            return False
        poller = select.poll()      # (select.select refuses descriptors past FD_SETSIZE)
        poller.register(self.pidfd, select.POLLIN)
        try:
            return bool(poller.poll(0))
        except OSError:
            return False

    def kill(self) -> None:
        if not self.reaped:
            kill_process(self.pid, self.pidfd)

    def wait_status(self, timeout: float) -> int | None:
        """The raw wait status, as the template reports it once it reaped the worker."""
        if self.reaped:
            return self.status
        ready, _, _ = select.select([self.status_fd], [], [], timeout)
        if not ready:
            return None
        try:
            data = json.loads(os.read(self.status_fd, 4096) or b"null")
            self.status = int(data["status"])
            self.memory_killed = data.get("memory") is True
        except (ValueError, TypeError, KeyError, OSError):
            self.status = None
        self.reaped = True
        return self.status
