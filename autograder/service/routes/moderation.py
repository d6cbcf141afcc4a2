"""An instructor's decision on a double-marked written answer whose two blind marks are in: the mark that counts.

Where the two differ by more than course.yml's ``service.double_marking.threshold``
(:mod:`autograder.service.double_marking`), the dashboard's page shows the answer, both marks (who, points, items,
comments) and how far apart they are; its form saves the decision as any mark is saved
(:mod:`autograder.service.marks`: compare-and-set from the version the page showed, the audit naming both marks, the
score history). Only an instructor reaches these routes (:data:`autograder.service.auth.InstructorPage`); of the
form nothing is trusted: its fields are read through the service's parsers (:func:`.grading.mark_form`)."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.core.points import fmt
from autograder.service import audit, double_marking, mail, marks
from autograder.service import history as score_history
from autograder.service.auth import InstructorPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import ApiError, base_path
from autograder.service.richtext import markdown_html
from autograder.service.routes.grading import (SubmissionQuery, form_text, locate, mark_form, marker_view, model_answer,
                                               question_of, rubric_words)
from autograder.service.ui import UI, closes_form, language, local_text, render

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _double_answer(state: Service, question_id: str, submission: int) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """:func:`locate` of an answer whose two marks are in: 404 where the question is not double-marked, 409 where
    the answer has fewer than two marks."""
    assignment, question, got, at = locate(state, question_id, submission)
    if got[at]["pair"] is None:
        raise ApiError(404, "service.not_double", question=question.id)
    if not got[at]["pair"].complete:
        raise ApiError(409, "service.not_both_marks", question=question.id, submission=str(submission))
    return assignment, question, got, at


def _next_to_decide(got: list[dict[str, Any]], at: int) -> int | None:
    """The first answer after ``at`` (going round) whose two marks are in and whose mark is not decided."""
    return next((x["submission"] for x in got[at + 1:] + got[:at]
                 if x["mark"] is None and x["pair"] is not None and x["pair"].complete), None)


def _moderation_page(state: Service, question_id: str, submission: int, lang: str) -> dict[str, Any]:
    assignment, question, got, at = _double_answer(state, question_id, submission)
    this = got[at]
    mark, pair = this["mark"], this["pair"]
    made = double_marking.agreed_values(pair)       # where nothing is decided yet, the form starts from both marks
    ticked = set(mark.rubric or ()) if mark is not None else set(made["rubric"])
    threshold = state.course.service.double_marking.threshold
    return {"assignment": assignment.id, "question": question.id, "title": question.title_in(lang),
            "points": fmt(question.points), "submission": submission, "student": this["student"],
            "answer": this["answer"], "answered": this["answered"],
            "marks": [marker_view(m, question, lang, state) for m in pair.given],
            "gap": fmt(abs(float(pair.first.points) - float(pair.second.points))), "threshold": fmt(threshold),
            "agree": pair.agree(threshold), "version": mark.version if mark is not None else 0,
            "given": fmt(mark.points) if mark is not None else None,
            "graded_by": mark.graded_by if mark is not None else "",
            "graded_at": local_text(mark.graded_at, state.course) if mark is not None else "",
            "comment": mark.comment if mark is not None else made["comment"],
            "rubric": [{"id": i.id, "points": fmt(i.points), "text": i.text_in(lang), "ticked": i.id in ticked}
                       for i in question.rubric],
            "next": _next_to_decide(got, at),
            "model": markdown_html(model_answer(str(state.course.root), assignment.id, question.id))}


@router.get("/grading/moderate")
async def moderation_page(request: Request, signed: InstructorPage, state: ServiceDep, question: str = "", *,
                          submission: SubmissionQuery) -> Response:
    """an instructor's page for a double-marked answer whose two marks are in: the answer, both marks (who, points,
    items, comments) and how far apart they are, and the form whose mark is the one that counts"""
    lang = language(request, state.course)
    page = await run_in_threadpool(_moderation_page, state, question[:40], submission, lang)
    return render(request, state, "grading_moderate", signed, title=f"{UI[lang]['moderate']} · {page['question']}",
                  a=page, blind=state.course.service.blind_grading)


def _moderate(state: Service, who: str, question_id: str, submission: int, rubric: list[str], comment: str,
              points: float | None, version: int) -> tuple[Any, Any, int | None]:
    """The instructor's decision saved as the answer's mark (compare-and-set from ``version``, the audit with both
    marks, the score history): (the mark, its question, the next answer to decide)."""
    assignment, question, got, at = _double_answer(state, question_id, submission)
    this = got[at]
    pair = this["pair"]
    try:
        saved = marks.save_mark(state.engine, state.course, student=this["student"], assignment=assignment.id,
                                question=question.id, answer_sha=this["sha"], rubric=rubric, comment=comment,
                                who=who, version=version, points=points, also=mail.on_mark(state.course))
    except ValueError as exc:
        raise ApiError(422, "service.malformed", fields=f"rubric: {str(exc)[:200]}") from None
    audit.note(state.engine, who, "mark.moderate", this["student"],
               f"{question.id} submission {submission}: {fmt(saved.points)} (the marks: {fmt(pair.first.points)} by "
               f"{pair.first.graded_by}, {fmt(pair.second.points)} by {pair.second.graded_by})")
    score_history.note(state.engine, state.course, [(this["student"], assignment.id)], why="manual", who=who,
                       detail=f"{question.id}: {fmt(saved.points)} (moderated)")
    return saved, question, _next_to_decide(got, at)


@router.post("/grading/moderate")
@closes_form
async def moderate(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    """an instructor's decision on a double-marked answer: the rubric's items, a comment and, where given, the points
    (else the items' sum), saved as the mark that counts from the version the page showed"""
    form = await form_checked(request, signed)
    lang = language(request, state.course)
    question, submission, version, rubric, comment = mark_form(form)
    typed = form_text(form, "points", 30).strip()
    points: float | None = None
    if typed:
        try:
            points = float(typed)
        except ValueError:
            raise ApiError(422, "service.malformed", fields="points") from None
        if points != points or points < 0:         # NaN, a negative number (more than the question's: held at it)
            raise ApiError(422, "service.malformed", fields="points")
    T = UI[lang]
    try:
        saved, asked, then = await run_in_threadpool(_moderate, state, signed.caller.who, question, submission,
                                                     rubric, comment, points, version)
    except marks.Conflict as conflict:
        current = conflict.current
        page = await run_in_threadpool(_moderation_page, state, question, submission, lang)
        said = T["mark_conflict"].format(
            who=current.graded_by if current is not None else "?",
            when=local_text(current.graded_at, state.course) if current is not None else "?",
            mine=rubric_words(question_of(state, question)[1], rubric, lang), comment=comment or "—")
        return render(request, state, "grading_moderate", signed, status=409, a=page, notice=said,
                      title=f"{T['moderate']} · {page['question']}", blind=state.course.service.blind_grading)
    said = T["moderated"].format(points=fmt(saved.points), max=fmt(asked.points))
    target = (f"/dashboard/grading/moderate?question={quote(question)}&submission={then}" if then is not None
              else "/dashboard/grading")
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{base_path(request)}{target}{joiner}notice={quote(said)}", status_code=303)
