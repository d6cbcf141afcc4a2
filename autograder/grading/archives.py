"""Opening what was handed in: a folder as it is, a ``.zip`` extracted safely.

``autograder grade`` takes a folder or the zip an LMS exports. :func:`opened`
yields the folder to search either way; a zip is extracted by
:func:`extract_zip` into a private temporary folder (mode 0700: the sandbox
worker must not browse other submissions), removed afterwards. Anything else (a
missing path, a file that is not a zip) stops with an :class:`~autograder.core.errors.AutograderError`.

Nothing in a zip is trusted, its headers least of all: member by member, it
refuses absolute paths, ``..``, paths that resolve outside the folder, links
and special files, names with a NUL byte, and caps the member count, each
member's size and the bytes actually written (a zip bomb stops at the cap,
whatever its headers claim). A refused member is named with the reason (a
notebook among them still gets a failure row, see
:func:`autograder.grading.submissions.discover`); only a zip that cannot be
read at all, or one past the count or total cap, stops with
:class:`UnsafeArchive`. Members keep their modification time (the duplicate
rule compares them). What is extracted is not read here: finding and
identifying the notebooks is :mod:`autograder.grading.submissions`' job.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autograder.core.errors import AutograderError

#: Zip limits: bytes actually written, members, one member.
ZIP_MAX_BYTES = 2 * 2**30
ZIP_MAX_MEMBERS = 50_000
ZIP_MAX_MEMBER_BYTES = 256 * 2**20


class UnsafeArchive(AutograderError):
    """The zip cannot be extracted safely (too big, too many members, not a zip)."""


@dataclass
class Extraction:
    root: Path
    refused: dict[str, str]        # member name -> why it was not extracted


def extract_zip(archive: Path, dest: Path, *, max_bytes: int = ZIP_MAX_BYTES,
                max_members: int = ZIP_MAX_MEMBERS, max_member_bytes: int = ZIP_MAX_MEMBER_BYTES) -> Extraction:
    """Extract ``archive`` under ``dest`` member by member, refusing anything unsafe.

    Refused members (absolute paths, ``..``, links, devices, oversized) are
    listed with the reason; a notebook among them still gets a failure row.
    """
    refused: dict[str, str] = {}
    written = 0
    with _open_zip(archive) as zf:
        members = zf.infolist()
        if len(members) > max_members:
            raise UnsafeArchive(f"{archive}: {len(members)} members, more than the {max_members} allowed")
        root = dest.resolve()
        for info in members:
            target = _place(root, info)
            if isinstance(target, str):
                refused[info.filename] = target
                continue
            if target is None:
                continue
            budget = min(max_member_bytes, max_bytes - written)
            try:
                n = _copy_member(zf, info, target, budget)
            except _TooBig:
                if written >= max_bytes or budget < max_member_bytes:
                    raise UnsafeArchive(f"{archive}: more than {max_bytes / 2**20:.0f} MiB once extracted",
                                        hint="unpack it yourself and grade the folder") from None
                refused[info.filename] = f"larger than {max_member_bytes / 2**20:.0f} MiB once extracted"
                continue
            if isinstance(n, str):
                refused[info.filename] = n
                continue
            written += n
            _keep_time(target, info)
    return Extraction(root, refused)


def _open_zip(archive: Path) -> zipfile.ZipFile:
    """Open ``archive`` as a zip, or stop with UnsafeArchive when it cannot be read as one."""
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeArchive(f"{archive}: not a readable zip ({exc})") from None


def _place(root: Path, info: zipfile.ZipInfo) -> Path | str | None:
    """Where a member goes, its parent folder made; why it is refused (a str); None for a folder member, made here."""
    reason = _unsafe_member(info)
    if reason is not None:
        return reason
    try:
        target = (root / info.filename).resolve()
        if not target.is_relative_to(root):
            return "path leaves the extraction folder"
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        # A file and a folder of the same name, a name part over 255 bytes, ...
        return f"cannot be extracted ({os_reason(exc)})"
    return target


def _copy_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int | str:
    """Write one member: its bytes, or why it cannot be extracted; past ``budget``, _TooBig (a partial file removed)."""
    try:
        return _copy_capped(zf, info, target, budget)
    except _TooBig:
        target.unlink(missing_ok=True)
        raise
    except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, ValueError, zlib.error) as exc:
        # A corrupt or encrypted member: the notebook gets a row, the rest continues.
        with contextlib.suppress(OSError):
            target.unlink(missing_ok=True)
        return f"cannot be extracted ({os_reason(exc)})"


def _keep_time(target: Path, info: zipfile.ZipInfo) -> None:
    """Give the file its member's modification time (the duplicate rule compares them), not the
    time of extraction; a time the platform cannot represent leaves the file as it is."""
    with contextlib.suppress(OverflowError, ValueError, OSError):
        stamp = time.mktime((*info.date_time, 0, 0, -1))
        os.utime(target, (stamp, stamp), follow_symlinks=False)


class _TooBig(Exception):
    pass


def os_reason(exc: BaseException) -> str:
    """Why, without the path (the member's name is reported beside it already)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def _unsafe_member(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if "\x00" in name:
        return "name contains a NUL byte"
    posix = name.replace("\\", "/")
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        return "absolute path"
    if any(part == ".." for part in PurePosixPath(posix).parts):
        return "path with '..'"
    # Unix file type in the high bits of external_attr; 0 (no type) is what most zip writers store.
    kind = stat.S_IFMT((info.external_attr >> 16) & 0xFFFF)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "a link or special file"
    return None


def _copy_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Stream one member to ``target``; raise _TooBig past ``budget`` bytes (never trust the header)."""
    n = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, zf.open(info) as src:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > budget:
                raise _TooBig()
            out.write(chunk)
    return n


@contextlib.contextmanager
def opened(path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """Yield (folder to search, refused zip members) for a folder or a zip; clean up after."""
    path = Path(path)
    if path.is_dir():
        yield path, {}
        return
    if not path.exists():
        raise AutograderError(f"{path}: no such file or folder")
    if not zipfile.is_zipfile(path):
        raise AutograderError(f"{path}: neither a folder nor a zip archive",
                              hint="pass a folder of notebooks or the .zip your LMS exported")
    tmp = Path(tempfile.mkdtemp(prefix="autograder-zip-"))
    os.chmod(tmp, 0o700)  # private: the sandbox worker must not browse other submissions
    try:
        extraction = extract_zip(path, tmp)
        yield tmp, extraction.refused
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
