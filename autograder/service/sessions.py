"""Sign-in for the service's pages: a session per browser, and CSRF tokens for every form.

The cookie holds 32 random bytes; the database keeps only their sha256 (as for API tokens), with the caller, the
session's CSRF token and the grant it was opened by: a kit token, an LMS membership (an LTI launch), or JupyterHub's
word. Every request looks the grant up again: a revoked token, a student taken off the roster (whatever opened their
session), a role the LMS changed or an LMS course unbound ends the session at once. The cookie is HttpOnly (no
script reads it), SameSite=Lax (another site's form or fetch does not carry it), Secure behind HTTPS, scoped to the
service's path. Every state-changing request from a page carries the CSRF token: a hidden form field, or the
``X-CSRF-Token`` header for the pages' script; before sign-in, the login form's token is a double-submit cookie.
Comparisons are constant-time.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Engine

from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext, LtiUser
from autograder.service.tables import Person, WebSession, utcnow
from autograder.service.tokens import Caller, live_token

COOKIE = "autograder_session"
LOGIN_CSRF_COOKIE = "autograder_login_csrf"
LANGUAGE_COOKIE = "autograder_lang"
#: How long a page session lasts.
LIFETIME = dt.timedelta(hours=12)


@dataclass(frozen=True)
class Signed:
    """A signed-in browser: who, and the CSRF token its forms carry."""

    caller: Caller
    csrf: str


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def start(engine: Engine, who: Caller) -> tuple[str, str]:
    """A new session for ``who``: (the cookie's value, its CSRF token). Expired sessions are dropped."""
    value, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    now = utcnow()
    with writing(engine).begin() as conn:
        conn.execute(delete(WebSession).where(WebSession.expires_at < now))
        conn.execute(insert(WebSession).values(digest=_digest(value), role=who.role, who=who.who, csrf=csrf,
                                               created_at=now, expires_at=now + LIFETIME, token_id=who.token_id,
                                               lti_member_id=who.lti_member))
    return value, csrf


def find(engine: Engine, value: str | None) -> Signed | None:
    """The session a cookie names, or None (none, unknown, expired, malformed)."""
    if not value or len(value) > 200:
        return None
    wanted = _digest(value)
    with engine.connect() as conn:
        row = conn.execute(select(WebSession).where(WebSession.digest == wanted)).first()
        if row is None or not hmac.compare_digest(row.digest, wanted):
            return None
        if row.expires_at < utcnow():
            return None
        # The session holds only while its grant does: a kit token (revoked, expired: signed out), an LMS
        # membership (gone, another role, its LMS course unbound, a student off the roster: signed out).
        if row.token_id is not None and not live_token(conn, row.token_id):
            return None
        if row.lti_member_id is not None and not live_member(conn, row.lti_member_id, row.role, row.who):
            return None
    return Signed(Caller(row.role, row.who, row.token_id, row.lti_member_id), row.csrf)


def live_member(conn: Connection, member: int, role: str, who: str) -> bool:
    """The LMS membership ``member`` (:mod:`autograder.service.lti.platforms`) still grants ``role`` to ``who``:
    recorded with that role, in an LMS course still bound, and (a student) still on the roster."""
    query = (select(LtiUser.id).join(LtiContext, LtiContext.id == LtiUser.context_id)
             .where(LtiUser.id == member, LtiUser.role == role, LtiUser.who == who, LtiContext.bound.is_(True)))
    if role == "student":
        query = query.join(Person, Person.student == LtiUser.who)
    return conn.execute(query).first() is not None


def end(engine: Engine, value: str | None) -> None:
    if value:
        with writing(engine).begin() as conn:
            conn.execute(delete(WebSession).where(WebSession.digest == _digest(value)))


def same(a: str | None, b: str | None) -> bool:
    """Two CSRF tokens are equal (constant time); a missing one never is."""
    return bool(a) and bool(b) and hmac.compare_digest(str(a).encode(), str(b).encode())


def cookie_options(request: Any) -> dict[str, Any]:
    """How the service's cookies are set: HttpOnly, SameSite=Lax, Secure behind HTTPS, on the service's path."""
    https = request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"
    return {"httponly": True, "samesite": "lax", "secure": https, "path": (request.scope.get("root_path") or "") + "/"}
