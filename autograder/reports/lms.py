"""The grade exports an LMS imports: ``canvas.csv`` (one row per student, one column per assignment,
matched by the Canvas user id when the download gave one), ``moodle.csv`` (Moodle's offline grading
worksheet, matched by participant id) and ``lms-skipped.csv`` (what was left blank because it is not
a grade, and why).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.config import Course
from autograder.points import fmt as fmt_points, total as points_total
from autograder.reports.results import is_graded, newest_results
from autograder.text import csv_rows


CANVAS_FILE = "canvas.csv"


MOODLE_FILE = "moodle.csv"


#: Canvas' importer skips columns whose header contains "Final Points" (read-only, it computes its own).
CANVAS_TOTAL = "Final Points"


CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


#: Moodle's offline grading worksheet (an assignment's "Upload grading worksheet"): its importer finds
#: these three columns by name and matches a row by "Identifier" = "Participant <participant id>".
MOODLE_COLUMNS = ("Identifier", "Full name", "Assignment", "Grade", "Maximum Grade", "Last modified (grade)")


MOODLE_PARTICIPANT = "Participant "


#: Every result that got no grade in canvas.csv and moodle.csv (a blank cell), with its status.
LMS_SKIPPED_FILE = "lms-skipped.csv"


LMS_SKIPPED_COLUMNS = ("student", "assignment", "status", "source")


#: The status of a graded row of a Canvas download that Canvas cannot match by user id.
NO_CANVAS_ID = ("graded, but no Canvas user id in its file name (not named <login>_<user id>_<submission id>_...): "
                "Canvas matches this row only if its SIS Login ID is the student's")


# -- LMS exports -------------------------------------------------------------------------
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
    canvas_id: str                 # Canvas user id from the download's file name, or ""
    moodle_id: str                 # Moodle participant id from the download's folder name, or ""


@dataclass
class LmsTable:
    """One row per student: each assignment's points (None: nothing graded, a blank cell) and the total."""

    assignments: list[Any]                               # course.yml Assignment objects, in course order
    rows: list[tuple[str, dict[str, float | None], float]]
    entries: list[LmsEntry] = field(default_factory=list)        # by student, then assignment
    canvas_ids: dict[str, str] = field(default_factory=dict)     # student -> Canvas user id
    #: (student, assignment, status, source): rows left blank, and graded rows of a Canvas download that
    #: carry no Canvas user id (Canvas cannot match them by id).
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)


def lms_table(results: Iterable[dict[str, Any]], course: Course) -> LmsTable:
    """Students x assignments from ``autograder grade`` results (one result per pair, as the gradebook).

    Only a grade is written: a result that is not one (unreadable, a discovery problem, a grader
    fault) leaves its cell blank, so the LMS keeps what it has, and is listed in ``skipped`` with
    its status, as is a result that names no student or no assignment of the course.
    """
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
        entries.append(LmsEntry(student, assignment, float(r.get("points", 0.0)) if graded else None,
                                str(r.get("status") or ""), str(r.get("source") or ""),
                                str(r.get("graded_at") or ""), _evidence(r, "canvas_id"), _evidence(r, "moodle_id")))
        if not graded:
            skipped.append((student, assignment, str(r.get("status") or ""), str(r.get("source") or "")))
    order = {a.id: i for i, a in enumerate(course.assignments)}
    entries.sort(key=lambda e: (e.student, order[e.assignment]))
    per_student: dict[str, dict[str, float | None]] = {}
    canvas_ids: dict[str, tuple[str, str]] = {}
    for e in entries:
        per_student.setdefault(e.student, {})[e.assignment] = e.points
        if e.canvas_id and (e.student not in canvas_ids or e.graded_at > canvas_ids[e.student][0]):
            canvas_ids[e.student] = (e.graded_at, e.canvas_id)   # a user id is course-wide: the latest
    if canvas_ids:
        # A Canvas download: a student whose file names carry no Canvas user id (a file renamed beyond
        # recognition, one added by hand) can be matched only by SIS Login ID, which is likely to fail.
        for e in entries:
            if e.student not in canvas_ids and e.points is not None:
                skipped.append((e.student, e.assignment, NO_CANVAS_ID, e.source))
    rows = []
    for student in sorted(per_student):
        scores = {a.id: per_student[student].get(a.id) for a in assignments}
        rows.append((student, scores, points_total(v for v in scores.values() if v is not None)))
    skipped.sort()
    return LmsTable(assignments, rows, entries, {k: v for k, (_, v) in canvas_ids.items()}, skipped)


def canvas_csv(table: LmsTable) -> str:
    """Canvas' gradebook import: its five student columns, one column per assignment, "Final Points".

    Canvas matches a row by ``ID`` (its user id), then SIS User ID, then SIS Login ID. The user
    id is the first number of a Canvas download's file names (``alicesmith_12345_67890_...``);
    without one (another source), the student goes to ``SIS Login ID``. A blank cell (no graded
    notebook) leaves Canvas' grade as it is. The "Points Possible" row sets the points of
    assignments the import creates; Canvas ignores "Final Points" (read-only, it computes its own).
    """
    header = [*CANVAS_STUDENT_COLUMNS, *(a.gradebook_title for a in table.assignments), CANVAS_TOTAL]
    possible = ["Points Possible", "", "", "", "", *(fmt_points(a.points) for a in table.assignments),
                fmt_points(sum(a.points for a in table.assignments))]
    rows = []
    for student, scores, total in table.rows:
        canvas_id = table.canvas_ids.get(student, "")
        rows.append([student, canvas_id, "", "" if canvas_id else student, "",
                     *("" if scores[a.id] is None else fmt_points(scores[a.id]) for a in table.assignments),
                     fmt_points(total)])
    # A student named "Points Possible" would be read as a second such row: the gate quotes it.
    return csv_rows([header, possible], rows, reserved=("Points Possible",))


def moodle_csv(table: LmsTable, course: Course | None = None) -> str:
    """Moodle's offline grading worksheet: one row per student and assignment.

    Moodle's "Upload grading worksheet" (in the assignment) finds the columns ``Identifier``,
    ``Grade`` and ``Last modified (grade)`` by name and matches ``Identifier`` = ``Participant
    <id>``, the participant id of the assignment's "Download all submissions" folder names
    (``Ada Lovelace_12345_assignsubmission_file_``). Participant ids belong to one assignment:
    uploaded to an assignment, the rows of other assignments match nobody and are skipped. A row
    without an id (not from a Moodle download) or without a grade (a blank cell) is skipped too.
    ``Last modified (grade)`` is when the kit graded: Moodle keeps a grade changed after it.
    """
    maxima = {a.id: a.points for a in (course.assignments if course is not None else table.assignments)}
    rows = [[MOODLE_PARTICIPANT + e.moodle_id if e.moodle_id else "", e.student, e.assignment,
             "" if e.points is None else fmt_points(e.points), fmt_points(maxima[e.assignment]) if e.assignment in maxima else "",
             e.graded_at if e.points is not None else ""] for e in table.entries]
    return csv_rows([list(MOODLE_COLUMNS)], rows)


def lms_skipped_csv(table: LmsTable) -> str:
    """The results canvas.csv and moodle.csv leave blank (or leave out: no student), with their status."""
    return csv_rows([list(LMS_SKIPPED_COLUMNS)], [list(row) for row in table.skipped])


def write_lms_csv(results: Iterable[dict[str, Any]], course: Course, out_dir: Path) -> list[Path]:
    """Write ``OUT/canvas.csv``, ``OUT/moodle.csv`` and ``OUT/lms-skipped.csv`` (UTF-8, comma-separated).

    Returns their paths; ``lms-skipped.csv`` is always rewritten (only its header when every
    result is a grade), so it never describes an earlier run.
    """
    from autograder.reports.files import atomic_write_text

    table = lms_table(list(results), course)
    out = Path(out_dir)
    written = []
    for name, text in ((CANVAS_FILE, canvas_csv(table)), (MOODLE_FILE, moodle_csv(table, course)),
                       (LMS_SKIPPED_FILE, lms_skipped_csv(table))):
        atomic_write_text(out / name, text)
        written.append(out / name)
    return written
