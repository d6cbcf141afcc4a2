"""Deep Linking 2.0: an instructor adding the tool to an LMS assignment picks the kit's assignment from a list.

The deep-linking launch is checked as every launch (:mod:`autograder.service.lti.launch`); what the response needs
(the platform, the deployment, the return URL, the platform's opaque ``data``) is handed to the page that lists the
assignments as a token signed with the tool's secret (HS256, an hour, bound to the staff member signed in): nothing is
stored for a request not finished. The response is a JWT signed with the tool's key (its kid in the JWKS): each
resource link carries the assignment's id (custom ``assignment``), and a ``lineItem`` (its maximum points, the
assignment's id as ``resourceId``) only where the LMS course holds no line item for that assignment yet: linking an
assignment twice never makes a second gradebook column.
"""
from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from autograder.service.db import writing
from autograder.service.lti_tables import LtiContext, LtiLineItem
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import TAG, PlatformError
from autograder.service.lti.launch import Launch, Refused
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course
    from autograder.service.lti.tool import Tool

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
REQUEST_SECONDS = 3600


def request_token(tool: Tool, launch: Launch, who: str) -> str:
    """The deep-linking request, signed for the page that answers it."""
    import jwt  # noqa: PLC0415 - loads cryptography's backends

    settings = launch.claims.get(DL + "deep_linking_settings")
    settings = settings if isinstance(settings, dict) else {}
    url = settings.get("deep_link_return_url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")) or len(url) > 500:
        raise Refused("service.lti.deep_link")
    ctx = launch.claims.get(P.LTI + "context") or {}
    return jwt.encode({"platform": launch.platform.id, "deployment": launch.deployment, "return": url,
                       "data": settings.get("data") if isinstance(settings.get("data"), str) else None,
                       "multiple": bool(settings.get("accept_multiple", False)),
                       "context": str(ctx.get("id") or f"deployment:{launch.deployment}")[:300],
                       "who": who, "exp": int(time.time()) + REQUEST_SECONDS}, tool.key.secret, algorithm="HS256")


def read_request(tool: Tool, token: str, who: str) -> dict[str, Any]:
    """The request a page's form carries back: signed by this tool, for ``who``, not expired, for a deployment the
    platform still has; else :class:`Refused`."""
    import jwt  # noqa: PLC0415 - loads cryptography's backends

    try:
        request = jwt.decode(token[:4000], tool.key.secret, algorithms=["HS256"])
    except jwt.PyJWTError:
        raise Refused("service.lti.deep_link", status=403) from None
    if request.get("who") != who:
        raise Refused("service.lti.deep_link", status=403)
    platform = next((p for p in P.platforms(tool.engine) if p.id == request.get("platform")), None)
    if platform is None or request.get("deployment") not in platform.deployments:
        raise Refused("service.lti.deployment", status=403, deployment=str(request.get("deployment"))[:100])
    request["platform"] = platform
    return request


def _has_line_item(tool: Tool, platform: P.Platform, context_id: str, assignment: str) -> bool:
    """Whether the LMS course holds a line item for ``assignment`` (recorded, or found there and recorded)."""
    with tool.engine.connect() as conn:
        ctx = conn.execute(select(LtiContext).where(LtiContext.platform_id == platform.id,
                                                    LtiContext.context_id == context_id)).first()
        if ctx is None:
            return False
        if conn.execute(select(LtiLineItem.id).where(LtiLineItem.context_id == ctx.id,
                                                     LtiLineItem.assignment == assignment)).first() is not None:
            return True
    if not ctx.lineitems_url:
        return False
    found = tool.services.line_items(platform, ctx.lineitems_url, assignment)
    if not found:
        return False
    try:
        with writing(tool.engine).begin() as conn:
            conn.execute(insert(LtiLineItem).values(context_id=ctx.id, assignment=assignment, url=found[0]["id"]))
    except IntegrityError:
        pass
    return True


def response(tool: Tool, course: Course, request: dict[str, Any], chosen: list[str], launch_url: str) -> str:
    """The signed deep-linking response for the assignments ``chosen``."""
    platform: P.Platform = request["platform"]
    items = []
    for assignment in chosen:
        a = course.assignment(assignment)
        item: dict[str, Any] = {"type": "ltiResourceLink", "title": a.lms_title or a.title, "url": launch_url,
                                "custom": {"assignment": a.id}}
        try:
            linked = _has_line_item(tool, platform, request["context"], a.id)
        except PlatformError:
            linked = False          # the services did not answer: the platform makes the column with the link
        if not linked:
            item["lineItem"] = {"scoreMaximum": maximum(a).points, "label": a.lms_title or a.title,
                                "resourceId": a.id, "tag": TAG}
        items.append(item)
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 600,
        "nonce": secrets.token_urlsafe(16), "azp": platform.client_id,
        P.LTI + "deployment_id": request["deployment"], P.LTI + "message_type": "LtiDeepLinkingResponse",
        P.LTI + "version": "1.3.0", DL + "content_items": items}
    if request.get("data") is not None:
        claims[DL + "data"] = request["data"]
    return tool.key.sign(claims)
