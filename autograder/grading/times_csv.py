"""Submission times from a CSV that any LMS can export and the instructor passes in (``--times``):
:func:`load_times_csv`, one :class:`~autograder.grading.times.SubmittedAt` per (student, assignment).

Unlike the LMS's own files (:mod:`autograder.grading.times`, which never raise on what a student could have
placed), this file is the instructor's, who must fix it: every problem is raised as a
:class:`~autograder.core.errors.ConfigError` of one line naming the file (and the row, line and field).
It is still read as untrusted bytes, bounded (:data:`CSV_MAX_BYTES`, by
:func:`~autograder.grading.times.read_bounded`), and every piece of it quoted in a message passes through
:func:`autograder.core.text.line`.
"""
from __future__ import annotations

import csv
import io
import os
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from autograder.course import clock
from autograder.core.errors import ConfigError
from autograder.core.text import line, path_text
from autograder.grading.times import QUOTE_CHARS, SubmittedAt, path_line, quoted, read_bounded

__all__ = ["CSV_MAX_BYTES", "load_times_csv"]

#: The bound on what is read of the times CSV.
CSV_MAX_BYTES = 10 * 1024 * 1024
#: A student or assignment name longer than this in the times CSV is not a name.
_NAME_MAX = 200

_STUDENT = "student"
_ASSIGNMENT = "assignment"
#: Accepted names of the time column, lower-cased.
_TIME_COLUMNS = ("submitted_at", "submitted", "timestamp")


class _Columns(NamedTuple):
    """Where a times CSV holds what: column indexes (0-based), the time column's name, the header's width."""

    student: int
    time_name: str
    time: int
    assignment: int | None
    width: int


def _header(where: str, row: list[str]) -> _Columns:
    """The columns the header row names; a ConfigError when a required one is missing or one is ambiguous."""
    names = [cell.strip().lstrip("\ufeff").strip().lower() for cell in row]
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise ConfigError(f"{where}: the header names the column {quoted(name)} twice")
        seen.add(name)
    times = [name for name in _TIME_COLUMNS if name in seen]
    missing = [label for label, ok in ((_STUDENT, _STUDENT in seen), ("submitted_at", bool(times))) if not ok]
    if missing:
        found = ", ".join(quoted(n) for n in names[:10]) or "nothing"
        hint = "a comma-separated file whose first row names the columns: student,submitted_at[,assignment]"
        raise ConfigError(f"{where}: the header lacks the column(s) {', '.join(missing)} (found {found})",
                          hint=hint)
    if len(times) > 1:
        raise ConfigError(f"{where}: the header has several time columns ({', '.join(times)}); keep one",
                          hint="which one holds the submission time cannot be told apart")
    assignment = names.index(_ASSIGNMENT) if _ASSIGNMENT in seen else None
    return _Columns(names.index(_STUDENT), times[0], names.index(times[0]), assignment, len(names))


def _name_cell(value: str, where: str, field: str) -> str:
    """A student or assignment cell, stripped; a ConfigError (``where`` names file, row, field) if unusable."""
    value = value.strip()
    if len(value) > _NAME_MAX:
        raise ConfigError(f"{where}, field {field}: longer than {_NAME_MAX} characters")
    if line(value, _NAME_MAX) != value:     # the kit's own test for text a terminal or spreadsheet would obey
        raise ConfigError(f"{where}, field {field}: {quoted(value)} holds control characters or line breaks")
    return value


def _csv_text(path: Path, where: str) -> str:
    """The times CSV's text: at most :data:`CSV_MAX_BYTES` of UTF-8 (a byte order mark tolerated)."""
    data, reason = read_bounded(path, CSV_MAX_BYTES, follow_links=True)
    if reason is not None:
        raise ConfigError(f"{where}: {reason}")
    if data is None:
        raise ConfigError(f"{where}: file not found")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: is not UTF-8 text (byte {exc.start})",
                          hint="export the CSV as UTF-8") from None


def load_times_csv(path: Path, *, default_tz: str | None = None) -> dict[tuple[str, str | None], SubmittedAt]:
    """Submission times from a CSV an LMS can export.

    The header must name a ``student`` column and a time column, ``submitted_at`` (or ``submitted`` or
    ``timestamp``; names are case-insensitive, a UTF-8 byte order mark is tolerated), and may name an
    ``assignment`` column. Each row gives the key ``(student, assignment or None)`` (an empty assignment
    cell is None too) and a :class:`SubmittedAt` whose source is ``"times CSV <file> row <n>"``, ``n``
    counting data rows from 1 (blank lines are skipped and not counted; messages also give the line).
    Times are ISO 8601; a time with no offset is read in ``default_tz`` (an IANA name) or is an error,
    and a wall-clock time that ``default_tz`` shows twice or never (daylight saving changes) is an error too.
    An empty time cell (a student who did not submit) gives ``when=None``.

    The instructor supplies this file, so its problems are raised, not reported, each as a
    :class:`~autograder.core.errors.ConfigError` of one line naming the file: a missing file, one over
    :data:`CSV_MAX_BYTES`, not UTF-8, without the required columns; a bad row (naming its data row, its
    line, and the field); a key given twice (naming both rows).
    """
    where = path_line(path)
    if default_tz is not None:
        clock.zone(default_tz)     # a bad name is an error before any row is read
    content = _csv_text(path, where)
    label = path_text(path.name or os.fspath(path))
    reader = csv.reader(io.StringIO(content, newline=""))
    out: dict[tuple[str, str | None], SubmittedAt] = {}
    first_row: dict[tuple[str, str | None], int] = {}
    columns: _Columns | None = None
    number = 0
    try:
        for cells in reader:
            if columns is None:
                if not any(cell.strip() for cell in cells):
                    continue
                columns = _header(where, cells)
                continue
            if not any(cell.strip() for cell in cells):
                continue
            number += 1
            row_where = f"{where}: row {number} (line {reader.line_num})"
            key, submitted = _data_row(cells, columns, row_where, f"times CSV {label} row {number}", default_tz)
            if key in out:
                student, assignment = key
                who = quoted(student) + (f" / {quoted(assignment)}" if assignment else "")
                raise ConfigError(f"{where}: rows {first_row[key]} and {number} both give the time of {who}")
            first_row[key] = number
            out[key] = submitted
    except csv.Error as exc:
        raise ConfigError(f"{where}: line {reader.line_num}: not valid CSV ({line(str(exc), QUOTE_CHARS)})") \
            from None
    if columns is None:
        raise ConfigError(f"{where}: is empty; expected a header such as student,submitted_at[,assignment]")
    return out


def _data_row(cells: list[str], columns: _Columns, row_where: str, source: str,
              default_tz: str | None) -> tuple[tuple[str, str | None], SubmittedAt]:
    """One data row of the times CSV: its key and time; a ConfigError (``row_where``, the field) if unusable."""
    if any(cell.strip() for cell in cells[columns.width:]):
        # Most often a name with an unquoted comma: the columns after it have shifted.
        raise ConfigError(f"{row_where}: {len(cells)} cells where the header names {columns.width}",
                          hint="quote cells that hold a comma")
    cells = cells + [""] * (columns.width - len(cells))
    student = _name_cell(cells[columns.student], row_where, _STUDENT)
    if not student:
        raise ConfigError(f"{row_where}, field {_STUDENT}: empty")
    assignment = ""
    if columns.assignment is not None:
        assignment = _name_cell(cells[columns.assignment], row_where, _ASSIGNMENT)
    raw = cells[columns.time].strip()
    when: datetime | None = None
    if raw:
        when = clock.as_utc(clock.parse_time(raw, where=f"{row_where}, field {columns.time_name}",
                                             default_tz=default_tz))
    return (student, assignment or None), SubmittedAt(when, source)
