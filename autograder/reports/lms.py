"""The grade exports an LMS imports, one format per module (:data:`FORMAT_MODULES`: ``lms_canvas``,
``lms_moodle``), and ``lms-skipped.csv`` (what was left blank because it is not a grade, and why).

An :class:`LmsFormat` says how its LMS names students in a download (a file name, a folder name: the
student and the LMS's id for them, kept in each result's evidence as ``<format>_id``) and writes the
file its gradebook imports from the one table of grades (:class:`LmsTable`). Discovery's name reading
(:mod:`autograder.grading.evidence`) asks every format; adding an LMS is one module that declares
``FORMAT = LmsFormat(...)``, its entry in :data:`FORMAT_MODULES`, and its tests.
"""
from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.core.atomic import atomic_write_text
from autograder.course.config import Course
from autograder.core.points import total as points_total
from autograder.reports.results import is_graded, newest_results
from autograder.core.text import csv_rows

#: The modules that declare an LMS format, in the order the files are written.
FORMAT_MODULES = ("autograder.reports.lms_canvas", "autograder.reports.lms_moodle")


@dataclass(frozen=True)
class LmsFormat:
    name: str                                                      # "canvas": ids kept as evidence["canvas_id"]
    file: str                                                      # what the kit writes: "canvas.csv"
    write: Callable[[LmsTable, Any], str]                          # (the table, the course) -> the file's text
    #: A file's stem -> (student, evidence) when it is named as this LMS names downloads, else None.
    from_file: Callable[[str], tuple[str, dict[str, str]] | None] | None = None
    #: A folder's name -> (student, evidence), the same for folders.
    from_folder: Callable[[str], tuple[str, dict[str, str]] | None] | None = None
    #: The status lms-skipped.csv gives a graded row this LMS's files cannot match (None: never listed) ...
    unmatched: str | None = None
    #: ... and which rows those are, for a course that uses this LMS (course.yml ``lms``, else: the table holds
    #: ids of it); default: the graded rows with no id of this LMS.
    unmatched_rows: Callable[[LmsTable], list[LmsEntry]] | None = None
    #: The id of this LMS the course's roster gives a student (where a download's name gives none).
    from_roster: Callable[[Any], str] | None = None
    #: Whether a roster entry lets this LMS's files match its student (default: it gives an id, ``from_roster``).
    roster_matches: Callable[[Any], bool] | None = None

    def matched_by_roster(self, member: Any) -> bool:
        """Whether ``member`` (a roster entry, or None) lets this LMS's files match its student."""
        if member is None:
            return False
        if self.roster_matches is not None:
            return self.roster_matches(member)
        return bool(self.from_roster(member)) if self.from_roster is not None else False
    #: Files written beside ``file``: (name, write) as ``write``.
    more: tuple[tuple[str, Callable[[LmsTable, Any], str]], ...] = ()

    @property
    def id_key(self) -> str:
        return f"{self.name}_id"


@functools.lru_cache(maxsize=1)
def formats() -> tuple[LmsFormat, ...]:
    """Every LMS format, in :data:`FORMAT_MODULES` order."""
    return tuple(importlib.import_module(module).FORMAT for module in FORMAT_MODULES)


def id_keys() -> tuple[str, ...]:
    """The evidence keys of the LMS ids discovery reads from names (``canvas_id``, ``moodle_id``)."""
    return tuple(f.id_key for f in formats())


#: Every result that got no grade in the LMS files (a blank cell), with its status.
LMS_SKIPPED_FILE = "lms-skipped.csv"


LMS_SKIPPED_COLUMNS = ("student", "assignment", "status", "source")


# -- the table every format writes from -------------------------------------------------------
def _evidence(result: dict[str, Any], key: str) -> str:
    """An LMS id the discovery read from the submission's name (``canvas_id``, ``moodle_id``), or ""."""
    evidence = result.get("evidence")
    value = evidence.get(key) if isinstance(evidence, dict) else None
    return value if isinstance(value, str) and value.isdigit() else ""


@dataclass
class LmsEntry:
    """The result that counts for one student and assignment."""

    student: str
    assignment: str
    points: float | None           # None: not graded (the status says why); the LMS cell stays blank
    status: str
    source: str
    graded_at: str
    ids: dict[str, str] = field(default_factory=dict)   # LMS format name -> the id its download gave


@dataclass
class LmsTable:
    """One row per student: each assignment's points (None: nothing graded, a blank cell) and the total."""

    assignments: list[Any]                               # course.yml Assignment objects, in course order
    rows: list[tuple[str, dict[str, float | None], float]]
    entries: list[LmsEntry] = field(default_factory=list)        # by student, then assignment
    #: (student, assignment, status, source): rows left blank, and graded rows an LMS the course uses cannot
    #: match (no id of it).
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)
    roster: Any = None                                   # course.yml's roster (course.roster.Roster), or None
    lms: tuple[str, ...] | None = None                   # course.yml's lms: the LMSs the grades go to (None: unsaid)

    def member(self, student: str) -> Any:
        """The roster's entry for ``student`` (name, email, LMS ids), or None."""
        return self.roster.member(student) if self.roster is not None else None

    def uses(self, lms: LmsFormat) -> bool:
        """Whether the course's grades go to ``lms``: course.yml says so, or (unsaid) the downloads or the roster
        give ids of it."""
        if self.lms is not None:
            return lms.name in self.lms
        return bool(self.user_ids(lms.name)) or (self.roster is not None and any(
            lms.matched_by_roster(m) for m in self.roster.members))

    def user_ids(self, lms: str) -> dict[str, str]:
        """student -> the LMS's id for them: course-wide, the latest graded result's."""
        latest: dict[str, tuple[str, str]] = {}
        for e in self.entries:
            value = e.ids.get(lms)
            if value and (e.student not in latest or e.graded_at > latest[e.student][0]):
                latest[e.student] = (e.graded_at, value)
        return {student: value for student, (_, value) in latest.items()}


def lms_table(results: Iterable[dict[str, Any]], course: Course, roster: Any = ...) -> LmsTable:
    """Students x assignments from ``autograder grade`` results (one result per pair, as the gradebook).

    Only a grade is written: a result that is not one (unreadable, a discovery problem, a grader
    fault) leaves its cell blank, so the LMS keeps what it has, and is listed in ``skipped`` with
    its status, as is a result that names no student or no assignment of the course. A student's LMS ids come
    from the download's names, else from the ``roster`` (default: course.yml's); a graded row an LMS the
    course uses cannot match is listed in ``skipped`` too, with that LMS's status.
    """
    if roster is ...:
        roster = course.roster_members() if hasattr(course, "roster_members") else None
    results = list(results)
    known = {a.id for a in course.assignments}
    usable = [r for r in results if r.get("student") and r.get("assignment") in known]
    chosen = newest_results(usable)
    skipped = [(str(r.get("student") or ""), str(r.get("assignment") or ""), str(r.get("status") or ""),
                str(r.get("source") or "")) for r in results if not (r.get("student") and r.get("assignment") in known)]
    present = {assignment for _, assignment, _ in chosen.values()}
    assignments = [a for a in course.assignments if a.id in present]
    entries = []
    for student, assignment, r in chosen.values():
        graded = is_graded(r)
        ids = {f.name: _evidence(r, f.id_key) for f in formats() if _evidence(r, f.id_key)}
        member = roster.member(student) if roster is not None else None
        for f in formats():
            if f.name not in ids and member is not None and f.from_roster is not None and f.from_roster(member):
                ids[f.name] = f.from_roster(member)
        entries.append(LmsEntry(student, assignment, float(r.get("points", 0.0)) if graded else None,
                                str(r.get("status") or ""), str(r.get("source") or ""),
                                str(r.get("graded_at") or ""), ids))
        if not graded:
            skipped.append((student, assignment, str(r.get("status") or ""), str(r.get("source") or "")))
    order = {a.id: i for i, a in enumerate(course.assignments)}
    entries.sort(key=lambda e: (e.student, order[e.assignment]))
    per_student: dict[str, dict[str, float | None]] = {}
    for e in entries:
        per_student.setdefault(e.student, {})[e.assignment] = e.points
    rows = []
    for student in sorted(per_student):
        scores = {a.id: per_student[student].get(a.id) for a in assignments}
        rows.append((student, scores, points_total(v for v in scores.values() if v is not None)))
    lms = getattr(course, "lms", None)
    table = LmsTable(assignments, rows, entries, skipped, roster, tuple(lms) if lms is not None else None)
    for f in formats():
        if f.unmatched is None or not table.uses(f):
            continue
        # A graded row the LMS cannot match by id (a download's file renamed beyond recognition, a student with
        # no id on the roster, a service's upload) would match nobody, or only by a guess: listed.
        unmatched = f.unmatched_rows(table) if f.unmatched_rows is not None else \
            [e for e in entries if e.points is not None and not e.ids.get(f.name)]
        skipped.extend((e.student, e.assignment, f.unmatched, e.source) for e in unmatched)
    skipped.sort()
    return table


def lms_skipped_csv(table: LmsTable) -> str:
    """The results the LMS files leave blank (or leave out: no student), with their status."""
    return csv_rows([list(LMS_SKIPPED_COLUMNS)], [list(row) for row in table.skipped])


def write_lms_csv(results: Iterable[dict[str, Any]], course: Course, out_dir: Path, roster: Any = ...) -> list[Path]:
    """Write every format's files (``OUT/canvas.csv``, ``OUT/moodle.csv``, ``OUT/moodle-grades.csv``) and
    ``OUT/lms-skipped.csv``.

    Returns their paths; ``lms-skipped.csv`` is always rewritten (only its header when every
    result is a grade), so it never describes an earlier run.
    """
    table = lms_table(list(results), course, roster)
    out = Path(out_dir)
    written = []
    files = [(name, write(table, course)) for f in formats() for name, write in ((f.file, f.write), *f.more)]
    for name, text in [*files, (LMS_SKIPPED_FILE, lms_skipped_csv(table))]:
        atomic_write_text(out / name, text)
        written.append(out / name)
    return written


def __getattr__(name: str) -> Any:
    """The formats' own names, as this module once held them (``canvas_csv``, ``CANVAS_FILE``...)."""
    aliases = {"CANVAS_FILE": ("lms_canvas", "FORMAT"), "MOODLE_FILE": ("lms_moodle", "FORMAT")}
    if name in aliases:
        module, attr = aliases[name]
        return getattr(importlib.import_module(f"autograder.reports.{module}"), attr).file
    for module in ("lms_canvas", "lms_moodle"):
        found = importlib.import_module(f"autograder.reports.{module}")
        if hasattr(found, name):
            return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
