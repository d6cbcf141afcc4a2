"""The service's refusals, in one place: what a route raises and how each becomes a response.

A route never builds an error response itself. It raises :class:`ApiError` (a status and a message key,
worded in both languages by :mod:`autograder.core.messages`) or, on a page whose caller has not signed in,
:class:`SignInRequired`; the handlers installed here turn them into the API's JSON error or a small page
(:func:`autograder.service.guard.refusal_body`, the one renderer, which the guard and the Hub's sign-in use
too), and a signed-out page visit into a redirect to the sign-in page that comes back to it.

Every whole number a request gives (an id in a path, a query or a form; a form's version) is read here by one
parser, :func:`parse_number` (ids: :func:`parse_id`, :func:`form_id`, and :func:`checked_id` for a parameter FastAPI
declares): ASCII digits only, bounded, so that what reaches a query is a number the database holds. It trusts
nothing of the request.
"""
from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BeforeValidator

from autograder.core.messages import Msg, say
from autograder.service.guard import refusal_body


class ApiError(Exception):
    """A refusal: ``status``, the message ``key`` and its parameters; ``retry_after`` seconds where waiting helps."""

    def __init__(self, status: int, key: str, retry_after: float | None = None, **params: Any):
        self.status, self.key, self.msg = status, key, say(key, **params)
        self.retry_after = retry_after


#: The largest id a database holds (a signed 64-bit integer): past it a query fails (a 500), never "not found".
MAX_ID = 2**63 - 1
#: An id's digits, at most: every number of 18 digits is below :data:`MAX_ID`.
ID_DIGITS = 18


def parse_number(value: object, name: str, *, least: int = 0, digits: int = ID_DIGITS) -> int:
    """A whole number from the request (``value``: a path's or a query's text, a form's field): 1 to ``digits`` ASCII
    digits (spaces around them aside), at least ``least``; anything else (a sign, a point, another script's digits,
    more digits, an uploaded file, nothing) is the service's 422 naming ``name``."""
    text = value.strip() if isinstance(value, str) else ""
    if not (0 < len(text) <= digits and text.isascii() and text.isdigit()) or int(text) < least:
        raise ApiError(422, "service.malformed", fields=name)
    return int(text)


def parse_id(value: object, name: str) -> int:
    """An id (of a submission, a token, a review, an LMS course ...): 1 to :data:`MAX_ID`, in at most
    :data:`ID_DIGITS` digits; else 422 naming ``name`` (:func:`parse_number`)."""
    return parse_number(value, name, least=1)


def form_id(form: Any, name: str) -> int:
    """The id a form's field ``name`` holds (:func:`parse_id`)."""
    return parse_id(form.get(name), name)


class IdParameter:
    """The check of a path or query parameter that is an id (:func:`checked_id`): its text through :func:`parse_id`."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, value: object) -> int:
        return parse_id(value, self.name)


def checked_id(name: str) -> BeforeValidator:
    """For a path or query parameter that is an id, declared ``Annotated[int, Path(ge=1, le=MAX_ID),
    checked_id("name")]`` (its schema says an integer in range): its text read by :func:`parse_id` before FastAPI's
    own reading. (:class:`ApiError` is no ValueError: pydantic lets it through as it is, and it is answered as every
    route's refusal is, a page on a page.)"""
    return BeforeValidator(IdParameter(name))


class SignInRequired(Exception):
    """A page needs a signed-in caller and this request has none: answered with 303 to the sign-in page."""


def error_body(msg: Msg, key: str) -> dict[str, Any]:
    """The API's error body: ``{"error": {"zh", "en"}, "code"}``."""
    return {"error": {"zh": msg.zh, "en": msg.en}, "code": key}


def base_path(request: Request) -> str:
    """The path the service is mounted under ("" at the root, /services/NAME inside JupyterHub)."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def to_login(request: Request) -> RedirectResponse:
    """To the sign-in page, which sends the browser back here once signed in."""
    path = request.url.path
    here = path if path.startswith(base_path(request)) else base_path(request) + path
    return RedirectResponse(f"{base_path(request)}/login?next={quote(here)}", status_code=303)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        if exc.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        body, kind = refusal_body(request.scope, exc.status, exc.msg, exc.key)
        return Response(body, status_code=exc.status, media_type=kind.decode(), headers=headers or None)

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, _exc: SignInRequired) -> Response:
        return to_login(request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = sorted({".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in exc.errors()})
        key = "service.malformed"
        return JSONResponse(error_body(say(key, fields=", ".join(fields)[:200]), key), status_code=422)
