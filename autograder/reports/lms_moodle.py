"""Moodle: participant ids from its "Download all submissions" folder names; ``moodle.csv``, its offline
grading worksheet (one assignment's, matched by those ids), and ``moodle-grades.csv``, its gradebook's CSV
import (the whole course, matched by the roster's email address or ID number); an LMS format of
:mod:`autograder.reports.lms`."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from autograder.core.points import fmt as fmt_points
from autograder.reports.lms import LmsFormat
from autograder.core.text import csv_rows
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course

#: Moodle's "Download all submissions" folder: ``<full name>_<participant id>_assignsubmission_file_``.
_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assign(?:ment)?submission_(?:file|onlinetext)_?$", re.I)
#: The folder name of a blind-marked assignment (no full name: the participant id tells students apart).
_BLIND = "participant"

#: Moodle's offline grading worksheet (an assignment's "Upload grading worksheet"): its importer finds
#: these three columns by name and matches a row by "Identifier" = "Participant <participant id>".
MOODLE_COLUMNS = ("Identifier", "Full name", "Assignment", "Grade", "Maximum Grade", "Last modified (grade)")
MOODLE_PARTICIPANT = "Participant "


def from_folder(name: str) -> tuple[str, dict[str, str]] | None:
    """``Ada Lovelace_12345_assignsubmission_file_`` -> ("Ada Lovelace", {"moodle_id": "12345"}); blind
    marking's ``Participant_12345_...`` -> ("Participant 12345", ...)."""
    m = _FOLDER.match(name)
    if not m:
        return None
    student, number = m.group("name").strip(), m.group("id")
    if student.replace(" ", "").lower() == _BLIND:
        student = f"Participant {number}"
    return student, {"moodle_id": number}


def moodle_csv(table: Any, course: Course | None = None) -> str:
    """Moodle's offline grading worksheet: one row per student and assignment.

    Moodle's "Upload grading worksheet" (in the assignment) finds the columns ``Identifier``,
    ``Grade`` and ``Last modified (grade)`` by name and matches ``Identifier`` = ``Participant
    <id>``, the participant id of the assignment's "Download all submissions" folder names
    (``Ada Lovelace_12345_assignsubmission_file_``). Participant ids belong to one assignment:
    uploaded to an assignment, the rows of other assignments match nobody and are skipped. A row
    without an id (not from a Moodle download) or without a grade (a blank cell) is skipped too.
    ``Last modified (grade)`` is when the kit graded: Moodle keeps a grade changed after it. ``Maximum Grade`` is
    the assignment's maximum (:func:`autograder.course.written.maximum`: its written answers' points included).
    """
    maxima = {a.id: maximum(a).points for a in (course.assignments if course is not None else table.assignments)}
    rows = [[MOODLE_PARTICIPANT + e.ids["moodle"] if e.ids.get("moodle") else "", e.student, e.assignment,
             "" if e.points is None else fmt_points(e.points),
             fmt_points(maxima[e.assignment]) if e.assignment in maxima else "",
             e.graded_at if e.points is not None else ""] for e in table.entries]
    return csv_rows([list(MOODLE_COLUMNS)], rows)


#: Moodle's gradebook import (Grades → Import → CSV file): the instructor maps "Email address" (or "ID number")
#: to the user's field of that name and each assignment's column to its grade item.
MOODLE_GRADES_FILE = "moodle-grades.csv"
MOODLE_GRADES_COLUMNS = ("Email address", "ID number", "Full name")


def moodle_grades_csv(table: Any, course: Course | None = None) -> str:
    """Moodle's gradebook CSV import: one row per student, the roster's email address and ID number (what
    Moodle's import maps users by), one column per assignment (its gradebook title; a blank cell: no grade,
    Moodle keeps its own). Participant ids are no use here: they belong to one assignment."""
    header = [*MOODLE_GRADES_COLUMNS, *(a.gradebook_title for a in table.assignments)]
    rows = []
    for student, scores, _total in table.rows:
        member = table.member(student)
        rows.append([member.email if member else "", member.moodle_id_number if member else "",
                     (member.name if member and member.name else student),
                     *("" if scores[a.id] is None else fmt_points(scores[a.id]) for a in table.assignments)])
    return csv_rows([header], rows)


def unmatched_rows(table: Any) -> list[Any]:
    """Graded rows neither Moodle file can match: no participant id (a download's) and no email address or ID
    number on the roster."""
    return [e for e in table.entries if e.points is not None and not e.ids.get("moodle")
            and not FORMAT.matched_by_roster(table.member(e.student))]


#: The status of a graded row no Moodle file can match, in a course whose grades go to Moodle.
NO_MOODLE_ID = ("graded, but Moodle cannot match it: no participant id (moodle.csv: from the folder names of "
                "Moodle's download) and no email address or ID number on the roster (moodle-grades.csv)")

FORMAT = LmsFormat("moodle", "moodle.csv", moodle_csv, from_folder=from_folder, unmatched=NO_MOODLE_ID,
                   unmatched_rows=unmatched_rows, more=((MOODLE_GRADES_FILE, moodle_grades_csv),),
                   roster_matches=lambda member: bool(member.email or member.moodle_id_number))
