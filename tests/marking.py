"""Written answers waiting for a grader: the hand-grading tests' results and their running site.
:func:`answer_result` is a graded result of 02_qkv_attention as the grader writes it (its exercises' points and the
written answer 2.Q1, :data:`QUESTION`, waiting for a person); :func:`store_answer` stores one as a worker does (the
queue's job claimed and completed, the counted score noted in the history); :func:`grading_site` runs the service
for a course on uvicorn over a new SQLite database holding ada's and ben's answers, with tokens for them and for two
TAs (:func:`ta_token`). tests/service/test_marks.py and tests/features/test_hand_grading_browser.py share them.
"""
from __future__ import annotations

import contextlib
import json

from served import serving, student_token
from autograder.course.config import load_course
from autograder.course.written import answers
from autograder.service import db, history, tokens
from autograder.service import queue as Q
from autograder.service.app import create_app

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
QUESTION = QKV.questions[0]


def answer_result(student: str, answer: str, *, points_24: float = 3.0, sha: str = "nb-sha") -> dict:
    """A graded result of 02 as the grader writes it: four exercises and the written answer, waiting."""
    exercises = [{"exercise": e.id, "function": e.function, "points": float(e.points) if e.id != "2.4" else points_24,
                  "max_points": float(e.points), "status": "passed", "checks": []} for e in QKV.exercises]
    nb = {"cells": [{"cell_type": "markdown", "source": answer,
                     "metadata": {"nbgrader": {"grade_id": "q2_Q1", "grade": True, "solution": True}}}]}
    return {"student": student, "assignment": QKV.id, "sha256": sha, "status": "graded",
            "points": sum(e["points"] for e in exercises), "max_points": QKV.points, "exercises": exercises,
            "questions": answers(nb, QKV.questions)}


def store_answer(engine, student: str, answer: str, **kw) -> int:
    """``student``'s submission of 02 with ``answer`` stored and graded as a worker does (``kw``: answer_result's);
    its number."""
    sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb",
                       data=json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode())
    assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", answer_result(student, answer, **kw))
    history.note(engine, COURSE, [(student, QKV.id)], why="graded", who=history.WORKER)
    return sub


def ta_token(engine, name: str) -> str:
    """A new token for the TA ``name``."""
    return tokens.issue(engine, name, role="ta")


@contextlib.contextmanager
def grading_site(tmp_path, course=COURSE):
    """The service for ``course`` on uvicorn over a new database in ``tmp_path``, ada's answer (with HTML in it) and
    ben's (empty) stored: (base URL, engine, tokens of ada, ben, ta1 and ta2, their submissions' numbers)."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    who = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
           "ta1": ta_token(engine, "ta1"), "ta2": ta_token(engine, "ta2")}
    subs = {"ada": store_answer(engine, "ada", "<script>alert(1)</script> Var = d_k"),
            "ben": store_answer(engine, "ben", "")}
    try:
        with serving(create_app(engine, course)) as url:
            yield url, engine, who, subs
    finally:
        engine.dispose()
