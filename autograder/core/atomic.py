"""Writing a file atomically, the kit's one way: a temporary file in the same folder, then ``os.replace``.
A reader, or a process killed at any instant, sees the old complete file or the new one, never half.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = False, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically (its folder made if need be); ``durable``: on disk before the
    rename (fsync), for a file that must survive a power cut (Gradescope's results.json)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8", *,
                      durable: bool = False) -> None:
    atomic_write_bytes(path, text.encode(encoding), durable=durable)
