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

Fair share: a job's *round* is how many jobs of its student were queued or running when it was
queued, and workers take the lowest round first (then the oldest). A student's second upload waits
behind every other student's first, so one student's flood delays only that student; each student
may have at most ``service.queued_per_student`` jobs waiting (:class:`Admission`), checked with the
course's attempt limits in the very transaction that stores the upload (on PostgreSQL under a
per-student advisory lock, on SQLite under its one writer lock): uploads sent at once never pass a
limit between the count and the insert.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import DateTime, bindparam, func, select, update
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


@dataclass(frozen=True)
class Admission:
    """What an upload must fit to be stored, checked inside the transaction that stores it (None: no limit)."""

    attempts: int | None = None             # submissions of this student and assignment, at most
    attempts_per_day: int | None = None     # ... since ``day_start``
    day_start: dt.datetime | None = None
    day_ends: dt.datetime | None = None     # when the next day's attempts begin (for Retry-After)
    waiting_per_student: int | None = None  # this student's jobs waiting for a worker, at most
    waiting: int | None = None              # jobs waiting in all, at most


class Refused(Exception):
    """An upload the admission refused: ``key`` is its message (messages.CATALOGUE), ``status`` its HTTP
    status; nothing was stored."""

    def __init__(self, status: int, key: str, retry_after: float | None = None, **params: Any):
        super().__init__(key)
        self.status, self.key, self.retry_after, self.params = status, key, retry_after, params


def store(engine: Engine, *, student: str, assignment: str, filename: str, data: bytes,
          received_at: dt.datetime | None = None, admission: Admission | None = None) -> tuple[int, int]:
    """Store a submission and queue its job, in one transaction: (submission id, job id). With
    ``admission``, its limits are counted in the same transaction (:class:`Refused` when one is reached)."""
    with Session(writing(engine)) as session, session.begin():
        _lock_student(session, student)
        if admission is not None:
            _admit(session, student, assignment, admission)
        sub = Submission(student=student, assignment=assignment, filename=filename, data=data,
                         sha256=hashlib.sha256(data).hexdigest(), received_at=received_at or utcnow())
        session.add(sub)
        session.flush()
        job = Job(submission_id=sub.id, student=student, round=_ahead_of_student(session, student))
        session.add(job)
        session.flush()
        return sub.id, job.id


def _lock_student(session: Session, student: str) -> None:
    """Serialize this student's admissions: PostgreSQL's transaction-scoped advisory lock on the student
    (SQLite's BEGIN IMMEDIATE already lets one writer in at a time)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sql("SELECT pg_advisory_xact_lock(hashtext(:who))"), {"who": student})


def _ahead_of_student(session: Session, student: str) -> int:
    """How many of ``student``'s jobs are queued or running."""
    return int(session.execute(select(func.count()).select_from(Job).where(
        Job.student == student, Job.state.in_(("queued", "running")))).scalar_one())


def _admit(session: Session, student: str, assignment: str, admission: Admission) -> None:
    if admission.waiting is not None:
        waiting = session.execute(select(func.count()).select_from(Job).where(Job.state == "queued")).scalar_one()
        if waiting >= admission.waiting:
            raise Refused(503, "service.queue_full", retry_after=30)
    if admission.waiting_per_student is not None:
        mine = session.execute(select(func.count()).select_from(Job).where(
            Job.student == student, Job.state == "queued")).scalar_one()
        if mine >= admission.waiting_per_student:
            raise Refused(429, "service.queued_enough", retry_after=10, waiting=mine)
    if admission.attempts is None and admission.attempts_per_day is None:
        return
    tried = select(func.count()).select_from(Submission).where(Submission.student == student,
                                                                Submission.assignment == assignment)
    if admission.attempts is not None:
        total = session.execute(tried).scalar_one()
        if total >= admission.attempts:
            raise Refused(403, "service.attempts_used", used=total, most=admission.attempts)
    if admission.attempts_per_day is not None and admission.day_start is not None:
        today = session.execute(tried.where(Submission.received_at >= admission.day_start)).scalar_one()
        if today >= admission.attempts_per_day:
            wait = (admission.day_ends - utcnow()).total_seconds() if admission.day_ends else 3600.0
            raise Refused(429, "service.attempts_today", retry_after=max(1.0, wait), used=today,
                          most=admission.attempts_per_day)


def requeue(engine: Engine, submission_ids: list[int], behind: int = 0) -> list[int]:
    """A new job for each of these submissions (a check changed: regrade); the new job ids. Each goes
    ``behind`` rounds after its student's uploads (a regrade of a whole class never holds up a new upload)."""
    with Session(writing(engine)) as session, session.begin():
        students = dict(session.execute(select(Submission.id, Submission.student)
                                        .where(Submission.id.in_(submission_ids))).all()) if submission_ids else {}
        rounds: dict[str, int] = {}
        jobs = []
        for s in submission_ids:
            who = students.get(s, "")
            if who not in rounds:
                rounds[who] = _ahead_of_student(session, who) + behind
            jobs.append(Job(submission_id=s, student=who, round=rounds[who]))
            rounds[who] += 1
        session.add_all(jobs)
        session.flush()
        return [j.id for j in jobs]


def claim(engine: Engine, owner: str, lease_seconds: float, now: dt.datetime | None = None) -> Claimed | None:
    """The next job nobody holds (queued, or a lease that ran out: the lowest round, then the oldest; never a
    second one of a student whose job is being graded), now held by ``owner``; None if none."""
    now = now or utcnow()
    until = now + dt.timedelta(seconds=lease_seconds)
    # One job of a student at a time: a student whose job is being graded waits for it (a flood of slow
    # notebooks holds one worker at most); a job whose lease ran out is claimable again.
    claimable = ("(state = 'queued' OR (state = 'running' AND lease_until < :now)) AND student NOT IN "
                 "(SELECT student FROM jobs WHERE state = 'running' AND lease_until >= :now)")
    with writing(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            row = conn.execute(sql(f"SELECT id FROM jobs WHERE {claimable} ORDER BY round, id "
                                    "LIMIT 1 FOR UPDATE SKIP LOCKED").bindparams(_NOW), {"now": now}).first()
            if row is None:
                return None
            got = conn.execute(sql("UPDATE jobs SET state = 'running', owner = :owner, lease_until = :until, "
                                    "claims = claims + 1 WHERE id = :id RETURNING id, submission_id")
                               .bindparams(_UNTIL), {"owner": owner, "until": until, "id": row[0]}).first()
        else:
            got = conn.execute(sql(f"UPDATE jobs SET state = 'running', owner = :owner, lease_until = :until, "
                                    f"claims = claims + 1 WHERE id = (SELECT id FROM jobs WHERE {claimable} "
                                    "ORDER BY round, id LIMIT 1) RETURNING id, submission_id").bindparams(_NOW, _UNTIL),
                               {"owner": owner, "until": until, "now": now}).first()
        if got is None:
            return None
        sub = conn.execute(select(Submission.student, Submission.assignment, Submission.filename, Submission.data,
                                  Submission.received_at).where(Submission.id == got[1])).one()
    return Claimed(int(got[0]), int(got[1]), sub.student, sub.assignment, sub.filename, bytes(sub.data),
                   _aware(sub.received_at))


def release(engine: Engine, owner: str, job: int | None = None) -> int:
    """Every job ``owner`` holds (or just ``job``), queued again at once: its worker died and its parent saw
    it, or it stopped before finishing (a drain): no need to wait for the lease to run out. How many."""
    held = update(Job).where(Job.owner == owner, Job.state == "running")
    if job is not None:
        held = held.where(Job.id == job)
    with writing(engine).begin() as conn:
        done = conn.execute(held.values(state="queued", owner=None, lease_until=None))
    return int(done.rowcount or 0)


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
    """How many queued jobs a worker takes before ``job`` (0: next or running); None when it is finished.
    (Jobs of a later round queued afterwards never pass it; another student's first upload may.)"""
    with engine.connect() as conn:
        state = conn.execute(select(Job.state).where(Job.id == job)).scalar_one_or_none()
        if state is None or state in ("done", "failed"):
            return None
        if state == "running":
            return 0
        mine = conn.execute(select(Job.round).where(Job.id == job)).scalar_one()
        ahead = conn.execute(sql("SELECT count(*) FROM jobs WHERE state = 'queued' AND (round < :round OR "
                                 "(round = :round AND id < :id))"), {"id": job, "round": mine}).scalar_one()
    return int(ahead)


def queued(engine: Engine) -> int:
    """How many jobs wait for a worker."""
    with engine.connect() as conn:
        return int(conn.execute(sql("SELECT count(*) FROM jobs WHERE state = 'queued'")).scalar_one())
