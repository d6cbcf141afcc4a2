"""The instructor's dashboard: every submission (filtered, sorted), the class report, a student's history, an
exercise's explanation, grading again, and extensions (grant, replace, revoke)."""
from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from autograder.course.clock import time_or_after
from autograder.core.errors import AutograderError
from autograder.service import audit
from autograder.service import history as score_history
from autograder.service import queue as Q
from autograder.service import repository
from autograder.service import reviews
from autograder.service.auth import StaffPage, form_checked
from autograder.service.context import Service, ServiceDep
from autograder.service.tables import granted_extensions, utcnow
from autograder.service.errors import MAX_ID, ApiError, checked_id, parse_id
from autograder.service.explain_job import NOTEBOOK, REQUEST
from autograder.service.export import counted
from autograder.service.listing import listing, score_changes
from autograder.service.standing import Standing
from autograder.service.ui import UI, closes_form, language, local_text, render, to_dashboard

router = APIRouter(prefix="/dashboard", include_in_schema=False)

STATES = ("queued", "running", "done", "failed")


@router.get("")
async def dashboard(request: Request, signed: StaffPage, state: ServiceDep, assignment: str = "", student: str = "",
                    status: str = "", sort: str = "time") -> Response:
    course = state.course
    lang = language(request, course)
    filters = {"assignment": assignment if assignment in state.assignments else "", "student": student[:200],
               "status": status if status in STATES else "", "sort": "score" if sort == "score" else "time"}
    subs = await run_in_threadpool(lambda: listing(state, signed.caller, lang, student=filters["student"] or None,
                                                   assignment=filters["assignment"] or None,
                                                   status=filters["status"] or None, sort=filters["sort"],
                                                   feedback=False))
    report = await run_in_threadpool(report_html, state, lang)
    grants = await run_in_threadpool(extensions, state)
    waiting = await run_in_threadpool(reviews.open_count, state.engine)
    return render(request, state, "dashboard", signed, title=UI[lang]["dashboard"], submissions=subs,
                  total=len(subs), report=report, f=filters, assignment_ids=list(state.assignments), states=STATES,
                  extensions=grants, tz=course.timezone or "UTC", open_reviews=waiting)


def extensions(state: Service) -> list[dict[str, Any]]:
    return [{"student": e.student, "assignment": e.assignment, "due": local_text(e.due, state.course),
             "reason": e.reason} for e in granted_extensions(state.engine)]


def report_html(state: Service, lang: str) -> Markup:
    from autograder.reports.class_report import class_report_parts  # noqa: PLC0415 - loads yaml

    results = counted(state.engine, state.course.service.counts, Standing(state.engine, state.course))
    return Markup("\n".join(class_report_parts(results, state.course, lang, submissions=False, title=False)))


@router.get("/report")
async def report(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    lang = language(request, state.course)
    html = await run_in_threadpool(report_html, state, lang)
    return HTMLResponse(f"<h2>{Markup.escape(UI[lang]['report'])}</h2>{html}")


@router.get("/student")
async def history(request: Request, signed: StaffPage, state: ServiceDep, id: str = "") -> Response:
    student = id[:200]          # a query parameter: a student id may hold any character, "/" too
    lang = language(request, state.course)
    subs = await run_in_threadpool(lambda: listing(state, signed.caller, lang, student=student, open_latest=True))
    changes = await run_in_threadpool(score_changes, state, lang, student)
    return render(request, state, "history", signed, title=UI[lang]["history"].format(student=student),
                  student=student, submissions=subs, changes=changes)


@router.get("/explain")
async def explain(request: Request, signed: StaffPage, state: ServiceDep,
                  submission: Annotated[int, Query(ge=1, le=MAX_ID), checked_id("submission")],
                  exercise: str = "") -> Response:
    """`autograder explain` of one stored submission and exercise, in a process of its own (never this one's)."""
    lang = language(request, state.course)
    row = await run_in_threadpool(repository.graded_notebook, state.engine, submission)
    if row is None:
        raise ApiError(404, "service.no_submission", submission=str(submission))
    assignments = state.assignments
    known = {e.id for e in assignments[row.assignment].exercises} if row.assignment in assignments else set()
    if exercise not in known:
        raise ApiError(404, "service.no_exercise", assignment=row.assignment, exercise=exercise[:20])
    if state.explaining.locked():
        raise ApiError(503, "service.explain_busy", retry_after=30, seconds=30)
    async with state.explaining:
        lines = await run_in_threadpool(explain_stored, state, bytes(row.data), dict(row.result), exercise, lang)
    return render(request, state, "explain", signed, lines=lines, student=row.student, exercise=exercise,
                  submission=submission, title=UI[lang]["explanation"].format(student=row.student,
                                                                              exercise=exercise))


def explain_stored(state: Service, data: bytes, result: dict[str, Any], exercise: str,
                   lang: str) -> list[tuple[str, str]]:
    """The explanation's lines from ``python -m autograder.service.explain_job`` (a private folder holds the
    notebook and its result; the process is bounded by the course's submission_seconds)."""
    course = state.course
    with tempfile.TemporaryDirectory(prefix="autograder-explain-") as tmp:
        (Path(tmp) / NOTEBOOK).write_bytes(data)
        (Path(tmp) / REQUEST).write_text(json.dumps({"result": result, "exercise": exercise, "language": lang}),
                                         encoding="utf-8")
        env = dict(os.environ, AUTOGRADER_COURSE=str(course.root / "course.yml"))
        try:
            done = subprocess.run([sys.executable, "-m", "autograder.service.explain_job", tmp], env=env,
                                  capture_output=True, timeout=course.limits.submission_seconds + 60,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ApiError(504, "service.explain_failed", why=f"> {course.limits.submission_seconds + 60:g} s") \
                from None
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ApiError(500 if done.returncode != 2 else 409, "service.explain_failed",
                       why=(why[-1] if why else f"exit {done.returncode}")[:300])
    return [(str(kind), str(line)) for kind, line in json.loads(done.stdout)]


@router.post("/requeue")
@closes_form
async def requeue(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    submission, assignment = str(form.get("submission") or "").strip(), str(form.get("assignment") or "")
    if submission:
        chosen: dict[str, Any] = {"submission_id": parse_id(submission, "submission")}
    elif assignment in state.assignments:
        chosen = {"assignment": assignment}
    else:
        raise ApiError(422, "service.malformed", fields="submission, assignment")

    def again() -> list[int]:
        found = repository.submission_ids(state.engine, **chosen)
        Q.requeue(state.engine, found, behind=state.course.service.queued_per_student or 0)   # behind new uploads
        audit.note(state.engine, signed.caller.who, "regrade", detail=f"{len(found)} submission(s): "
                   + ", ".join(f"{k}={v}" for k, v in chosen.items()))
        return found

    done = await run_in_threadpool(again)
    return to_dashboard(request, UI[language(request, state.course)]["queued_again"].format(n=len(done)))


@router.post("/extensions")
@closes_form
async def grant(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    from autograder.grading.deadlines import Deadlines  # noqa: PLC0415 - loads yaml

    course = state.course
    form = await form_checked(request, signed)
    student, assignment = str(form.get("student") or "").strip(), str(form.get("assignment") or "")
    if not student or len(student) > 200 or not student.isprintable():
        raise ApiError(422, "service.bad_extension", why="student: 1 to 200 printable characters")
    if assignment not in state.assignments:
        raise ApiError(422, "service.bad_extension", why=f"assignment: one of {', '.join(state.assignments)}")
    await run_in_threadpool(on_roster, state, student)
    try:
        # A time, or a duration past the assignment's due date (3d: three days more).
        base = course.deadline_of(assignment)[0] or utcnow()
        due = time_or_after(str(form.get("due") or ""), base, where="due", default_tz=course.timezone or "UTC")
    except AutograderError as exc:
        raise ApiError(422, "service.bad_extension", why=str(exc)[:300]) from None
    await run_in_threadpool(lambda: repository.grant_extension(
        state.engine, student=student, assignment=assignment, due=due, reason=str(form.get("reason") or "")[:500],
        granted_by=signed.caller.who, zone=course.zone))
    await run_in_threadpool(lambda: score_history.note(state.engine, course, [(student, assignment)], why="extension",
                                                 who=signed.caller.who))
    lang = language(request, course)
    said = UI[lang]["granted"].format(student=student, assignment=assignment, due=local_text(due, course))
    in_file = await run_in_threadpool(Deadlines.load, course)
    if any((e.student, e.assignment) == (student, assignment) for e in in_file.extensions):
        said += UI[lang]["file_wins"].format(file=in_file.source)
    return to_dashboard(request, said)


def on_roster(state: Service, student: str) -> None:
    """An extension is for a student of the class: one with a token (the roster) or a submission; a typo is
    refused naming the closest ids. (A course on JupyterHub with neither yet takes any id.)"""
    known = repository.known_students(state.engine)
    if not known or student in known:
        return
    close = difflib.get_close_matches(student, sorted(known), n=3, cutoff=0.6)
    raise ApiError(422, "service.not_on_roster", student=student[:100], close=", ".join(close) or "—")


@router.post("/extensions/revoke")
@closes_form
async def revoke(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    student, assignment = str(form.get("student") or "")[:200], str(form.get("assignment") or "")[:100]
    n = await run_in_threadpool(lambda: repository.revoke_extensions(state.engine, student, assignment,
                                                                     by=signed.caller.who))
    await run_in_threadpool(lambda: score_history.note(state.engine, state.course, [(student, assignment)],
                                                 why="extension", who=signed.caller.who))
    return to_dashboard(request, UI[language(request, state.course)]["revoked"].format(
        student=student, assignment=assignment, n=n))
