"""Every query the routes make, in one place: a route handler holds no SQL.

Each function takes the engine (and plain values) and returns rows or plain data; none raises an HTTP
error (a route decides what a missing row means to its caller).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Engine, Row

from autograder.course.clock import readable
from autograder.service import audit
from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext, LtiScore, LtiUser
from autograder.service.tables import ExtensionGrant, Job, Person, Result, Submission, Token

#: At most this many rows in one answer of the API's listing, which pages on (``?after=``): each row carries its
#: score as the late policy makes it now, a stored result read and settled again.
API_ROWS = 1000
#: At most this many rows in a page's listing.
PAGE_ROWS = 2000


def submission(engine: Engine, submission_id: int) -> tuple[Any, Any, Any]:
    """(the submission's id, student, assignment, received_at; its latest job's id and state; its stored
    result or None). The first is None when there is no such submission."""
    with engine.connect() as conn:
        sub = conn.execute(select(Submission.id, Submission.student, Submission.assignment,
                                  Submission.received_at).where(Submission.id == submission_id)).first()
        if sub is None:
            return None, None, None
        job = conn.execute(select(Job.id, Job.state).where(Job.submission_id == submission_id)
                           .order_by(Job.id.desc()).limit(1)).first()
        result = conn.execute(select(Result.result).where(Result.submission_id == submission_id)).scalar()
    return sub, job, result


def submissions(engine: Engine, *, student: str | None = None, assignment: str | None = None,
                after: int | None = None, limit: int = API_ROWS) -> Sequence[Any]:
    """(id, student, assignment, received_at, state, result) of the submissions after the one ``after`` names,
    oldest first, at most ``limit`` of them: one student's where ``student`` is given. ``state`` is the latest
    job's (None without one), ``result`` the stored result (None until graded)."""
    latest = select(Job.submission_id, func.max(Job.id).label("job")).group_by(Job.submission_id).subquery()
    # (outer joins: a submission is listed whatever became of its job)
    query = (select(Submission.id, Submission.student, Submission.assignment, Submission.received_at,
                    Job.state, Result.result)
             .join(latest, latest.c.submission_id == Submission.id, isouter=True)
             .join(Job, Job.id == latest.c.job, isouter=True)
             .join(Result, Result.submission_id == Submission.id, isouter=True)
             .order_by(Submission.id))
    if student is not None:
        query = query.where(Submission.student == student)
    if assignment is not None:
        query = query.where(Submission.assignment == assignment)
    if after is not None:
        query = query.where(Submission.id > after)
    with engine.connect() as conn:
        return conn.execute(query.limit(limit)).all()


def latest_rows(engine: Engine, *, student: str | None = None, assignment: str | None = None,
                state: str | None = None, by_score: bool = False, limit: int | None = PAGE_ROWS) -> Sequence[Row[Any]]:
    """Each submission with its latest job (id, state) and its stored result where graded: the pages' listing."""
    latest = (select(Job.submission_id, func.max(Job.id).label("job")).group_by(Job.submission_id).subquery())
    query = (select(Submission.id, Submission.student, Submission.assignment, Submission.received_at,
                    Job.id.label("job"), Job.state, Result.points, Result.max_points, Result.result)
             .join(latest, latest.c.submission_id == Submission.id)
             .join(Job, Job.id == latest.c.job)
             .join(Result, Result.submission_id == Submission.id, isouter=True))
    if student is not None:
        query = query.where(Submission.student == student)
    if assignment:
        query = query.where(Submission.assignment == assignment)
    if state:
        query = query.where(Job.state == state)
    query = query.order_by(Result.points.desc().nulls_last(), Submission.id.desc()) if by_score \
        else query.order_by(Submission.id.desc())
    with engine.connect() as conn:
        return conn.execute(query.limit(limit) if limit is not None else query).all()


def submitted_since(engine: Engine, student: str, assignment: str, since: dt.datetime) -> int:
    """How many submissions ``student`` made of ``assignment`` since ``since`` (an aware time)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(Submission).where(
            Submission.student == student, Submission.assignment == assignment,
            Submission.received_at >= since)).scalar_one())


def stored_result(engine: Engine, submission_id: int) -> dict[str, Any] | None:
    """The result stored for a submission (as the worker recorded it: no late policy or mark applied since), or None
    while it has none."""
    with engine.connect() as conn:
        found: dict[str, Any] | None = conn.execute(select(Result.result)
                                                    .where(Result.submission_id == submission_id)).scalar()
    return found


def graded_notebook(engine: Engine, submission_id: int) -> Row[Any] | None:
    """(student, assignment, data, result) of a graded submission, or None."""
    with engine.connect() as conn:
        return conn.execute(select(Submission.student, Submission.assignment, Submission.data, Result.result)
                            .join(Result, Result.submission_id == Submission.id)
                            .where(Submission.id == submission_id)).first()


def submission_ids(engine: Engine, *, submission_id: int | None = None, assignment: str | None = None) -> list[int]:
    """The ids of one submission (where it exists) or of every submission of an assignment."""
    query = select(Submission.id)
    if submission_id is not None:
        query = query.where(Submission.id == submission_id)
    if assignment is not None:
        query = query.where(Submission.assignment == assignment)
    with engine.connect() as conn:
        return list(conn.execute(query).scalars())


def known_students(engine: Engine) -> set[str]:
    """The class as the service knows it: the roster, students with a token, or with a submission."""
    with engine.connect() as conn:
        known = set(conn.execute(select(Person.student)).scalars())
        known |= set(conn.execute(select(Token.who).where(Token.role == "student")).scalars())
        known |= set(conn.execute(select(Submission.student).distinct()).scalars())
    return known


def grant_extension(engine: Engine, *, student: str, assignment: str, due: dt.datetime, reason: str,
                    granted_by: str, zone: dt.tzinfo | None = None) -> None:
    """Grant ``student`` a new due date; the audit's line says it as people read dates (in ``zone``, the
    course's)."""
    with writing(engine).begin() as conn:
        conn.execute(insert(ExtensionGrant).values(student=student, assignment=assignment, due=due, reason=reason,
                                                   granted_by=granted_by))
        audit.record(conn, granted_by, "extension.grant", target=student,
                     detail=f"{assignment}: due {readable(due, zone)}" + (f" ({reason})" if reason else ""))


def revoke_extensions(engine: Engine, student: str, assignment: str, *, by: str) -> int:
    """Every grant of ``student`` on ``assignment`` removed: how many there were."""
    with writing(engine).begin() as conn:
        gone = int(conn.execute(delete(ExtensionGrant).where(ExtensionGrant.student == student,
                                                             ExtensionGrant.assignment == assignment)).rowcount or 0)
        if gone:
            audit.record(conn, by, "extension.revoke", target=student, detail=f"{assignment}: {gone} grant(s)")
    return gone


def lti_overview(engine: Engine) -> tuple[Sequence[Any], Sequence[Any]]:
    """The staff's LTI page, read at once: (the LMS courses: id, title, context_id, bound, lineitems_url,
    memberships_url and how many ``members`` the service knows of each, the bound ones first; each score's
    passback: who, assignment, state, points, error, attempts, in the order the scores were queued)."""
    with engine.connect() as conn:
        contexts = conn.execute(select(LtiContext.id, LtiContext.title, LtiContext.context_id, LtiContext.bound,
                                       LtiContext.lineitems_url, LtiContext.memberships_url,
                                       func.count(LtiUser.id).label("members"))
                                .join(LtiUser, LtiUser.context_id == LtiContext.id, isouter=True)
                                .group_by(LtiContext.id).order_by(LtiContext.bound.desc(), LtiContext.id)).all()
        scores = conn.execute(select(LtiUser.who, LtiScore.assignment, LtiScore.state, LtiScore.points,
                                     LtiScore.error, LtiScore.attempts).join(LtiUser, LtiUser.id == LtiScore.member_id)
                              .order_by(LtiScore.id)).all()
    return contexts, scores
