"""Tokens: one per student of the roster, and for TAs and instructors; only their sha256 is stored.

A token is 32 random bytes (URL-safe text), shown once when issued. The service keeps its sha256
(a token has far too much entropy for a slow hash to add anything) and finds the row by it; the
stored digest is then compared with :func:`hmac.compare_digest`, so a comparison takes the same time
however many leading characters match. Tokens never appear in a log or an error message.

A student's token is issued only to a student on the roster (:mod:`autograder.service.people`). A token may
expire; revoked (by an instructor, or when its student leaves the roster, or when it is issued again), it stops
at once: the API looks each token up on every call, and a page session opened with it ends with it. Every
issue and revocation is recorded (:mod:`autograder.service.audit`).
"""
from __future__ import annotations

import datetime as dt
import csv
import hashlib
import hmac
import io
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine

from autograder.course.clock import readable
from autograder.core.errors import AutograderError
from autograder.course.roster import Member, read_roster
from autograder.core.text import csv_cell
from autograder.service import audit, people
from autograder.service.db import writing
from autograder.service.tables import Person, Token, WebSession, utcnow

ROLES = ("student", "ta", "instructor")
STAFF = frozenset({"ta", "instructor"})


@dataclass(frozen=True)
class Caller:
    """Who a valid token (or session) belongs to; the grant it holds by: ``token_id`` the kit token's row,
    ``lti_member`` the LMS membership of an LTI launch (``lti_users``), neither for a JupyterHub caller."""

    role: str
    who: str
    token_id: int | None = field(default=None, compare=False)
    lti_member: int | None = field(default=None, compare=False)

    @property
    def staff(self) -> bool:
        """A TA or an instructor: sees every submission, grades again, grants extensions."""
        return self.role in STAFF

    @property
    def instructor(self) -> bool:
        """An instructor: also changes the roster and revokes tokens."""
        return self.role == "instructor"


class NotOnRoster(AutograderError):
    """A student token asked for a student who is not on the roster."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _live(now: dt.datetime) -> Any:
    return (Token.revoked_at.is_(None)) & or_(Token.expires_at.is_(None), Token.expires_at > now)


def issue_in(conn: Connection, who: str, *, role: str = "student", name: str = "", by: str = audit.COMMAND_LINE,
             expires: dt.datetime | None = None) -> str:
    """A new token for ``who`` in the caller's transaction (their earlier ones stay valid until revoked)."""
    if role not in ROLES:
        raise AutograderError(f"role {role!r}: a token is for a student, a TA (ta) or an instructor")
    if not who or len(who) > 200 or not who.isprintable():
        raise AutograderError(f"{who[:40]!r}: a token is for an id of 1 to 200 printable characters")
    if expires is not None and expires <= utcnow():
        raise AutograderError(f"--expires {expires.isoformat()}: that time has passed")
    if role == "student":
        person = conn.execute(select(Person.name).where(Person.student == who)).first()
        if person is None:
            raise NotOnRoster(f"{who}: not on the roster, so no student token",
                              hint="import the class list first: autograder serve roster ROSTER.csv")
        name = name or person.name
    token = secrets.token_urlsafe(32)
    conn.execute(insert(Token).values(digest=digest(token), role=role, who=who, name=name, created_at=utcnow(),
                                      issued_by=by[:200], expires_at=expires))
    audit.record(conn, by, "token.issue", target=who, detail=role + (f", expires {readable(expires)}"
                                                                   if expires else ""))
    return token


def issue(engine: Engine, who: str, *, role: str = "student", name: str = "", by: str = audit.COMMAND_LINE,
          expires: dt.datetime | None = None) -> str:
    """A new token for ``who`` (a student must be on the roster); the token, shown once."""
    with writing(engine).begin() as conn:
        return issue_in(conn, who, role=role, name=name, by=by, expires=expires)


def caller(engine: Engine, token: str | None) -> Caller | None:
    """The caller a presented token names, or None (no token, an unknown, malformed, revoked or expired one)."""
    if not token or len(token) > 200:
        return None
    wanted = digest(token)
    with engine.connect() as conn:
        row = conn.execute(select(Token.id, Token.digest, Token.role, Token.who)
                           .where(Token.digest == wanted, _live(utcnow()))).first()
    if row is None or not hmac.compare_digest(row.digest, wanted):
        return None
    return Caller(row.role, row.who, row.id)


def live_token(conn: Connection, token_id: int) -> bool:
    """The token ``token_id`` still holds (neither revoked nor expired)."""
    return conn.execute(select(Token.id).where(Token.id == token_id, _live(utcnow()))).first() is not None


def revoke_in(conn: Connection, ids: Sequence[int], *, by: str) -> int:
    """Revoke the live tokens ``ids`` and end the page sessions opened with them, in the caller's transaction."""
    ids = list(conn.execute(select(Token.id).where(Token.id.in_(list(ids)), Token.revoked_at.is_(None))).scalars())
    if not ids:
        return 0
    conn.execute(update(Token).where(Token.id.in_(ids)).values(revoked_at=utcnow(), revoked_by=by[:200]))
    conn.execute(delete(WebSession).where(WebSession.token_id.in_(ids)))
    for row in conn.execute(select(Token.id, Token.who, Token.role).where(Token.id.in_(ids))):
        audit.record(conn, by, "token.revoke", target=row.who, detail=f"token {row.id} ({row.role})")
    return len(ids)


def revoke(engine: Engine, *, token_id: int | None = None, who: str | None = None, by: str) -> int:
    """Revoke one token (``token_id``) or every live token of ``who``: how many were revoked."""
    query = select(Token.id).where(Token.revoked_at.is_(None))
    query = query.where(Token.id == token_id) if token_id is not None else query.where(Token.who == who)
    with writing(engine).begin() as conn:
        return revoke_in(conn, list(conn.execute(query).scalars()), by=by)


def reissue(engine: Engine, who: str, *, by: str, expires: dt.datetime | None = None) -> tuple[str, str]:
    """Revoke ``who``'s live tokens and issue a new one with the same role (a student's: only on the roster):
    (role, the new token). One transaction: the old token stops as the new one starts."""
    with writing(engine).begin() as conn:
        rows = conn.execute(select(Token.id, Token.role, Token.name).where(Token.who == who, _live(utcnow()))
                            .order_by(Token.id.desc())).all()
        if not rows:
            raise AutograderError(f"{who[:100]}: holds no live token to issue again",
                                  hint="issue a first one: autograder serve token --student ID (or --ta, --instructor)")
        revoke_in(conn, [r.id for r in rows], by=by)
        return rows[0].role, issue_in(conn, who, role=rows[0].role, name=rows[0].name, by=by, expires=expires)


def remove_student(engine: Engine, student: str, *, by: str) -> tuple[bool, int]:
    """Take ``student`` off the roster, revoke their tokens and end every page session of theirs (opened with a
    token, by JupyterHub or by an LMS launch), in one transaction: (was on it, tokens revoked). Their submissions and
    results stay."""
    with writing(engine).begin() as conn:
        gone = people.delete_in(conn, student)
        ids = list(conn.execute(select(Token.id).where(Token.who == student, Token.role == "student")).scalars())
        revoked = revoke_in(conn, ids, by=by)
        conn.execute(delete(WebSession).where(WebSession.who == student, WebSession.role == "student"))
        if gone:
            audit.record(conn, by, "roster.remove", target=student, detail=f"{revoked} token(s) revoked")
    return gone, revoked


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never its secret (nor its digest)."""

    id: int
    role: str
    who: str
    name: str
    created_at: dt.datetime
    issued_by: str
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    revoked_by: str | None

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= utcnow():
            return "expired"
        return "live"


def listing(engine: Engine, *, who: str | None = None) -> list[TokenInfo]:
    """Every token (of ``who``), newest first."""
    query = select(Token.id, Token.role, Token.who, Token.name, Token.created_at, Token.issued_by, Token.expires_at,
                   Token.revoked_at, Token.revoked_by).order_by(Token.id.desc())
    if who is not None:
        query = query.where(Token.who == who)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    return [TokenInfo(**r) for r in rows]


def holders(engine: Engine) -> set[str]:
    """The students who hold a live token."""
    with engine.connect() as conn:
        return set(conn.execute(select(Token.who).where(Token.role == "student", _live(utcnow()))).scalars())


def import_roster(engine: Engine, roster: Path, *, by: str = audit.COMMAND_LINE) -> list[tuple[str, str, str]]:
    """Import a roster CSV (:func:`~autograder.course.roster.read_roster`: the kit's columns, or Canvas' or Moodle's
    as downloaded) and issue a token to each of its students who holds no live token yet: (student, name, token)
    rows, for the instructor to hand out. Errors name the file and row; nothing changes unless the whole file
    reads. A student already holding a token keeps it (``serve token --reissue`` gives a new one)."""
    return enrol(engine, read_roster(roster).members, by=by, source=roster.name)


def enrol(engine: Engine, members: Sequence[Member], *, by: str = audit.COMMAND_LINE,
          source: str = "") -> list[tuple[str, str, str]]:
    """:func:`import_roster` of a class list already read: add or update each member, then a token for each
    one who holds no live token yet."""
    people.import_members(engine, members, by=by, source=source)
    have = holders(engine)
    with writing(engine).begin() as conn:
        return [(m.student, m.name, issue_in(conn, m.student, name=m.name, by=by)) for m in members
                if m.student not in have]


def tokens_csv(rows: list[tuple[str, str, str]]) -> str:
    """student, name, token per row: the id and the name made safe for a spreadsheet, the token as it is (a
    token may begin with "-", which a formula guard would change)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "name", "token"])
    writer.writerows([csv_cell(student), csv_cell(name), token] for student, name, token in rows)
    return out.getvalue()
