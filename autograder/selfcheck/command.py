"""``autograder check NOTEBOOK``: run a saved notebook in a separate process, supervised (a cell or a
call still running after ``limits.call_seconds`` is stopped and named), then its public checks.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import multiprocessing
import os
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from autograder import __version__
from autograder import catalog as C
from autograder.errors import AutograderError, UnknownExercise, run_command, use_course
from autograder.messages import Msg, say, text
from autograder.notebook import code_cells, fresh_namespace, read_notebook, skip_unused_schema_formats
from autograder.selfcheck import submit as submitting
from autograder.selfcheck.kernel import (
    LANGUAGES,
    Note,
    SelfCheckResult,
    guess_assignment,
    language_of,
    resolve,
    run_public,
)
from autograder.selfcheck.render import print_table
from autograder.selfcheck.timelimit import TimeLimitExceeded, stopped_in, time_limit


# -- ``autograder check NOTEBOOK.ipynb`` ---------------------------------------------
# The notebook runs in a child process (spawned: a fresh interpreter, on every OS) that
# reports each cell and each call into student code before it starts. The child stops a cell
# or a call still running after ``limits.call_seconds`` itself (autograder.selfcheck.timelimit),
# names it, and goes on: every exercise is still checked. The parent holds a second clock: a
# step still running KILL_GRACE_SECONDS later (one long C call), or a whole run past
# ``limits.submission_seconds``, gets the child killed (SIGKILL stops a C loop as surely as
# ``while True: pass``) and one line naming the cell or the exercise; exit 1.
# ``check("2.4")`` inside JupyterLab runs in the student's kernel under the same call limit.

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the saved notebook (.ipynb) to check")
    parser.add_argument("--language", choices=LANGUAGES, help="language of the messages (default: course.yml's)")
    parser.add_argument("--exercise", action="append", metavar="ID",
                        help="check only this exercise (repeatable; default: every exercise of the notebook)")


def run(args: argparse.Namespace) -> int:
    from autograder.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    skip_unused_schema_formats()
    read_notebook(args.notebook)             # NotebookError: the CLI prints it and exits 2
    course = load_course()
    lang = language_of(args.language, course)
    chosen: list[str] = []
    for ex_id in args.exercise or []:        # a typo fails before the notebook runs
        found, _, problems = resolve(course, ex_id, {})
        if problems:
            # In the student's language, and in a terminal's terms (--exercise, not check(...)).
            ids = [e.id for e in course.exercises]
            close = difflib.get_close_matches(str(ex_id), ids + [e.function for e in course.exercises], n=1,
                                              cutoff=0.5)
            guess = next((e.id for e in course.exercises if close and close[0] in (e.id, e.function)), None)
            key = "selfcheck.cli_unknown_exercise_guess" if guess else "selfcheck.cli_unknown_exercise"
            raise UnknownExercise(text(key, lang, key=repr(ex_id), guess=guess or "", ids=", ".join(ids)))
        chosen.extend(e.id for e in found if e.id not in chosen)
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else 120
    return supervise(str(Path(args.notebook).resolve()), chosen, lang, course.limits, tty=tty, width=width)


#: How much longer than ``limits.call_seconds`` the parent waits before it kills the child.
KILL_GRACE_SECONDS = 5.0

#: How long the child may take to start (a fresh interpreter importing torch) before the clocks run.
STARTUP_SECONDS = 120


class _Step:
    """What the child is running now: a cell or a call into an exercise's function (None: the kit's own code)."""

    def __init__(self) -> None:
        self.label: tuple[str, ...] | None = None
        self.last: tuple[str, ...] | None = None     # the latest cell or call, for a message between steps
        self.since = time.monotonic()
        self.budget: float | None = None              # its own time limit (a demonstration cell's), else the call's


def supervise(notebook: str, exercises: list[str], lang: str, limits: Any, *, tty: bool = False,
              width: int = 120) -> int:
    """Run :func:`_check_in_child` under the course's time limits; print its table; the exit code."""
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
                # The child stops a cell or a call itself at call_seconds and goes on; this clock, a little
                # later, is for code that a signal cannot stop (one long C call).
                deadline = min(deadline, step.since + (step.budget or limits.call_seconds) + KILL_GRACE_SECONDS)
            if not receive.poll(max(0.0, deadline - time.monotonic())):
                _stop(proc)
                whole = step.label is None or deadline == run_deadline
                print(_timeout_message(step.label or step.last, lang, limits, whole=whole,
                                       running=step.label is not None, budget=step.budget), flush=True)
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
                step.budget = message[2] if len(message) > 2 else None
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
                     running: bool = True, budget: float | None = None) -> str:
    what = _step_text(label, lang)
    if whole:
        key = "selfcheck.whole_timeout_running" if running else "selfcheck.whole_timeout_after"
        return "✗ " + text(key, lang, seconds=f"{limits.submission_seconds:g}", what=what)
    if budget is not None and label is not None and label[0] == "cell":   # a demonstration cell's own budget
        return "✗ " + text("selfcheck.demo_stopped", lang, cell=label[1], first=label[2], seconds=f"{budget:g}",
                           where="")
    return "✗ " + text("selfcheck.call_timeout", lang, seconds=f"{limits.call_seconds:g}", what=what)


def _died_message(label: tuple[str, ...] | None, exitcode: int | None, lang: str) -> str:
    what = _step_text(label, lang)
    return "✗ " + text("selfcheck.died", lang, what=what, exitcode=exitcode)


def _cell_label(cell: Any) -> tuple[str, str, str]:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    # Counted from 1, text cells included, as a student counts them in JupyterLab.
    return ("cell", str(cell.index + 1), first[:60] + ("…" if len(first) > 60 else ""))


def _check_in_child(conn: Any, notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int) -> None:
    """The child's side: run the notebook and the checks, send ("done", exit code, table text)."""
    def step(label: Any, budget: float | None = None) -> None:
        conn.send(("ready",) if label == "ready" else ("step", label, budget))

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
    from autograder.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    import torch  # noqa: F401 - imported before the clocks start: a slow first import is no endless loop

    nb = read_notebook(notebook)
    course = load_course()
    chosen = [course.exercise(i)[1] for i in exercise_ids]
    title = ", ".join(exercise_ids)

    C.load_catalog(course, hidden=False, mistakes=False)
    if step is not None:
        step("ready")
    functions = {e.function for e in course.exercises}
    namespace, notes = execute_notebook(nb, Path(notebook).parent, on_cell=step, seconds=course.limits.call_seconds,
                                        functions=functions, demo_seconds=course.limits.demo_seconds)
    if not chosen:
        assignment = guess_assignment(course, namespace, Path(notebook).name, nb=nb)
        if assignment is None:
            raise UnknownExercise(text("selfcheck.cli_no_exercise", lang, notebook=notebook),
                                  hint=text("selfcheck.cli_no_exercise_hint", lang))
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


def execute_notebook(nb: Any, cwd: Path, on_cell: Any = None, seconds: float | None = None,
                     functions: set[str] | None = None,
                     demo_seconds: float | None = None) -> tuple[dict[str, Any], list[Note]]:
    """Run the notebook's code cells in a fresh namespace, in the notebook's folder.

    A cell that raises is reported and skipped, as a student re-running cells would see; a cell still
    running after ``seconds`` (one of the chapter's demonstration cells: ``demo_seconds``, its own budget:
    a training run takes longer than any call) is stopped and named (a demonstration cell as such, and
    the student's function among ``functions`` it was stopped in), and the cells after it run as usual.
    Output and warnings of the cells are swallowed: the table is the output. ``on_cell``
    is told each cell (a label) before it runs, and None after.
    """
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
            demo = _is_demo(cell)
            budget = demo_seconds if demo and demo_seconds else seconds
            if on_cell is not None:
                if demo and budget:
                    on_cell(_cell_label(cell), budget)
                else:
                    on_cell(_cell_label(cell))
            try:
                code = compile(cell.code, f"<cell {cell.index}>", "exec")
                with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                        time_limit(budget):
                    warnings.simplefilter("ignore")
                    exec(code, namespace)  # the student's own notebook, on their machine
            except TimeLimitExceeded as exc:
                notes.append(Note("error", _cell_stopped(cell, exc, functions or set(), budget or 0)))
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


def _cell_stopped(cell: Any, exc: BaseException, functions: set[str], seconds: float) -> Msg:
    """What a stopped cell says: its number and first line, whether it is one of the chapter's
    demonstration cells (locked, not an exercise's), and the student's function it was stopped in."""
    _kind, number, line = _cell_label(cell)
    where = stopped_in(exc, functions)        # the cells were compiled as "<cell N>"
    if _is_demo(cell):
        # The chapter's own experiment ran past its budget: it calls the student's functions many times, so the
        # one it was in says nothing of a loop (said so, not guessed).
        return say("selfcheck.demo_stopped", cell=number, first=line, seconds=f"{seconds:g}",
                   where=say("selfcheck.demo_stopped_in", function=where) if where else "")
    first: str | Msg = line
    if where:
        return say("selfcheck.cell_stopped_in", cell=number, first=first, seconds=f"{seconds:g}", function=where)
    return say("selfcheck.cell_stopped", cell=number, first=first, seconds=f"{seconds:g}")


def _is_demo(cell: Any) -> bool:
    """One of the chapter's demonstration cells: locked by the release, of no exercise (a training run, an
    experiment), not a cell the student writes."""
    gid = getattr(cell, "grade_id", None) or ""
    return bool(gid) and not gid.startswith("ex")


# -- the students' ``autograder`` command ------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """``autograder check NOTEBOOK``, as the student bundle installs it.

    The kit's own command (:mod:`autograder.cli`) imports the grading modules, which the
    bundle does not ship; this one needs only the self-check's files.
    """
    parser = argparse.ArgumentParser(
        prog="autograder", description="The course's self-check: run the public checks on a saved notebook.",
        epilog="Example: autograder check NOTEBOOK.ipynb --exercise 2.1 --language en (NOTEBOOK: yours, as saved)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} (self-check)")
    parser.add_argument("--course", metavar="FILE", help="course.yml to use (default: the installed one)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_arguments(sub.add_parser("check", help="run the public self-checks on a saved notebook",
                                 description="Run the public self-checks on a saved notebook; exit 0 when all pass."))

    submitting.add_arguments(sub.add_parser("submit", help="hand a saved notebook to the course's grading service",
                                            description="Hand a saved notebook to the course's grading service and "
                                                        "show its verdict."))

    def work() -> int:
        args = parser.parse_args(argv)
        use_course(args.course)
        if args.command == "submit":
            return submitting.run(args)
        if args.command != "check":
            parser.print_help()
            return 2
        return run(args)

    return run_command(work)


if __name__ == "__main__":
    sys.exit(main())
