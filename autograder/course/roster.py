"""The class list: who is in the course, their names and the ids their LMS knows them by.

One reader for every roster the kit takes (course.yml's ``roster:``, ``autograder serve roster``): the kit's
own CSV (``student,name,email,section,canvas_id,moodle_id_number``) or an LMS's own export as it was
downloaded, its columns found by name:

* Canvas' gradebook export (Grades → Export): ``Student`` ("Last, First"), ``ID`` (the Canvas user id that
  canvas.csv's ``ID`` column matches), ``SIS User ID``, ``SIS Login ID`` (the student id), ``Section``; its
  "Points Possible" row is not a student.
* Moodle's exports (the gradebook's "Plain text file", the participants' table): ``Username`` (else ``ID
  number``, else ``Email address``) is the student id, ``First name`` + ``Last name`` (or ``Full name``)
  the name, ``Email address`` and ``ID number`` what moodle-grades.csv matches by.

Every error names the file and the row. Nothing here reads a student's submission: a roster is the
instructor's own file.
"""
from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from pathlib import Path

from autograder.core.errors import ConfigError

#: A roster larger than this is not a class.
MAX_ROSTER = 100_000
#: The longest id, name or email kept (longer is an error naming the row).
MAX_FIELD = 200

#: Each field and the headers it is read from, first found wins (compared without case and spaces' ends).
#: The kit's own columns first, then Canvas', then Moodle's.
COLUMNS: dict[str, tuple[str, ...]] = {
    "student": ("student", "sis login id", "username", "id number", "email address"),
    "name": ("name", "student", "full name"),
    "email": ("email", "email address"),
    "section": ("section", "sections"),
    "canvas_id": ("canvas_id", "id"),
    "moodle_id_number": ("moodle_id_number", "id number"),
}
#: Canvas' gradebook export puts this in its Student column on its second row (points of each assignment).
CANVAS_POINTS_ROW = "points possible"


@dataclass(frozen=True)
class Member:
    """One student of the class."""

    student: str
    name: str = ""
    email: str = ""
    section: str = ""
    canvas_id: str = ""            # Canvas' user id (digits): canvas.csv's ID
    moodle_id_number: str = ""     # Moodle's "ID number" (the institution's): moodle-grades.csv matches by it


@dataclass(frozen=True)
class Roster:
    """The class, in the file's order; ``where`` names the file in messages."""

    members: tuple[Member, ...]
    where: str = "roster"

    @property
    def students(self) -> set[str]:
        return {m.student for m in self.members}

    def member(self, student: str) -> Member | None:
        return self._by_student.get(student)

    @functools.cached_property
    def _by_student(self) -> dict[str, Member]:
        return {m.student: m for m in self.members}


def _columns(header: list[str]) -> dict[str, str]:
    """field -> the header it is read from."""
    by_key = {h.strip().lower(): h for h in header if h is not None}
    found = {field: next((by_key[k] for k in keys if k in by_key), "") for field, keys in COLUMNS.items()}
    canvas = "sis login id" in by_key or "sis user id" in by_key
    if found["name"] and by_key.get("student") == found["name"] and not canvas:
        found["name"] = ""                         # the kit's own "student" column is an id, not Canvas' name
    if not canvas and found["canvas_id"] == by_key.get("id"):
        found["canvas_id"] = ""                    # an "ID" column is Canvas' user id only in Canvas' export
    if canvas and found["student"] == by_key.get("student"):
        found["student"] = by_key.get("sis login id") or by_key.get("sis user id", "")
    return found


def read_roster(path: Path, where: str | None = None) -> Roster:
    """The roster in ``path`` (UTF-8, a BOM allowed). :class:`ConfigError` names the file and row."""
    where = where or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot be read as UTF-8 text ({exc})") from None
    return parse_roster(text, where)


def parse_roster(text: str, where: str = "roster") -> Roster:
    """A roster's CSV text (the kit's own columns or an LMS's export) as a Roster; ConfigError names the row."""
    header, rows = _csv_table(text, where)
    columns = _columns(header)
    if not columns["student"]:
        raise ConfigError(f"{where}: no student column (its header: {', '.join(h for h in header if h) or 'none'})",
                          hint="the kit's own: student[,name,email,section,canvas_id,moodle_id_number]; or an LMS's "
                               "export as downloaded (Canvas: SIS Login ID; Moodle: Username, ID number or Email "
                               "address)")
    if len(rows) > MAX_ROSTER:
        raise ConfigError(f"{where}: {len(rows)} rows, more than {MAX_ROSTER}")
    members: list[Member] = []
    seen: dict[str, int] = {}
    first_last = ("first name" in {h.strip().lower() for h in header if h}) and not columns["name"]
    lowered = {h.strip().lower(): h for h in header if h}
    for number, row in enumerate(rows, start=1):
        at = f"{where}, row {number}"
        student = _row_student(row, columns, at)
        if student is None:
            continue
        if student in seen:
            raise ConfigError(f"{at}: student {student!r} is already row {seen[student]}")
        seen[student] = number
        members.append(Member(student, **_row_values(row, columns, at, lowered if first_last else None)))
    return Roster(tuple(members), where)


def _csv_table(text: str, where: str) -> tuple[list[str], list[dict[str, str | None]]]:
    """A CSV text's header and rows (as mappings); a ConfigError where it is not CSV."""
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = list(reader.fieldnames or [])
        rows = list(reader)
    except csv.Error as exc:
        raise ConfigError(f"{where}: not a CSV file ({exc})") from None
    return header, rows


def _cell(columns: dict[str, str], row: dict[str, str | None], field: str) -> str:
    """The row's value of ``field`` (read from its column, if any), stripped; "" where there is none."""
    column = columns[field]
    value = row.get(column) if column else ""
    return value.strip() if isinstance(value, str) else ""


def _row_student(row: dict[str, str | None], columns: dict[str, str], at: str) -> str | None:
    """The row's student id, checked; None for a row that is no student (Canvas' points row, an empty line)."""
    student = _cell(columns, row, "student")
    if CANVAS_POINTS_ROW in (_cell(columns, row, "name").lower(), student.lower()):
        return None
    if not student and not any((v or "").strip() for v in row.values() if isinstance(v, str)):
        return None                                            # an empty line
    if not student or len(student) > MAX_FIELD or not student.isprintable():
        raise ConfigError(f"{at}: {columns['student']}: a student id of 1 to {MAX_FIELD} printable characters")
    return student


def _row_values(row: dict[str, str | None], columns: dict[str, str], at: str,
                first_last: dict[str, str] | None) -> dict[str, str]:
    """The row's other fields, checked; the name from first and last name columns where ``first_last`` (the
    header's lowered names) is given."""
    name = _cell(columns, row, "name")
    if first_last is not None:
        name = " ".join(part for part in ((row.get(first_last.get("first name", "")) or "").strip(),
                                          (row.get(first_last.get("last name", "")) or "").strip()) if part)
    values = {"name": name, "email": _cell(columns, row, "email"), "section": _cell(columns, row, "section"),
              "canvas_id": _cell(columns, row, "canvas_id"),
              "moodle_id_number": _cell(columns, row, "moodle_id_number")}
    for field, value in values.items():
        if len(value) > MAX_FIELD or not value.isprintable():
            raise ConfigError(f"{at}: {columns[field] or field}: at most {MAX_FIELD} printable characters")
    if values["canvas_id"] and not values["canvas_id"].isdigit():
        raise ConfigError(f"{at}: {columns['canvas_id']}: a Canvas user id is digits, got "
                          f"{values['canvas_id'][:40]!r}")
    return values
