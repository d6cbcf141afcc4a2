"""The history of every score that counts: each change of a student's counted score on an assignment, with the
old and the new points, why (a first grade, a regrade, an extension, a changed late policy), who and when.

The rule is one comparison, made after every change that can move a counted score: the score that counts now
(:func:`counted_now`: the same rule and late policy as every view, :mod:`autograder.service.export`) against the
last one recorded; a difference is a new row. Each comparison holds its student's lock (PostgreSQL's advisory
lock; SQLite lets one writer in at a time), so two changes at once record two steps, never the same step twice.
A student asking "why did my grade change?" reads the answer on their page; the staff read every student's, and
``serve export`` writes them all to score-history.csv.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.core.points import hundredths
from autograder.service import queue as Q
from autograder.service.db import writing
from autograder.service.tables import Result, ScoreChange, Submission, utcnow
from autograder.service.standing import Standing
from autograder.core.text import csv_rows
from autograder.course.written import Maximum, maximum_of

if TYPE_CHECKING:
    from autograder.course.config import Course

#: Why a counted score changed. (``manual`` and ``review``: the hand-graded answers and regrade requests to come.)
WHY = ("graded", "regrade", "extension", "late_policy", "manual", "review")
#: Who changed it when no person did: the grading workers, course.yml.
WORKER, COURSE_FILE = "grader", "course.yml"


def pick_counted(rows: Iterable[tuple[int, str, str, float]], counts: str) -> dict[tuple[str, str], tuple[int, float]]:
    """The rule of the result that counts: of (submission, student, assignment, points) rows in submission order,
    per (student, assignment) the latest, or with ``counts="best"`` the highest-scoring (the latest of equal
    ones): (submission, points)."""
    chosen: dict[tuple[str, str], tuple[int, float]] = {}
    for sid, student, assignment, points in rows:
        earlier = chosen.get((student, assignment))
        if counts == "best" and earlier is not None and earlier[1] > float(points or 0.0):
            continue
        chosen[(student, assignment)] = (sid, float(points or 0.0))
    return chosen


def counted_now(session: Session, standing: Standing, counts: str, student: str,
                assignment: str) -> tuple[float | None, Maximum | None, int | None]:
    """(points, maximum, submission) of the result that counts now for ``student`` on ``assignment``, the late
    policy as it is now: the maximum the points are out of, the assignment's (:func:`autograder.course.written.maximum`,
    its written answers' points whether graded or not, with those still waiting); (None, None, None) before any
    result."""
    rows = session.execute(select(Submission.id, Result.result).join(Result, Result.submission_id == Submission.id)
                           .where(Submission.student == student, Submission.assignment == assignment)
                           .order_by(Submission.id)).all()
    settled = {sid: standing.result(result) for sid, result in rows}
    chosen = pick_counted([(sid, student, assignment, float(r.get("points") or 0.0)) for sid, r in settled.items()],
                          counts).get((student, assignment))
    if chosen is None:
        return None, None, None
    sid, points = chosen
    return points, maximum_of(standing.course, settled[sid]), sid


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and hundredths(a) == hundredths(b))


def note(engine: Engine, course: Course, pairs: Iterable[tuple[str, str]], *, why: str, who: str,
         detail: str = "", standing: Standing | None = None) -> int:
    """Compare the counted score of each (student, assignment) with the last one recorded, after a change made
    (``why``, by ``who``); record each difference. How many were recorded."""
    if why not in WHY:
        raise ValueError(f"unknown reason {why!r}")
    standing = standing or Standing(engine, course)
    recorded = 0
    for student, assignment in dict.fromkeys(pairs):
        with Session(writing(engine)) as session, session.begin():
            Q.lock_student(session, f"history:{student}")
            last = session.execute(select(ScoreChange.new_points).where(
                ScoreChange.student == student, ScoreChange.assignment == assignment)
                .order_by(ScoreChange.id.desc()).limit(1)).first()
            old = last.new_points if last is not None else None
            points, most, sid = counted_now(session, standing, course.service.counts, student, assignment)
            if _same(old, points):
                continue
            session.add(ScoreChange(at=utcnow(), student=student, assignment=assignment, old_points=old,
                                    new_points=points, max_points=most.points if most is not None else None,
                                    waiting_points=most.waiting if most is not None else None, why=why,
                                    who=who[:200], submission_id=sid, detail=detail[:500]))
            recorded += 1
    return recorded


def every_pair(engine: Engine) -> list[tuple[str, str]]:
    """Every (student, assignment) with a submission."""
    with engine.connect() as conn:
        return [(r.student, r.assignment) for r in conn.execute(
            select(Submission.student, Submission.assignment).distinct().order_by(Submission.student))]


def settle_all(engine: Engine, course: Course) -> int:
    """Every counted score against its history, as the service starts and when course.yml changed (its due dates
    or late policies): a pair with no history yet is recorded as graded (a result from before the history
    began), a difference elsewhere as the late policy's. How many were recorded."""
    with engine.connect() as conn:
        known = {(r.student, r.assignment) for r in conn.execute(
            select(ScoreChange.student, ScoreChange.assignment).distinct())}
    pairs = every_pair(engine)
    standing = Standing(engine, course)
    return (note(engine, course, [p for p in pairs if p not in known], why="graded", who=WORKER,
                 detail="graded before the history began", standing=standing)
            + note(engine, course, [p for p in pairs if p in known], why="late_policy", who=COURSE_FILE,
                   standing=standing))


def changes(engine: Engine, *, student: str | None = None, limit: int = 10_000) -> Sequence[Any]:
    """The recorded changes, oldest first (one student's where ``student`` is given)."""
    query = select(ScoreChange)
    if student is not None:
        query = query.where(ScoreChange.student == student)
    with engine.connect() as conn:
        return conn.execute(query.order_by(ScoreChange.id).limit(limit)).all()


def history_csv(rows: Sequence[Any]) -> str:
    """The audit CSV: at, student, assignment, old, new, max (the maximum the new score was out of), waiting (of
    it, the written answers' points no person had graded yet), why, who, submission, detail."""
    return csv_rows([["at", "student", "assignment", "old_points", "new_points", "max_points", "waiting_points", "why",
                      "who", "submission", "detail"]],
                    [[r.at.isoformat(), r.student, r.assignment, "" if r.old_points is None else r.old_points,
                      "" if r.new_points is None else r.new_points, "" if r.max_points is None else r.max_points,
                      "" if r.waiting_points is None else r.waiting_points,
                      r.why, r.who, "" if r.submission_id is None else r.submission_id, r.detail] for r in rows])

