"""Taking an upload: the API's and the student page's one path from a request to a stored, queued notebook.

The caller is known when :func:`accept` runs (the guard now lets the body be read up to the notebook's
limit); the cheap refusals come before the body is read, the bounded look at the notebook in a thread, and
the course's limits (attempts, the queue) are counted in the transaction that stores it. A refusal is an
:class:`~autograder.service.errors.ApiError` and stores nothing.
"""
from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from autograder.course.notebook import Bounds, assignments_of_cells, notebook_claims
from autograder.service import queue as Q
from autograder.service.context import Service
from autograder.service.errors import ApiError
from autograder.service.sessions import same
from autograder.service.tokens import Caller
from autograder.service.upload import FormRefused, read_upload

if TYPE_CHECKING:
    from autograder.course.config import Course


async def accept(request: Request, state: Service, who: Caller, csrf: str | None = None) -> dict[str, Any]:
    """An upload checked and stored: its receipt (submission, job, position), or an ApiError. ``csrf``: a
    page's session's token, which its form must carry."""
    course = state.course
    if who.staff:
        raise ApiError(403, "service.students_submit")
    wait = state.uploads.wait(who.who)
    if wait:
        raise ApiError(429, "service.too_many", retry_after=wait, seconds=math.ceil(wait))
    try:
        upload = await read_upload(request, Bounds.of(course.limits))
    except FormRefused as refused:
        raise _form_refusal(refused, course) from None
    if csrf is not None and not same(upload.fields.get("csrf"), csrf):
        raise ApiError(403, "service.bad_csrf")
    assignment = upload.fields.get("assignment", "")
    if not assignment or len(assignment) > 100:
        raise ApiError(422, "service.malformed", fields="assignment")
    assignments = state.assignments
    if assignment not in assignments:
        raise ApiError(404, "service.unknown_assignment", assignment=assignment[:100], known=", ".join(assignments))
    shape = upload.shape
    assert shape is not None
    if shape.nbformat not in (3, 4) or not shape.has_cells:
        raise ApiError(415, "service.not_a_notebook")
    # A notebook of another assignment (its metadata, its cells' ids say so) is refused here, never graded
    # into this one (to 0, with a "function missing" that names the wrong cause).
    claimed, _how = notebook_claims(shape.declared, assignments_of_cells(shape.grade_ids, course))
    if claimed is not None and claimed != assignment and claimed in assignments:
        raise ApiError(422, "service.wrong_assignment", said=claimed, wanted=assignment)
    # Storing (on SQLite it may wait for the writer's lock) and the queue's count in a thread: the event loop
    # goes on answering the other requests meanwhile.
    return await run_in_threadpool(_store, state, who, assignment, upload.data)


def _form_refusal(refused: FormRefused, course: Course) -> ApiError:
    """The refusal of an upload whose form, or notebook, could not be read within the course's limits."""
    if refused.notebook is None:
        return ApiError(422, "service.malformed", fields=refused.what)
    kind = refused.notebook.kind
    if kind == "too_large":
        return ApiError(413, "service.too_large", limit=f"{course.limits.notebook_mb:g}")
    if kind == "bound":
        return ApiError(422, "service.notebook_refused", why=refused.notebook.said)
    if refused.notebook.said is not None:       # (where the JSON breaks, line and column, as the grader says it)
        return ApiError(415, "service.unreadable_notebook", why=refused.notebook.said)
    return ApiError(415, "service.not_a_notebook")


def _store(state: Service, who: Caller, assignment: str, data: bytes) -> dict[str, Any]:
    try:
        submission, job = Q.store(state.engine, student=who.who, assignment=assignment,
                                  filename=f"{assignment}.ipynb", data=data,
                                  admission=admission(state.course, state.max_queued))
    except Q.Refused as refused:
        raise ApiError(refused.status, refused.key, retry_after=refused.retry_after, **refused.params) from None
    return {"submission": submission, "job": job, "position": Q.position(state.engine, job)}


def admission(course: Course, max_queued: int) -> Q.Admission:
    """course.yml's service limits on a new upload, as the queue counts them in the storing transaction."""
    policy = course.service
    start = end = None
    if policy.attempts_per_day is not None:
        midnight = dt.datetime.now(course.zone).replace(hour=0, minute=0, second=0, microsecond=0)
        start, end = midnight.astimezone(dt.timezone.utc), (midnight + dt.timedelta(days=1)).astimezone(dt.timezone.utc)
    return Q.Admission(attempts=policy.attempts, attempts_per_day=policy.attempts_per_day, day_start=start,
                       day_ends=end, waiting_per_student=policy.queued_per_student, waiting=max_queued)
