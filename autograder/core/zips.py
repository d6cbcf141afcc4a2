"""Deterministic zip files: the same bytes for the same files, on any machine, in any folder."""
from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import zipfile
from collections.abc import Container, Mapping
from pathlib import Path, PurePosixPath

#: Every entry's time by default: zip's epoch (a timestamp would make each build's bytes differ).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)

ZipTime = tuple[int, int, int, int, int, int]


def source_time(folder: Path) -> ZipTime | None:
    """A time for the entries of a zip built from ``folder`` that is the same wherever the same sources are
    built: ``$SOURCE_DATE_EPOCH`` (the reproducible-builds convention), else the time of the git commit the
    folder is checked out at; None when there is neither (the caller's fixed time then)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        try:
            done = subprocess.run(["git", "-C", str(folder), "log", "-1", "--format=%ct"], capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        epoch = done.stdout.strip() if done.returncode == 0 else ""
    if not (epoch.isascii() and epoch.isdigit()) or len(epoch) > 18:
        return None
    when = dt.datetime.fromtimestamp(max(int(epoch), 315532800), dt.timezone.utc)   # not before 1980
    return (when.year, when.month, when.day, when.hour, when.minute, when.second - when.second % 2)


def deterministic_zip(files: Mapping[str, bytes], *, prefix: str = "", executables: Container[str] = (),
                      date_time: ZipTime = ZIP_TIME) -> bytes:
    """``files`` (archive path -> bytes) as a zip: sorted entries, every one at ``date_time``, unix permissions
    (0755 for a file whose name is in ``executables``, else 0644), each path under ``prefix``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(files):
            info = zipfile.ZipInfo(prefix + path, date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            executable = PurePosixPath(path).name in executables
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.create_system = 3  # unix, whatever the host: the mode bits mean what they say
            zf.writestr(info, files[path], compresslevel=9)
    return buffer.getvalue()
