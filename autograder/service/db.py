"""The service's database: its tables, its engine, its migrations.

One database holds everything the service must not lose: every notebook uploaded (its bytes and
their sha256, stored before the upload is acknowledged), the queue of grading jobs, and one result
per submission. The embedded default is one SQLite file in WAL mode (readers never wait for the
writer; ``busy_timeout`` makes a second writer wait instead of failing); a deployment passes a
PostgreSQL URL (``postgresql+psycopg://...``). The schema is Alembic's to create and change
(:func:`upgrade`), never ``create_all``, so a database made by an older kit is migrated, not broken.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    event,
    false,
    func,
    select,
)
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autograder.course.clock import as_utc
from autograder.core.errors import AutograderError

#: How long a writer waits for SQLite's lock before it reports the database busy, in ms.
SQLITE_BUSY_MS = 30_000


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


def private_folder(folder: Path) -> Path:
    """``folder``, made if missing, readable by its owner only (0700): the service's data folder."""
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def private_sqlite(path: Path) -> None:
    """A SQLite database file and its WAL and shared-memory files readable by their owner only (0600), from
    their creation: every notebook and every hidden check's message is in them. SQLite gives the -wal and
    -shm files the database file's own mode, so the file is made 0600 before SQLite first opens it."""
    if not path.exists() and path.parent.is_dir():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
    for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if each.stat().st_mode & 0o077:
                os.chmod(each, 0o600)
        except OSError:
            pass


def engine_for(url: str) -> Engine:
    """An engine for ``url``: a path or ``sqlite:///FILE`` gives SQLite in WAL mode, its files 0600."""
    if "://" not in url:
        url = f"sqlite:///{Path(url).resolve()}"
    # pool_pre_ping: a connection the server dropped (PostgreSQL restarted) is replaced, not used and failed.
    engine = create_engine(url, future=True, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        if engine.url.database and engine.url.database != ":memory:":
            private_sqlite(Path(engine.url.database))
        @event.listens_for(engine, "connect")
        def _sqlite(dbapi: Any, _record: Any) -> None:
            # pysqlite's own transaction handling off: the queue issues BEGIN IMMEDIATE itself.
            dbapi.isolation_level = None
            cursor = dbapi.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # A writer (writing(engine)) takes the lock at once: no deadlock upgrading it; a reader takes none,
            # and in WAL mode never waits for the writer.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("writing") else "BEGIN")
    return engine


def writing(engine: Engine) -> Engine:
    """``engine`` for a transaction that writes (on SQLite it begins IMMEDIATE)."""
    return engine.execution_options(writing=True)


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest schema (Alembic; creates it when empty). A database that cannot
    be reached is one ERROR line naming it (its password hidden), never a traceback."""
    from alembic import command  # noqa: PLC0415 - loads alembic: migrations only
    from alembic.config import Config  # noqa: PLC0415 - loads alembic: migrations only


    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    try:
        with writing(engine).begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        if engine.dialect.name == "sqlite" and engine.url.database and engine.url.database != ":memory:":
            private_sqlite(Path(engine.url.database))       # (a database an older kit made 0644)
    except OperationalError as exc:
        where = engine.url.render_as_string(hide_password=True)
        why = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:300]
        raise AutograderError(f"--database {where}: cannot be opened ({why})",
                              hint="a SQLite file in a folder that exists, or a PostgreSQL server that is running "
                                   "(postgresql+psycopg://USER@HOST/DB)") from None


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


class LtiPlatform(Base):
    """An LMS registered as an LTI 1.3 platform (``autograder serve lti register``): who signs its launches
    (issuer, client id, deployments, its JWKS) and where its OAuth2 token endpoint is (``autograder.service.lti``).
    ``changes_seen``: the last score change the passback has turned into outbox rows."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_client"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issuer: Mapped[str] = mapped_column(String(300))
    client_id: Mapped[str] = mapped_column(String(200))
    deployments: Mapped[list[str]] = mapped_column(JSON)
    auth_url: Mapped[str] = mapped_column(String(500))
    token_url: Mapped[str] = mapped_column(String(500))
    jwks_url: Mapped[str] = mapped_column(String(500))
    token_audience: Mapped[str] = mapped_column(String(500), default="", server_default="")
    #: A student who launches and is not on the roster is added to it (else refused).
    enrol: Mapped[bool] = mapped_column(Boolean, default=False)
    changes_seen: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    added_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiContext(Base):
    """A course of the LMS the tool was launched in: its Assignment and Grade Services' line items URL and
    scopes, its Names and Role Provisioning Services' members URL (from the launches' claims)."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id", name="uq_lti_contexts_context"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    context_id: Mapped[str] = mapped_column(String(300))
    deployment_id: Mapped[str] = mapped_column(String(300))
    title: Mapped[str] = mapped_column(String(300), default="")
    lineitems_url: Mapped[str] = mapped_column(String(500), default="")
    scopes: Mapped[list[str]] = mapped_column(JSON)
    memberships_url: Mapped[str] = mapped_column(String(500), default="")
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: The service serves this LMS course (its instructor bound it: ``serve lti register --course``, ``serve lti bind``
    #: or the dashboard); a launch from a course not bound is refused and the course listed as asking.
    bound: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    bound_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    bound_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class LtiUser(Base):
    """A member of an LMS course (a launch, or the course's member list): the platform's user id (``sub``), the
    student it is on the roster (or the staff member's name), and the role the LMS gives."""

    __tablename__ = "lti_users"
    __table_args__ = (UniqueConstraint("context_id", "sub", name="uq_lti_users_member"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id"))
    sub: Mapped[str] = mapped_column(String(300))
    who: Mapped[str] = mapped_column(String(200), index=True)
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiLineItem(Base):
    """The one line item (gradebook column) of an assignment in an LMS course."""

    __tablename__ = "lti_line_items"
    __table_args__ = (UniqueConstraint("context_id", "assignment", name="uq_lti_line_items_assignment"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id"))
    assignment: Mapped[str] = mapped_column(String(100))
    url: Mapped[str] = mapped_column(String(500))


class LtiNonce(Base):
    """The nonce of every launch accepted, until its token expires: a token sent again is refused."""

    __tablename__ = "lti_nonces"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), index=True)


class LtiScore(Base):
    """The passback's outbox: one counted score to send to one member's line item, in the order of the score
    changes; pending until the platform took it (sent), or found equal to the last one sent (same); retried with
    backoff meanwhile."""

    __tablename__ = "lti_scores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("lti_users.id"), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    change_id: Mapped[int] = mapped_column(Integer)
    points: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    waiting_points: Mapped[float | None] = mapped_column(Float, nullable=True)     # (as its score change's)
    changed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(8), default="pending", index=True)    # pending | sent | same
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_try_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    error: Mapped[str] = mapped_column(Text, default="")
    sent_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)


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
