"""Issue 51, regrade requests: a student asks for a review of one exercise or written answer from /me, with a
message (bounded, escaped), within course.yml's service.review_days; the staff answer from the queue at
/dashboard/reviews (accept with new points, decline with a reason); the student reads the answer. Two answers to the
same version: the first stands, the second is refused. Every bad request is refused with a clear message and
nothing stored.

Results are put in the database directly (a submission, its job and a graded result with exercises and a written
question), as a worker would leave them: grading is not the point here. Each test runs on SQLite and PostgreSQL
(conftest's ``service_engine``); the pages over HTTP on a real uvicorn server (a thread)."""
from __future__ import annotations

import contextlib
import datetime as dt
import html
import json

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from served import serving, student_token
from support import make_samples
from pages import browser, csrf_of, sign_in
from autograder.course.config import load_course
from autograder.service import audit, db, history, marks, reviews, tables, tokens
from autograder.service import queue as Q
from autograder.service.app import create_app
from autograder.service.errors import ApiError
from autograder.service.standing import Standing
from autograder.course.written import answer_sha

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
ANSWER = "Var(q.k) grows with d_k, so the softmax saturates."
#: ada's result: 2.2 lost its 2 points, the rest full; 2.Q1 (2 points) graded 1 by a person (below).
EXERCISE_POINTS = {e.id: 0.0 if e.id == "2.2" else float(e.points) for e in QKV.exercises}


def graded(engine, student: str, *, graded_at: dt.datetime | None = None) -> int:
    """A submission of 02 graded as a worker leaves it (the written answer waiting for a person): its number."""
    data = json.dumps(make_samples.submission(QKV, solved="all")).encode()
    sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb", data=data)
    with engine.connect() as conn:
        sha = conn.execute(select(tables.Submission.sha256).where(tables.Submission.id == sub)).scalar_one()
    exercises = [{"exercise": e.id, "function": e.function, "points": EXERCISE_POINTS[e.id],
                  "max_points": float(e.points), "status": "passed" if EXERCISE_POINTS[e.id] else "failed",
                  "checks": []} for e in QKV.exercises]
    result = {"student": student, "assignment": QKV.id, "sha256": sha, "status": "graded",
              "points": sum(EXERCISE_POINTS.values()), "raw_points": sum(EXERCISE_POINTS.values()),
              "max_points": QKV.points, "exercises": exercises,
              "questions": [{"question": "2.Q1", "max_points": 2.0, "points": None, "status": "ungraded",
                             "answer": ANSWER, "sha256": answer_sha(ANSWER), "answered": True}]}
    claimed = Q.claim(engine, "w", 60)
    assert claimed.job == job and Q.complete(engine, job, "w", result) == "graded"
    if graded_at is not None:
        with db.writing(engine).begin() as conn:
            conn.execute(update(tables.Result).where(tables.Result.submission_id == sub).values(graded_at=graded_at))
    history.note(engine, COURSE, [(student, QKV.id)], why="graded", who=history.WORKER)
    return sub


def mark_question(engine, student: str, points_rubric=("variance",)) -> None:
    marks.save_mark(engine, COURSE, student=student, assignment=QKV.id, question="2.Q1", answer_sha=answer_sha(ANSWER),
                    rubric=list(points_rubric), comment="say why the variance matters", who="T. A.", version=0)
    history.note(engine, COURSE, [(student, QKV.id)], why="manual", who="T. A.")


def counted_points(engine, course=COURSE, student="ada") -> float:
    with Session(engine) as session:
        points, _max, _sid = history.counted_now(session, Standing(engine, course), course.service.counts, student,
                                                 QKV.id)
    return points


def stored_reviews(engine) -> list:
    with engine.connect() as conn:
        return conn.execute(select(tables.Review).order_by(tables.Review.id)).all()


@pytest.fixture
def site(service_engine):
    """The app over the test's database: ada's 02 graded (2.Q1 marked 1 of 2); tokens for ada, ben (nothing
    graded), a TA and an instructor: (url, engine, tokens)."""
    engine = service_engine
    who = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
           "ta": tokens.issue(engine, "T. A.", role="ta"), "prof": tokens.issue(engine, "prof", role="instructor")}
    graded(engine, "ada")
    mark_question(engine, "ada")
    with serving(create_app(engine, COURSE)) as url:
        yield url, engine, who


@contextlib.contextmanager
def signed_in(url: str, token: str):
    with browser(url) as client:
        assert sign_in(client, token).status_code == 303
        yield client


def _queue(client) -> str:
    page = client.get("/dashboard/reviews", params={"lang": "en"})
    assert page.status_code == 200
    return page.text


def _form_of(page: str, review: int) -> dict[str, str]:
    """The hidden fields of a request's answer forms on the queue (the version the page showed)."""
    row = page.split(f'id="review-{review}"')[1].split("</tr>")[0]
    version = row.split('name="version" value="')[1].split('"')[0]
    return {"csrf": csrf_of(page), "review": str(review), "version": version}


# -- the whole flow, as the pages are used ----------------------------------------------------------------------
def test_a_student_asks_the_staff_decline_then_accept_and_the_score_changes(site):
    url, engine, who = site
    hostile = "<script>alert(1)</script> my softmax subtracts the max"
    with signed_in(url, who["ada"]) as ada, signed_in(url, who["ta"]) as ta:
        mine = ada.get("/me", params={"lang": "en"}).text
        form = mine.split(f'id="reviews-{QKV.id}"')[1]
        assert 'action="/me/reviews"' in form and '<option value="2.2">' in form and 'value="2.Q1"' in form
        assert f'maxlength="{reviews.MESSAGE_CHARS}"' in form and "You may ask for a review until" in form
        asked = ada.post("/me/reviews", data={"csrf": csrf_of(mine), "assignment": QKV.id, "item": "2.2",
                                              "message": hostile})
        assert asked.status_code == 303 and asked.headers["location"].endswith(f"#reviews-{QKV.id}")
        mine = ada.get("/me", params={"lang": "en"}).text
        escaped = html.escape(hostile, quote=False)
        assert escaped in mine and "<script>alert(1)" not in mine
        assert 'data-state="open"' in mine and '<option value="2.2">' not in mine      # (asked: open)
        [first] = stored_reviews(engine)
        assert (first.student, first.item, first.state, first.old_points, first.message) == (
            "ada", "2.2", "open", 0.0, hostile)
        board = ta.get("/dashboard", params={"lang": "en"}).text
        assert "Reviews (1 open)" in board
        queue = _queue(ta)
        assert escaped in queue and "<script>alert(1)" not in queue
        row = queue.split(f'id="review-{first.id}"')[1].split("</tr>")[0]
        assert "0 / 2" in row and "ada" in row                   # the item's points now, of its maximum
        # Declined, with a reason: the student reads it; the score is unchanged.
        before = counted_points(engine)
        declined = ta.post("/dashboard/reviews/answer", data={**_form_of(queue, first.id), "decision": "decline",
                                                              "reason": "the check feeds -inf: see its message"})
        assert declined.status_code == 303 and "/dashboard/reviews?notice=" in declined.headers["location"]
        mine = ada.get("/me", params={"lang": "en"}).text
        assert 'data-state="declined"' in mine and "the check feeds -inf: see its message" in mine
        assert counted_points(engine) == before and stored_reviews(engine)[0].answered_by == "T. A."
        # Asked again (the declined one is no longer open); accepted with 1.5 of 2.
        again = ada.post("/me/reviews", data={"csrf": csrf_of(mine), "assignment": QKV.id, "item": "2.2",
                                              "message": "the -inf case is outside the exercise's statement"})
        assert again.status_code == 303
        second = stored_reviews(engine)[1]
        queue = _queue(ta)
        accepted = ta.post("/dashboard/reviews/answer", data={
            **_form_of(queue, second.id), "decision": "accept", "points": "1.5",
            "reason": "right: the statement never said -inf"})
        assert accepted.status_code == 303
        assert counted_points(engine) == before + 1.5                           # every view: through Standing
        rows = [(r.old_points, r.new_points, r.why, r.who) for r in history.changes(engine, student="ada")]
        assert [r for r in rows if r[2] == "review"] == [(before, before + 1.5, "review", "T. A.")]
        answered = stored_reviews(engine)[1]
        assert (answered.state, answered.old_points, answered.new_points) == ("accepted", 0.0, 1.5)
        mine = ada.get("/me", params={"lang": "en"}).text
        assert "because: right: the statement never said -inf" in mine          # the exercise's adjusted line
        assert 'data-state="accepted"' in mine and "points: 0 → 1.5" in mine
        assert "Reviews (0 open)" in ta.get("/dashboard", params={"lang": "en"}).text
        assert [(r.action, r.who, r.target) for r in audit.entries(engine) if r.action.startswith("review.")] == [
            ("review.accept", "T. A.", "ada"), ("review.decline", "T. A.", "ada")]


def test_two_staff_answer_the_same_version_the_first_stands_the_second_is_told(site):
    url, engine, who = site
    with signed_in(url, who["ada"]) as ada, signed_in(url, who["ta"]) as ta, signed_in(url, who["prof"]) as prof:
        mine = ada.get("/me").text
        assert ada.post("/me/reviews", data={"csrf": csrf_of(mine), "assignment": QKV.id, "item": "2.Q1",
                                             "message": "I explained the saturation too"}).status_code == 303
        [asked] = stored_reviews(engine)
        assert asked.old_points == 1.0
        ta_page, prof_page = _queue(ta), _queue(prof)                  # both open the same version
        first = prof.post("/dashboard/reviews/answer", data={**_form_of(prof_page, asked.id), "decision": "accept",
                                                             "points": "2", "reason": "yes: both halves are there"})
        assert first.status_code == 303
        late = ta.post("/dashboard/reviews/answer", params={"lang": "en"}, data={
            **_form_of(ta_page, asked.id), "decision": "decline", "reason": "no"})
        assert late.status_code == 409
        assert "answered, or is being answered, by someone else (prof)" in late.text and "not saved" in late.text
        [done] = stored_reviews(engine)
        assert (done.state, done.answered_by, done.new_points, done.answer) == (
            "accepted", "prof", 2.0, "yes: both halves are there")
        book = marks.Book.read(engine)
        mark = book.mark("ada", QKV.id, "2.Q1", answer_sha(ANSWER))
        assert (mark.points, mark.rubric, mark.comment) == (2.0, ["variance"], "yes: both halves are there")
        assert counted_points(engine) == sum(EXERCISE_POINTS.values()) + 2.0
        assert [r.action for r in audit.entries(engine) if r.action.startswith("review.")] == ["review.accept"]


def test_an_accepted_review_replaces_the_old_comment_and_the_queue_links_to_the_answer(site):
    """Issue 66, item 11: the mark's old comment ("say why the variance matters", about 1 point) no longer stands
    beside the new 2 points: the review's answer is the mark's comment now, on the student's page and in the feedback.
    Each request on the queue links to what it is about: a written answer's grading page, an exercise's adjustment
    page, of the result that counts."""
    url, engine, who = site
    with signed_in(url, who["ada"]) as ada, signed_in(url, who["ta"]) as ta:
        mine = ada.get("/me").text
        for item in ("2.Q1", "2.2"):
            assert ada.post("/me/reviews", data={"csrf": csrf_of(mine), "assignment": QKV.id, "item": item,
                                                 "message": "please look again"}).status_code == 303
        written, exercise = stored_reviews(engine)
        queue = _queue(ta)
        row = queue.split(f'id="review-{written.id}"')[1].split("</tr>")[0]
        link = f'href="/dashboard/grading/answer?question=2.Q1&amp;submission={written.submission_id}"'
        assert link in row
        assert f'href="/dashboard/adjust?submission={exercise.submission_id}"' in \
            queue.split(f'id="review-{exercise.id}"')[1].split("</tr>")[0]
        answer_page = ta.get(f"/dashboard/grading/answer?question=2.Q1&submission={written.submission_id}")
        assert answer_page.status_code == 200 and html.escape(ANSWER) in answer_page.text
        assert ta.post("/dashboard/reviews/answer", data={**_form_of(queue, written.id), "decision": "accept",
                                                          "points": "2", "reason": "the second half is there too"}
                       ).status_code == 303
        mark = marks.Book.read(engine).mark("ada", QKV.id, "2.Q1", answer_sha(ANSWER))
        assert (mark.points, mark.comment) == (2.0, "the second half is there too")
        page = ada.get("/me", params={"lang": "en"}).text
        assert "say why the variance matters" not in page and "the second half is there too" in page
        with engine.connect() as conn:
            stored = conn.execute(select(tables.Result.result)
                                  .where(tables.Result.submission_id == written.submission_id)).scalar_one()
        shown = Standing(engine, COURSE).result(stored)
        assert [(q["points"], q["comment"]) for q in shown["questions"]] == [(2.0, "the second half is there too")]
        # Answered, the request still links to the answer.
        assert link in _queue(ta).split(f'id="review-{written.id}"')[1].split("</tr>")[0]


# -- refusals: a clear message, nothing stored -------------------------------------------------------------------
def _refused(call, status: int, words: str) -> None:
    with pytest.raises(ApiError) as refused:
        call()
    assert refused.value.status == status and words in refused.value.msg.en, refused.value.msg.en


def test_every_bad_request_is_refused_with_a_message_and_nothing_stored(service_engine):
    engine = service_engine
    for student in ("ada", "ben"):
        student_token(engine, student)
    graded(engine, "ada")

    def ask(item="2.2", message="please look again", course=COURSE, student="ada", assignment=QKV.id):
        return reviews.ask(engine, course, student, assignment, item, message)

    _refused(lambda: ask(item="3.1"), 422, f"assignment {QKV.id} has no exercise or written question 3.1")
    _refused(lambda: ask(item="2.9"), 422, "has no exercise or written question 2.9")
    _refused(lambda: ask(assignment="99_none"), 422, "no assignment 99_none")
    _refused(lambda: ask(message="x" * (reviews.MESSAGE_CHARS + 1)), 422,
             f"too long: {reviews.MESSAGE_CHARS + 1} characters, at most {reviews.MESSAGE_CHARS}")
    _refused(lambda: ask(message=" \n\t "), 422, "the message is empty")
    _refused(lambda: ask(student="ben"), 409, f"assignment {QKV.id} has no counted result yet")
    _refused(lambda: ask(item="2.Q1"), 409, "2.Q1 has not been graded by a person yet")
    off = COURSE.model_copy(update={"service": COURSE.service.model_copy(update={"review_days": 0})})
    _refused(lambda: ask(course=off), 409, "this course takes no review requests")
    assert stored_reviews(engine) == []
    # A due date long past, graded soon after it: the window (7 days from the grading) closed long ago.
    past = COURSE.model_copy(update={"assignments": [
        a.model_copy(update={"due": "2020-03-01T23:59:00+00:00"}) if a.id == QKV.id else a
        for a in COURSE.assignments]})
    with db.writing(engine).begin() as conn:
        conn.execute(update(tables.Result).values(graded_at=dt.datetime(2020, 3, 2, 8, 0, tzinfo=dt.timezone.utc)))
    _refused(lambda: ask(course=past), 409, f"review requests for {QKV.id} closed on 2020-03-09")
    # Graded before the due date: the window runs from the due date.
    with db.writing(engine).begin() as conn:
        conn.execute(update(tables.Result).values(graded_at=dt.datetime(2020, 2, 1, tzinfo=dt.timezone.utc)))
    _refused(lambda: ask(course=past), 409, "closed on 2020-03-08")
    assert stored_reviews(engine) == []
    # Open now (the course's own, no due date: from the grading): one request; a second for the item is refused.
    with db.writing(engine).begin() as conn:
        conn.execute(update(tables.Result).values(graded_at=tables.utcnow()))
    first = ask()
    _refused(lambda: ask(message="again"), 409, "a review of 2.2 is already requested and open")
    assert [r.id for r in stored_reviews(engine)] == [first.id]
    # Bad answers change nothing: points out of bounds, no reason, an unknown request, a stale version.

    def answer(accept=True, points=1.0, reason="ok", version=first.version, review=first.id):
        return reviews.answer(engine, COURSE, review, "T. A.", accept, points, reason, version)

    before = counted_points(engine)
    for bad in (2.5, -1.0, float("nan"), None):
        _refused(lambda bad=bad: answer(points=bad), 422, "the new points are a number from 0 to 2")
    _refused(lambda: answer(accept=False, reason="  "), 422, "write an answer: the student reads it")
    _refused(lambda: answer(reason="x" * (reviews.MESSAGE_CHARS + 1)), 422, "too long")
    _refused(lambda: answer(review=first.id + 99), 404, f"no review request {first.id + 99}")
    _refused(lambda: answer(version=first.version + 1), 409, "by someone else")
    [still] = stored_reviews(engine)
    assert (still.state, still.version, still.answer) == ("open", first.version, "")
    assert counted_points(engine) == before and marks.Book.read(engine).adjustments == {}
    assert [r for r in audit.entries(engine) if r.action.startswith("review.")] == []


def test_a_score_changed_meanwhile_refuses_the_answer_and_keeps_the_request_open(service_engine):
    """The TA adjusts 2.2 by hand after the queue was read: the review's accept (from the adjustment it saw) is
    refused, the hand adjustment stands, and the request is still open to answer again."""
    engine = service_engine
    student_token(engine, "ada")
    graded(engine, "ada")
    asked = reviews.ask(engine, COURSE, "ada", QKV.id, "2.2", "please")
    real = reviews.Standing

    class Meanwhile(real):                 # the hand adjustment lands right after the answer read the marks
        def __init__(self, *args):
            super().__init__(*args)
            with engine.connect() as conn:
                sha = conn.execute(select(tables.Submission.sha256)).scalar_one()
            marks.save_adjustment(engine, COURSE, student="ada", assignment=QKV.id, sha256=sha, exercise="2.2",
                                  points=1.0, reason="by hand", who="prof", version=0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reviews, "Standing", Meanwhile)
        _refused(lambda: reviews.answer(engine, COURSE, asked.id, "T. A.", True, 2.0, "yes", asked.version), 409,
                 "the score of 2.2 was changed meanwhile")
    [adj] = marks.Book.read(engine).adjustments.values()
    assert (adj.points, adj.reason) == (1.0, "by hand")
    now = reviews.get(engine, asked.id)
    assert now.state == "open" and now.version == asked.version + 1        # answer again from the page reloaded
    done = reviews.answer(engine, COURSE, asked.id, "T. A.", True, 2.0, "yes", now.version)
    assert (done.state, done.old_points, done.new_points) == ("accepted", 1.0, 2.0)


def test_the_pages_refuse_a_student_on_the_staff_route_a_missing_csrf_and_a_staff_asking(site):
    url, engine, who = site
    with signed_in(url, who["ada"]) as ada, signed_in(url, who["ta"]) as ta:
        csrf = csrf_of(ada.get("/me").text)
        assert ada.get("/dashboard/reviews").status_code == 403
        forged = ada.post("/dashboard/reviews/answer", data={"csrf": csrf, "review": "1", "version": "1",
                                                             "decision": "accept", "points": "2", "reason": "mine"})
        assert forged.status_code == 403
        no_csrf = ada.post("/me/reviews", data={"assignment": QKV.id, "item": "2.2", "message": "hi"})
        assert no_csrf.status_code == 403
        wrong_csrf = ada.post("/me/reviews", data={"csrf": "x" * 20, "assignment": QKV.id, "item": "2.2",
                                                   "message": "hi"})
        assert wrong_csrf.status_code == 403
        staff = ta.post("/me/reviews", params={"lang": "en"}, data={
            "csrf": csrf_of(ta.get("/dashboard").text), "assignment": QKV.id, "item": "2.2", "message": "hi"})
        assert staff.status_code == 403 and "only students ask for reviews" in staff.text
        too_long = ada.post("/me/reviews", params={"lang": "en"}, data={
            "csrf": csrf, "assignment": QKV.id, "item": "2.2", "message": "x" * (reviews.MESSAGE_CHARS + 1)})
        assert too_long.status_code == 422 and "too long" in too_long.text
        other = ada.post("/me/reviews", params={"lang": "zh"}, data={
            "csrf": csrf, "assignment": QKV.id, "item": "3.1", "message": "hi"})
        assert other.status_code == 422 and "没有练习或书面题 3.1" in other.text
        malformed = ta.post("/dashboard/reviews/answer", data={
            "csrf": csrf_of(ta.get("/dashboard").text), "review": "1 OR 1=1", "version": "1", "decision": "accept"})
        assert malformed.status_code == 422
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(tables.Review)).scalar_one() == 0
        assert "No review requests yet." in _queue(ta)
