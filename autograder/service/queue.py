"""The queue of grading jobs: a table in the service's own database, no broker.

A submission is stored with its job in one transaction (:func:`store`): once that commits, the
submission will be graded, whatever crashes afterwards. A worker claims the oldest claimable job
with a lease (:func:`claim`): queued, or running under a lease that ran out (its worker died). On
SQLite one ``UPDATE ... RETURNING`` inside ``BEGIN IMMEDIATE`` claims it (one writer at a time: two
workers never get the same job); on PostgreSQL ``SELECT ... FOR UPDATE SKIP LOCKED`` picks it
without waiting for the other workers' rows. The holder renews its lease (:func:`renew`) and
records the result (:func:`complete`); a worker whose lease was taken over records nothing, and
since grading is deterministic (the same file gives the same score) a submission graded twice
still has exactly one result row.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import DateTime, bindparam, select, update
from sqlalchemy import text as sql
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.service.db import Job, Result, Submission, utcnow, writing


#: Times bound to the raw statements as the tables store them (SQLite keeps text: one format for all).
_NOW = bindparam("now", type_=DateTime(timezone=True))
_UNTIL = bindparam("until", type_=DateTime(timezone=True))


def _aware(value: dt.datetime) -> dt.datetime:
    """A stored time as UTC (SQLite gives it back without its zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Claimed:
    """A job a worker holds, with what it needs to grade it."""

    job: int
    submission: int
    student: str
    assignment: str
    filename: str
    data: bytes
    received_at: dt.datetime


def store(engine: Engine, *, student: str, assignment: str, filename: str, data: bytes,
          received_at: dt.datetime | None = None) -> tuple[int, int]:
    """Store a submission and queue its job, in one transaction: (submission id, job id)."""
    with Session(writing(engine)) as session, session.begin():
        sub = Submission(student=student, assignment=assignment, filename=filename, data=data,
                         sha256=hashlib.sha256(data).hexdigest(), received_at=received_at or utcnow())
        session.add(sub)
        session.flush()
        job = Job(submission_id=sub.id)
        session.add(job)
        session.flush()
        return sub.id, job.id


def requeue(engine: Engine, submission_ids: list[int]) -> list[int]:
    """A new job for each of these submissions (a check changed: regrade); the new job ids."""
    with Session(writing(engine)) as session, session.begin():
        jobs = [Job(submission_id=s) for s in submission_ids]
        session.add_all(jobs)
        session.flush()
        return [j.id for j in jobs]


def claim(engine: Engine, owner: str, lease_seconds: float, now: dt.datetime | None = None) -> Claimed | None:
    """The oldest job nobody holds (queued, or a lease that ran out), now held by ``owner``; None if none."""
    now = now or utcnow()
    until = now + dt.timedelta(seconds=lease_seconds)
    claimable = "(state = 'queued' OR (state = 'running' AND lease_until < :now))"
    with writing(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            row = conn.execute(sql(f"SELECT id FROM jobs WHERE {claimable} ORDER BY id LIMIT 1 "
                                    "FOR UPDATE SKIP LOCKED").bindparams(_NOW), {"now": now}).first()
            if row is None:
                return None
            got = conn.execute(sql("UPDATE jobs SET state = 'running', owner = :owner, lease_until = :until, "
                                    "claims = claims + 1 WHERE id = :id RETURNING id, submission_id")
                               .bindparams(_UNTIL), {"owner": owner, "until": until, "id": row[0]}).first()
        else:
            got = conn.execute(sql(f"UPDATE jobs SET state = 'running', owner = :owner, lease_until = :until, "
                                    f"claims = claims + 1 WHERE id = (SELECT id FROM jobs WHERE {claimable} "
                                    "ORDER BY id LIMIT 1) RETURNING id, submission_id").bindparams(_NOW, _UNTIL),
                               {"owner": owner, "until": until, "now": now}).first()
        if got is None:
            return None
        sub = conn.execute(select(Submission.student, Submission.assignment, Submission.filename, Submission.data,
                                  Submission.received_at).where(Submission.id == got[1])).one()
    return Claimed(int(got[0]), int(got[1]), sub.student, sub.assignment, sub.filename, bytes(sub.data),
                   _aware(sub.received_at))


def renew(engine: Engine, job: int, owner: str, lease_seconds: float) -> bool:
    """Extend ``owner``'s lease; False when the job is no longer theirs (their lease ran out and another took it)."""
    until = utcnow() + dt.timedelta(seconds=lease_seconds)
    with writing(engine).begin() as conn:
        done = conn.execute(update(Job).where(Job.id == job, Job.owner == owner, Job.state == "running")
                            .values(lease_until=until))
    return bool(done.rowcount)


def complete(engine: Engine, job: int, owner: str, result: dict[str, Any]) -> bool:
    """Record the result of ``owner``'s job: one row per submission; False (nothing written) when the
    job is no longer ``owner``'s."""
    with Session(writing(engine)) as session, session.begin():
        held = session.execute(update(Job).where(Job.id == job, Job.owner == owner, Job.state == "running")
                               .values(state="done", finished_at=utcnow(), lease_until=None))
        if not getattr(held, "rowcount", 0):       # (an UPDATE's result is a CursorResult)
            return False
        submission = session.execute(select(Job.submission_id).where(Job.id == job)).scalar_one()
        row = session.get(Result, submission)
        values = {"points": float(result.get("points") or 0.0), "max_points": float(result.get("max_points") or 0.0),
                  "status": str(result.get("status") or ""), "result": result, "graded_by": owner}
        if row is None:
            session.add(Result(submission_id=submission, **values))
        else:
            for key, value in values.items():
                setattr(row, key, value)
        return True


def fail(engine: Engine, job: int, owner: str, error: str) -> bool:
    """The grader itself failed on ``owner``'s job (never the student's code: that is a result): kept, named."""
    with writing(engine).begin() as conn:
        done = conn.execute(update(Job).where(Job.id == job, Job.owner == owner, Job.state == "running")
                            .values(state="failed", finished_at=utcnow(), lease_until=None, error=error[:2000]))
    return bool(done.rowcount)


def position(engine: Engine, job: int) -> int | None:
    """How many claimable jobs are ahead of ``job`` (0: next or running); None when it is finished."""
    with engine.connect() as conn:
        state = conn.execute(select(Job.state).where(Job.id == job)).scalar_one_or_none()
        if state is None or state in ("done", "failed"):
            return None
        if state == "running":
            return 0
        ahead = conn.execute(sql("SELECT count(*) FROM jobs WHERE state = 'queued' AND id < :id"),
                             {"id": job}).scalar_one()
    return int(ahead)


def queued(engine: Engine) -> int:
    """How many jobs wait for a worker."""
    with engine.connect() as conn:
        return int(conn.execute(sql("SELECT count(*) FROM jobs WHERE state = 'queued'")).scalar_one())
