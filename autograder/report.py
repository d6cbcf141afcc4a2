"""What grading writes: result files, student feedback, the gradebook, the class report.

Everything here works from result dicts (the JSON written to ``results/``), so
feedback and the gradebook can be rebuilt from ``results/`` at any time and a
resumed batch reports exactly what a fresh one would.

Every file is written atomically (a temporary file in the same folder, then
``os.replace``): a batch killed at any instant leaves each output either the
old complete file or the new complete file, never half of one.

Student feedback shows what a student may see: per exercise the score, the
failed checks with their messages and diagnoses, and the cells that raised.
It never shows hidden inputs or references beyond what a check's message says.
Every piece of text that a student controls (error messages, names) is escaped.
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from .config import Course
from .messages import status_word, text
from .points import fmt as points_fmt
from .text import csv_rows, line

RESULT_SCHEMA = 1
GRADED = "graded"


# -- atomic files ------------------------------------------------------------------------
def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader (or a crash) never sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, encoding: str = "utf-8") -> None:
    atomic_write_bytes(path, text.encode(encoding))


def write_if_changed(path: Path, text: str, encoding: str = "utf-8") -> bool:
    """Atomic write, skipped when the file already holds exactly this text (keeps mtimes honest)."""
    data = text.encode(encoding)
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write_bytes(path, data)
    return True


def remove_stale_temporaries(folder: Path) -> None:
    """Temporary files a killed batch left behind (never a finished output)."""
    if folder.is_dir():
        for p in folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)


def dump_result(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def load_result(path: Path) -> dict[str, Any] | None:
    """A result file, or None when it is missing or not one of ours."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != RESULT_SCHEMA:
        return None
    return data


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


def _status_text(language: str, status: str) -> str:
    return status_word(status, language)


# -- feedback ---------------------------------------------------------------------------------
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
        text = (f"{_text(c.get('title'), language)} ({who}, {_status_text(language, c.get('status', ''))}, "
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


def feedback_markdown(result: dict[str, Any], course: Course, language: str) -> str:
    """The student's feedback as Markdown (escaped; nothing hidden beyond the check messages)."""
    L = lambda key: _label(language, key)  # noqa: E731 - a local shorthand
    # Assignment IDs and titles come from course.yml; only student-controlled text needs escaping.
    lines = [f"# {L('title')}: {result.get('assignment') or '?'} · {_md(str(result.get('student') or '?'))}", ""]
    if result.get("status") != GRADED and not result.get("exercises"):
        lines += [f"**{L('not_graded')}**: {_md(_text(result.get('message'), language))}", "", L("what_now"), ""]
        return "\n".join(lines)
    lines += [f"**{L('total')}: {fmt_points(result['points'])} / {fmt_points(result['max_points'])}**", ""]
    for note in result.get("notes_msg", []):
        lines.append(f"> {L('note')}: {_md(_text(note, language))}")
    lines += ["", f"| {L('exercise')} | {L('score')} | {L('status')} |", "|---|---|---|"]
    for ex in result.get("exercises", []):
        lines.append(f"| {ex['exercise']} {exercise_title(course, ex['exercise'], language)} | "
                     f"{fmt_points(ex['points'])} / {fmt_points(ex['max_points'])} | "
                     f"{_status_text(language, ex['status'])} |")
    for ex in result.get("exercises", []):
        shown = _shown_checks(ex)
        if not shown:
            continue
        lines += ["", f"## {ex['exercise']} {exercise_title(course, ex['exercise'], language)}"
                      f" ({fmt_points(ex['points'])} / {fmt_points(ex['max_points'])})", ""]
        for c in shown:
            who = L("hidden") if c.get("audience") == "hidden" else L("public")
            head = (f"- **{_md(_text(c.get('title'), language))}** ({who}, "
                    f"{_status_text(language, c.get('status', ''))}, {_check_points(c)})")
            if not _explained(c):
                lines.append(head)
                continue
            lines.append(f"{head}: {_md(_text(c.get('message'), language))}")
            if c.get("mistake_message"):
                lines.append(f"  - {L('diagnosis')}: {_md(_text(c['mistake_message'], language))}")
    bad_cells = [c for c in result.get("cells", []) if c.get("status") not in ("ok", "skipped", None)]
    if bad_cells:
        lines += ["", f"## {L('cells')}", ""]
        for c in bad_cells:
            lines.append(f"- {L('cell')} {cell_number(c)}: {_md(str(c.get('error_type') or c.get('status')))}"
                         f" {_md(cell_message(c, language))}")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC",sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;
padding:.3rem .6rem;text-align:left;vertical-align:top}th{background:#f4f4f4}.passed{color:#1a7f37}
.failed,.error,.crashed,.timeout,.forbidden,.too_large,.missing{color:#b42318}.not_attempted{color:#777}
.diag{color:#6941c6}.note{background:#fff7e6;padding:.5rem}img{max-width:100%}code{background:#f4f4f4}"""


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def feedback_html(result: dict[str, Any], course: Course, language: str) -> str:
    """The student's feedback as a standalone HTML page (every dynamic string escaped)."""
    L = lambda key: _label(language, key)  # noqa: E731
    title = f"{L('title')}: {result.get('assignment') or '?'} · {result.get('student') or '?'}"
    body = [f"<h1>{_h(title)}</h1>"]
    if result.get("status") != GRADED and not result.get("exercises"):
        body += [f"<p class='note'><b>{_h(L('not_graded'))}</b>: {_h(_text(result.get('message'), language))}</p>",
                 f"<p>{_h(L('what_now'))}</p>"]
        return _page(title, language, body)
    body.append(f"<p><b>{_h(L('total'))}: {_h(fmt_points(result['points']))} / "
                f"{_h(fmt_points(result['max_points']))}</b></p>")
    for note in result.get("notes_msg", []):
        body.append(f"<p class='note'>{_h(L('note'))}: {_h(_text(note, language))}</p>")
    rows = "".join(
        f"<tr><td>{_h(ex['exercise'])} {_h(exercise_title(course, ex['exercise'], language))}</td>"
        f"<td>{_h(fmt_points(ex['points']))} / {_h(fmt_points(ex['max_points']))}</td>"
        f"<td class='{_h(ex['status'])}'>{_h(_status_text(language, ex['status']))}</td></tr>"
        for ex in result.get("exercises", []))
    body.append(f"<table><tr><th>{_h(L('exercise'))}</th><th>{_h(L('score'))}</th><th>{_h(L('status'))}</th></tr>"
                f"{rows}</table>")
    for ex in result.get("exercises", []):
        shown = _shown_checks(ex)
        if not shown:
            continue
        body.append(f"<h2>{_h(ex['exercise'])} {_h(exercise_title(course, ex['exercise'], language))} "
                    f"({_h(fmt_points(ex['points']))} / {_h(fmt_points(ex['max_points']))})</h2><ul>")
        for c in shown:
            who = L("hidden") if c.get("audience") == "hidden" else L("public")
            status = c.get("status", "")
            item = (f"<li><b>{_h(_text(c.get('title'), language))}</b> ({_h(who)}, "
                    f"<span class='{_h(status)}'>{_h(_status_text(language, status))}</span>, "
                    f"{_h(_check_points(c))})")
            if not _explained(c):
                body.append(item + "</li>")
                continue
            item += f": {_h(_text(c.get('message'), language))}"
            if c.get("mistake_message"):
                diagnosis = _text(c["mistake_message"], language)
                item += f"<br><span class='diag'>{_h(L('diagnosis'))}: {_h(diagnosis)}</span>"
            body.append(item + "</li>")
        body.append("</ul>")
    bad_cells = [c for c in result.get("cells", []) if c.get("status") not in ("ok", "skipped", None)]
    if bad_cells:
        body.append(f"<h2>{_h(L('cells'))}</h2><ul>")
        body += [f"<li>{_h(L('cell'))} {_h(cell_number(c))}: <code>{_h(c.get('error_type') or c.get('status'))}</code> "
                 f"{_h(cell_message(c, language))}</li>" for c in bad_cells]
        body.append("</ul>")
    return _page(title, language, body)


def _page(title: str, language: str, body: list[str]) -> str:
    return (f"<!DOCTYPE html>\n<html lang='{_h(language)}'><head><meta charset='utf-8'>"
            f"<title>{_h(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# -- the gradebook -----------------------------------------------------------------------------
def exercise_columns(course: Course, results: Iterable[dict[str, Any]]) -> list[str]:
    """Exercise IDs of the assignments present, in course order."""
    present = {r.get("assignment") for r in results}
    return [e.id for a in course.assignments if a.id in present for e in a.exercises]


def grades_csv(results: list[dict[str, Any]], course: Course) -> str:
    """One row per submission: student, assignment, each exercise's points, total, max, status, source."""
    columns = exercise_columns(course, results)
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
        rows.append([r.get("student") or "", r.get("assignment") or "", *cells,
                     fmt_points(r.get("points", 0.0)), fmt_points(r.get("max_points", 0.0)),
                     r.get("status", ""), r.get("source", "")])
    # Every cell through the CSV gate: a student folder named "=HYPERLINK(...)" stays text.
    return csv_rows([["student", "assignment", *columns, "total", "max", "status", "source"]], rows)


# -- the class report ------------------------------------------------------------------------
def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def class_stats(results: list[dict[str, Any]], course: Course) -> dict[str, Any]:
    """Numbers behind the report and the terminal summary."""
    graded = [r for r in results if r.get("status", "").startswith(GRADED)]
    fractions = [r["points"] / r["max_points"] for r in graded if r.get("max_points")]
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
    "zh": {"title": "{name}：班级报告", "summary": "共 {n} 份提交，{graded} 份已评分", "mean": "；平均 {mean:.1f}%，中位数 {median:.1f}%",
           "scores": "得分", "hist": "得分分布", "hist_x": "得分（占作业总分的 %）", "count": "提交数",
           "pass": "各练习的满分率", "pass_x": "练习", "pass_y": "满分的比例（%）",
           "exercise": "练习", "ex_title": "题目", "graded": "已评分", "full": "满分", "mean_points": "平均得分",
           "statuses": "状态", "mistakes": "最常见的已诊断错误", "mistake": "错误", "message": "说明",
           "no_mistakes": "没有诊断出已知错误。", "submissions": "提交", "student": "学生", "assignment": "作业",
           "score": "得分", "status": "状态", "feedback": "反馈"},
    "en": {"title": "{name}: class report", "summary": "{n} submissions, {graded} graded", "mean": "; mean score {mean:.1f}%, median {median:.1f}%",
           "scores": "Scores", "hist": "Score histogram", "hist_x": "score (% of the assignment's points)",
           "count": "submissions", "pass": "Pass rate per exercise", "pass_x": "exercise", "pass_y": "% with full points",
           "exercise": "exercise", "ex_title": "title", "graded": "graded", "full": "full points",
           "mean_points": "mean points", "statuses": "statuses", "mistakes": "Most common diagnosed mistakes",
           "mistake": "mistake", "message": "message", "no_mistakes": "No known mistake was diagnosed.",
           "submissions": "Submissions", "student": "student", "assignment": "assignment", "score": "score",
           "status": "status", "feedback": "feedback"},
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


def class_report_html(results: list[dict[str, Any]], course: Course, language: str = "en") -> str:
    """The class report in ``language``: summary, three plots embedded as base64 PNG, tables; self-contained."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    language = language if language in _REPORT else "en"
    T = _REPORT[language]
    font = cjk_font() if language == "zh" else None
    P = _REPORT["zh"] if font else _REPORT["en"]          # plot labels: Chinese only where a font draws it
    style = {"font.family": [font, "sans-serif"]} if font else {}
    stats = class_stats(results, course)
    summary = T["summary"].format(n=stats["n"], graded=stats["graded"])
    if stats["mean"] is not None:
        summary += T["mean"].format(mean=stats["mean"] * 100, median=stats["median"] * 100)
    body = [f"<h1>{_h(T['title'].format(name=course.name))}</h1>", f"<p>{_h(summary)}。</p>"
            if language == "zh" else f"<p>{_h(summary)}.</p>"]

    with matplotlib.rc_context(style):
        fig = Figure(figsize=(6, 3.2))
        ax = fig.subplots()
        ax.hist([f * 100 for f in stats["fractions"]], bins=[i * 10 for i in range(11)], color="#4c78a8",
                edgecolor="white")
        ax.set(xlabel=P["hist_x"], ylabel=P["count"], title=P["hist"])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        body.append(f"<h2>{_h(T['scores'])}</h2><img alt='{_h(T['hist'])}' src='data:image/png;base64,{_png(fig)}'>")

        per = stats["per_exercise"]
        if per:
            fig = Figure(figsize=(max(4.0, 0.55 * len(per) + 1.5), 3.2))
            ax = fig.subplots()
            ids = list(per)
            ax.bar(ids, [per[i]["full"] / per[i]["n"] * 100 for i in ids], color="#54a24b")
            ax.set(ylim=(0, 100), xlabel=P["pass_x"], ylabel=P["pass_y"], title=P["pass"])
            body.append(f"<h2>{_h(T['pass'])}</h2><img alt='{_h(T['pass'])}' "
                        f"src='data:image/png;base64,{_png(fig)}'>")
            rows = "".join(
                f"<tr><td>{_h(i)}</td><td>{_h(exercise_title(course, i, language))}</td><td>{e['n']}</td>"
                f"<td>{e['full'] / e['n'] * 100:.0f}%</td><td>{_h(fmt_points(e['points'] / e['n']))} / "
                f"{_h(fmt_points(e['max']))}</td><td>"
                f"{_h(', '.join(f'{_status_text(language, k)} {v}' for k, v in e['statuses'].most_common()))}"
                f"</td></tr>" for i, e in per.items())
            head = "".join(f"<th>{_h(T[k])}</th>" for k in ("exercise", "ex_title", "graded", "full", "mean_points",
                                                          "statuses"))
            body.append(f"<table><tr>{head}</tr>{rows}</table>")

        top = stats["mistakes"][:10]
        body.append(f"<h2>{_h(T['mistakes'])}</h2>")
        if top:
            fig = Figure(figsize=(6, 0.45 * len(top) + 1.2))
            ax = fig.subplots()
            labels = [f"{e} {m}" for (e, m), _ in top][::-1]
            ax.barh(labels, [n for _, n in top][::-1], color="#e45756")
            ax.set(xlabel=P["count"], title=P["mistakes"])
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            body.append(f"<img alt='{_h(T['mistakes'])}' src='data:image/png;base64,{_png(fig)}'>")
            rows = "".join(f"<tr><td>{_h(e)}</td><td>{_h(m)}</td><td>{n}</td>"
                           f"<td>{_h(_text(stats['mistake_text'].get((e, m)), language))}</td></tr>"
                           for (e, m), n in top)
            head = "".join(f"<th>{_h(T[k])}</th>" for k in ("exercise", "mistake", "count", "message"))
            body.append(f"<table><tr>{head}</tr>{rows}</table>")
        else:
            body.append(f"<p>{_h(T['no_mistakes'])}</p>")

    rows = "".join(
        f"<tr><td>{_h(r.get('student') or '')}</td><td>{_h(r.get('assignment') or '')}</td>"
        f"<td>{_h(fmt_points(r.get('points', 0)))} / {_h(fmt_points(r.get('max_points', 0)))}</td>"
        f"<td>{_h(r.get('status', ''))}</td><td><a href='feedback/{_h(r['key'])}.html'>{_h(T['feedback'])}</a></td></tr>"
        for r in sorted(results, key=lambda r: (str(r.get("student") or "~"), str(r.get("assignment") or ""))))
    head = "".join(f"<th>{_h(T[k])}</th>" for k in ("student", "assignment", "score", "status")) + "<th></th>"
    body.append(f"<h2>{_h(T['submissions'])}</h2><table><tr>{head}</tr>{rows}</table>")
    return _page(T["title"].format(name=course.name), language, body)


# -- the terminal summary -----------------------------------------------------------------------
def print_summary(console: Any, results: list[dict[str, Any]], course: Course, *, list_limit: int = 40) -> None:
    """A rich summary: per submission (small batches), per exercise, and every failure named."""
    from rich.table import Table

    stats = class_stats(results, course)
    if len(results) <= list_limit:
        table = Table(title="Submissions")
        for col in ("student", "assignment", "score", "status"):
            table.add_column(col, overflow="fold")
        for r in sorted(results, key=lambda r: (str(r.get("student") or "~"), str(r.get("assignment") or ""))):
            ok = r.get("status") == GRADED
            table.add_row(_esc(r.get("student") or "?"), _esc(r.get("assignment") or "?"),
                          f"{fmt_points(r.get('points', 0))}/{fmt_points(r.get('max_points', 0))}",
                          _esc(r.get("status", "")) if ok else f"[yellow]{_esc(r.get('status', ''))}[/]")
        console.print(table)
    else:
        problems = [r for r in results if r.get("status") != GRADED]
        for r in problems[:list_limit]:
            console.print(f"[yellow]{_esc(r.get('source', ''))}[/]: {_esc(r.get('status', ''))}")
        if len(problems) > list_limit:
            console.print(f"... and {len(problems) - list_limit} more rows that are not plainly graded "
                          "(see grades.csv)")
    if stats["per_exercise"]:
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
    mean = f", mean {stats['mean'] * 100:.1f}%" if stats["mean"] is not None else ""
    console.print(f"{stats['n']} submissions: {stats['graded']} graded, "
                  f"{stats['n'] - stats['graded']} not graded{mean}")


def _esc(text: Any) -> str:
    """For the terminal: one clean line (no escape sequence reaches it), rich markup escaped."""
    from rich.markup import escape

    return escape(line(text if isinstance(text, str) else str(text), 200))
