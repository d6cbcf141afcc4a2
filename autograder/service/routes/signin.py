"""Signing in and out of the pages (a token typed into the form; inside JupyterHub, the Hub's OAuth), the
first page, and the pages' static files."""
from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.service import sessions
from autograder.service.auth import form_checked, page_session
from autograder.service.context import Service, ServiceDep, service
from autograder.service.errors import ApiError, base_path, to_login
from autograder.service.tokens import Caller, caller
from autograder.service.ui import SCRIPT, STYLE, UI, closes_form, language, local_next, render

router = APIRouter(include_in_schema=False)


def sign_in(request: Request, who: Caller, next_url: str | None = None) -> Response:
    """A new page session for ``who`` (its cookie set), and on to ``next_url`` (a page of this service)."""
    value, _csrf = sessions.start(service(request).engine, who)
    response = RedirectResponse(local_next(request, next_url), status_code=303)
    response.set_cookie(sessions.COOKIE, value, max_age=int(sessions.LIFETIME.total_seconds()),
                        **sessions.cookie_options(request))
    response.delete_cookie(sessions.LOGIN_CSRF_COOKIE, path=sessions.cookie_options(request)["path"])
    return response


@router.get("/static/style.css")
def style() -> Response:
    from autograder.reports.feedback import FEEDBACK_CSS  # noqa: PLC0415 - loads yaml

    return Response(FEEDBACK_CSS + "\n" + STYLE, media_type="text/css", headers={"Cache-Control": "max-age=300"})


@router.get("/static/app.js")
def script() -> Response:
    return Response(SCRIPT, media_type="text/javascript", headers={"Cache-Control": "max-age=300"})


@router.get("/")
async def home(request: Request) -> Response:
    signed = await page_session(request)
    if signed is None:
        return to_login(request)
    return RedirectResponse(f"{base_path(request)}/{'dashboard' if signed.caller.staff else 'me'}",
                            status_code=303)


@router.get("/login")
async def login_page(request: Request, state: ServiceDep, next: str = "") -> Response:  # the query's name
    csrf = request.cookies.get(sessions.LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(request, state, "login", None, csrf=csrf, next=local_next(request, next),
                      hub=state.hub is not None, error=None)
    response.set_cookie(sessions.LOGIN_CSRF_COOKIE, csrf, max_age=3600, **sessions.cookie_options(request))
    return response


@router.post("/login")
@closes_form
async def login(request: Request, state: ServiceDep) -> Response:
    form = await request.form()
    cookie = request.cookies.get(sessions.LOGIN_CSRF_COOKIE)
    if not sessions.same(str(form.get("csrf") or ""), cookie):
        raise ApiError(403, "service.bad_csrf")
    token = str(form.get("token") or "").strip()
    who = await run_in_threadpool(caller, state.engine, token)
    if who is None and state.hub is not None and token:
        who = await run_in_threadpool(state.hub.api_caller, token)
    if who is None:
        return _refused(request, state, cookie, str(form.get("next") or ""))
    return await run_in_threadpool(sign_in, request, who, str(form.get("next") or ""))


def _refused(request: Request, state: Service, csrf: str | None, next_url: str) -> Response:
    lang = language(request, state.course)
    return render(request, state, "login", None, csrf=csrf, next=local_next(request, next_url),
                  hub=state.hub is not None, error=UI[lang]["bad_token"], status=401)


@router.post("/logout")
@closes_form
async def logout(request: Request, state: ServiceDep) -> Response:
    signed = await page_session(request)
    if signed is not None:
        await form_checked(request, signed)
        await run_in_threadpool(sessions.end, state.engine, request.cookies.get(sessions.COOKIE))
    response = RedirectResponse(f"{base_path(request)}/login", status_code=303)
    response.delete_cookie(sessions.COOKIE, path=sessions.cookie_options(request)["path"])
    return response
