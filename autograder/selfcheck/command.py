"""``autograder check NOTEBOOK``: run a saved notebook in a separate process, supervised (a cell or a
call still running after ``limits.call_seconds`` is stopped and named), then its public checks, all within
``limits.submission_seconds``: the checks have a time of their own that no cell can spend, and the table
lists every exercise of the notebook, whatever stopped the run.
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
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autograder import catalog as C
from autograder.core.errors import AutograderError, UnknownExercise, run_command, use_course
from autograder.core.messages import Msg, say, text
from autograder.course.notebook import code_cells, read_notebook, skip_unused_schema_formats
from autograder.core.version import __version__
from autograder.inside.namespace import fresh_namespace
from autograder.selfcheck import submit as submitting
from autograder.selfcheck.kernel import (
    LANGUAGES,
    ChecksTime,
    Note,
    Progress,
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
# or a call still running after its limit itself (autograder.selfcheck.timelimit), names it,
# and goes on. Of ``limits.submission_seconds`` the checks keep a time of their own
# (checks_seconds: one call limit per exercise, and a little); the cells share the rest, no cell
# past what is left of it (a demonstration cell's demo_seconds included), and once it is spent the
# cells left are skipped and named: so a loop in a cell costs the checks nothing, and every exercise
# is still checked. The child tells the parent the exercises it is to check, its notes and each
# exercise's result as it comes. The parent holds a second clock: a step still running
# KILL_GRACE_SECONDS past its limit (one long C call), or a whole run past submission_seconds, gets
# the child killed (SIGKILL stops a C loop as surely as ``while True: pass``), one line naming the
# cell or the exercise, and the table of what the child told it: every exercise, those not checked
# marked so and why; exit 1. ``check("2.4")`` inside JupyterLab runs in the student's kernel under
# the same call limit.

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the saved notebook (.ipynb) to check")
    parser.add_argument("--language", choices=LANGUAGES, help="language of the messages (default: course.yml's)")
    parser.add_argument("--exercise", action="append", metavar="ID",
                        help="check only this exercise (repeatable; default: every exercise of the notebook)")


def run(args: argparse.Namespace) -> int:
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

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


#: How much longer than a step's own limit the parent waits before it kills the child.
KILL_GRACE_SECONDS = 5.0

#: How long the child may take to start (a fresh interpreter importing torch) before the clocks run.
STARTUP_SECONDS = 120

#: The checks' own time beyond one ``limits.call_seconds`` per exercise (a function that loops is stopped once
#: and not called again): the public checks of an assignment take a second or two when nothing loops.
CHECKS_SECONDS = 5.0

#: Time kept, out of the notebook's share, for each exercise's own cell still to run (where the student's
#: function is defined; a definition takes no time): a stopped cell never leaves an exercise undefined.
ANSWER_CELL_SECONDS = 1.0


def checks_seconds(limits: Any, exercises: int) -> float:
    """The checks' own time out of ``limits.submission_seconds``, which no cell can spend: one call limit per
    exercise (each may loop once) and CHECKS_SECONDS, at most half of the whole run."""
    return min(exercises * limits.call_seconds + CHECKS_SECONDS, limits.submission_seconds / 2)


@dataclass(frozen=True)
class NotebookTime:
    """The notebook's share of ``limits.submission_seconds``: ``seconds`` in all, until ``deadline``
    (time.monotonic()); the other ``checks`` seconds are the checks' own."""

    deadline: float
    seconds: float
    checks: float


class _Step:
    """What the child is running now: a cell or a call into an exercise's function (None: the kit's own code)."""

    def __init__(self) -> None:
        self.label: tuple[str, ...] | None = None
        self.last: tuple[str, ...] | None = None     # the latest cell or call, for a message between steps
        self.since = time.monotonic()
        self.budget: float | None = None              # a cell's own time limit (else the call's)
        self.why: str | None = None                   # what set it: "call", "demo" or "share" (see execute_notebook)


class _Told:
    """What the child told the parent so far: the exercises it is to check, the notes and the results as each
    exercise finished, so that a child the parent must kill still leaves a table listing every exercise."""

    def __init__(self) -> None:
        self.progress = Progress()
        self.notes: list[Note] = []

    def plan(self, title: str, exercises: list[tuple[str, str, float]]) -> None:
        self.progress.title = title
        self.progress.exercises = [SimpleNamespace(id=i, function=f, points=p) for i, f, p in exercises]

    def table(self, why: Msg, status: str, lang: str, notebook: str, tty: bool, width: int) -> str:
        """The table of a run that did not finish: each exercise's result, or not checked and ``why``."""
        if not self.progress.exercises:
            return ""
        result = SelfCheckResult(self.progress.listed(why, status), lang, self.notes, title=self.progress.title)
        return _render(result, Path(notebook).name, tty, width)


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
    told = _Told()
    try:
        while True:
            deadline = run_deadline
            if step.label is not None:
                # The child stops a cell or a call itself within its limit and goes on; this clock, a little
                # later, is for code that a signal cannot stop (one long C call).
                deadline = min(deadline, step.since + (step.budget or limits.call_seconds) + KILL_GRACE_SECONDS)
            if not receive.poll(max(0.0, deadline - time.monotonic())):
                _stop(proc)
                whole = step.label is None or deadline == run_deadline
                print(_timeout_message(step.label or step.last, lang, limits, whole=whole,
                                       running=step.label is not None, budget=step.budget, why=step.why),
                      flush=True)
                _print(told.table(say("selfcheck.why.stopped", what=_step_said(step.label or step.last)),
                                  "timeout", lang, notebook, tty, width))
                return 1
            try:
                message = receive.recv()
            except (EOFError, OSError):     # the child died without a word (killed, out of memory, os._exit)
                proc.join(5)
                print(_died_message(step.label or step.last, proc.exitcode, lang), flush=True)
                _print(told.table(say("selfcheck.why.died", what=_step_said(step.label or step.last)),
                                  "crashed", lang, notebook, tty, width))
                return 1
            if message[0] == "ready":
                # The child keeps to submission_seconds itself (the notebook's share, then the checks' own time).
                run_deadline = time.monotonic() + limits.submission_seconds + KILL_GRACE_SECONDS
                continue
            code = _take(message, proc, step, told)
            if code is not None:
                return code
    finally:
        if proc.is_alive():
            _stop(proc)
        receive.close()


def _take(message: Any, proc: Any, step: _Step, told: _Told) -> int | None:
    """One message of the child (but "ready") taken in: the exit code once it is done, else None."""
    kind = message[0]
    if kind == "step":
        step.label, step.since = message[1], time.monotonic()
        step.budget, step.why = message[2], message[3]
        step.last = step.label or step.last
    elif kind == "plan":
        told.plan(message[1], message[2])
    elif kind == "note":
        told.notes.append(message[1])
    elif kind == "result":
        told.progress.results.append(message[1])
    elif kind == "done":
        _print(message[2])
        proc.join(5)
        return int(message[1])
    elif kind == "user-error":
        proc.join(5)
        error = UnknownExercise if message[1] == "UnknownExercise" else AutograderError
        raise error(message[2], hint=message[3])
    else:                            # "crash": the kit itself failed; show its traceback
        proc.join(5)
        raise RuntimeError(f"self-check failed in its worker process:\n{message[1]}")
    return None


def _stop(proc: Any) -> None:
    proc.kill()
    proc.join(10)


def _print(table: str) -> None:
    sys.stdout.write(table)
    sys.stdout.flush()


def _render(result: SelfCheckResult, name: str, tty: bool, width: int) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, width=width, force_terminal=tty, no_color=not tty)
    print_table(result, name, console=console)
    return buffer.getvalue()


def _step_said(label: tuple[str, ...] | None) -> Msg:
    if label is None:
        return say("selfcheck.step.itself")
    if label[0] == "cell":
        return say("selfcheck.step.cell", cell=label[1], first=label[2])
    return say("selfcheck.step.call", exercise=label[1], function=label[2])


def _step_text(label: tuple[str, ...] | None, lang: str) -> str:
    return _step_said(label).get(lang)


def _timeout_message(label: tuple[str, ...] | None, lang: str, limits: Any, *, whole: bool,
                     running: bool = True, budget: float | None = None, why: str | None = None) -> str:
    what = _step_text(label, lang)
    if whole:
        key = "selfcheck.whole_timeout_running" if running else "selfcheck.whole_timeout_after"
        return "✗ " + text(key, lang, seconds=f"{limits.submission_seconds:g}", what=what)
    if budget is not None and label is not None and label[0] == "cell" and why in ("demo", "share"):
        # A cell with a time of its own (a demonstration cell's, or what was left of the notebook's share).
        return "✗ " + text("selfcheck.cell_killed", lang, what=what, seconds=f"{budget:.3g}")
    return "✗ " + text("selfcheck.call_timeout", lang, seconds=f"{limits.call_seconds:g}", what=what)


def _died_message(label: tuple[str, ...] | None, exitcode: int | None, lang: str) -> str:
    what = _step_text(label, lang)
    return "✗ " + text("selfcheck.died", lang, what=what, exitcode=exitcode)


def _cell_label(cell: Any) -> tuple[str, str, str]:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    # Counted from 1, text cells included, as a student counts them in JupyterLab.
    return ("cell", str(cell.index + 1), first[:60] + ("…" if len(first) > 60 else ""))


class _Stream:
    """The child's side of the pipe: each message as it happens, the notes added since the last one first."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.notes: list[Note] = []
        self._sent = 0

    def send(self, message: tuple[Any, ...]) -> None:
        while self._sent < len(self.notes):
            self._put(("note", self.notes[self._sent]))
            self._sent += 1
        self._put(message)

    def _put(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - one that cannot be pickled: the finished table still shows it
            pass


def _check_in_child(conn: Any, notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int) -> None:
    """The child's side: run the notebook and the checks, send ("done", exit code, table text)."""
    # The notebook's own check() and submit() cells do nothing here: the checks run once, after the cells, in
    # the table (and a check inside a cell would set a call's time limit over the cell's).
    kit = sys.modules["autograder"]
    kit.check = _not_here       # type: ignore[attr-defined]
    kit.submit = _not_here      # type: ignore[attr-defined]
    stream = _Stream(conn)
    try:
        code, table = _check_notebook(notebook, exercise_ids, lang, tty, width, stream)
        stream.send(("done", code, table))
    except AutograderError as exc:
        stream.send(("user-error", type(exc).__name__, exc.message, exc.hint))
    except BaseException:  # noqa: BLE001 - the parent reports it
        stream.send(("crash", traceback.format_exc()))
    finally:
        conn.close()


def _not_here(*_args: Any, **_kwargs: Any) -> None:
    return None


def _check_notebook(notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int,
                    stream: _Stream | None = None) -> tuple[int, str]:
    """Execute the notebook, run the public checks: (exit code, the rendered table).

    Within ``limits.submission_seconds`` from the moment the notebook starts: the cells get what the checks'
    own time (:func:`checks_seconds`) leaves, and the checks get the rest; ``stream`` tells the parent each
    step, the exercises to check, each note and each exercise's result as it comes.
    """
    from autograder.course.config import grade_id, load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    import torch  # noqa: F401 - imported before the clocks start: a slow first import is no endless loop

    def tell(*message: Any) -> None:
        if stream is not None:
            stream.send(message)

    nb = read_notebook(notebook)
    course = load_course()
    limits = course.limits
    chosen = [course.exercise(i)[1] for i in exercise_ids]
    title = ", ".join(exercise_ids)
    if not chosen:
        # What the notebook says it is (its metadata, its cells' ids, its file name); else its functions decide,
        # once the cells have run.
        assignment = guess_assignment(course, {}, Path(notebook).name, nb=nb)
        planned, planned_title = (list(assignment.exercises), assignment.id) if assignment else ([], "")
    else:
        planned, planned_title = chosen, title
    checks = checks_seconds(limits, len(planned) or max(len(a.exercises) for a in course.assignments))

    C.load_catalog(course, hidden=False, mistakes=False)
    start = time.monotonic()
    tell("ready")
    if planned:
        tell("plan", planned_title, [(e.id, e.function, e.points) for e in planned])
    share = NotebookTime(start + limits.submission_seconds - checks, limits.submission_seconds - checks, checks)
    notes: list[Note] = stream.notes if stream is not None else []
    functions = {e.function for e in course.exercises}
    namespace, _ = execute_notebook(nb, Path(notebook).parent, on_cell=tell_step(tell), seconds=limits.call_seconds,
                                    functions=functions, demo_seconds=limits.demo_seconds, share=share,
                                    answers={grade_id(e.id) for e in course.exercises}, notes=notes)
    if not chosen:
        assignment = guess_assignment(course, namespace, Path(notebook).name, nb=nb)
        if assignment is None:
            raise UnknownExercise(text("selfcheck.cli_no_exercise", lang, notebook=notebook),
                                  hint=text("selfcheck.cli_no_exercise_hint", lang))
        chosen, title = list(assignment.exercises), assignment.id
        if [e.id for e in chosen] != [e.id for e in planned]:
            tell("plan", title, [(e.id, e.function, e.points) for e in chosen])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            results = run_public(namespace, chosen, course, notes=notes, on_call=tell_step(tell),
                                 on_result=lambda result: tell("result", result),
                                 time_left=ChecksTime(start + limits.submission_seconds, checks))
    result = SelfCheckResult(results, lang, notes, title=title)
    return (0 if result.passed else 1), _render(result, Path(notebook).name, tty, width)


def tell_step(tell: Any) -> Any:
    """The ``on_cell`` / ``on_call`` callback that tells the parent each step: a cell (with its time limit and
    what set it) or a call, and None after it."""
    def step(label: Any, budget: float | None = None, why: str | None = None) -> None:
        tell("step", label, budget, why)

    return step


def execute_notebook(nb: Any, cwd: Path, on_cell: Any = None, seconds: float | None = None,
                     functions: set[str] | None = None, demo_seconds: float | None = None,
                     share: NotebookTime | None = None, answers: set[str] | None = None,
                     notes: list[Note] | None = None) -> tuple[dict[str, Any], list[Note]]:
    """Run the notebook's code cells in a fresh namespace, in the notebook's folder.

    A cell that raises is reported and skipped, as a student re-running cells would see; a cell still
    running after ``seconds`` (one of the chapter's demonstration cells: ``demo_seconds``, its own budget:
    a training run takes longer than any call) is stopped and named (a demonstration cell as such, and
    the student's function among ``functions`` it was stopped in), and the cells after it run as usual.
    With ``share`` (the notebook's share of the whole run's time) no cell runs past what is left of it, less
    ANSWER_CELL_SECONDS for each exercise's own cell still to come (``answers``: their nbgrader grade ids), and
    once it is spent the cells left are skipped and named. Output and warnings of the cells are swallowed: the
    table is the output. ``on_cell`` is told each cell (a label, its time limit and what set it: "call",
    "demo" or "share") before it runs, and None after. The notes go to ``notes`` as they come.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")     # plt.show() must not open windows
    namespace = fresh_namespace()
    notes = notes if notes is not None else []
    answers = answers or set()
    old_cwd = os.getcwd()
    sink = io.StringIO()
    cells = code_cells(nb)
    if on_cell is not None and any("matplotlib" in c.code for c in cells):
        with contextlib.suppress(Exception):    # its first import builds a font cache: not the cell's time
            import matplotlib.pyplot  # noqa: F401
    answers_left = sum(1 for c in cells if not c.skipped and c.code.strip() and _grade_id(c) in answers)
    spent: list[str] = []        # the cells skipped once the notebook's share was spent
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
            if _grade_id(cell) in answers:
                answers_left -= 1
            limit = _cell_budget(cell, seconds, demo_seconds, share, answers_left)
            if limit is None:
                spent.append(str(cell.index + 1))
                continue
            budget, why = limit
            _run_cell(cell, namespace, sink, budget, why, on_cell=on_cell, functions=functions, share=share,
                      notes=notes)
            sink.seek(0)
            sink.truncate()
    finally:
        os.chdir(old_cwd)
        if str(cwd) in sys.path:
            sys.path.remove(str(cwd))
    if spent and share is not None:
        notes.append(Note("error", say("selfcheck.cells_skipped_time", cells=", ".join(spent),
                                       share=f"{share.seconds:.3g}", checks=f"{share.checks:.3g}")))
    return namespace, notes


def _cell_budget(cell: Any, seconds: float | None, demo_seconds: float | None, share: NotebookTime | None,
                 answers_left: int) -> tuple[float | None, str] | None:
    """A cell's time limit and what set it ("call", "demo" or "share"); None once the notebook's share is spent."""
    demo = _is_demo(cell)
    budget, why = (demo_seconds, "demo") if demo and demo_seconds else (seconds, "call")
    if share is not None:
        left = share.deadline - time.monotonic() - answers_left * ANSWER_CELL_SECONDS
        if left <= 0:
            return None
        if budget is None or left < budget:
            budget, why = left, "share"
    return budget, why


def _run_cell(cell: Any, namespace: dict[str, Any], sink: io.StringIO, budget: float | None, why: str, *,
              on_cell: Any, functions: set[str] | None, share: NotebookTime | None, notes: list[Note]) -> None:
    """Run one code cell in ``namespace`` within ``budget``, its output swallowed; a note where it raised or was
    stopped. ``on_cell`` is told the cell before it runs, and None after."""
    if on_cell is not None:
        on_cell(_cell_label(cell), budget, why)
    try:
        code = compile(cell.code, f"<cell {cell.index}>", "exec")
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                time_limit(budget):
            warnings.simplefilter("ignore")
            exec(code, namespace)  # the student's own notebook, on their machine
    except TimeLimitExceeded as exc:
        notes.append(Note("error", _cell_stopped(cell, exc, functions or set(), budget or 0, why, share)))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - report and go on, as a kernel would
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        notes.append(Note("info", say("selfcheck.cell_raised", cell=cell.index + 1,
                                      kind=type(exc).__name__, detail=first)))
    finally:
        if on_cell is not None:
            on_cell(None)


def _cell_stopped(cell: Any, exc: BaseException, functions: set[str], seconds: float, why: str = "call",
                  share: NotebookTime | None = None) -> Msg:
    """What a stopped cell says: its number and first line, whether it is one of the chapter's
    demonstration cells (locked, not an exercise's), and the student's function it was stopped in."""
    _kind, number, line = _cell_label(cell)
    where = stopped_in(exc, functions)        # the cells were compiled as "<cell N>"
    if why == "share" and share is not None:
        # Stopped by the notebook's share of the time, not by its own limit: no loop is guessed.
        return say("selfcheck.cell_out_of_time", cell=number, first=line, seconds=f"{seconds:.3g}",
                   where=say("selfcheck.demo_stopped_in", function=where) if where else "",
                   share=f"{share.seconds:.3g}", checks=f"{share.checks:.3g}")
    if _is_demo(cell):
        # The chapter's own experiment ran past its budget: it calls the student's functions many times, so the
        # one it was in says nothing of a loop (said so, not guessed).
        return say("selfcheck.demo_stopped", cell=number, first=line, seconds=f"{seconds:g}",
                   where=say("selfcheck.demo_stopped_in", function=where) if where else "")
    first: str | Msg = line
    if where:
        return say("selfcheck.cell_stopped_in", cell=number, first=first, seconds=f"{seconds:g}", function=where)
    return say("selfcheck.cell_stopped", cell=number, first=first, seconds=f"{seconds:g}")


def _grade_id(cell: Any) -> str:
    return getattr(cell, "grade_id", None) or ""


def _is_demo(cell: Any) -> bool:
    """One of the chapter's demonstration cells: locked by the release, of no exercise (a training run, an
    experiment), not a cell the student writes."""
    gid = _grade_id(cell)
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
