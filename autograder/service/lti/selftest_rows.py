"""The database's rows of an LTI self-test (:mod:`autograder.service.lti.selftest`): recorded before its steps,
every one removed after.

Its platform, LMS course (bound) and student are recorded before the steps (:func:`register`); afterwards every row
of the run is removed in one transaction (:func:`remove`): those, what the service recorded for its launches
(members, nonces, page sessions, a line item, the score) and what was recorded under its name. A run killed midway
leaves them; a later run removes those of runs older than :data:`STALE` (:func:`remove_stale`).

What it trusts: the run's own names (:data:`~autograder.service.lti.selftest_platform.ISSUER` and
:data:`~autograder.service.lti.selftest_platform.STUDENT` with the run): it removes no row of another issuer,
student or caller.
"""
from __future__ import annotations

import datetime as dt
import hashlib

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Engine

from autograder.service.db import writing
from autograder.service.lti.selftest_platform import ISSUER, STUDENT, TITLE, Platform
from autograder.service.lti_tables import LtiContext, LtiLineItem, LtiNonce, LtiPlatform, LtiScore, LtiUser
from autograder.service.tables import Action, Person, ScoreChange, WebSession, utcnow

#: A self-test's rows older than this are a run that was killed: the next run removes them.
STALE = dt.timedelta(hours=1)


def register(engine: Engine, platform: Platform) -> None:
    """The platform, its LMS course (bound) and its student, recorded (nothing in the record of actions: they are
    removed again by :func:`remove`)."""
    now = utcnow()
    with writing(engine).begin() as conn:
        last = int(conn.execute(select(func.coalesce(func.max(ScoreChange.id), 0))).scalar_one())
        pk = conn.execute(insert(LtiPlatform).values(
            issuer=platform.issuer, client_id=platform.client_id, deployments=[platform.deployment],
            auth_url=platform.auth_url, token_url=platform.token_url, jwks_url=f"{platform.base}/jwks",
            token_audience="", enrol=False, changes_seen=last, added_at=now).returning(LtiPlatform.id)).scalar_one()
        conn.execute(insert(LtiContext).values(
            platform_id=pk, context_id=platform.context, deployment_id=platform.deployment, title=TITLE,
            lineitems_url="", scopes=[], memberships_url="", updated_at=now, bound=True, bound_by="selftest",
            bound_at=now))
        conn.execute(insert(Person).values(student=platform.student, name=TITLE, email="", section="", canvas_id="",
                                           moodle_id_number="", added_at=now, updated_at=now))


def remove(engine: Engine, issuer: str, student: str, nonces: list[str]) -> None:
    """Every row of the self-test of ``issuer``: its platform, LMS course, members, their page sessions and scores,
    its line items, the nonces of its launches, its student, and what was recorded under its name; in one
    transaction (a round of the passback sees all of them or none)."""
    with writing(engine).begin() as conn:
        pk = conn.execute(select(LtiPlatform.id).where(LtiPlatform.issuer == issuer)).scalar()
        if pk is not None:
            members = select(LtiUser.id).where(LtiUser.platform_id == pk)
            contexts = select(LtiContext.id).where(LtiContext.platform_id == pk)
            conn.execute(delete(LtiScore).where(LtiScore.member_id.in_(members)))
            conn.execute(delete(WebSession).where(WebSession.lti_member_id.in_(members)))
            conn.execute(delete(LtiLineItem).where(LtiLineItem.context_id.in_(contexts)))
            conn.execute(delete(LtiUser).where(LtiUser.platform_id == pk))
            conn.execute(delete(LtiContext).where(LtiContext.platform_id == pk))
            conn.execute(delete(LtiPlatform).where(LtiPlatform.id == pk))
        digests = [hashlib.sha256(n.encode()).hexdigest() for n in nonces]
        if digests:
            conn.execute(delete(LtiNonce).where(LtiNonce.digest.in_(digests)))
        conn.execute(delete(Person).where(Person.student == student))
        conn.execute(delete(Action).where(Action.who == f"lti:{issuer}"[:200]))


def remove_stale(engine: Engine) -> int:
    """The rows of self-tests older than :data:`STALE` (killed midway) removed: how many self-tests."""
    with engine.connect() as conn:
        issuers = list(conn.execute(select(LtiPlatform.issuer).where(
            LtiPlatform.issuer.startswith(ISSUER, autoescape=True),
            LtiPlatform.added_at < utcnow() - STALE)).scalars())
    for issuer in issuers:
        remove(engine, issuer, STUDENT + issuer.removeprefix(ISSUER), [])
    return len(issuers)
