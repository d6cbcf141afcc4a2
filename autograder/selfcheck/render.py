"""A self-check's result as the student reads it: text (a terminal), HTML (JupyterLab) or a rich table.
"""
from __future__ import annotations

import html
import io
import sys
from typing import Any, Protocol

from autograder.core.messages import CATALOGUE, Msg, say, status_word, text


class Result(Protocol):
    """What this renders: a self-check's result, :class:`autograder.selfcheck.results.SelfCheckResult` (named
    here, not imported: results.py shows its results through this module)."""

    @property
    def exercises(self) -> list[Any]: ...
    @property
    def language(self) -> str: ...
    @property
    def notes(self) -> list[Any]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def title(self) -> str: ...
    @property
    def passed(self) -> bool: ...


# -- rendering ---------------------------------------------------------------------
_MARK = {"passed": "✓", "not_attempted": "○", "missing": "?"}


_HEAD = {
    "passed": say("selfcheck.head.passed"),
    "not_attempted": say("selfcheck.head.not_attempted"),
    "missing": say("selfcheck.head.missing"),
    "forbidden": Msg(*CATALOGUE["selfcheck.head.forbidden"]),      # {calls} filled when shown
}


_MISTAKE = say("selfcheck.likely_mistake")


def _status(e: Any) -> str:
    return e.status.value


def _counts(e: Any) -> tuple[int, int]:
    return sum(r.passed for r in e.checks), len(e.checks)


def _exercise_head(e: Any, lang: str) -> str:
    status = _status(e)
    if status in ("passed", "not_attempted", "missing"):
        head = _HEAD[status].get(lang)
    elif status == "forbidden":
        calls = ", ".join(sorted({f for r in e.checks for f in r.forbidden}))
        head = _HEAD["forbidden"].get(lang).format(calls=calls)
    else:
        ok, n = _counts(e)
        head = text("selfcheck.checks_passed", lang, ok=ok, n=n)
    if status == "passed":
        ok, n = _counts(e)
        head += text("selfcheck.n_checks", lang, n=n)
    return head


def _lines_of(e: Any) -> bool:
    """Whether to list the checks one by one (not when one line says it all)."""
    return _status(e) not in ("not_attempted", "missing", "forbidden")


def _summary(result: Result) -> str | None:
    lang = result.language
    if len(result.exercises) < 2:
        return None
    done = sum(_status(e) == "passed" for e in result.exercises)
    todo = sum(_status(e) == "not_attempted" for e in result.exercises)
    n = len(result.exercises)
    summary = text("selfcheck.summary", lang, title=result.title, done=done, n=n)
    return summary + (text("selfcheck.summary_todo", lang, todo=todo) if todo else "")


def render_text(result: Result) -> str:
    lang = result.language
    lines: list[str] = []
    summary = _summary(result)
    if summary:
        lines.append(summary)
    for note in result.notes:
        lines.append(("✗ " if note.level == "error" else "· ") + note.message.get(lang))
    for e in result.exercises:
        status = _status(e)
        lines.append(f"{_MARK.get(status, '✗')} {e.exercise} {e.function}: {_exercise_head(e, lang)}")
        if not _lines_of(e):
            continue
        for r in e.checks:
            line = f"    {'✓' if r.passed else '✗'} {r.title.get(lang)}"
            if not r.passed and r.message is not None and status != "forbidden":
                line += f" — {r.message.get(lang)}"
            lines.append(line)
            if r.mistake_message is not None:
                lines.append(f"      → {_MISTAKE.get(lang)}{r.mistake_message.get(lang)}")
    if not lines:
        lines.append(text("selfcheck.no_checks", lang))
    if result.seconds:
        lines.append(f"({result.seconds:.2f} s)")
    return "\n".join(lines)


_COLOR = {"passed": "#1a7f37", "not_attempted": "#6e7781", "missing": "#9a6700"}


_FAIL = "#cf222e"


def render_html(result: Result) -> str:
    lang = result.language
    esc = html.escape
    overall = "passed" if result.passed else "failed"
    out = [f'<div class="autograder-selfcheck" data-status="{overall}" lang="{lang}" '
           f'style="font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;line-height:1.55">']
    summary = _summary(result)
    if summary:
        out.append(f'<div style="font-weight:600;margin-bottom:2px">{esc(summary)}</div>')
    for note in result.notes:
        color = _FAIL if note.level == "error" else "#6e7781"
        out.append(f'<div class="note" data-level="{note.level}" style="color:{color}">'
                   f'{esc(note.message.get(lang))}</div>')
    for e in result.exercises:
        status = _status(e)
        color = _COLOR.get(status, _FAIL)
        out.append(f'<div class="exercise" data-exercise="{esc(e.exercise)}" data-status="{status}">'
                   f'<span style="color:{color};font-weight:700">{_MARK.get(status, "✗")}</span> '
                   f'<b>{esc(e.exercise)}</b> <code>{esc(e.function)}</code> '
                   f'<span style="color:{color}">{esc(_exercise_head(e, lang))}</span></div>')
        if not _lines_of(e):
            continue
        for r in e.checks:
            mark = '<span style="color:#1a7f37">✓</span>' if r.passed else f'<span style="color:{_FAIL}">✗</span>'
            out.append(f'<div class="check" data-check="{esc(r.check)}" data-status="{r.status.value}" '
                       f'style="margin-left:1.6em">{mark} {esc(r.title.get(lang))}</div>')
            if not r.passed and r.message is not None and status != "forbidden":
                out.append(f'<div style="margin-left:3.2em;font-family:var(--jp-code-font-family,monospace);'
                           f'font-size:12px;opacity:.85">{esc(r.message.get(lang))}</div>')
            if r.mistake_message is not None:
                out.append(f'<div class="mistake" data-mistake="{esc(r.mistake or "")}" style="margin-left:3.2em;'
                           f'padding:1px 6px;border-left:3px solid #bf8700;background:rgba(191,135,0,.12)">'
                           f'<b>{esc(_MISTAKE.get(lang))}</b>{esc(r.mistake_message.get(lang))}</div>')
    if result.seconds:
        out.append(f'<div style="font-size:11px;opacity:.55">{result.seconds:.2f} s</div>')
    out.append("</div>")
    return "\n".join(out)


def print_table(result: Result, name: str, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    lang = result.language
    if console is None:
        # Piped or in CI, rich would assume 80 columns: the message column needs more.
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    for note in result.notes:
        console.print(("[red]✗[/] " if note.level == "error" else "· ") + escape(note.message.get(lang)))
    headers = tuple(text(f"selfcheck.column.{c}", lang) for c in ("exercise", "check", "result", "message", "mistake"))
    table = Table(title=text("selfcheck.table_title", lang, name=name), show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold")
    table.columns[2].no_wrap = True
    styles = {"passed": "green", "not_attempted": "dim", "missing": "yellow"}
    for e in result.exercises:
        status = _status(e)
        style = styles.get(status, "red")
        if not _lines_of(e):
            table.add_row(e.exercise, e.function, f"[{style}]{_MARK.get(status, '✗')} {status_word(status, lang)}[/]",
                          escape(_exercise_head(e, lang)), "")
            continue
        for r in e.checks:
            mark = "[green]✓[/]" if r.passed else "[red]✗[/]"
            word = status_word("passed" if r.passed else r.status.value, lang)
            # The check as the student reads it (its title, in the course's language), not its id.
            table.add_row(e.exercise, escape(r.title.get(lang)), f"{mark} {word}",
                          escape(r.message.get(lang)) if r.message is not None and not r.passed else "",
                          f"[yellow]{escape(r.mistake_message.get(lang))}[/]" if r.mistake_message else "")
    console.print(table)
    done = sum(_status(e) == "passed" for e in result.exercises)
    n = len(result.exercises)
    verdict = f"[green]{text('selfcheck.head.passed', lang)}[/]" if result.passed else \
        f"[red]{text('selfcheck.exercises_pass', lang, done=done, n=n)}[/]"
    console.print(verdict)


def table_text(result: Result, name: str, tty: bool, width: int) -> str:
    """:func:`print_table`'s table as text ``width`` columns wide, in colour only on a terminal (``tty``)."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, width=width, force_terminal=tty, no_color=not tty)
    print_table(result, name, console=console)
    return buffer.getvalue()
