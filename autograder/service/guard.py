"""Every request's bounds, in one place: the outermost layer of the service's app (an ASGI middleware).

The rules it makes impossible to break route by route:

- *Nothing unbounded before the caller is known.* A request's body may be at most :data:`SMALL_BODY`
  bytes (a form, a JSON body, the login) until the route's authorization check has said who is
  calling (:func:`authenticated`); only then, and only on an upload route, up to the route's own
  limit (``limits.notebook_mb`` and the multipart framing). A declared Content-Length past what may be
  read is refused with 413 before a byte is read; a body that passes it while being read is refused
  the moment it does, with nothing read (and so nothing spooled) beyond it. A route that read its
  body before authenticating (FastAPI's ``Form`` parameters do) gets at most :data:`SMALL_BODY`: an
  honest upload then fails its tests, never silently fills a disk.
- *Slow bodies.* A body that sends nothing for :data:`BODY_IDLE_SECONDS`, or is not complete after
  :data:`BODY_SECONDS`, is refused with 408 and its connection closed (a header that never ends is
  the server protocol's to cut: :mod:`autograder.service.server`).
- *Every response is clean.* The security headers on every response, errors included; an exception
  no route caught is a bilingual 500 with those headers and one line in the log (the traceback once
  per kind of failure), never a traceback per request.
"""
from __future__ import annotations

import asyncio
import html
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from autograder.core.messages import Msg, say
from autograder.service.sessions import LANGUAGE_COOKIE

log = logging.getLogger("autograder.service")

#: Every response's security headers: no script, style or frame but the service's own.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_HEADERS = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

#: The most any request's body may hold before its caller is known, and on every route but an upload:
#: a form, a JSON body, the login form.
SMALL_BODY = 16 * 1024
#: What an upload's multipart framing adds around the notebook (boundaries, the assignment field, headers).
UPLOAD_FRAMING = 64 * 1024
#: A body that sends nothing for this long, or is not whole after BODY_SECONDS, is refused with 408.
BODY_IDLE_SECONDS = 20.0
BODY_SECONDS = 300.0

_SCOPE_KEY = "autograder.body"


@dataclass
class Allowance:
    """How much of this request's body may be read: ``small`` until its caller is known, then ``most``."""

    small: int
    most: int
    known: bool = False

    @property
    def now(self) -> int:
        return self.most if self.known else min(self.small, self.most)


def authenticated(scope: Any) -> None:
    """The request's caller is known: its body may now be read up to its route's limit. Called by the one
    authorization check of the API and by the pages' sign-in check (a ``Request`` or its scope)."""
    allowance = getattr(scope, "scope", scope).get(_SCOPE_KEY)
    if isinstance(allowance, Allowance):
        allowance.known = True


def relative_path(scope: Any) -> str:
    """The request's path below the prefix the service is mounted under (JupyterHub's /services/NAME)."""
    root = str(scope.get("root_path") or "").rstrip("/")
    path = str(scope.get("path") or "")
    return path[len(root):] if root and path.startswith(root) else path


def is_api(scope: Any) -> bool:
    """A request to the JSON API (answered in JSON), not to a page."""
    return relative_path(getattr(scope, "scope", scope)).startswith("/api/")


def refusal_body(scope: Any, status: int, msg: Msg, key: str, page: bool | None = None) -> tuple[bytes, bytes]:
    """(body, content type) of a refusal: the API's bilingual JSON error, or a small page in both languages
    with a link back to the service's first page (``page``: which; by default a page unless the path is the
    API's). The one place an error is worded for a client."""
    as_json = (not page) if page is not None else is_api(scope)
    if as_json:
        return (json.dumps({"error": {"zh": msg.zh, "en": msg.en}, "code": key}, ensure_ascii=False).encode(),
                b"application/json")
    back = html.escape(str(scope.get("root_path") or "").rstrip("/") + "/", quote=True)
    first = reader_language(scope)
    other = "en" if first == "zh" else "zh"
    said, home = {"zh": msg.zh, "en": msg.en}, say("service.home")
    text = (f"<!DOCTYPE html><html lang='{first}'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{status} · {html.escape(said[first])}</title>"
            f"</head><body><main><h1 id='error'>{html.escape(said[first])}</h1>"
            f"<p lang='{other}'>{html.escape(said[other])}</p>"
            f"<p><a href='{back}'>← {html.escape(getattr(home, first))}</a></p></main></body></html>")
    return text.encode(), b"text/html; charset=utf-8"


def reader_language(scope: Any) -> str:
    """The language a refusal page speaks first: the request's ``?lang=``, else the pages' language cookie, else
    Chinese (the page says it in the other language too)."""
    scope = getattr(scope, "scope", scope)
    asked = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1")).get("lang", [])
    if asked and asked[-1] in ("zh", "en"):
        return asked[-1]
    for name, value in scope.get("headers") or ():
        if name == b"cookie":
            jar = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except CookieError:
                continue
            chosen = jar.get(LANGUAGE_COOKIE)
            if chosen is not None and chosen.value in ("zh", "en"):
                return chosen.value
    return "zh"


class _Refused(Exception):
    """Raised into the app from ``receive`` once the guard has answered the request itself."""


class Guard:
    """The service app's outermost layer (see the module's text). ``uploads``: the (method, path) of the
    routes that take a notebook, below the service's prefix; ``upload_bytes``: the largest notebook (or a
    function that says it now: the course may be reloaded)."""

    def __init__(self, app: Any, *, uploads: frozenset[tuple[str, str]], upload_bytes: int | Callable[[], int],
                 idle_seconds: float = BODY_IDLE_SECONDS, body_seconds: float = BODY_SECONDS):
        self.app, self.uploads = app, uploads
        self._upload_bytes = upload_bytes
        self.idle_seconds, self.body_seconds = idle_seconds, body_seconds
        self._logged: set[str] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = (scope["method"], relative_path(scope)) in self.uploads
        most = self._upload_bytes() if callable(self._upload_bytes) else self._upload_bytes
        allowance = Allowance(SMALL_BODY, most + UPLOAD_FRAMING if upload else SMALL_BODY)
        scope[_SCOPE_KEY] = allowance
        exchange = _Exchange(scope, receive, send, allowance)

        declared = _content_length(scope)
        if declared == -1:
            await exchange.refuse(400, "service.malformed", fields="Content-Length")
            return
        if declared is not None and declared > allowance.most:
            await exchange.refuse(413, "service.body_too_large", limit=_size(allowance.most))
            return

        expects_body = (declared or 0) > 0 or any(k == b"transfer-encoding" for k, _ in scope.get("headers") or ())
        exchange.expect(expects_body, time.monotonic() + self.body_seconds, self.idle_seconds)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except Exception as exc:  # noqa: BLE001 - the one place a request's unexpected failure is caught
            if exchange.answered:
                return
            if _database_away(exc):         # (a restart, a failover): try again shortly, nothing to log at length
                log.warning("503 on %s %s: the database is not answering", scope.get("method"),
                            relative_path(scope)[:200])
                if not exchange.started:
                    await exchange.refuse(503, "service.database_away", retry_after=5)
                return
            self._log(scope, exc)
            if not exchange.started:
                await exchange.refuse(500, "service.internal")

    def _log(self, scope: Any, exc: Exception) -> None:
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        where = f"{scope.get('method')} {relative_path(scope)[:200]}"
        if kind in self._logged:
            log.error("500 on %s: %s (its traceback was logged once before)", where, kind)
            return
        self._logged.add(kind)
        log.error("500 on %s: %s", where, kind, exc_info=exc)


class _Exchange:
    """One request as the app sees it through the guard: its body read within the allowance and in time, the
    security headers added to its response, or the guard's own refusal instead (see :class:`Guard`)."""

    def __init__(self, scope: Any, receive: Any, send: Any, allowance: Allowance):
        self.scope, self._receive, self._send, self.allowance = scope, receive, send, allowance
        self.answered = False       # the guard has answered (a refusal): the app's own answer is dropped
        self.started = False        # a response has begun
        self.expects_body = False
        self.finished = True        # the whole body is read (or there is none)
        self.read = 0
        self.deadline = 0.0
        self.idle_seconds = 0.0

    def expect(self, expects_body: bool, deadline: float, idle_seconds: float) -> None:
        """The body the request declares (any at all), to be read before ``deadline``, with no pause longer than
        ``idle_seconds``."""
        self.expects_body, self.finished = expects_body, not expects_body
        self.deadline, self.idle_seconds = deadline, idle_seconds

    async def send(self, message: Any) -> None:
        if self.answered:
            return
        if message["type"] == "http.response.start":
            self.started = True
            have = {k.lower() for k, _ in message.get("headers", [])}
            extra = [h for h in _HEADERS if h[0] not in have]
            if self.expects_body and not self.finished and b"connection" not in have:
                # Answered before its body was read (a refusal): the rest is never read, so the connection
                # closes after this response instead of waiting on it.
                extra.append((b"connection", b"close"))
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await self._send(message)

    async def refuse(self, status: int, key: str, retry_after: int | None = None, **params: Any) -> None:
        if not self.started and not self.answered:
            body, kind = refusal_body(self.scope, status, say(key, **params), key)
            extra = [(b"retry-after", str(retry_after).encode())] if retry_after is not None else []
            await self._send({"type": "http.response.start", "status": status,
                              "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                          (b"connection", b"close"), *extra, *_HEADERS]})
            await self._send({"type": "http.response.body", "body": body})
            self.started = True
        self.answered = True

    async def receive(self) -> Any:
        if self.finished or self.answered:
            if self.answered:
                raise _Refused()
            return await self._receive()
        left = self.deadline - time.monotonic()
        try:
            message = await asyncio.wait_for(self._receive(), max(0.0, min(self.idle_seconds, left)))
        except asyncio.TimeoutError:
            await self.refuse(408, "service.body_too_slow", seconds=int(self.idle_seconds))
            raise _Refused() from None
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
            if self.read > self.allowance.now:
                await self.refuse(413, "service.body_too_large", limit=_size(self.allowance.now))
                raise _Refused()
            self.finished = not message.get("more_body", False)
        else:
            self.finished = True
        return message


def _database_away(exc: BaseException) -> bool:
    """The database could not be reached or dropped the connection (not a bug of a route)."""
    from sqlalchemy.exc import DBAPIError, OperationalError  # noqa: PLC0415 - loads sqlalchemy

    return isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated)


def _content_length(scope: Any) -> int | None:
    """The declared body size; None when none is declared, -1 when it is not a number."""
    for key, value in scope.get("headers") or ():
        if key == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else -1
    return None


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n // 1024} KiB"
