"""``autograder check NOTEBOOK``'s parent process: the child that runs the notebook, supervised on a clock of its own.

It spawns the child (:mod:`autograder.selfcheck.child`), kills it where a step or the whole run outlives its time,
and prints the table, whatever stopped the run.

It trusts nothing of the child but the messages the child sends on the pipe: a child that stops answering past its
step's limit (one long C call) or the whole run's is killed, one that dies is named, and either way the table
lists every exercise the child said it would check. The student's code never runs in this process.
"""
from __future__ import annotations

import multiprocessing
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autograder.core.errors import AutograderError, UnknownExercise
from autograder.core.messages import Msg, say, text
from autograder.selfcheck.child import check_in_child
from autograder.selfcheck.render import table_text
from autograder.selfcheck.results import Note, Progress, SelfCheckResult


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

#: How much longer than a step's own limit the parent waits before it kills the child.
KILL_GRACE_SECONDS = 5.0

#: How long the child may take to start (a fresh interpreter importing torch) before the clocks run.
STARTUP_SECONDS = 120


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
        return table_text(result, Path(notebook).name, tty, width)


def supervise(notebook: str, exercises: list[str], lang: str, limits: Any, *, tty: bool = False,
              width: int = 120) -> int:
    """Run :func:`check_in_child` under the course's time limits; print its table; the exit code."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=check_in_child, args=(send, notebook, exercises, lang, tty, width),
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
