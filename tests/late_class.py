"""A class with a late policy, and its results stored as the service's worker stores them.
:data:`LATE_COURSE` is this course with 02_qkv_attention due 2026-01-10 23:59 UTC and 50% off per started day late
(01_rnn_decay, :data:`RNN`, has no due date). :func:`late_result` stores a submission of 02 received half a day
late, graded in full and settled (50% off); :func:`grade` stores a submission of any assignment, claims it, grades
it with the points given (received :data:`ON_TIME` unless told) and notes the counted score in the score history,
as the worker does; :func:`complete` is its grading step alone, and :func:`regrade` grades a stored submission of 02
again. The LTI tests (tests/service/lti/), the real-class tests and the instructor tools' tests share them.
"""
from __future__ import annotations

import datetime as dt
import json

from support import make_samples
from autograder.course.config import load_course
from autograder.course.late_policy import LatePolicy
from autograder.grading.deadlines import Deadlines, submitted_json
from autograder.grading.times import SubmittedAt
from autograder.service import history, tables
from autograder.service import queue as Q

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
LATE_COURSE = COURSE.model_copy(update={"assignments": [
    a.model_copy(update={"due": "2026-01-10T23:59:00+00:00", "late": LatePolicy(kind="per_day", percent=50)})
    if a.id == QKV.id else a for a in COURSE.assignments]})
RNN = LATE_COURSE.assignments[0]
UTC = dt.timezone.utc
ON_TIME = dt.datetime(2026, 1, 9, 12, 0, tzinfo=UTC)          # QKV is due 2026-01-10 23:59 (50% off a day late)


def late_result(engine, student: str) -> int:
    """A submission received half a day after 02's due date (one started day: 50% off), graded 8/8 and settled
    as the worker settles it."""
    received = dt.datetime(2026, 1, 11, 12, 0, tzinfo=UTC)
    sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb",
                       data=json.dumps(make_samples.submission(QKV, solved="all")).encode(), received_at=received)
    result = {"student": student, "assignment": QKV.id, "points": QKV.points, "max_points": QKV.points,
              "status": "graded", "exercises": []}
    Deadlines.load(LATE_COURSE).settle(result, submitted_json(SubmittedAt(received, "the service's receipt")))
    assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", result)
    return sub


def grade(engine, student: str, assignment, points: float, received: dt.datetime = ON_TIME) -> int:
    """A submission stored, claimed and graded through the queue, its counted score noted as the worker notes it."""
    sub, job = Q.store(engine, student=student, assignment=assignment.id, filename="a.ipynb", data=b"{}",
                       received_at=received)
    claimed = Q.claim(engine, "w", 60, now=tables.utcnow() + dt.timedelta(days=1))
    assert claimed is not None and claimed.job == job
    complete(engine, claimed, assignment, points, received)
    history.note(engine, LATE_COURSE, [(student, assignment.id)], why="graded", who=history.WORKER)
    return sub


def complete(engine, claimed, assignment, points: float, received: dt.datetime) -> None:
    """The claimed job graded ``points`` and settled by LATE_COURSE's deadlines, as the worker completes it."""
    result = {"student": claimed.student, "assignment": assignment.id, "points": points,
              "max_points": assignment.points, "status": "graded", "exercises": []}
    Deadlines.load(LATE_COURSE).settle(result, submitted_json(SubmittedAt(received, "the service's receipt")))
    assert Q.complete(engine, claimed.job, "w", result)


def regrade(engine, sub: int, student: str, points: float) -> None:
    """02's submission ``sub`` requeued and graded again with ``points``, the change noted as a regrade."""
    Q.requeue(engine, [sub])
    complete(engine, Q.claim(engine, "w", 60, now=tables.utcnow() + dt.timedelta(days=3)), QKV, points, ON_TIME)
    history.note(engine, LATE_COURSE, [(student, QKV.id)], why="regrade", who=history.WORKER)
