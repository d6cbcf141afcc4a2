"""The JSON API answers with response models: the OpenAPI schema names each answer's schema, the verdict's typed from
the result model (:mod:`autograder.reports.model`), and what the route sends of a verdict is what the caller's view
holds (:func:`autograder.service.views.policy_view`): no field the view hid added back, none it kept dropped."""
from __future__ import annotations

import datetime as dt
import json

import httpx
import pytest
from fastapi.routing import APIRoute

from served import serving, student_token
from autograder.course.config import load_course
from autograder.course.written import answer_sha, answers
from autograder.reports import model
from autograder.service import db, marks, repository, tokens
from autograder.service import queue as Q
from autograder.service.app import app_routes, create_app
from autograder.service.standing import Standing
from autograder.service.tokens import Caller
from autograder.service.views import CheckShown, ExerciseShown, Verdict, policy_view

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
ANSWER = "The softmax saturates: the variance of the scores grows with the key's size."
ADA, TEACHER = Caller("student", "ada"), Caller("instructor", "teacher")


@pytest.fixture(scope="module")
def app():
    engine = db.engine_for("sqlite://")         # (nothing is queried: the app is only built)
    yield create_app(engine, COURSE)
    engine.dispose()


def test_every_json_route_names_its_answer_schema(app):
    """Every route of the API's schema (the routes outside it are pages, forms, downloads and the LTI's own) has a
    response model, and its answer names that model's schema."""
    schema = app.openapi()
    routes = [r for r in app_routes(app) if isinstance(r, APIRoute) and r.include_in_schema]
    assert len(routes) >= 3 and all(r.response_model is not None for r in routes), \
        [r.path for r in routes if r.response_model is None]
    components = schema["components"]["schemas"]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            ok = [status for status in op["responses"] if status.startswith("2")]
            assert len(ok) == 1, (method, path)
            answer = op["responses"][ok[0]]["content"]["application/json"]["schema"]
            assert answer.get("$ref", "").startswith("#/components/schemas/"), (method, path, answer)
            assert answer["$ref"].rsplit("/", 1)[-1] in components


def _ref(spec: dict) -> str:
    """The model a property's schema names (``X``, ``X | None``, ``list[X]``)."""
    for one in [spec, *spec.get("anyOf", ())]:
        if "$ref" in one:
            return one["$ref"].rsplit("/", 1)[-1]
        if one.get("type") == "array":
            return _ref(one["items"])
    return ""


def test_the_verdict_schema_is_typed_from_the_result_model(app):
    components = app.openapi()["components"]["schemas"]
    assert _ref(components["SubmissionState"]["properties"]["result"]) == "Verdict"
    verdict = components["Verdict"]
    props = verdict["properties"]
    assert verdict.get("additionalProperties", True) is True        # a newer kit's fields still pass
    assert {"points", "raw_points", "max_points", "status", "late", "message", "exercises", "questions",
            "assignment"} <= set(props)
    assert props["points"]["type"] == "number" and verdict["required"] == ["status"]
    assert _ref(props["late"]) == "Late" and _ref(props["message"]) == "Text"
    assert _ref(props["exercises"]) == "ExerciseShown" and _ref(props["questions"]) == "QuestionRecord"
    exercise = components["ExerciseShown"]["properties"]
    assert _ref(exercise["checks"]) == "CheckShown" and _ref(exercise["stand_ins"]) == "StandIn"
    assert _ref(exercise["adjusted"]) == "Adjusted"
    check = components["CheckShown"]
    assert _ref(check["properties"]["title"]) == "Text" and check["properties"]["passed"]["type"] == "boolean"
    assert {"exercise", "kind"}.isdisjoint(check["required"])      # a student's view leaves them out
    late = components["Late"]["properties"]
    assert late["penalty"]["type"] == "number" and late["extended"]["type"] == "boolean"


@pytest.mark.parametrize(("shown", "record"), [(Verdict, model.Result), (ExerciseShown, model.ExerciseRecord),
                                               (CheckShown, model.CheckRecord)])
def test_the_shown_models_are_the_result_models_own(shown, record):
    """Each is its record, the fields a student's view leaves out optional: a field the result model gains is the
    API's too."""
    assert issubclass(shown, record) and set(record.model_fields) <= set(shown.model_fields)


def _stored(student: str) -> dict:
    """A graded result of 02 as the worker stores it: every section the result model has, the grader's bookkeeping
    included."""
    exercises = [{"exercise": e.id, "function": e.function, "points": float(e.points), "max_points": float(e.points),
                  "status": "passed", "seconds": 0.5,
                  "checks": [{"exercise": e.id, "check": f"{e.id}-public", "audience": "public", "kind": "shape",
                              "title": {"zh": "形状", "en": "shape"}, "status": "passed", "passed": True,
                              "points": float(e.points), "max_points": float(e.points),
                              "message": {"zh": "对", "en": "right"}, "seconds": 0.1},
                             {"exercise": e.id, "check": f"{e.id}-hidden", "audience": "hidden", "kind": "numeric",
                              "title": {"zh": "数值", "en": "values"}, "status": "failed", "passed": False,
                              "points": 0.0, "max_points": 0.0, "message": {"zh": "输入 -2.06", "en": "input -2.06"},
                              "mistake": "no_scale", "mistake_message": {"zh": "没缩放", "en": "unscaled"}}]}
                 for e in QKV.exercises]
    exercises[1]["stand_ins"] = [{"exercise": "2.1", "function": "project_qkv"}]
    nb = {"cells": [{"cell_type": "markdown", "source": ANSWER,
                     "metadata": {"nbgrader": {"grade_id": "q2_Q1", "grade": True, "solution": True}}}]}
    result = {"schema": 1, "key": f"{student}__{QKV.id}", "student": student, "assignment": QKV.id,
              "origin": "/srv/submissions", "source": f"{student}/{QKV.id}.ipynb", "sha256": "nb-sha",
              "grader": "g" * 12, "device": "cpu", "isolation": {"mode": "bwrap", "layers": ["seccomp"]},
              "points": 10.0, "raw_points": 10.0, "max_points": QKV.points,
              "submitted": {"when": "2020-01-02T00:00:00+00:00", "source": "service"},
              "exercises": exercises, "questions": answers(nb, QKV.questions),
              "cells": [{"index": 1, "status": "ok", "seconds": 0.2}], "notes": ["a note"],
              "notes_msg": [{"zh": "注", "en": "a note"}], "evidence": {"run": "abc"}, "status": "graded",
              "message": {"zh": "好", "en": "good"}, "timing": {"seconds": 3.0},
              "graded_at": "2020-01-02T00:01:00+00:00", "traceback": None, "retry": False, "newer_field": {"x": 1}}
    model.parse(result)                 # as finalize checked it before it was stored
    return result


def _past(course):
    """``course`` with 02 due in 2020 (late by a day: the late section, and a student sees everything)."""
    return course.model_copy(update={
        "assignments": [a.model_copy(update={"due": "2020-01-01T00:00:00+00:00"}) if a.id == QKV.id else a
                        for a in course.assignments]})


def _policy(before_due: str):
    return COURSE.model_copy(update={"service": COURSE.service.model_copy(update={"before_due": before_due})})


@pytest.mark.parametrize("course", [_policy("titles"), _policy("score"), _policy("everything"),
                                    _past(_policy("score"))], ids=["titles", "score", "everything", "after-due"])
def test_the_verdict_sent_is_the_callers_view_exactly(tmp_path, course):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    try:
        ada, teacher = student_token(engine, "ada"), tokens.issue(engine, "teacher", role="instructor")
        sub, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}",
                           received_at=dt.datetime(2020, 1, 2, tzinfo=dt.timezone.utc))
        assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", _stored("ada"))
        # The staff's marks: an exercise's points adjusted, the written answer graded.
        marks.save_adjustment(engine, course, student="ada", assignment=QKV.id, sha256="nb-sha", exercise="2.2",
                              points=1.0, reason="half right", who="teacher", version=0)
        marks.save_mark(engine, course, student="ada", assignment=QKV.id, question=QKV.questions[0].id,
                        answer_sha=answer_sha(ANSWER), rubric=["variance"], comment="good", who="teacher",
                        version=0)
        standing = Standing(engine, course)
        now = standing.result(repository.stored_result(engine, sub))
        with serving(create_app(engine, course)) as url, httpx.Client(base_url=url, timeout=30) as client:
            sent = {caller.role: client.get(f"/api/submissions/{sub}", headers={"Authorization": f"Bearer {token}"})
                    for token, caller in ((ada, ADA), (teacher, TEACHER))}
    finally:
        engine.dispose()
    for caller in (ADA, TEACHER):
        assert sent[caller.role].status_code == 200, sent[caller.role].text
        view = policy_view(now, caller, course, QKV.id, standing.due("ada", QKV.id))
        got = sent[caller.role].json()["result"]
        assert got == json.loads(json.dumps(view)), (caller, got)
    staff, student = (sent[c.role].json()["result"] for c in (TEACHER, ADA))
    assert staff["timing"] == {"seconds": 3.0} and staff["newer_field"] == {"x": 1} and staff["schema"] == 1
    assert staff["exercises"][1]["adjusted"]["from"] == 2.0 and staff["exercises"][1]["points"] == 1.0
    assert staff["questions"][0]["points"] == 1.0 and staff["questions"][0]["answer"] == ANSWER
    assert "timing" not in student and "origin" not in student
    before_due = course.service.before_due if "late" not in staff else "everything"
    assert student.get("late") == staff.get("late") and ("key" in student) == (before_due == "everything")
    if before_due == "titles":
        hidden = student["exercises"][0]["checks"][1]
        assert "message" not in hidden and "kind" not in hidden and "function" not in student["exercises"][0]
        assert student["questions"][0] == {"question": QKV.questions[0].id, "max_points": 2.0, "points": 1.0,
                                           "status": "graded", "rubric": ["variance"], "comment": "good"}
    if before_due == "score":
        assert student["exercises"] == [] and "message" not in student
