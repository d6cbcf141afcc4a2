"""The service as a JupyterHub service: Hub tokens are callers, and the pages sign in through the Hub.

Started by the Hub (a managed service in ``c.JupyterHub.services``) or beside it (an external one,
given the same variables), ``autograder serve`` finds ``JUPYTERHUB_API_TOKEN`` and
``JUPYTERHUB_SERVICE_PREFIX`` in its environment and then:

- takes a JupyterHub token as an API caller (:meth:`Hub.api_caller`): a single-user server's own
  ``JUPYTERHUB_API_TOKEN`` (what ``submit()`` sends inside the Hub) or a user's API token, when the
  Hub says it belongs to a user and carries ``access:services!service=NAME`` (or ``access:services``).
  The user's Hub name is the student id; a name in course.yml's ``service.instructors`` or a member
  of ``service.instructor_group`` (default ``instructors``) is an instructor. The Hub's answers are
  cached for five minutes (:class:`jupyterhub.services.auth.HubAuth`'s cache);
- signs browsers in through the Hub's OAuth (:meth:`Hub.router`): ``/hub-login?next=PATH`` sends
  the browser to the Hub's authorize page with a state kept in a cookie, ``/oauth_callback``
  checks the state, exchanges the code for a token, asks the Hub whose it is and hands the caller
  to the pages' sign-in (a session cookie). ``next`` must be a page of this service.

With the Hub's LTI 1.3 authenticator (ltiauthenticator), :meth:`Hub.auth_state` reads what the Hub kept of a user's
launch, and the LTI passback links them to their LMS identity (:mod:`autograder.service.lti.hub_users`).

Tokens are never logged nor put in an error message; a Hub that does not answer is a 503 with
Retry-After (``submit()`` tries again), never a "wrong token".
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from autograder.core.messages import say
from autograder.service.errors import ApiError
from autograder.service.guard import refusal_body
from autograder.service.tokens import Caller

if TYPE_CHECKING:
    from autograder.course.config import Course

log = logging.getLogger("autograder.service.hub")

#: What a JupyterHub token looks like (its API tokens are 32 hex digits; OAuth ones URL-safe text):
#: anything else is not sent to the Hub at all.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{8,200}")
#: OAuth sign-ins started and not finished, at most (each is forgotten after ten minutes).
MAX_PENDING = 50_000
#: Seconds a client is asked to wait when the Hub did not answer.
RETRY_AFTER = 10


def hub_from_env(course: Course, environ: Mapping[str, str] | None = None) -> Hub | None:
    """The Hub this process is a service of, or None: it runs as a JupyterHub service when the Hub gave it
    ``JUPYTERHUB_API_TOKEN`` and ``JUPYTERHUB_SERVICE_PREFIX`` (a managed service's environment, or an
    external one's, from its own configuration)."""
    env = os.environ if environ is None else environ
    if not env.get("JUPYTERHUB_API_TOKEN") or not env.get("JUPYTERHUB_SERVICE_PREFIX"):
        return None
    return Hub(course, env)


def local_path(prefix: str, target: str | None) -> str | None:
    """``target`` if it is a page under ``prefix`` (a path on this host: never another site, no open
    redirect), ``prefix`` itself when there is none, None for anything else (another host, a scheme, a
    path that climbs out, odd characters). ``prefix`` ends with "/" ("/" at the root)."""
    if not target:
        return prefix
    if len(target) > 2000 or not target.isprintable() or any(c in target for c in "\\ \t"):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or target.startswith("//"):
        return None
    path = unquote(parts.path)
    if not path.isprintable() or "\\" in path or any(s in (".", "..") for s in path.split("/")):
        return None
    if not (path + "/").startswith(prefix):
        return None
    return urlunsplit(("", "", parts.path, parts.query, parts.fragment))


class Hub:
    """This service's JupyterHub: who its tokens belong to, and its OAuth sign-in."""

    def __init__(self, course: Course, environ: Mapping[str, str] | None = None):
        from jupyterhub.services.auth import HubOAuth

        env = os.environ if environ is None else environ
        prefix = "/" + env["JUPYTERHUB_SERVICE_PREFIX"].strip("/") + "/"
        self.prefix: str = prefix.replace("//", "/")
        url = urlsplit(env.get("JUPYTERHUB_SERVICE_URL") or "")
        self.host: str | None = url.hostname or None
        self.port: int | None = (url.port or {"http": 80, "https": 443}.get(url.scheme)) if url.hostname else None
        parts = self.prefix.strip("/").split("/")
        self.name: str = env.get("JUPYTERHUB_SERVICE_NAME") or (parts[1] if parts[0] == "services" and len(parts) > 1
                                                                 else parts[-1])
        #: The scope a user's token must carry to be a caller (``access:services`` covers it).
        self.access_scope = f"access:services!service={self.name}"
        policy = course.service
        self.instructors = frozenset(policy.instructors)
        self.instructor_group: str | None = policy.instructor_group
        options: dict[str, Any] = {
            "api_token": env["JUPYTERHUB_API_TOKEN"],
            "base_url": self.prefix,
            "oauth_client_id": env.get("JUPYTERHUB_CLIENT_ID") or f"service-{self.name}",
            "access_scopes": {self.access_scope},
        }
        for option, variable in (("api_url", "JUPYTERHUB_API_URL"), ("oauth_redirect_uri",
                                                                       "JUPYTERHUB_OAUTH_CALLBACK_URL"),
                                 ("hub_host", "JUPYTERHUB_HOST")):
            if env.get(variable):
                options[option] = env[variable]
        if env.get("JUPYTERHUB_BASE_URL"):
            options["hub_prefix"] = "/" + env["JUPYTERHUB_BASE_URL"].strip("/") + "/hub/"
            options["hub_prefix"] = options["hub_prefix"].replace("//", "/")
        #: jupyterhub's own client of the Hub's API (its cache, its OAuth endpoints and state store).
        self.auth: Any = HubOAuth(**options)
        self._public_https = urlsplit(env.get("JUPYTERHUB_PUBLIC_URL") or "").scheme == "https"
        #: OAuth states this service made and not yet seen back, with when each expires (bounded: MAX_PENDING).
        self._pending: dict[str, float] = {}

    # -- API callers --------------------------------------------------------------------------------
    def api_caller(self, token: str) -> Caller | None:
        """The caller a JupyterHub token belongs to, or None (not the Hub's, expired, no access to this service).

        Synchronous (the API calls it from its thread pool). A Hub that does not answer raises the API's
        503 (``hub.unavailable``, with Retry-After): the token may well be good.
        """
        if not token or not _TOKEN.fullmatch(token):
            return None
        try:
            model = self.auth.user_for_token(token)
        except Exception as exc:  # noqa: BLE001 - tornado's HTTPError, a refused connection: the Hub is away
            log.warning("JupyterHub did not say who a token belongs to: %s", _why(exc))
            raise ApiError(503, "hub.unavailable", retry_after=RETRY_AFTER) from None
        return self.caller_of(model)

    def caller_of(self, model: Any) -> Caller | None:
        """The caller a Hub user model (the Hub's answer for a token) is, or None: not a user, or without the
        scope that gives access to this service."""
        from jupyterhub.services.auth import check_scopes

        if not isinstance(model, dict) or model.get("kind", "user") != "user":
            return None
        name = model.get("name")
        if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable():
            return None
        scopes = model.get("scopes")
        if not isinstance(scopes, list) or not check_scopes({self.access_scope}, set(map(str, scopes))):
            return None
        groups = model.get("groups") or []
        instructor = name in self.instructors or (self.instructor_group is not None and isinstance(groups, list)
                                                  and self.instructor_group in groups)
        return Caller("instructor" if instructor else "student", name)

    def auth_state(self, name: str) -> dict[str, Any] | None:
        """What the Hub's authenticator kept of user ``name``'s login (their ``auth_state``: LTI13Authenticator's
        launch claims), or None: no such user, none kept (the Hub's ``enable_auth_state`` off) or not shown to this
        service (its token needs ``admin:auth_state`` and ``read:users:name``). A Hub that does not answer raises
        the API's 503 (``hub.unavailable``), as :meth:`api_caller` does. Synchronous."""
        import httpx

        url = f"{self.auth.api_url.rstrip('/')}/users/{quote(name, safe='')}"
        try:
            got = httpx.get(url, headers={"Authorization": f"token {self.auth.api_token}"}, timeout=10)
        except httpx.HTTPError as exc:
            log.warning("JupyterHub did not say what it keeps of a user: %s", type(exc).__name__)
            raise ApiError(503, "hub.unavailable", retry_after=RETRY_AFTER) from None
        if got.status_code >= 500:
            log.warning("JupyterHub did not say what it keeps of a user: %s", got.status_code)
            raise ApiError(503, "hub.unavailable", retry_after=RETRY_AFTER)
        model = got.json() if got.status_code == 200 else None
        state = model.get("auth_state") if isinstance(model, dict) else None
        return state if isinstance(state, dict) else None

    # -- the pages' sign-in -------------------------------------------------------------------------
    def local_next(self, target: str | None) -> str | None:
        """``target`` if it is a page of this service, the prefix when there is none, None for anything else
        (:func:`local_path`)."""
        return local_path(self.prefix, target)

    def router(self, sign_in: Callable[..., Any]) -> APIRouter:
        """The OAuth sign-in's routes (mounted under the prefix): ``GET /hub-login?next=PATH`` and
        ``GET /oauth_callback``, which ends in ``sign_in(request, caller, next_url)`` (the pages' own: a
        session cookie and a redirect to ``next_url``; synchronous, it is run in a thread)."""
        router = APIRouter(include_in_schema=False)

        @router.get("/hub-login")
        async def hub_login(request: Request, next: str | None = None) -> Response:  # the query's name
            return self._hub_login(request, next)

        @router.get("/oauth_callback")
        async def oauth_callback(request: Request, code: str | None = None, state: str | None = None,
                                 error: str | None = None) -> Response:
            return await self._oauth_callback(request, code, state, error, sign_in)

        return router

    def _hub_login(self, request: Request, next: str | None) -> Response:
        """``GET /hub-login?next=PATH``: a sign-in started, its state kept in a cookie, a redirect to the Hub."""
        auth = self.auth
        target = self.local_next(next)
        if target is None:
            return _refusal(request, 400, "hub.bad_next", prefix=self.prefix)
        if self._pending_count() >= MAX_PENDING:
            return _refusal(request, 503, "hub.busy", retry_after=RETRY_AFTER)
        # As HubOAuth.set_state_cookie: a second sign-in under way in this browser gets a cookie of its own.
        extra: dict[str, str] = {}
        cookie = auth.state_cookie_name
        if request.cookies.get(cookie):
            cookie = f"{cookie}-{secrets.token_hex(4)}"
            extra["cookie_name"] = cookie
        # PKCE (RFC 7636) where JupyterHub offers it (6 and later): the code the Hub hands back is good only
        # with the verifier this sign-in keeps in its state, so a code caught on its way is worth nothing.
        challenge: dict[str, str] = {}
        if getattr(auth, "pkce_enabled", False):
            verifier, code_challenge, method = auth.generate_pkce_code_challenge()
            extra["code_verifier"] = verifier
            challenge = {"code_challenge": code_challenge, "code_challenge_method": method}
        state = auth.generate_state(target, **extra)
        self._pending[state] = time.monotonic() + float(auth.oauth_state_max_age)
        login = auth.login_url
        query = urlencode({"state": state, **challenge})
        response = RedirectResponse(f"{login}{'&' if '?' in login else '?'}{query}", status_code=302)
        response.set_cookie(cookie, state, max_age=int(auth.oauth_state_max_age), path=auth.cookie_path,
                            httponly=True, secure=self._secure(request), samesite="lax")
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _oauth_callback(self, request: Request, code: str | None, state: str | None, error: str | None,
                              sign_in: Callable[..., Any]) -> Response:
        """``GET /oauth_callback``: the Hub's code for this browser's own sign-in, exchanged for the user, who is
        signed in (``sign_in``) where the service knows them; every state cookie cleared."""
        auth = self.auth
        if error:
            return _refusal(request, 400, "hub.refused", why=error[:100])
        # The state must be the one this browser's cookie holds: a callback this browser did not start
        # (another's code, pasted into a link) signs no one in.
        if not state or len(state) > 200:
            return _refusal(request, 400, "hub.bad_state")
        cookie = request.cookies.get(auth.get_state_cookie_name(state))
        if not cookie or not secrets.compare_digest(cookie.encode(), state.encode()):
            return _refusal(request, 400, "hub.bad_state")
        target = self.local_next(auth.get_next_url(state)) or self.prefix
        verifier = auth.get_code_verifier(state) if getattr(auth, "pkce_enabled", False) else None
        auth.clear_oauth_state(state)
        self._pending.pop(state, None)
        if not code or len(code) > 500:
            return self._clear_states(request, _refusal(request, 400, "hub.refused", why="no code"))
        try:
            pkce = {"code_verifier": verifier} if verifier else {}
            token = await run_in_threadpool(lambda: auth.token_for_code(code, **pkce))
            model = await run_in_threadpool(lambda: auth.user_for_token(
                token, use_cache=False, session_id=request.cookies.get("jupyterhub-session-id", "")))
        except Exception as exc:  # noqa: BLE001 - the Hub refused the code, or did not answer
            log.warning("JupyterHub sign-in not completed: %s", _why(exc))
            return self._clear_states(request, _refusal(request, 502, "hub.unavailable",
                                                        retry_after=RETRY_AFTER))
        who = self.caller_of(model)
        if who is None:
            name = model.get("name") if isinstance(model, dict) else None
            return self._clear_states(request, _refusal(request, 403, "hub.no_access",
                                                        user=str(name or "?")[:100]))
        # (it writes the session to the database: off the event loop)
        return self._clear_states(request, await run_in_threadpool(sign_in, request, who, target))

    def _pending_count(self) -> int:
        """Sign-ins started and neither finished nor expired (this service's own count: each state it made, until
        its callback or its max age)."""
        now = time.monotonic()
        for state in [s for s, ends in self._pending.items() if ends <= now]:
            del self._pending[state]
        return len(self._pending)

    def _secure(self, request: Request) -> bool:
        """Whether the browser reached us over HTTPS (the Hub's public URL, or what its proxy says)."""
        forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        return (self._public_https or forwarded == "https" or request.url.scheme == "https"
                or bool(self.auth.cookie_host_prefix_enabled))     # a __Host- cookie is set only with Secure

    def _clear_states(self, request: Request, response: Response) -> Response:
        """Every OAuth state cookie of this browser cleared on ``response`` (as HubOAuth does on success)."""
        for name in request.cookies:
            if name.startswith(self.auth.state_cookie_name):
                response.delete_cookie(name, path=self.auth.cookie_path, secure=self._secure(request),
                                       httponly=True, samesite="lax")
        return response


def _why(exc: BaseException) -> str:
    """What went wrong, for the log: the exception's class and tornado's message (never a request's header)."""
    message = getattr(exc, "log_message", None) or ""
    return f"{type(exc).__name__} {getattr(exc, 'status_code', '')} {message}".strip()[:300]


def _refusal(request: Request, status: int, key: str, retry_after: int | None = None, **params: Any) -> Response:
    """A bilingual refusal: a small page for a browser (one that accepts HTML), the API's JSON error otherwise
    (the service's one renderer, :func:`autograder.service.guard.refusal_body`)."""
    headers = {"Cache-Control": "no-store"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    body, kind = refusal_body(request.scope, status, say(key, **params), key,
                              page="text/html" in request.headers.get("accept", ""))
    return Response(body, status_code=status, media_type=kind.decode(), headers=headers)
