"""The grader's side of starting a sandbox template: the process, its folder (named for its owner), its
environment (scrubbed), an early start before the command's own imports, and killing what it started.

:mod:`autograder.inside.template` is what runs in the template (and :mod:`autograder.inside.worker` in its
forks); this module never does.
"""
from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.core.atomic import atomic_write_text
from autograder.inside.protocol import TEMPLATE_ENV

#: What the template inherits from the grader's environment (a worker's memory still holds the
#: environment its process started with, whatever it clears): what Python, torch, CUDA and
#: matplotlib need, and no token or password the grader may have been given.
_ENV_KEEP = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
             "CONDA_PREFIX", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "PYTHONPATH",
             "PYTHONHASHSEED", "PYTHONHOME", "PYTHONNOUSERSITE", "CUDA_HOME", "CUDA_PATH",
             "AUTOGRADER_MEMCG")     # (the template looks for memory cgroups itself: memcg.find)
_ENV_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_")


def template_environment(environ: Any) -> dict[str, str]:
    """The template's environment: the kept part of ``environ``, one thread, Agg, this package first."""
    env = {k: v for k, v in environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)}
    env.update(TEMPLATE_ENV)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


#: The sandbox's folders in the temporary directory: its template's cwd and log, the workers' folders.
FOLDER_PREFIX = "autograder-sandbox-"


def write_owner(folder: str | os.PathLike[str]) -> None:
    """Name this process as the owner of a sandbox folder, atomically: a process killed half way leaves
    the earlier owner or none, never a truncated name (see processes.remove_stale_folders)."""
    atomic_write_text(os.path.join(folder, "owner"), process_identity(os.getpid()), encoding="ascii")


def process_identity(pid: int) -> str:
    """pid and start time: a pid that was reused by another process does not match."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return f"{pid} {fields[19]}"
    except (OSError, IndexError):
        return f"{pid} ?"


@dataclass
class TemplateLaunch:
    """A template process started, not yet ready: :class:`autograder.sandbox.Sandbox` adopts it (``launch=``).

    :func:`launch_template` needs neither torch nor the sandbox module, so ``autograder grade`` starts the
    template first thing and imports torch while the template imports it too.
    """

    proc: Any                  # subprocess.Popen
    sock: socket.socket        # the grader's end of the control channel
    folder: str
    log_path: str
    started: float             # time.perf_counter() at launch
    adopted: bool = False
    own_folder: bool = False   # launch_template made the folder (and removes it when not adopted)

    def adopt(self) -> bool:
        """Hand the template to a sandbox (once); False when it was closed or adopted already."""
        if self.adopted:
            return False
        self.adopted = True
        return True

    def close(self) -> None:
        """Stop a template no sandbox adopted (the batch stopped before its sandbox started)."""
        if self.adopted:
            return
        self.adopted = True
        self.sock.close()
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - already gone
            pass
        if self.own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def launch_template(folder: str | None = None) -> TemplateLaunch:
    """Start the template process (:func:`template_main`) in ``folder`` (default: a new sandbox folder)."""
    started = time.perf_counter()
    own = folder is None
    if folder is None:
        folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
        write_owner(folder)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log_path = os.path.join(folder, "template.log")
    try:
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-c",
                 f"from autograder.inside.template import template_main; template_main({theirs.fileno()})"],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=log_file, cwd=folder, env=template_environment(os.environ), start_new_session=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return TemplateLaunch(proc, ours, folder, log_path, started, own_folder=own)


def kill_process(pid: int, pidfd: int | None) -> None:
    """SIGKILL through the pidfd when there is one (no pid reuse can misdirect it), else by pid; a
    process already gone is no error."""
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class ClonedTemplate:
    """The process of a template cloned from another (``Sandbox.clone_template``), as a sandbox holds its
    template: not this process's child (the first template reaps it), so it is killed and waited for
    through its pidfd, with the part of ``subprocess.Popen``'s interface a sandbox uses."""

    def __init__(self, pid: int, pidfd: int | None):
        self.pid = pid
        self.pidfd = pidfd

    def kill(self) -> None:
        kill_process(self.pid, self.pidfd)

    def wait(self, timeout: float | None = None) -> int:
        if self.pidfd is not None:
            ready, _, _ = select.select([self.pidfd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"template {self.pid}", timeout or 0)
            os.close(self.pidfd)
            self.pidfd = None
        return 0


#: A template started by :func:`launch_early`, until the command takes it (:func:`take_early_launch`).
_EARLY: list[TemplateLaunch] = []


def launch_early() -> None:
    """Start the template before the command imports anything else (see ``autograder.cli.EARLY``): its
    torch import then overlaps all of the command's. Closed at exit if the command never takes it."""
    while _EARLY:                  # one an earlier command line in this process left (tests)
        _EARLY.pop().close()
    launch = launch_template()
    _EARLY.append(launch)
    atexit.register(launch.close)


def take_early_launch() -> TemplateLaunch | None:
    """The template :func:`launch_early` started, if any (once)."""
    return _EARLY.pop() if _EARLY else None
