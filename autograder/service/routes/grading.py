"""Hand grading on the dashboard: the written answers of the results that count, one after another with the
question's rubric beside each (several graders at once, none overwriting another: :mod:`autograder.service.marks`),
and the staff's adjustment of an exercise's automatic points, with the reason the student reads."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from autograder.points import fmt
from autograder.service import audit, marks
from autograder.service import history as score_history
from autograder.service.auth import StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.db import Result
from autograder.service.errors import MAX_ID, ApiError, base_path, checked_id, form_id, parse_number
from autograder.service.export import counted_submissions
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, local_text, render
from autograder.text import clean
from autograder.written import answer_grade_id, maximum_of

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _question(state: Service, question: str) -> tuple[Any, Any]:
    """(assignment, question) of course.yml, or 404 naming the question asked for."""
    for a in state.course.assignments:
        q = a.question(question)
        if q is not None:
            return a, q
    known = ", ".join(q.id for a in state.course.assignments for q in a.questions) or "—"
    raise ApiError(404, "service.no_question", question=question[:40], known=known)


def answers(state: Service, assignment: Any, question: Any, standing: Standing) -> list[dict[str, Any]]:
    """The question's answers in the results that count, in submission order: submission, student, answer text,
    its fingerprint, and its mark (None while no one graded it)."""
    out = []
    for one in counted_submissions(state.engine, state.course.service.counts, standing):
        r = one.result
        if r.get("assignment") != assignment.id:
            continue
        entry = next((q for q in r.get("questions") or () if q.get("question") == question.id), None)
        if entry is None:
            continue
        mark = standing.book.mark(str(r.get("student")), assignment.id, question.id, str(entry.get("sha256")))
        out.append({"submission": one.submission, "student": str(r.get("student") or ""),
                    "answer": str(entry.get("answer") or ""), "sha": str(entry.get("sha256") or ""),
                    "answered": bool(entry.get("answered")), "mark": mark})
    return out


@functools.lru_cache(maxsize=64)
def model_answer(root: str, assignment: str, question: str) -> str:
    """The source notebook's answer to the question (the graders' reference); "" where there is none."""
    try:
        nb = json.loads((Path(root) / "source" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    for cell in nb.get("cells", []):
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answer_grade_id(question):
            source = cell.get("source", "")
            return "".join(source) if isinstance(source, list) else str(source)
    return ""


def _overview(state: Service, lang: str) -> list[dict[str, Any]]:
    standing = Standing(state.engine, state.course)
    rows = []
    for a in state.course.assignments:
        for q in a.questions:
            got = answers(state, a, q, standing)
            waiting = [x for x in got if x["mark"] is None]
            rows.append({"assignment": a.id, "id": q.id, "title": q.title_in(lang), "points": fmt(q.points),
                         "total": len(got), "graded": len(got) - len(waiting),
                         "next": waiting[0]["submission"] if waiting else (got[0]["submission"] if got else None),
                         "answers": [{"submission": x["submission"], "student": x["student"],
                                      "points": fmt(x["mark"].points) if x["mark"] is not None else "",
                                      "by": x["mark"].graded_by if x["mark"] is not None else "",
                                      "answered": x["answered"]} for x in got]})
    return rows


@router.get("/grading")
async def grading(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    lang = language(request, state.course)
    rows = await run_in_threadpool(_overview, state, lang)
    return render(request, state, "grading", signed, title=UI[lang]["grading"], questions=rows,
                  blind=state.course.service.blind_grading)


def _locate(state: Service, question_id: str, submission: int) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """(assignment, question, its counted answers, where ``submission``'s is among them), or 404."""
    assignment, question = _question(state, question_id)
    got = answers(state, assignment, question, Standing(state.engine, state.course))
    at = next((i for i, x in enumerate(got) if x["submission"] == submission), None)
    if at is None:
        raise ApiError(404, "service.no_answer", question=question.id, submission=str(submission))
    return assignment, question, got, at


def _next_waiting(got: list[dict[str, Any]], at: int) -> int | None:
    """The first answer after ``at`` (going round) that no one has graded."""
    return next((x["submission"] for x in got[at + 1:] + got[:at] if x["mark"] is None), None)


def _answer_page(state: Service, question_id: str, submission: int, lang: str) -> dict[str, Any]:
    assignment, question, got, at = _locate(state, question_id, submission)
    this = got[at]
    mark = this["mark"]
    ticked = set(mark.rubric or ()) if mark is not None else set()
    return {"assignment": assignment.id, "question": question.id, "title": question.title_in(lang),
            "points": fmt(question.points), "submission": submission, "student": this["student"],
            "answer": this["answer"], "answered": this["answered"], "version": mark.version if mark is not None else 0,
            "given": fmt(mark.points) if mark is not None else None,
            "comment": mark.comment if mark is not None else "",
            "graded_by": mark.graded_by if mark is not None else "",
            "graded_at": local_text(mark.graded_at, state.course) if mark is not None else "",
            "rubric": [{"id": i.id, "points": fmt(i.points), "text": i.text_in(lang), "ticked": i.id in ticked}
                       for i in question.rubric],
            "previous": got[at - 1]["submission"] if at > 0 else None,
            "next": got[at + 1]["submission"] if at + 1 < len(got) else None,
            "next_waiting": _next_waiting(got, at), "position": at + 1, "total": len(got),
            "comments": marks.earlier_comments(state.engine, question.id),
            "model": model_answer(str(state.course.root), assignment.id, question.id)}


#: A submission's id in a page's query (read by the service's one id parser).
SubmissionQuery = Annotated[int, Query(ge=1, le=MAX_ID), checked_id("submission")]


@router.get("/grading/answer")
async def answer(request: Request, signed: StaffPage, state: ServiceDep, question: str = "", *,
                 submission: SubmissionQuery) -> Response:
    lang = language(request, state.course)
    page = await run_in_threadpool(_answer_page, state, question[:40], submission, lang)
    return render(request, state, "grading_answer", signed, title=f"{UI[lang]['grading']} · {page['question']}",
                  a=page, blind=state.course.service.blind_grading)


def _form_text(form: FormData, name: str, limit: int = marks.TEXT_CHARS) -> str:
    value = form.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, "service.malformed", fields=name)
    text = clean(value or "", limit * 2)
    if len(text) > limit:
        raise ApiError(422, "service.too_long", field=name, n=str(limit))
    return text


def _save_mark(state: Service, who: str, question_id: str, submission: int, rubric: list[str], comment: str,
               version: int) -> tuple[Any, Any, int | None]:
    """Save the mark of one counted answer: (the mark saved, its question, the next answer waiting)."""
    assignment, question, got, at = _locate(state, question_id, submission)
    this = got[at]
    try:
        saved = marks.save_mark(state.engine, state.course, student=this["student"], assignment=assignment.id,
                                question=question.id, answer_sha=this["sha"], rubric=rubric, comment=comment,
                                who=who, version=version)
    except ValueError as exc:
        raise ApiError(422, "service.malformed", fields=f"rubric: {str(exc)[:200]}") from None
    audit.note(state.engine, who, "mark.save", this["student"],
               f"{question.id} submission {submission}: {fmt(saved.points)} ({', '.join(saved.rubric) or '-'})")
    score_history.note(state.engine, state.course, [(this["student"], assignment.id)], why="manual", who=who,
                       detail=f"{question.id}: {fmt(saved.points)}")
    return saved, question, _next_waiting(got, at)


@router.post("/grading/answer")
@closes_form
async def save(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    lang = language(request, state.course)
    question = _form_text(form, "question", 40)
    submission = form_id(form, "submission")
    version = parse_number(form.get("version"), "version", digits=9)
    rubric = [str(r)[:20] for r in form.getlist("rubric")][:50]
    comment = _form_text(form, "comment")
    try:
        saved, asked, waiting = await run_in_threadpool(_save_mark, state, signed.caller.who, question, submission,
                                                        rubric, comment, version)
    except marks.Conflict as conflict:
        page = await run_in_threadpool(_answer_page, state, question, submission, lang)
        current = conflict.current
        said = UI[lang]["mark_conflict"].format(
            who=current.graded_by if current is not None else "?",
            when=local_text(current.graded_at, state.course) if current is not None else "?",
            mine=", ".join(rubric) or "—", comment=comment or "—")
        return render(request, state, "grading_answer", signed, status=409, a=page, notice=said,
                      title=f"{UI[lang]['grading']} · {page['question']}", blind=state.course.service.blind_grading)
    said = UI[lang]["mark_saved"].format(points=fmt(saved.points), max=fmt(asked.points))
    then = waiting if form.get("then") == "next" else submission
    target = (f"/dashboard/grading/answer?question={question}&submission={then}" if then is not None
              else "/dashboard/grading")
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{base_path(request)}{target}{joiner}notice={quote(said)}", status_code=303)


# -- adjusting an exercise's automatic points ------------------------------------------------------------------------
def _submission_result(state: Service, submission: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stored, as shown now) of one graded submission, or 404."""
    with state.engine.connect() as conn:
        row = conn.execute(select(Result.result).where(Result.submission_id == submission)).first()
    if row is None or not str(row.result.get("status") or "").startswith("graded"):
        raise ApiError(404, "service.not_graded", submission=str(submission))
    return row.result, Standing(state.engine, state.course).result(row.result)


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
    exercise = _form_text(form, "exercise", 20)
    reason = _form_text(form, "reason")
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
