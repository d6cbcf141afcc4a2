"""A class of two whose assignment has one maximum: automatic points and a written answer, on time and late.
:data:`COURSE` is this course with 02_qkv_attention (:data:`QKV`) due in the past, in a zone of its own, 10% off per
started day late; :data:`FULL` is 02's maximum (:func:`autograder.course.written.maximum`: its exercises' points and
its written question's). :func:`worker_result` is a student's graded result as the worker stores it (full automatic
points, the written answer waiting, the late policy applied); :func:`served_class` runs the service for COURSE on
uvicorn with ada's (on time) and ben's (late) results stored and, if asked, their written answers marked by a TA.
tests/features/test_maximum.py walks every page of it, tests/service/test_app.py its submissions' listing and verdicts.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any

from served import serving, student_token
from autograder.core.messages import say
from autograder.course.config import load_course
from autograder.course.late_policy import LatePolicy
from autograder.course.written import answer_sha, answers, maximum
from autograder.grading.deadlines import Deadlines, submitted_json
from autograder.grading.times import SubmittedAt
from autograder.service import db, history, marks, tokens
from autograder.service import queue as Q
from autograder.service.app import create_app

BASE = load_course()
QKV_ID = "02_qkv_attention"
#: 02 due in the past (every page then says what handing in late costs), 10% off per started day, in a zone of its own.
COURSE = BASE.model_copy(update={"timezone": "Asia/Shanghai", "assignments": [
    a.model_copy(update={"due": "2026-01-10T23:59:00+08:00", "late": LatePolicy(kind="per_day", percent=10)})
    if a.id == QKV_ID else a for a in BASE.assignments]})
QKV = COURSE.assignment(QKV_ID)
FULL = maximum(QKV).points                      # 12: 10 automatic, 2 written
ANSWER = {"ada": "Var(q.k) = d_k: divide by sqrt(d_k)", "ben": "softmax saturates"}
#: When each hands in: ada on time, ben half a day late (one started day: 10% of the maximum).
RECEIVED = {"ada": dt.datetime(2026, 1, 10, 12, 0, tzinfo=dt.timezone.utc),
            "ben": dt.datetime(2026, 1, 11, 4, 0, tzinfo=dt.timezone.utc)}


def worker_result(student: str) -> dict[str, Any]:
    """A graded result of 02 as the worker stores it: full automatic points, the written answer waiting, the late
    policy applied (the worker's own step)."""
    exercises = [{"exercise": e.id, "function": e.function, "points": float(e.points), "max_points": float(e.points),
                  "status": "passed", "checks": []} for e in QKV.exercises]
    nb = {"cells": [{"cell_type": "markdown", "source": ANSWER[student],
                     "metadata": {"nbgrader": {"grade_id": "q2_Q1", "grade": True, "solution": True}}}]}
    result = {"student": student, "assignment": QKV.id, "sha256": f"nb-{student}", "status": "graded",
              "points": QKV.points, "max_points": QKV.points, "exercises": exercises,
              "questions": answers(nb, QKV.questions),
              "notes_msg": [dict(zip(("zh", "en"), say("submission.written_pending", questions="2.Q1", points="2")))]}
    return Deadlines.load(COURSE).settle(result, submitted_json(SubmittedAt(RECEIVED[student], "the service")))


@contextlib.contextmanager
def served_class(tmp_path, graded: bool):
    """The service for COURSE with ada's and ben's 02 graded; with ``graded`` a TA has marked both written answers
    (ada full marks, ben one of two), else both wait: (app, base URL, engine, tokens of ada, ben and prof, their
    submissions' numbers)."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    who = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
           "prof": tokens.issue(engine, "prof", role="instructor")}
    subs = {}
    for student in ("ada", "ben"):
        notebook = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
        sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb", data=notebook,
                           received_at=RECEIVED[student])
        assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", worker_result(student))
        history.note(engine, COURSE, [(student, QKV.id)], why="graded", who=history.WORKER)
        subs[student] = sub
    if graded:
        for student, ticked in (("ada", ["variance", "saturation"]), ("ben", ["saturation"])):
            marks.save_mark(engine, COURSE, student=student, assignment=QKV.id, question="2.Q1",
                            answer_sha=answer_sha(ANSWER[student]), rubric=ticked, comment="", who="ta", version=0)
            history.note(engine, COURSE, [(student, QKV.id)], why="manual", who="ta")
    try:
        app = create_app(engine, COURSE)
        with serving(app) as url:
            yield app, url, engine, who, subs
    finally:
        engine.dispose()
