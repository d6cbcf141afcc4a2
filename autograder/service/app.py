"""The service's HTTP app (FastAPI on uvicorn): submit a notebook, follow it to its verdict, the pages.

The web process only validates, stores and answers: it never grades (grading runs in
``autograder worker`` processes; a web server has threads, and forking after them is unsafe).
Every request is bounded and validated before anything is stored: an upload over
``limits.notebook_mb``, a file that is not a notebook (or one past ``limits.notebook_cells``,
``notebook_depth`` or ``notebook_values``: a bounded streaming look, in a thread, never a full parse
here), an unknown assignment, a missing or wrong token, a malformed form each get a 4xx whose body
says why in both languages (``{"error": {"zh", "en"}, "code"}``), and nothing is stored for them.
A 202 means the notebook's bytes are in the database with their job: it will be graded whatever
crashes afterwards. Every request passes the guard first (:mod:`autograder.service.guard`): no body
is read past a few KiB before its caller is known, and none past its route's limit after.

The app is assembled here from one router per resource (:mod:`autograder.service.routes`); who may call
each route is one dependency (:mod:`autograder.service.auth`), every refusal is raised and answered in
one place (:mod:`autograder.service.errors`), every query is in :mod:`autograder.service.repository`.
The OpenAPI schema is at ``/openapi.json``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from sqlalchemy.engine import Engine
from starlette.routing import Route

from autograder.core.version import __version__
from autograder.service.context import Finished, RateLimit, Service
from autograder.service.errors import install_error_handlers
from autograder.service.guard import BODY_IDLE_SECONDS, Guard
from autograder.service.lti.tool import Tool
from autograder.service.routes import (adjust, analytics, dashboard, downloads, grading, lti, moderation, reviews,
                                       roster, signin, student, submissions, unanswered)

if TYPE_CHECKING:
    from autograder.course.config import Course

#: Requests one token may make in a minute (reads), and uploads among them; past either, 429.
REQUESTS_PER_MINUTE = 240
UPLOADS_PER_MINUTE = 12
#: Requests without a valid token or session (a wrong token, the sign-in form) one address may make in a
#: minute; past it, 429 (a stranger guessing tokens, or filling the log, is slowed to this).
STRANGER_REQUESTS_PER_MINUTE = 120
#: Jobs waiting at most: past it an upload is refused with 503 and Retry-After (never taken and lost). Each
#: student may have course.yml's service.queued_per_student waiting, so this is reached only by that many
#: different students' work.
MAX_QUEUED = 10_000
#: The routes that take a notebook (the API's and the student page's): the only bodies past a few KiB.
UPLOAD_ROUTES = frozenset({("POST", "/api/submissions"), ("POST", "/me/upload")})


def create_app(engine: Engine, course: Course, *, requests_per_minute: int = REQUESTS_PER_MINUTE,
               uploads_per_minute: int = UPLOADS_PER_MINUTE, max_queued: int = MAX_QUEUED,
               stranger_requests_per_minute: int = STRANGER_REQUESTS_PER_MINUTE, hub: Any = None,
               body_idle_seconds: float | None = None) -> FastAPI:
    """The service for ``course`` on ``engine``'s database; with ``hub`` (an :class:`autograder.service.hub.Hub`),
    JupyterHub's tokens are callers too and the pages sign in through the Hub's OAuth."""
    app = FastAPI(title="autograder service", version=__version__,
                  description="Submit notebooks of the course and read their graded verdicts.")
    app.add_middleware(Guard, uploads=UPLOAD_ROUTES, upload_bytes=lambda: int(course.limits.notebook_mb * 2**20),
                       idle_seconds=body_idle_seconds or BODY_IDLE_SECONDS)
    install_error_handlers(app)
    app.state.service = Service(engine=engine, course=course, hub=hub, requests=RateLimit(requests_per_minute),
                                strangers=RateLimit(stranger_requests_per_minute),
                                uploads=RateLimit(uploads_per_minute), max_queued=max_queued,
                                finished=Finished(engine))
    app.state.lti = Tool(engine, course.root)          # LTI 1.3: the tool's key, the platforms' keys and tokens
    routers = [submissions.router, signin.router, student.router, dashboard.router, roster.router, downloads.router,
               analytics.router, grading.router, unanswered.router, moderation.router, adjust.router, reviews.router,
               lti.router]
    if hub is not None:
        routers.append(hub.router(signin.sign_in))
    for router in routers:
        app.include_router(router)
    app.state.routers = routers
    return app


def app_routes(app: FastAPI) -> list[APIRoute | Route]:
    """Every route of the app: its own (the OpenAPI schema and docs) and each included router's, with their full
    paths (what ``tests/service/test_routes.py`` holds to the authorization rule)."""
    own = [r for r in app.router.routes if isinstance(r, Route)]
    return own + [r for router in app.state.routers for r in router.routes if isinstance(r, (APIRoute, Route))]
