"""Deterministic zip files: the same bytes for the same files, on any machine, in any folder."""
from __future__ import annotations

import io
import zipfile
from collections.abc import Container, Mapping
from pathlib import PurePosixPath

#: Every entry's time: zip's epoch (a timestamp would make each build's bytes differ).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def deterministic_zip(files: Mapping[str, bytes], *, prefix: str = "", executables: Container[str] = ()) -> bytes:
    """``files`` (archive path -> bytes) as a zip: sorted entries, fixed times, unix permissions
    (0755 for a file whose name is in ``executables``, else 0644), each path under ``prefix``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(files):
            info = zipfile.ZipInfo(prefix + path, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            executable = PurePosixPath(path).name in executables
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.create_system = 3  # unix, whatever the host: the mode bits mean what they say
            zf.writestr(info, files[path], compresslevel=9)
    return buffer.getvalue()
