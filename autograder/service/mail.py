"""E-mail to students: a verdict, a hand grade, a review answer told once each, never from a request's path.

Off unless course.yml has ``service.email`` (:class:`autograder.course.service_policy.MailSettings`, its ``events``
saying which).
What happens (a worker records a submission's first result, a person saves a mark of a written answer, the staff
answer a review request) adds a row to the outbox table ``mail_outbox`` in its own transaction (:func:`add`): no
row without the event, no event without its row, and nothing is sent there. ``autograder serve`` runs
:class:`Mailer`, a thread that sends the rows due every :data:`EVERY` seconds (:func:`send`);
``autograder serve mail send`` sends every pending one by hand. A row still waiting for the same thing (a mark
saved again before its mail went) is reused, not doubled.

The text is written when the mail is sent, in course.yml's language, from the rows it names, in the words of the
student's page and no more: a verdict's score as the page shows it (marks, adjustments and the late policy applied;
never a check's message, hidden or public), a written answer or a review's item by its name and title, a review's
decision and points; the link to their page where ``service.public_url`` is set; never a token. The address is the
one the service's roster has (``serve roster``: the ``people`` table); a student with none (or with something that is
no address) gets no mail: the row is skipped, and the log says so once per student.

Once: a sender holds a row by a compare-and-set on its ``held_until`` (from empty, or from a hold that ran out, to
the end of a lease of :data:`LEASE` seconds) before it sends, as the LTI outbox claims a score
(:mod:`autograder.service.lti.outbox`), so two senders (the loop, the command in another process, a second web
process on the same database) never send the same row. A sender that died after the server took a mail and before
it wrote "sent" leaves a hold that runs out, and the mail goes again, with the same Message-ID.

Failures: the server away, a login refused, a 4xx answer: the row is tried again after a backoff that doubles from
:data:`FIRST_DELAY` to :data:`LAST_DELAY` and never gives up, and the round ends there (the rows after it wait for
the server too); a 5xx refusal of the recipient or of the message: that row failed for good (its error kept).

What it trusts: the database (the rows and their holds); course.yml's settings as validated; the password only from
the environment variable course.yml names, never logged nor stored; the SMTP server's answers as smtplib reads them.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import smtplib
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from autograder.course.clock import readable
from autograder.core.messages import text
from autograder.core.points import fmt
from autograder.service.db import writing
from autograder.service.tables import Mark, MailOut, Person, Result, Review, Submission, utcnow
from autograder.service.loops import Rounds
from autograder.service.standing import Standing
from autograder.course.written import maximum_of

if TYPE_CHECKING:
    from autograder.course.config import Course
    from autograder.course.service_policy import MailSettings

LOG = logging.getLogger("autograder.service.mail")
#: Seconds between two rounds of the service's mail loop.
EVERY = 5.0
#: Rows looked at in one round, at most.
ROUND = 200
#: Seconds a sender holds a row it sends: far past one SMTP exchange (each command gives up after the settings'
#: timeout_seconds), so only a sender that died loses its hold.
LEASE = 600.0
FIRST_DELAY = 30.0
LAST_DELAY = 3600.0
#: The longest error text kept on a row.
ERROR_CHARS = 500

_told_lock = threading.Lock()
#: Students the log was told have no address (by this process): said once each.
_told: set[str] = set()


def settings_of(course: Course) -> MailSettings | None:
    """course.yml's ``service.email``; None when mail is off."""
    return getattr(course.service, "email", None)


def add(conn: Connection | Session, course: Course, kind: str, *, student: str, assignment: str, item: str = "",
        ref: int | None = None) -> bool:
    """Queue a mail to ``student`` of ``kind`` (one of service_policy.MAIL_EVENTS) in the caller's transaction, the one
    that records what it tells of: whether a row was added or brought up to date; nothing when course.yml sends no
    mail of that kind."""
    settings = settings_of(course)
    if settings is None or kind not in settings.events:
        return False
    now = utcnow()
    # The same thing's mail still waiting, never tried nor held, tells of the newest row (a mark saved twice: one
    # mail). Locked on PostgreSQL, so a sender cannot take it between this look and this transaction's end.
    same = conn.execute(select(MailOut.id).where(
        MailOut.kind == kind, MailOut.student == student, MailOut.assignment == assignment, MailOut.item == item,
        MailOut.state == "pending", MailOut.attempts == 0, MailOut.held_until.is_(None)).with_for_update()).first()
    if same is not None:
        conn.execute(update(MailOut).where(MailOut.id == same.id).values(ref=ref))
        return True
    conn.execute(insert(MailOut).values(kind=kind, student=student[:200], assignment=assignment[:100],
                                        item=item[:40], ref=ref, state="pending", attempts=0, next_try_at=now,
                                        held_until=None, created_at=now, error=""))
    return True


def on_mark(course: Course) -> Callable[[Connection, Any], bool]:
    """What :func:`autograder.service.marks.save_mark` calls in its transaction with the mark saved: its
    ``hand_grade`` mail queued."""
    def queue_it(conn: Connection, saved: Any) -> bool:
        return add(conn, course, "hand_grade", student=saved.student, assignment=saved.assignment,
                   item=saved.question, ref=saved.id)
    return queue_it


# -- the text --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Letter:
    subject: str
    body: str


def _title(course: Course, assignment: str, lang: str) -> str:
    found = next((a for a in course.assignments if a.id == assignment), None)
    return str(found.title_in(lang)) if found is not None else assignment


def _item_title(course: Course, assignment: str, item: str, lang: str) -> str:
    found = next((a for a in course.assignments if a.id == assignment), None)
    if found is None:
        return item
    for exercise in found.exercises:
        if exercise.id == item:
            return str(exercise.title_in(lang))
    question = found.question(item)
    return str(question.title_in(lang)) if question is not None else item


def page_link(course: Course, anchor: str = "") -> str | None:
    """The student's page on the service (``service.public_url`` + /me), None where that is not set."""
    base = getattr(course.service, "public_url", None)
    return f"{str(base).rstrip('/')}/me{anchor}" if base else None


def compose(engine: Engine, course: Course, row: Any, standing: Standing) -> Letter | None:
    """The mail of an outbox row, as its student's page says it now; None when what it tells of is gone."""
    lang = course.language.value
    title = _title(course, row.assignment, lang)
    anchor = ""
    with engine.connect() as conn:
        if row.kind == "verdict":
            found = conn.execute(select(Submission.received_at, Result.result)
                                 .join(Result, Result.submission_id == Submission.id)
                                 .where(Submission.id == row.ref)).first()
            if found is None:
                return None
            now = standing.result(dict(found.result))
            points = float(now.get("points") or 0.0)
            score = maximum_of(course, now).fraction(points, lang)
            words = {"assignment": title, "submission": str(row.ref)}
            subject = text("mail.verdict.subject", lang, course=course.name, **words)
            body = text("mail.verdict.body", lang, received=readable(found.received_at, course.zone), score=score,
                        **words)
            anchor = f"#submission-{row.ref}"
        elif row.kind == "hand_grade":
            mark = conn.execute(select(Mark.question).where(Mark.id == row.ref)).first()
            if mark is None:
                return None
            subject = text("mail.hand_grade.subject", lang, course=course.name, assignment=title,
                           question=mark.question)
            body = text("mail.hand_grade.body", lang, assignment=title, question=mark.question,
                        title=_item_title(course, row.assignment, mark.question, lang))
        elif row.kind == "review_answer":
            review = conn.execute(select(Review).where(Review.id == row.ref)).first()
            if review is None or review.state not in ("accepted", "declined"):
                return None
            words = {"item": review.item, "title": _item_title(course, review.assignment, review.item, lang)}
            subject = text("mail.review.subject", lang, course=course.name, assignment=title, item=review.item)
            body = (text("mail.review.accepted", lang, old="—" if review.old_points is None else fmt(review.old_points),
                         new=fmt(review.new_points or 0.0), **words)
                    if review.state == "accepted" else text("mail.review.declined", lang, **words))
        else:
            return None
    link = page_link(course, anchor)
    see = text("mail.see_page", lang, url=link) if link else text("mail.see_page_unlinked", lang)
    footer = text("mail.footer", lang, course=course.name)
    return Letter(" ".join(subject.split()), f"{body}\n\n{see}\n\n-- \n{footer}\n")


def address(value: str | None) -> str | None:
    """An address to send to, from the roster's e-mail column; None for nothing, or for text that is no one
    address."""
    value = (value or "").strip()
    _name, found = parseaddr(value)
    if not found or "@" not in found or any(c.isspace() or c in ",;<>" for c in found) or found != value:
        return None
    return found


def message(settings: MailSettings, row: Any, to: str, letter: Letter) -> EmailMessage:
    """The e-mail itself. Its Message-ID is the row's: a mail sent again (see the module's text) is the same mail."""
    msg = EmailMessage()
    msg["Subject"] = letter.subject
    msg["From"] = settings.sender
    msg["To"] = to
    msg["Date"] = format_datetime(utcnow())
    domain = parseaddr(settings.sender)[1].rpartition("@")[2] or "localhost"
    msg["Message-ID"] = f"<mail-{row.id}-{int(row.created_at.timestamp())}@{domain}>"
    msg["Auto-Submitted"] = "auto-generated"        # (RFC 3834: no out-of-office replies to the course)
    msg.set_content(letter.body)
    return msg


# -- sending ---------------------------------------------------------------------------------------------------
class MailError(Exception):
    """A problem of the settings found when sending (a password variable not set): said, the mail tried later."""


def connect(settings: MailSettings) -> smtplib.SMTP:
    """An SMTP connection as course.yml says: its TLS, its login (the password from the environment)."""
    timeout = float(settings.timeout_seconds)
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if settings.tls == "ssl":
        smtp = smtplib.SMTP_SSL(settings.host, settings.port_or_default, timeout=timeout, context=context)
    else:
        smtp = smtplib.SMTP(settings.host, settings.port_or_default, timeout=timeout)
    try:
        if settings.tls == "starttls":
            smtp.starttls(context=context)
        if settings.username is not None and settings.password_env is not None:
            password = os.environ.get(settings.password_env)
            if not password:
                raise MailError(f"service.email.password_env: the environment variable {settings.password_env} "
                                "is not set in autograder serve's environment")
            smtp.login(settings.username, password)
    except BaseException:
        smtp.close()
        raise
    return smtp


def for_good(exc: BaseException) -> bool:
    """Whether the server refused this one mail for good (5xx for its recipient or its content): not tried again."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return bool(exc.recipients) and all(int(code) >= 500 for code, _said in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPDataError) and int(exc.smtp_code) >= 500


def delay(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones."""
    return float(min(LAST_DELAY, FIRST_DELAY * 2 ** max(0, attempts - 1)))


@dataclass
class Sent:
    """What a round did: mails sent, skipped (no address, or nothing left to tell of), failed for good, failed to be
    tried again, left to another sender that holds them; and the errors."""

    sent: int = 0
    skipped: int = 0
    refused: int = 0
    failed: int = 0
    held: int = 0
    errors: list[str] = field(default_factory=list)


def _lease_end(now: dt.datetime) -> dt.datetime:
    return max(now, utcnow()) + dt.timedelta(seconds=LEASE)


def _claim(engine: Engine, row: int, now: dt.datetime, due_only: bool) -> dt.datetime | None:
    """The row held by this sender until the returned time, if it is pending and nobody holds it (a compare-and-set:
    of two senders, one changes the row); None when another sender has it or it is done."""
    until = _lease_end(now)
    where = [MailOut.id == row, MailOut.state == "pending",
             or_(MailOut.held_until.is_(None), MailOut.held_until < now)]
    if due_only:
        where.append(MailOut.next_try_at <= now)
    with writing(engine).begin() as conn:
        took = conn.execute(update(MailOut).where(*where).values(held_until=until))
    return until if took.rowcount else None


def _done(engine: Engine, row: int, held: dt.datetime | None, **values: Any) -> None:
    """The row's outcome written, its hold given back; with ``held``, only while this sender's hold still holds it (a
    hold that ran out is another sender's now). A mail sent is marked whoever holds it: it was sent."""
    where = [MailOut.id == row]
    if held is not None:
        where += [MailOut.state == "pending", MailOut.held_until == held]
    with writing(engine).begin() as conn:
        conn.execute(update(MailOut).where(*where).values(held_until=None, **values))


def _address_of(engine: Engine, student: str) -> str | None:
    with engine.connect() as conn:
        found = conn.execute(select(Person.email).where(Person.student == student)).first()
    return address(found.email if found is not None else None)


def _no_address(student: str) -> None:
    with _told_lock:
        if student in _told:
            return
        _told.add(student)
    LOG.warning("mail: %s has no e-mail address on the service's roster (serve roster): no mail to them (said once "
                "per student)", student)


def send(engine: Engine, course: Course, *, now: dt.datetime | None = None, due_only: bool = True) -> Sent:
    """One round: the pending rows (those due, or with ``due_only`` False every one not held), oldest first, each
    held, written and sent (the module's rules). Nothing when mail is off."""
    done = Sent()
    settings = settings_of(course)
    if settings is None:
        return done
    now = now or utcnow()
    query = select(MailOut.id).where(MailOut.state == "pending",
                                     or_(MailOut.held_until.is_(None), MailOut.held_until < now))
    if due_only:
        query = query.where(MailOut.next_try_at <= now)
    with engine.connect() as conn:
        ids = list(conn.execute(query.order_by(MailOut.id).limit(ROUND)).scalars())
    smtp: smtplib.SMTP | None = None
    standing: Standing | None = None
    try:
        for row_id in ids:
            held = _claim(engine, row_id, now, due_only)
            if held is None:
                done.held += 1
                continue
            with engine.connect() as conn:       # (read again once held: a newer event may have updated it)
                row = conn.execute(select(MailOut).where(MailOut.id == row_id)).one()
            to = _address_of(engine, row.student)
            if to is None:
                _no_address(row.student)
                _done(engine, row.id, held, state="skipped", error="no e-mail address on the roster")
                done.skipped += 1
                continue
            try:
                standing = standing or Standing(engine, course)
                letter = compose(engine, course, row, standing)
            except Exception as exc:  # noqa: BLE001 - one row's text that cannot be written: tried again later
                _failed(engine, row, held, now, exc, done)
                continue
            if letter is None:
                _done(engine, row.id, held, state="skipped", error="what it tells of is gone")
                done.skipped += 1
                continue
            try:
                smtp = smtp or connect(settings)
                smtp.send_message(message(settings, row, to, letter))
            except Exception as exc:  # noqa: BLE001 - every failure of the server is the row's, said and tried again
                if for_good(exc):
                    _done(engine, row.id, held, state="failed", error=_said(exc))
                    done.refused += 1
                    done.errors.append(_said(exc))
                    continue
                _failed(engine, row, held, now, exc, done)
                _close(smtp)
                smtp = None
                break                   # the server is away or refusing: the rows after this one wait for it too
            _done(engine, row.id, None, state="sent", sent_at=utcnow(), error="")
            done.sent += 1
    finally:
        _close(smtp)
    return done


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]


def _failed(engine: Engine, row: Any, held: dt.datetime, now: dt.datetime, exc: BaseException, done: Sent) -> None:
    _done(engine, row.id, held, attempts=row.attempts + 1, error=_said(exc),
          next_try_at=now + dt.timedelta(seconds=delay(row.attempts + 1)))
    done.failed += 1
    done.errors.append(_said(exc))


def _close(smtp: smtplib.SMTP | None) -> None:
    if smtp is None:
        return
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()


def counts(engine: Engine) -> dict[str, int]:
    """How many rows are in each state."""
    with engine.connect() as conn:
        return {str(s): int(n) for s, n in conn.execute(select(MailOut.state, func.count()).group_by(MailOut.state))}


class Mailer:
    """The service's mail: a thread that runs :func:`send` every :data:`EVERY` seconds while the service runs (while
    course.yml, read live, turns mail on). A round that raises is logged once per kind (:mod:`.loops`); a failure
    to send is said when it is new (not every round the server stays away)."""

    def __init__(self, engine: Engine, course: Course, every: float = EVERY):
        self.engine, self.course, self.every = engine, course, every
        self.rounds = Rounds("mail to students", LOG)
        self._said: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mail-outbox", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.rounds.run(self.round)

    def round(self) -> Sent:
        done = send(self.engine, self.course)
        error = done.errors[0] if done.errors else None
        if error is not None and error != self._said:
            LOG.warning("mail: %d sent, %d refused for good, %d to try again: %s (said again when it changes)",
                        done.sent, done.refused, done.failed, error)
        if error is not None or done.sent:
            self._said = error
        return done

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
