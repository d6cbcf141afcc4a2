"""The staff's item analytics of one assignment (:mod:`autograder.service.analytics`): the page, with the
histogram of the assignment's totals drawn as the kit's own SVG, and its tables as CSV."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from autograder.service import analytics as A
from autograder.service.auth import StaffPage
from autograder.service.context import Service, ServiceDep
from autograder.service.errors import ApiError
from autograder.service.ui import UI, language, render

router = APIRouter(prefix="/dashboard", include_in_schema=False)

#: The CSV downloads are no page to keep: never cached, never guessed as HTML.
CSV_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def chosen(state: Service, assignment: str) -> str:
    """The assignment asked for (the course's first where none is): an id course.yml does not have is refused,
    naming it and the ones it has."""
    ids: list[str] = list(state.assignments)
    if not assignment and ids:
        return ids[0]
    if assignment not in ids:
        raise ApiError(404, "service.unknown_assignment", assignment=assignment[:100], known=", ".join(ids))
    return assignment


@router.get("/analytics")
async def analytics(request: Request, signed: StaffPage, state: ServiceDep, assignment: str = "") -> Response:
    """one assignment's item analytics: per exercise the pass rate, mean and distribution, difficulty,
    discrimination (corrected point-biserial), attempts and time to full marks, the most common mistakes; per
    section; the histogram of the assignment's totals"""
    lang = language(request, state.course)
    T = UI[lang]
    picked = chosen(state, assignment)
    found = await run_in_threadpool(A.read, state.engine, state.course, picked)
    exercises = {e.id: e for e in state.assignments[picked].exercises}
    titles = {e.exercise: exercises[e.exercise].title_in(lang) if e.exercise in exercises else ""
              for e in found.exercises}
    histogram = Markup(A.histogram_svg(found, title=T["analytics_histogram"].format(assignment=picked),
                                       xlabel=T["analytics_hist_x"], ylabel=T["analytics_hist_y"]))
    return render(request, state, "analytics", signed, title=T["analytics"] + " · " + picked, a=found,
                  titles=titles, histogram=histogram, assignment_ids=list(state.assignments), tables=A.TABLES)


@router.get("/analytics.csv")
async def analytics_csv(request: Request, signed: StaffPage, state: ServiceDep, assignment: str = "",
                        table: str = "exercises") -> Response:
    """the analytics page's tables as CSV, one per download: `exercises` (the default), `sections`, `totals`"""
    picked = chosen(state, assignment)
    if table not in A.TABLES:
        raise ApiError(422, "service.malformed", fields=f"table: one of {', '.join(A.TABLES)}")
    found = await run_in_threadpool(A.read, state.engine, state.course, picked)
    return Response(A.table_csv(found, table), media_type="text/csv; charset=utf-8",
                    headers={**CSV_HEADERS,
                             "Content-Disposition": f'attachment; filename="analytics-{picked}-{table}.csv"'})
