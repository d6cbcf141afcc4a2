"""The service's tables (SQLAlchemy 2), but the LMS's (:mod:`autograder.service.lti_tables`, on the same
:class:`Base`).

The notebooks received, the grading queue, the results, who may call (tokens, the roster, page sessions), what the
staff did, the history of the scores that count, the hand grading (marks, double marks, adjustments), the review
requests, the extensions granted and the mail outbox. The classes declare the schema the newest migration leaves
(autograder/service/migrations, run by :func:`autograder.service.db.upgrade`): a change here is a new migration
there, never ``create_all``. Every time column is a :class:`UTCDateTime`, an aware UTC moment on SQLite and
PostgreSQL alike. It trusts what the modules that own each table write into it; the one query here,
:func:`granted_extensions`, only reads.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autograder.course.clock import as_utc


class Base(DeclarativeBase):
    pass


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Every time column of the service: a moment, stored in UTC and read back as an aware UTC datetime, on
    SQLite and PostgreSQL alike. SQLite has no time type: SQLAlchemy keeps the wall-clock reading as text and
    drops the zone, so an aware time is turned into UTC before it is stored (a due date written at +08:00 would
    otherwise come back eight hours off) and a naive one is taken as UTC. The column underneath is unchanged,
    ``DateTime(timezone=True)`` (TIMESTAMP WITH TIME ZONE on PostgreSQL): the migrations hold."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return None if value is None else as_utc(value)


class Submission(Base):
    """A notebook as received: its bytes are stored here before the upload is acknowledged."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100), index=True)
    filename: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    #: The server's receipt time: the submission time for the late policy (never the student's clock).
    received_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Job(Base):
    """One grading of one submission: queued, then running under a lease, then done (or failed)."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    #: The submission's student (the fair share counts and orders by it, without a join).
    student: Mapped[str] = mapped_column(String(200), index=True, default="", server_default="")
    #: Added to the job's rank among its student's waiting jobs (0 for an upload, the per-student bound for a
    #: regrade): workers take the lowest rank first (autograder.service.queue).
    round: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    #: The worker holding the job and until when; a lease that ran out makes the job claimable again.
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claims: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: When a worker last took it, and until when its student is charged for the worker time it took (the fair
    #: share: a student's next job is eligible from then; autograder.service.queue).
    claimed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    charged_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class Result(Base):
    """One result per submission (grading is deterministic: a job graded twice writes this row once)."""

    __tablename__ = "results"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(Text)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    graded_by: Mapped[str] = mapped_column(String(200))
    graded_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), server_default=func.now())


class Token(Base):
    """Who may call the API: a student (their own submissions only), a TA or an instructor (everything; only an
    instructor changes the roster or revokes a token). Only the token's sha256 is kept; the token itself is shown
    once, when it is issued. A revoked or expired token stops at once (the API's next call, the pages' next
    request: :func:`autograder.service.sessions.find` checks the token a session was opened with)."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))          # student | ta | instructor
    who: Mapped[str] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    issued_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


class Person(Base):
    """One student of the class list (``autograder serve roster``): the ids the LMS knows them by, kept across
    imports (a new import updates a row; tokens are never touched by it)."""

    __tablename__ = "people"

    student: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    section: Mapped[str] = mapped_column(String(100), default="")
    canvas_id: Mapped[str] = mapped_column(String(100), default="")
    moodle_id_number: Mapped[str] = mapped_column(String(100), default="")
    added_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Action(Base):
    """What the staff did, who and when: tokens issued and revoked, the roster imported or changed, extensions
    granted and revoked, submissions queued again (``autograder.service.audit``)."""

    __tablename__ = "actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    who: Mapped[str] = mapped_column(String(200))          # the staff member (or "cli" for the command line)
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(200), default="", index=True)
    detail: Mapped[str] = mapped_column(Text, default="")


class ScoreChange(Base):
    """A change of the score that counts for one student and assignment: old (None before the first grade) and
    new, why (graded, regrade, extension, late_policy; manual and review later), who, when
    (``autograder.service.history``)."""

    __tablename__ = "score_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    old_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    new_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The maximum the new score was out of: the assignment's (autograder.course.written.maximum), its written answers'
    #: points included, graded or not (a row from before revision 0010: the graded part's).
    max_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Of that maximum, the written answers' points no person had graded yet (None: a row from before 0010).
    waiting_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    why: Mapped[str] = mapped_column(String(20))
    who: Mapped[str] = mapped_column(String(200))
    submission_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")


class Mark(Base):
    """A person's grade of one written answer (``autograder.service.marks``): the rubric items ticked, the points
    they give, a comment. It belongs to the answer's text (its sha256), so a submission with the same answer keeps
    it; ``version`` counts its saves (two graders at once: the second save of the same version is refused)."""

    __tablename__ = "marks"
    __table_args__ = (UniqueConstraint("student", "assignment", "question", "answer_sha", name="uq_marks_answer"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    question: Mapped[str] = mapped_column(String(20))
    answer_sha: Mapped[str] = mapped_column(String(64))
    points: Mapped[float] = mapped_column(Float)
    rubric: Mapped[list[str]] = mapped_column(JSON)
    comment: Mapped[str] = mapped_column(Text, default="")
    graded_by: Mapped[str] = mapped_column(String(200))
    graded_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)


class DoubleMark(Base):
    """One of the two blind marks of a written answer of a double-marked question (course.yml's
    ``service.double_marking``; :mod:`autograder.service.double_marking`): ``marker`` 1 or 2, each by a different
    person. It counts for nothing itself: the mark that counts is the :class:`Mark` the two make together (their
    mean, where they agree) or an instructor's decision. ``version`` as a mark's (compare-and-set)."""

    __tablename__ = "double_marks"
    __table_args__ = (UniqueConstraint("student", "assignment", "question", "answer_sha", "marker",
                                       name="uq_double_marks_answer"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    question: Mapped[str] = mapped_column(String(20))
    answer_sha: Mapped[str] = mapped_column(String(64))
    marker: Mapped[int] = mapped_column(Integer)
    points: Mapped[float] = mapped_column(Float)
    rubric: Mapped[list[str]] = mapped_column(JSON)
    comment: Mapped[str] = mapped_column(Text, default="")
    graded_by: Mapped[str] = mapped_column(String(200))
    graded_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)


class Adjustment(Base):
    """The staff's change of an exercise's automatic points in one notebook (its sha256), with the reason the
    student reads."""

    __tablename__ = "adjustments"
    __table_args__ = (UniqueConstraint("student", "assignment", "sha256", "exercise", name="uq_adjustments_exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    sha256: Mapped[str] = mapped_column(String(64))
    exercise: Mapped[str] = mapped_column(String(20))
    points: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    who: Mapped[str] = mapped_column(String(200))
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)


class Review(Base):
    """A student's request for a review of one exercise or written answer, and the staff's answer (accepted with
    new points, or declined with a reason)."""

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    item: Mapped[str] = mapped_column(String(20))
    submission_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text)
    asked_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    state: Mapped[str] = mapped_column(String(12), default="open", index=True)     # open | accepted | declined
    answer: Mapped[str] = mapped_column(Text, default="")
    old_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    new_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    answered_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    answered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)


class WebSession(Base):
    """A signed-in browser: the cookie holds a random value, the table only its sha256, the caller and the
    session's CSRF token (every form and every write through the API from a page must carry it)."""

    __tablename__ = "web_sessions"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    who: Mapped[str] = mapped_column(String(200))
    csrf: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), index=True)
    #: The kit token the session was opened with (None for a JupyterHub sign-in): revoked, the session ends too.
    token_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    #: The LMS membership (``lti_users``) a launch opened the session with: gone, another role, its LMS course no longer
    #: bound, or (a student) off the roster, the session ends too.
    lti_member_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)


class ExtensionGrant(Base):
    """An extension granted from the instructor's dashboard: a new due date for one student and assignment
    (course.yml's extensions file still wins for a pair it names)."""

    __tablename__ = "extensions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    due: Mapped[dt.datetime] = mapped_column(UTCDateTime())
    reason: Mapped[str] = mapped_column(Text, default="")
    granted_by: Mapped[str] = mapped_column(String(200))
    granted_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


def granted_extensions(engine: Engine) -> list[Any]:
    """The extensions granted from the dashboard, the latest per student and assignment, as the late policy
    takes them (autograder.course.late_policy.Extension)."""
    from autograder.course.late_policy import Extension  # noqa: PLC0415 - loads pydantic

    with engine.connect() as conn:
        rows = conn.execute(select(ExtensionGrant).order_by(ExtensionGrant.id)).all()
    latest = {}
    for r in rows:
        latest[(r.student, r.assignment)] = Extension(student=r.student, assignment=r.assignment, due=r.due,
                                                      reason=r.reason)
    return list(latest.values())


class MailOut(Base):
    """The mail outbox (``autograder.service.mail``): one e-mail to a student, queued in the transaction of what it
    tells of (a first result, a mark saved, a review answered) and sent by ``autograder serve``'s mail loop; its text
    is written when it is sent, from the rows it names (``item``, ``ref``). pending until the SMTP server took it
    (sent), or it cannot be sent (skipped: no address, the thing it tells of gone; failed: the server refused it for
    good); held by one sender until ``held_until``; retried with backoff (``next_try_at``) meanwhile."""

    __tablename__ = "mail_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))            # verdict | hand_grade | review_answer
    student: Mapped[str] = mapped_column(String(200), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    #: What it tells of, as the pages name it: a submission's number, a written question, a review request's number.
    item: Mapped[str] = mapped_column(String(40), default="")
    #: The row it tells of: the submission (verdict), the mark (hand_grade), the review request (review_answer).
    ref: Mapped[int | None] = mapped_column(Integer, nullable=True)
    state: Mapped[str] = mapped_column(String(12), default="pending", index=True)  # pending|sent|skipped|failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_try_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    held_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    sent_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")
