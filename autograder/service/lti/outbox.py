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
"""
from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from autograder.points import hundredths
from autograder.service.db import LtiContext, LtiLineItem, LtiPlatform, LtiScore, LtiUser, ScoreChange, utcnow, \
    writing
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import PlatformError

if TYPE_CHECKING:
    from autograder.config import Course
    from autograder.service.lti.hub_users import HubUsers
    from autograder.service.lti.tool import Tool

FIRST_DELAY = 10.0
LAST_DELAY = 3600.0
#: Seconds between two rounds of the service's passback.
EVERY = 5.0
#: Rows looked at in one round, at most.
ROUND = 2000


def _rows(conn: Connection, member: int, changes: list[Any]) -> int:
    for c in changes:
        conn.execute(insert(LtiScore).values(member_id=member, assignment=c.assignment, change_id=c.id,
                                             points=c.new_points, max_points=c.max_points, changed_at=c.at,
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
            members: dict[str, list[int]] = {}
            for m in conn.execute(select(LtiUser.id, LtiUser.who).where(LtiUser.platform_id == platform.id,
                                                                        LtiUser.role == "student")):
                members.setdefault(m.who, []).append(m.id)
            for c in changes:
                for member in members.get(c.student, []):
                    added += _rows(conn, member, [c])
            conn.execute(update(LtiPlatform).where(LtiPlatform.id == platform.id)
                         .values(changes_seen=changes[-1].id))
    return added


@dataclass
class Delivery:
    """What a round did: scores sent, found equal to the last one sent, failed (to be tried again)."""

    sent: int = 0
    same: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and hundredths(a) == hundredths(b))


def delay(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones."""
    return float(min(LAST_DELAY, FIRST_DELAY * 2 ** max(0, attempts - 1)))


def score_body(sub: str, points: float | None, max_points: float | None, full: float,
               at: dt.datetime) -> dict[str, Any]:
    """An AGS Score: the counted points out of the assignment's whole maximum (the line item's, written answers
    included), at the time of the change; ``PendingManual`` while written answers wait for a person (the result's
    maximum is then below the whole one)."""
    when = at.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")
    body: dict[str, Any] = {"userId": sub, "timestamp": when, "activityProgress": "Completed",
                            "gradingProgress": "FullyGraded"}
    if points is None:
        body.update(activityProgress="Initialized", gradingProgress="NotReady")
        return body
    body.update(scoreGiven=round(points, 4), scoreMaximum=round(full, 4))
    if max_points is not None and hundredths(max_points) < hundredths(full):
        body["gradingProgress"] = "PendingManual"
    return body


def line_item(tool: Tool, platform: P.Platform, context: Any, course: Course, assignment: str) -> str:
    """The line item of ``assignment`` in an LMS course: the one recorded, or found (by its resourceId) or created on
    the platform and recorded."""
    with tool.engine.connect() as conn:
        known = conn.execute(select(LtiLineItem.url).where(LtiLineItem.context_id == context.id,
                                                          LtiLineItem.assignment == assignment)).first()
    if known is not None:
        return str(known.url)
    if not context.lineitems_url:
        raise PlatformError("the LMS course offers no Assignment and Grade Services (no line items URL)",
                            transient=False)
    a = course.assignment(assignment)
    url = tool.services.find_or_create(platform, context.lineitems_url, assignment, a.lms_title or a.title,
                                       a.points + a.manual_points)
    try:
        with writing(tool.engine).begin() as conn:
            conn.execute(insert(LtiLineItem).values(context_id=context.id, assignment=assignment, url=url))
    except IntegrityError:          # recorded meanwhile (a deep link, a launch): that one is the line item
        with tool.engine.connect() as conn:
            url = conn.execute(select(LtiLineItem.url).where(LtiLineItem.context_id == context.id,
                                                            LtiLineItem.assignment == assignment)).scalar_one()
    return str(url)


def deliver(tool: Tool, course: Course, *, now: dt.datetime | None = None) -> Delivery:
    """One round: every row due, sent in order (the module's rule)."""
    now = now or utcnow()
    done = Delivery()
    known = {a.id for a in course.assignments}
    with tool.engine.connect() as conn:
        rows = conn.execute(select(LtiScore, LtiUser.sub, LtiUser.context_id, LtiUser.platform_id)
                            .join(LtiUser, LtiUser.id == LtiScore.member_id).where(LtiScore.state == "pending")
                            .order_by(LtiScore.id).limit(ROUND)).all()
        contexts = {c.id: c for c in conn.execute(select(LtiContext))}
    found = {p.id: p for p in P.platforms(tool.engine)}
    queues: dict[tuple[int, str], list[Any]] = {}
    for r in rows:
        queues.setdefault((r.member_id, r.assignment), []).append(r)
    away: set[int] = set()
    for (member, assignment), queue in queues.items():
        last = _last_sent(tool.engine, member, assignment)
        for r in queue:
            if r.next_try_at > now or r.platform_id in away:
                break
            if last is not ... and _same(last, r.points):
                _mark(tool.engine, r.id, state="same")
                done.same += 1
                continue
            try:
                if assignment not in known:
                    raise PlatformError(f"{assignment}: not an assignment of course.yml", transient=False)
                platform = found[r.platform_id]
                url = line_item(tool, platform, contexts[r.context_id], course, assignment)
                a = course.assignment(assignment)
                tool.services.score(platform, url, score_body(r.sub, r.points, r.max_points,
                                                              a.points + a.manual_points, r.changed_at))
            except PlatformError as exc:
                if exc.status == 404:           # the line item was deleted in the LMS: found or made again next time
                    _forget_line_item(tool.engine, r.context_id, assignment)
                if exc.transient:
                    away.add(r.platform_id)
                _mark(tool.engine, r.id, attempts=r.attempts + 1, error=str(exc)[:500],
                      next_try_at=now + dt.timedelta(seconds=delay(r.attempts + 1)))
                done.failed += 1
                done.errors.append(str(exc)[:300])
                break
            _mark(tool.engine, r.id, state="sent", sent_at=utcnow(), error="")
            done.sent += 1
            last = r.points
    return done


def _last_sent(engine: Engine, member: int, assignment: str) -> Any:
    """The points last sent to this member's line item, or ``...`` when none was."""
    with engine.connect() as conn:
        row = conn.execute(select(LtiScore.points).where(LtiScore.member_id == member, LtiScore.assignment ==
                                                         assignment, LtiScore.state == "sent")
                           .order_by(LtiScore.id.desc()).limit(1)).first()
    return ... if row is None else row.points


def _mark(engine: Engine, row: int, **values: Any) -> None:
    with writing(engine).begin() as conn:
        conn.execute(update(LtiScore).where(LtiScore.id == row).values(**values))


def _forget_line_item(engine: Engine, context: int, assignment: str) -> None:
    with writing(engine).begin() as conn:
        conn.execute(delete(LtiLineItem).where(LtiLineItem.context_id == context, LtiLineItem.assignment == assignment))


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
        self._thread = threading.Thread(target=self._run, name="lti-passback", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        import logging  # noqa: PLC0415

        log = logging.getLogger("autograder.service.lti")
        while not self._stop.wait(self.every):
            try:
                if P.platforms(self.tool.engine):
                    done = sync(self.tool, self.course, hub_users=self.hub_users)
                    if done.failed:
                        log.warning("LTI passback: %d sent, %d to try again (%s)", done.sent, done.failed,
                                    done.errors[0])
            except Exception as exc:  # noqa: BLE001 - the database is away a moment: the next round tries again
                log.warning("LTI passback round failed: %s", type(exc).__name__)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
        self.tool.close()
