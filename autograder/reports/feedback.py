"""What one student sees (feedback/<key>.md and .html) and the gradebook (grades.csv), from result dicts.

Feedback shows per exercise the score, every check with its points, the failed checks' messages and
diagnoses, and the cells that raised; never hidden inputs or references beyond what a check's message
says. Every piece of text a student controls is escaped.
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from functools import partial
from typing import Any

from autograder.course.config import Course
from autograder.core.messages import is_said, say, status_word, text
from autograder.core.points import fmt as points_fmt
from autograder.reports.files import GRADED
from autograder.core.text import csv_rows
from autograder.course.written import maximum_of


# -- small helpers ---------------------------------------------------------------------------
def _text(msg: Any, language: str) -> str:
    """One language of a {"zh", "en"} message (or a plain string)."""
    if isinstance(msg, dict):
        return str(msg.get(language) or msg.get("en") or msg.get("zh") or "")
    return "" if msg is None else str(msg)


fmt_points = points_fmt   # every score reads in hundredths: 6.09, 2, 0.5


def _md(text: str) -> str:
    """Student-controlled text inside Markdown: no raw HTML, no accidental emphasis or tables."""
    out = html.escape(text, quote=False)
    for ch in "\\`*_[]|#":
        out = out.replace(ch, "\\" + ch)
    return " ".join(out.split())


def exercise_title(course: Course, exercise_id: str, language: str = "en") -> str:
    try:
        return course.exercise(exercise_id)[1].title_in(language)
    except Exception:  # noqa: BLE001 - an old result of an exercise since removed
        return exercise_id


def cell_number(cell: dict[str, Any]) -> str:
    """A result's cell as a student counts it in JupyterLab: from 1, text cells included."""
    index = cell.get("index")
    return str(index + 1) if isinstance(index, int) and not isinstance(index, bool) else "?"


def cell_message(cell: dict[str, Any], language: str) -> str:
    """What stopped a cell: the sandbox's words in ``language``, else the student's exception text."""
    said = cell.get("said")
    if isinstance(said, dict) and said.get(language):
        return str(said[language])
    return str(cell.get("message") or "")


def _label(language: str, key: str) -> str:
    return text(f"label.{key}", language)


def status_text(language: str, status: str) -> str:
    return status_word(status, language)


# -- feedback ---------------------------------------------------------------------------------
def written_rows(result: dict[str, Any], course: Course, language: str) -> list[tuple[str, str, str, list[str]]]:
    """Each written answer of the result: (question and title, score or "waiting", comment, rubric items ticked)."""
    rows = []
    for q in result.get("questions") or ():
        if not isinstance(q, dict):
            continue
        title, items = str(q.get("question") or "?"), []
        try:
            question = course.assignment(str(result.get("assignment"))).question(str(q.get("question")))
        except Exception:  # noqa: BLE001 - an assignment since removed from course.yml
            question = None
        if question is not None:
            title = f"{question.id} {question.title_in(language)}"
            items = [f"{fmt_points(i.points)}: {i.text_in(language)}" for i in question.rubric
                     if i.id in (q.get("rubric") or ())]
        score = (_label(language, "waiting") if q.get("points") is None
                 else f"{fmt_points(q['points'])} / {fmt_points(q.get('max_points') or 0.0)}")
        rows.append((title, score, str(q.get("comment") or ""), items))
    return rows


def adjusted_line(ex: dict[str, Any], language: str) -> str:
    """The staff's adjustment of an exercise's automatic score, as the student reads it; "" without one."""
    adj = ex.get("adjusted")
    if not isinstance(adj, dict):
        return ""
    return text("label.adjusted", language, before=fmt_points(adj.get("from") or 0.0),
                after=fmt_points(ex.get("points") or 0.0), reason=str(adj.get("reason") or ""))


def _shown_checks(ex: dict[str, Any]) -> list[dict[str, Any]]:
    """Every check of the exercise with its points; one line for a not attempted / missing exercise."""
    checks = list(ex.get("checks", []))
    if ex.get("status") in ("not_attempted", "missing") and checks:
        return checks[:1]
    return checks


def _check_points(check: dict[str, Any]) -> str:
    return f"{fmt_points(check.get('points') or 0)} / {fmt_points(check.get('max_points') or 0)}"


def message_text(msg: Any, language: str) -> str:
    """One language of a result's {"zh", "en"} message."""
    return _text(msg, language)


def check_lines(ex: dict[str, Any], language: str) -> list[str]:
    """One plain-text line per check of an exercise's result (escape it where it goes)."""
    out = []
    for c in _shown_checks(ex):
        who = _label(language, "hidden") if c.get("audience") == "hidden" else _label(language, "public")
        text = (f"{_text(c.get('title'), language)} ({who}, {status_text(language, c.get('status', ''))}, "
                f"{_check_points(c)})")
        if _explained(c):
            text += f": {_text(c.get('message'), language)}"
            if c.get("mistake_message"):
                text += f" · {_label(language, 'diagnosis')}: {_text(c['mistake_message'], language)}"
        out.append(text)
    return out


def _explained(check: dict[str, Any]) -> bool:
    """A check whose message the student should read: failed, or passed but withheld (it says why)."""
    return not check.get("passed") or bool(check.get("withheld"))


def time_column(result: dict[str, Any]) -> str:
    """grades.csv's ``late`` column: yes, no, unknown, not accepted; empty without a due date."""
    late = result.get("late")
    if not isinstance(late, dict):
        return ""
    if late.get("accepted") is False:
        return "not accepted"
    value = late.get("late")
    return "yes" if value is True else "no" if value is False else "unknown"


def _late_label(result: dict[str, Any], language: str) -> str:
    """The late line's label: "Late submission" for a late one, "Due date" for one on time or of unknown time."""
    late = result.get("late")
    return _label(language, "late" if isinstance(late, dict) and late.get("late") is True else "due")


def notes(result: dict[str, Any], language: str) -> list[str]:
    """The result's notes in ``language``, less the grading's "written answers wait" (the total says what waits
    now, :func:`total_text`: a note kept from grading time would still say so once a person graded them)."""
    return [_text(n, language) for n in result.get("notes_msg") or []
            if not is_said(n, "submission.written_pending")]


def total_text(result: dict[str, Any], course: Course, language: str) -> str:
    """``10 / 12``: the score out of the assignment's maximum (:func:`autograder.course.written.maximum`), with what
    still waits for a person beside it."""
    return maximum_of(course, result).fraction(float(result.get("points") or 0.0), language)


def _late_line(result: dict[str, Any], language: str) -> str:
    """When it was due, when it came, the penalty and why (grading/deadlines.py), in the student's language."""
    late = result.get("late")
    if not isinstance(late, dict):
        return ""
    text = _text(late.get("rule"), language)
    penalty = late.get("penalty") or 0.0
    if penalty:
        raw = result.get("raw_points", result.get("points", 0.0))
        total = say("label.late_total", raw=fmt_points(raw), penalty=fmt_points(penalty))
        text += ("；" if language == "zh" else "; ") + (total.zh if language == "zh" else total.en)
    return text


def feedback_markdown(result: dict[str, Any], course: Course, language: str) -> str:
    """The student's feedback as Markdown (escaped; nothing hidden beyond the check messages)."""
    def L(key: str) -> str:     # a local shorthand
        return _label(language, key)

    # Assignment IDs and titles come from course.yml; only student-controlled text needs escaping.
    lines = [f"# {L('title')}: {result.get('assignment') or '?'} · {_md(str(result.get('student') or '?'))}", ""]
    if result.get("status") != GRADED and not result.get("exercises"):
        lines += [f"**{L('not_graded')}**: {_md(_text(result.get('message'), language))}", "", L("what_now"), ""]
        return "\n".join(lines)
    lines += _md_summary(result, course, language)
    for ex in result.get("exercises", []):
        lines += _md_checks(ex, course, language)
    lines += _md_written_and_cells(result, course, language)
    return "\n".join(lines) + "\n"


def _md_summary(result: dict[str, Any], course: Course, language: str) -> list[str]:
    """The Markdown feedback's total, lateness, notes, and its table of exercises (with adjustments below)."""
    L = partial(_label, language)     # a local shorthand
    lines = [f"**{L('total')}: {_md(total_text(result, course, language))}**", ""]
    late = _late_line(result, language)
    if late:
        lines += [f"> {_late_label(result, language)}: {_md(late)}", ""]
    for note in notes(result, language):
        lines.append(f"> {L('note')}: {_md(note)}")
    lines += ["", f"| {L('exercise')} | {L('score')} | {L('status')} |", "|---|---|---|"]
    for ex in result.get("exercises", []):
        lines.append(f"| {ex['exercise']} {exercise_title(course, ex['exercise'], language)} | "
                     f"{fmt_points(ex['points'])} / {fmt_points(ex['max_points'])} | "
                     f"{status_text(language, ex['status'])} |")
    lines += [f"\n> {ex['exercise']}: {_md(adjusted_line(ex, language))}" for ex in result.get("exercises", [])
              if adjusted_line(ex, language)]
    return lines


def _md_checks(ex: dict[str, Any], course: Course, language: str) -> list[str]:
    """One exercise's section of the Markdown feedback: its shown checks, each explained where it may be."""
    L = partial(_label, language)     # a local shorthand
    shown = _shown_checks(ex)
    if not shown:
        return []
    lines = ["", f"## {ex['exercise']} {exercise_title(course, ex['exercise'], language)}"
                 f" ({fmt_points(ex['points'])} / {fmt_points(ex['max_points'])})", ""]
    for c in shown:
        who = L("hidden") if c.get("audience") == "hidden" else L("public")
        head = (f"- **{_md(_text(c.get('title'), language))}** ({who}, "
                f"{status_text(language, c.get('status', ''))}, {_check_points(c)})")
        if not _explained(c):
            lines.append(head)
            continue
        lines.append(f"{head}: {_md(_text(c.get('message'), language))}")
        if c.get("mistake_message"):
            lines.append(f"  - {L('diagnosis')}: {_md(_text(c['mistake_message'], language))}")
    return lines


def _md_written_and_cells(result: dict[str, Any], course: Course, language: str) -> list[str]:
    """The Markdown feedback's table of written answers, and its list of the cells that did not run."""
    L = partial(_label, language)     # a local shorthand
    lines: list[str] = []
    written = written_rows(result, course, language)
    if written:
        lines += ["", f"## {L('written')}", "", f"| {L('question')} | {L('score')} | {L('comment')} |", "|---|---|---|"]
        lines += [f"| {_md(t)} | {_md(sc)} | {_md(' · '.join([*items, comment]) if items or comment else '')} |"
                  for t, sc, comment, items in written]
    bad_cells = [c for c in result.get("cells", []) if c.get("status") not in ("ok", "skipped", None)]
    if bad_cells:
        lines += ["", f"## {L('cells')}", ""]
        for c in bad_cells:
            lines.append(f"- {L('cell')} {cell_number(c)}: {_md(str(c.get('error_type') or c.get('status')))}"
                         f" {_md(cell_message(c, language))}")
    return lines


#: The style of a feedback page (the service's pages use it too).
FEEDBACK_CSS = """body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC",sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;
padding:.3rem .6rem;text-align:left;vertical-align:top}th{background:#f4f4f4}.passed{color:#1a7f37}
.failed,.error,.crashed,.timeout,.forbidden,.too_large,.missing{color:#b42318}.not_attempted{color:#666}
.diag{color:#6941c6}.note{background:#fff7e6;padding:.5rem}img{max-width:100%}code{background:#f4f4f4}"""


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def feedback_html(result: dict[str, Any], course: Course, language: str) -> str:
    """The student's feedback as a standalone HTML page (every dynamic string escaped)."""
    title = f"{_label(language, 'title')}: {result.get('assignment') or '?'} · {result.get('student') or '?'}"
    return html_page(title, language, [f"<h1>{esc(title)}</h1>", *feedback_parts(result, course, language)])


def feedback_parts(result: dict[str, Any], course: Course, language: str) -> list[str]:
    """The feedback's HTML below its title (every dynamic string escaped): the service's pages show it too."""
    def L(key: str) -> str:     # a local shorthand
        return _label(language, key)

    body: list[str] = []
    if result.get("status") != GRADED and not result.get("exercises"):
        return [f"<p class='note'><b>{esc(L('not_graded'))}</b>: {esc(_text(result.get('message'), language))}</p>",
                f"<p>{esc(L('what_now'))}</p>"]
    body += _html_summary(result, course, language)
    for ex in result.get("exercises", []):
        body += _html_checks(ex, course, language)
    body += _html_written_and_cells(result, course, language)
    return body


def _html_summary(result: dict[str, Any], course: Course, language: str) -> list[str]:
    """The HTML feedback's total, lateness, notes, and its table of exercises (with adjustments below)."""
    L = partial(_label, language)     # a local shorthand
    body = [f"<p><b>{esc(L('total'))}: {esc(total_text(result, course, language))}</b></p>"]
    late = _late_line(result, language)
    if late:
        body.append(f"<p class='note'>{esc(_late_label(result, language))}: {esc(late)}</p>")
    for note in notes(result, language):
        body.append(f"<p class='note'>{esc(L('note'))}: {esc(note)}</p>")
    rows = "".join(
        f"<tr><td>{esc(ex['exercise'])} {esc(exercise_title(course, ex['exercise'], language))}</td>"
        f"<td>{esc(fmt_points(ex['points']))} / {esc(fmt_points(ex['max_points']))}</td>"
        f"<td class='{esc(ex['status'])}'>{esc(status_text(language, ex['status']))}</td></tr>"
        for ex in result.get("exercises", []))
    body.append(f"<table><tr><th>{esc(L('exercise'))}</th><th>{esc(L('score'))}</th><th>{esc(L('status'))}</th></tr>"
                f"{rows}</table>")
    body += [f"<p class='note'>{esc(ex['exercise'])}: {esc(adjusted_line(ex, language))}</p>"
             for ex in result.get("exercises", []) if adjusted_line(ex, language)]
    return body


def _html_checks(ex: dict[str, Any], course: Course, language: str) -> list[str]:
    """One exercise's section of the HTML feedback: its shown checks, each explained where it may be."""
    L = partial(_label, language)     # a local shorthand
    shown = _shown_checks(ex)
    if not shown:
        return []
    body = [f"<h2>{esc(ex['exercise'])} {esc(exercise_title(course, ex['exercise'], language))} "
            f"({esc(fmt_points(ex['points']))} / {esc(fmt_points(ex['max_points']))})</h2><ul>"]
    for c in shown:
        who = L("hidden") if c.get("audience") == "hidden" else L("public")
        status = c.get("status", "")
        item = (f"<li><b>{esc(_text(c.get('title'), language))}</b> ({esc(who)}, "
                f"<span class='{esc(status)}'>{esc(status_text(language, status))}</span>, "
                f"{esc(_check_points(c))})")
        if not _explained(c) or not (c.get("message") or c.get("mistake_message")):
            body.append(item + "</li>")       # (a hidden check's message, where the policy withholds it)
            continue
        item += f": {esc(_text(c.get('message'), language))}"
        if c.get("mistake_message"):
            diagnosis = _text(c["mistake_message"], language)
            item += f"<br><span class='diag'>{esc(L('diagnosis'))}: {esc(diagnosis)}</span>"
        body.append(item + "</li>")
    body.append("</ul>")
    return body


def _html_written_and_cells(result: dict[str, Any], course: Course, language: str) -> list[str]:
    """The HTML feedback's table of written answers, and its list of the cells that did not run."""
    L = partial(_label, language)     # a local shorthand
    body: list[str] = []
    written = written_rows(result, course, language)
    if written:
        body.append(f"<h2>{esc(L('written'))}</h2><table><tr><th scope='col'>{esc(L('question'))}</th>"
                    f"<th scope='col'>{esc(L('score'))}</th><th scope='col'>{esc(L('comment'))}</th></tr>")
        body += [f"<tr><td>{esc(t)}</td><td>{esc(sc)}</td><td>"
                 + "".join(f"<div>{esc(i)}</div>" for i in items) + (f"<div>{esc(comment)}</div>" if comment else "")
                 + "</td></tr>" for t, sc, comment, items in written]
        body.append("</table>")
    bad_cells = [c for c in result.get("cells", []) if c.get("status") not in ("ok", "skipped", None)]
    if bad_cells:
        body.append(f"<h2>{esc(L('cells'))}</h2><ul>")
        body += [f"<li>{esc(L('cell'))} {esc(cell_number(c))}: "
                 f"<code>{esc(c.get('error_type') or c.get('status'))}</code> "
                 f"{esc(cell_message(c, language))}</li>" for c in bad_cells]
        body.append("</ul>")
    return body


def html_page(title: str, language: str, body: list[str]) -> str:
    return (f"<!DOCTYPE html>\n<html lang='{esc(language)}'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{FEEDBACK_CSS}</style></head><body>\n" + "\n".join(body)
            + "\n</body></html>\n")


# -- the gradebook -----------------------------------------------------------------------------
def exercise_columns(course: Course, results: Iterable[dict[str, Any]]) -> list[str]:
    """Exercise IDs of the assignments present, in course order."""
    present = {r.get("assignment") for r in results}
    return [e.id for a in course.assignments if a.id in present for e in a.exercises]


def grades_csv(results: list[dict[str, Any]], course: Course) -> str:
    """One row per submission: student, assignment, each exercise's points, total, max, (late, penalty, raw:
    with due dates), status, source."""

    columns = exercise_columns(course, results)
    # The written answers: a column each (the points a person gave; empty while it waits) and "waiting", the
    # points no one graded yet (in max, not in total: max is the assignment's, autograder.course.written.maximum).
    present = {r.get("assignment") for r in results}
    questions = [q.id for a in course.assignments if a.id in present for q in a.questions]
    # Lateness columns only for a course with due dates: total is the final score, raw what the notebook scored.
    dated = any(a.due is not None for a in course.assignments)
    rows = []
    for r in sorted(results, key=lambda r: (str(r.get("student") or "~"), str(r.get("assignment") or ""),
                                            str(r.get("source")))):
        per = {ex["exercise"]: ex["points"] for ex in r.get("exercises", [])}
        own = set()
        try:
            own = {e.id for e in course.assignment(r["assignment"]).exercises} if r.get("assignment") else set()
        except Exception:  # noqa: BLE001 - an assignment since removed from course.yml
            pass
        cells = [fmt_points(per.get(c, 0.0)) if c in own else "" for c in columns]
        lateness = []
        if dated:
            late = r.get("late") if isinstance(r.get("late"), dict) else {}
            lateness = [time_column(r), fmt_points(late.get("penalty") or 0.0) if late else "",
                        fmt_points(r.get("raw_points", r.get("points", 0.0)))]
        marks: dict[Any, float] = {q.get("question"): float(q["points"]) for q in r.get("questions") or ()
                                   if isinstance(q, dict) and isinstance(q.get("points"), (int, float))}
        written = [fmt_points(marks[q]) if q in marks else "" for q in questions]
        most = maximum_of(course, r)
        waiting = [fmt_points(most.waiting) if most.waiting else ""] if questions else []
        rows.append([r.get("student") or "", r.get("assignment") or "", *cells, *written,
                     fmt_points(r.get("points", 0.0)), fmt_points(most.points), *waiting, *lateness,
                     r.get("status", ""), r.get("source", "")])
    # Every cell through the CSV gate: a student folder named "=HYPERLINK(...)" stays text.
    extra = ["late", "penalty", "raw"] if dated else []
    return csv_rows([["student", "assignment", *columns, *questions, "total", "max",
                      *(["waiting"] if questions else []), *extra, "status", "source"]], rows)
