"""The service's HTTP API (FastAPI on uvicorn): submit a notebook, follow it to its verdict.

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

Authorization is one dependency (:func:`_caller`) on every route: a student's token reads only
their own submissions (another's reads as not found), an instructor's reads everything. The
OpenAPI schema is at ``/openapi.json``.
"""
from __future__ import annotations

import asyncio
import collections
import math
import threading
import time
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import select
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from autograder.messages import Msg, say
from autograder.service import queue as Q
from autograder.service.db import Job, Result, Submission
from autograder.service.standing import Standing
from autograder.service.tokens import Caller, caller

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
#: A submission's id is a database integer: past this, not found (never a 500 from the query).
MAX_ID = 2**63 - 1
#: The longest a read may wait for its submission's verdict (``?wait=``), and how often the one query
#: that serves every waiting read looks at the jobs.
LONG_POLL_MAX = 30.0
LONG_POLL_EVERY = 0.05


class Finished:
    """Wakes the reads that wait for their submissions' jobs to finish (``?wait=SECONDS``).

    However many wait, one query every ``every`` seconds asks which of their jobs are done or
    failed (in a thread: the event loop never waits for the database); a read gets its answer as soon
    as the job finishes, instead of a client asking again and again. It runs only while someone waits.
    """

    def __init__(self, engine: Engine, every: float = LONG_POLL_EVERY):
        self.engine, self.every = engine, every
        self._waiting: dict[int, list[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, job: int, seconds: float) -> None:
        """Return when ``job`` has finished, or after ``seconds``."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(job, []).append(future)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch())
        try:
            await asyncio.wait_for(asyncio.shield(future), seconds)
        except asyncio.TimeoutError:
            pass
        finally:
            left = [f for f in self._waiting.get(job, []) if f is not future]
            if left:
                self._waiting[job] = left
            else:
                self._waiting.pop(job, None)

    async def _watch(self) -> None:
        while self._waiting:
            try:
                done = await run_in_threadpool(self._finished, list(self._waiting))
            except Exception:  # noqa: BLE001 - the database is away for a moment: the waits run out, or it is back
                done = []
            for job in done:
                for future in self._waiting.pop(job, []):
                    if not future.done():
                        future.set_result(None)
            await asyncio.sleep(self.every)

    def _finished(self, jobs: list[int]) -> list[int]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(Job.id).where(Job.id.in_(jobs[:1000]),
                                                          Job.state.in_(("done", "failed")))).scalars())


class RateLimit:
    """A sliding minute per token and kind: how many seconds until the next request may come, or 0."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._seen: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def wait(self, who: str, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen.setdefault(who, collections.deque())
            while seen and seen[0] <= now - 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return max(0.1, seen[0] + 60 - now)
            seen.append(now)
            return 0.0


class ApiError(Exception):
    def __init__(self, status: int, key: str, retry_after: float | None = None, **params: Any):
        self.status, self.key, self.msg = status, key, say(key, **params)
        self.retry_after = retry_after


def _body(msg: Msg, key: str) -> dict[str, Any]:
    return {"error": {"zh": msg.zh, "en": msg.en}, "code": key}


async def _caller(request: Request) -> Caller:
    """The one authorization check every route depends on: a valid Bearer token, or a page's session (its
    writes carrying the session's CSRF token in ``X-CSRF-Token``), or 401."""
    from autograder.service import sessions

    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header and request.cookies.get(sessions.COOKIE):
        signed = await run_in_threadpool(sessions.find, request.app.state.engine, request.cookies[sessions.COOKIE])
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
    who = await run_in_threadpool(caller, request.app.state.engine, token)
    hub = request.app.state.hub
    if who is None and hub is not None:         # a JupyterHub token (a single-user server's, a Hub user's)
        who = await run_in_threadpool(hub.api_caller, token)
    if who is None:
        raise stranger(request, 401, "service.bad_token")
    return _limited(request, who)


def stranger(request: Request, status: int, key: str) -> ApiError:
    """The refusal of a request whose caller is not known, counted against its address: past
    STRANGER_REQUESTS_PER_MINUTE in a minute, 429 instead."""
    address = request.client.host if request.client else "?"
    wait = request.app.state.strangers.wait(address)
    if wait:
        return ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    return ApiError(status, key)


def _limited(request: Request, who: Caller) -> Caller:
    from autograder.service.guard import authenticated

    wait = request.app.state.requests.wait(who.who)
    if wait:
        raise ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    authenticated(request)          # the caller is known: the guard lets the body be read to the route's limit
    return who


Who = Annotated[Caller, Depends(_caller)]


def create_app(engine: Engine, course: Any, *, requests_per_minute: int = REQUESTS_PER_MINUTE,
               uploads_per_minute: int = UPLOADS_PER_MINUTE, max_queued: int = MAX_QUEUED,
               stranger_requests_per_minute: int = STRANGER_REQUESTS_PER_MINUTE, hub: Any = None,
               body_idle_seconds: float | None = None) -> FastAPI:
    """The API for ``course`` on ``engine``'s database; with ``hub`` (an :class:`autograder.service.hub.Hub`),
    JupyterHub's tokens are callers too and the pages sign in through the Hub's OAuth."""
    from autograder import __version__
    from autograder.service.guard import BODY_IDLE_SECONDS, Guard, refusal_body

    app = FastAPI(title="autograder service", version=__version__,
                  description="Submit notebooks of the course and read their graded verdicts.")
    from autograder.service.live import Assignments

    assignments = Assignments(course)           # (read from the course each time: serve reloads a changed one)
    app.add_middleware(Guard, uploads=UPLOAD_ROUTES, upload_bytes=lambda: int(course.limits.notebook_mb * 2**20),
                       idle_seconds=body_idle_seconds or BODY_IDLE_SECONDS)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        if exc.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        body, kind = refusal_body(request.scope, exc.status, exc.msg, exc.key)
        return Response(body, status_code=exc.status, media_type=kind.decode(), headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = sorted({".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in exc.errors()})
        key = "service.malformed"
        return JSONResponse(_body(say(key, fields=", ".join(fields)[:200]), key), status_code=422)

    app.state.engine = engine
    app.state.hub = hub
    app.state.requests = RateLimit(requests_per_minute)
    app.state.strangers = RateLimit(stranger_requests_per_minute)
    uploads = RateLimit(uploads_per_minute)

    async def accept(request: Request, who: Caller, csrf: str | None = None) -> dict[str, Any]:
        """An upload checked and stored (the API's and the student page's): its receipt, or an ApiError.
        The caller is known (the guard now lets the body be read up to the notebook's limit); the cheap
        refusals come before the body is read, the bounded look at the notebook in a thread, and the
        course's limits are counted in the transaction that stores it. ``csrf``: a page's session's token,
        which its form must carry."""
        from autograder.service.sessions import same

        if who.instructor:
            raise ApiError(403, "service.students_submit")
        wait = uploads.wait(who.who)
        if wait:
            raise ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
        from autograder.notebook import Bounds
        from autograder.service.upload import FormRefused, read_upload

        try:
            upload = await read_upload(request, Bounds.of(course.limits))
        except FormRefused as refused:
            if refused.notebook is None:
                raise ApiError(422, "service.malformed", fields=refused.what) from None
            kind = refused.notebook.kind
            if kind == "too_large":
                raise ApiError(413, "service.too_large", limit=f"{course.limits.notebook_mb:g}") from None
            if kind == "bound":
                raise ApiError(422, "service.notebook_refused", why=refused.notebook.said) from None
            raise ApiError(415, "service.not_a_notebook") from None
        if csrf is not None and not same(upload.fields.get("csrf"), csrf):
            raise ApiError(403, "service.bad_csrf")
        assignment = upload.fields.get("assignment", "")
        if not assignment or len(assignment) > 100:
            raise ApiError(422, "service.malformed", fields="assignment")
        if assignment not in assignments:
            raise ApiError(404, "service.unknown_assignment", assignment=assignment[:100],
                           known=", ".join(assignments))
        shape = upload.shape
        assert shape is not None
        if shape.nbformat not in (3, 4) or not shape.has_cells:
            raise ApiError(415, "service.not_a_notebook")
        # A notebook of another assignment (its metadata, its cells' ids say so) is refused here, never graded
        # into this one (to 0, with a "function missing" that names the wrong cause).
        from autograder.notebook import assignments_of_cells, notebook_claims

        claimed, _how = notebook_claims(shape.declared, assignments_of_cells(shape.grade_ids, course))
        if claimed is not None and claimed != assignment and claimed in assignments:
            raise ApiError(422, "service.wrong_assignment", said=claimed, wanted=assignment)
        # Storing (on SQLite it may wait for the writer's lock) and the queue's count in a thread: the event loop
        # goes on answering the other requests meanwhile.
        return await run_in_threadpool(_store, who, assignment, upload.data)

    @app.post("/api/submissions", status_code=202, summary="Submit a notebook for grading",
              openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                  "type": "object", "required": ["assignment", "notebook"], "properties": {
                      "assignment": {"type": "string", "maxLength": 100, "description": "the assignment's id"},
                      "notebook": {"type": "string", "format": "binary", "description": "the .ipynb file"}}}}}}})
    async def submit(request: Request, who: Who) -> dict[str, Any]:
        # (the form is read by accept, after the caller is known: never a FastAPI Form parameter, which
        # FastAPI reads before any dependency runs)
        return await accept(request, who)

    def _store(who: Caller, assignment: str, data: bytes) -> dict[str, Any]:
        try:
            submission, job = Q.store(engine, student=who.who, assignment=assignment,
                                      filename=f"{assignment}.ipynb", data=data,
                                      admission=_admission(course, max_queued))
        except Q.Refused as refused:
            raise ApiError(refused.status, refused.key, retry_after=refused.retry_after, **refused.params) from None
        return {"submission": submission, "job": job, "position": Q.position(engine, job)}

    finished = Finished(engine)

    @app.get("/api/submissions/{submission_id}", summary="A submission's state and, once graded, its verdict")
    async def one(submission_id: Annotated[int, Path(ge=1, le=MAX_ID)], who: Who,
                  wait: Annotated[float, Query(ge=0, le=LONG_POLL_MAX, description=(
                      "seconds to wait for the verdict before answering (a long poll): the answer comes as soon "
                      "as the submission is graded, else after this long with its state"))] = 0.0
                  ) -> dict[str, Any]:
        state = await run_in_threadpool(_read, submission_id, who)
        if wait and state["state"] not in ("done", "failed") and state["job"] is not None:
            await finished.wait(state["job"], wait)
            state = await run_in_threadpool(_read, submission_id, who)
        state.pop("job")
        return state

    def _read(submission_id: int, who: Caller) -> dict[str, Any]:
        with engine.connect() as conn:
            sub = conn.execute(select(Submission.id, Submission.student, Submission.assignment,
                                      Submission.received_at).where(Submission.id == submission_id)).first()
            if sub is None or not (who.instructor or sub.student == who.who):
                raise ApiError(404, "service.no_submission", submission=submission_id)
            job = conn.execute(select(Job.id, Job.state).where(Job.submission_id == submission_id)
                               .order_by(Job.id.desc()).limit(1)).first()
            result = conn.execute(select(Result.result).where(Result.submission_id == submission_id)).scalar()
        shown = None
        if result is not None:
            standing = Standing(engine, course)     # the late policy as it is now (an extension granted since)
            shown = policy_view(standing.result(result), who, course, sub.assignment,
                                standing.due(sub.student, sub.assignment))
        return {"submission": sub.id, "student": sub.student, "assignment": sub.assignment,
                "received_at": sub.received_at.isoformat(), "state": job.state if job else "unknown",
                "position": Q.position(engine, job.id) if job else None, "result": shown,
                "job": job.id if job else None}

    @app.get("/api/submissions", summary="Submissions: a student's own, or every one for an instructor")
    def many(who: Who, assignment: Annotated[str | None, Query(max_length=100)] = None) -> dict[str, Any]:
        query = select(Submission.id, Submission.student, Submission.assignment).order_by(Submission.id)
        if not who.instructor:
            query = query.where(Submission.student == who.who)
        if assignment is not None:
            query = query.where(Submission.assignment == assignment)
        with engine.connect() as conn:
            rows = conn.execute(query.limit(10_000)).all()
        return {"submissions": [{"submission": r.id, "student": r.student, "assignment": r.assignment}
                                for r in rows]}

    from autograder.service.pages import install_pages

    install_pages(app, engine, course, accept)
    if hub is not None:
        hub.install(app)
    return app


def _admission(course: Any, max_queued: int) -> Q.Admission:
    """course.yml's service limits on a new upload, as the queue counts them in the storing transaction."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    policy = course.service
    start = end = None
    if policy.attempts_per_day is not None:
        zone = ZoneInfo(course.timezone) if course.timezone else dt.timezone.utc
        midnight = dt.datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        start, end = midnight.astimezone(dt.timezone.utc), (midnight + dt.timedelta(days=1)).astimezone(dt.timezone.utc)
    return Q.Admission(attempts=policy.attempts, attempts_per_day=policy.attempts_per_day, day_start=start,
                       day_ends=end, waiting_per_student=policy.queued_per_student, waiting=max_queued)


#: What a student never sees of a result, whatever the policy: the grader's own bookkeeping.
_INTERNAL = ("timing", "traceback", "grader", "isolation", "evidence", "origin", "retry")


def policy_view(result: dict[str, Any], who: Caller, course: Any, assignment: str,
                due: Any = "course") -> dict[str, Any]:
    """A result as course.yml's service.before_due lets the caller see it (an instructor: all of it).

    ``due`` is the student's own due date where the caller knows it (an extension moves it: a student
    still working on an extension does not see the hidden checks' messages before it ends); by default
    the course's."""
    import datetime as dt

    if who.instructor:
        return result
    if due == "course":
        due = course.deadline_of(assignment)[0] if assignment in {a.id for a in course.assignments} else None
    after_due = due is not None and dt.datetime.now(dt.timezone.utc) > due
    shown = "everything" if after_due else course.service.before_due
    if shown == "everything":
        return {k: v for k, v in result.items() if k not in _INTERNAL}
    if shown == "score":
        return {"points": result.get("points"), "raw_points": result.get("raw_points"),
                "max_points": result.get("max_points"), "status": result.get("status"), "late": result.get("late"),
                "exercises": []}
    return view(result, who)


def view(result: dict[str, Any], who: Caller) -> dict[str, Any]:
    """What a caller sees of a result: an instructor everything; a student the score, each check's title
    and pass/fail, and the public checks' messages (hidden checks' messages stay the instructor's)."""
    if who.instructor:
        return result
    exercises = []
    for ex in result.get("exercises") or []:
        checks = [{"check": c.get("check"), "audience": c.get("audience"), "title": c.get("title"),
                   "passed": c.get("passed"), "status": c.get("status"), "points": c.get("points"),
                   "max_points": c.get("max_points"),
                   **({"message": c.get("message")} if c.get("audience") == "public" else {})}
                  for c in ex.get("checks") or []]
        exercises.append({"exercise": ex.get("exercise"), "points": ex.get("points"),
                          "max_points": ex.get("max_points"), "status": ex.get("status"), "checks": checks})
    return {"points": result.get("points"), "raw_points": result.get("raw_points"),
            "max_points": result.get("max_points"), "status": result.get("status"), "late": result.get("late"),
            "message": result.get("message"), "exercises": exercises}
