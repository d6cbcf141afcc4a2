"""Hand grading on the dashboard: the written answers of the results that count, one after another with the
question's rubric beside each (several graders at once, none overwriting another: :mod:`autograder.service.marks`),
and the staff's adjustment of an exercise's automatic points, with the reason the student reads.

At class size: every unanswered answer given 0 in one action, from the list shown first (:func:`unanswered_page`);
a double-marked question's two blind marks and an instructor's decision where they differ
(:mod:`autograder.service.double_marking`, :func:`moderation_page`)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from autograder.core.points import fmt
from autograder.service import audit, double_marking, mail, marks, repository
from autograder.service import history as score_history
from autograder.service.auth import InstructorPage, StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import MAX_ID, ApiError, base_path, checked_id, form_id, parse_id, parse_number
from autograder.service.export import Counted, counted_submissions
from autograder.service.richtext import markdown_html
from autograder.service.sessions import Signed
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, local_text, render
from autograder.core.text import clean
from autograder.course.written import answer_grade_id, maximum_of

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _question(state: Service, question: str) -> tuple[Any, Any]:
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


def _counted(state: Service, standing: Standing) -> list[Counted]:
    return counted_submissions(state.engine, state.course.service.counts, standing)


def _overview(state: Service, lang: str, who: str) -> list[dict[str, Any]]:
    standing = Standing(state.engine, state.course)
    counted, pairs = _counted(state, standing), double_marking.read(state.engine)
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


def _locate(state: Service, question_id: str, submission: int) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """(assignment, question, its counted answers, where ``submission``'s is among them), or 404."""
    assignment, question = _question(state, question_id)
    got = answers(state, assignment, question, Standing(state.engine, state.course))
    at = next((i for i, x in enumerate(got) if x["submission"] == submission), None)
    if at is None:
        raise ApiError(404, "service.no_answer", question=question.id, submission=str(submission))
    return assignment, question, got, at


def _next_waiting(got: list[dict[str, Any]], at: int, who: str) -> int | None:
    """The first answer after ``at`` (going round) that waits for ``who`` (:func:`waits_for`)."""
    return next((x["submission"] for x in got[at + 1:] + got[:at] if waits_for(x, who)), None)


def rubric_words(question: Any, ticked: list[str], lang: str) -> str:
    """The items ``ticked`` as the grader read them (their text, never their ids), "—" for none."""
    return "; ".join(i.text_in(lang) for i in question.rubric if i.id in set(ticked)) or "—"


def _marker_view(m: Any, question: Any, lang: str, state: Service) -> dict[str, Any]:
    """One of a double-marked answer's two marks, as a page shows it."""
    return {"marker": m.marker, "who": m.graded_by, "when": local_text(m.graded_at, state.course),
            "points": fmt(m.points), "comment": m.comment,
            "items": [f"{fmt(i.points)}: {i.text_in(lang)}" for i in question.rubric if i.id in (m.rubric or ())]}


def _double_view(state: Service, this: dict[str, Any], question: Any, who: str, lang: str) -> tuple[Any, Any, Any]:
    """(what the page says of a double-marked answer, the mark its form starts from, that mark's version): the slot
    ``who`` marks (None: nothing for them), and, once the mark that counts is there, both marks. Until then the page
    shows ``who`` their own mark only, never the other's."""
    mark, pair = this["mark"], this["pair"]
    slot = pair.slot_for(who) if mark is None else None
    own = pair.slot(slot) if slot is not None else None
    said = {"slot": slot, "count": len(pair.given), "decided": mark is not None,
            "moderation": mark is None and pair.complete,
            "marks": [_marker_view(m, question, lang, state) for m in pair.given] if mark is not None else []}
    return said, (mark if mark is not None else own), (own.version if own is not None else 0)


def _answer_page(state: Service, question_id: str, submission: int, lang: str, who: str = "") -> dict[str, Any]:
    assignment, question, got, at = _locate(state, question_id, submission)
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


#: A submission's id in a page's query (read by the service's one id parser).
SubmissionQuery = Annotated[int, Query(ge=1, le=MAX_ID), checked_id("submission")]


@router.get("/grading/answer")
async def answer(request: Request, signed: StaffPage, state: ServiceDep, question: str = "", *,
                 submission: SubmissionQuery) -> Response:
    lang = language(request, state.course)
    page = await run_in_threadpool(_answer_page, state, question[:40], submission, lang, signed.caller.who)
    return render(request, state, "grading_answer", signed, title=f"{UI[lang]['grading']} · {page['question']}",
                  a=page, blind=state.course.service.blind_grading, instructor=signed.caller.instructor)


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
    assignment, question, got, at = _locate(state, question_id, submission)
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
    question = _form_text(form, "question", 40)
    submission = form_id(form, "submission")
    version = parse_number(form.get("version"), "version", digits=9)
    rubric = [str(r)[:20] for r in form.getlist("rubric")][:50]
    comment = _form_text(form, "comment")
    T = UI[lang]
    if double_marking.is_double(state.course, question):
        marker = parse_number(form.get("marker"), "marker", least=1, digits=1)
        mine = {"mine": rubric_words(_question(state, question)[1], rubric, lang), "comment": comment or "—"}
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
                mine=rubric_words(_question(state, question)[1], rubric, lang), comment=comment or "—"))
        said = T["mark_saved"].format(points=fmt(saved.points), max=fmt(asked.points))
    then = waiting if form.get("then") == "next" else submission
    target = (f"/dashboard/grading/answer?question={question}&submission={then}" if then is not None
              else "/dashboard/grading")
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{base_path(request)}{target}{joiner}notice={quote(said)}", status_code=303)


# -- every unanswered answer given 0 in one action ------------------------------------------------------------------
#: The most answers one action gives 0: the form carries their submissions' numbers (at most 7 digits and a space
#: each, question by question), and a page's form is at most guard.SMALL_BODY (16 KiB). More are listed in turns.
UNANSWERED_MOST = 1500


def _unanswered_list(state: Service, lang: str) -> tuple[list[dict[str, Any]], int]:
    """Per question, the counted answers that hold no answer and no one has marked (:func:`unanswered`), the first
    :data:`UNANSWERED_MOST` of them; and how many there are in all."""
    standing = Standing(state.engine, state.course)
    counted, pairs = _counted(state, standing), double_marking.read(state.engine)
    out, total = [], 0
    for a in state.course.assignments:
        for q in a.questions:
            found = [x for x in answers(state, a, q, standing, counted, pairs) if unanswered(x)]
            shown = found[:max(0, UNANSWERED_MOST - total)]
            total += len(found)
            if shown:
                out.append({"question": q.id, "title": q.title_in(lang),
                            "answers": [{"submission": x["submission"], "student": x["student"],
                                         "text": x["answer"].strip()[:200]} for x in shown],
                            "ids": " ".join(str(x["submission"]) for x in shown)})
    return out, total


@router.get("/grading/unanswered")
async def unanswered_page(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """the written answers that are still the template's text or empty and that no one has marked, listed to confirm
    before they are all given 0"""
    lang = language(request, state.course)
    groups, total = await run_in_threadpool(_unanswered_list, state, lang)
    return render(request, state, "grading_unanswered", signed, title=UI[lang]["unanswered"], groups=groups,
                  n=sum(len(g["answers"]) for g in groups), total=total, blind=state.course.service.blind_grading,
                  comment=_unanswered_comment(state))


def _unanswered_comment(state: Service) -> str:
    """The comment a zeroed answer carries, in the course's language (the student reads it)."""
    lang = state.course.language.value
    return UI[lang if lang in UI else "zh"]["unanswered_comment"]


def _zero_unanswered(state: Service, who: str, chosen: dict[str, set[int]]) -> tuple[int, int]:
    """Give 0 to each answer of ``chosen`` (question: submissions, as the list showed them) that is still unanswered
    and unmarked, each as any mark is saved (compare-and-set from "no mark", the audit, the score history): (how
    many were given 0, how many were left out). An answer that changed meanwhile is another submission, no longer
    the one listed: it is left out, as is one someone marked meanwhile."""
    standing = Standing(state.engine, state.course)
    counted, pairs = _counted(state, standing), double_marking.read(state.engine)
    comment, zeroed, left = _unanswered_comment(state), [], 0
    for question_id, submissions in chosen.items():
        assignment, question = _question(state, question_id)
        now = {x["submission"]: x for x in answers(state, assignment, question, standing, counted, pairs)}
        for submission in sorted(submissions):
            x = now.get(submission)
            if x is None or not unanswered(x):
                left += 1
                continue
            try:
                marks.save_mark(state.engine, state.course, student=x["student"], assignment=assignment.id,
                                question=question.id, answer_sha=x["sha"], rubric=[], comment=comment, who=who,
                                version=0, points=0.0, also=mail.on_mark(state.course))
            except marks.Conflict:
                left += 1
                continue
            audit.note(state.engine, who, "mark.save", x["student"],
                       f"{question.id} submission {submission}: 0 (unanswered)")
            zeroed.append((x["student"], assignment.id))
    score_history.note(state.engine, state.course, zeroed, why="manual", who=who, detail="unanswered: 0")
    return len(zeroed), left


@router.post("/grading/unanswered")
@closes_form
async def zero_unanswered(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    """give 0, with a comment saying the answer was unanswered, to each answer the confirmation page listed that is
    still unanswered and unmarked (each saved as any mark: compare-and-set, the audit, the score history)"""
    form = await form_checked(request, signed)
    chosen: dict[str, set[int]] = {}
    for value in form.getlist("answers")[:200]:       # one field a question: "2.Q1 12 15 19"
        question, _, ids = (value if isinstance(value, str) else "").strip().partition(" ")
        if not ids.split():
            raise ApiError(422, "service.malformed", fields="answers")
        chosen.setdefault(question[:40], set()).update(parse_id(one, "answers") for one in ids.split())
    if sum(map(len, chosen.values())) > UNANSWERED_MOST:
        raise ApiError(422, "service.too_long", field="answers", n=str(UNANSWERED_MOST))
    zeroed, left = await run_in_threadpool(_zero_unanswered, state, signed.caller.who, chosen)
    said = UI[language(request, state.course)]["unanswered_done"].format(n=zeroed, left=left)
    return RedirectResponse(f"{base_path(request)}/dashboard/grading?notice={quote(said)}", status_code=303)


# -- an instructor's decision where two marks differ -----------------------------------------------------------------
def _double_answer(state: Service, question_id: str, submission: int) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """:func:`_locate` of an answer whose two marks are in: 404 where the question is not double-marked, 409 where
    the answer has fewer than two marks."""
    assignment, question, got, at = _locate(state, question_id, submission)
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
            "marks": [_marker_view(m, question, lang, state) for m in pair.given],
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
    question = _form_text(form, "question", 40)
    submission = form_id(form, "submission")
    version = parse_number(form.get("version"), "version", digits=9)
    rubric = [str(r)[:20] for r in form.getlist("rubric")][:50]
    comment = _form_text(form, "comment")
    typed = _form_text(form, "points", 30).strip()
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
            mine=rubric_words(_question(state, question)[1], rubric, lang), comment=comment or "—")
        return render(request, state, "grading_moderate", signed, status=409, a=page, notice=said,
                      title=f"{T['moderate']} · {page['question']}", blind=state.course.service.blind_grading)
    said = T["moderated"].format(points=fmt(saved.points), max=fmt(asked.points))
    target = (f"/dashboard/grading/moderate?question={quote(question)}&submission={then}" if then is not None
              else "/dashboard/grading")
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{base_path(request)}{target}{joiner}notice={quote(said)}", status_code=303)


# -- adjusting an exercise's automatic points ------------------------------------------------------------------------
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
