"""Names and Role Provisioning Services: the members of each LMS course the service is bound to, into the roster.

``autograder serve lti roster`` (and the dashboard's button) reads every page of each course's member list. An
active Learner is the roster's student the LMS ids name (:func:`autograder.service.lti.platforms.student_of`) or a
new one; their name and email are the LMS's (the roster's other ids are kept), and they are linked to their LMS user
id, so the passback reaches them before they ever launch and "not submitted" is complete before anyone submits.
Staff are recorded as members, not put on the roster. An inactive or deleted member is left as the roster has them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from autograder.course.roster import Member
from autograder.service import people, tokens
from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext
from autograder.service.tables import Person
from autograder.service.lti import outbox
from autograder.service.lti import platforms as P

if TYPE_CHECKING:
    from autograder.service.lti.tool import Tool


@dataclass
class Pulled:
    """What a pull did: members read, students added to the roster, members linked, and the tokens issued."""

    read: int = 0
    added: list[str] = field(default_factory=list)
    linked: int = 0
    staff: int = 0
    issued: list[tuple[str, str, str]] = field(default_factory=list)


def pull(tool: Tool, *, by: str, issue_tokens: bool = False) -> Pulled:
    """Every LMS course's members into the roster (``issue_tokens``: a token for each student who has none)."""
    done = Pulled()
    found = {p.id: p for p in P.platforms(tool.engine)}
    with tool.engine.connect() as conn:
        contexts = conn.execute(select(LtiContext).where(LtiContext.memberships_url != "",
                                                         LtiContext.bound.is_(True))).all()
    for ctx in contexts:
        platform = found[ctx.platform_id]
        listed = tool.services.members(platform, ctx.memberships_url)
        done.read += len(listed)
        _record(tool, platform, ctx.id, listed, done, by=by, issue_tokens=issue_tokens)
    return done


def _identities(listed: list[dict[str, Any]]) -> list[P.Identity]:
    out = []
    for m in listed:
        if str(m.get("status") or "Active") != "Active":
            continue
        role = P.role_of(m.get("roles"))
        who = P.identity(m.get("user_id"), role or "", name=m.get("name"), email=m.get("email"),
                         sourcedid=m.get("lis_person_sourcedid"))
        if who is not None and role is not None:
            out.append(who)
    return out


def _record(tool: Tool, platform: P.Platform, context: int, listed: list[dict[str, Any]], done: Pulled, *, by: str,
            issue_tokens: bool) -> None:
    members = _identities(listed)
    students: dict[str, P.Identity] = {}
    with tool.engine.connect() as conn:
        for who in members:
            if who.role == "student":
                students[P.student_of(conn, platform.id, who) or P.new_student_id(conn, who)] = who
        have = {r.student: r for r in conn.execute(select(Person).where(Person.student.in_(list(students))))}
    roster = [Member(student, name=who.name or (have[student].name if student in have else ""),
                     email=who.email or (have[student].email if student in have else ""),
                     section=have[student].section if student in have else "",
                     canvas_id=have[student].canvas_id if student in have else who.canvas_id,
                     moodle_id_number=have[student].moodle_id_number if student in have else "")
              for student, who in students.items()]
    if roster:
        if issue_tokens:
            done.issued += tokens.enrol(tool.engine, roster, by=by, source="LMS members")
        else:
            people.import_members(tool.engine, roster, by=by, source="LMS members")
    done.added += [s for s in students if s not in have]
    with writing(tool.engine).begin() as conn:
        for student, who in students.items():
            member, new = P.member(conn, platform, context, who, student)
            done.linked += 1
            if new:
                outbox.backfill(conn, member)
        for who in members:
            if who.role != "student":
                P.member(conn, platform, context, who, P.staff_name(who))
                done.staff += 1
