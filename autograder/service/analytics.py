"""Item analytics of one assignment, for the staff's page ``/dashboard/analytics`` and its CSV tables.

Per exercise: the pass rate (full marks), the mean points and their distribution, the difficulty (mean / max),
the discrimination (the corrected item-total correlation: the point-biserial correlation of "full marks on this
exercise" with the total of the assignment's OTHER exercises, so that the exercise does not correlate with
itself), the median number of submissions a student made up to and including the first one with full marks on
it and the median time from the student's first submission of the assignment to that one, and the most common
named mistakes (a check's ``mistake``, counted once per student). Per section of the roster: how many, the mean
total and the pass rate per exercise. And the assignment's counted totals, for its own histogram.

The counted results are those of every other view (:func:`autograder.service.export.counted`, the late policy
applied as it is now); the attempts come from every stored submission of the assignment and its result. Each
function here but :func:`read` takes plain values (result dicts as stored, :class:`Attempt` rows), so the
numbers are tested without a database.
"""
from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from autograder.core.points import fmt
from autograder.reports import charts
from autograder.service import people
from autograder.service.tables import Result, Submission
from autograder.service.export import counted
from autograder.service.standing import Standing
from autograder.core.text import csv_rows
from autograder.course.written import maximum

if TYPE_CHECKING:
    from autograder.course.config import Course

#: Points within this of the maximum are full marks (the class report's rule).
EPSILON = 1e-9
#: How many of an exercise's most common mistakes are shown.
TOP_MISTAKES = 3
#: The CSV tables, by name: ``/dashboard/analytics.csv?table=NAME``.
TABLES = ("exercises", "sections", "totals")


@dataclass(frozen=True)
class Attempt:
    """One submission of the assignment: who, which, when (the server's receipt time), and its stored result
    (None while it waits for a grade)."""

    student: str
    submission: int
    received_at: dt.datetime
    result: dict[str, Any] | None = None


@dataclass
class ExerciseStats:
    exercise: str
    max_points: float
    #: Counted results holding the exercise, and how many of them have full marks on it.
    n: int = 0
    full: int = 0
    mean: float | None = None
    #: (points, how many students) for each distinct score, lowest first.
    distribution: list[tuple[float, int]] = field(default_factory=list)
    discrimination: float | None = None
    #: Students with a graded submission holding the exercise, and those of them who reached full marks.
    tried: int = 0
    reached: int = 0
    #: Medians over the students who reached full marks (None: nobody did).
    attempts: float | None = None
    seconds: float | None = None
    #: (mistake, students) of the most common named mistakes, most common first.
    mistakes: list[tuple[str, int]] = field(default_factory=list)

    @property
    def pass_rate(self) -> float | None:
        return self.full / self.n if self.n else None

    @property
    def difficulty(self) -> float | None:
        return self.mean / self.max_points if self.mean is not None and self.max_points > 0 else None


@dataclass
class SectionStats:
    section: str
    n: int
    mean_total: float | None
    #: exercise -> the section's pass rate on it (None: no result of the section holds it).
    pass_rates: dict[str, float | None]


@dataclass
class Total:
    """One student's counted total of the assignment."""

    student: str
    name: str
    section: str
    points: float
    max_points: float

    @property
    def percent(self) -> float:
        return 100.0 * self.points / self.max_points if self.max_points > 0 else 0.0


@dataclass
class Analytics:
    assignment: str
    max_points: float
    totals: list[Total]
    exercises: list[ExerciseStats]
    sections: list[SectionStats]

    @property
    def n(self) -> int:
        return len(self.totals)


# -- the numbers ---------------------------------------------------------------------------------------------------
def is_full(points: float, max_points: float) -> bool:
    return max_points > 0 and points >= max_points - EPSILON


def exercise_points(result: dict[str, Any] | None) -> dict[str, tuple[float, float]]:
    """item -> (points, max_points) of a result: its exercises, and its written answers a person has graded (one
    still waiting is no item of it yet); nothing for a result without exercises."""
    out: dict[str, tuple[float, float]] = {}
    for ex in (result or {}).get("exercises") or []:
        if isinstance(ex, dict) and isinstance(ex.get("exercise"), str):
            out[ex["exercise"]] = (float(ex.get("points") or 0.0), float(ex.get("max_points") or 0.0))
    for q in (result or {}).get("questions") or []:
        if isinstance(q, dict) and isinstance(q.get("question"), str) and isinstance(q.get("points"), (int, float)):
            out[q["question"]] = (float(q["points"]), float(q.get("max_points") or 0.0))
    return out


def point_biserial(flags: Sequence[bool], values: Sequence[float]) -> float | None:
    """The point-biserial correlation of ``flags`` (0/1) with ``values``: Pearson's r of the two; None with fewer
    than 2 pairs or where either side does not vary (the correlation is undefined)."""
    n = len(flags)
    if n < 2 or n != len(values):
        return None
    xs = [1.0 if f else 0.0 for f in flags]
    mx, my = sum(xs) / n, sum(values) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in values)
    if sxx <= EPSILON or syy <= EPSILON:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, values))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def discrimination(results: Iterable[dict[str, Any]], exercise: str) -> float | None:
    """The corrected item-total correlation of ``exercise``: full marks on it against the sum of the points of
    the result's other exercises (before any late penalty), over the results that hold it."""
    flags, rest = [], []
    for result in results:
        points = exercise_points(result)
        if exercise not in points:
            continue
        mine, most = points[exercise]
        flags.append(is_full(mine, most))
        rest.append(sum(p for e, (p, _m) in points.items() if e != exercise))
    return point_biserial(flags, rest)


def common_mistakes(results: Iterable[dict[str, Any]], exercise: str,
                    top: int = TOP_MISTAKES) -> list[tuple[str, int]]:
    """The ``top`` most common named mistakes on ``exercise`` (its checks' ``mistake``), each counted once per
    student however many checks or results name it; ties by name."""
    seen: set[tuple[str, str]] = set()
    for result in results:
        student = str(result.get("student") or "")
        for ex in result.get("exercises") or []:
            if not isinstance(ex, dict) or ex.get("exercise") != exercise:
                continue
            for check in ex.get("checks") or []:
                if isinstance(check, dict) and isinstance(check.get("mistake"), str) and check["mistake"]:
                    seen.add((student, check["mistake"]))
    counts = Counter(mistake for _student, mistake in seen)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def to_full_marks(attempts: Iterable[Attempt], exercise: str) -> tuple[int, list[tuple[int, float]]]:
    """(how many students have a graded submission holding ``exercise``, and for each student who reached full
    marks on it: the number of submissions up to and including the first with full marks, and the seconds from
    the student's first submission of the assignment to that one). Every submission counts as an attempt, one
    waiting for its grade or one that could not be graded too."""
    by_student: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_student.setdefault(a.student, []).append(a)
    tried, reached = 0, []
    for mine in by_student.values():
        mine.sort(key=lambda a: (a.received_at, a.submission))
        holds = False
        for i, a in enumerate(mine):
            points = exercise_points(a.result)
            if exercise not in points:
                continue
            holds = True
            if is_full(*points[exercise]):
                reached.append((i + 1, (a.received_at - mine[0].received_at).total_seconds()))
                break
        tried += holds
    return tried, reached


def exercise_stats(results: Sequence[dict[str, Any]], attempts: Sequence[Attempt], exercise: str,
                   max_points: float) -> ExerciseStats:
    """The numbers of one exercise over the counted ``results`` and every ``attempts``."""
    stats = ExerciseStats(exercise, max_points)
    scores = []
    for result in results:
        points = exercise_points(result)
        if exercise in points:
            mine, most = points[exercise]
            scores.append(mine)
            stats.full += is_full(mine, most or max_points)
    stats.n = len(scores)
    if scores:
        stats.mean = statistics.fmean(scores)
        stats.distribution = sorted(Counter(round(s, 2) for s in scores).items())
    stats.discrimination = discrimination(results, exercise)
    stats.tried, reached = to_full_marks(attempts, exercise)
    stats.reached = len(reached)
    if reached:
        stats.attempts = float(statistics.median(n for n, _s in reached))
        stats.seconds = float(statistics.median(s for _n, s in reached))
    stats.mistakes = common_mistakes(results, exercise)
    return stats


def section_stats(totals: Sequence[Total], results: Sequence[dict[str, Any]],
                  exercises: Sequence[str]) -> list[SectionStats]:
    """Per section of the roster ("" for a student without one, last): n, mean total, pass rate per exercise."""
    points = {str(r.get("student") or ""): exercise_points(r) for r in results}
    groups: dict[str, list[Total]] = {}
    for t in totals:
        groups.setdefault(t.section, []).append(t)
    out = []
    for section in sorted(groups, key=lambda s: (s == "", s)):
        members = groups[section]
        rates: dict[str, float | None] = {}
        for e in exercises:
            held = [points[t.student][e] for t in members if e in points.get(t.student, {})]
            rates[e] = sum(is_full(p, m) for p, m in held) / len(held) if held else None
        out.append(SectionStats(section, len(members), statistics.fmean(t.points for t in members), rates))
    return out


def analyse(assignment: str, max_points: float, exercises: Sequence[tuple[str, float]],
            results: Iterable[dict[str, Any]], attempts: Iterable[Attempt],
            roster: dict[str, tuple[str, str]] | None = None) -> Analytics:
    """The analytics of ``assignment`` (``exercises``: course.yml's (id, points), in order; one a result holds
    that course.yml does not, a question graded by hand say, follows them) from its counted ``results`` (one per
    student, as :func:`autograder.service.export.counted` gives them), every ``attempts`` of it and the
    ``roster`` (student -> (name, section))."""
    roster = roster or {}
    mine = [r for r in results if r.get("assignment") == assignment]
    tries = list(attempts)
    order = dict(exercises)
    for r in mine:
        for e, (_p, most) in exercise_points(r).items():
            order.setdefault(e, most)
    totals = []
    for r in mine:
        student = str(r.get("student") or "")
        name, section = roster.get(student, ("", ""))
        # (out of the result's maximum: the assignment's, autograder.course.written.maximum, which the late policy's
        # settling writes into every result the service shows)
        totals.append(Total(student, name, section, float(r.get("points") or 0.0),
                            float(r.get("max_points") or max_points)))
    totals.sort(key=lambda t: t.student)
    return Analytics(assignment, max_points, totals,
                     [exercise_stats(mine, tries, e, p) for e, p in order.items()],
                     section_stats(totals, mine, list(order)))


# -- drawn and written -----------------------------------------------------------------------------------------------
def histogram_svg(analytics: Analytics, *, title: str, xlabel: str, ylabel: str) -> str:
    """The assignment's counted totals (% of its points, in ten bins) as the kit's inline SVG chart, named for a
    screen reader (role="img" with the title as its label)."""
    svg = charts.histogram([t.percent for t in analytics.totals], title=title, xlabel=xlabel, ylabel=ylabel)
    return svg.replace("<svg ", f"<svg role='img' aria-label='{escape(title, quote=True)}' ", 1)


def _number(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{round(value, digits):g}"


def table_csv(analytics: Analytics, table: str) -> str:
    """One of the page's :data:`TABLES` as CSV (every cell of people's text made safe for a spreadsheet)."""
    if table == "exercises":
        header = ["exercise", "max_points", "n", "full_marks", "pass_rate", "mean_points", "difficulty",
                  "discrimination", "distribution", "students_tried", "students_reached_full",
                  "median_attempts_to_full", "median_seconds_to_full", "top_mistakes"]
        return csv_rows([header], [[e.exercise, fmt(e.max_points), e.n, e.full, _number(e.pass_rate),
                                    _number(e.mean), _number(e.difficulty), _number(e.discrimination),
                                    "; ".join(f"{fmt(p)}: {k}" for p, k in e.distribution), e.tried, e.reached,
                                    _number(e.attempts), _number(e.seconds, 0),
                                    "; ".join(f"{m}: {k}" for m, k in e.mistakes)]
                                   for e in analytics.exercises])
    if table == "sections":
        ids = [e.exercise for e in analytics.exercises]
        return csv_rows([["section", "n", "mean_total", *[f"{e} pass_rate" for e in ids]]],
                        [[s.section, s.n, _number(s.mean_total), *[_number(s.pass_rates[e]) for e in ids]]
                         for s in analytics.sections])
    if table == "totals":
        return csv_rows([["student", "name", "section", "points", "max_points", "percent"]],
                        [[t.student, t.name, t.section, fmt(t.points), fmt(t.max_points), _number(t.percent, 1)]
                         for t in analytics.totals])
    raise ValueError(f"table {table!r}: one of {', '.join(TABLES)}")


# -- from the database ------------------------------------------------------------------------------------------------
def attempts_of(engine: Engine, assignment: str) -> list[Attempt]:
    """Every submission of ``assignment`` with its stored result (None where it has none yet), oldest first."""
    query = (select(Submission.id, Submission.student, Submission.received_at, Result.result)
             .join(Result, Result.submission_id == Submission.id, isouter=True)
             .where(Submission.assignment == assignment).order_by(Submission.received_at, Submission.id))
    with engine.connect() as conn:
        return [Attempt(r.student, r.id, r.received_at, dict(r.result) if r.result is not None else None)
                for r in conn.execute(query)]


def read(engine: Engine, course: Course, assignment: str) -> Analytics:
    """The analytics of ``assignment`` (an id of course.yml) from the service's database."""
    chosen = next(a for a in course.assignments if a.id == assignment)
    results = counted(engine, course.service.counts, Standing(engine, course))
    roster = {r.student: (r.name, r.section) for r in people.people(engine)}
    items = [(e.id, e.points) for e in chosen.exercises] + [(q.id, q.points) for q in chosen.questions]
    return analyse(assignment, maximum(chosen).points, items, results, attempts_of(engine, assignment), roster)
