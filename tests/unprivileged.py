"""Run the kit as an ordinary user, from a test that runs as root (CI does).

An instructor on a laptop or a JupyterHub grades as an ordinary user; CI is root. The
tests drop privileges themselves: :func:`run_as_user` starts a command under an
unprivileged uid with no capability, its own HOME and its own copy of the course,
in a private mount namespace where the interpreter stays reachable (pyenv's Python
under root's 0700 home is shown there through a read-only bind mount; nothing of the
host changes).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: The ordinary user the tests become (nobody on Debian).
UID = GID = 65534


def available() -> str | None:
    """Why privileges cannot be dropped here, or None when they can."""
    if os.geteuid() != 0:
        return None          # already an ordinary user: run commands as they are
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    return None


def _hidden_ancestors(path: Path) -> list[Path]:
    """Folders on the way to ``path`` that the ordinary user may not enter."""
    out = []
    for parent in reversed(path.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            out.append(parent)
    return out


def run_as_user(argv: list[str], *, home: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``argv`` as uid 65534 (when this process is root), with HOME=``home``; text output captured."""
    env = {**(env or {}), "HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "LANG": "C.UTF-8"}
    if os.geteuid() != 0:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    script = ["set -e"]
    interpreter = Path(os.path.realpath(sys.executable))
    for n, hidden in enumerate(_hidden_ancestors(interpreter)):
        # Keep the one child on the interpreter's path, then hide the rest of the folder under a tmpfs.
        child = interpreter.relative_to(hidden).parts[0]
        keep = f"/tmp/.unprivileged-keep-{os.getpid()}-{n}"
        script += [f"mkdir -p {keep}", f"mount --bind {shlex.quote(str(hidden / child))} {keep}",
                   f"mount -t tmpfs -o mode=0755 none {shlex.quote(str(hidden))}",
                   f"mkdir {shlex.quote(str(hidden / child))}",
                   f"mount --bind -o ro {keep} {shlex.quote(str(hidden / child))}"]
    command = " ".join(shlex.quote(a) for a in argv)
    script.append(f"exec setpriv --reuid={UID} --regid={GID} --clear-groups --inh-caps=-all "
                  f"--bounding-set=-all --no-new-privs {command}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def give(path: Path) -> None:
    """Make ``path`` (a folder a test created) the ordinary user's, all of it."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, UID, GID)
        for name in dirs + files:
            os.chown(os.path.join(root, name), UID, GID, follow_symlinks=False)
