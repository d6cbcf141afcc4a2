"""What the staff did, who and when: one row per action (tokens issued and revoked, the roster imported or a
student removed, extensions granted and revoked, submissions queued again, LMS courses bound and unbound), and the
LTI launches refused because their LMS course is not bound; written in the same transaction as the action itself,
so the record and the change are never apart."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine

from autograder.service.db import writing
from autograder.service.tables import Action, utcnow

#: The actions recorded, by name (the dashboard's audit page and the audit CSV show these names).
ACTIONS = ("token.issue", "token.revoke", "roster.import", "roster.remove", "extension.grant", "extension.revoke",
           "regrade", "mark.save", "mark.double", "mark.moderate", "score.adjust", "review.accept", "review.decline",
           "lti.register", "lti.enrol", "lti.bind", "lti.unbind", "lti.refused")
#: The command line's name in the record (a shell on the server: whoever runs it is its own authority).
COMMAND_LINE = "cli"


def record(conn: Connection, who: str, action: str, target: str = "", detail: str = "") -> None:
    """One action, in the caller's transaction (``conn``)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    conn.execute(insert(Action).values(at=utcnow(), who=who[:200], action=action, target=target[:200],
                                       detail=detail[:2000]))


def note(engine: Engine, who: str, action: str, target: str = "", detail: str = "") -> None:
    """One action in a transaction of its own (after a change made elsewhere, e.g. jobs queued again)."""
    with writing(engine).begin() as conn:
        record(conn, who, action, target, detail)


def entries(engine: Engine, *, target: str | None = None, limit: int = 500) -> Sequence[Any]:
    """The newest actions first (of one student or token where ``target`` is given)."""
    query = select(Action.id, Action.at, Action.who, Action.action, Action.target, Action.detail)
    if target is not None:
        query = query.where(Action.target == target)
    with engine.connect() as conn:
        return conn.execute(query.order_by(Action.id.desc()).limit(limit)).all()
