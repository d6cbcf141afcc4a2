"""Who is calling: the one authorization check of every route, as FastAPI dependencies.

- :data:`Who` (the API): a valid Bearer token (the kit's, or JupyterHub's where the service runs inside a
  Hub), or a page's session whose writes carry its CSRF token in ``X-CSRF-Token``; else 401.
- :data:`SignedPage` (a page for anyone signed in), :data:`StaffPage` (the dashboard: TAs and instructors) and
  :data:`InstructorPage` (the roster's and the tokens' changes: instructors only): the page's session; without
  one the browser is sent to sign in (:class:`~autograder.service.errors.SignInRequired`), a student on a staff
  page gets 403, and so does a TA on an instructor's.

Each, once the caller is known, tells the guard that the body may be read to the route's limit, and counts
the request against the caller's rate limit; a refusal before that counts against the address
(:func:`stranger`). Every route but the few of :data:`PUBLIC_ROUTES` depends on one of them:
``tests/service/test_routes.py`` walks the app's routes and holds each to it.
"""
from __future__ import annotations

import math
from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import FormData
from starlette.concurrency import run_in_threadpool

from autograder.service import sessions
from autograder.service.context import service
from autograder.service.errors import ApiError, SignInRequired
from autograder.service.guard import authenticated
from autograder.service.tokens import Caller, caller

#: (method, path) of the routes anyone may call: signing in, the pages' static files, the API's schema, and what an
#: LMS calls (LTI's login initiation and launch, checked whole before anything is stored, and the tool's JWKS).
PUBLIC_ROUTES = frozenset({
    ("GET", "/"), ("GET", "/login"), ("POST", "/login"), ("POST", "/logout"),
    ("GET", "/static/style.css"), ("GET", "/static/app.js"),
    ("GET", "/hub-login"), ("GET", "/oauth_callback"),
    ("GET", "/lti/jwks.json"), ("GET", "/lti/login"), ("POST", "/lti/login"), ("POST", "/lti/launch"),
    ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"),
})


def stranger(request: Request, status: int, key: str) -> ApiError:
    """The refusal of a request whose caller is not known, counted against its address: past the course's
    stranger limit in a minute, 429 instead."""
    address = request.client.host if request.client else "?"
    wait = service(request).strangers.wait(address)
    if wait:
        return ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    return ApiError(status, key)


def _limited(request: Request, who: Caller) -> Caller:
    wait = service(request).requests.wait(who.who)
    if wait:
        raise ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    authenticated(request)          # the caller is known: the guard lets the body be read to the route's limit
    return who


async def api_caller(request: Request) -> Caller:
    """The API's check: a valid Bearer token, or a page's session (its writes carrying the session's CSRF
    token in ``X-CSRF-Token``), or 401."""
    state = service(request)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header and request.cookies.get(sessions.COOKIE):
        signed = await run_in_threadpool(sessions.find, state.engine, request.cookies[sessions.COOKIE])
        if signed is None:
            raise stranger(request, 401, "service.signed_out")
        if request.method not in ("GET", "HEAD") and not sessions.same(request.headers.get("x-csrf-token"),
                                                                       signed.csrf):
            raise stranger(request, 403, "service.bad_csrf")
        return _limited(request, signed.caller)
    if scheme.lower() not in ("bearer", "token") or not token.strip():
        raise stranger(request, 401, "service.no_token")
    token = token.strip()
    if not token.isascii() or not token.isprintable():
        raise stranger(request, 401, "service.token_characters")
    who = await run_in_threadpool(caller, state.engine, token)
    if who is None and state.hub is not None:         # a JupyterHub token (a single-user server's, a Hub user's)
        who = await run_in_threadpool(state.hub.api_caller, token)
    if who is None:
        raise stranger(request, 401, "service.bad_token")
    return _limited(request, who)


async def page_session(request: Request) -> sessions.Signed | None:
    """The page's session, or None; once known, the guard lets the body be read to the route's limit."""
    signed = await run_in_threadpool(sessions.find, service(request).engine, request.cookies.get(sessions.COOKIE))
    if signed is not None:
        authenticated(request)
    return signed


async def signed_page(request: Request) -> sessions.Signed:
    """A page for anyone signed in: the session, or the browser is sent to sign in."""
    signed = await page_session(request)
    if signed is None:
        raise SignInRequired()
    return signed


async def staff_page(request: Request) -> sessions.Signed:
    """A staff page (the dashboard): a TA's or an instructor's session; a student's gets 403."""
    signed = await signed_page(request)
    if not signed.caller.staff:
        raise ApiError(403, "service.instructors_only")
    return signed


async def instructor_page(request: Request) -> sessions.Signed:
    """What only an instructor may do (change the roster, revoke or issue again a token): a TA's session gets
    403 too."""
    signed = await staff_page(request)
    if not signed.caller.instructor:
        raise ApiError(403, "service.instructor_only")
    return signed


async def form_checked(request: Request, signed: sessions.Signed) -> FormData:
    """A page's form, read once the caller is known, refused without the session's CSRF token."""
    form = await request.form()
    if not sessions.same(str(form.get("csrf") or ""), signed.csrf):
        raise ApiError(403, "service.bad_csrf")
    return form


Who = Annotated[Caller, Depends(api_caller)]
SignedPage = Annotated[sessions.Signed, Depends(signed_page)]
StaffPage = Annotated[sessions.Signed, Depends(staff_page)]
InstructorPage = Annotated[sessions.Signed, Depends(instructor_page)]
#: The dependencies that say who is calling: every route not in PUBLIC_ROUTES depends on one of them.
CHECKS = (api_caller, signed_page, staff_page, instructor_page)
STAFF_CHECKS = (staff_page, instructor_page)
INSTRUCTOR_CHECKS = (instructor_page,)
