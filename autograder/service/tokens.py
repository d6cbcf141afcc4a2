"""Tokens: one per student from a roster, and for instructors and TAs; only their sha256 is stored.

A token is 32 random bytes (URL-safe text), shown once when issued. The service keeps its sha256
(a token has far too much entropy for a slow hash to add anything) and finds the row by it; the
stored digest is then compared with :func:`hmac.compare_digest`, so a comparison takes the same time
however many leading characters match. Tokens never appear in a log or an error message.
"""
from __future__ import annotations

import csv
import hashlib
import hmac
import io
import secrets
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.errors import AutograderError
from autograder.roster import read_roster
from autograder.service.db import Token, writing

ROLES = ("student", "instructor")


@dataclass(frozen=True)
class Caller:
    """Who a valid token belongs to."""

    role: str
    who: str

    @property
    def instructor(self) -> bool:
        return self.role == "instructor"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue(engine: Engine, who: str, *, role: str = "student", name: str = "") -> str:
    """A new token for ``who`` (their earlier ones stay valid until revoked); the token, shown once."""
    if role not in ROLES:
        raise AutograderError(f"role {role!r}: a token is for a student or an instructor")
    token = secrets.token_urlsafe(32)
    with Session(writing(engine)) as session, session.begin():
        session.add(Token(digest=digest(token), role=role, who=who, name=name))
    return token


def caller(engine: Engine, token: str | None) -> Caller | None:
    """The caller a presented token names, or None (no token, an unknown or malformed one)."""
    if not token or len(token) > 200:
        return None
    wanted = digest(token)
    with engine.connect() as conn:
        row = conn.execute(select(Token.digest, Token.role, Token.who).where(Token.digest == wanted)).first()
    if row is None or not hmac.compare_digest(row.digest, wanted):
        return None
    return Caller(row.role, row.who)


def import_roster(engine: Engine, roster: Path) -> list[tuple[str, str, str]]:
    """A token for each student of a roster CSV (:func:`autograder.roster.read_roster`: the kit's columns, or
    Canvas' or Moodle's export as downloaded): (student, name, token) rows, for the instructor to hand out.
    Errors name the file and row; nothing is issued unless the whole file reads."""
    members = read_roster(roster).members
    return [(m.student, m.name, issue(engine, m.student, name=m.name)) for m in members]


def tokens_csv(rows: list[tuple[str, str, str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "name", "token"])
    writer.writerows(rows)
    return out.getvalue()
