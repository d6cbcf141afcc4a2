"""LTI 1.3: the routes the LMS calls (public by nature: the login initiation, the launch, the tool's JWKS; each
launch checked whole before anything is stored, :mod:`autograder.service.lti.launch`), the deep-linking pages, and
the staff's LTI page (the platforms, the LMS courses, each student's passback; a sync and a member pull on demand)."""
from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.service import repository, sessions
from autograder.service.auth import InstructorPage, StaffPage, form_checked
from autograder.service.context import ServiceDep, service
from autograder.service.errors import ApiError, base_path, form_id
from autograder.service.guard import SECURITY_HEADERS
from autograder.service.lti import deep_linking, hub_users, launch, nrps, outbox
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import PlatformError
from autograder.service.lti.tool import CANVAS_PLACEMENTS, CUSTOM_FIELDS, MOODLE_DEEP_LINKING, Tool
from autograder.service.lti.tool import urls as tool_urls
from autograder.service.routes.signin import sign_in
from autograder.service.ui import UI, closes_form, language, render, to_dashboard

router = APIRouter(include_in_schema=False)


def tool(request: Request) -> Tool:
    found: Tool = request.app.state.lti
    return found


def launch_url(request: Request) -> str:
    """The tool's launch URL as the LMS knows it (the login's redirect URI, a deep link's target): under course.yml's
    ``service.public_url`` where it is set (behind a proxy that does not pass the scheme and host on, the request's
    own URL would be the inner address and the LMS would refuse it), else the request's."""
    public = service(request).course.service.public_url
    return tool_urls(public)["launch"] if public else str(request.url_for("lti_launch"))


def _refusal(request: Request, refused: launch.Refused) -> ApiError:
    """A refused login or launch, counted against the address (as every request whose caller is not known); its
    Retry-After where it has one (the LMS's key set being fetched or not answering)."""
    address = request.client.host if request.client else "?"
    wait = service(request).strangers.wait(address)
    if wait:
        return ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    return ApiError(refused.status, refused.key, retry_after=refused.retry_after, **refused.params)


def _state_cookie(request: Request) -> dict[str, Any]:
    """The login state's cookie: the launch is the platform's cross-site POST, so behind HTTPS it is SameSite=None
    (and Secure); over plain HTTP (a machine of one's own) Lax."""
    options = sessions.cookie_options(request)
    if options["secure"]:
        options["samesite"] = "none"
    return options


@router.get("/lti/jwks.json")
async def jwks(request: Request) -> Response:
    """the tool's public key as a JWKS (what the LMS checks the tool's signed assertions and deep-linking responses
    with)"""
    found = await run_in_threadpool(lambda: tool(request).key.jwks)
    return JSONResponse(found, headers={"Cache-Control": "max-age=300"})


@router.get("/lti/login", name="lti_login")
@router.post("/lti/login")
@closes_form
async def login(request: Request) -> Response:
    """LTI 1.3 OIDC login initiation from the LMS (iss, login_hint, lti_message_hint, client_id, lti_deployment_id):
    to the platform's authorization URL, the state bound to this browser; nothing stored"""
    params = dict(request.query_params)
    if request.method == "POST":
        params.update({k: str(v) for k, v in (await request.form()).items()})
    try:
        target, state = await run_in_threadpool(launch.login, tool(request), params,
                                                launch_url(request))
    except launch.Refused as refused:
        raise _refusal(request, refused) from None
    response = RedirectResponse(target, status_code=302)
    response.set_cookie(launch.cookie_name(state), state, max_age=launch.STATE_SECONDS, **_state_cookie(request))
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/lti/launch", name="lti_launch")
@closes_form
async def launch_page(request: Request, state: ServiceDep) -> Response:
    """the LMS's launch (form: id_token, state): the token checked whole, then the browser signed in with the LMS's
    role (a deep-linking request: on to the list of assignments)"""
    form = await request.form()
    given = str(form.get("state") or "")
    cookie = request.cookies.get(launch.cookie_name(given)) if given else None
    the_tool = tool(request)
    try:
        checked = await run_in_threadpool(launch.check, the_tool, str(form.get("id_token") or ""), given, cookie)
        who = await run_in_threadpool(launch.accept, the_tool, checked, set(state.assignments))
        next_url = f"{base_path(request)}/{'dashboard' if who.staff else 'me'}"
        if checked.message == "LtiDeepLinkingRequest":
            token = await run_in_threadpool(deep_linking.request_token, the_tool, checked, who.who)
            next_url = f"{base_path(request)}/lti/deep-link?request={quote(token)}"
    except launch.Refused as refused:
        raise _refusal(request, refused) from None
    response = await run_in_threadpool(sign_in, request, who, next_url)
    response.delete_cookie(launch.cookie_name(given), path=_state_cookie(request)["path"])
    return response


@router.get("/lti/deep-link")
async def deep_link_page(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """the assignments to add to the LMS (query: request, the signed deep-linking request)"""
    token = request.query_params.get("request", "")
    try:
        asked = await run_in_threadpool(deep_linking.read_request, tool(request), token, signed.caller.who)
    except launch.Refused as refused:
        raise ApiError(refused.status, refused.key, **refused.params) from None
    lang = language(request, state.course)
    return render(request, state, "lti_deep_link", signed, title=UI[lang]["lti_pick"], request_token=token,
                  multiple=asked["multiple"], assignments=[(a.id, a.title_in(lang)) for a in state.course.assignments])


@router.post("/lti/deep-link")
@closes_form
async def deep_link(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """the deep-linking response for the assignments picked, signed with the tool's key, posted back to the LMS (one
    line item per assignment)"""
    form = await form_checked(request, signed)
    known = set(state.assignments)
    chosen = [str(a) for a in form.getlist("assignment") if str(a) in known]
    if not chosen:
        raise ApiError(422, "service.malformed", fields="assignment")
    try:
        asked = await run_in_threadpool(deep_linking.read_request, tool(request), str(form.get("request") or ""),
                                        signed.caller.who)
    except launch.Refused as refused:
        raise ApiError(refused.status, refused.key, **refused.params) from None
    if not asked["multiple"]:
        chosen = chosen[:1]
    signed_response = await run_in_threadpool(deep_linking.response, tool(request), state.course, asked, chosen,
                                              launch_url(request))
    lang = language(request, state.course)
    page = render(request, state, "lti_return", signed, title=UI[lang]["lti_pick"], return_url=asked["return"],
                  jwt=signed_response, chosen=chosen)
    # The one page whose form leaves the service: to the LMS's return URL only.
    target = urlsplit(asked["return"])
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    page.headers["Content-Security-Policy"] = csp.replace("form-action 'self'",
                                                          f"form-action 'self' {target.scheme}://{target.netloc}")
    page.headers["Cache-Control"] = "no-store"
    return page


def _overview(state: Any) -> dict[str, Any]:
    contexts, rows = repository.lti_overview(state.engine)
    passback: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cell = passback.setdefault((r.who, r.assignment), {"sent": None, "pending": 0, "error": ""})
        if r.state == "sent":
            cell["sent"] = r.points
        elif r.state == "pending":
            cell["pending"] += 1
            cell["error"] = r.error
    return {"platforms": P.platforms(state.engine), "contexts": contexts,
            "passback": [{"student": s, "assignment": a, **c} for (s, a), c in sorted(passback.items())]}


@router.get("/dashboard/lti")
async def lti_page(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """the LMSs registered, the LMS courses, each student's passback (last value sent, waiting, last problem), the
    tool's URLs"""
    lang = language(request, state.course)
    overview = await run_in_threadpool(_overview, state)
    public = state.course.service.public_url
    # The public URL where course.yml gives it: what the LMS reaches, never the address this page was opened at (an
    # SSH tunnel's 127.0.0.1, a proxy's inner address). Without it, the page's own URLs, and the page says so.
    urls = tool_urls(public or str(request.url_for("jwks")).removesuffix("/lti/jwks.json"))
    return render(request, state, "lti", signed, title=UI[lang]["lti"], urls=urls, public_url=public,
                  canvas_placements=", ".join(CANVAS_PLACEMENTS), moodle_option=MOODLE_DEEP_LINKING,
                  custom_fields=CUSTOM_FIELDS, **overview)


@router.post("/dashboard/lti/bind")
@closes_form
async def bind(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    """bind an LMS course to the service (form: context, the course's row; bound: 1 to bind, 0 to unbind): a launch
    from it is then taken (or refused, and its members' sessions end)"""
    form = await form_checked(request, signed)
    context = form_id(form, "context")
    bound = str(form.get("bound") or "") == "1"
    found = await run_in_threadpool(P.set_bound, state.engine, context, bound, by=signed.caller.who)
    if found is None:
        raise ApiError(404, "service.malformed", fields="context")
    lang = language(request, state.course)
    said = (UI[lang]["lti_bound_now"] if bound else UI[lang]["lti_unbound_now"]).format(course=found)
    return to_dashboard(request, said, "lti")


@router.post("/dashboard/lti/sync")
@closes_form
async def sync_now(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """send the pending scores to the LMS now"""
    await form_checked(request, signed)
    users = hub_users.from_env(state.course, outbox.backfill)   # inside a JupyterHub: its LTI students linked first
    done = await run_in_threadpool(lambda: outbox.sync(tool(request), state.course, hub_users=users))
    said = UI[language(request, state.course)]["lti_synced"].format(sent=done.sent, failed=done.failed)
    return to_dashboard(request, said, "lti")


@router.post("/dashboard/lti/roster")
@closes_form
async def pull_roster(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    """read each LMS course's members into the roster"""
    await form_checked(request, signed)
    try:
        pulled = await run_in_threadpool(lambda: nrps.pull(tool(request), by=signed.caller.who))
    except PlatformError as exc:
        raise ApiError(502, "service.lti.platform_away", url=str(exc)[:200]) from None
    said = UI[language(request, state.course)]["lti_pulled"].format(read=pulled.read, added=len(pulled.added))
    return to_dashboard(request, said, "lti")
