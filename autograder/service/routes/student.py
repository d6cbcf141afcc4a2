"""A student's page: their assignments (due dates, attempts left, what handing in late costs now), their
submissions followed to the verdict, and the upload form."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.course import lateness as L
from autograder.core.points import fmt
from autograder.service import repository
from autograder.service.auth import SignedPage
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import base_path
from autograder.service.intake import accept
from autograder.service.listing import listing, score_changes
from autograder.service.routes.reviews import student_reviews
from autograder.service.standing import Standing
from autograder.service.tokens import Caller
from autograder.service.ui import UI, closes_form, language, local_text, render
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course

router = APIRouter(include_in_schema=False)


@router.get("/me")
async def me(request: Request, signed: SignedPage, state: ServiceDep) -> Response:
    if signed.caller.staff:
        return RedirectResponse(f"{base_path(request)}/dashboard", status_code=303)
    lang = language(request, state.course)
    standing = await run_in_threadpool(Standing, state.engine, state.course)    # (one read of the deadlines)
    mine = await run_in_threadpool(lambda: listing(state, signed.caller, lang, standing=standing))
    shown = await run_in_threadpool(student_assignments, state, signed.caller, mine, lang, standing)
    changes = await run_in_threadpool(score_changes, state, lang, signed.caller.who)
    asked = await run_in_threadpool(student_reviews, state, signed.caller.who, lang, standing)
    return render(request, state, "me", signed, assignments=shown, title=UI[lang]["mine"], changes=changes,
                  reviews=asked)


@router.post("/me/upload")
@closes_form
async def upload(request: Request, signed: SignedPage, state: ServiceDep) -> Response:
    receipt = await accept(request, state, signed.caller, signed.csrf)     # (the form is read there, bounded)
    return RedirectResponse(f"{base_path(request)}/me#submission-{receipt['submission']}", status_code=303)


def student_assignments(state: Service, who: Caller, mine: list[dict[str, Any]], lang: str,
                        standing: Standing) -> list[dict[str, Any]]:
    course = state.course
    T = UI[lang]
    out = []
    for a in course.assignments:
        deadline = standing.deadlines.deadline(who.who, a.id)
        due = deadline.due if deadline is not None else None
        subs = [s for s in mine if s["assignment"] == a.id]
        if subs and not any(s["state"] in ("queued", "running") for s in subs):
            subs[0]["open"] = True
        out.append({"id": a.id, "title": str(a.title_in(lang)), "submissions": subs,
                    "due_iso": due.isoformat() if due else None,
                    "due_text": local_text(due, course) if due else None,
                    "late_now": late_now(course, deadline, a, T),
                    "attempts": attempts_text(state, who, a.id, len(subs), T)})
    return out


def late_now(course: Course, deadline: Any, assignment: Any, T: dict[str, str]) -> str | None:
    """Past the due date: what handing in now would cost (the late policy on full marks: the assignment's maximum,
    its written answers' points included, which the penalty is computed on and the sentence names), until when it
    is taken at all; None before the due date."""
    now = dt.datetime.now(dt.timezone.utc)
    if deadline is None or now <= deadline.due:
        return None
    if deadline.last is not None and now > deadline.last:
        return T["late_closed"]
    full = maximum(assignment).points
    cost = L.apply(deadline, submitted=now, late_marker=False, raw=full, max_points=full, course_root=course.root)
    window = (T["late_until"].format(when=local_text(deadline.last, course)) if deadline.last is not None
              else T["late_open"])
    return window + T["late_costs"].format(penalty=fmt(cost.penalty), points=fmt(full))


def attempts_text(state: Service, who: Caller, assignment: str, used: int, T: dict[str, str]) -> str:
    policy = state.course.service
    parts = []
    if policy.attempts is not None:
        parts.append(T["attempts_left"].format(n=max(0, policy.attempts - used)))
    if policy.attempts_per_day is not None:
        midnight = dt.datetime.now(state.course.zone).replace(hour=0, minute=0, second=0, microsecond=0)
        today = repository.submitted_since(state.engine, who.who, assignment, midnight)
        parts.append(T["today_left"].format(n=max(0, policy.attempts_per_day - today)))
    return " · ".join(parts) or T["attempts_any"]
