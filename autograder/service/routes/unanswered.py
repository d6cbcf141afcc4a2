"""Every unanswered written answer given 0 in one action: those still the template's text (or empty) that no one
has marked, listed to confirm first.

The dashboard's list goes question by question, at most :data:`UNANSWERED_MOST` answers at a time (the form carries
their numbers; more are listed in turns). Each is saved as any mark is (:mod:`autograder.service.marks`:
compare-and-set from "no mark", the audit, the score history), with a comment the student reads saying the answer
was unanswered. What it trusts: of the form, only the numbers, each through the service's id parser; an answer that
changed or was marked since the list was shown is left out, not given 0."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from autograder.service import audit, double_marking, mail, marks
from autograder.service import history as score_history
from autograder.service.auth import StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import ApiError, base_path, parse_id
from autograder.service.routes.grading import answers, counted_of, question_of, unanswered
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, render

router = APIRouter(prefix="/dashboard", include_in_schema=False)


#: The most answers one action gives 0: the form carries their submissions' numbers (at most 7 digits and a space
#: each, question by question), and a page's form is at most guard.SMALL_BODY (16 KiB). More are listed in turns.
UNANSWERED_MOST = 1500


def _unanswered_list(state: Service, lang: str) -> tuple[list[dict[str, Any]], int]:
    """Per question, the counted answers that hold no answer and no one has marked (:func:`unanswered`), the first
    :data:`UNANSWERED_MOST` of them; and how many there are in all."""
    standing = Standing(state.engine, state.course)
    counted, pairs = counted_of(state, standing), double_marking.read(state.engine)
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
    counted, pairs = counted_of(state, standing), double_marking.read(state.engine)
    comment, zeroed, left = _unanswered_comment(state), [], 0
    for question_id, submissions in chosen.items():
        assignment, question = question_of(state, question_id)
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

