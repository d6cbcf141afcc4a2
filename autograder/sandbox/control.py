"""The grader's hold on a sandbox's template process: waiting for it to say ready, its control channel, a copy
of it for another grader process, a restart when it died, its end.

:class:`~autograder.sandbox.host.Sandbox` holds one :class:`TemplateControl`; the template itself is
:mod:`autograder.inside.template`, started by :mod:`autograder.sandbox.launch`. The template never runs student
code (its forked workers do), and what it answers on the control channel is read as JSON and no more: a pid, a
worker's descriptors, an error to raise. Every byte a worker sends is judged elsewhere
(:mod:`autograder.sandbox.replies`).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autograder.sandbox.launch import FOLDER_PREFIX, ClonedTemplate, TemplateLaunch, launch_template, write_owner
from autograder.sandbox.processes import SandboxError

log = logging.getLogger(__name__)


class TemplateControl:
    """A sandbox's template process and the grader's end of its control channel (one request at a time).

    ``folder``: the sandbox's own, where a template it starts runs and logs; ``start_timeout``: how long the
    template may take to say ready. :attr:`pid` and :attr:`seconds`: the running template's pid and how long
    it took to be ready.
    """

    def __init__(self, folder: Path, start_timeout: float):
        self.folder = folder
        self.start_timeout = start_timeout
        self._ctrl_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._ctrl: socket.socket | None = None
        self._template: subprocess.Popen[bytes] | None = None
        self._restarts = 0
        self.pid = 0
        self.seconds = 0.0

    @property
    def started(self) -> bool:
        """Whether a template process was started (it said ready)."""
        return self._template is not None

    def start(self, launch: TemplateLaunch | None = None) -> None:
        """Start a template in :attr:`folder` (or adopt ``launch``, one started earlier) and wait until it is ready."""
        start = launch.started if launch is not None else time.perf_counter()
        if launch is None:
            launch = launch_template(str(self.folder))
        proc, ours, log_path = launch.proc, launch.sock, Path(launch.log_path)
        ours.settimeout(self.start_timeout)
        try:
            msg = ours.recv(1 << 16)
        except (TimeoutError, OSError):
            msg = b""
        if not msg:
            proc.kill()
            proc.wait()
            ours.close()
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:].strip()
            raise SandboxError(f"the sandbox template process did not start: {tail or 'no output'}")
        info = json.loads(msg)
        if info.get("cuda_driver_loaded"):
            log.warning("sandbox: the template loaded the CUDA driver before forking; workers may fail on CUDA")
        self._ctrl, self._template = ours, proc
        self.pid = int(info["pid"])
        self.seconds = time.perf_counter() - start
        log.debug("sandbox template %d ready in %.2f s (imports %.2f s)", self.pid,
                  self.seconds, info.get("seconds", 0.0))

    def call(self, header: dict[str, Any], fds: Iterable[int] = ()) -> tuple[dict[str, Any], list[int]]:
        """Send one request (and ``fds``) to the template; its answer and the descriptors that came with it.
        Raises ConnectionError when the template is gone (see :meth:`restart`)."""
        with self._ctrl_lock:
            sock = self._ctrl
            if sock is None:
                raise ConnectionError("the template is gone")
            try:
                sock.settimeout(60)
                socket.send_fds(sock, [json.dumps(header).encode()], list(fds))
                msg, got, _flags, _addr = socket.recv_fds(sock, 1 << 16, 2)
            except OSError as exc:
                self._ctrl = None
                raise ConnectionError(f"the template stopped answering ({exc})") from None
            if not msg:
                self._ctrl = None
                raise ConnectionError("the template exited")
            return json.loads(msg), got

    def clone(self) -> TemplateLaunch:
        """A copy of the template, forked by it, in a new sandbox folder: see ``Sandbox.clone_template``."""
        folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
        # Ours until the process that adopts the copy writes its own name here (a folder whose owner is
        # gone is removed at the next start, see remove_stale_folders).
        write_owner(folder)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            reply, _ = self.call({"t": "clone"}, [theirs.fileno()])
            if "pid" not in reply:
                raise SandboxError(f"the sandbox template could not be copied: {reply.get('error')}")
        except BaseException:
            ours.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
        pid = int(reply["pid"])
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            pidfd = None
        return TemplateLaunch(ClonedTemplate(pid, pidfd), ours, folder, os.path.join(folder, "template.log"),
                              time.perf_counter(), own_folder=True)

    def restart(self, closed: bool) -> None:
        """Start a new template where the channel to the last one broke (twice at most); nothing where another
        thread restarted it already or the sandbox is ``closed``."""
        with self._restart_lock:
            if self._ctrl is not None or closed:
                return
            if self._restarts >= 2:
                raise SandboxError("the sandbox template died three times; giving up on this batch")
            self._restarts += 1
            log.warning("sandbox: the template process died; starting a new one")
            if self._template is not None:
                self._template.kill()
                self._template.wait()
            self.start()

    def leave(self) -> None:
        """Close this process's copy of the channel (a lane forked from the sandbox's process)."""
        if self._ctrl is not None:
            self._ctrl.close()

    def close(self) -> None:
        """Close the channel (the template sees EOF, kills its workers and exits) and wait for the template."""
        with self._ctrl_lock:
            if self._ctrl is not None:
                self._ctrl.close()  # the template sees EOF, kills its workers and exits
                self._ctrl = None
        if self._template is not None:
            try:
                self._template.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._template.kill()
                self._template.wait()
