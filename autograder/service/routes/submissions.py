"""The JSON API: submit a notebook, follow it to its verdict, list submissions."""
from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, BeforeValidator, Field
from starlette.concurrency import run_in_threadpool

from autograder.service import queue as Q
from autograder.service import repository
from autograder.service.auth import Who
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import MAX_ID, ApiError, checked_id, parse_number
from autograder.service.intake import accept
from autograder.service.standing import Standing
from autograder.service.tokens import Caller
from autograder.service.views import Verdict, policy_view
from autograder.course.written import maximum_of

#: The longest a read may wait for its submission's verdict (``?wait=``).
LONG_POLL_MAX = 30.0

router = APIRouter(prefix="/api", tags=["submissions"])


class Receipt(BaseModel):
    """A stored upload: it will be graded whatever crashes afterwards."""

    submission: int = Field(description="the submission's id")
    job: int = Field(description="its grading job's id")
    position: int | None = Field(description="jobs ahead of it in the queue")


class Score(BaseModel):
    """A graded submission's score as it is now: the late policy applied again, the staff's marks in."""

    points: float = Field(description="the points now")
    max_points: float = Field(description="the assignment's maximum: its exercises' points and its written "
                                          "answers', graded or not")
    written_waiting: bool = Field(description="whether written answers still wait for a person to grade them")
    waiting_points: float = Field(description="the points of those answers: in max_points, not yet in points")
    waiting_questions: list[str] = Field(description="the written questions that wait")


class SubmissionState(BaseModel):
    """A submission's state and, once graded, its verdict as the caller may see it."""

    submission: int
    student: str
    assignment: str
    received_at: str = Field(description="ISO 8601, UTC")
    state: str = Field(description="queued, running, done, failed (or unknown)")
    position: int | None = Field(description="jobs ahead of it while it waits")
    result: Verdict | None = Field(description="the graded result (schemas/result.schema.json), as course.yml's "
                                               "service.before_due lets the caller see it; null until graded")
    score: Score | None = Field(description="null until graded")


class SubmissionRow(BaseModel):
    submission: int
    student: str
    assignment: str
    received_at: str = Field(description="ISO 8601, UTC")
    state: str = Field(description="queued, running, done, failed (or unknown)")
    score: Score | None = Field(description="null until graded")


class SubmissionList(BaseModel):
    # (next first: the list then ends the answer, where a reader of the printed answer looks for its end)
    next: int | None = Field(description="more submissions follow: ask again with this as ?after=; null on the "
                                         "last page")
    submissions: list[SubmissionRow]


@router.post("/submissions", status_code=202, summary="Submit a notebook for grading", response_model=Receipt,
             openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                 "type": "object", "required": ["assignment", "notebook"], "properties": {
                     "assignment": {"type": "string", "maxLength": 100, "description": "the assignment's id"},
                     "notebook": {"type": "string", "format": "binary", "description": "the .ipynb file"}}}}}}})
async def submit(request: Request, who: Who, state: ServiceDep) -> dict[str, Any]:
    # (the form is read by accept, after the caller is known: never a FastAPI Form parameter, which
    # FastAPI reads before any dependency runs)
    return await accept(request, state, who)


# (response_model_exclude_unset: the verdict holds what the caller's view holds, no field it left out added back)
@router.get("/submissions/{submission_id}", summary="A submission's state and, once graded, its verdict",
            response_model=SubmissionState, response_model_exclude_unset=True)
async def one(submission_id: Annotated[int, Path(ge=1, le=MAX_ID), checked_id("submission_id")], who: Who,
              state: ServiceDep,
              wait: Annotated[float, Query(ge=0, le=LONG_POLL_MAX, description=(
                  "seconds to wait for the verdict before answering (a long poll): the answer comes as soon "
                  "as the submission is graded, else after this long with its state"))] = 0.0
              ) -> dict[str, Any]:
    found = await run_in_threadpool(_read, state, submission_id, who)
    if wait and found["state"] not in ("done", "failed") and found["job"] is not None:
        await state.finished.wait(found["job"], wait)
        found = await run_in_threadpool(_read, state, submission_id, who)
    found.pop("job")
    return found


def _read(state: Service, submission_id: int, who: Caller) -> dict[str, Any]:
    sub, job, result = repository.submission(state.engine, submission_id)
    if sub is None or not (who.staff or sub.student == who.who):
        raise ApiError(404, "service.no_submission", submission=submission_id)
    shown = score = None
    if result is not None:
        standing = Standing(state.engine, state.course)     # the late policy as it is now (an extension since)
        now = standing.result(result)
        shown = policy_view(now, who, state.course, sub.assignment, standing.due(sub.student, sub.assignment))
        score = _score(now, state.course)
    return {"submission": sub.id, "student": sub.student, "assignment": sub.assignment,
            "received_at": sub.received_at.isoformat(), "state": job.state if job else "unknown",
            "position": Q.position(state.engine, job.id) if job else None, "result": shown, "score": score,
            "job": job.id if job else None}


@router.get("/submissions", summary="Submissions, oldest first, with their state and score: a student's own, or "
            "every one for the staff", response_model=SubmissionList)
def many(who: Who, state: ServiceDep,
         assignment: Annotated[str | None, Query(max_length=100)] = None,
         after: Annotated[int | None, Query(ge=1, le=MAX_ID, description=(
             "list the submissions after this id (the previous answer's next)")), checked_id("after")] = None,
         limit: Annotated[int, Query(ge=1, le=repository.API_ROWS, description=(
             "at most this many submissions in the answer")),
             BeforeValidator(partial(parse_number, name="limit", least=1, digits=4))] = repository.API_ROWS
         ) -> dict[str, Any]:
    # (one row more than asked says whether another page follows)
    rows = repository.submissions(state.engine, student=None if who.staff else who.who, assignment=assignment,
                                  after=after, limit=limit + 1)
    standing = Standing(state.engine, state.course)     # the late policy as it is now (an extension since)
    return {"next": rows[limit - 1].id if len(rows) > limit else None,
            "submissions": [_listed(r, standing) for r in rows[:limit]]}


def _listed(row: Any, standing: Standing) -> dict[str, Any]:
    """A row of the listing."""
    return {"submission": row.id, "student": row.student, "assignment": row.assignment,
            "received_at": row.received_at.isoformat(),
            "state": row.state if row.state in ("queued", "running", "done", "failed") else "unknown",
            "score": _score(standing.result(row.result), standing.course) if row.result is not None else None}


def _score(now: dict[str, Any], course: Any) -> dict[str, Any]:
    """A result's score as every view shows it (``now``: the stored result as the late policy makes it now): its
    points out of the assignment's maximum (:func:`autograder.course.written.maximum_of`), with the written answers that
    wait. The same for a student as for the staff: course.yml's service.before_due hides no score."""
    most = maximum_of(course, now)
    return {"points": float(now.get("points") or 0.0), "max_points": most.points,
            "written_waiting": bool(most.questions), "waiting_points": most.waiting,
            "waiting_questions": list(most.questions)}
