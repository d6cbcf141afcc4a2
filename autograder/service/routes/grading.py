"""Hand grading on the dashboard: the written answers of the results that count, one after another with the
question's rubric beside each (several graders at once, none overwriting another: :mod:`autograder.service.marks`);
a double-marked question's two blind marks, each by its own marker (:mod:`autograder.service.double_marking`).

The overview lists every question with the answers waiting; an answer's page shows it with its rubric, the model
answer and the next one waiting; its form saves the mark (compare-and-set from the version the page showed: a save
from an older one is refused, the page shown again with why). The same hand grading at class size: every unanswered
answer given 0 in one action (:mod:`.unanswered`), an instructor's decision where two marks differ
(:mod:`.moderation`), an exercise's automatic points adjusted (:mod:`.adjust`). What those pages read is here too:
a question's answers in the results that count, each with its mark (:func:`answers`), the one a page names
(:func:`locate`), the model answer, and a mark's form, read in one place for the grader's save and the
instructor's decision (:func:`mark_form`). What it trusts: course.yml as loaded; of a form, nothing: each field is
read through the service's parsers (:mod:`autograder.service.errors`) and bounded before anything uses it."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any, NamedTuple
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from autograder.core.points import fmt
from autograder.core.text import clean
from autograder.course.written import answer_grade_id
from autograder.service import audit, double_marking, mail, marks
from autograder.service import history as score_history
from autograder.service.auth import StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import MAX_ID, ApiError, base_path, checked_id, form_id, parse_number
from autograder.service.export import Counted, counted_submissions
from autograder.service.richtext import markdown_html
from autograder.service.sessions import Signed
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, local_text, render

router = APIRouter(prefix="/dashboard", include_in_schema=False)


# -- the written answers every hand-grading page reads (this module's, .unanswered's, .moderation's) ----------------
def question_of(state: Service, question: str) -> tuple[Any, Any]:
    """(assignment, question) of course.yml, or 404 naming the question asked for."""
    for a in state.course.assignments:
        q = a.question(question)
        if q is not None:
            return a, q
    known = ", ".join(q.id for a in state.course.assignments for q in a.questions) or "—"
    raise ApiError(404, "service.no_question", question=question[:40], known=known)


def answers(state: Service, assignment: Any, question: Any, standing: Standing, counted: list[Counted] | None = None,
            pairs: dict[double_marking.Key, double_marking.Pair] | None = None) -> list[dict[str, Any]]:
    """The question's answers in the results that count, in submission order: submission, student, answer text,
    its fingerprint, its mark (None while no mark counts) and, for a double-marked question, its two marks so far
    (``pair``; None for any other question). ``counted`` and ``pairs``: the counted submissions and the double marks,
    where the caller read them already (a page of every question reads them once, not once a question)."""
    two_markers = double_marking.is_double(state.course, question.id)
    if two_markers and pairs is None:
        pairs = double_marking.read(state.engine)
    out = []
    for one in counted if counted is not None else counted_submissions(state.engine, state.course.service.counts,
                                                                       standing):
        r = one.result
        if r.get("assignment") != assignment.id:
            continue
        entry = next((q for q in r.get("questions") or () if q.get("question") == question.id), None)
        if entry is None:
            continue
        student, sha = str(r.get("student") or ""), str(entry.get("sha256") or "")
        mark = standing.book.mark(student, assignment.id, question.id, sha)
        key = (student, assignment.id, question.id, sha)
        pair = (pairs or {}).get(key, double_marking.Pair()) if two_markers else None
        out.append({"submission": one.submission, "student": student, "answer": str(entry.get("answer") or ""),
                    "sha": sha, "answered": bool(entry.get("answered")), "mark": mark, "pair": pair})
    return out


def waits_for(x: dict[str, Any], who: str) -> bool:
    """The answer (of :func:`answers`) waits for ``who``: no mark counts yet and, double-marked, one of its two marks
    is theirs to give."""
    return x["mark"] is None and (x["pair"] is None or x["pair"].waits_for(who))


def unanswered(x: dict[str, Any]) -> bool:
    """The answer holds no answer (the template's text, or nothing) and no one has marked it, nor begun to."""
    return not x["answered"] and x["mark"] is None and (x["pair"] is None or not x["pair"].given)


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


def counted_of(state: Service, standing: Standing) -> list[Counted]:
    """The submissions whose results count (course.yml's ``service.counts``), as the pages of every question read
    them once."""
    return counted_submissions(state.engine, state.course.service.counts, standing)


def locate(state: Service, question_id: str, submission: int) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """(assignment, question, its counted answers, where ``submission``'s is among them), or 404."""
    assignment, question = question_of(state, question_id)
    got = answers(state, assignment, question, Standing(state.engine, state.course))
    at = next((i for i, x in enumerate(got) if x["submission"] == submission), None)
    if at is None:
        raise ApiError(404, "service.no_answer", question=question.id, submission=str(submission))
    return assignment, question, got, at


def rubric_words(question: Any, ticked: list[str], lang: str) -> str:
    """The items ``ticked`` as the grader read them (their text, never their ids), "—" for none."""
    return "; ".join(i.text_in(lang) for i in question.rubric if i.id in set(ticked)) or "—"


def marker_view(m: Any, question: Any, lang: str, state: Service) -> dict[str, Any]:
    """One of a double-marked answer's two marks, as a page shows it."""
    return {"marker": m.marker, "who": m.graded_by, "when": local_text(m.graded_at, state.course),
            "points": fmt(m.points), "comment": m.comment,
            "items": [f"{fmt(i.points)}: {i.text_in(lang)}" for i in question.rubric if i.id in (m.rubric or ())]}


#: A submission's id in a page's query (read by the service's one id parser).
SubmissionQuery = Annotated[int, Query(ge=1, le=MAX_ID), checked_id("submission")]


def form_text(form: FormData, name: str, limit: int = marks.TEXT_CHARS) -> str:
    """A text field of a form, cleaned, at most ``limit`` characters (else 422 naming it)."""
    value = form.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, "service.malformed", fields=name)
    text = clean(value or "", limit * 2)
    if len(text) > limit:
        raise ApiError(422, "service.too_long", field=name, n=str(limit))
    return text


class MarkForm(NamedTuple):
    """A mark's form as the answer's page and the moderation page post it."""

    question: str
    submission: int
    #: The version of the mark the page showed (0: none): the save is compare-and-set from it.
    version: int
    rubric: list[str]
    comment: str


def mark_form(form: FormData) -> MarkForm:
    """The fields of a mark's form, each through its parser: the question, the submission, the version the page
    showed, the rubric items ticked (their ids; the question's rubric checks them) and the comment."""
    return MarkForm(question=form_text(form, "question", 40), submission=form_id(form, "submission"),
                    version=parse_number(form.get("version"), "version", digits=9),
                    rubric=[str(r)[:20] for r in form.getlist("rubric")][:50], comment=form_text(form, "comment"))


# -- the overview, an answer's page and its mark -------------------------------------------------------------------
def _state_words(x: dict[str, Any], who: str, T: dict[str, str]) -> str:
    """An answer's state on the overview: who graded it; for a double-marked one without its mark yet, how many of
    its two marks are in (never their points: the second marker does not see the first's)."""
    if x["mark"] is not None:
        return str(x["mark"].graded_by)
    pair = x["pair"]
    if pair is None:
        return T["not_graded_yet"]
    if pair.complete:
        return T["double_moderation"]
    said = T["double_count"].format(n=len(pair.given))
    return said + " " + T["double_yours"] if pair.of(who) is not None else said


def _overview(state: Service, lang: str, who: str) -> list[dict[str, Any]]:
    standing = Standing(state.engine, state.course)
    counted, pairs = counted_of(state, standing), double_marking.read(state.engine)
    T = UI[lang]
    rows = []
    for a in state.course.assignments:
        for q in a.questions:
            got = answers(state, a, q, standing, counted, pairs)
            waiting = [x for x in got if waits_for(x, who)]
            graded = sum(x["mark"] is not None for x in got)
            rows.append({"assignment": a.id, "id": q.id, "title": q.title_in(lang), "points": fmt(q.points),
                         "total": len(got), "graded": graded,
                         "next": waiting[0]["submission"] if waiting else (got[0]["submission"] if got else None),
                         "next_words": T["grade_next"] if waiting else T["all_graded"] if graded == len(got)
                         else T["double_none_left"],
                         "two_markers": double_marking.is_double(state.course, q.id),
                         "decide": [x["submission"] for x in got
                                    if x["mark"] is None and x["pair"] is not None and x["pair"].complete],
                         "unanswered": sum(unanswered(x) for x in got),
                         "answers": [{"submission": x["submission"], "student": x["student"],
                                      "points": fmt(x["mark"].points) if x["mark"] is not None else "",
                                      "state": _state_words(x, who, T), "answered": x["answered"]} for x in got]})
    return rows


@router.get("/grading")
async def grading(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    lang = language(request, state.course)
    rows = await run_in_threadpool(_overview, state, lang, signed.caller.who)
    return render(request, state, "grading", signed, title=UI[lang]["grading"], questions=rows,
                  blind=state.course.service.blind_grading, instructor=signed.caller.instructor,
                  unanswered=sum(r["unanswered"] for r in rows),
                  threshold=fmt(state.course.service.double_marking.threshold))


def _next_waiting(got: list[dict[str, Any]], at: int, who: str) -> int | None:
    """The first answer after ``at`` (going round) that waits for ``who`` (:func:`waits_for`)."""
    return next((x["submission"] for x in got[at + 1:] + got[:at] if waits_for(x, who)), None)


def _double_view(state: Service, this: dict[str, Any], question: Any, who: str, lang: str) -> tuple[Any, Any, Any]:
    """(what the page says of a double-marked answer, the mark its form starts from, that mark's version): the slot
    ``who`` marks (None: nothing for them), and, once the mark that counts is there, both marks. Until then the page
    shows ``who`` their own mark only, never the other's."""
    mark, pair = this["mark"], this["pair"]
    slot = pair.slot_for(who) if mark is None else None
    own = pair.slot(slot) if slot is not None else None
    said = {"slot": slot, "count": len(pair.given), "decided": mark is not None,
            "moderation": mark is None and pair.complete,
            "marks": [marker_view(m, question, lang, state) for m in pair.given] if mark is not None else []}
    return said, (mark if mark is not None else own), (own.version if own is not None else 0)


def _answer_page(state: Service, question_id: str, submission: int, lang: str, who: str = "") -> dict[str, Any]:
    assignment, question, got, at = locate(state, question_id, submission)
    this = got[at]
    two_markers = None
    if this["pair"] is not None:
        two_markers, mark, version = _double_view(state, this, question, who, lang)
    else:
        mark = this["mark"]
        version = mark.version if mark is not None else 0
    ticked = set(mark.rubric or ()) if mark is not None else set()
    return {"assignment": assignment.id, "question": question.id, "title": question.title_in(lang),
            "points": fmt(question.points), "submission": submission, "student": this["student"],
            "answer": this["answer"], "answered": this["answered"], "version": version,
            "given": fmt(mark.points) if mark is not None else None,
            "comment": mark.comment if mark is not None else "",
            "graded_by": mark.graded_by if mark is not None else "",
            "graded_at": local_text(mark.graded_at, state.course) if mark is not None else "",
            "rubric": [{"id": i.id, "points": fmt(i.points), "text": i.text_in(lang), "ticked": i.id in ticked}
                       for i in question.rubric],
            "previous": got[at - 1]["submission"] if at > 0 else None,
            "next": got[at + 1]["submission"] if at + 1 < len(got) else None,
            "next_waiting": _next_waiting(got, at, who), "position": at + 1, "total": len(got),
            "comments": marks.earlier_comments(state.engine, question.id), "two_markers": two_markers,
            "model": markdown_html(model_answer(str(state.course.root), assignment.id, question.id))}


@router.get("/grading/answer")
async def answer(request: Request, signed: StaffPage, state: ServiceDep, question: str = "", *,
                 submission: SubmissionQuery) -> Response:
    lang = language(request, state.course)
    page = await run_in_threadpool(_answer_page, state, question[:40], submission, lang, signed.caller.who)
    return render(request, state, "grading_answer", signed, title=f"{UI[lang]['grading']} · {page['question']}",
                  a=page, blind=state.course.service.blind_grading, instructor=signed.caller.instructor)


def _save_mark(state: Service, who: str, question_id: str, submission: int, rubric: list[str], comment: str,
               version: int) -> tuple[Any, Any, int | None]:
    """Save the mark of one counted answer: (the mark saved, its question, the next answer waiting)."""
    assignment, question, got, at = locate(state, question_id, submission)
    this = got[at]
    try:
        saved = marks.save_mark(state.engine, state.course, student=this["student"], assignment=assignment.id,
                                question=question.id, answer_sha=this["sha"], rubric=rubric, comment=comment,
                                who=who, version=version, also=mail.on_mark(state.course))   # (its mail, if any)
    except ValueError as exc:
        raise ApiError(422, "service.malformed", fields=f"rubric: {str(exc)[:200]}") from None
    audit.note(state.engine, who, "mark.save", this["student"],
               f"{question.id} submission {submission}: {fmt(saved.points)} ({', '.join(saved.rubric) or '-'})")
    score_history.note(state.engine, state.course, [(this["student"], assignment.id)], why="manual", who=who,
                       detail=f"{question.id}: {fmt(saved.points)}")
    return saved, question, _next_waiting(got, at, who)


def _save_double(state: Service, who: str, question_id: str, submission: int, marker: int, rubric: list[str],
                 comment: str, version: int, lang: str) -> tuple[str, int | None]:
    """Save ``who``'s mark in slot ``marker`` of a double-marked answer: (what the page says, the next answer
    waiting for them). Where it is the second mark, the page says whether the two agree (the mark that counts, their
    mean, is saved then) or an instructor decides."""
    assignment, question, got, at = locate(state, question_id, submission)
    this = got[at]
    try:
        saved, made = double_marking.save(state.engine, state.course, student=this["student"],
                                          assignment=assignment.id, question=question.id, answer_sha=this["sha"],
                                          marker=marker, rubric=rubric, comment=comment, who=who, version=version,
                                          also=mail.on_mark(state.course))
    except ValueError as exc:
        raise ApiError(422, "service.malformed", fields=f"rubric: {str(exc)[:200]}") from None
    T = UI[lang]
    said = T["double_saved"].format(points=fmt(saved.points), max=fmt(question.points), n=saved.marker)
    pair = double_marking.pair_of(state.engine, this["student"], assignment.id, question.id, this["sha"])
    if made is not None:
        said += " " + T["double_agreed"].format(points=fmt(made.points))
    elif pair.complete:
        said += " " + T["double_differ"].format(threshold=fmt(state.course.service.double_marking.threshold))
    return said, _next_waiting(got, at, who)


async def _refused(request: Request, signed: Signed, state: Service, question: str, submission: int, said: str
                   ) -> Response:
    """The answer's page again, with why the save was refused (409) above the form."""
    lang = language(request, state.course)
    page = await run_in_threadpool(_answer_page, state, question, submission, lang, signed.caller.who)
    return render(request, state, "grading_answer", signed, status=409, a=page, notice=said,
                  title=f"{UI[lang]['grading']} · {page['question']}", blind=state.course.service.blind_grading,
                  instructor=signed.caller.instructor)


@router.post("/grading/answer")
@closes_form
async def save(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    lang = language(request, state.course)
    question, submission, version, rubric, comment = mark_form(form)
    T = UI[lang]
    if double_marking.is_double(state.course, question):
        marker = parse_number(form.get("marker"), "marker", least=1, digits=1)
        mine = {"mine": rubric_words(question_of(state, question)[1], rubric, lang), "comment": comment or "—"}
        try:
            said, waiting = await run_in_threadpool(_save_double, state, signed.caller.who, question, submission,
                                                    marker, rubric, comment, version, lang)
        except marks.Conflict:            # (who saved it is not said: the other marker's mark stays unseen)
            return await _refused(request, signed, state, question, submission,
                                  T["double_conflict"].format(n=marker, **mine))
        except double_marking.Closed:
            return await _refused(request, signed, state, question, submission, T["double_closed"].format(**mine))
        except double_marking.SameMarker:
            return await _refused(request, signed, state, question, submission, T["double_same"].format(**mine))
    else:
        try:
            saved, asked, waiting = await run_in_threadpool(_save_mark, state, signed.caller.who, question,
                                                            submission, rubric, comment, version)
        except marks.Conflict as conflict:
            current = conflict.current
            return await _refused(request, signed, state, question, submission, T["mark_conflict"].format(
                who=current.graded_by if current is not None else "?",
                when=local_text(current.graded_at, state.course) if current is not None else "?",
                mine=rubric_words(question_of(state, question)[1], rubric, lang), comment=comment or "—"))
        said = T["mark_saved"].format(points=fmt(saved.points), max=fmt(asked.points))
    then = waiting if form.get("then") == "next" else submission
    target = (f"/dashboard/grading/answer?question={question}&submission={then}" if then is not None
              else "/dashboard/grading")
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{base_path(request)}{target}{joiner}notice={quote(said)}", status_code=303)
