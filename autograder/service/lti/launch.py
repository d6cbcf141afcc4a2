"""OIDC third-party login initiation and the LTI launch: the ``id_token`` checked whole before anything is stored.

The login (``/lti/login``, GET or POST from the platform) stores nothing: it sends the browser to the platform's
authorization URL with a random ``state``, set in a cookie of this browser (10 minutes), and a ``nonce`` derived from
it with the tool's secret. The launch (``/lti/launch``, the platform's form POST) is refused unless, in this order:
the ``state`` is this browser's; the token names a registered platform (``iss``, and the client id in ``aud``); its
key id is in the platform's current key set (:mod:`autograder.service.lti.jwks`: fetched again every few minutes
and, at most once per cooldown, for an unknown key id; a withdrawn key is refused from the next fetch on; while the
LMS's JWKS is being fetched or does not answer, a launch is refused at once, 503 or 502, never left waiting on it);
the RS256 signature holds;
``exp``/``iat`` hold within :data:`LEEWAY`; ``azp`` is the client id where there is one (it must be where ``aud``
names several); the ``nonce`` is the one this login made; the deployment is registered; the message type is a
resource link or a deep-linking request; the version is 1.3.0; the LMS gives a role; the LMS course (the ``context``
claim) is one the service is bound to (else the course is listed as asking, the refusal recorded, and nobody signed
in). Then, in one transaction: the nonce is recorded (a token sent again is refused), the LMS course and the member
are recorded, a student is looked up on the roster again (never only by the stored LMS link), and the browser is
signed in with the member's role, for as long as that membership holds (:mod:`autograder.service.lti.platforms`).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError

from autograder.service.db import writing
from autograder.service.lti_tables import LtiNonce
from autograder.service.tables import utcnow
from autograder.service.lti import jwks
from autograder.service.lti import platforms as P
from autograder.service.lti.tool import Tool
from autograder.service.tokens import Caller

#: Seconds a token's exp and iat may be off (the clocks of the LMS and of this machine).
LEEWAY = 60
#: How long a login may take from its initiation to its launch.
STATE_SECONDS = 600
STATE_COOKIE = "autograder_lti_"
MESSAGES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")
#: At most this long an id_token (a launch's form is bounded before this by the guard's small body).
MAX_TOKEN = 15_000


class Refused(Exception):
    """A login or launch refused: ``status``, the message key and its parameters (``retry_after``: seconds after
    which trying again may help, a 503's Retry-After)."""

    def __init__(self, key: str, status: int = 400, retry_after: float | None = None, **params: Any):
        super().__init__(key)
        self.key, self.status, self.params, self.retry_after = key, status, params, retry_after


def cookie_name(state: str) -> str:
    """The cookie that binds ``state`` to the browser that started the login."""
    return STATE_COOKIE + hashlib.sha256(state.encode()).hexdigest()[:16]


def _nonce(tool: Tool, state: str) -> str:
    return tool.key.mac("nonce:" + state)


def login(tool: Tool, params: dict[str, str], launch_url: str) -> tuple[str, str]:
    """The platform's authorization URL to send the browser to, and the state to bind to it."""
    issuer, hint = params.get("iss", ""), params.get("login_hint", "")
    if not issuer or not hint or len(issuer) > 300 or len(hint) > 2000:
        raise Refused("service.lti.login")
    client = params.get("client_id", "")
    found = [p for p in P.platforms(tool.engine) if p.issuer == issuer and (not client or p.client_id == client)]
    deployment = params.get("lti_deployment_id")
    if deployment:
        found = [p for p in found if deployment in p.deployments] or found
    if not found:
        raise Refused("service.lti.unknown_platform", issuer=issuer[:200], client=client[:100] or "?")
    platform = found[0]
    state = secrets.token_urlsafe(32)
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": launch_url, "login_hint": hint, "state": state,
             "nonce": _nonce(tool, state)}
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"][:2000]
    sep = "&" if "?" in platform.auth_url else "?"
    return f"{platform.auth_url}{sep}{urlencode(query)}", state


@dataclass(frozen=True)
class Launch:
    """A launch whose token held every check."""

    platform: P.Platform
    claims: dict[str, Any]
    deployment: str
    message: str
    who: P.Identity

    @property
    def custom(self) -> dict[str, Any]:
        custom = self.claims.get(P.LTI + "custom")
        return custom if isinstance(custom, dict) else {}


def check(tool: Tool, id_token: str, state: str, cookie: str | None) -> Launch:
    """The launch's token checked whole (the module's rule), or :class:`Refused`. Nothing is stored."""
    if not state or len(state) > 200 or not cookie or not hmac.compare_digest(cookie.encode(), state.encode()):
        raise Refused("service.lti.state")
    if not id_token or len(id_token) > MAX_TOKEN:
        raise Refused("service.lti.malformed")
    platform, claims, audiences = _signed(tool, id_token)
    now = utcnow().timestamp()
    if not isinstance(claims["iat"], (int, float)) or claims["iat"] > now + LEEWAY:
        raise Refused("service.lti.future", status=401)
    azp = claims.get("azp")
    if (azp is not None or len(audiences) > 1) and azp != platform.client_id:
        raise Refused("service.lti.azp", status=401)
    if not hmac.compare_digest(str(claims["nonce"]).encode(), _nonce(tool, state).encode()):
        raise Refused("service.lti.nonce", status=401)
    deployment = claims.get(P.LTI + "deployment_id")
    if not isinstance(deployment, str) or deployment not in platform.deployments:
        raise Refused("service.lti.deployment", status=403, deployment=str(deployment)[:100])
    message = claims.get(P.LTI + "message_type")
    if message not in MESSAGES:
        raise Refused("service.lti.message", message=str(message)[:60])
    if claims.get(P.LTI + "version") != "1.3.0":
        raise Refused("service.lti.version", version=str(claims.get(P.LTI + "version"))[:20])
    who = _identity(claims)
    if message == "LtiDeepLinkingRequest" and who.role == "student":
        raise Refused("service.lti.staff_only", status=403)
    return Launch(platform, claims, deployment, str(message), who)


def _signed(tool: Tool, id_token: str) -> tuple[P.Platform, dict[str, Any], list[str]]:
    """(the platform, the claims, the audiences) of a token signed by a registered platform's key, within its
    times, for this tool."""
    import jwt  # noqa: PLC0415 - loads cryptography's backends

    try:
        header = jwt.get_unverified_header(id_token)
        said = jwt.decode(id_token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise Refused("service.lti.malformed") from None
    audience = said.get("aud")
    audiences = [audience] if isinstance(audience, str) else [a for a in audience or [] if isinstance(a, str)]
    issuer = str(said["iss"]) if isinstance(said.get("iss"), str) else ""
    platform = P.find(tool.engine, issuer, audiences)
    if platform is None:
        raise Refused("service.lti.unknown_platform", status=401, issuer=str(issuer)[:200],
                      client=", ".join(audiences)[:100] or "?")
    kid = header.get("kid")
    if header.get("alg") != "RS256" or not isinstance(kid, str):
        raise Refused("service.lti.bad_signature", status=401)
    key = _signing_key(tool, platform, kid)
    claims = _verified(id_token, key, platform)
    return platform, claims, audiences


def _signing_key(tool: Tool, platform: P.Platform, kid: str) -> Any:
    """The ``jwt.PyJWK`` of ``kid`` in the platform's current key set; :class:`Refused` for a key id not in it, or
    a key set being fetched, unusable or not answering."""
    try:
        return tool.jwks(platform.jwks_url).signing_key(kid)
    except jwks.UnknownKey:
        raise Refused("service.lti.unknown_key", status=401, kid=kid[:80]) from None
    except jwks.Busy as exc:
        raise Refused("service.lti.jwks_busy", status=503, retry_after=exc.retry_after,
                      seconds=math.ceil(exc.retry_after or 1)) from None
    except jwks.Unusable:
        raise Refused("service.lti.bad_jwks", status=502, url=platform.jwks_url) from None
    except jwks.KeySetError as exc:
        raise Refused("service.lti.platform_away", status=502, retry_after=exc.retry_after,
                      url=platform.jwks_url) from None


def _verified(id_token: str, key: Any, platform: P.Platform) -> dict[str, Any]:
    """The token's claims where its RS256 signature by ``key`` holds, for this platform's client id and issuer,
    within its times (:data:`LEEWAY`), with every claim a launch needs; else :class:`Refused`."""
    import jwt  # noqa: PLC0415 - loads cryptography's backends

    try:
        claims: dict[str, Any] = jwt.decode(id_token, key.key, algorithms=["RS256"], audience=platform.client_id,
                                            issuer=platform.issuer, leeway=LEEWAY,
                                            options={"require": ["exp", "iat", "iss", "aud", "nonce"]})
    except jwt.ExpiredSignatureError:
        raise Refused("service.lti.expired", status=401) from None
    except jwt.ImmatureSignatureError:
        raise Refused("service.lti.future", status=401) from None
    except jwt.InvalidSignatureError:
        raise Refused("service.lti.bad_signature", status=401) from None
    except jwt.PyJWTError:
        raise Refused("service.lti.malformed") from None
    return claims


def _identity(claims: dict[str, Any]) -> P.Identity:
    role = P.role_of(claims.get(P.LTI + "roles"))
    if role is None:
        raise Refused("service.lti.no_role", status=403)
    lis: dict[str, Any] = claims.get(P.LTI + "lis") or {}
    custom: dict[str, Any] = claims.get(P.LTI + "custom") or {}
    if not isinstance(lis, dict) or not isinstance(custom, dict):
        raise Refused("service.lti.malformed")
    who = P.identity(claims.get("sub"), role, name=claims.get("name"), email=claims.get("email"),
                     sourcedid=lis.get("person_sourcedid"), canvas_id=custom.get("canvas_user_id"))
    if who is None:
        raise Refused("service.lti.malformed")
    return who


def _unbound(launch: Launch) -> Refused:
    context_id, title = P.context_of(launch.claims, launch.deployment)
    return Refused("service.lti.unbound_course", status=403, course=(title or context_id)[:100],
                   context=context_id[:100])


def accept(tool: Tool, launch: Launch, assignments: set[str]) -> Caller:
    """Record the launch (its nonce, its LMS course, its member; a student added to the roster where the platform
    allows it) in one transaction, and the caller to sign in, holding by that membership; :class:`Refused` (nothing
    stored but the refusal) for an LMS course the service is not bound to (:func:`.platforms.bound_context`), a
    nonce seen before, or a student not on the roster (asked again at every launch: a student taken off it is
    refused, or enrolled again where the platform enrols)."""
    from autograder.service.lti import outbox  # noqa: PLC0415 - (a module of this package)

    if not P.bound_context(tool.engine, launch.platform, launch.claims, launch.deployment, launch.who):
        raise _unbound(launch)
    digest = hashlib.sha256(str(launch.claims["nonce"]).encode()).hexdigest()
    expires = dt.datetime.fromtimestamp(float(launch.claims["exp"]) + LEEWAY, dt.timezone.utc)
    who = launch.who
    try:
        with writing(tool.engine).begin() as conn:
            now = utcnow()
            conn.execute(delete(LtiNonce).where(LtiNonce.expires_at < now))
            if conn.execute(select(LtiNonce.digest).where(LtiNonce.digest == digest)).first() is not None:
                raise Refused("service.lti.replayed", status=401)
            conn.execute(insert(LtiNonce).values(digest=digest, expires_at=expires))
            context = P.context(conn, launch.platform, launch.claims, launch.deployment)
            if context is None:             # unbound since the check above
                raise _unbound(launch)
            if who.role == "student":
                student = P.student_of(conn, launch.platform.id, who)
                if student is None or not P.on_roster(conn, student):
                    if not launch.platform.enrol:
                        raise Refused("service.lti.not_on_roster", status=403, who=P.staff_name(who))
                    student = student or P.new_student_id(conn, who)
                    P.add_student(conn, who, student, by=f"lti:{launch.platform.issuer}"[:200])
                member, new = P.member(conn, launch.platform, context, who, student)
                if new:
                    outbox.backfill(conn, member)
                caller = Caller("student", student, lti_member=member)
            else:
                member, _ = P.member(conn, launch.platform, context, who, P.staff_name(who))
                caller = Caller(who.role, P.staff_name(who), lti_member=member)
            P.record_line_item(conn, launch.claims, context, assignments)
    except IntegrityError:
        raise Refused("service.lti.replayed", status=401) from None
    return caller
