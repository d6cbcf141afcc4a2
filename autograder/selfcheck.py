"""Self-check: the public checks, in the student's own kernel or on a saved notebook.

``check("2.4")`` in a notebook finds the student's function in the notebook's
namespace, runs the exercise's public checks in-process (this is the student's
own code on the student's own machine, so no sandbox) and shows one line per
check: HTML in JupyterLab, text in a terminal. A known mistake is named from the
fingerprints the build stored (:mod:`autograder.catalog.fingerprints`): neither the
reference solutions nor the mistakes' code ship with self-check.

Two rules come from nbgrader, which may execute these notebooks: ``check`` never
writes to stderr (a cell that does scores 0) and never raises for anything the
student did. ``autograder check NOTEBOOK.ipynb`` runs the same checks on a saved
notebook from a terminal and exits 0 only when everything passes.

Heavy imports (torch, the catalog) wait for the first call, so
``from autograder import check`` and ``autograder --help`` stay instant.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import html
import io
import os
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.messages import CATALOGUE, Msg, say, status_word, text

LANGUAGES = ("zh", "en")


#: A message in both languages: the catalogue's (autograder.messages), one type for the whole kit.
Text = Msg


@dataclass
class Note:
    """A line that is not a check result: an unknown ID, a cell that raised, a check that broke."""

    level: str      # "info" (calm) or "error" (counts as not passed)
    message: Text


@dataclass
class SelfCheckResult:
    """What ``check()`` returns: truthy when every check it ran passed.

    Jupyter shows it once (HTML); a terminal shows its text. ``exercises`` holds
    ``checks.ExerciseResult`` objects, one per exercise run.
    """

    exercises: list[Any]
    language: str = "zh"
    notes: list[Note] = field(default_factory=list)
    seconds: float = 0.0
    title: str = ""
    _shown_at: Any = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return bool(self.exercises) and all(e.status.value == "passed" for e in self.exercises) \
            and not any(n.level == "error" for n in self.notes)

    def __bool__(self) -> bool:
        return self.passed

    # rendering ------------------------------------------------------------
    def text(self) -> str:
        return render_text(self)

    def html(self) -> str:
        return render_html(self)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return self.text()

    def _ipython_display_(self) -> None:
        # check() displays its result itself (so a check in the middle of a cell shows too);
        # the displayhook then finds the same object at the end of that cell: show it once.
        shell = _ipython()
        count = getattr(shell, "execution_count", None)
        if self._shown_at is not None and self._shown_at == count:
            return
        self._shown_at = count
        from IPython.display import display

        display({"text/html": self.html(), "text/plain": self.text()}, raw=True)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "language": self.language, "seconds": round(self.seconds, 4),
                "exercises": [e.to_json() for e in self.exercises],
                "notes": [{"level": n.level, **n.message._asdict()} for n in self.notes]}


# -- the notebook entry point ------------------------------------------------------
@contextlib.contextmanager
def _one_thread():
    """The checks use tiny tensors: with torch's thread pool they wait on busy cores (seconds instead
    of tens of milliseconds). The student's own setting is restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def check(exercise: Any = None, *, language: str | None = None, _depth: int = 1) -> SelfCheckResult:
    """Run the public checks of ``exercise`` (or of every exercise of this notebook) and show them.

    ``_depth`` is how many frames up the student's code is (2 through ``autograder.check``).
    """
    start = time.perf_counter()
    namespace = _caller_namespace(_depth + 1)
    sink = io.StringIO()
    try:
        # Student code may print or warn; nbgrader scores a cell that writes to stderr 0.
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), warnings.catch_warnings(), \
                _one_thread():
            warnings.simplefilter("ignore")
            result = self_check(namespace, exercise, language=language)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - self-check never raises into the notebook
        result = SelfCheckResult([], _language(language, None), [Note("error", say(
            "selfcheck.failed", kind=type(exc).__name__, detail=exc))])
    result.seconds = time.perf_counter() - start
    _show(result)
    return result


@dataclass
class PublicScore:
    """``check("2.4", score=True)`` on a student's machine: the public checks' share of the points.

    Its repr is the bare number, as nbgrader reads a test cell's result (partial credit); the
    hidden checks only run where the instructor grades.
    """

    exercise: str
    points: float
    max_points: float
    passed: int
    total: int
    language: str = "zh"

    def __float__(self) -> float:
        return self.points

    def __repr__(self) -> str:
        return repr(self.points)

    def _repr_html_(self) -> str:
        from autograder.points import fraction

        line = say("selfcheck.public_score", exercise=self.exercise, passed=self.passed, total=self.total,
                   score=fraction(self.points, self.max_points)).get(self.language)
        return f"<div>{html.escape(line)}</div>"


def score(exercise: Any, *, language: str | None = None, _depth: int = 1) -> Any:
    """The exercise's points as its nbgrader test cell shows them (see :func:`autograder.check`).

    Never raises and never writes to stderr (nbgrader would score the cell 0).
    """
    from autograder import catalog as C
    from autograder.config import load_course

    namespace = _caller_namespace(_depth + 1)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde" and os.environ.get("AUTOGRADER_COURSE") \
            and C.hidden_available(load_course(os.environ["AUTOGRADER_COURSE"])):
        # The instructor's kit under nbgrader autograde: every check, seeded per student.
        from autograder.exports import nbgrader_cells as nbgrader_tests

        return nbgrader_tests.grade_exercise(str(exercise), namespace=namespace, language=language)
    course = load_course()
    _, ex = course.exercise(str(exercise))
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), warnings.catch_warnings(), \
                _one_thread():
            warnings.simplefilter("ignore")
            result = self_check(namespace, str(exercise), language=language, course=course)
        rows = [c for e in result.exercises for c in e.checks]
    except (Exception, SystemExit):  # noqa: BLE001 - a test cell never raises: it scores 0
        result, rows = None, []
    earned = sum(c.points for c in rows if c.passed)
    possible = sum(c.max_points for c in rows) or 1.0
    from autograder.points import total

    points = total([ex.points * earned / possible]) if rows else 0.0
    lang = _language(language, course)
    return PublicScore(ex.id, points, ex.points, sum(c.passed for c in rows), len(rows), lang)


def self_check(namespace: dict[str, Any], exercise: Any = None, *, language: str | None = None,
               notebook: str | None = None, course: Any = None,
               fingerprints: dict[str, Any] | None = None) -> SelfCheckResult:
    """The work of :func:`check` without the display: resolve, run, collect."""
    from autograder.config import load_course

    course = course or load_course()
    lang = _language(language, course)
    notes: list[Note] = []
    if language is not None and _language(language, None, strict=True) is None:
        notes.append(Note("info", say("selfcheck.unknown_language", language=repr(language), using=lang)))
    chosen, title, more = resolve(course, exercise, namespace, notebook or _notebook_name(namespace))
    notes.extend(more)
    results = run_public(namespace, chosen, course, fingerprints=fingerprints, notes=notes)
    return SelfCheckResult(results, lang, notes, title=title)


def run_public(namespace: dict[str, Any], exercises: list[Any], course: Any, *,
               fingerprints: dict[str, Any] | None = None, notes: list[Note] | None = None,
               on_call: Any = None) -> list[Any]:
    """Run the public checks of ``exercises`` (course.yml Exercise objects) over ``namespace``.

    ``on_call`` (for ``autograder check``'s clock) is told ("call", exercise ID, function)
    before each call into the student's code and None when it returns.
    """
    from autograder import catalog as C
    from autograder.catalog.fingerprints import FingerprintDiagnoser, copying_runner

    if not exercises:
        return []
    C.load_catalog(course, hidden=False, mistakes=False)
    # Copies of the inputs, as the sandbox would pass: an in-place edit cannot fool a check.
    runner = copying_runner(namespace)
    diagnoser = FingerprintDiagnoser(course.tolerances, fingerprints, course=course)
    results = []
    for ex in exercises:
        if not C.checks_for(ex.id, [C.Audience.PUBLIC]):
            if notes is not None:
                notes.append(Note("info", say("selfcheck.no_public_checks", exercise=ex.id)))
            continue
        try:
            results.append(C.run_exercise(ex, _timed(runner, ex, on_call),
                                          audiences=[C.Audience.PUBLIC],
                                          tolerances=course.tolerances, seed_parts=(C.PUBLIC_SEED,),
                                          diagnoser=diagnoser))
        except SystemExit:
            results.append(_whole_exercise(C, ex, C.Status.ERROR, say("selfcheck.exit")))
        except Exception as exc:  # noqa: BLE001 - a check broken by an odd return value
            results.append(_whole_exercise(C, ex, C.Status.ERROR, say(
                "selfcheck.unfinished", kind=type(exc).__name__, detail=exc)))
    if notes is not None and not diagnoser.data.get("exercises") \
            and any(r.status is not C.Status.PASSED for r in results):
        notes.append(Note("info", say("selfcheck.no_fingerprints")))
    return results


def _timed(runner: Any, ex: Any, on_call: Any) -> Any:
    """``runner``, telling ``on_call`` when each call into the student's code starts and ends."""
    if on_call is None:
        return runner

    def run(request: Any) -> Any:
        on_call(("call", ex.id, str(getattr(request, "function", ex.function))))
        try:
            return runner(request)
        finally:
            on_call(None)

    return run


def _whole_exercise(C: Any, ex: Any, status: Any, message: Any) -> Any:
    row = C.CheckResult(ex.id, "(all)", C.Audience.PUBLIC.value, "", say("selfcheck.public_checks"),
                        status, 0.0, ex.points, message=message)
    return C.ExerciseResult(ex.id, ex.function, 0.0, ex.points, status, [row])


# -- which exercises ---------------------------------------------------------------
def resolve(course: Any, exercise: Any, namespace: dict[str, Any],
            notebook: str | None = None) -> tuple[list[Any], str, list[Note]]:
    """(exercises to run, a title, notes). Accepts an ID ("2.4"), an assignment or a function name."""
    if exercise is None:
        assignment = guess_assignment(course, namespace, notebook)
        if assignment is None:
            known = ", ".join(e.id for e in course.exercises)
            return [], "", [Note("error", say("selfcheck.no_functions", known=known))]
        return list(assignment.exercises), assignment.id, []
    key = str(exercise).strip()
    for a in course.assignments:
        if key in (a.id, a.module):
            return list(a.exercises), a.id, []
        for e in a.exercises:
            if key in (e.id, e.function):
                return [e], e.id, []
    options = [e.id for e in course.exercises] + [e.function for e in course.exercises]
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    ids = ", ".join(e.id for e in course.exercises)
    if close:
        return [], key, [Note("error", say("selfcheck.unknown_exercise_guess", key=repr(key), guess=close[0], ids=ids))]
    return [], key, [Note("error", say("selfcheck.unknown_exercise", key=repr(key), ids=ids))]


def guess_assignment(course: Any, namespace: dict[str, Any], notebook: str | None = None) -> Any:
    """The notebook's assignment: by its file name when known, else by the exercise functions it defines."""
    if notebook:
        stem = Path(str(notebook)).stem
        for a in course.assignments:
            if stem == a.id or stem.startswith(a.id) or a.id in stem:
                return a
    best, best_share = None, 0.0
    for a in course.assignments:
        share = sum(callable(namespace.get(e.function)) for e in a.exercises) / len(a.exercises)
        if share > best_share:
            best, best_share = a, share
    return best


def _notebook_name(namespace: dict[str, Any]) -> str | None:
    # ipykernel puts the notebook path in __session__ (from jupyter_server's JPY_SESSION_NAME);
    # VS Code sets __vsc_ipynb_file__.
    for name in (namespace.get("__session__"), namespace.get("__vsc_ipynb_file__"),
                 os.environ.get("JPY_SESSION_NAME")):
        if isinstance(name, str) and name:
            return name
    return None


def _caller_namespace(depth: int) -> dict[str, Any]:
    shell = _ipython()
    ns = getattr(shell, "user_ns", None)
    if isinstance(ns, dict):
        return ns
    try:
        return sys._getframe(depth).f_globals
    except ValueError:
        return {}


def _ipython() -> Any:
    ipython = sys.modules.get("IPython")   # never import IPython just to learn it is absent
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # noqa: BLE001
        return None


def _language(language: str | None, course: Any, strict: bool = False) -> Any:
    """zh or en: the requested one ("zh-CN" counts as zh), else course.yml's, else zh."""
    if language is not None:
        lang = str(language).strip().lower()
        for known in LANGUAGES:
            if lang == known or lang.startswith(known + "-") or lang.startswith(known + "_"):
                return known
    if strict:
        return None
    if course is not None:
        return str(getattr(course.language, "value", course.language))
    return "zh"


def _show(result: SelfCheckResult) -> None:
    if _ipython() is not None:
        try:
            result._ipython_display_()
            return
        except Exception:  # noqa: BLE001 - fall back to text rather than fail
            pass
    if not hasattr(sys, "ps1"):
        # A script: nobody will echo the return value. (A REPL shows its repr itself.)
        try:
            print(result.text())
        except (OSError, ValueError):   # stdout closed or a broken pipe: nothing to show it on
            pass


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


def _summary(result: SelfCheckResult) -> str | None:
    lang = result.language
    if len(result.exercises) < 2:
        return None
    done = sum(_status(e) == "passed" for e in result.exercises)
    todo = sum(_status(e) == "not_attempted" for e in result.exercises)
    n = len(result.exercises)
    summary = text("selfcheck.summary", lang, title=result.title, done=done, n=n)
    return summary + (text("selfcheck.summary_todo", lang, todo=todo) if todo else "")


def render_text(result: SelfCheckResult) -> str:
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


def render_html(result: SelfCheckResult) -> str:
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
        out.append(f'<div class="note" data-level="{note.level}" style="color:{color}">{esc(note.message.get(lang))}</div>')
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


# -- ``autograder check NOTEBOOK.ipynb`` ---------------------------------------------
# The notebook runs in a child process (spawned: a fresh interpreter, on every OS) that
# reports each cell and each call into student code before it starts. The parent holds
# the clock: a cell or a call still running after ``limits.call_seconds``, or a whole run
# past ``limits.submission_seconds``, gets the child killed (SIGKILL stops a C loop as
# surely as ``while True: pass``) and one line naming the cell or the exercise; exit 1.
# ``check("2.4")`` inside JupyterLab runs in the student's kernel, where the stop button is.

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the saved notebook (.ipynb) to check")
    parser.add_argument("--language", choices=LANGUAGES, help="language of the messages (default: course.yml's)")
    parser.add_argument("--exercise", action="append", metavar="ID",
                        help="check only this exercise (repeatable; default: every exercise of the notebook)")


def run(args: argparse.Namespace) -> int:
    from autograder.config import load_course
    from autograder.errors import UnknownExercise
    from autograder.notebook import read_notebook

    read_notebook(args.notebook)             # NotebookError: the CLI prints it and exits 2
    course = load_course()
    lang = _language(args.language, course)
    chosen: list[str] = []
    for ex_id in args.exercise or []:        # a typo fails before the notebook runs
        found, _, problems = resolve(course, ex_id, {})
        if problems:
            raise UnknownExercise(problems[0].message.en)
        chosen.extend(e.id for e in found if e.id not in chosen)
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else 120
    return supervise(str(Path(args.notebook).resolve()), chosen, lang, course.limits, tty=tty, width=width)


#: How long the child may take to start (a fresh interpreter importing torch) before the clocks run.
STARTUP_SECONDS = 120


class _Step:
    """What the child is running now: a cell or a call into an exercise's function (None: the kit's own code)."""

    def __init__(self) -> None:
        self.label: tuple[str, ...] | None = None
        self.last: tuple[str, ...] | None = None     # the latest cell or call, for a message between steps
        self.since = time.monotonic()


def supervise(notebook: str, exercises: list[str], lang: str, limits: Any, *, tty: bool = False,
              width: int = 120) -> int:
    """Run :func:`_check_in_child` under the course's time limits; print its table; the exit code."""
    import multiprocessing

    from autograder.errors import AutograderError, UnknownExercise

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_check_in_child, args=(send, notebook, exercises, lang, tty, width),
                       name="autograder-check", daemon=True)
    proc.start()
    send.close()
    # Until the child has imported torch and read the notebook, only STARTUP_SECONDS bound it:
    # a slow first import on a student's laptop is not the notebook's time.
    run_deadline = time.monotonic() + STARTUP_SECONDS
    step = _Step()
    try:
        while True:
            deadline = run_deadline
            if step.label is not None:
                deadline = min(deadline, step.since + limits.call_seconds)
            if not receive.poll(max(0.0, deadline - time.monotonic())):
                _stop(proc)
                whole = step.label is None or deadline == run_deadline
                print(_timeout_message(step.label or step.last, lang, limits, whole=whole,
                                       running=step.label is not None), flush=True)
                return 1
            try:
                message = receive.recv()
            except (EOFError, OSError):     # the child died without a word (killed, out of memory, os._exit)
                proc.join(5)
                print(_died_message(step.label or step.last, proc.exitcode, lang), flush=True)
                return 1
            kind = message[0]
            if kind == "ready":
                run_deadline = time.monotonic() + limits.submission_seconds
            elif kind == "step":
                step.label, step.since = message[1], time.monotonic()
                step.last = step.label or step.last
            elif kind == "done":
                sys.stdout.write(message[2])
                sys.stdout.flush()
                proc.join(5)
                return int(message[1])
            elif kind == "user-error":
                proc.join(5)
                error = UnknownExercise if message[1] == "UnknownExercise" else AutograderError
                raise error(message[2], hint=message[3])
            else:                            # "crash": the kit itself failed; show its traceback
                proc.join(5)
                raise RuntimeError(f"self-check failed in its worker process:\n{message[1]}")
    finally:
        if proc.is_alive():
            _stop(proc)
        receive.close()


def _stop(proc: Any) -> None:
    proc.kill()
    proc.join(10)


def _step_text(label: tuple[str, ...] | None, lang: str) -> str:
    if label is None:
        return text("selfcheck.step.itself", lang)
    if label[0] == "cell":
        return text("selfcheck.step.cell", lang, cell=label[1], first=label[2])
    return text("selfcheck.step.call", lang, exercise=label[1], function=label[2])


def _timeout_message(label: tuple[str, ...] | None, lang: str, limits: Any, *, whole: bool,
                     running: bool = True) -> str:
    what = _step_text(label, lang)
    if whole:
        key = "selfcheck.whole_timeout_running" if running else "selfcheck.whole_timeout_after"
        return "✗ " + text(key, lang, seconds=f"{limits.submission_seconds:g}", what=what)
    return "✗ " + text("selfcheck.call_timeout", lang, seconds=f"{limits.call_seconds:g}", what=what)


def _died_message(label: tuple[str, ...] | None, exitcode: int | None, lang: str) -> str:
    what = _step_text(label, lang)
    return "✗ " + text("selfcheck.died", lang, what=what, exitcode=exitcode)


def _cell_label(cell: Any) -> tuple[str, ...]:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    # Counted from 1, text cells included, as a student counts them in JupyterLab.
    return ("cell", str(cell.index + 1), first[:60] + ("…" if len(first) > 60 else ""))


def _check_in_child(conn: Any, notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int) -> None:
    """The child's side: run the notebook and the checks, send ("done", exit code, table text)."""
    import traceback

    from autograder.errors import AutograderError

    def step(label: Any) -> None:
        conn.send(("ready",) if label == "ready" else ("step", label))

    try:
        code, text = _check_notebook(notebook, exercise_ids, lang, tty, width, step)
        conn.send(("done", code, text))
    except AutograderError as exc:
        conn.send(("user-error", type(exc).__name__, exc.message, exc.hint))
    except BaseException:  # noqa: BLE001 - the parent reports it
        conn.send(("crash", traceback.format_exc()))
    finally:
        conn.close()


def _check_notebook(notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int,
                    step: Any = None) -> tuple[int, str]:
    """Execute the notebook, run the public checks: (exit code, the rendered table)."""
    from autograder.config import load_course
    from autograder.errors import UnknownExercise
    from autograder.notebook import read_notebook

    import torch  # noqa: F401 - imported before the clocks start: a slow first import is no endless loop

    nb = read_notebook(notebook)
    course = load_course()
    chosen = [course.exercise(i)[1] for i in exercise_ids]
    title = ", ".join(exercise_ids)
    from autograder import catalog as C

    C.load_catalog(course, hidden=False, mistakes=False)
    if step is not None:
        step("ready")
    namespace, notes = execute_notebook(nb, Path(notebook).parent, on_cell=step)
    if not chosen:
        assignment = guess_assignment(course, namespace, Path(notebook).name)
        if assignment is None:
            raise UnknownExercise(f"{notebook}: no exercise of course.yml is defined in this notebook",
                                  hint="pass --exercise ID, or check the notebook's file name")
        chosen, title = list(assignment.exercises), assignment.id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            results = run_public(namespace, chosen, course, notes=notes, on_call=step)
    result = SelfCheckResult(results, lang, notes, title=title)
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, width=width, force_terminal=tty, no_color=not tty)
    print_table(result, Path(notebook).name, console=console)
    return (0 if result.passed else 1), buffer.getvalue()


def execute_notebook(nb: Any, cwd: Path, on_cell: Any = None) -> tuple[dict[str, Any], list[Note]]:
    """Run the notebook's code cells in a fresh namespace, in the notebook's folder.

    A cell that raises is reported and skipped, as a student re-running cells would see.
    Output and warnings of the cells are swallowed: the table is the output. ``on_cell``
    is told each cell (a label) before it runs, and None after.
    """
    from autograder.notebook import code_cells, fresh_namespace

    os.environ.setdefault("MPLBACKEND", "Agg")     # plt.show() must not open windows
    namespace = fresh_namespace()
    notes: list[Note] = []
    old_cwd = os.getcwd()
    sink = io.StringIO()
    cells = code_cells(nb)
    if on_cell is not None and any("matplotlib" in c.code for c in cells):
        with contextlib.suppress(Exception):    # its first import builds a font cache: not the cell's time
            import matplotlib.pyplot  # noqa: F401
    # As in a kernel started next to the notebook: its folder is the cwd and importable.
    sys.path.insert(0, str(cwd))
    try:
        os.chdir(cwd)
        for cell in cells:
            if cell.skipped:
                notes.append(Note("info", say("selfcheck.cell_not_run", cell=cell.index + 1, detail=cell.skipped)))
                continue
            if not cell.code.strip():
                continue
            if on_cell is not None:
                on_cell(_cell_label(cell))
            try:
                code = compile(cell.code, f"<cell {cell.index}>", "exec")
                with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    warnings.simplefilter("ignore")
                    exec(code, namespace)  # noqa: S102 - the student's own notebook, on their machine
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - report and go on, as a kernel would
                first = str(exc).splitlines()[0][:200] if str(exc) else ""
                notes.append(Note("info", say("selfcheck.cell_raised", cell=cell.index + 1,
                                              kind=type(exc).__name__, detail=first)))
            finally:
                if on_cell is not None:
                    on_cell(None)
            sink.seek(0)
            sink.truncate()
    finally:
        os.chdir(old_cwd)
        if str(cwd) in sys.path:
            sys.path.remove(str(cwd))
    return namespace, notes


def print_table(result: SelfCheckResult, name: str, console: Any = None) -> None:
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
    table.columns[1].no_wrap = True
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
            table.add_row(e.exercise, r.check, f"{mark} {word}",
                          escape(r.message.get(lang)) if r.message is not None and not r.passed else "",
                          f"[yellow]{escape(r.mistake_message.get(lang))}[/]" if r.mistake_message else "")
    console.print(table)
    done = sum(_status(e) == "passed" for e in result.exercises)
    n = len(result.exercises)
    verdict = f"[green]{text('selfcheck.head.passed', lang)}[/]" if result.passed else \
        f"[red]{text('selfcheck.exercises_pass', lang, done=done, n=n)}[/]"
    console.print(verdict)


# -- the students' ``autograder`` command ------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """``autograder check NOTEBOOK``, as the student bundle installs it.

    The kit's own command (:mod:`autograder.cli`) imports the grading modules, which the
    bundle does not ship; this one needs only the self-check's files.
    """
    from autograder import __version__
    from autograder.errors import run_command, use_course

    parser = argparse.ArgumentParser(
        prog="autograder", description="The course's self-check: run the public checks on a saved notebook.",
        epilog="Example: autograder check 02_attention.ipynb --exercise 2.1 --language en")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} (self-check)")
    parser.add_argument("--course", metavar="FILE", help="course.yml to use (default: the installed one)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_arguments(sub.add_parser("check", help="run the public self-checks on a saved notebook",
                                 description="Run the public self-checks on a saved notebook; exit 0 when all pass."))

    def work() -> int:
        args = parser.parse_args(argv)
        use_course(args.course)
        if args.command != "check":
            parser.print_help()
            return 2
        return run(args)

    return run_command(work)


if __name__ == "__main__":
    sys.exit(main())
