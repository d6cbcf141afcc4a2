"""Submissions as the pages list them: each with its state, its place in the queue, and its result as the
late policy makes it now, seen as the caller may see it."""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from autograder.core.points import fmt
from autograder.service import history, people
from autograder.service import queue as Q
from autograder.service import repository
from autograder.service.context import Service
from autograder.service.standing import Standing
from autograder.service.tokens import Caller
from autograder.service.ui import UI, local_text
from autograder.service.views import policy_view
from autograder.course.written import maximum_of


def listing(state: Service, who: Caller, lang: str, *, student: str | None = None, assignment: str | None = None,
            status: str | None = None, sort: str = "time", feedback: bool = True, open_latest: bool = False,
            standing: Standing | None = None) -> list[dict[str, Any]]:
    """The page rows of a student's own submissions, or (staff) everyone's, filtered and sorted."""
    from autograder.reports.feedback import feedback_parts  # noqa: PLC0415 - loads yaml

    course = state.course
    rows = repository.latest_rows(state.engine, student=(student or None) if who.staff else who.who,
                                  assignment=assignment, state=status, by_score=sort == "score")
    ahead = Q.positions(state.engine)               # (the order workers take them in, as the API says it)
    standing = standing or Standing(state.engine, course)     # the late policy as it is now: an extension since
    names = people.names(state.engine) if who.staff else {}     # (the staff see the roster's names)
    out = []
    for r in rows:
        shown = None
        now = standing.result(r.result) if r.result is not None else None
        if feedback and now is not None:
            view = policy_view(now, who, course, r.assignment, standing.due(r.student, r.assignment))
            shown = Markup("\n".join(feedback_parts(view, course, lang)))   # escaped by feedback_parts
        late = isinstance((now or {}).get("late"), dict) and (now or {})["late"].get("late") is True
        points = now.get("points") if now is not None else None
        most = maximum_of(course, now) if now is not None else None      # the assignment's (its written answers')
        out.append({"id": r.id, "student": r.student, "name": names.get(r.student, ""), "assignment": r.assignment,
                    "received_iso": r.received_at.isoformat(),
                    "received_text": local_text(r.received_at, course),
                    "state": r.state if r.state in ("queued", "running", "done", "failed") else "unknown",
                    "position": ahead.get(r.job), "points": fmt(points) if points is not None else None,
                    "score": float(points) if points is not None else None,
                    "max_points": fmt(most.points) if most is not None else None,
                    "score_text": most.fraction(float(points or 0.0), lang) if most is not None else None,
                    "late": late,
                    "feedback": shown, "open": False,
                    # (the staff's: an explanation of each exercise that lost points, hidden inputs and all)
                    "lost": [e["exercise"] for e in (now or {}).get("exercises") or [] if who.staff
                             and float(e.get("points", 0)) < float(e.get("max_points", 0)) - 1e-9]})
    if sort == "score":         # (by the points as they are now, not as they were stored)
        out.sort(key=lambda row: (row["score"] is None, -(row["score"] or 0.0), -row["id"]))
    if open_latest and out:
        out[0]["open"] = True
    return out


def score_changes(state: Service, lang: str, student: str | None = None) -> list[dict[str, Any]]:
    """The counted scores' history as the pages show it (one student's where ``student`` is given)."""
    course = state.course
    why = {"graded": UI[lang]["why_graded"], "regrade": UI[lang]["why_regrade"],
           "extension": UI[lang]["why_extension"], "late_policy": UI[lang]["why_late_policy"],
           "manual": UI[lang]["why_manual"], "review": UI[lang]["why_review"]}
    return [{"at": local_text(r.at, course), "student": r.student, "assignment": r.assignment, "why": r.why,
             "why_text": why.get(r.why, r.why), "who": UI[lang]["grader"] if r.who == history.WORKER else r.who,
             "old": None if r.old_points is None else fmt(r.old_points),
             "new": "—" if r.new_points is None else fmt(r.new_points),
             "max": "—" if r.max_points is None else fmt(r.max_points),
             # (the written answers' points that still waited: in the maximum, not yet in the score)
             "waiting": _beside(UI[lang]["history_waiting"].format(points=fmt(r.waiting_points)), lang)
             if r.waiting_points else ""}
            for r in history.changes(state.engine, student=student)]


def _beside(said: str, lang: str) -> str:
    """``said`` in brackets after what it is said of, as each language writes them."""
    return f"（{said}）" if lang == "zh" else f" ({said})"
