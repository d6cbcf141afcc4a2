"""What the instructor sees: report.html (scores, pass rates per exercise, the most common mistakes)
and the terminal summary at the end of a batch.
"""
from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter
from typing import Any

from autograder.course.clock import readable
from autograder.course.config import Course
from autograder.core.points import fmt
from autograder.reports import charts
from autograder.reports.feedback import (esc, exercise_title, fmt_points, html_page, message_text, notes,
                                         status_text)
from autograder.reports.files import GRADED
from autograder.core.text import line
from autograder.course.written import maximum_of

# -- the class report ------------------------------------------------------------------------
def class_stats(results: list[dict[str, Any]], course: Course) -> dict[str, Any]:
    """Numbers behind the report and the terminal summary."""
    graded = [r for r in results if r.get("status", "").startswith(GRADED)]
    # Out of the assignment's maximum (autograder.course.written.maximum: its written answers', graded or not).
    maxima = [(r, maximum_of(course, r).points) for r in graded]
    fractions = [float(r.get("points") or 0.0) / most for r, most in maxima if most]
    per_exercise: dict[str, dict[str, Any]] = {}
    mistakes: Counter[tuple[str, str]] = Counter()
    mistake_text: dict[tuple[str, str], Any] = {}
    for r in graded:
        for ex in r.get("exercises", []):
            e = per_exercise.setdefault(ex["exercise"], {"n": 0, "full": 0, "points": 0.0,
                                                          "max": ex["max_points"], "statuses": Counter()})
            e["n"] += 1
            e["points"] += ex["points"]
            e["full"] += ex["points"] >= ex["max_points"] - 1e-9
            e["statuses"][ex["status"]] += 1
            seen = set()
            for c in ex.get("checks", []):
                if c.get("mistake") and (ex["exercise"], c["mistake"]) not in seen:
                    seen.add((ex["exercise"], c["mistake"]))
                    mistakes[(ex["exercise"], c["mistake"])] += 1
                    mistake_text[(ex["exercise"], c["mistake"])] = c.get("mistake_message")
    order = {e.id: i for i, e in enumerate(course.exercises)}
    per_exercise = dict(sorted(per_exercise.items(), key=lambda kv: order.get(kv[0], 10**6)))
    statuses = Counter(r.get("status", "").split(";")[0].split(":")[0] for r in results)
    return {"n": len(results), "graded": len(graded), "fractions": fractions, "per_exercise": per_exercise,
            "mistakes": mistakes.most_common(), "mistake_text": mistake_text, "statuses": statuses,
            "mean": statistics.fmean(fractions) if fractions else None,
            "median": statistics.median(fractions) if fractions else None}


_REPORT = {
    "zh": {"title": "{name}：班级报告", "summary": "共 {n} 份提交，{graded} 份已评分",
           "mean": "；平均 {mean:.1f}%，中位数 {median:.1f}%",
           "scores": "得分", "hist": "得分分布", "hist_x": "得分（占作业总分的 %）", "count": "提交数",
           "pass": "各练习的满分率", "pass_x": "练习", "pass_y": "满分的比例（%）",
           "exercise": "练习", "ex_title": "题目", "graded": "已评分", "full": "满分", "mean_points": "平均得分",
           "statuses": "状态", "mistakes": "最常见的已诊断错误", "mistake": "错误", "message": "说明",
           "no_mistakes": "没有诊断出已知错误。", "submissions": "提交", "student": "学生", "assignment": "作业",
           "score": "得分", "status": "状态", "feedback": "反馈",
           "lateness": "迟交",
           "late_row": "{assignment}：截止 {due}；{late} 份迟交（其中 {refused} 份晚于迟交截止时间，不予接收），"
                       "{unknown} 份提交时间未知，共扣 {penalty} 分"},
    "en": {"title": "{name}: class report", "summary": "{n} submissions, {graded} graded",
           "mean": "; mean score {mean:.1f}%, median {median:.1f}%",
           "scores": "Scores", "hist": "Score histogram", "hist_x": "score (% of the assignment's points)",
           "count": "submissions", "pass": "Pass rate per exercise", "pass_x": "exercise",
           "pass_y": "% with full points",
           "exercise": "exercise", "ex_title": "title", "graded": "graded", "full": "full points",
           "mean_points": "mean points", "statuses": "statuses", "mistakes": "Most common diagnosed mistakes",
           "mistake": "mistake", "message": "message", "no_mistakes": "No known mistake was diagnosed.",
           "submissions": "Submissions", "student": "student", "assignment": "assignment", "score": "score",
           "status": "status", "feedback": "feedback",
           "lateness": "Late submissions",
           "late_row": "{assignment}: due {due}; {late} late ({refused} after the late window, not accepted), "
                       "{unknown} with no trustworthy time, {penalty} points taken off in all"},
}


#: Fonts with Chinese glyphs, most common first; without one, plots keep English labels (a missing glyph
#: would only warn and draw boxes).
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei",
             "Microsoft YaHei", "PingFang SC", "SimHei", "Heiti SC", "AR PL UMing CN")


def cjk_font() -> str | None:
    """An installed font family that draws Chinese, or None."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in names), None)


def assignment_due(course: Course, assignment: str, stored: Any = None) -> str:
    """The assignment's own due date (course.yml's, not a student's extension) as people read it, in the course's
    zone (:func:`autograder.course.clock.readable`); for an assignment course.yml no longer has, ``stored`` (a result's
    ISO text), shown the same way."""
    due = None
    if any(a.id == assignment for a in course.assignments):
        due = course.deadline_of(assignment)[0]
    elif isinstance(stored, str):
        try:
            due = dt.datetime.fromisoformat(stored)
        except ValueError:
            return stored
    return readable(due, course.zone) if due is not None else ""


def late_counts(results: list[dict[str, Any]], course: Course) -> dict[str, dict[str, Any]]:
    """Per assignment with a due date: its due date (the assignment's), how many submissions came late, were
    refused or have no known time."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        late = r.get("late")
        if not isinstance(late, dict) or not r.get("assignment"):
            continue
        assignment = str(r["assignment"])
        if assignment not in out:
            out[assignment] = {"due": assignment_due(course, assignment, late.get("due")), "late": 0, "refused": 0,
                               "unknown": 0, "penalty": 0.0}
        counts = out[assignment]
        counts["late"] += late.get("late") is True
        counts["refused"] += late.get("accepted") is False
        counts["unknown"] += late.get("late") is None
        counts["penalty"] += float(late.get("penalty") or 0.0)
    for counts in out.values():
        counts["penalty"] = fmt(counts["penalty"])
    return dict(sorted(out.items()))


def class_report_html(results: list[dict[str, Any]], course: Course, language: str = "en") -> str:
    """The class report in ``language``: summary, three plots embedded as base64 PNG, tables; self-contained."""
    language = language if language in _REPORT else "en"
    return html_page(_REPORT[language]["title"].format(name=course.name), language,
                 class_report_parts(results, course, language))


def class_report_parts(results: list[dict[str, Any]], course: Course, language: str = "en", *,
                       submissions: bool = True, title: bool = True) -> list[str]:
    """The class report's HTML (every dynamic string escaped): the service's dashboard shows it too, without
    its own submissions table (``submissions=False``)."""
    language = language if language in _REPORT else "en"
    T = _REPORT[language]
    stats = class_stats(results, course)
    summary = T["summary"].format(n=stats["n"], graded=stats["graded"])
    if stats["mean"] is not None:
        summary += T["mean"].format(mean=stats["mean"] * 100, median=stats["median"] * 100)
    body = [f"<h1>{esc(T['title'].format(name=course.name))}</h1>"] if title else []
    body.append(f"<p>{esc(summary)}。</p>" if language == "zh" else f"<p>{esc(summary)}.</p>")
    lateness = late_counts(results, course)
    if lateness:
        body.append(f"<h2>{esc(T['lateness'])}</h2><ul>" + "".join(
            f"<li>{esc(T['late_row'].format(assignment=a, **counts))}</li>" for a, counts in lateness.items())
            + "</ul>")

    # The charts: SVG drawn here (autograder.reports.charts), labels in the report's language.
    hist = charts.histogram([f * 100 for f in stats["fractions"]], title=T["hist"], xlabel=T["hist_x"],
                            ylabel=T["count"])
    body.append(f"<h2>{esc(T['scores'])}</h2><img alt='{esc(T['hist'])}' src='{charts.data_uri(hist)}'>")

    per = stats["per_exercise"]
    if per:
        ids = list(per)
        chart = charts.column_chart(ids, [per[i]["full"] / per[i]["n"] * 100 for i in ids], title=T["pass"],
                                    xlabel=T["pass_x"], ylabel=T["pass_y"], color=charts.GREEN, top=100)
        body.append(f"<h2>{esc(T['pass'])}</h2><img alt='{esc(T['pass'])}' src='{charts.data_uri(chart)}'>")
        rows = "".join(
            f"<tr><td>{esc(i)}</td><td>{esc(exercise_title(course, i, language))}</td><td>{e['n']}</td>"
            f"<td>{e['full'] / e['n'] * 100:.0f}%</td><td>{esc(fmt_points(e['points'] / e['n']))} / "
            f"{esc(fmt_points(e['max']))}</td><td>"
            f"{esc(', '.join(f'{status_text(language, k)} {v}' for k, v in e['statuses'].most_common()))}"
            f"</td></tr>" for i, e in per.items())
        head = "".join(f"<th>{esc(T[k])}</th>" for k in ("exercise", "ex_title", "graded", "full", "mean_points",
                                                      "statuses"))
        body.append(f"<table><tr>{head}</tr>{rows}</table>")

    top = stats["mistakes"][:10]
    body.append(f"<h2>{esc(T['mistakes'])}</h2>")
    if top:
        chart = charts.bar_chart([f"{e} {m}" for (e, m), _ in top], [n for _, n in top], title=T["mistakes"],
                                 xlabel=T["count"])
        body.append(f"<img alt='{esc(T['mistakes'])}' src='{charts.data_uri(chart)}'>")
        rows = "".join(f"<tr><td>{esc(e)}</td><td>{esc(m)}</td><td>{n}</td>"
                       f"<td>{esc(message_text(stats['mistake_text'].get((e, m)), language))}</td></tr>"
                       for (e, m), n in top)
        head = "".join(f"<th>{esc(T[k])}</th>" for k in ("exercise", "mistake", "count", "message"))
        body.append(f"<table><tr>{head}</tr>{rows}</table>")
    else:
        body.append(f"<p>{esc(T['no_mistakes'])}</p>")

    if not submissions:
        return body
    rows = "".join(
        f"<tr><td>{esc(r.get('student') or '')}</td><td>{esc(r.get('assignment') or '')}</td>"
        f"<td>{esc(maximum_of(course, r).fraction(float(r.get('points') or 0.0), language))}</td>"
        f"<td>{esc(_status_cell(r, language, T))}</td>"
        f"<td><a href='feedback/{esc(r['key'])}.html'>{esc(T['feedback'])}</a></td></tr>"
        for r in sorted(results, key=lambda r: (str(r.get("student") or "~"), str(r.get("assignment") or ""))))
    head = "".join(f"<th>{esc(T[k])}</th>" for k in ("student", "assignment", "score", "status")) + "<th></th>"
    body.append(f"<h2>{esc(T['submissions'])}</h2><table><tr>{head}</tr>{rows}</table>")
    return body


def _status_cell(result: dict[str, Any], language: str, T: dict[str, str]) -> str:
    """A result's status in the report's language: graded (and its notes), or why it was not, whole."""
    if str(result.get("status", "")).startswith(GRADED):
        kept = notes(result, language)
        return "；".join([T["graded"], *kept]) if language == "zh" else "; ".join([T["graded"], *kept])
    said = message_text(result.get("message"), language)
    return said or str(result.get("status", ""))


# -- the terminal summary -----------------------------------------------------------------------
def print_summary(console: Any, results: list[dict[str, Any]], course: Course, *, list_limit: int = 40) -> None:
    """A rich summary: per submission (small batches), per exercise, and every failure named."""
    stats = class_stats(results, course)
    if len(results) <= list_limit:
        _print_submissions(console, results, course)
    else:
        _print_problems(console, results, list_limit)
    if stats["per_exercise"]:
        _print_exercises(console, stats)
    mean = f", mean {stats['mean'] * 100:.1f}%" if stats["mean"] is not None else ""
    console.print(f"{stats['n']} submissions: {stats['graded']} graded, "
                  f"{stats['n'] - stats['graded']} not graded{mean}")
    waiting = [(r, maximum_of(course, r).waiting) for r in results]
    waiting = [(r, w) for r, w in waiting if w]
    if waiting:
        console.print(f"written answers wait for a person in {len(waiting)} submissions "
                      f"({fmt_points(sum(w for _, w in waiting))} points: in the maximum, not yet in these scores, "
                      "never 0): grade them in the service's dashboard (autograder serve) or nbgrader's formgrader")
    for assignment, counts in late_counts(results, course).items():
        console.print(_REPORT["en"]["late_row"].format(assignment=assignment, **counts))


def _print_submissions(console: Any, results: list[dict[str, Any]], course: Course) -> None:
    """A table of every submission: student, assignment, score and status (one not plainly graded in yellow)."""
    from rich.table import Table

    table = Table(title="Submissions")
    for col in ("student", "assignment", "score", "status"):
        table.add_column(col, overflow="fold")
    for r in sorted(results, key=lambda r: (str(r.get("student") or "~"), str(r.get("assignment") or ""))):
        ok = r.get("status") == GRADED
        table.add_row(_esc(r.get("student") or "?"), _esc(r.get("assignment") or "?"),
                      f"{fmt_points(r.get('points', 0))}/{fmt_points(maximum_of(course, r).points)}",
                      _esc(r.get("status", "")) if ok else f"[yellow]{_esc(r.get('status', ''))}[/]")
    console.print(table)


def _print_problems(console: Any, results: list[dict[str, Any]], list_limit: int) -> None:
    """The first ``list_limit`` results not plainly graded, one line each, and how many more there are."""
    problems = [r for r in results if r.get("status") != GRADED]
    for r in problems[:list_limit]:
        console.print(f"[yellow]{_esc(r.get('source', ''))}[/]: {_esc(r.get('status', ''))}")
    if len(problems) > list_limit:
        console.print(f"... and {len(problems) - list_limit} more rows that are not plainly graded "
                      "(see grades.csv)")


def _print_exercises(console: Any, stats: dict[str, Any]) -> None:
    """A table of every exercise: how many graded, full points, mean, and its most frequent known mistake."""
    from rich.table import Table

    table = Table(title="Exercises")
    for col in ("exercise", "graded", "full points", "mean", "top mistake"):
        table.add_column(col)
    top_by_ex: dict[str, tuple[str, int]] = {}
    for (e, m), n in stats["mistakes"]:
        top_by_ex.setdefault(e, (m, n))
    for i, e in stats["per_exercise"].items():
        m = top_by_ex.get(i)
        table.add_row(i, str(e["n"]), f"{e['full'] / e['n'] * 100:.0f}%",
                      f"{fmt_points(e['points'] / e['n'])}/{fmt_points(e['max'])}",
                      f"{m[0]} ({m[1]})" if m else "")
    console.print(table)


def _esc(text: Any) -> str:
    """For the terminal: one clean line (no escape sequence reaches it), rich markup escaped."""
    from rich.markup import escape

    return escape(line(text if isinstance(text, str) else str(text), 200))
