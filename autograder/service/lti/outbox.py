"""The passback: every change of a counted score sent to the LMS, once, in order, whatever the platform does.

:mod:`autograder.service.history` records each change of the score that counts (after the late policy,
extensions, hand marks, adjustments, reviews, regrades). :func:`enqueue` turns the changes a platform has not seen
yet into rows of an outbox table in the same database (``lti_scores``), one per LMS member the student is; a
student who becomes a member later (a first launch, the member list) gets their latest scores (:func:`backfill`).
:func:`deliver` sends the rows due, oldest first: per member and assignment strictly in order (a row waits while an
earlier one of the same line item waits), a value equal to the last one sent is not sent again (``same``), a
failure is tried again after a backoff that doubles from :data:`FIRST_DELAY` to :data:`LAST_DELAY` and never gives
up (a platform down for a day gets everything when it is back), and a platform that did not answer is not asked
again in the same round. ``autograder serve`` runs a round every :data:`EVERY` seconds; ``serve lti sync`` runs one.

Several senders may run at once (the service's round, the dashboard's "send now", ``serve lti sync`` in another
process, another web process on the same database) and each reads the same rows: a row is sent only by the sender
that claimed it, by a compare-and-set on the row's own columns (its ``next_try_at`` moved from the value the sender
read to the end of a lease of :data:`LEASE` seconds, as :func:`autograder.service.queue.claim` claims a job), so a
score reaches the platform once. A claimed row looks, to every other sender, like a row waiting its backoff, so the
rows of a line item still go in order. A missing line item is made only by the sender that claimed it: its row is
inserted first (the table's unique assignment per LMS course is the claim) with :data:`MAKING` and the lease's end in
place of the URL, then the platform asked; another sender finds it claimed and leaves the score for a later round,
so one assignment never gets a second column. A sender that died mid-send holds a row or a line item until its
lease runs out, then the next round takes it over.

What it trusts: the database (the rows, their claims); the platform's answers are checked by
:mod:`autograder.service.lti.ags`.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from autograder.course.clock import as_utc
from autograder.core.points import hundredths
from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext, LtiLineItem, LtiPlatform, LtiScore, LtiUser
from autograder.service.tables import ScoreChange, utcnow
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import PlatformError
from autograder.service.loops import Rounds
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course
    from autograder.service.lti.hub_users import HubUsers
    from autograder.service.lti.tool import Tool

FIRST_DELAY = 10.0
LAST_DELAY = 3600.0
#: Seconds between two rounds of the service's passback.
EVERY = 5.0
#: Rows looked at in one round, at most.
ROUND = 2000
#: Seconds a sender holds a row it sends (or a line item it makes): far past what a send takes (each call to the
#: platform gives up after ags.HTTP_SECONDS), so only a sender that died loses its claim; then the next round sends.
LEASE = 300.0
#: The URL of a line item one sender is making, followed by the end of its claim (ISO 8601): see the module's text.
MAKING = "making until "


def _rows(conn: Connection, member: int, changes: list[Any]) -> int:
    for c in changes:
        conn.execute(insert(LtiScore).values(member_id=member, assignment=c.assignment, change_id=c.id,
                                             points=c.new_points, max_points=c.max_points,
                                             waiting_points=c.waiting_points, changed_at=c.at,
                                             state="pending", attempts=0, next_try_at=utcnow(), error=""))
    return len(changes)


def backfill(conn: Connection, member: int) -> int:
    """A new member's latest counted score of each assignment (of the changes their platform has seen: the later
    ones come from :func:`enqueue`) into the outbox."""
    row = conn.execute(select(LtiUser.who, LtiPlatform.changes_seen).join(LtiPlatform, LtiPlatform.id ==
                                                                          LtiUser.platform_id)
                       .where(LtiUser.id == member)).one()
    last = (select(func.max(ScoreChange.id)).where(ScoreChange.student == row.who, ScoreChange.id <= row.changes_seen)
            .group_by(ScoreChange.assignment))
    return _rows(conn, member, list(conn.execute(select(ScoreChange).where(ScoreChange.id.in_(last))
                                                 .order_by(ScoreChange.id))))


def enqueue(engine: Engine) -> int:
    """The score changes each platform has not seen into the outbox: how many rows were added."""
    added = 0
    with writing(engine).begin() as conn:
        for platform in conn.execute(select(LtiPlatform.id, LtiPlatform.changes_seen)).all():
            changes = conn.execute(select(ScoreChange).where(ScoreChange.id > platform.changes_seen)
                                   .order_by(ScoreChange.id).limit(50_000)).all()
            if not changes:
                continue
            # The changes are this sender's to add once it moved the platform's mark from the value it read (a
            # compare-and-set: two senders at once on PostgreSQL both read the old mark, and the second's update,
            # waiting for the first's, then finds it moved and adds nothing: no row twice).
            took = conn.execute(update(LtiPlatform).where(LtiPlatform.id == platform.id,
                                                          LtiPlatform.changes_seen == platform.changes_seen)
                                .values(changes_seen=changes[-1].id))
            if not took.rowcount:
                continue
            members: dict[str, list[int]] = {}
            for m in conn.execute(select(LtiUser.id, LtiUser.who).where(LtiUser.platform_id == platform.id,
                                                                        LtiUser.role == "student")):
                members.setdefault(m.who, []).append(m.id)
            for c in changes:
                for member in members.get(c.student, []):
                    added += _rows(conn, member, [c])
    return added


@dataclass
class Delivery:
    """What a round did: scores sent, found equal to the last one sent, failed (to be tried again), and left to the
    sender that holds them (their row, or the line item it is making: sent by it, or in a later round)."""

    sent: int = 0
    same: int = 0
    failed: int = 0
    held: int = 0
    errors: list[str] = field(default_factory=list)


class Held(Exception):
    """Another sender holds the line item this score needs (it is making it): the score waits for a later round."""


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and hundredths(a) == hundredths(b))


def delay(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones."""
    return float(min(LAST_DELAY, FIRST_DELAY * 2 ** max(0, attempts - 1)))


def score_body(sub: str, points: float | None, max_points: float | None, full: float,
               at: dt.datetime, waiting: float | None = None) -> dict[str, Any]:
    """An AGS Score: the counted points out of the assignment's whole maximum (``full``, the line item's:
    :func:`autograder.course.written.maximum`, written answers included), at the time of the change; ``PendingManual``
    while written answers wait for a person (``waiting``, the score change's; a change recorded before it was kept
    says so by a maximum below the whole one)."""
    when = at.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")
    body: dict[str, Any] = {"userId": sub, "timestamp": when, "activityProgress": "Completed",
                            "gradingProgress": "FullyGraded"}
    if points is None:
        body.update(activityProgress="Initialized", gradingProgress="NotReady")
        return body
    body.update(scoreGiven=round(points, 4), scoreMaximum=round(full, 4))
    if (hundredths(waiting) > 0) if waiting is not None else \
            (max_points is not None and hundredths(max_points) < hundredths(full)):
        body["gradingProgress"] = "PendingManual"
    return body


def line_item(tool: Tool, platform: P.Platform, context: Any, course: Course, assignment: str, *,
              now: dt.datetime | None = None) -> str:
    """The line item of ``assignment`` in an LMS course: the one recorded, or found (by its resourceId) or created on
    the platform and recorded, by this sender alone (its claim: see the module's text); :class:`Held` while another
    sender is making it."""
    now = now or utcnow()
    with tool.engine.connect() as conn:
        known = conn.execute(select(LtiLineItem.url).where(LtiLineItem.context_id == context.id,
                                                          LtiLineItem.assignment == assignment)).first()
    seen = None if known is None else str(known.url)
    if seen is not None and not seen.startswith(MAKING):
        return seen
    if not context.lineitems_url:
        raise PlatformError("the LMS course offers no Assignment and Grade Services (no line items URL)",
                            transient=False)
    mine = MAKING + _lease_end(now).isoformat()
    if not _claim_line_item(tool.engine, context.id, assignment, seen, mine, now):
        raise Held(f"{assignment}: another sender is making its line item")
    a = course.assignment(assignment)
    try:
        url = str(tool.services.find_or_create(platform, context.lineitems_url, assignment, a.lms_title or a.title,
                                               maximum(a).points))
    except Exception:
        _forget_line_item(tool.engine, context.id, assignment, mine)       # the next round claims it again
        raise
    with writing(tool.engine).begin() as conn:
        conn.execute(update(LtiLineItem).where(LtiLineItem.context_id == context.id, LtiLineItem.assignment ==
                                               assignment, LtiLineItem.url == mine).values(url=url))
    # (Nothing updated: this claim ran out and another sender took it over. It finds this line item on the platform
    # by its resourceId, so it records the same one.)
    return url


def _claim_line_item(engine: Engine, context: int, assignment: str, seen: str | None, mine: str,
                     now: dt.datetime) -> bool:
    """Whether this sender now holds the making of the line item: its row inserted (the unique assignment per LMS
    course: a second insert fails), or a claim that ran out (``seen``) replaced by a compare-and-set."""
    if seen is None:
        try:
            with writing(engine).begin() as conn:
                conn.execute(insert(LtiLineItem).values(context_id=context, assignment=assignment, url=mine))
        except IntegrityError:      # another sender claimed it, or a launch or a deep link recorded it, meanwhile
            return False
        return True
    if _claim_ends(seen) > now:
        return False
    with writing(engine).begin() as conn:
        took = conn.execute(update(LtiLineItem).where(LtiLineItem.context_id == context, LtiLineItem.assignment ==
                                                      assignment, LtiLineItem.url == seen).values(url=mine))
    return bool(took.rowcount)


def _lease_end(now: dt.datetime) -> dt.datetime:
    """When a claim made now runs out: :data:`LEASE` after the round's ``now`` or the clock's, whichever is later (a
    long round's ``now`` is minutes old by its last rows)."""
    return max(now, utcnow()) + dt.timedelta(seconds=LEASE)


def _claim_ends(url: str) -> dt.datetime:
    try:
        return as_utc(dt.datetime.fromisoformat(url[len(MAKING):]))
    except ValueError:              # (not written by this module: taken as run out)
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def deliver(tool: Tool, course: Course, *, now: dt.datetime | None = None) -> Delivery:
    """One round: every row due, sent in order (the module's rule)."""
    now = now or utcnow()
    done = Delivery()
    known = {a.id for a in course.assignments}
    with tool.engine.connect() as conn:
        # (the rows of an LMS course no longer bound wait, pending, until it is bound again: never sent there)
        rows = conn.execute(select(LtiScore, LtiUser.sub, LtiUser.context_id, LtiUser.platform_id)
                            .join(LtiUser, LtiUser.id == LtiScore.member_id)
                            .join(LtiContext, LtiContext.id == LtiUser.context_id)
                            .where(LtiScore.state == "pending", LtiContext.bound.is_(True))
                            .order_by(LtiScore.id).limit(ROUND)).all()
        contexts = {c.id: c for c in conn.execute(select(LtiContext))}
    found = {p.id: p for p in P.platforms(tool.engine)}
    queues: dict[tuple[int, str], list[Any]] = {}
    for r in rows:
        queues.setdefault((r.member_id, r.assignment), []).append(r)
    rnd = _Round(tool, course, now, known, found, contexts, done)
    for (member, assignment), queue in queues.items():
        _deliver_queue(rnd, member, assignment, queue)
    return done


@dataclass
class _Round:
    """What one round's queues share: what it read (the assignments, platforms and LMS courses), its tally, and the
    platforms found away during it (their later rows wait for the next round)."""

    tool: Tool
    course: Course
    now: dt.datetime
    known: set[str]
    found: dict[int, P.Platform]
    contexts: dict[int, Any]
    done: Delivery
    away: set[int] = field(default_factory=set)


def _deliver_queue(rnd: _Round, member: int, assignment: str, queue: list[Any]) -> None:
    """One member's rows of one assignment, sent in order up to the first that cannot be (it and those after it
    wait)."""
    tool, now, done = rnd.tool, rnd.now, rnd.done
    last = _last_sent(tool.engine, member, assignment)
    for r in queue:
        # (a row another sender holds is due at the end of its lease: it waits, and so do the rows after it)
        if r.next_try_at > now or r.platform_id in rnd.away:
            break
        if r.platform_id not in rnd.found or r.context_id not in rnd.contexts:
            break       # (removed since its rows were read: a self-test's platform, serve lti selftest)
        held = _claim(tool.engine, r.id, r.next_try_at, now)
        if held is None:                    # another sender took it since it was read: theirs, and the queue
            done.held += 1
            break
        # (a row done gives its claim back: its next_try_at is again when it was due)
        if last is not ... and _same(last, r.points):
            _mark(tool.engine, r.id, state="same", next_try_at=r.next_try_at)
            done.same += 1
            continue
        if not _send(rnd, r, assignment, held):
            break
        _mark(tool.engine, r.id, state="sent", sent_at=utcnow(), error="", next_try_at=r.next_try_at)
        done.sent += 1
        last = r.points


def _send(rnd: _Round, r: Any, assignment: str, held: dt.datetime) -> bool:
    """One row's score sent to its line item (made first where need be): True; False where it could not be, the row
    marked (due again as it was where its line item is being made; else failed, to be tried again later)."""
    tool, course, now, done = rnd.tool, rnd.course, rnd.now, rnd.done
    url = None
    try:
        if assignment not in rnd.known:
            raise PlatformError(f"{assignment}: not an assignment of course.yml", transient=False)
        platform = rnd.found[r.platform_id]
        url = line_item(tool, platform, rnd.contexts[r.context_id], course, assignment, now=now)
        a = course.assignment(assignment)
        tool.services.score(platform, url, score_body(r.sub, r.points, r.max_points, maximum(a).points,
                                                      r.changed_at, r.waiting_points))
    except Held:                        # its line item is being made: the row due again as it was
        _mark(tool.engine, r.id, held=held, next_try_at=r.next_try_at)
        done.held += 1
        return False
    except PlatformError as exc:
        if exc.status == 404 and url is not None:   # the line item was deleted in the LMS: found or made
            _forget_line_item(tool.engine, r.context_id, assignment, url)     # again next time
        if exc.transient:
            rnd.away.add(r.platform_id)
        _mark(tool.engine, r.id, held=held, attempts=r.attempts + 1, error=str(exc)[:500],
              next_try_at=now + dt.timedelta(seconds=delay(r.attempts + 1)))
        done.failed += 1
        done.errors.append(str(exc)[:300])
        return False
    return True


def _claim(engine: Engine, row: int, seen: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """The row held by this sender until the end of its lease (returned), if it is still pending and due as it was
    read (``seen``): a compare-and-set, as a job is claimed; None when another sender changed it first. (The lease's
    end is after ``now``, and a due row's ``seen`` is not: the claim always changes the row.)"""
    until = _lease_end(now)
    with writing(engine).begin() as conn:
        took = conn.execute(update(LtiScore).where(LtiScore.id == row, LtiScore.state == "pending",
                                                   LtiScore.next_try_at == seen).values(next_try_at=until))
    return until if took.rowcount else None


def _last_sent(engine: Engine, member: int, assignment: str) -> Any:
    """The points last sent to this member's line item, or ``...`` when none was."""
    with engine.connect() as conn:
        row = conn.execute(select(LtiScore.points).where(LtiScore.member_id == member, LtiScore.assignment ==
                                                         assignment, LtiScore.state == "sent")
                           .order_by(LtiScore.id.desc()).limit(1)).first()
    return ... if row is None else row.points


def _mark(engine: Engine, row: int, *, held: dt.datetime | None = None, **values: Any) -> None:
    """The row's outcome written; with ``held``, only while this sender's claim still holds it (a claim that ran out
    is another sender's now: its outcome is theirs to write). A row sent is marked whoever holds it: it was sent."""
    where = [LtiScore.id == row]
    if held is not None:
        where += [LtiScore.state == "pending", LtiScore.next_try_at == held]
    with writing(engine).begin() as conn:
        conn.execute(update(LtiScore).where(*where).values(**values))


def _forget_line_item(engine: Engine, context: int, assignment: str, url: str) -> None:
    """The line item recorded as ``url`` forgotten (never another sender's line item or claim recorded since)."""
    with writing(engine).begin() as conn:
        conn.execute(delete(LtiLineItem).where(LtiLineItem.context_id == context, LtiLineItem.assignment == assignment,
                                               LtiLineItem.url == url))


def sync(tool: Tool, course: Course, *, now: dt.datetime | None = None, hub_users: HubUsers | None = None
         ) -> Delivery:
    """New changes into the outbox, then a round of deliveries; with ``hub_users`` (a JupyterHub's, where this is its
    service), the students of the new changes are linked to their LMS identity first
    (:mod:`autograder.service.lti.hub_users`)."""
    if hub_users is not None:
        hub_users.refresh(tool.engine, course)
    enqueue(tool.engine)
    return deliver(tool, course, now=now)


class Passback:
    """The service's passback: a thread that runs :func:`sync` every :data:`EVERY` seconds while the service runs."""

    def __init__(self, tool: Tool, course: Course, every: float = EVERY):
        from autograder.service.lti import hub_users  # noqa: PLC0415 - (a module of this package)

        self.tool, self.course, self.every = tool, course, every
        #: The Hub's users, where the service is a JupyterHub's (their LMS identity from their auth_state).
        self.hub_users = hub_users.from_env(course, backfill)
        self._stop = threading.Event()
        # A round that raises (the database away a moment, anything else) is logged once per kind: the next round
        # tries again (autograder.service.loops).
        self.rounds = Rounds("LTI passback")
        self._thread = threading.Thread(target=self._run, name="lti-passback", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.rounds.run(self._round)

    def _round(self) -> None:
        if P.platforms(self.tool.engine):
            done = sync(self.tool, self.course, hub_users=self.hub_users)
            if done.failed:
                logging.getLogger("autograder.service.lti").warning(
                    "LTI passback: %d sent, %d to try again (%s)", done.sent, done.failed, done.errors[0])

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
        self.tool.close()
