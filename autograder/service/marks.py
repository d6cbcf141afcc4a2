"""Hand grading: a person's marks of written answers and adjustments of automatic scores, and how they join the
score that counts.

A mark belongs to one student's answer to one question, by the answer's text (its sha256): a later submission
with the same answer keeps it, a changed answer waits for a person again. An adjustment belongs to one exercise of
one notebook (its sha256) and carries the reason the student reads. Neither touches a stored result:
:func:`apply` folds them into a copy of it, where :class:`autograder.service.standing.Standing` applies the late
policy, so every view (the student's page, the dashboard, the exports) shows the same combined score.

Two graders on the same answer: each save names the version it started from (``version``: 0 for a new mark); a
save from a version that is no longer the current one is refused (:class:`Conflict`) and nothing is overwritten.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from autograder.core.points import total as points_total
from autograder.service.db import writing
from autograder.service.tables import Adjustment, Mark, utcnow

if TYPE_CHECKING:
    from autograder.course.config import Course

#: The longest comment, reason or review message kept (characters).
TEXT_CHARS = 2000


class Conflict(Exception):
    """Someone saved the same mark or adjustment after this form was opened: nothing was written."""

    def __init__(self, current: Any):
        super().__init__("changed meanwhile")
        self.current = current


@dataclass
class Book:
    """Every mark and adjustment, read once (per request, like the deadlines)."""

    marks: dict[tuple[str, str, str, str], Any] = field(default_factory=dict)
    adjustments: dict[tuple[str, str, str, str], Any] = field(default_factory=dict)

    @classmethod
    def read(cls, engine: Engine) -> Book:
        book = cls()
        with engine.connect() as conn:
            for m in conn.execute(select(Mark)).all():
                book.marks[(m.student, m.assignment, m.question, m.answer_sha)] = m
            for a in conn.execute(select(Adjustment)).all():
                book.adjustments[(a.student, a.assignment, a.sha256, a.exercise)] = a
        return book

    def mark(self, student: str, assignment: str, question: str, sha: str) -> Any:
        return self.marks.get((student, assignment, question, sha))

    def adjustment(self, student: str, assignment: str, sha: str, exercise: str) -> Any:
        return self.adjustments.get((student, assignment, sha, exercise))


def apply(result: dict[str, Any], book: Book) -> dict[str, Any]:
    """``result`` (a copy the caller owns) with its marks and adjustments: each written answer's points, rubric and
    comment; each adjusted exercise's points, with ``adjusted`` (the automatic points, the reason); ``raw_points``
    made again from the parts (a question no one graded yet adds nothing). The maximum is not this function's:
    it is the assignment's, graded or not (:func:`autograder.course.written.maximum`, which the late policy's
    :meth:`~autograder.grading.deadlines.Deadlines.settle` writes). A result with nothing to apply is returned
    unchanged."""
    if not str(result.get("status") or "").startswith("graded"):
        return result
    student, assignment, sha = str(result.get("student") or ""), str(result.get("assignment") or ""), \
        str(result.get("sha256") or "")
    changed = False
    for ex in result.get("exercises") or ():
        adj = book.adjustment(student, assignment, sha, str(ex.get("exercise")))
        if adj is not None:
            ex["adjusted"] = {"from": ex.get("points"), "reason": adj.reason, "by": adj.who, "at": adj.at.isoformat()}
            ex["points"] = max(0.0, min(float(adj.points), float(ex.get("max_points") or 0.0)))
            changed = True
    graded = []
    for q in result.get("questions") or ():
        mark = book.mark(student, assignment, str(q.get("question")), str(q.get("sha256")))
        if mark is not None:
            q.update(points=float(mark.points), status="graded", rubric=list(mark.rubric or ()), comment=mark.comment,
                     graded_by=mark.graded_by)
            graded.append(q)
            changed = True
    if not changed:
        return result
    exercises = result.get("exercises") or ()
    result["raw_points"] = points_total([*(float(e.get("points") or 0.0) for e in exercises),
                                         *(float(q["points"]) for q in graded)])
    result["points"] = result["raw_points"]
    return result


# -- writing ---------------------------------------------------------------------------------------------
def save_mark(engine: Engine, course: Course, *, student: str, assignment: str, question: str, answer_sha: str,
              rubric: list[str], comment: str, who: str, version: int, points: float | None = None,
              also: Callable[[Connection, Any], object] | None = None) -> Any:
    """Save a mark (``version``: the one the grader started from, 0 for none); the rubric's items give the points
    unless ``points`` is given (a review's new score). :class:`Conflict` when another save came first; ValueError
    for a rubric item or question the course does not have. ``also``: called with the transaction and the mark saved,
    before it commits (the student's mail of it: :func:`autograder.service.mail.on_mark`)."""
    q = course.assignment(assignment).question(question)
    if q is None:
        raise ValueError(f"assignment {assignment} has no question {question!r}")
    unknown = [r for r in rubric if q.item(r) is None]
    if unknown:
        raise ValueError(f"question {question} has no rubric item {unknown[0]!r}")
    given = q.score(rubric) if points is None else max(0.0, min(float(points), float(q.points)))
    values = {"points": given, "rubric": list(dict.fromkeys(rubric)), "comment": comment[:TEXT_CHARS],
              "graded_by": who[:200], "graded_at": utcnow()}
    key = (Mark.student == student, Mark.assignment == assignment, Mark.question == question,
           Mark.answer_sha == answer_sha)
    return _save(engine, Mark, key, version, values,
                 {"student": student, "assignment": assignment, "question": question, "answer_sha": answer_sha}, also)


def save_adjustment(engine: Engine, course: Course, *, student: str, assignment: str, sha256: str, exercise: str,
                    points: float, reason: str, who: str, version: int) -> Any:
    """Save an adjustment of an exercise's automatic points; the reason is required (the student reads it)."""
    _a, ex = course.exercise(exercise)
    if _a.id != assignment:
        raise ValueError(f"exercise {exercise} is not of assignment {assignment}")
    if not reason.strip():
        raise ValueError("an adjustment needs a reason: the student reads it")
    values = {"points": max(0.0, min(float(points), float(ex.points))), "reason": reason.strip()[:TEXT_CHARS],
              "who": who[:200], "at": utcnow()}
    key = (Adjustment.student == student, Adjustment.assignment == assignment, Adjustment.sha256 == sha256,
           Adjustment.exercise == exercise)
    return _save(engine, Adjustment, key, version, values,
                 {"student": student, "assignment": assignment, "sha256": sha256, "exercise": exercise})


def _save(engine: Engine, table: Any, key: tuple[Any, ...], version: int, values: dict[str, Any],
          identity: dict[str, Any], also: Callable[[Connection, Any], object] | None = None) -> Any:
    """Insert (``version`` 0) or update the row at ``version``; the row as saved. Compare-and-set: the UPDATE
    names the version, so two saves from the same version cannot both succeed."""
    try:
        with writing(engine).begin() as conn:
            current = conn.execute(select(table).where(*key)).first()
            if current is None and version == 0:
                conn.execute(table.__table__.insert().values(**identity, **values, version=1))
            elif current is None or current.version != version:
                raise Conflict(current)
            else:
                done = conn.execute(table.__table__.update().where(*key, table.version == version)
                                    .values(**values, version=version + 1))
                if done.rowcount != 1:
                    raise Conflict(current)
            saved = conn.execute(select(table).where(*key)).one()
            if also is not None:
                also(conn, saved)
            return saved
    except IntegrityError:           # a new mark inserted by someone else at the same moment
        with engine.connect() as conn:
            raise Conflict(conn.execute(select(table).where(*key)).first()) from None


def earlier_comments(engine: Engine, question: str, limit: int = 30) -> list[str]:
    """The comments given on a question so far, the most used first: a grader picks one again."""
    counts: dict[str, int] = {}
    with engine.connect() as conn:
        for (text,) in conn.execute(select(Mark.comment).where(Mark.question == question)):
            if text and text.strip():
                counts[text.strip()] = counts.get(text.strip(), 0) + 1
    return [t for t, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]
