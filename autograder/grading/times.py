"""When a submission was handed in, as the LMS that received it recorded it.

Lateness decides points, so the time must come from a party the student does not control:

* nbgrader's exchange writes ``timestamp.txt`` next to the collected files (:func:`read_nbgrader_timestamp`);
* Gradescope writes ``/autograder/submission_metadata.json``, with the student's own due dates, extensions
  included (:func:`read_gradescope_metadata`);
* Canvas's bulk download carries no time, only a ``LATE`` marker in each file name (:func:`canvas_late_marker`);
* any LMS can export a CSV of times, which the instructor passes in
  (:func:`autograder.grading.times_csv.load_times_csv`).

File modification times and zip member times are never used: the student sets them.

Every byte read here may be hostile or malformed, so nothing here raises on bad content (only the times CSV
does, read by :mod:`autograder.grading.times_csv`, whose file the instructor supplies and must fix): a
readable source gives a :class:`SubmittedAt` with an aware time; an unreadable one gives ``when=None`` and a
one-line ``problem`` that names the file (and field); the time is then unknown, never guessed. Files are
opened without following a final symbolic link where the student could have placed them, must be regular
files, and are read only up to a small bound (:func:`read_bounded`). Every piece of file content quoted in a
problem passes through :func:`autograder.core.text.line` (no control characters, bounded length).
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder.course import clock
from autograder.core.text import line, path_text

__all__ = [
    "CANVAS_LATE",
    "GRADESCOPE_MAX_BYTES",
    "NBGRADER_MAX_BYTES",
    "NONE",
    "SubmittedAt",
    "best",
    "canvas_late_marker",
    "read_gradescope_metadata",
    "read_nbgrader_timestamp",
]

#: Bounds on what is read. A real timestamp.txt is about 30 bytes; a submission_metadata.json a few KiB.
NBGRADER_MAX_BYTES = 200
GRADESCOPE_MAX_BYTES = 1024 * 1024

NBGRADER_SOURCE = "nbgrader timestamp.txt"
GRADESCOPE_SOURCE = "Gradescope submission_metadata.json"
CANVAS_SOURCE = "Canvas file name (_late marker)"

#: How much of a bad value a problem quotes.
QUOTE_CHARS = 60


@dataclass(frozen=True)
class SubmittedAt:
    """One source's word on when a submission was handed in.

    ``when`` is aware (normalized to UTC) or None when the source gives no time. ``late_marker``: the
    source said "late" without a time (Canvas). ``due`` / ``last``: the due date and late due date the
    source holds for this very student (Gradescope's hold their extension), else None. ``problem``: one
    line, naming the file, when the source was there but could not be read; ``when`` is then None.
    """

    when: datetime | None
    source: str
    late_marker: bool = False
    due: datetime | None = None
    last: datetime | None = None
    problem: str | None = None

    def __post_init__(self) -> None:
        # A naive time compared with an aware one raises, and a naive one means "some zone": refuse it here,
        # where the value is made, rather than in the lateness rule that compares it.
        for name in ("when", "due", "last"):
            value = getattr(self, name)
            if value is not None and (value.tzinfo is None or value.utcoffset() is None):
                raise ValueError(f"SubmittedAt.{name} must be an aware datetime, got a naive one")


#: No source had anything to say.
NONE = SubmittedAt(None, "none")


# -- reading files, bounded -----------------------------------------------------------------------


def path_line(path: Path) -> str:
    """A path as one clean line for a message."""
    return path_text(os.fspath(path))


def quoted(value: str) -> str:
    """A bad value, quoted for a one-line message (cleaned and cut)."""
    return "'" + line(value, QUOTE_CHARS) + "'"


def read_bounded(path: Path, limit: int, *, follow_links: bool) -> tuple[bytes | None, str | None]:
    """The bytes of the regular file ``path``, at most ``limit`` of them read.

    Returns ``(data, None)``; ``(None, None)`` when there is no such file; ``(None, reason)`` when it is
    there but not readable as a file of at most ``limit`` bytes (a link where none is allowed, a FIFO, a
    directory, too large, no permission). The size is checked with fstat before any byte is read, so a
    huge file costs nothing; a FIFO is opened non-blocking so that it cannot hang the batch.
    """
    fd, reason = _open_unblocked(path, follow_links=follow_links)
    if fd is None:
        return None, reason
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "is not a regular file"
        if info.st_size > limit:
            return None, f"is {info.st_size} bytes, over the limit of {limit}"
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) != info.st_size:
            return None, "changed while it was read"
        return data, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or type(exc).__name__})"
    finally:
        os.close(fd)


def _open_unblocked(path: Path, *, follow_links: bool) -> tuple[int | None, str | None]:
    """Open ``path`` non-blocking for :func:`read_bounded`: ``(fd, None)``, or its ``(None, reason)`` answer."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags), None
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except OSError as exc:
        if not follow_links and exc.errno in (errno.ELOOP, errno.EMLINK):
            return None, "is a symbolic link, which is not followed here"
        return None, f"cannot be opened ({exc.strerror or type(exc).__name__})"
    except ValueError:      # a NUL byte in the path
        return None, "has a name that cannot be opened"


# -- parsing times ---------------------------------------------------------------------------------


def _parse_time(text: str) -> tuple[datetime | None, str | None]:
    """``text`` as :func:`autograder.course.clock.read_time` reads it (ISO 8601; an offset, ``Z``, UTC or GMT, or no
    zone at all), an aware time normalized to UTC: ``(value, None)``, or ``(None, reason)`` quoting the text."""
    try:
        value = clock.read_time(text)
    except clock.BadTime as exc:
        return None, str(exc)
    return (value if value.utcoffset() is None else clock.as_utc(value)), None


def _parse_aware(text: str) -> tuple[datetime | None, str | None]:
    """:func:`_parse_time`, with a time that names no zone or offset refused."""
    value, reason = _parse_time(text)
    if value is not None and value.tzinfo is None:
        return None, f"{quoted(text)} has no UTC offset (e.g. -08:00 or Z), so its moment is unknown"
    return value, reason


def _type_name(value: Any) -> str:
    """The JSON name of a decoded JSON value's type, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# -- nbgrader --------------------------------------------------------------------------------------


def _read_source(path: Path, limit: int, source: str) -> tuple[bytes | None, SubmittedAt]:
    """A student-side file's bytes (links refused, at most ``limit``), or None and what to answer instead:
    NONE for a missing file, a problem naming it for one that cannot be read."""
    data, reason = read_bounded(path, limit, follow_links=False)
    if reason is not None:
        return None, SubmittedAt(None, source, problem=f"{path_line(path)}: {reason}")
    return data, NONE


def read_nbgrader_timestamp(path: Path) -> SubmittedAt:
    """nbgrader's ``timestamp.txt``, written by its exchange on ``nbgrader submit`` / ``collect``.

    Its format is nbgrader's ``timestamp_format`` default, ``'%Y-%m-%d %H:%M:%S.%f %Z'`` (e.g.
    ``'2026-12-01 09:15:02.123456 UTC'``); a time that names no zone is UTC, as nbgrader's own
    ``parse_utc`` reads it. ISO 8601 with an offset (``'2026-12-01T09:15:02+08:00'``), a ``%z`` offset
    (``+0800``) and the zone names UTC / GMT / Z are accepted too. Any other zone name (``CST``: China,
    Cuba or US Central) is a problem, not a guess. At most :data:`NBGRADER_MAX_BYTES` bytes are read
    (a larger file is a problem); a missing file gives :data:`NONE`; an empty, binary or garbled one a
    problem naming the file.
    """
    where = path_line(path)
    data, early = _read_source(path, NBGRADER_MAX_BYTES, NBGRADER_SOURCE)
    if data is None:
        return early
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        return SubmittedAt(None, NBGRADER_SOURCE, problem=f"{where}: is not text (not UTF-8)")
    content = content.lstrip("\ufeff").strip()
    if not content:
        return SubmittedAt(None, NBGRADER_SOURCE, problem=f"{where}: is empty")
    if not content.isprintable():
        return SubmittedAt(None, NBGRADER_SOURCE,
                           problem=f"{where}: holds control characters or several lines, not one timestamp")
    value, reason = _parse_time(content)
    if value is None:
        return SubmittedAt(None, NBGRADER_SOURCE, problem=f"{where}: {reason}")
    return SubmittedAt(clock.as_utc(value), NBGRADER_SOURCE)     # (nbgrader's parse_utc: no zone is UTC)


# -- Gradescope ------------------------------------------------------------------------------------


class _Bad(Exception):
    """A field of submission_metadata.json that cannot be used; the message names the field."""


def _json_time(value: Any, field: str) -> datetime | None:
    """A JSON value that must be null or an ISO 8601 text with an offset; None for null."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"field {field}: expected text (an ISO 8601 time) or null, got {_type_name(value)}")
    parsed, reason = _parse_aware(value.strip())
    if parsed is None:
        raise _Bad(f"field {field}: {reason}")
    return parsed


def _json_object(value: Any, field: str) -> dict[str, Any] | None:
    """A JSON value that must be an object, or null / absent (None)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Bad(f"field {field}: expected an object, got {_type_name(value)}")
    return value


def _gradescope_dates(meta: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The due date and late due date that hold for the submitting student.

    Gradescope puts a student's own dates, extension applied, in ``users[i].assignment``; the
    assignment's dates are in ``assignment``. Each date is taken from ``users[0].assignment`` when that
    object has the key (an explicit null there means "none for this student"), else from ``assignment``.
    For a group submission users[0] is the one who submitted.
    """
    assignment = _json_object(meta.get("assignment"), "assignment") or {}
    own: dict[str, Any] = {}
    users = meta.get("users")
    if users is not None:
        if not isinstance(users, list):
            raise _Bad(f"field users: expected a list, got {_type_name(users)}")
        if users:
            first = _json_object(users[0], "users[0]")
            if first is not None:
                own = _json_object(first.get("assignment"), "users[0].assignment") or {}
    dates: list[datetime | None] = []
    for key in ("due_date", "late_due_date"):
        if key in own:
            dates.append(_json_time(own[key], f"users[0].assignment.{key}"))
        else:
            dates.append(_json_time(assignment.get(key), f"assignment.{key}"))
    return dates[0], dates[1]


def read_gradescope_metadata(path: Path) -> SubmittedAt:
    """Gradescope's ``/autograder/submission_metadata.json``.

    ``created_at`` (ISO 8601 with an offset, e.g. ``'2026-12-01T10:00:00.123456-08:00'``) is the time.
    The due dates come from ``users[0].assignment.due_date`` / ``late_due_date`` when present (they carry
    that student's extension), else from ``assignment.due_date`` / ``assignment.late_due_date``; a null or
    absent late due date is None. The file may be at most :data:`GRADESCOPE_MAX_BYTES`; invalid JSON, a
    top level that is not an object, a field of the wrong type, or a time without an offset is a problem
    naming the file and the field, and then no date is kept (a student's extension must not be dropped
    silently in favour of the assignment's date). A missing file gives :data:`NONE`.
    """
    where = path_line(path)
    data, early = _read_source(path, GRADESCOPE_MAX_BYTES, GRADESCOPE_SOURCE)
    if data is None:
        return early
    try:
        meta = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return SubmittedAt(None, GRADESCOPE_SOURCE, problem=f"{where}: is not UTF-8 text")
    except ValueError as exc:       # json.JSONDecodeError, or an integer too long to convert
        return SubmittedAt(None, GRADESCOPE_SOURCE,
                           problem=f"{where}: is not valid JSON ({line(str(exc), QUOTE_CHARS)})")
    except RecursionError:
        return SubmittedAt(None, GRADESCOPE_SOURCE, problem=f"{where}: is not valid JSON (nested too deeply)")
    if not isinstance(meta, dict):
        return SubmittedAt(None, GRADESCOPE_SOURCE,
                           problem=f"{where}: expected a JSON object at the top level, got {_type_name(meta)}")
    try:
        if "created_at" not in meta:
            raise _Bad("field created_at: missing")
        created = _json_time(meta["created_at"], "created_at")
        if created is None:
            raise _Bad("field created_at: null, expected an ISO 8601 time with an offset")
        due, last = _gradescope_dates(meta)
    except _Bad as exc:
        return SubmittedAt(None, GRADESCOPE_SOURCE, problem=f"{where}: {exc}")
    return SubmittedAt(created, GRADESCOPE_SOURCE, due=due, last=last)


# -- Canvas ----------------------------------------------------------------------------------------

#: A file of Canvas's "Download Submissions" zip that was late. Canvas names each file
#: ``<name>[_LATE]_<user id>_<attachment id>_<original name>`` (lib/content_zipper.rb): ``<name>`` is the
#: student's sortable name, lower-cased, every non-word character removed (no space, no slash), every
#: ``_<digits>_`` in it removed; the marker, ``LATE`` (older Canvas: ``late``), sits right after it. With
#: anonymous grading there is no name: ``LATE_anon_<id>_<attachment id>_<original name>``.
#: The name part may hold underscores but, as in Canvas, no ``_<digits>`` piece followed by ``_``; so it
#: can never reach past the user id into the student's own file name, and a ``_late_`` there is never
#: read as the marker. (A name that itself ends in ``_late`` cannot be told from the marker by any rule.)
CANVAS_LATE = re.compile(
    r"\A(?:[^_\s/\\]+(?:_(?![0-9]+_)[^_\s/\\]+)*_(?:late|LATE)_[0-9]+|(?:late|LATE)_anon_[A-Za-z0-9]+)"
    r"_[0-9]+_.+\Z",
    re.DOTALL,
)


def canvas_late_marker(file_name: str) -> SubmittedAt:
    """Canvas's late marker in a downloaded submission's file name.

    ``SubmittedAt(None, 'Canvas file name (_late marker)', late_marker=True)`` when the name (its last
    path component) has the marker where Canvas writes it (see :data:`CANVAS_LATE`), else :data:`NONE`.
    Canvas's download holds no time, so this says "late" only; how late is unknown.
    """
    if type(file_name) is not str:
        return NONE
    name = re.split(r"[/\\]", file_name)[-1]
    if CANVAS_LATE.match(name):
        return SubmittedAt(None, CANVAS_SOURCE, late_marker=True)
    return NONE


# -- choosing ---------------------------------------------------------------------------------------


def best(*candidates: SubmittedAt) -> SubmittedAt:
    """The answer to trust among several sources, given in the caller's order of trust.

    The first candidate with a time; else the first with a late marker; else the first with a problem
    (so that the problem is reported rather than lost); else :data:`NONE`.
    """
    for candidate in candidates:
        if candidate.when is not None:
            return candidate
    for candidate in candidates:
        if candidate.late_marker:
            return candidate
    for candidate in candidates:
        if candidate.problem is not None:
            return candidate
    return NONE
