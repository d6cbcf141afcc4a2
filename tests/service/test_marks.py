"""Issue 51: written answers graded by hand with the question's rubric, several graders at once without overwriting
each other, adjustments of an automatic score with a reason the student reads, and the combined score in every view.

The data layer runs on SQLite and PostgreSQL; the pages over HTTP on a real uvicorn server over a real SQLite file.
Results are stored as a worker stores them (``queue.complete``): what is graded here is the hand grading."""
from __future__ import annotations

import html
import json
from urllib.parse import unquote

import pytest

from marking import COURSE, QKV, QUESTION, grading_site, store_answer, ta_token
from pages import browser, csrf_of, sign_in
from autograder.service import audit, history, marks, tables
from autograder.service.standing import Standing
from autograder.course.written import answer_sha
from autograder.course.written import maximum_of as written_maximum_of


@pytest.fixture
def engine(service_engine):
    return service_engine


# -- the data layer (SQLite and PostgreSQL) -----------------------------------------------------------------------
def test_a_mark_joins_the_score_and_an_ungraded_answer_is_left_out_not_zero(engine):
    store_answer(engine, "ada", "Var(q.k) = d_k ...")
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
        return conn.execute(select(tables.Result).order_by(tables.Result.submission_id)).all()


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
    store_answer(engine, "cat", "x", points_24=1.0)
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
    store_answer(engine, "dan", "same words")
    marks.save_mark(engine, COURSE, student="dan", assignment=QKV.id, question=QUESTION.id,
                    answer_sha=answer_sha("same words"), rubric=["variance", "saturation"], comment="", who="ta",
                    version=0)
    store_answer(engine, "dan", "same words", sha="other-notebook")
    store_answer(engine, "dan", "new words", sha="third")
    standing = Standing(engine, COURSE)
    shown = [standing.result(r.result) for r in _results(engine)]
    assert [s["questions"][0]["points"] for s in shown] == [2.0, 2.0, None]


# -- the pages (SQLite, over HTTP) ---------------------------------------------------------------------------------
def test_a_ta_grades_the_answers_one_after_another_and_the_student_sees_the_mark(tmp_path):
    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta, browser(url) as ada:
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
    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta1, browser(url) as ta2:
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
        # Issue 66, item 11: the notice names the items ticked by their text, as the grader read them, not their ids.
        notice = late.text.split('id="notice"')[1].split("</p>")[0]
        assert html.escape(QUESTION.item("saturation").text, quote=False) in notice and "saturation" not in notice
        book = marks.Book.read(engine)
        assert book.mark("ada", QKV.id, QUESTION.id, answer_sha("<script>alert(1)</script> Var = d_k")
                         ).graded_by == "ta1"


def test_bad_grading_input_gets_a_clear_message_and_nothing_is_stored(tmp_path):
    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta:
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
    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta, browser(url) as ada:
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

    store_answer(engine, "eli", "answer", points_24=1.0)
    store_answer(engine, "fay", "other answer")
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
    with grading_site(tmp_path, blind) as (url, engine, who, subs), browser(url) as ta:
        sign_in(ta, who["ta1"])
        overview = ta.get("/dashboard/grading", params={"lang": "en"}).text
        page = ta.get("/dashboard/grading/answer", params={"question": QUESTION.id, "submission": subs["ben"],
                                                           "lang": "en"}).text
        assert "Blind grading" in overview and f"Answer #{subs['ben']}" in page
        for text in (overview, page):
            main = text.split("<main", 1)[1]          # (the header names the signed-in TA, not a student)
            assert ">ada<" not in main and ">ben<" not in main and "· ben" not in main


# -- hand grading at class size (issue 66, item 11) --------------------------------------------------------------
def test_every_unanswered_answer_is_given_0_in_one_action_from_the_list_shown_first(tmp_path):
    """The confirmation page lists the answers that are still the template's text or empty and unmarked (who, which
    question); one POST gives each 0 with a comment saying it was unanswered, as any mark is saved (compare-and-set
    from "no mark", the audit, the score history). Meanwhile eve hands in a real answer and fay's is marked: neither
    is zeroed; posting the same list again zeroes nothing."""
    from autograder.service.ui import UI
    from autograder.course.written import TEXT_STUBS

    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta, browser(url) as ada:
        for student, text in [("cat", TEXT_STUBS["zh"]), ("dan", TEXT_STUBS["en"]), ("eve", " "), ("fay", "")]:
            subs[student] = store_answer(engine, student, text)
        sign_in(ta, who["ta1"])
        overview = ta.get("/dashboard/grading", params={"lang": "en"}).text
        assert "5 unanswered answers wait" in overview and 'href="/dashboard/grading/unanswered"' in overview
        listed = ta.get("/dashboard/grading/unanswered", params={"lang": "en"})
        assert listed.status_code == 200 and "Give these 5 answers 0" in listed.text
        rows = listed.text.split('<table id="unanswered">')[1]
        assert [f'data-submission="{subs[s]}"' in rows for s in ("ada", "ben", "cat", "dan", "eve", "fay")] == [
            False, True, True, True, True, True]
        assert ">ben<" in rows and TEXT_STUBS["zh"] in rows and "(empty)" in rows
        # Meanwhile: eve hands in an answer (another submission counts now), ta2 marks fay's.
        store_answer(engine, "eve", "Var(q.k) = d_k after all")
        marks.save_mark(engine, COURSE, student="fay", assignment=QKV.id, question=QUESTION.id,
                        answer_sha=answer_sha(""), rubric=["variance"], comment="seen on paper", who="ta2", version=0)
        form = {"csrf": csrf_of(listed.text),
                "answers": [f"{QUESTION.id} {' '.join(str(subs[s]) for s in ('ben', 'cat', 'dan', 'eve', 'fay'))}"]}
        assert form["answers"][0] in listed.text                # (the page's own hidden field)
        done = ta.post("/dashboard/grading/unanswered", data=form, params={"lang": "en"})
        assert done.status_code == 303 and done.headers["location"].startswith("/dashboard/grading?notice=")
        assert "3 unanswered answers given 0; 2 left out" in unquote(done.headers["location"])
        book = marks.Book.read(engine)
        zero = UI["zh"]["unanswered_comment"]                   # (the course's language: the student reads it)
        for student, text in [("ben", ""), ("cat", TEXT_STUBS["zh"]), ("dan", TEXT_STUBS["en"])]:
            mark = book.mark(student, QKV.id, QUESTION.id, answer_sha(text))
            assert (mark.points, mark.rubric, mark.comment, mark.graded_by, mark.version) == (0.0, [], zero, "ta1", 1)
        assert book.mark("eve", QKV.id, QUESTION.id, answer_sha(" ")) is None
        assert book.mark("eve", QKV.id, QUESTION.id, answer_sha("Var(q.k) = d_k after all")) is None
        assert (book.mark("fay", QKV.id, QUESTION.id, answer_sha("")).points,
                book.mark("fay", QKV.id, QUESTION.id, answer_sha("")).graded_by) == (1.0, "ta2")
        zeroed = [a for a in audit.entries(engine) if a.action == "mark.save" and "(unanswered)" in a.detail]
        assert sorted(a.target for a in zeroed) == ["ben", "cat", "dan"] and {a.who for a in zeroed} == {"ta1"}
        ben = Standing(engine, COURSE).result(next(r.result for r in _results(engine) if r.result["student"] == "ben"))
        assert (ben["questions"][0]["points"], ben["points"], ben["max_points"]) == (0.0, QKV.points, QKV.points + 2)
        assert written_maximum_of(COURSE, ben).waiting == 0     # 0 of 2 counts now: the answer no longer waits
        # The same list again: each is marked or changed now, nothing is given 0 twice.
        again = ta.post("/dashboard/grading/unanswered", data=form, params={"lang": "en"})
        assert "0 unanswered answers given 0; 5 left out" in unquote(again.headers["location"])
        assert len(marks.Book.read(engine).marks) == 4
        assert "No unanswered answer waits" in ta.get("/dashboard/grading/unanswered", params={"lang": "en"}).text
        # A student cannot; a malformed list is refused naming its field, nothing stored.
        sign_in(ada, who["ada"])
        mine = ada.get("/me").text
        assert ada.post("/dashboard/grading/unanswered", data={"csrf": csrf_of(mine), **form}).status_code == 403
        for bad in (QUESTION.id, f"{QUESTION.id} x", f"{QUESTION.id} {2**70}"):
            refused = ta.post("/dashboard/grading/unanswered", data={"csrf": form["csrf"], "answers": bad},
                              headers={"accept": "application/json"})
            assert refused.status_code == 422 and "answers" in refused.text, (bad, refused.text)


def _double_course(threshold: float = 0.5):
    from autograder.course.service_policy import DoubleMarking

    return COURSE.model_copy(update={"service": COURSE.service.model_copy(update={
        "double_marking": DoubleMarking(questions=[QUESTION.id], threshold=threshold)})})


def test_course_yml_declares_double_marking_for_written_questions_it_has():
    import yaml

    from autograder.course.config import ConfigError, parse_course

    data = yaml.safe_load((COURSE.root / "course.yml").read_text(encoding="utf-8"))
    data["service"] = {"double_marking": {"questions": [QUESTION.id], "threshold": 0.25}}
    course = parse_course(data)
    assert (course.service.double_marking.questions, course.service.double_marking.threshold) == ([QUESTION.id],
                                                                                                   0.25)
    assert parse_course({k: v for k, v in data.items() if k != "service"}).service.double_marking.questions == []
    data["service"] = {"double_marking": {"questions": ["9.Q9"]}}
    with pytest.raises(ConfigError, match="9.Q9"):
        parse_course(data)
    data["service"] = {"double_marking": {"questions": [QUESTION.id], "threshold": -1}}
    with pytest.raises(ConfigError, match="threshold"):
        parse_course(data)


def test_two_blind_marks_count_as_their_mean_where_they_agree_and_wait_for_an_instructor_where_not(engine):
    from autograder.service import double_marking as D

    course = _double_course()
    near, far = answer_sha("near"), answer_sha("far")

    def save(student, sha, marker, rubric, who, version=0, comment=""):
        return D.save(engine, course, student=student, assignment=QKV.id, question=QUESTION.id, answer_sha=sha,
                      marker=marker, rubric=rubric, comment=comment, who=who, version=version)

    first, made = save("ada", near, 1, ["variance", "saturation"], "ta1", comment="both halves")
    assert (first.points, first.version, made) == (2.0, 1, None)
    assert marks.Book.read(engine).marks == {}            # one mark counts for nothing: the answer still waits
    with pytest.raises(marks.Conflict):                    # ta2 opened slot 1 before ta1 saved it
        save("ada", near, 1, [], "ta2")
    with pytest.raises(D.SameMarker):                      # the two marks are two people's
        save("ada", near, 2, ["variance"], "ta1")
    again, made = save("ada", near, 1, ["variance", "saturation"], "ta1", version=1, comment="both halves")
    assert (again.version, made) == (2, None)              # a marker changes theirs until the other's is in
    second, made = save("ada", near, 2, ["variance", "saturation", "wrong_claim"], "ta2", comment="a slip")
    assert second.points == 1.5 and made is not None       # 2 and 1.5: within 0.5, they agree
    assert (made.points, made.rubric, made.comment, made.graded_by) == (
        1.75, ["variance", "saturation"], "both halves · a slip", "ta1 + ta2")
    assert marks.Book.read(engine).mark("ada", QKV.id, QUESTION.id, near).points == 1.75
    with pytest.raises(D.Closed):                          # both are in: neither changes any more
        save("ada", near, 1, [], "ta1", version=2)
    with pytest.raises(marks.Conflict):                    # a third person on slot 2 from "empty"
        save("ada", near, 2, [], "ta3")
    # 0 and 2: more than 0.5 apart, nothing counts until an instructor decides.
    save("ben", far, 2, [], "ta1")
    _second, made = save("ben", far, 1, ["variance", "saturation"], "ta2")
    pair = D.pair_of(engine, "ben", QKV.id, QUESTION.id, far)
    assert made is None and pair.complete and D.disagreeing(pair, 0.5) and not D.disagreeing(pair, 2.0)
    assert marks.Book.read(engine).mark("ben", QKV.id, QUESTION.id, far) is None
    assert [a.detail for a in audit.entries(engine) if a.action == "mark.double"][-1] == f"{QUESTION.id}: mark 1 of 2"
    with pytest.raises(ValueError, match="not double-marked"):
        D.save(engine, COURSE, student="ada", assignment=QKV.id, question=QUESTION.id, answer_sha=near, marker=1,
               rubric=[], comment="", who="ta1", version=0)


def test_double_marking_on_the_pages_blind_then_the_mean_or_the_moderators_decision(tmp_path):
    """Two TAs mark ada's answer, the second never seeing the first's mark; their marks agree and the mean counts.
    On ben's they differ: a TA cannot decide, an instructor sees both on the moderation page and decides, once (the
    second decision from the same version is refused, compare-and-set)."""
    from autograder.service import tokens

    course = _double_course()
    with grading_site(tmp_path, course) as (url, engine, who, subs), browser(url) as ta1, browser(url) as ta2, \
            browser(url) as ta3, browser(url) as prof:
        who["ta3"], who["prof"] = ta_token(engine, "ta3"), tokens.issue(engine, "prof", role="instructor")
        for client, name in [(ta1, "ta1"), (ta2, "ta2"), (ta3, "ta3"), (prof, "prof")]:
            sign_in(client, who[name])
        ada_page = {"question": QUESTION.id, "submission": subs["ada"], "lang": "en"}
        page = ta1.get("/dashboard/grading/answer", params=ada_page).text
        assert "You give mark 1 of 2" in page and 'name="marker" value="1"' in page
        form = {"csrf": csrf_of(page), "question": QUESTION.id, "submission": str(subs["ada"]), "then": "stay"}
        saved = ta1.post("/dashboard/grading/answer", data={**form, "marker": "1", "version": "0",
                                                            "rubric": ["variance", "saturation"],
                                                            "comment": "ta1 thinks both halves"})
        assert saved.status_code == 303 and "(mark 1 of 2)" in unquote(saved.headers["location"])
        # ta2 sees neither ta1's items, comment, points nor name: only that one mark of two is in.
        blind, blind3 = (c.get("/dashboard/grading/answer", params=ada_page).text for c in (ta2, ta3))
        main = blind.split("<main", 1)[1]
        assert "You give mark 2 of 2" in main and 'name="marker" value="2"' in main
        assert "ta1" not in main and " checked" not in main and "2 points" not in main
        overview = ta2.get("/dashboard/grading", params={"lang": "en"}).text
        row = overview.split(f'<tr data-submission="{subs["ada"]}">')[1].split("</tr>")[0]
        assert "1 of 2 marks" in row and "ta1" not in row and "<td></td>" in row      # no points before the end
        assert "(one is yours)" in ta1.get("/dashboard/grading", params={"lang": "en"}).text
        # ta1 may not give the second mark too.
        same = ta1.post("/dashboard/grading/answer", data={**form, "marker": "2", "version": "0", "rubric": []},
                        params={"lang": "en"})
        assert same.status_code == 409 and "you gave this answer's other mark" in html.unescape(same.text)
        # ta2 and ta3 open slot 2 together: ta2's save counts (2 and 1.5 agree: their mean, 1.75), ta3's is refused.
        agreed = ta2.post("/dashboard/grading/answer", params={"lang": "en"}, data={
            **form, "csrf": csrf_of(blind), "marker": "2", "version": "0",
            "rubric": ["variance", "saturation", "wrong_claim"], "comment": "ta2: a slip in the variance"})
        assert agreed.status_code == 303 and "their mean, 1.75, counts" in unquote(agreed.headers["location"])
        late = ta3.post("/dashboard/grading/answer", params={"lang": "en"}, data={
            **form, "csrf": csrf_of(blind3), "marker": "2", "version": "0", "rubric": [], "comment": "ta3's words"})
        assert late.status_code == 409 and "someone saved mark 2" in late.text and "ta3&#39;s words" in late.text
        counted = marks.Book.read(engine).mark("ada", QKV.id, QUESTION.id,
                                                answer_sha("<script>alert(1)</script> Var = d_k"))
        assert (counted.points, counted.graded_by) == (1.75, "ta1 + ta2")
        assert [(c.why, c.detail) for c in history.changes(engine, student="ada")][-1] == (
            "manual", f"{QUESTION.id}: 1.75 (two markers agree)")
        decided = ta3.get("/dashboard/grading/answer", params=ada_page).text
        assert "the mark that counts: 1.75 points, ta1 + ta2" in decided and 'id="mark-form"' not in decided
        assert "Mark 1: ta1" in decided and "Mark 2: ta2" in decided
        # ben's: 0 and 2, more than 0.5 apart: an instructor decides.
        ben_page = {"question": QUESTION.id, "submission": subs["ben"], "lang": "en"}
        form_ben = {**form, "submission": str(subs["ben"]), "version": "0"}
        ta1.post("/dashboard/grading/answer", data={**form_ben, "marker": "1", "rubric": [], "comment": "nothing"})
        differ = ta2.post("/dashboard/grading/answer", params={"lang": "en"}, data={
            **form_ben, "csrf": csrf_of(blind), "marker": "2", "rubric": ["variance", "saturation"]})
        assert "more than 0.5 points apart" in unquote(differ.headers["location"])
        assert marks.Book.read(engine).mark("ben", QKV.id, QUESTION.id, answer_sha("")) is None
        closed = ta1.post("/dashboard/grading/answer", params={"lang": "en"},
                          data={**form_ben, "marker": "1", "version": "1", "rubric": ["variance"]})
        assert closed.status_code == 409 and "both marks of this answer are in" in closed.text
        assert "1 answers wait for an instructor" in ta1.get("/dashboard/grading", params={"lang": "en"}).text
        assert ta1.get("/dashboard/grading/moderate", params=ben_page).status_code == 403
        board = prof.get("/dashboard/grading", params={"lang": "en"}).text
        assert f'href="/dashboard/grading/moderate?question={QUESTION.id}&amp;submission={subs["ben"]}"' in board
        moderation = prof.get("/dashboard/grading/moderate", params=ben_page)
        assert moderation.status_code == 200
        text = moderation.text
        assert "Mark 1: ta1" in text and "Mark 2: ta2" in text and "nothing" in text and "2 points apart" in text
        decide = {"csrf": csrf_of(text), "question": QUESTION.id, "submission": str(subs["ben"]), "version": "0",
                  "rubric": ["variance"], "comment": "the variance half only"}
        done = prof.post("/dashboard/grading/moderate", data=decide, params={"lang": "en"})
        assert done.status_code == 303 and "Decided: 1 / 2 points" in unquote(done.headers["location"])
        mark = marks.Book.read(engine).mark("ben", QKV.id, QUESTION.id, answer_sha(""))
        assert (mark.points, mark.graded_by, mark.comment) == (1.0, "prof", "the variance half only")
        moderated = [a for a in audit.entries(engine) if a.action == "mark.moderate"]
        assert [(a.who, a.target) for a in moderated] == [("prof", "ben")] and "0 by ta1, 2 by ta2" in \
            moderated[0].detail
        again = prof.post("/dashboard/grading/moderate", data={**decide, "rubric": ["saturation"]},
                          params={"lang": "en"})
        assert again.status_code == 409 and "prof saved a mark" in again.text
        assert html.escape(QUESTION.item("saturation").text, quote=False) in again.text.split('id="notice"')[1]
        assert marks.Book.read(engine).mark("ben", QKV.id, QUESTION.id, answer_sha("")).points == 1.0
        # A question that is not double-marked has no moderation; an answer with one mark has nothing to decide.
        assert prof.get("/dashboard/grading/moderate", params={**ben_page, "question": "1.Q1"}).status_code == 404


def test_the_model_answer_is_markdown_made_html_on_the_server_with_none_of_its_own_html(tmp_path):
    """The page's policy runs no script of its own: the model answer is rendered on the server (Markdown, formulas
    kept as their source), and nothing of the HTML it holds gets through."""
    import shutil

    from autograder.course.config import load_course

    folder = tmp_path / "course"
    (folder / "source" / QKV.id).mkdir(parents=True)
    shutil.copy(COURSE.root / "course.yml", folder / "course.yml")
    hostile = ("**Scale** the scores by $\\sqrt{d_k}$, so that $a_i * b_j$ stays a formula.\n\n"
               "<script>alert(1)</script> <img src=x onerror=alert(2)> [more](javascript:alert(3)) "
               "<a href=\"https://evil.example\" onclick=\"alert(4)\">x</a>\n\n- one\n- two\n")
    nb = {"cells": [{"cell_type": "markdown", "source": hostile, "metadata": {"nbgrader": {
        "grade_id": "q2_Q1", "grade": True, "solution": True}}}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "source" / QKV.id / QKV.notebook).write_text(json.dumps(nb), encoding="utf-8")
    course = load_course(folder / "course.yml")
    with grading_site(tmp_path, course) as (url, engine, who, subs), browser(url) as ta:
        sign_in(ta, who["ta1"])
        page = ta.get("/dashboard/grading/answer", params={"question": QUESTION.id, "submission": subs["ada"]})
        assert page.status_code == 200
        model = page.text.split('<details id="model-answer">')[1].split("</details>")[0]
        assert "<strong>Scale</strong>" in model and "<li>one</li>" in model
        assert '<span class="math">$\\sqrt{d_k}$</span>' in model and "$a_i * b_j$" in model and "<em>" not in model
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in model and "&lt;img src=x onerror=alert(2)&gt;" in model
        for raw in ("<script", "<img", "href=\"javascript", "<a href=\"https://evil", "onclick=\"", "onerror=\""):
            assert raw not in model, raw
        assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")


def test_markdown_is_rendered_with_formulas_kept_and_no_html_of_its_own():
    from autograder.service.richtext import markdown_html

    said = str(markdown_html("$5 and $6, \\$x\\$, $$\n\\sum_i x_i\n$$ and `<b>` <b>bold</b> [a](vbscript:x)"))
    # Money is no formula, an escaped $ is a $, a formula over lines is one; code, HTML and a script link are text.
    assert said == ('<p>$5 and $6, $x$, <span class="math display">$$\n\\sum_i x_i\n$$</span> and '
                    "<code>&lt;b&gt;</code> &lt;b&gt;bold&lt;/b&gt; [a](vbscript:x)</p>\n")


def test_a_long_list_of_unanswered_answers_is_given_0_in_turns_each_within_a_pages_form(tmp_path, monkeypatch):
    """The form of the list carries the submissions' numbers: at most UNANSWERED_MOST of them, so that it stays within
    the 16 KiB every page's form is held to, whatever their number; the page says how many more wait."""
    from urllib.parse import urlencode

    from autograder.service import guard
    from autograder.service.routes import unanswered

    worst = {"csrf": "c" * 64, "answers": [f"{QUESTION.id} " + " ".join(["9" * 7] * unanswered.UNANSWERED_MOST)]}
    assert len(urlencode(worst, doseq=True)) < guard.SMALL_BODY
    monkeypatch.setattr(unanswered, "UNANSWERED_MOST", 2)
    with grading_site(tmp_path) as (url, engine, who, subs), browser(url) as ta:
        for student in ("cat", "dan"):
            subs[student] = store_answer(engine, student, "")
        sign_in(ta, who["ta1"])
        listed = ta.get("/dashboard/grading/unanswered", params={"lang": "en"}).text
        assert "These are the first 2 of 3" in listed and "Give these 2 answers 0" in listed
        form = {"csrf": csrf_of(listed), "answers": [f"{QUESTION.id} {subs['ben']} {subs['cat']}"]}
        assert form["answers"][0] in listed
        assert "2 unanswered answers given 0" in unquote(ta.post("/dashboard/grading/unanswered", data=form
                                                                 ).headers["location"])
        rest = ta.get("/dashboard/grading/unanswered", params={"lang": "en"}).text
        assert "Give these 1 answers 0" in rest and "first" not in rest
        assert f'value="{QUESTION.id} {subs["dan"]}"' in rest
        too_many = ta.post("/dashboard/grading/unanswered", headers={"accept": "application/json"}, data={
            "csrf": form["csrf"], "answers": [f"{QUESTION.id} {subs['ben']} {subs['cat']} {subs['dan']}"]})
        assert too_many.status_code == 422 and "answers" in too_many.text
        assert len(marks.Book.read(engine).marks) == 2
