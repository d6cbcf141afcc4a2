"""The class, assignment by assignment: who has not submitted, who waits for a grade, who is graded, who was
late, for the staff's roster page and its CSV (a list to export and to mail).

Everyone on the roster is listed, and so is anyone with a submission who is not on it (marked so: a student the
roster lost, or a Hub user). A student's state on an assignment is that of the result that counts (course.yml's
``service.counts``: the latest graded submission, or the best), with the late policy as it is now
(:class:`~autograder.service.standing.Standing`: an extension granted since already counts).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autograder.core.points import fmt
from autograder.core.text import csv_rows
from autograder.service import people, repository
from autograder.service.context import Service
from autograder.service.standing import Standing
from autograder.course.written import Maximum, maximum_of

#: A student's state on one assignment: no submission; submitted, no grade yet; graded; graded and late.
STATES = ("missing", "waiting", "graded", "late")


@dataclass
class Cell:
    state: str = "missing"
    submissions: int = 0
    points: float | None = None
    most: Maximum | None = None          # the assignment's maximum, with what still waits for a person

    @property
    def max_points(self) -> float | None:
        return self.most.points if self.most is not None else None

    @property
    def text(self) -> str:
        return f"{fmt(self.points)} / {fmt(self.max_points or 0.0)}" if self.points is not None else ""

    def fraction(self, language: str) -> str:
        """The page's: :attr:`text` with what still waits for a person beside it."""
        return self.most.fraction(self.points, language) if self.points is not None and self.most else self.text


@dataclass
class Member:
    student: str
    name: str = ""
    email: str = ""
    section: str = ""
    on_roster: bool = True
    cells: dict[str, Cell] = field(default_factory=dict)


def _late(result: dict[str, Any]) -> bool:
    late = result.get("late")
    return isinstance(late, dict) and late.get("late") is True


def class_list(state: Service) -> list[Member]:
    """Every student of the roster (and anyone else with a submission) with a cell per assignment."""
    course = state.course
    assignments = [a.id for a in course.assignments]
    members = {r.student: Member(r.student, r.name, r.email, r.section) for r in people.people(state.engine)}
    standing = Standing(state.engine, course)
    best = course.service.counts == "best"
    for r in reversed(repository.latest_rows(state.engine, limit=None)):          # oldest first
        if r.assignment not in assignments:
            continue
        member = members.get(r.student)
        if member is None:
            member = members[r.student] = Member(r.student, on_roster=False)
        cell = member.cells.setdefault(r.assignment, Cell())
        cell.submissions += 1
        if r.result is None or r.state != "done":
            if cell.points is None:
                cell.state = "waiting"
            continue
        now = standing.result(r.result)
        points = float(now.get("points") or 0.0)
        if best and cell.points is not None and cell.points > points:
            continue
        cell.points, cell.most = points, maximum_of(course, now)
        cell.state = "late" if _late(now) else "graded"
    for member in members.values():
        for a in assignments:
            member.cells.setdefault(a, Cell())
    return sorted(members.values(), key=lambda m: (not m.on_roster, m.student))


def chosen(members: list[Member], assignment: str | None, wanted: str | None) -> list[Member]:
    """The members whose state on ``assignment`` is ``wanted`` (every member where either is None)."""
    if not assignment or not wanted:
        return members
    return [m for m in members if m.cells[assignment].state == wanted]


def class_csv(members: list[Member], assignments: list[str]) -> str:
    """student, name, email, section, on_roster, then per assignment its state and points."""
    header = ["student", "name", "email", "section", "on_roster",
              *[f"{a} {what}" for a in assignments for what in ("state", "points")]]
    return csv_rows([header], [[m.student, m.name, m.email, m.section, "yes" if m.on_roster else "no",
                                *[v for a in assignments for v in (m.cells[a].state, m.cells[a].text)]]
                               for m in members])
