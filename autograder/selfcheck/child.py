"""``autograder check NOTEBOOK``'s child process: the saved notebook's cells, then its public checks, each step
told to the parent.

The cells run first (:mod:`autograder.selfcheck.execute`), within what the checks' own time leaves of
``limits.submission_seconds``; then the public checks, within that time of their own. The parent
(:mod:`autograder.selfcheck.parent`) is told each step, the exercises to check, each note and each result as it
comes, and at last the table.

It runs the student's own notebook, on their machine, in this process: it trusts course.yml and the kit, and
bounds the student's code only in time (each cell and call, and the notebook's share of the whole run); the
parent's clock covers what no signal here can stop.
"""
from __future__ import annotations

import contextlib
import io
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder.core.errors import AutograderError, UnknownExercise
from autograder.core.messages import text
from autograder.course.notebook import read_notebook
from autograder.selfcheck.execute import NotebookTime, execute_notebook
from autograder.selfcheck.exercises import guess_assignment
from autograder.selfcheck.public_checks import ChecksTime, run_public
from autograder.selfcheck.render import table_text
from autograder.selfcheck.results import Note, SelfCheckResult


#: The checks' own time beyond one ``limits.call_seconds`` per exercise (a function that loops is stopped once
#: and not called again): the public checks of an assignment take a second or two when nothing loops.
CHECKS_SECONDS = 5.0


def checks_seconds(limits: Any, exercises: int) -> float:
    """The checks' own time out of ``limits.submission_seconds``, which no cell can spend: one call limit per
    exercise (each may loop once) and CHECKS_SECONDS, at most half of the whole run."""
    return min(exercises * limits.call_seconds + CHECKS_SECONDS, limits.submission_seconds / 2)


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


def check_in_child(conn: Any, notebook: str, exercise_ids: list[str], lang: str, tty: bool, width: int) -> None:
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
    return (0 if result.passed else 1), table_text(result, Path(notebook).name, tty, width)


def tell_step(tell: Any) -> Any:
    """The ``on_cell`` / ``on_call`` callback that tells the parent each step: a cell (with its time limit and
    what set it) or a call, and None after it."""
    def step(label: Any, budget: float | None = None, why: str | None = None) -> None:
        tell("step", label, budget, why)

    return step
