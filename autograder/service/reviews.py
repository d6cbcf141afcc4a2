"""Review (regrade) requests: a student asks for a review of one exercise or written answer of a counted result,
with a message; the staff accept it with new points or decline it with a reason; the student reads the answer.

A request is open until answered. The window to ask is course.yml's ``service.review_days`` (0: no reviews),
counted from the student's own due date of the assignment (an extension moves it), or from the counted result's
grading where the assignment has no due date or the grading came later. One open request per item at a time.

Nothing is lost or silently overwritten: each answer names the request's version it was made from
(compare-and-set); an accepted request first claims that version (a second answer to it is refused), then
changes the score through :mod:`autograder.service.marks` (an exercise: an adjustment whose reason is the staff's
answer; a written answer: its mark with the same rubric, the new points and the staff's answer as its comment,
the old comment being about the old points), itself compare-and-set against the mark or adjustment the page showed,
and last records the answer and its audit row in one transaction and the changed counted score in the score history
(``why="review"``). A score changed by someone else in between refuses the answer and leaves the request open.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.course.clock import readable
from autograder.core.points import fmt
from autograder.service import audit, history, mail, marks
from autograder.service import queue as Q
from autograder.service.db import writing
from autograder.service.tables import Result, Review, utcnow
from autograder.service.errors import ApiError
from autograder.service.standing import Standing
from autograder.core.text import clean

if TYPE_CHECKING:
    from autograder.course.config import Course

#: The longest message or answer kept (characters): the pages' maxlength, and more is refused, never cut.
MESSAGE_CHARS = marks.TEXT_CHARS
STATES = ("open", "accepted", "declined")
#: The answered requests the staff's queue lists below the open ones (the newest).
ANSWERED_SHOWN = 200


@dataclass(frozen=True)
class Item:
    """An exercise or a written question of an assignment, as a request names it."""

    id: str
    kind: str            # "exercise" | "question"
    max_points: float
    title: str


@dataclass
class Counted:
    """The result that counts now for a student on an assignment: its submission, the stored result, the result as
    every view shows it (marks, adjustments, late policy), when it was graded, and when asking closes (None: the
    course takes no reviews)."""

    submission: int
    stored: dict[str, Any]
    shown: dict[str, Any]
    graded_at: dt.datetime
    closes: dt.datetime | None

    def points(self, item: str) -> float | None:
        """The item's points in the result as shown (None: a written answer no one has graded yet)."""
        for e in self.shown.get("exercises") or ():
            if str(e.get("exercise")) == item:
                return float(e.get("points") or 0.0)
        for q in self.shown.get("questions") or ():
            if str(q.get("question")) == item:
                return None if q.get("points") is None else float(q["points"])
        return None


def items(course: Course, assignment: str, lang: str = "en") -> list[Item]:
    """The assignment's exercises, then its written questions (none for an unknown assignment)."""
    found = next((a for a in course.assignments if a.id == assignment), None)
    if found is None:
        return []
    return ([Item(e.id, "exercise", float(e.points), e.title_in(lang)) for e in found.exercises]
            + [Item(q.id, "question", float(q.points), q.title_in(lang)) for q in found.questions])


def local(when: dt.datetime, course: Course) -> str:
    """A time in the course's zone, as the pages write it (:func:`autograder.course.clock.readable`)."""
    return readable(when, course.zone)


def counted(engine: Engine, course: Course, standing: Standing, student: str, assignment: str) -> Counted | None:
    """The counted result of ``student`` on ``assignment`` and its review window; None before any result."""
    with Session(engine) as session:
        _points, _max, sid = history.counted_now(session, standing, course.service.counts, student, assignment)
        if sid is None:
            return None
        row = session.execute(select(Result.result, Result.graded_at).where(Result.submission_id == sid)).one()
    stored = dict(row.result)
    closes = None
    if course.service.review_days > 0:
        due = standing.due(student, assignment)
        start = row.graded_at if due is None or row.graded_at > due else due
        closes = start + dt.timedelta(days=course.service.review_days)
    return Counted(sid, stored, standing.result(stored), row.graded_at, closes)


def _item(course: Course, assignment: str, item: str) -> Item:
    if assignment not in {a.id for a in course.assignments}:
        raise ApiError(422, "service.unknown_assignment", assignment=assignment[:100],
                       known=", ".join(a.id for a in course.assignments))
    found = next((i for i in items(course, assignment) if i.id == item), None)
    if found is None:
        raise ApiError(422, "service.review_item", assignment=assignment, item=item[:20])
    return found


def _text(value: str, *, required: str) -> str:
    """A message or an answer: stripped, 1 to :data:`MESSAGE_CHARS` characters (more is refused, not cut), made
    printable text by the one gate of student text. ``required``: the refusal's key when it is empty."""
    text = value.strip()
    if len(text) > MESSAGE_CHARS:
        raise ApiError(422, "service.review_too_long", limit=MESSAGE_CHARS, n=len(text))
    text = clean(text, MESSAGE_CHARS).strip()
    if not text:
        raise ApiError(422, required)
    return text


# -- the student asks -----------------------------------------------------------------------------------------
def ask(engine: Engine, course: Course, student: str, assignment: str, item: str, message: str, *,
        now: dt.datetime | None = None) -> Any:
    """Store a request for a review of ``item`` (an exercise or written question of ``assignment``) of the
    student's counted result: the new row. Refused (:class:`ApiError`, nothing stored): an item not of that
    assignment, an empty or too long message, no counted result, a written answer not graded yet, the window
    closed (or reviews off), an open request for the same item."""
    found = _item(course, assignment, item)
    text = _text(message, required="service.review_empty")
    if course.service.review_days <= 0:
        raise ApiError(409, "service.reviews_off")
    standing = Standing(engine, course)
    now_counted = counted(engine, course, standing, student, assignment)
    if now_counted is None:
        raise ApiError(409, "service.review_no_result", assignment=assignment)
    if found.kind == "question" and now_counted.points(item) is None:
        raise ApiError(409, "service.review_ungraded", item=item)
    if now_counted.closes is None:              # (review_days > 0: always a window; said plainly all the same)
        raise ApiError(409, "service.reviews_off")
    if (now or utcnow()) > now_counted.closes:
        raise ApiError(409, "service.review_closed", assignment=assignment, when=local(now_counted.closes, course))
    with Session(writing(engine)) as session, session.begin():
        Q.lock_student(session, f"review:{student}")       # (one open request per item, however many tabs ask)
        already = session.execute(select(Review.id).where(
            Review.student == student, Review.assignment == assignment, Review.item == item,
            Review.state == "open")).first()
        if already is not None:
            raise ApiError(409, "service.review_open", item=item)
        review = Review(student=student, assignment=assignment, item=item, submission_id=now_counted.submission,
                        message=text, asked_at=utcnow(), state="open", answer="",
                        old_points=now_counted.points(item), version=1)
        session.add(review)
        session.flush()
        review_id = review.id
    return get(engine, review_id)


# -- the staff answer -----------------------------------------------------------------------------------------
def get(engine: Engine, review_id: int) -> Any:
    """One request (None: no such request)."""
    with engine.connect() as conn:
        return conn.execute(select(Review).where(Review.id == review_id)).first()


def _conflict(engine: Engine, review_id: int) -> ApiError:
    now = get(engine, review_id)
    return ApiError(409, "service.review_conflict", who=(now.answered_by if now is not None else "") or "—")


def answer(engine: Engine, course: Course, review_id: int, who: str, accept: bool, new_points: float | None,
           reason: str, version: int) -> Any:
    """Answer an open request from its ``version``: accept it with ``new_points`` (0 to the item's points; the
    score changes at once, the student reads ``reason``) or decline it with a ``reason``. The answered row.
    Refused (:class:`ApiError`, nothing changed): no such request, a version no longer current (someone answered
    first: their answer stands), points out of bounds, no reason, the item's score changed meanwhile."""
    review = get(engine, review_id)
    if review is None:
        raise ApiError(404, "service.review_missing", review=str(review_id))
    if review.state != "open" or review.version != version:
        raise _conflict(engine, review_id)
    found = _item(course, review.assignment, review.item)
    text = _text(reason, required="service.review_reason")
    standing = Standing(engine, course)
    now_counted = counted(engine, course, standing, review.student, review.assignment)
    old = now_counted.points(review.item) if now_counted is not None else None
    if not accept:
        with writing(engine).begin() as conn:
            done = conn.execute(update(Review).where(Review.id == review_id, Review.version == version,
                                                     Review.state == "open")
                                .values(state="declined", answer=text, old_points=old, new_points=None,
                                        answered_by=who[:200], answered_at=utcnow(), version=version + 1))
            if done.rowcount != 1:
                raise _conflict(engine, review_id)
            audit.record(conn, who, "review.decline", review.student,
                         f"{review.assignment} {review.item} (request {review_id}): {text}")
            mail.add(conn, course, "review_answer", student=review.student, assignment=review.assignment,
                     item=review.item, ref=review_id)          # (the student's mail of it, if course.yml sends one)
        return get(engine, review_id)
    if new_points is None or not math.isfinite(new_points) or not 0.0 <= new_points <= found.max_points:
        raise ApiError(422, "service.review_points", max=fmt(found.max_points))
    if now_counted is None:
        raise ApiError(409, "service.review_no_result", assignment=review.assignment)
    # Claim the version first: of two answers to it, only one goes on to change the score.
    with writing(engine).begin() as conn:
        claimed = conn.execute(update(Review).where(Review.id == review_id, Review.version == version,
                                                    Review.state == "open").values(version=version + 1))
        if claimed.rowcount != 1:
            raise _conflict(engine, review_id)
    try:
        _change_score(engine, course, standing, now_counted, review, found, new_points, text, who)
    except marks.Conflict:
        raise ApiError(409, "service.review_score_changed", item=review.item) from None
    with writing(engine).begin() as conn:
        conn.execute(update(Review).where(Review.id == review_id, Review.version == version + 1)
                     .values(state="accepted", answer=text, old_points=old, new_points=new_points,
                             answered_by=who[:200], answered_at=utcnow(), version=version + 2))
        audit.record(conn, who, "review.accept", review.student,
                     f"{review.assignment} {review.item} (request {review_id}): "
                     f"{'—' if old is None else fmt(old)} → {fmt(new_points)}: {text}")
        mail.add(conn, course, "review_answer", student=review.student, assignment=review.assignment,
                 item=review.item, ref=review_id)
    history.note(engine, course, [(review.student, review.assignment)], why="review", who=who,
                 detail=f"{review.item} (request {review_id})")
    return get(engine, review_id)


def _change_score(engine: Engine, course: Course, standing: Standing, now_counted: Counted, review: Any, found: Item,
                  new_points: float, reason: str, who: str) -> None:
    """The item's new points on the counted submission, compare-and-set against the mark or adjustment read with
    ``standing`` (:class:`autograder.service.marks.Conflict` where another save came since)."""
    stored = now_counted.stored
    if found.kind == "exercise":
        sha = str(stored.get("sha256") or "")          # (the key marks.apply looks adjustments up by)
        adj = standing.book.adjustment(review.student, review.assignment, sha, review.item)
        marks.save_adjustment(engine, course, student=review.student, assignment=review.assignment, sha256=sha,
                              exercise=review.item, points=new_points, reason=reason, who=who,
                              version=adj.version if adj is not None else 0)
        return
    entry = next((q for q in stored.get("questions") or () if str(q.get("question")) == review.item), None)
    sha = str((entry or {}).get("sha256") or "")
    mark = standing.book.mark(review.student, review.assignment, review.item, sha)
    # The comment becomes the review's answer: the old one explained the old points, and beside the new ones it
    # would say the opposite of the decision.
    marks.save_mark(engine, course, student=review.student, assignment=review.assignment, question=review.item,
                    answer_sha=sha, rubric=list(mark.rubric or ()) if mark is not None else [], comment=reason,
                    who=who, version=mark.version if mark is not None else 0, points=new_points)


# -- reading ---------------------------------------------------------------------------------------------------
def requests(engine: Engine, *, student: str | None = None, answered: int = ANSWERED_SHOWN) -> list[Any]:
    """The open requests, oldest first, then the ``answered`` newest answered ones (one student's where ``student``
    is given)."""
    query = select(Review)
    if student is not None:
        query = query.where(Review.student == student)
    with engine.connect() as conn:
        waiting = conn.execute(query.where(Review.state == "open").order_by(Review.asked_at, Review.id)).all()
        done = conn.execute(query.where(Review.state != "open")
                            .order_by(Review.answered_at.desc(), Review.id.desc()).limit(answered)).all()
    return [*waiting, *done]


def open_count(engine: Engine) -> int:
    """How many requests wait for an answer."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(Review).where(Review.state == "open")).scalar_one())


def student_rows(rows: list[Any]) -> dict[str, list[Any]]:
    """Requests by assignment, their order kept."""
    out: dict[str, list[Any]] = {}
    for r in rows:
        out.setdefault(r.assignment, []).append(r)
    return out
