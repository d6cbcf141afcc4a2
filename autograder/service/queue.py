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

Fair share: a waiting job's *rank* is how many jobs of its student wait before it (plus its
``round``: 0 for an upload, more for a regrade), counted when a worker looks; workers take the lowest
rank first, and among equals the job that has been *eligible* longest: since it was queued, or since
its student's worker time was paid back, whichever is later (a graded job charges its student
:data:`CHARGE` times as long as it took: graded at 10:00:08 after 8 s, the student's next is eligible
from 10:00:40). So
every student's first waiting job goes before anyone's second, a student who was just served waits
behind those who were waiting meanwhile, and the more worker time a student's notebooks take the
longer they wait (a flood of slow notebooks delays only its sender), while a job moves up as its
student's earlier ones are graded (a duplicate upload a client sent again, not knowing the first was
taken, waits for those who came before it, not for the whole class). A student has one job graded at
a time. Each student may have at most
``service.queued_per_student`` jobs waiting (:class:`Admission`), checked with the course's attempt
limits in the very transaction that stores the upload (on PostgreSQL under a per-student advisory
lock, on SQLite under its one writer lock): uploads sent at once never pass a limit between the count
and the insert.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy import text as sql
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.service.db import writing
from autograder.service.tables import Job, Result, Submission, UTCDateTime, utcnow


#: Times bound to the raw statements as the tables store them (UTC; SQLite keeps text: one format for all).
_NOW = bindparam("now", type_=UTCDateTime())
_UNTIL = bindparam("until", type_=UTCDateTime())


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
        lock_student(session, student)
        if admission is not None:
            _admit(session, student, assignment, admission)
        sub = Submission(student=student, assignment=assignment, filename=filename, data=data,
                         sha256=hashlib.sha256(data).hexdigest(), received_at=received_at or utcnow())
        session.add(sub)
        session.flush()
        job = Job(submission_id=sub.id, student=student, round=0)
        session.add(job)
        session.flush()
        return sub.id, job.id


def lock_student(session: Session, key: str) -> None:
    """Serialize the transactions that take ``key`` (a student's admissions: their id; their score history:
    ``history:`` and their id): PostgreSQL's transaction-scoped advisory lock (SQLite's BEGIN IMMEDIATE
    already lets one writer in at a time)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sql("SELECT pg_advisory_xact_lock(hashtext(:who))"), {"who": key})


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
    """A new job for each of these submissions (a check changed: regrade); the new job ids. Each ranks ``behind``
    places after its student's uploads (a regrade of a whole class never holds up a new upload)."""
    with Session(writing(engine)) as session, session.begin():
        students = dict(session.execute(select(Submission.id, Submission.student)
                                        .where(Submission.id.in_(submission_ids))).all()) if submission_ids else {}
        jobs = [Job(submission_id=s, student=students.get(s, ""), round=behind) for s in submission_ids]
        session.add_all(jobs)
        session.flush()
        return [j.id for j in jobs]


#: When a job became eligible: queued, or its student's worker time paid back, whichever is later.
_ELIGIBLE = ("(SELECT CASE WHEN max(s.charged_until) IS NULL OR {job}.created_at > max(s.charged_until) THEN "
             "{job}.created_at ELSE max(s.charged_until) END FROM jobs AS s WHERE s.student = {job}.student)")
#: The claimable jobs with their rank and eligibility (see the module's text): queued, or running under a lease
#: that ran out; never one of a student whose job is being graded under a live lease.
_RANKED = ("SELECT id, round + ROW_NUMBER() OVER (PARTITION BY student ORDER BY id) - 1 AS rank, "
           f"{_ELIGIBLE.format(job='jobs')} AS eligible FROM jobs "
           "WHERE (state = 'queued' OR (state = 'running' AND lease_until < :now)) AND student NOT IN "
           "(SELECT student FROM jobs WHERE state = 'running' AND lease_until >= :now)")
#: The order workers take them in.
_ORDER = "ORDER BY rank, eligible, id"


def claim(engine: Engine, owner: str, lease_seconds: float, now: dt.datetime | None = None) -> Claimed | None:
    """The next job nobody holds (the lowest rank, then the oldest: see the module's text), now held by ``owner``;
    None if none."""
    now = now or utcnow()
    until = now + dt.timedelta(seconds=lease_seconds)
    take = ("UPDATE jobs SET state = 'running', owner = :owner, lease_until = :until, claimed_at = :now, "
            "claims = claims + 1 WHERE id = :id RETURNING id, submission_id")
    with writing(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            # (FOR UPDATE cannot share a SELECT with a window function: rank first, then lock one of the first few
            # that no other worker holds, checked claimable again under its lock)
            ranked = conn.execute(sql(f"SELECT id FROM ({_RANKED}) AS ranked {_ORDER} LIMIT 8")
                                  .bindparams(_NOW), {"now": now}).scalars().all()
            got = None
            for candidate in ranked:
                locked = conn.execute(sql("SELECT id FROM jobs WHERE id = :id AND (state = 'queued' OR (state = "
                                          "'running' AND lease_until < :now)) FOR UPDATE SKIP LOCKED")
                                      .bindparams(_NOW), {"id": candidate, "now": now}).first()
                if locked is not None:
                    got = conn.execute(sql(take).bindparams(_UNTIL, _NOW), {"owner": owner, "until": until,
                                                                             "now": now, "id": candidate}).first()
                    break
        else:
            got = conn.execute(sql(take.replace(":id", f"(SELECT id FROM ({_RANKED}) {_ORDER} LIMIT 1)"))
                               .bindparams(_NOW, _UNTIL), {"owner": owner, "until": until, "now": now}).first()
        if got is None:
            return None
        sub = conn.execute(select(Submission.student, Submission.assignment, Submission.filename, Submission.data,
                                  Submission.received_at).where(Submission.id == got[1])).one()
    return Claimed(int(got[0]), int(got[1]), sub.student, sub.assignment, sub.filename, bytes(sub.data),
                   sub.received_at)


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


def complete(engine: Engine, job: int, owner: str, result: dict[str, Any],
             first: Callable[[Session, int], object] | None = None) -> str | None:
    """Record the result of ``owner``'s job: one row per submission. "graded" (the submission's first result) or
    "regrade" (it replaced one); None (nothing written) when the job is no longer ``owner``'s. ``first``: called with
    the transaction and the submission when its first result is recorded (the student's mail queued in it)."""
    with Session(writing(engine)) as session, session.begin():
        now = utcnow()
        held = session.execute(update(Job).where(Job.id == job, Job.owner == owner, Job.state == "running")
                               .values(state="done", finished_at=now, lease_until=None,
                                       charged_until=_charged(session, job, now)))
        if not getattr(held, "rowcount", 0):       # (an UPDATE's result is a CursorResult)
            return None
        submission = session.execute(select(Job.submission_id).where(Job.id == job)).scalar_one()
        row = session.get(Result, submission)
        values = {"points": float(result.get("points") or 0.0), "max_points": float(result.get("max_points") or 0.0),
                  "status": str(result.get("status") or ""), "result": result, "graded_by": owner}
        if row is None:
            session.add(Result(submission_id=submission, **values))
            if first is not None:
                first(session, submission)
            return "graded"
        for key, value in values.items():
            setattr(row, key, value)
        return "regrade"


def fail(engine: Engine, job: int, owner: str, error: str) -> bool:
    """The grader itself failed on ``owner``'s job (never the student's code: that is a result): kept, named."""
    with Session(writing(engine)) as session, session.begin():
        now = utcnow()
        done = session.execute(update(Job).where(Job.id == job, Job.owner == owner, Job.state == "running")
                               .values(state="failed", finished_at=now, lease_until=None, error=error[:2000],
                                       charged_until=_charged(session, job, now)))
    return bool(getattr(done, "rowcount", 0))


#: How many times the worker time a job took its student pays back before their next job is eligible (see the
#: module's text): a student whose notebooks take 8 s each gets a worker at most a fifth of the time while others
#: wait; an honest quick one (0.3 s) is charged a second or so.
CHARGE = 4


def _charged(session: Session, job: int, now: dt.datetime) -> dt.datetime:
    """Until when a job's student is charged for it: CHARGE times as long after it ends as it took."""
    claimed = session.execute(select(Job.claimed_at).where(Job.id == job)).scalar_one_or_none()
    took = (now - claimed) if claimed is not None else dt.timedelta(0)
    return now + CHARGE * max(dt.timedelta(0), min(took, dt.timedelta(hours=1)))


def positions(engine: Engine) -> dict[int, int]:
    """Every queued job's place in the order workers take them now (0: next): its rank, counting a student's job
    being graded ahead of their next, then how long it has been eligible. The one query behind every place a
    page or the API shows."""
    ranked = ("SELECT id, round + ROW_NUMBER() OVER (PARTITION BY student ORDER BY id) - 1 + (SELECT count(*) "
              "FROM jobs AS r WHERE r.student = q.student AND r.state = 'running') AS rank, "
              f"{_ELIGIBLE.format(job='q')} AS eligible FROM jobs AS q WHERE q.state = 'queued'")
    with engine.connect() as conn:
        rows = conn.execute(sql(f"SELECT id, ROW_NUMBER() OVER ({_ORDER}) - 1 AS place FROM ({ranked}) AS ranked"))
        return {int(job): int(place) for job, place in rows}


def position(engine: Engine, job: int) -> int | None:
    """How many queued jobs a worker takes before ``job`` (0: next or running); None when it is finished."""
    with engine.connect() as conn:
        state = conn.execute(select(Job.state).where(Job.id == job)).scalar_one_or_none()
    if state is None or state in ("done", "failed"):
        return None
    return 0 if state == "running" else positions(engine).get(job, 0)
