"""Canvas: student ids from its "Download Submissions" file names, and ``canvas.csv``, its gradebook import
(an LMS format of :mod:`autograder.reports.lms`)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from autograder.core.points import fmt as fmt_points
from autograder.core.points import total as points_total
from autograder.reports.lms import LmsFormat
from autograder.core.text import csv_rows
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course

#: Canvas' "Download Submissions" file: ``<lastfirst>[_late]_<user id>_<attachment id>[_<original name>]``.
#: Matched whatever follows the two numbers (a renamed file keeps Canvas' prefix, and so its user id).
_FILE = re.compile(r"^(?P<name>[^_]+?)(?P<late>_late)?_(?P<id>\d+)_\d+(?:_.*)?$", re.I)

#: Canvas' importer skips columns whose header contains "Final Points" (read-only, it computes its own).
CANVAS_TOTAL = "Final Points"
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def from_file(stem: str) -> tuple[str, dict[str, str]] | None:
    """``alicesmith_12345_67890_02_qkv_attention`` -> ("alicesmith", {"canvas_id": "12345"})."""
    m = _FILE.match(stem)
    if not m:
        return None
    ids = {"canvas_id": m.group("id")}
    if m.group("late"):
        ids["canvas_late"] = "yes"        # Canvas marked it late (the time itself is not in the name)
    return m.group("name"), ids


def canvas_csv(table: Any, course: Course | None = None) -> str:
    """Canvas' gradebook import: its five student columns, one column per assignment, "Final Points".

    Canvas matches a row by ``ID`` (its user id), then SIS User ID, then SIS Login ID. The user
    id is the first number of a Canvas download's file names (``alicesmith_12345_67890_...``), else
    the roster's (its ``canvas_id``, or Canvas' own export's ``ID``); without one, the student goes to
    ``SIS Login ID``. ``Student`` and ``Section`` are the roster's name and section where it has them.
    A blank cell (no graded notebook) leaves Canvas' grade as it is. The "Points Possible" row sets the points of
    assignments the import creates: each assignment's maximum (:func:`autograder.course.written.maximum`, its written
    answers' points included); Canvas ignores "Final Points" (read-only, it computes its own).
    Each assignment's column is its name in the gradebook (course.yml ``lms_title``, else its title).
    """
    header = [*CANVAS_STUDENT_COLUMNS, *(a.gradebook_title for a in table.assignments), CANVAS_TOTAL]
    maxima = [maximum(a).points for a in table.assignments]
    possible = ["Points Possible", "", "", "", "", *(fmt_points(m) for m in maxima), fmt_points(points_total(maxima))]
    rows = []
    ids = table.user_ids("canvas")
    for student, scores, total in table.rows:
        canvas_id = ids.get(student, "")
        member = table.member(student) if hasattr(table, "member") else None
        name, section = (member.name or student, member.section) if member is not None else (student, "")
        rows.append([name, canvas_id, "", "" if canvas_id else student, section,
                     *("" if scores[a.id] is None else fmt_points(scores[a.id]) for a in table.assignments),
                     fmt_points(total)])
    # A student named "Points Possible" would be read as a second such row: the gate quotes it.
    return csv_rows([header, possible], rows, reserved=("Points Possible",))


#: The status of a graded row Canvas cannot match by user id, in a course whose grades go to Canvas.
NO_CANVAS_ID = ("graded, but no Canvas user id in its file name (not named <login>_<user id>_<submission id>_...) "
                "nor on the roster (canvas_id, or ID in Canvas' export): Canvas matches this row only if its SIS "
                "Login ID is the student's")

FORMAT = LmsFormat("canvas", "canvas.csv", canvas_csv, from_file=from_file, unmatched=NO_CANVAS_ID,
                   from_roster=lambda member: member.canvas_id)
