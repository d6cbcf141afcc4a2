"""The staff's adjustment of an exercise's automatic points in one graded notebook, with the reason the student reads.

The dashboard's page lists the notebook's exercises (the points graded, the points now, the maximum, any adjustment
so far); its form saves one through :mod:`autograder.service.marks` (compare-and-set from the version the page
showed: a save from an older one is refused and said, nothing overwritten), with the audit and the score history.
What it trusts: the stored result of a graded submission; of the form, nothing: each field is read through the
service's parsers, the points a number from 0 (more than the exercise's maximum is held at it)."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.core.points import fmt
from autograder.course.written import maximum_of
from autograder.service import audit, marks, repository
from autograder.service import history as score_history
from autograder.service.auth import StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import ApiError, base_path, form_id, parse_number
from autograder.service.routes.grading import SubmissionQuery, form_text
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, render

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _submission_result(state: Service, submission: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stored, as shown now) of one graded submission, or 404."""
    stored = repository.stored_result(state.engine, submission)
    if stored is None or not str(stored.get("status") or "").startswith("graded"):
        raise ApiError(404, "service.not_graded", submission=str(submission))
    return stored, Standing(state.engine, state.course).result(stored)


def _adjust_page(state: Service, submission: int, lang: str) -> dict[str, Any]:
    stored, now = _submission_result(state, submission)
    book = marks.Book.read(state.engine)
    student, assignment, sha = str(now.get("student")), str(now.get("assignment")), str(now.get("sha256"))
    rows = []
    for ex_stored, ex_now in zip(stored.get("exercises") or (), now.get("exercises") or ()):
        adj = book.adjustment(student, assignment, sha, str(ex_now.get("exercise")))
        rows.append({"exercise": ex_now.get("exercise"), "auto": fmt(ex_stored.get("points") or 0.0),
                     "now": fmt(ex_now.get("points") or 0.0), "max": fmt(ex_now.get("max_points") or 0.0),
                     "max_value": float(ex_now.get("max_points") or 0.0),
                     "reason": adj.reason if adj is not None else "", "by": adj.who if adj is not None else "",
                     "version": adj.version if adj is not None else 0})
    most = maximum_of(state.course, now)          # the assignment's, with what still waits for a person beside it
    waiting = most.beside(lang)
    return {"submission": submission, "student": student, "assignment": assignment, "exercises": rows,
            "points": fmt(now.get("points") or 0.0), "max_points": fmt(most.points),
            "waiting": (f"（{waiting}）" if lang == "zh" else f" ({waiting})") if waiting else ""}


@router.get("/adjust")
async def adjust_page(request: Request, signed: StaffPage, state: ServiceDep, submission: SubmissionQuery
                      ) -> Response:
    lang = language(request, state.course)
    page = await run_in_threadpool(_adjust_page, state, submission, lang)
    return render(request, state, "adjust", signed, title=UI[lang]["adjust"], a=page)


def _save_adjustment(state: Service, who: str, submission: int, exercise: str, points: float, reason: str,
                     version: int) -> Any:
    _stored, now = _submission_result(state, submission)
    student, assignment = str(now.get("student")), str(now.get("assignment"))
    try:
        saved = marks.save_adjustment(state.engine, state.course, student=student, assignment=assignment,
                                      sha256=str(now.get("sha256")), exercise=exercise, points=points,
                                      reason=reason, who=who, version=version)
    except ValueError as exc:
        raise ApiError(422, "service.malformed", fields=f"{exercise}: {str(exc)[:200]}") from None
    audit.note(state.engine, who, "score.adjust", student,
               f"{exercise} submission {submission}: {fmt(saved.points)} ({reason[:200]})")
    score_history.note(state.engine, state.course, [(student, assignment)], why="manual", who=who,
                       detail=f"{exercise}: {fmt(saved.points)}, {reason[:200]}")
    return saved


@router.post("/adjust")
@closes_form
async def adjust(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    lang = language(request, state.course)
    submission = form_id(form, "submission")
    version = parse_number(form.get("version"), "version", digits=9)
    exercise = form_text(form, "exercise", 20)
    reason = form_text(form, "reason")
    if not reason.strip():
        raise ApiError(422, "service.reason_needed")
    try:
        points = float(str(form.get("points") or "").strip())
    except ValueError:
        raise ApiError(422, "service.malformed", fields="points") from None
    if points != points or points < 0:         # NaN, a negative number
        raise ApiError(422, "service.malformed", fields="points")
    try:
        saved = await run_in_threadpool(_save_adjustment, state, signed.caller.who, submission, exercise, points,
                                        reason, version)
        said = UI[lang]["adjusted"].format(exercise=exercise, points=fmt(saved.points))
    except marks.Conflict as conflict:
        current = conflict.current
        said = UI[lang]["adjust_conflict"].format(who=current.who if current is not None else "?",
                                                  reason=current.reason if current is not None else "?",
                                                  points=fmt(points), mine=reason)
    return RedirectResponse(f"{base_path(request)}/dashboard/adjust?submission={submission}&notice={quote(said)}",
                            status_code=303)
