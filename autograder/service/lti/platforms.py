"""The LMSs registered as LTI platforms, the LMS courses the service is bound to, and their members: who each LMS
user is on the roster (by the LMS's ids), and the role the LMS gives them.

A platform's deployment is a whole Moodle site or a whole Canvas account, with many courses and many teachers, so a
launch's signature says only that some course of the LMS sent it. The service serves the LMS courses its
instructor bound (:func:`bind`: ``serve lti register --course``, ``serve lti bind``, or the staff's LTI page, where a
course whose launch was refused is listed as asking): a launch from any other course is refused before anyone is
signed in, recorded, or given a role (:func:`bound_context`), and the refusal is in the record of actions. A page
session a launch opened lasts only while its membership does (:func:`autograder.service.sessions.live_member`).

A student is found on the roster by the ids the LMS sends: the member already linked (the same platform and user
id), else the roster's ``canvas_id`` (Canvas' ``$Canvas.user.id``, sent as the custom field ``canvas_user_id``),
``moodle_id_number`` (Moodle's ID number, its ``lis_person_sourcedid``), the student id itself (the institution's
id, the LMS's SIS id) or the email. A student found nowhere is added to the roster when the platform was registered
with ``--enrol`` (its id: the LMS's SIS id, else the email, else ``lti-`` and the LMS's user id), else refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from autograder.core.errors import AutograderError
from autograder.service import audit
from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext, LtiLineItem, LtiPlatform, LtiUser
from autograder.service.tables import Person, utcnow

#: The LTI claims' common prefixes.
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
#: The LMS roles that make a staff member (anything else with Learner is a student).
_ADMIN = ("membership#Administrator", "institution/person#Administrator", "system/person#Administrator",
          "system/person#SysAdmin")


@dataclass(frozen=True)
class Platform:
    id: int
    issuer: str
    client_id: str
    deployments: list[str]
    auth_url: str
    token_url: str
    jwks_url: str
    token_audience: str
    enrol: bool
    changes_seen: int = 0

    @property
    def audience(self) -> str:
        """The ``aud`` of the tool's client assertions: the token URL unless the platform asks for another."""
        return self.token_audience or self.token_url


def _platform(row: Any) -> Platform:
    return Platform(row.id, row.issuer, row.client_id, list(row.deployments or []), row.auth_url, row.token_url,
                    row.jwks_url, row.token_audience, bool(row.enrol), row.changes_seen)


def _url(value: str, what: str) -> str:
    if not value.startswith(("https://", "http://")) or len(value) > 500 or not value.isprintable():
        raise AutograderError(f"{what} {value[:80]!r}: an http(s) URL of at most 500 characters")
    return value


def register(engine: Engine, *, issuer: str, client_id: str, deployments: list[str], auth_url: str, token_url: str,
             jwks_url: str, token_audience: str = "", enrol: bool = False, courses: list[str] | None = None,
             by: str = audit.COMMAND_LINE) -> Platform:
    """Record a platform (or change the one with this issuer and client id): its deployments are added to those
    already known, and the LMS courses ``courses`` (their LTI context ids) bound."""
    if not client_id.strip() or len(client_id) > 200 or not deployments:
        raise AutograderError("serve lti register: --client-id and at least one --deployment are needed")
    values = {"issuer": _url(issuer, "--issuer"), "auth_url": _url(auth_url, "--auth-url"),
              "token_url": _url(token_url, "--token-url"), "jwks_url": _url(jwks_url, "--jwks-url"),
              "token_audience": token_audience and _url(token_audience, "--token-audience"), "enrol": enrol}
    with writing(engine).begin() as conn:
        row = conn.execute(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                     LtiPlatform.client_id == client_id)).first()
        if row is None:
            conn.execute(insert(LtiPlatform).values(client_id=client_id, deployments=list(dict.fromkeys(deployments)),
                                                    added_at=utcnow(), changes_seen=_last_change(conn), **values))
        else:
            known = list(dict.fromkeys([*row.deployments, *deployments]))
            conn.execute(update(LtiPlatform).where(LtiPlatform.id == row.id).values(deployments=known, **values))
        audit.record(conn, by, "lti.register", target=issuer[:200], detail=f"client {client_id}, deployments "
                                                                           f"{', '.join(deployments)}"[:500])
        found = conn.execute(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                       LtiPlatform.client_id == client_id)).one()
        for course in courses or []:
            bind_in(conn, found.id, course, by=by)
    return _platform(found)


def _last_change(conn: Connection) -> int:
    from autograder.service.tables import ScoreChange  # noqa: PLC0415 - (the same module)

    return int(conn.execute(select(func.coalesce(func.max(ScoreChange.id), 0))).scalar_one())


def platforms(engine: Engine) -> list[Platform]:
    with engine.connect() as conn:
        return [_platform(r) for r in conn.execute(select(LtiPlatform).order_by(LtiPlatform.id))]


def find(engine: Engine, issuer: str, client_ids: list[str]) -> Platform | None:
    """The platform registered with ``issuer`` and one of ``client_ids`` (the token's ``aud``)."""
    with engine.connect() as conn:
        row = conn.execute(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                     LtiPlatform.client_id.in_(client_ids[:20]))).first()
    return _platform(row) if row is not None else None


def role_of(roles: Any) -> str | None:
    """The service's role for the LMS's roles: Administrator or Instructor an instructor, TeachingAssistant a TA,
    Learner a student; None for none of them (a guest, an observer, a mentor)."""
    if not isinstance(roles, list):
        return None
    text = [r for r in roles if isinstance(r, str)]
    if any(r.endswith(_ADMIN) or r == "Administrator" for r in text):
        return "instructor"
    if any(r.endswith("#TeachingAssistant") or r == "TeachingAssistant" for r in text):
        return "ta"
    if any(r.endswith("membership#Instructor") or r == "Instructor" for r in text):
        return "instructor"
    if any(r.endswith("membership#Learner") or r == "Learner" for r in text):
        return "student"
    return None


@dataclass(frozen=True)
class Identity:
    """An LMS user as a launch or the member list names them."""

    sub: str
    role: str
    name: str = ""
    email: str = ""
    sourcedid: str = ""         # lis_person_sourcedid: the SIS id (Canvas), the ID number (Moodle)
    canvas_id: str = ""         # the custom field canvas_user_id=$Canvas.user.id


def _fit(value: Any, most: int = 200) -> str:
    text = value if isinstance(value, str) else ""
    return text if len(text) <= most and text.isprintable() else ""


def identity(sub: Any, role: str, *, name: Any = "", email: Any = "", sourcedid: Any = "",
             canvas_id: Any = "") -> Identity | None:
    """The identity from a launch's or a member's values (None without a usable user id)."""
    sub = _fit(sub, 255)
    if not sub:
        return None
    return Identity(sub, role, _fit(name), _fit(email), _fit(sourcedid), _fit(str(canvas_id) if isinstance(
        canvas_id, (int, str)) else ""))


def student_of(conn: Connection, platform_id: int, who: Identity) -> str | None:
    """The roster's student ``who`` is (see the module's rule), or None."""
    linked = conn.execute(select(LtiUser.who).where(LtiUser.platform_id == platform_id, LtiUser.sub == who.sub,
                                                    LtiUser.role == "student")).first()
    if linked is not None:
        return str(linked.who)
    tries = [(Person.canvas_id, who.canvas_id), (Person.moodle_id_number, who.sourcedid),
             (Person.student, who.sourcedid), (Person.student, who.email)]
    for column, value in tries:
        if value:
            rows = conn.execute(select(Person.student).where(column == value).limit(2)).all()
            if len(rows) == 1:
                return str(rows[0].student)
    if who.email:
        rows = conn.execute(select(Person.student).where(func.lower(Person.email) == who.email.lower()).limit(2)).all()
        if len(rows) == 1:
            return str(rows[0].student)
    return None


def on_roster(conn: Connection, student: str) -> bool:
    return conn.execute(select(Person.student).where(Person.student == student)).first() is not None


def new_student_id(conn: Connection, who: Identity) -> str:
    """The roster id of a student the LMS adds: its SIS id, else the email, else ``lti-`` and its user id."""
    for candidate in (who.sourcedid, who.email, f"lti-{who.sub}"[:200]):
        if candidate and conn.execute(select(Person.student).where(Person.student == candidate)).first() is None:
            return candidate
    return f"lti-{who.sub}"[:200]


def staff_name(who: Identity) -> str:
    """How a staff member is named in the record of actions."""
    return who.email or who.name or f"lti-{who.sub}"[:200]


def context_of(claims: dict[str, Any], deployment: str) -> tuple[str, str]:
    """(the LMS course's context id, its title) a launch's claims name; a launch without a context claim is its
    deployment's (``deployment:ID``)."""
    ctx = claims.get(LTI + "context")
    ctx = ctx if isinstance(ctx, dict) else {}
    return _fit(ctx.get("id"), 300) or f"deployment:{deployment}"[:300], _fit(ctx.get("title"), 300)


def bind_in(conn: Connection, platform_id: int, context_id: str, *, by: str, title: str = "") -> int:
    """Bind the LMS course ``context_id`` of a platform (recorded now where it was not), in the caller's
    transaction: its row's id."""
    context_id = _fit(context_id.strip(), 300)
    if not context_id:
        raise AutograderError("--course: the LMS course's context id (1 to 300 printable characters)")
    row = conn.execute(select(LtiContext.id, LtiContext.bound).where(LtiContext.platform_id == platform_id,
                                                                   LtiContext.context_id == context_id)).first()
    now = utcnow()
    if row is None:
        pk = int(conn.execute(insert(LtiContext).values(
            platform_id=platform_id, context_id=context_id, deployment_id="", title=title, lineitems_url="",
            scopes=[], memberships_url="", updated_at=now, bound=True, bound_by=by[:200], bound_at=now)
            .returning(LtiContext.id)).scalar_one())
    elif not row.bound:
        pk = int(row.id)
        conn.execute(update(LtiContext).where(LtiContext.id == pk).values(bound=True, bound_by=by[:200], bound_at=now))
    else:
        return int(row.id)
    audit.record(conn, by, "lti.bind", target=context_id, detail=f"LMS course {title or context_id} of platform "
                                                                 f"{platform_id}"[:500])
    return pk


def set_bound(engine: Engine, context_pk: int, bound: bool, *, by: str) -> str | None:
    """Bind (or unbind) the LMS course recorded as row ``context_pk``: its context id, or None for no such row.
    Unbound, its members' page sessions end at once and its scores wait in the outbox."""
    with writing(engine).begin() as conn:
        row = conn.execute(select(LtiContext.platform_id, LtiContext.context_id, LtiContext.title, LtiContext.bound)
                           .where(LtiContext.id == context_pk)).first()
        if row is None:
            return None
        if bound:
            bind_in(conn, row.platform_id, row.context_id, by=by, title=row.title)
        elif row.bound:
            conn.execute(update(LtiContext).where(LtiContext.id == context_pk).values(bound=False, bound_by=by[:200],
                                                                                     bound_at=utcnow()))
            audit.record(conn, by, "lti.unbind", target=row.context_id, detail=f"LMS course {row.title or '?'}"[:500])
        return str(row.context_id)


def bound_context(engine: Engine, platform: Platform, claims: dict[str, Any], deployment: str, who: Identity) -> bool:
    """Whether the LMS course a launch comes from is bound; where it is not, the course is recorded as asking
    (for the staff's LTI page) and the refused launch in the record of actions, both committed."""
    context_id, title = context_of(claims, deployment)
    with writing(engine).begin() as conn:
        row = conn.execute(select(LtiContext.id, LtiContext.bound).where(LtiContext.platform_id == platform.id,
                                                                       LtiContext.context_id == context_id)).first()
        if row is not None and row.bound:
            return True
        if row is None:
            conn.execute(insert(LtiContext).values(platform_id=platform.id, context_id=context_id,
                                                   deployment_id=deployment[:300], title=title, lineitems_url="",
                                                   scopes=[], memberships_url="", updated_at=utcnow()))
        else:
            conn.execute(update(LtiContext).where(LtiContext.id == row.id).values(title=title, updated_at=utcnow()))
        audit.record(conn, f"lti:{platform.issuer}"[:200], "lti.refused", target=context_id,
                     detail=f"a launch from LMS course {title or '?'} (not bound), LMS user {who.sub} ({who.role}"
                            f"{', ' + who.email if who.email else ''})"[:500])
    return False


@dataclass(frozen=True)
class Course:
    """An LMS course as recorded: bound, or asking (a launch from it was refused)."""

    id: int
    issuer: str
    context_id: str
    title: str
    bound: bool
    memberships_url: str


def courses(engine: Engine) -> list[Course]:
    """Every LMS course recorded, bound first."""
    with engine.connect() as conn:
        rows = conn.execute(select(LtiContext.id, LtiPlatform.issuer, LtiContext.context_id, LtiContext.title,
                                   LtiContext.bound, LtiContext.memberships_url)
                            .join(LtiPlatform, LtiPlatform.id == LtiContext.platform_id)
                            .order_by(LtiContext.bound.desc(), LtiContext.id)).all()
    return [Course(r.id, r.issuer, r.context_id, r.title, bool(r.bound), r.memberships_url) for r in rows]


def context(conn: Connection, platform: Platform, claims: dict[str, Any], deployment: str) -> int | None:
    """The LMS course of a launch's claims, recorded or brought up to date from them: its row's id where it is
    bound, else None (a course new to the service is recorded as asking)."""
    ags = claims.get(AGS) or {}
    nrps = claims.get(NRPS) or {}
    context_id, title = context_of(claims, deployment)
    values = {"deployment_id": deployment[:300], "title": title,
              "lineitems_url": _fit(ags.get("lineitems"), 500),
              "scopes": [s for s in ags.get("scope") or [] if isinstance(s, str)][:10],
              "memberships_url": _fit(nrps.get("context_memberships_url"), 500), "updated_at": utcnow()}
    row = conn.execute(select(LtiContext.id, LtiContext.lineitems_url, LtiContext.memberships_url, LtiContext.bound)
                       .where(LtiContext.platform_id == platform.id, LtiContext.context_id == context_id)).first()
    if row is None:
        conn.execute(insert(LtiContext).values(platform_id=platform.id, context_id=context_id, **values))
        return None
    # A launch without the services' claims (a platform that sends them only sometimes) keeps what is known.
    values["lineitems_url"] = values["lineitems_url"] or row.lineitems_url
    values["memberships_url"] = values["memberships_url"] or row.memberships_url
    if not values["scopes"]:
        values.pop("scopes")
    conn.execute(update(LtiContext).where(LtiContext.id == row.id).values(**values))
    return int(row.id) if row.bound else None


def member(conn: Connection, platform: Platform, context_pk: int, who: Identity, name: str) -> tuple[int, bool]:
    """Record ``who`` as a member of the LMS course ``context_pk`` under ``name`` (a student's roster id, a staff
    member's name): (its row's id, whether it is new)."""
    row = conn.execute(select(LtiUser.id).where(LtiUser.context_id == context_pk, LtiUser.sub == who.sub)).first()
    values = {"who": name, "role": who.role, "name": who.name, "email": who.email, "updated_at": utcnow()}
    if row is None:
        new = conn.execute(insert(LtiUser).values(platform_id=platform.id, context_id=context_pk, sub=who.sub,
                                                  **values).returning(LtiUser.id)).scalar_one()
        return int(new), True
    conn.execute(update(LtiUser).where(LtiUser.id == row.id).values(**values))
    return int(row.id), False


def add_student(conn: Connection, who: Identity, student: str, *, by: str) -> None:
    """Put a student the LMS names on the roster (a launch or the member list, with ``--enrol``)."""
    now = utcnow()
    conn.execute(insert(Person).values(student=student, name=who.name, email=who.email,
                                       moodle_id_number="", canvas_id=who.canvas_id, section="", added_at=now,
                                       updated_at=now))
    audit.record(conn, by, "lti.enrol", target=student, detail=f"LMS user {who.sub}"[:500])


def record_line_item(conn: Any, claims: dict[str, Any], context: int, assignments: set[str]) -> None:
    """A resource link's own line item (Canvas: the assignment the link is) for the assignment it carries (a launch's
    claims: the tool's own, or the ones a JupyterHub kept, :mod:`.hub_users`)."""
    ags = claims.get(AGS) or {}
    custom = claims.get(LTI + "custom")
    assignment = custom.get("assignment") if isinstance(custom, dict) else None
    url = ags.get("lineitem") if isinstance(ags, dict) else None
    if not isinstance(url, str) or len(url) > 500 or assignment not in assignments:
        return
    known = conn.execute(select(LtiLineItem.id).where(LtiLineItem.context_id == context,
                                                     LtiLineItem.assignment == assignment)).first()
    if known is None:
        conn.execute(insert(LtiLineItem).values(context_id=context, assignment=assignment, url=url))
