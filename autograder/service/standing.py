"""Stored results as the late policy makes them now: every view of the service applies it the same way.

A result is stored once, when it is graded, with the late policy as it was then; a person's marks of its written
answers and adjustments of its automatic points are kept apart (:mod:`autograder.service.marks`) and joined here.
An extension granted (or edited, or revoked) from the dashboard afterwards, or a changed extensions file, must
reach every view at once, without regrading: :class:`Standing` reads the course's deadlines and the dashboard's
grants once per request and settles each stored result again from its own submission time, as
``autograder grade`` does for the results it keeps. The student's page, the API, the class report and
the export (grades.csv, the LMS files) all read results through it.
"""
from __future__ import annotations

import copy
import datetime as dt
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

if TYPE_CHECKING:
    from autograder.course.config import Course


class Standing:
    """The deadlines as they are now (course.yml, its extensions file, the dashboard's grants)."""

    def __init__(self, engine: Engine, course: Course):
        from autograder.grading.deadlines import Deadlines  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
        from autograder.service.tables import granted_extensions  # noqa: PLC0415 - loads sqlalchemy
        from autograder.service.marks import Book  # noqa: PLC0415 - loads sqlalchemy

        self.course = course
        self.deadlines = Deadlines.load(course, more=granted_extensions(engine))
        self.book = Book.read(engine)       # the hand-graded answers and the adjusted exercises
        self._known = {a.id for a in course.assignments}

    def due(self, student: str, assignment: str) -> dt.datetime | None:
        """The student's own due date for the assignment (an extension moves it); None without one."""
        if assignment not in self._known:
            return None
        deadline = self.deadlines.deadline(student, assignment)
        return deadline.due if deadline is not None else None

    def result(self, stored: dict[str, Any]) -> dict[str, Any]:
        """A copy of a stored result with the marks of its written answers and the staff's adjustments
        (:func:`autograder.service.marks.apply`), its late policy applied again from its own submission time: the
        points, the late section (due date, extension, penalty) and ``raw_points`` as they are now."""
        from autograder.service.marks import apply  # noqa: PLC0415 - (loaded by __init__ already)

        return self.deadlines.settle(apply(copy.deepcopy(stored), self.book), None)
