"""The class list in the service's database: who may get a student token, and the names the staff see.

``autograder serve roster ROSTER.csv`` imports a CSV (the kit's columns, or Canvas' or Moodle's export as
downloaded: :func:`autograder.course.roster.read_roster`): a student already there is updated (name, email, section,
LMS ids), a new one added; nobody's token changes. Removing a student (``serve roster --remove ID``,
:func:`autograder.service.tokens.remove_student`) revokes their tokens in the same transaction and keeps their
submissions.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, Engine, Row

from autograder.course.roster import Member, Roster
from autograder.service import audit
from autograder.service.db import writing
from autograder.service.tables import Person, utcnow

if TYPE_CHECKING:
    from autograder.course.config import Course

#: The columns a roster row shows, in order (the CSV download's too).
COLUMNS = ("student", "name", "email", "section", "canvas_id", "moodle_id_number")


@dataclass(frozen=True)
class Imported:
    added: list[str]
    updated: list[str]
    unchanged: int


def import_members(engine: Engine, members: Iterable[Member], *, by: str, source: str = "") -> Imported:
    """Add or update each member (one transaction: a file that fails to read has changed nothing before)."""
    added: list[str] = []
    updated: list[str] = []
    unchanged = 0
    now = utcnow()
    with writing(engine).begin() as conn:
        have = {r.student: r for r in conn.execute(select(Person)).all()}
        for m in members:
            values = {c: getattr(m, c) for c in COLUMNS}
            old = have.get(m.student)
            if old is None:
                conn.execute(insert(Person).values(**values, added_at=now, updated_at=now))
                added.append(m.student)
            elif any(getattr(old, c) != values[c] for c in COLUMNS):
                conn.execute(update(Person).where(Person.student == m.student).values(**values, updated_at=now))
                updated.append(m.student)
            else:
                unchanged += 1
        audit.record(conn, by, "roster.import", detail=f"{source}: {len(added)} added, {len(updated)} updated, "
                                                       f"{unchanged} unchanged")
    return Imported(added, updated, unchanged)


def delete_in(conn: Connection, student: str) -> bool:
    """Take ``student`` off the roster in the caller's transaction (their tokens: :func:`tokens.remove_student`)."""
    return conn.execute(delete(Person).where(Person.student == student)).rowcount > 0


def people(engine: Engine) -> Sequence[Row[Any]]:
    """Everyone on the roster, by id."""
    with engine.connect() as conn:
        return conn.execute(select(*(getattr(Person, c) for c in COLUMNS)).order_by(Person.student)).all()


def names(engine: Engine) -> dict[str, str]:
    """student -> name, for the pages (a student with no name is left out)."""
    with engine.connect() as conn:
        return {r.student: r.name for r in conn.execute(select(Person.student, Person.name)) if r.name}


def on_roster(engine: Engine, student: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(Person.student).where(Person.student == student)).first() is not None



def roster(engine: Engine, course: Course | None = None) -> Roster | None:
    """The class list the service's files name students by (the LMS files' names, e-mails and LMS ids): the
    service's own roster (``serve roster``), and course.yml's ``roster:`` for a student the service's does not
    have; None when neither has anyone."""
    members = [Member(**{c: getattr(r, c) or "" for c in COLUMNS}) for r in people(engine)]
    ours = {m.student for m in members}
    listed = course.roster_members() if course is not None and hasattr(course, "roster_members") else None
    if listed is not None:
        members += [m for m in listed.members if m.student not in ours]
    return Roster(tuple(members), where="the service's roster") if members else None
