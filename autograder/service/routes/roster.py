"""The staff's pages about people: the roster with each student's state per assignment (who has not submitted:
a list to export and to mail), the tokens (listed, never their secret; revoked or issued again by an instructor),
and the record of what the staff did."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from autograder.core.errors import AutograderError
from autograder.service import audit, class_list, tokens
from autograder.service.auth import InstructorPage, StaffPage, form_checked
from autograder.service.context import ServiceDep
from autograder.service.errors import ApiError, form_id
from autograder.service.ui import UI, closes_form, language, local_text, render, to_dashboard
from autograder.core.text import csv_rows

router = APIRouter(prefix="/dashboard", include_in_schema=False)

#: The CSV downloads are no page to keep: never cached, never guessed as HTML.
CSV_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _choice(value: str, options: tuple[str, ...] | list[str]) -> str:
    return value if value in options else ""


@router.get("/roster")
async def roster(request: Request, signed: StaffPage, state: ServiceDep, assignment: str = "",
                 show: str = "") -> Response:
    lang = language(request, state.course)
    ids = list(state.assignments)
    chosen = {"assignment": _choice(assignment, ids), "show": _choice(show, class_list.STATES)}
    members = await run_in_threadpool(class_list.class_list, state)
    on_roster = sum(m.on_roster for m in members)
    shown = class_list.chosen(members, chosen["assignment"] or None, chosen["show"] or None)
    return render(request, state, "roster", signed, title=UI[lang]["roster"], members=shown, f=chosen,
                  assignment_ids=ids, states=class_list.STATES, on_roster=on_roster)


@router.get("/roster.csv")
async def roster_csv(request: Request, signed: StaffPage, state: ServiceDep, assignment: str = "",
                     show: str = "") -> Response:
    ids = list(state.assignments)
    members = await run_in_threadpool(class_list.class_list, state)
    shown = class_list.chosen(members, _choice(assignment, ids) or None, _choice(show, class_list.STATES) or None)
    name = "roster" + (f"-{assignment}-{show}" if assignment in ids and show in class_list.STATES else "")
    return Response(class_list.class_csv(shown, ids), media_type="text/csv; charset=utf-8",
                    headers={**CSV_HEADERS, "Content-Disposition": f'attachment; filename="{name}.csv"'})


@router.post("/roster/remove")
@closes_form
async def remove(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    student = str(form.get("student") or "")[:200]
    gone, n = await run_in_threadpool(lambda: tokens.remove_student(state.engine, student, by=signed.caller.who))
    if not gone:
        raise ApiError(404, "service.not_on_roster", student=student[:100], close="—")
    return to_dashboard(request, UI[language(request, state.course)]["removed"].format(student=student, n=n),
                        "roster")


def _token_rows(state: Any, lang: str) -> list[dict[str, Any]]:
    roles = {"student": UI[lang]["role_student"], "ta": UI[lang]["role_ta"], "instructor": UI[lang]["role_instructor"]}
    states = {"live": UI[lang]["live"], "revoked": UI[lang]["revoked_state"], "expired": UI[lang]["expired"]}
    return [{"id": t.id, "who": t.who, "name": t.name, "role": roles.get(t.role, t.role),
             "state": t.state, "state_text": states[t.state], "issued": local_text(t.created_at, state.course),
             "issued_by": t.issued_by, "expires": local_text(t.expires_at, state.course) if t.expires_at else ""}
            for t in tokens.listing(state.engine)]


@router.get("/tokens")
async def token_list(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    lang = language(request, state.course)
    rows = await run_in_threadpool(_token_rows, state, lang)
    return render(request, state, "tokens", signed, title=UI[lang]["tokens"], tokens=rows)


@router.post("/tokens/revoke")
@closes_form
async def revoke(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    number = form_id(form, "token")
    n = await run_in_threadpool(lambda: tokens.revoke(state.engine, token_id=number, by=signed.caller.who))
    return to_dashboard(request, UI[language(request, state.course)]["tokens_revoked"].format(n=n), "tokens")


@router.post("/tokens/reissue")
@closes_form
async def reissue(request: Request, signed: InstructorPage, state: ServiceDep) -> Response:
    form = await form_checked(request, signed)
    who = str(form.get("who") or "")[:200]
    try:
        _role, token = await run_in_threadpool(lambda: tokens.reissue(state.engine, who, by=signed.caller.who))
    except AutograderError as exc:
        raise ApiError(422, "service.malformed", fields=f"who: {exc.message[:200]}") from None
    lang = language(request, state.course)
    response = render(request, state, "new_token", signed, title=UI[lang]["tokens"], holder=who, token=token)
    response.headers["Cache-Control"] = "no-store"          # shown once: never kept by the browser or a proxy
    return response


@router.get("/actions")
async def actions(request: Request, signed: StaffPage, state: ServiceDep, student: str = "") -> Response:
    lang = language(request, state.course)
    rows = await run_in_threadpool(lambda: audit.entries(state.engine, target=student[:200] or None))
    shown = [{"at": local_text(r.at, state.course), "who": r.who, "action": r.action, "target": r.target,
              "detail": r.detail} for r in rows]
    return render(request, state, "actions", signed, title=UI[lang]["actions"], actions=shown, student=student[:200])


@router.get("/actions.csv")
async def actions_csv(request: Request, signed: StaffPage, state: ServiceDep) -> Response:
    rows = await run_in_threadpool(lambda: audit.entries(state.engine, limit=100_000))
    text = csv_rows([["at", "who", "action", "target", "detail"]],
                    [[r.at.isoformat(), r.who, r.action, r.target, r.detail] for r in rows])
    return Response(text, media_type="text/csv; charset=utf-8",
                    headers={**CSV_HEADERS, "Content-Disposition": 'attachment; filename="actions.csv"'})
