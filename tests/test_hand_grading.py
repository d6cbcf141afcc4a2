"""Issue 51: written answers graded by hand with the question's rubric, several graders at once without overwriting
each other, adjustments of an automatic score with a reason the student reads, and the combined score in every view.

The data layer runs on SQLite and PostgreSQL; the pages over HTTP on a real uvicorn server over a real SQLite file.
Results are stored as a worker stores them (``queue.complete``): what is graded here is the hand grading."""
from __future__ import annotations

import contextlib
import json

import pytest

from served import serving, student_token
from test_service_pages import browser, csrf_of, sign_in
from autograder.config import load_course
from autograder.service import audit, db, history, marks
from autograder.service import queue as Q
from autograder.service.app import create_app
from autograder.service.standing import Standing
from autograder.written import answer_sha, answers

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
QUESTION = QKV.questions[0]


def _result(student: str, answer: str, *, points_24: float = 3.0, sha: str = "nb-sha") -> dict:
    """A graded result of 02 as the grader writes it: four exercises and the written answer, waiting."""
    exercises = [{"exercise": e.id, "function": e.function, "points": float(e.points) if e.id != "2.4" else points_24,
                  "max_points": float(e.points), "status": "passed", "checks": []} for e in QKV.exercises]
    nb = {"cells": [{"cell_type": "markdown", "source": answer,
                     "metadata": {"nbgrader": {"grade_id": "q2_Q1", "grade": True, "solution": True}}}]}
    return {"student": student, "assignment": QKV.id, "sha256": sha, "status": "graded",
            "points": sum(e["points"] for e in exercises), "max_points": QKV.points, "exercises": exercises,
            "questions": answers(nb, QKV.questions)}


def _store(engine, student: str, answer: str, **kw) -> int:
    sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb",
                       data=json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode())
    assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", _result(student, answer, **kw))
    history.note(engine, COURSE, [(student, QKV.id)], why="graded", who=history.WORKER)
    return sub


@pytest.fixture
def engine(service_engine):
    return service_engine


# -- the data layer (SQLite and PostgreSQL) -----------------------------------------------------------------------
def test_a_mark_joins_the_score_and_an_ungraded_answer_is_left_out_not_zero(engine):
    _store(engine, "ada", "Var(q.k) = d_k ...")
    before = Standing(engine, COURSE)
    shown = [before.result(r.result) for r in _results(engine)][0]
    # 10 / 12: the question waits, out of the score, in the maximum (issue 66: one maximum, graded or not)
    assert (shown["points"], shown["max_points"]) == (QKV.points, QKV.points + 2)
    assert shown["questions"][0]["points"] is None
    saved = marks.save_mark(engine, COURSE, student="ada", assignment=QKV.id, question=QUESTION.id,
                            answer_sha=answer_sha("Var(q.k) = d_k ..."), rubric=["variance"], comment="half of it",
                            who="ta1", version=0)
    assert (saved.points, saved.version) == (1.0, 1)
    shown = Standing(engine, COURSE).result(_results(engine)[0].result)
    assert (shown["points"], shown["max_points"], shown["raw_points"]) == (QKV.points + 1, QKV.points + 2,
                                                                           QKV.points + 1)
    assert shown["questions"][0] | {"answer": ""} == shown["questions"][0] | {
        "points": 1.0, "status": "graded", "rubric": ["variance"], "comment": "half of it", "graded_by": "ta1",
        "answer": ""}
    # A deduction below zero is held at 0; an unknown item is refused with its name, nothing saved.
    with pytest.raises(ValueError, match="no rubric item 'nope'"):
        marks.save_mark(engine, COURSE, student="ada", assignment=QKV.id, question=QUESTION.id,
                        answer_sha=answer_sha("Var(q.k) = d_k ..."), rubric=["nope"], comment="", who="ta1", version=1)
    again = marks.save_mark(engine, COURSE, student="ada", assignment=QKV.id, question=QUESTION.id,
                            answer_sha=answer_sha("Var(q.k) = d_k ..."), rubric=["wrong_claim"], comment="",
                            who="ta1", version=1)
    assert (again.points, again.version) == (0.0, 2)


def _results(engine):
    from sqlalchemy import select
    with engine.connect() as conn:
        return conn.execute(select(db.Result).order_by(db.Result.submission_id)).all()


def test_two_graders_on_one_answer_the_second_save_is_refused_and_nothing_is_overwritten(engine):
    sha = answer_sha("my answer")
    first = marks.save_mark(engine, COURSE, student="ben", assignment=QKV.id, question=QUESTION.id, answer_sha=sha,
                            rubric=["variance", "saturation"], comment="", who="ta1", version=0)
    with pytest.raises(marks.Conflict) as conflict:       # ta2 opened the answer before ta1 saved: version 0
        marks.save_mark(engine, COURSE, student="ben", assignment=QKV.id, question=QUESTION.id, answer_sha=sha,
                        rubric=[], comment="nothing", who="ta2", version=0)
    assert conflict.value.current.graded_by == "ta1"
    later = marks.save_mark(engine, COURSE, student="ben", assignment=QKV.id, question=QUESTION.id, answer_sha=sha,
                            rubric=["variance"], comment="", who="ta2", version=first.version)
    with pytest.raises(marks.Conflict):                    # ta1 saving again from the version it saw
        marks.save_mark(engine, COURSE, student="ben", assignment=QKV.id, question=QUESTION.id, answer_sha=sha,
                        rubric=[], comment="", who="ta1", version=first.version)
    book = marks.Book.read(engine)
    assert book.mark("ben", QKV.id, QUESTION.id, sha).points == later.points == 1.0


def test_an_adjustment_needs_a_reason_and_the_student_reads_it_with_the_points_before(engine):
    _store(engine, "cat", "x", points_24=1.0)
    with pytest.raises(ValueError, match="needs a reason"):
        marks.save_adjustment(engine, COURSE, student="cat", assignment=QKV.id, sha256="nb-sha", exercise="2.4",
                              points=3, reason="  ", who="prof", version=0)
    marks.save_adjustment(engine, COURSE, student="cat", assignment=QKV.id, sha256="nb-sha", exercise="2.4",
                          points=2.5, reason="the check was too strict on float16", who="prof", version=0)
    shown = Standing(engine, COURSE).result(_results(engine)[0].result)
    ex = next(e for e in shown["exercises"] if e["exercise"] == "2.4")
    assert (ex["points"], ex["adjusted"]["from"], ex["adjusted"]["reason"]) == (2.5, 1.0,
                                                                                "the check was too strict on float16")
    assert shown["points"] == QKV.points - 0.5
    from autograder.reports.feedback import feedback_html
    assert "the check was too strict on float16" in feedback_html(shown, COURSE, "en")
    assert "1 → 2.5" in feedback_html(shown, COURSE, "en")


def test_a_later_submission_with_the_same_answer_keeps_its_mark_and_a_changed_one_waits_again(engine):
    _store(engine, "dan", "same words")
    marks.save_mark(engine, COURSE, student="dan", assignment=QKV.id, question=QUESTION.id,
                    answer_sha=answer_sha("same words"), rubric=["variance", "saturation"], comment="", who="ta",
                    version=0)
    _store(engine, "dan", "same words", sha="other-notebook")
    _store(engine, "dan", "new words", sha="third")
    standing = Standing(engine, COURSE)
    shown = [standing.result(r.result) for r in _results(engine)]
    assert [s["questions"][0]["points"] for s in shown] == [2.0, 2.0, None]


# -- the pages (SQLite, over HTTP) ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _site(tmp_path, course=COURSE):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    who = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
           "ta1": _staff(engine, "ta1"), "ta2": _staff(engine, "ta2")}
    subs = {"ada": _store(engine, "ada", "<script>alert(1)</script> Var = d_k"), "ben": _store(engine, "ben", "")}
    try:
        with serving(create_app(engine, course)) as url:
            yield url, engine, who, subs
    finally:
        engine.dispose()


def _staff(engine, name):
    from autograder.service import tokens
    return tokens.issue(engine, name, role="ta")


def test_a_ta_grades_the_answers_one_after_another_and_the_student_sees_the_mark(tmp_path):
    with _site(tmp_path) as (url, engine, who, subs), browser(url) as ta, browser(url) as ada:
        assert sign_in(ta, who["ta1"]).status_code == 303
        overview = ta.get("/dashboard/grading", params={"lang": "en"})
        assert overview.status_code == 200 and "0 of 2 graded" in overview.text
        page = ta.get("/dashboard/grading/answer", params={"question": QUESTION.id, "submission": subs["ada"],
                                                           "lang": "en"})
        assert page.status_code == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text
        assert 'accesskey="s"' in page.text and "Model answer" in page.text       # the source's answer
        saved = ta.post("/dashboard/grading/answer", data={
            "csrf": csrf_of(page.text), "question": QUESTION.id, "submission": str(subs["ada"]), "version": "0",
            "rubric": ["variance", "saturation"], "comment": "clear and complete", "then": "next"})
        assert saved.status_code == 303                          # to the next answer waiting: ben's
        assert f"submission={subs['ben']}" in saved.headers["location"]
        ben_page = ta.get(saved.headers["location"] + "&lang=en")
        assert "no answer" in ben_page.text
        # The comment given is offered again for the next answer.
        assert '<option value="clear and complete">' in ben_page.text
        assert sign_in(ada, who["ada"]).status_code == 303
        mine = ada.get("/me", params={"lang": "en"}).text
        assert "clear and complete" in mine and f"{QKV.points + 2:g} / {QKV.points + 2:g}" in mine
        changes = history.changes(engine, student="ada")
        assert [c.why for c in changes][-1] == "manual" and changes[-1].who == "ta1"
        assert [a.action for a in audit.entries(engine)][0] == "mark.save"
        # A student cannot open the grading pages.
        assert ada.get("/dashboard/grading").status_code == 403
        assert ada.post("/dashboard/grading/answer", data={"csrf": csrf_of(mine), "question": QUESTION.id,
                                                          "submission": str(subs["ada"]), "version": "1"}
                        ).status_code == 403


def test_two_graders_at_once_the_second_sees_the_first_mark_and_keeps_their_own_words(tmp_path):
    with _site(tmp_path) as (url, engine, who, subs), browser(url) as ta1, browser(url) as ta2:
        sign_in(ta1, who["ta1"]), sign_in(ta2, who["ta2"])
        params = {"question": QUESTION.id, "submission": subs["ada"], "lang": "en"}
        one, two = ta1.get("/dashboard/grading/answer", params=params), ta2.get("/dashboard/grading/answer",
                                                                               params=params)
        form = {"question": QUESTION.id, "submission": str(subs["ada"]), "version": "0", "then": "stay"}
        assert ta1.post("/dashboard/grading/answer", data={**form, "csrf": csrf_of(one.text),
                                                           "rubric": ["variance"]}).status_code == 303
        late = ta2.post("/dashboard/grading/answer", data={**form, "csrf": csrf_of(two.text),
                                                           "rubric": ["saturation"], "comment": "my own words"})
        assert late.status_code == 409
        assert "ta1" in late.text and "my own words" in late.text and "saturation" in late.text
        book = marks.Book.read(engine)
        assert book.mark("ada", QKV.id, QUESTION.id, answer_sha("<script>alert(1)</script> Var = d_k")
                         ).graded_by == "ta1"


def test_bad_grading_input_gets_a_clear_message_and_nothing_is_stored(tmp_path):
    with _site(tmp_path) as (url, engine, who, subs), browser(url) as ta:
        sign_in(ta, who["ta1"])
        page = ta.get("/dashboard/grading", params={"lang": "en"})
        csrf = csrf_of(page.text)
        unknown = ta.get("/dashboard/grading/answer", params={"question": "9.Q9", "submission": subs["ada"],
                                                              "lang": "en"})
        assert unknown.status_code == 404 and "no written question 9.Q9" in unknown.text
        for data, status, said in [
            ({"question": QUESTION.id, "submission": "x", "version": "0"}, 422, "submission"),
            ({"question": QUESTION.id, "submission": "999", "version": "0"}, 404, "not a counted answer"),
            ({"question": QUESTION.id, "submission": str(subs["ada"]), "version": "0", "rubric": "nope"}, 422,
             "no rubric item"),
            ({"question": QUESTION.id, "submission": str(subs["ada"]), "version": "0", "comment": "x" * 2001}, 422,
             "too long"),
            ({"question": QUESTION.id, "submission": str(subs["ada"]), "version": "0", "csrf": "forged"}, 403, ""),
        ]:
            answer = ta.post("/dashboard/grading/answer", data={"csrf": csrf, **data},
                             headers={"accept": "application/json"})
            assert answer.status_code == status, (data, answer.text)
            assert said in answer.text
        assert marks.Book.read(engine).marks == {}


def test_an_adjustment_from_the_dashboard_needs_a_reason_and_shows_on_the_students_page(tmp_path):
    with _site(tmp_path) as (url, engine, who, subs), browser(url) as ta, browser(url) as ada:
        sign_in(ta, who["ta1"])
        page = ta.get("/dashboard/adjust", params={"submission": subs["ada"], "lang": "en"})
        assert page.status_code == 200 and 'data-exercise="2.4"' in page.text
        form = {"csrf": csrf_of(page.text), "submission": str(subs["ada"]), "exercise": "2.4", "version": "0"}
        no_reason = ta.post("/dashboard/adjust", data={**form, "points": "2", "reason": " "},
                            headers={"accept": "application/json"})
        assert no_reason.status_code == 422 and "needs a reason" in no_reason.text
        assert ta.post("/dashboard/adjust", data={**form, "points": "nan", "reason": "r"},
                       headers={"accept": "application/json"}).status_code == 422
        done = ta.post("/dashboard/adjust", data={**form, "points": "2", "reason": "late-breaking typo in the check"})
        assert done.status_code == 303
        sign_in(ada, who["ada"])
        mine = ada.get("/me", params={"lang": "en"}).text
        assert "late-breaking typo in the check" in mine and "3 → 2" in mine
        assert [c.why for c in history.changes(engine, student="ada")][-1] == "manual"
        assert marks.Book.read(engine).adjustments


def test_the_export_carries_the_marks_and_the_adjustments_beside_the_automatic_points(engine, tmp_path):
    import csv

    from autograder.service.export import export

    _store(engine, "eli", "answer", points_24=1.0)
    _store(engine, "fay", "other answer")
    marks.save_mark(engine, COURSE, student="eli", assignment=QKV.id, question=QUESTION.id,
                    answer_sha=answer_sha("answer"), rubric=["variance"], comment="", who="ta", version=0)
    marks.save_adjustment(engine, COURSE, student="eli", assignment=QKV.id, sha256="nb-sha", exercise="2.4",
                          points=2, reason="r", who="prof", version=0)
    export(engine, COURSE, tmp_path / "out")
    with open(tmp_path / "out" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    # eli: 2.4 adjusted 1 -> 2 (one point short of full), the written answer 1 of 2; fay's answer waits.
    full = QKV.points
    assert (rows["eli"]["2.4"], rows["eli"]["2.Q1"], rows["eli"]["total"], rows["eli"]["max"],
            rows["eli"]["waiting"]) == ("2", "1", f"{full - 1 + 1:g}", f"{full + 2:g}", "")
    assert (rows["fay"]["2.Q1"], rows["fay"]["total"], rows["fay"]["max"], rows["fay"]["waiting"]) == (
        "", f"{full:g}", f"{full + 2:g}", "2")


def test_blind_grading_hides_the_students_names_on_the_grading_pages(tmp_path):
    blind = COURSE.model_copy(update={"service": COURSE.service.model_copy(update={"blind_grading": True})})
    with _site(tmp_path, blind) as (url, engine, who, subs), browser(url) as ta:
        sign_in(ta, who["ta1"])
        overview = ta.get("/dashboard/grading", params={"lang": "en"}).text
        page = ta.get("/dashboard/grading/answer", params={"question": QUESTION.id, "submission": subs["ben"],
                                                           "lang": "en"}).text
        assert "Blind grading" in overview and f"Answer #{subs['ben']}" in page
        for text in (overview, page):
            main = text.split("<main", 1)[1]          # (the header names the signed-in TA, not a student)
            assert ">ada<" not in main and ">ben<" not in main and "· ben" not in main
