"""Review requests on the pages: a student asks from /me (one exercise or written answer of a counted result, with a
message, while course.yml's review window is open) and reads the answer there; the staff answer from the queue at
/dashboard/reviews (accept with new points, or decline with a reason). The rules are
:mod:`autograder.service.reviews`'."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.core.points import fmt
from autograder.service import people, reviews
from autograder.service.auth import SignedPage, StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.tables import utcnow
from autograder.service.errors import ApiError, base_path, form_id, parse_number
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, local_text, render, to_dashboard

router = APIRouter(include_in_schema=False)


def _state_words(lang: str) -> dict[str, str]:
    return {"open": UI[lang]["review_open"], "accepted": UI[lang]["review_accepted"],
            "declined": UI[lang]["review_declined"]}


def _row(state: Service, r: Any, lang: str, titles: dict[tuple[str, str], str]) -> dict[str, Any]:
    """A request as both pages show it (its message and answer are escaped where the template writes them)."""
    course = state.course
    return {"id": r.id, "version": r.version, "student": r.student, "assignment": r.assignment, "item": r.item,
            "title": titles.get((r.assignment, r.item), ""), "message": r.message, "state": r.state,
            "state_text": _state_words(lang).get(r.state, r.state), "asked": local_text(r.asked_at, course),
            "answer": r.answer, "by": r.answered_by or "",
            "answered": local_text(r.answered_at, course) if r.answered_at is not None else "",
            "old": "—" if r.old_points is None else fmt(r.old_points),
            "new": "" if r.new_points is None else fmt(r.new_points)}


def _titles(state: Service, lang: str) -> dict[tuple[str, str], str]:
    return {(a.id, i.id): i.title for a in state.course.assignments for i in reviews.items(state.course, a.id, lang)}


def student_reviews(state: Service, student: str, lang: str, standing: Standing) -> dict[str, dict[str, Any]]:
    """Per assignment with a counted result (or a request): what the student may ask about and until when, and
    their requests with the staff's answers."""
    course = state.course
    titles = _titles(state, lang)
    mine = reviews.student_rows(reviews.requests(state.engine, student=student))
    now = utcnow()
    out: dict[str, dict[str, Any]] = {}
    for a in course.assignments:
        found = reviews.counted(state.engine, course, standing, student, a.id)
        asked = mine.get(a.id, [])
        if not asked and (found is None or found.closes is None):      # (nothing asked, nothing to ask)
            continue
        waiting = {r.item for r in asked if r.state == "open"}
        choices = [i for i in reviews.items(course, a.id, lang) if found is not None and i.id not in waiting
                   and (i.kind == "exercise" or found.points(i.id) is not None)]
        is_open = found is not None and found.closes is not None and now <= found.closes
        out[a.id] = {"can_ask": is_open and bool(choices), "items": choices, "limit": reviews.MESSAGE_CHARS,
                     "until": local_text(found.closes, course) if found is not None and found.closes else "",
                     "closed": bool(found is not None and found.closes is not None and now > found.closes),
                     "requests": [_row(state, r, lang, titles) for r in asked]}
    return out


@router.post("/me/reviews")
@closes_form
async def ask(request: Request, signed: SignedPage, state: ServiceDep) -> Response:
    """ask for a review of one exercise or written answer of a counted result, with a message (a student's
    page's form, while course.yml's service.review_days window is open)"""
    if signed.caller.staff:
        raise ApiError(403, "service.review_students_only")
    form = await form_checked(request, signed)
    assignment, item = str(form.get("assignment") or "")[:100], str(form.get("item") or "")[:20]
    message = str(form.get("message") or "")
    await run_in_threadpool(reviews.ask, state.engine, state.course, signed.caller.who, assignment, item, message)
    said = UI[language(request, state.course)]["review_sent"].format(item=item)
    return RedirectResponse(f"{base_path(request)}/me?notice={quote(said)}#reviews-{quote(assignment)}",
                            status_code=303)


def _link(item: reviews.Item | None, submission: int | None) -> str:
    """The page of what a request is about (the path below the service's), "" where there is none: a written
    answer's grading page, an exercise's adjustment page."""
    if item is None or submission is None:
        return ""
    if item.kind == "question":
        return f"/dashboard/grading/answer?question={quote(item.id)}&submission={submission}"
    return f"/dashboard/adjust?submission={submission}"


def queue_rows(state: Service, lang: str) -> list[dict[str, Any]]:
    """The staff's queue: the open requests, oldest first, each with the item's points now; then the answered. Each
    links to the answer it is about, in the result that counts now (else the one it was asked about)."""
    course = state.course
    titles = _titles(state, lang)
    names = people.names(state.engine)
    standing = Standing(state.engine, course)
    seen: dict[tuple[str, str], Any] = {}
    found = {(a.id, i.id): i for a in course.assignments for i in reviews.items(course, a.id)}
    out = []
    for r in reviews.requests(state.engine):
        row = _row(state, r, lang, titles)
        row["name"] = names.get(r.student, "")
        item = found.get((r.assignment, r.item))
        row["max"] = fmt(item.max_points if item is not None else 0.0)
        key = (r.student, r.assignment)
        if key not in seen:
            seen[key] = reviews.counted(state.engine, course, standing, r.student, r.assignment)
        now = seen[key]
        if r.state == "open":
            points = now.points(r.item) if now is not None else None
            row["current"] = "—" if points is None else fmt(points)
        row["link"] = _link(item, now.submission if now is not None else r.submission_id)
        out.append(row)
    return out


@router.get("/dashboard/reviews")
async def queue(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """the review requests: the open ones first (oldest first) with the item's points now, each to accept with
    new points or decline with a reason; then the answered ones"""
    lang = language(request, state.course)
    rows = await run_in_threadpool(queue_rows, state, lang)
    return render(request, state, "reviews", signed, title=UI[lang]["reviews"], rows=rows,
                  waiting=sum(r["state"] == "open" for r in rows), limit=reviews.MESSAGE_CHARS)


@router.post("/dashboard/reviews/answer")
@closes_form
async def answer(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """answer a review request from the version the page showed: accept with new points (the score changes at once,
    recorded in the score history) or decline with a reason; a second answer to the same version is refused"""
    form = await form_checked(request, signed)
    review_id, version = form_id(form, "review"), parse_number(form.get("version"), "version")
    decision = str(form.get("decision") or "")
    if decision not in ("accept", "decline"):
        raise ApiError(422, "service.malformed", fields="decision")
    points: float | None = None
    if decision == "accept":
        try:
            points = float(str(form.get("points") or "").strip()[:30])
        except ValueError:
            points = None
    done = await run_in_threadpool(reviews.answer, state.engine, state.course, review_id, signed.caller.who,
                                   decision == "accept", points, str(form.get("reason") or ""), version)
    T = UI[language(request, state.course)]
    said = (T["review_accepted_notice"].format(student=done.student, item=done.item,
                                               old="—" if done.old_points is None else fmt(done.old_points),
                                               new=fmt(done.new_points))
            if done.state == "accepted" else T["review_declined_notice"].format(student=done.student, item=done.item))
    return to_dashboard(request, said, "reviews")
