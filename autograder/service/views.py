"""What a caller sees of a stored result: everything for staff; for a student what course.yml's
``service.before_due`` lets them see before the due date (their own, an extension included), and
never the grader's bookkeeping."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from autograder.service.tokens import Caller

if TYPE_CHECKING:
    from autograder.course.config import Course


#: What a student never sees of a result, whatever the policy: the grader's own bookkeeping.
_INTERNAL = ("timing", "traceback", "grader", "isolation", "evidence", "origin", "retry")


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
