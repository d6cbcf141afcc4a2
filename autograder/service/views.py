"""What a caller sees of a stored result: everything for staff; for a student what course.yml's
``service.before_due`` lets them see before the due date (their own, an extension included), and
never the grader's bookkeeping. :class:`Verdict` is what the API answers with: the result model's types
(:mod:`autograder.reports.model`), with the fields a student's view leaves out made optional."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from autograder.reports.model import CheckRecord, ExerciseRecord, Result
from autograder.service.tokens import Caller

if TYPE_CHECKING:
    from autograder.course.config import Course


#: What a student never sees of a result, whatever the policy: the grader's own bookkeeping.
_INTERNAL = ("timing", "traceback", "grader", "isolation", "evidence", "origin", "retry")


# -- what the API answers with ----------------------------------------------------------------------------------------
# Each is the result model's own (its fields, types and descriptions), with what a student's view leaves out made
# optional (each `type: ignore[assignment]` below: a field the record requires). The route answers only the fields the
# view set (response_model_exclude_unset): a field the view left out is not added back, with its default, by the model.
class CheckShown(CheckRecord):
    """A check's record: a student sees its title, status and points, and only a public check's message, before the
    due date (as course.yml's service.before_due says); the staff, and the student after it, all of it."""

    exercise: str | None = None  # type: ignore[assignment]  # (a student's view leaves it out)
    kind: str | None = Field(None, description=(  # type: ignore[assignment]
        "shape, property, fact, numeric, gradient, edge, forbidden (not in a student's view before the due date)"))


class Adjusted(BaseModel):
    """The staff's adjustment of an exercise's automatic points (autograder.service.marks.apply)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: float | None = Field(alias="from", description="the automatic points")
    reason: str = Field(description="why, which the student reads")
    by: str = Field(description="who adjusted them")
    at: str = Field(description="when, ISO 8601")


class ExerciseShown(ExerciseRecord):
    """An exercise's record as its caller sees it (its checks: CheckShown), with the staff's adjustment of its points
    where there is one."""

    function: str | None = None  # type: ignore[assignment]  # (a student's view leaves it out)
    checks: list[CheckShown] = Field(default_factory=list)  # type: ignore[assignment]
    adjusted: Adjusted | None = Field(None, description="the staff's adjustment of its automatic points")


class Verdict(Result):
    """A graded result as its caller may see it (autograder.service.views.policy_view): the staff read all of it; a
    student, before the due date, what course.yml's service.before_due lets them (``score``: the points, the status
    and the late section, no exercise; ``titles``: the exercises' points, each check's title and status, a public
    check's message, the written answers' marks; ``everything``: all of it but the grader's bookkeeping), and after
    it all of it but the grader's bookkeeping (origin, grader, isolation, evidence, timing, traceback, retry). A
    field the caller's view leaves out is not in the answer."""

    key: str | None = Field(None, description=(  # type: ignore[assignment]
        "the file-name stem of its outputs: <student>__<assignment> (not in a student's view before the due date)"))
    max_points: float | None = Field(None, description=(  # type: ignore[assignment]
        "the assignment's maximum (autograder.course.written.maximum): its exercises' points and its written answers', "
        "graded or not"))
    exercises: list[ExerciseShown] = Field(default_factory=list)  # type: ignore[assignment]


def policy_view(result: dict[str, Any], who: Caller, course: Course, assignment: str,
                due: Any = "course") -> dict[str, Any]:
    """A result as course.yml's service.before_due lets the caller see it (an instructor: all of it).

    ``due`` is the student's own due date where the caller knows it (an extension moves it: a student
    still working on an extension does not see the hidden checks' messages before it ends); by default
    the course's."""
    if who.staff:
        return result
    if due == "course":
        due = course.deadline_of(assignment)[0] if assignment in {a.id for a in course.assignments} else None
    after_due = due is not None and dt.datetime.now(dt.timezone.utc) > due
    shown = "everything" if after_due else course.service.before_due
    if shown == "everything":
        return {k: v for k, v in result.items() if k not in _INTERNAL}
    if shown == "score":
        return {"points": result.get("points"), "raw_points": result.get("raw_points"),
                "max_points": result.get("max_points"), "status": result.get("status"), "late": result.get("late"),
                "exercises": []}
    return view(result, who)


def view(result: dict[str, Any], who: Caller) -> dict[str, Any]:
    """What a caller sees of a result: an instructor everything; a student the score, each check's title
    and pass/fail, and the public checks' messages (hidden checks' messages stay the instructor's)."""
    if who.staff:
        return result
    exercises = []
    for ex in result.get("exercises") or []:
        checks = [{"check": c.get("check"), "audience": c.get("audience"), "title": c.get("title"),
                   "passed": c.get("passed"), "status": c.get("status"), "points": c.get("points"),
                   "max_points": c.get("max_points"),
                   **({"message": c.get("message")} if c.get("audience") == "public" else {})}
                  for c in ex.get("checks") or []]
        exercises.append({"exercise": ex.get("exercise"), "points": ex.get("points"),
                          "max_points": ex.get("max_points"), "status": ex.get("status"), "checks": checks,
                          **({"adjusted": ex["adjusted"]} if ex.get("adjusted") else {})})
    # A person's marks of the written answers (points, rubric, comment) are theirs to read at once.
    questions = [{k: q.get(k) for k in ("question", "max_points", "points", "status", "rubric", "comment")}
                 for q in result.get("questions") or () if isinstance(q, dict)]
    return {"points": result.get("points"), "raw_points": result.get("raw_points"),
            "max_points": result.get("max_points"), "status": result.get("status"), "late": result.get("late"),
            "message": result.get("message"), "exercises": exercises, "assignment": result.get("assignment"),
            **({"questions": questions} if questions else {})}
