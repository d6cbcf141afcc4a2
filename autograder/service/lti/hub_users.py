"""A JupyterHub that signs its users in with LTI 1.3 (ltiauthenticator's ``LTI13Authenticator``): each Hub user's
LMS identity linked to the platforms this tool knows, so the score of a student launched from the LMS into the Hub
goes back to the LMS gradebook.

``LTI13Authenticator`` checks the launch (the platform's signature, ``iss``, ``aud``, ``azp``, the nonce and the
state) and, with the Hub's ``enable_auth_state``, keeps its claims as the user's ``auth_state``. The service, a Hub
service whose token may read it (``admin:auth_state`` and ``read:users:name``), asks the Hub for it
(:meth:`autograder.service.hub.Hub.auth_state`) before each round of the passback turns new score changes into the
outbox (:func:`autograder.service.lti.outbox.sync`): for each student whose counted score changed and who was not
looked at in the last :data:`RECHECK` seconds. :func:`link` then records the Hub user as the member of the LMS course
the claims name, under their Hub name (the student id of a Hub user):

- the claims must name a registered platform (``iss``, and its client id in ``aud``), one of its deployments
  (which ``LTI13Authenticator`` does not check) and an LMS course the service is bound to (a course not bound is
  listed as asking on the staff's LTI page), and the LMS must give the user the Learner role;
- nothing is linked, and the log says why, where the LTI tables or the roster know that LMS user as another student
  (the member linked, ``canvas_id``, ``moodle_id_number``, the SIS id, the email:
  :func:`autograder.service.lti.platforms.student_of`) or where another LMS user of the platform is linked to this
  Hub name: a score never reaches the wrong LMS user (make the Hub's user names the roster's ids:
  ``LTI13Authenticator.username_key``);
- a student not on the roster is added to it where the platform was registered with ``--enrol``, as a launch does;
- a new member gets their latest scores (:func:`autograder.service.lti.outbox.backfill`); the resource link's own
  line item (Canvas: the assignment the link is) is recorded as a launch's is.

The id_token itself is not kept by the Hub, only its claims: the service takes them on the Hub's word, as it takes
the Hub's word on who its users are.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine

from autograder.service.db import writing
from autograder.service.lti_tables import LtiPlatform, LtiUser
from autograder.service.tables import ScoreChange
from autograder.service.lti import platforms as P

if TYPE_CHECKING:
    from autograder.course.config import Course
    from autograder.service.hub import Hub

log = logging.getLogger("autograder.service.lti")

#: Seconds before a student's auth_state is read again (a new launch from another LMS course is seen this late).
RECHECK = 300.0
#: Hub users looked at in one round, at most (the others in the next rounds; their latest scores then follow).
PER_ROUND = 200

#: What :func:`link` did.
LINKED, KNOWN, NOT_LTI, UNKNOWN_PLATFORM, DEPLOYMENT, UNBOUND, NOT_LEARNER, CONFLICT = (
    "linked", "known", "not_lti", "unknown_platform", "deployment", "unbound", "not_learner", "conflict")


def _audiences(claims: dict[str, Any]) -> list[str]:
    audience = claims.get("aud")
    return [audience] if isinstance(audience, str) else [a for a in audience or [] if isinstance(a, str)]


#: What gives a new member their latest scores (:func:`autograder.service.lti.outbox.backfill`: the outbox, which
#: calls this module, hands it in).
Backfill = Callable[[Connection, int], Any]


def link(engine: Engine, name: str, state: Any, backfill: Backfill,
         assignments: set[str] | frozenset[str] = frozenset()) -> str:
    """Link the Hub user ``name`` to the LMS user their ``auth_state`` (an LTI launch's claims) names (the module's
    rule), a new member's latest scores put in the outbox by ``backfill``: what was done, one of :data:`LINKED` (a new
    member), :data:`KNOWN` (linked already), or why nothing was."""
    claims: dict[str, Any] = state if isinstance(state, dict) else {}
    if claims.get(P.LTI + "version") != "1.3.0" or not isinstance(claims.get("iss"), str):
        return NOT_LTI
    platform = P.find(engine, claims["iss"], _audiences(claims))
    if platform is None:
        log.warning("Hub user %s: their LMS (%s) is not registered (serve lti register)", name, claims["iss"][:200])
        return UNKNOWN_PLATFORM
    deployment = claims.get(P.LTI + "deployment_id")
    if not isinstance(deployment, str) or deployment not in platform.deployments:
        log.warning("Hub user %s: deployment %s of %s is not registered", name, str(deployment)[:100], platform.issuer)
        return DEPLOYMENT
    lis = claims.get(P.LTI + "lis")
    custom = claims.get(P.LTI + "custom")
    lis, custom = (lis if isinstance(lis, dict) else {}), (custom if isinstance(custom, dict) else {})
    who = P.identity(claims.get("sub"), "student", name=claims.get("name"), email=claims.get("email"),
                     sourcedid=lis.get("person_sourcedid"), canvas_id=custom.get("canvas_user_id"))
    if P.role_of(claims.get(P.LTI + "roles")) != "student" or who is None:
        return NOT_LEARNER
    with writing(engine).begin() as conn:
        known = P.student_of(conn, platform.id, who)
        shared = conn.execute(select(LtiUser.sub).where(LtiUser.platform_id == platform.id, LtiUser.who == name,
                                                        LtiUser.role == "student", LtiUser.sub != who.sub)
                              .limit(1)).first()
        if (known is not None and known != name) or shared is not None:
            other = known if known is not None and known != name else \
                f"the Hub name of LMS user {shared.sub if shared is not None else '?'}"
            log.warning("Hub user %s is LMS user %s of %s, and this service knows them as %s: not linked (make the "
                        "Hub's user names the roster's ids: LTI13Authenticator.username_key)", name, who.sub,
                        platform.issuer, other)
            return CONFLICT
        context = P.context(conn, platform, claims, deployment)
        if context is None:
            log.warning("Hub user %s: their LMS course %s of %s is not bound to this service (its instructor binds it "
                        "on the LTI page): not linked", name, P.context_of(claims, deployment)[0][:100],
                        platform.issuer)
            return UNBOUND
        if platform.enrol and not P.on_roster(conn, name):
            P.add_student(conn, who, name, by=f"lti-hub:{platform.issuer}"[:200])
        member, new = P.member(conn, platform, context, who, name)
        if new:
            backfill(conn, member)
        P.record_line_item(conn, claims, context, set(assignments))
    return LINKED if new else KNOWN


def changed_students(engine: Engine) -> list[str]:
    """The students whose counted score changed since some platform last took the changes (those the passback's
    next round puts in the outbox)."""
    with engine.connect() as conn:
        seen = conn.execute(select(func.min(LtiPlatform.changes_seen))).scalar()
        if seen is None:
            return []
        return [str(r.student) for r in conn.execute(select(ScoreChange.student).where(ScoreChange.id > seen)
                                                     .group_by(ScoreChange.student)
                                                     .order_by(func.min(ScoreChange.id)))]


class HubUsers:
    """The Hub users whose scores changed, linked to their LMS identity before the passback's round (the module's
    rule); each user read again at most every :data:`RECHECK` seconds."""

    def __init__(self, hub: Hub, backfill: Backfill, recheck: float = RECHECK):
        self.hub, self.backfill, self.recheck = hub, backfill, recheck
        self._seen: dict[str, float] = {}

    def refresh(self, engine: Engine, course: Course) -> dict[str, str]:
        """Link the students of the changes not yet in the outbox: what :func:`link` said of each looked at. A Hub
        that does not answer ends the round's looking (the next round asks again)."""
        from autograder.service.errors import ApiError  # noqa: PLC0415 - (the service's own)

        now = time.monotonic()
        for name in [n for n, at in self._seen.items() if now - at >= self.recheck]:
            del self._seen[name]
        assignments = {a.id for a in course.assignments}
        done: dict[str, str] = {}
        for name in [n for n in changed_students(engine) if n not in self._seen][:PER_ROUND]:
            try:
                state = self.hub.auth_state(name)
            except ApiError:
                break
            self._seen[name] = now
            try:
                done[name] = link(engine, name, state, self.backfill, assignments)
            except Exception as exc:  # noqa: BLE001 - one user's link (a launch at the same moment): the others go on
                log.warning("Hub user %s not linked this round: %s", name, type(exc).__name__)
                done[name] = type(exc).__name__
        return done


def from_env(course: Course, backfill: Backfill) -> HubUsers | None:
    """The Hub users' links where this process is a JupyterHub service (:func:`autograder.service.hub.hub_from_env`),
    else None."""
    from autograder.service.hub import hub_from_env  # noqa: PLC0415 - loads jupyterhub's client where it is one

    hub = hub_from_env(course)
    return HubUsers(hub, backfill) if hub is not None else None
