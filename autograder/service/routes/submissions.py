"""The JSON API: submit a notebook, follow it to its verdict, list submissions."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from autograder.service import queue as Q
from autograder.service import repository
from autograder.service.auth import Who
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import MAX_ID, ApiError, checked_id
from autograder.service.intake import accept
from autograder.service.standing import Standing
from autograder.service.tokens import Caller
from autograder.service.views import policy_view

#: The longest a read may wait for its submission's verdict (``?wait=``).
LONG_POLL_MAX = 30.0

router = APIRouter(prefix="/api", tags=["submissions"])


class Receipt(BaseModel):
    """A stored upload: it will be graded whatever crashes afterwards."""

    submission: int = Field(description="the submission's id")
    job: int = Field(description="its grading job's id")
    position: int | None = Field(description="jobs ahead of it in the queue")


class SubmissionState(BaseModel):
    """A submission's state and, once graded, its verdict as the caller may see it."""

    submission: int
    student: str
    assignment: str
    received_at: str = Field(description="ISO 8601, UTC")
    state: str = Field(description="queued, running, done, failed (or unknown)")
    position: int | None = Field(description="jobs ahead of it while it waits")
    result: dict[str, Any] | None = Field(description="the graded result (schemas/result.schema.json), as "
                                                      "course.yml's service.before_due lets the caller see it")


class SubmissionRow(BaseModel):
    submission: int
    student: str
    assignment: str


class SubmissionList(BaseModel):
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


@router.get("/submissions/{submission_id}", summary="A submission's state and, once graded, its verdict",
            response_model=SubmissionState)
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
    shown = None
    if result is not None:
        standing = Standing(state.engine, state.course)     # the late policy as it is now (an extension since)
        shown = policy_view(standing.result(result), who, state.course, sub.assignment,
                            standing.due(sub.student, sub.assignment))
    return {"submission": sub.id, "student": sub.student, "assignment": sub.assignment,
            "received_at": sub.received_at.isoformat(), "state": job.state if job else "unknown",
            "position": Q.position(state.engine, job.id) if job else None, "result": shown,
            "job": job.id if job else None}


@router.get("/submissions", summary="Submissions: a student's own, or every one for an instructor",
            response_model=SubmissionList)
def many(who: Who, state: ServiceDep,
         assignment: Annotated[str | None, Query(max_length=100)] = None) -> dict[str, Any]:
    rows = repository.submissions(state.engine, student=None if who.staff else who.who, assignment=assignment)
    return {"submissions": [{"submission": r.id, "student": r.student, "assignment": r.assignment} for r in rows]}
