"""Extensions files: ``extensions.csv`` or ``extensions.yml`` beside course.yml, one row per student and
assignment that has more time (a new due date, or a duration added to the due date).

Every problem is a ConfigError naming the file, the row and the field: the instructor wrote the file and
fixes it. The rows become :class:`~autograder.course.late_policy.Extension` values, which
:func:`~autograder.course.late_policy.deadline_for` applies.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from autograder.course.clock import parse_duration, parse_time
from autograder.core.errors import ConfigError
from autograder.course.late_policy import Extension, close_hint

#: The columns of an extensions file (CSV header, or the keys of each YAML mapping).
EXTENSION_FIELDS = ("student", "assignment", "due", "extra", "reason")


def _listed(names: Iterable[str], most: int = 10) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:most])
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > most else "")


def _csv_rows(text: str, name: str) -> list[dict[str, Any]]:
    """The data rows of an extensions CSV as mappings of the known columns (blank lines skipped)."""
    try:
        records = [row for row in csv.reader(io.StringIO(text, newline="")) if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise ConfigError(f"{name}: not a readable CSV file ({exc})") from None
    if not records:
        return []
    header = [cell.strip().lower() for cell in records[0]]
    _check_csv_header(header, name)
    rows: list[dict[str, Any]] = []
    for number, record in enumerate(records[1:], start=1):
        if len(record) > len(header):
            raise ConfigError(f"{name}, row {number}: {len(record)} values for {len(header)} columns "
                              f"({','.join(header)}); quote a value that holds a comma")
        rows.append({column: cell.strip() for column, cell in zip(header, record)})
    return rows


def _check_csv_header(header: list[str], name: str) -> None:
    """An extensions CSV's header: known columns, each once; student, assignment, and due or extra present."""
    for column in header:
        if column not in EXTENSION_FIELDS:
            raise ConfigError(f"{name}, header: unknown column {column!r} (the columns are "
                              f"{', '.join(EXTENSION_FIELDS)})", hint=close_hint(column, EXTENSION_FIELDS))
        if header.count(column) > 1:
            raise ConfigError(f"{name}, header: column {column!r} appears twice")
    for needed in ("student", "assignment"):
        if needed not in header:
            raise ConfigError(f"{name}, header: no column {needed!r} (the header is "
                              f"{','.join(EXTENSION_FIELDS)})")
    if "due" not in header and "extra" not in header:
        raise ConfigError(f"{name}, header: no column 'due' or 'extra' (the header is {','.join(EXTENSION_FIELDS)})")


def _yaml_rows(text: str, name: str) -> list[dict[str, Any]]:
    """The entries of an extensions YAML file (a list of mappings) with their keys checked."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{name}: not valid YAML{at} ({problem})") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{name}: expected a list of extensions (lines starting with '- student: ...'), "
                          f"got a {type(data).__name__}")
    rows: list[dict[str, Any]] = []
    for number, item in enumerate(data, start=1):
        if not isinstance(item, Mapping):
            raise ConfigError(f"{name}, row {number}: expected a mapping with keys {', '.join(EXTENSION_FIELDS)}, "
                              f"got {type(item).__name__} {item!r}")
        for key in item:
            if key not in EXTENSION_FIELDS:
                raise ConfigError(f"{name}, row {number}: unknown key {str(key)!r} (the keys are "
                                  f"{', '.join(EXTENSION_FIELDS)})", hint=close_hint(str(key), EXTENSION_FIELDS))
        rows.append(dict(item))
    return rows


def _name_cell(value: Any, where: str, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigError(f"{where}: {field}: expected a name, got {type(value).__name__} {value!r}")
    return str(value).strip()


def load_extensions(path: Path, *, assignments: set[str], students: set[str] | None = None,
                    default_tz: str | None = None) -> list[Extension]:
    """A CSV (header: student,assignment,due,extra,reason; due XOR extra per row; UTF-8, BOM tolerated) or YAML
    list of mappings with the same keys (by suffix .csv / .yml / .yaml). Missing file -> []. Every problem is a
    ConfigError naming the file, the row (1-based data row) and the field: unknown assignment (with the known ones
    listed), unknown student when `students` is given (the roster seen), both or neither of due/extra, a due
    without a time zone and no default_tz, duplicate (student, assignment).

    The first problem found is raised (one line, as every ConfigError). Blank CSV lines are skipped and not
    counted as rows; the CSV header's column names are read case-insensitively, in any order.
    """
    path = Path(path)
    name = path.name
    if not path.exists():
        return []
    suffix = path.suffix.lower()
    text = _extensions_text(path, name, suffix)
    rows = _csv_rows(text, name) if suffix == ".csv" else _yaml_rows(text, name)
    seen: dict[tuple[str, str], int] = {}
    extensions: list[Extension] = []
    for number, row in enumerate(rows, start=1):
        student, assignment, where = _row_names(row, f"{name}, row {number}", assignments, students)
        due, extra = _row_times(row, where, default_tz)
        reason = row.get("reason")
        if reason is not None and not isinstance(reason, str):
            reason = str(reason)
        key = (student, assignment)
        if key in seen:
            raise ConfigError(f"{where}: a second extension for {student} on {assignment} (the first is row "
                              f"{seen[key]}); keep one")
        seen[key] = number
        extensions.append(Extension(student=student, assignment=assignment, due=due, extra=extra,
                                    reason=(reason or "").strip()))
    return extensions


def _extensions_text(path: Path, name: str, suffix: str) -> str:
    """The text of an extensions file of a known suffix (UTF-8, BOM tolerated); a ConfigError otherwise."""
    if suffix not in (".csv", ".yml", ".yaml"):
        raise ConfigError(f"{name}: an extensions file is .csv, .yml or .yaml, not {suffix or 'a file without one'}")
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{name}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc})") from None


def _row_names(row: dict[str, Any], at: str, assignments: set[str],
               students: set[str] | None) -> tuple[str, str, str]:
    """A row's student and assignment, each given and known, and the words that name the row in a problem."""
    student = _name_cell(row.get("student"), at, "student")
    assignment = _name_cell(row.get("assignment"), at, "assignment")
    where = f"{at} ({student or '?'}, {assignment or '?'})"
    if not student:
        raise ConfigError(f"{where}: student: empty (the student's ID, as in the roster)")
    if not assignment:
        raise ConfigError(f"{where}: assignment: empty (one of {_listed(assignments)})")
    if assignment not in assignments:
        raise ConfigError(f"{where}: assignment: {assignment!r} is not an assignment of the course (known: "
                          f"{_listed(assignments) or 'none'})", hint=close_hint(assignment, assignments))
    if students is not None and student not in students:
        raise ConfigError(f"{where}: student: {student!r} is not on the roster ({len(students)} students seen: "
                          f"{_listed(students) or 'none'})", hint=close_hint(student, students))
    return student, assignment, where


def _row_times(row: dict[str, Any], where: str,
               default_tz: str | None) -> tuple[datetime | None, timedelta | None]:
    """A row's new due date or its extra time (exactly one of them given; the other None)."""
    due_cell: Any = row.get("due")
    extra_cell: Any = row.get("extra")
    has_due, has_extra = due_cell not in (None, ""), extra_cell not in (None, "")
    if has_due and has_extra:
        raise ConfigError(f"{where}: due and extra both given: give due (a new due date) or extra "
                          f"(a duration added to the due date), not both")
    if not has_due and not has_extra:
        raise ConfigError(f"{where}: neither due nor extra given: give due (a new due date, e.g. "
                          f"2026-12-01T10:00+08:00) or extra (a duration, e.g. 3d)")
    due = parse_time(due_cell, where=f"{where}: due", default_tz=default_tz) if has_due else None
    extra = parse_duration(extra_cell, where=f"{where}: extra") if has_extra else None
    return due, extra
