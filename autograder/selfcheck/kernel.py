"""``check("2.4")`` in a student's notebook: find the student's functions in the kernel, run the public
checks on copies of their inputs (:mod:`autograder.selfcheck.public_checks`), name a known mistake from the
self-check data, show the result; and ``check("2.4", score=True)``, the exercise's nbgrader test cell.

A self-check stopped part way (the stop button, the checks' own time in ``autograder check``) still lists
every exercise it was to check: those it checked with their results, the others as not checked and why
(:class:`~autograder.selfcheck.results.Progress`). The student's code is trusted as theirs, in their own kernel:
no sandbox, but its output swallowed (nbgrader scores a cell that writes to stderr 0) and ``check`` never raises
into the notebook.
"""
from __future__ import annotations

import contextlib
import html
import io
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.core.errors import ConfigError
from autograder.core.messages import say
from autograder.core.points import fraction, total
from autograder.selfcheck.exercises import resolve
from autograder.selfcheck.public_checks import run_public
from autograder.selfcheck.results import Note, Progress, SelfCheckResult, ipython_shell, language_of

if TYPE_CHECKING:
    from autograder.course.config import Course


# -- the notebook entry point ------------------------------------------------------
@contextlib.contextmanager
def one_thread():
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
    namespace = caller_namespace(_depth + 1)
    sink = io.StringIO()
    progress = Progress()
    try:
        # Student code may print or warn; nbgrader scores a cell that writes to stderr 0.
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), warnings.catch_warnings(), \
                one_thread():
            warnings.simplefilter("ignore")
            result = self_check(namespace, exercise, language=language, progress=progress)
    except KeyboardInterrupt:
        # The stop button (a call stuck in C, which no time limit can stop): a note, not a traceback through the
        # kit's modules, and every exercise listed, those checked before it with their results.
        result = SelfCheckResult(progress.listed(say("selfcheck.why.interrupted")), language_of(language, None),
                                 [Note("error", say("selfcheck.interrupted"))], title=progress.title)
    except ConfigError as exc:
        # No course here (a student's home on a JupyterHub set up without its course): one sentence saying so.
        said = say("selfcheck.no_course") if "no course.yml" in exc.message else say(
            "selfcheck.bad_course", detail=exc.message)
        result = SelfCheckResult([], language_of(language, None), [Note("error", said)])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - self-check never raises into the notebook
        result = SelfCheckResult([], language_of(language, None), [Note("error", say(
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
        line = say("selfcheck.public_score", exercise=self.exercise, passed=self.passed, total=self.total,
                   score=fraction(self.points, self.max_points)).get(self.language)
        return f"<div>{html.escape(line)}</div>"


def score(exercise: Any, *, language: str | None = None, _depth: int = 1,
          every_check: Callable[..., Any] | None = None) -> Any:
    """The exercise's points as its nbgrader test cell shows them (see :func:`autograder.check`).

    ``every_check``: what grades every check, hidden ones included, under ``nbgrader autograde`` where the
    course has its hidden checks (``every_check(exercise_id, namespace=..., language=...)``): the instructor's
    nbgrader bridge, which :func:`autograder.check` hands in (it sits above this module and never ships in a
    student's bundle). Without it, the public checks' share of the points.

    Never raises and never writes to stderr (nbgrader would score the cell 0).
    """
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    namespace = caller_namespace(_depth + 1)
    if every_check is not None and os.environ.get("NBGRADER_EXECUTION") == "autograde" \
            and os.environ.get("AUTOGRADER_COURSE") \
            and C.hidden_available(load_course(os.environ["AUTOGRADER_COURSE"])):
        # The instructor's kit under nbgrader autograde: every check, seeded per student.
        return every_check(str(exercise), namespace=namespace, language=language)
    course = load_course()
    _, ex = course.exercise(str(exercise))
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), warnings.catch_warnings(), \
                one_thread():
            warnings.simplefilter("ignore")
            result = self_check(namespace, str(exercise), language=language, course=course)
        rows = [c for e in result.exercises for c in e.checks]
    except (Exception, SystemExit):  # noqa: BLE001 - a test cell never raises: it scores 0
        result, rows = None, []
    earned = sum(c.points for c in rows if c.passed)
    possible = sum(c.max_points for c in rows) or 1.0

    points = total([ex.points * earned / possible]) if rows else 0.0
    lang = language_of(language, course)
    return PublicScore(ex.id, points, ex.points, sum(c.passed for c in rows), len(rows), lang)


def self_check(namespace: dict[str, Any], exercise: Any = None, *, language: str | None = None,
               notebook: str | None = None, course: Course | None = None,
               fingerprints: dict[str, Any] | None = None, progress: Progress | None = None) -> SelfCheckResult:
    """The work of :func:`check` without the display: resolve, run, collect (into ``progress`` as it goes)."""
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    course = course or load_course()
    lang = language_of(language, course)
    notes: list[Note] = []
    if language is not None and language_of(language, None, strict=True) is None:
        notes.append(Note("info", say("selfcheck.unknown_language", language=repr(language), using=lang)))
    chosen, title, more = resolve(course, exercise, namespace, notebook or notebook_name(namespace))
    notes.extend(more)
    progress = progress if progress is not None else Progress()
    progress.exercises, progress.title = list(chosen), title
    results = run_public(namespace, chosen, course, fingerprints=fingerprints, notes=notes,
                         on_result=progress.results.append)
    return SelfCheckResult(results, lang, notes, title=title)


def notebook_name(namespace: dict[str, Any]) -> str | None:
    # ipykernel puts the notebook path in __session__ (from jupyter_server's JPY_SESSION_NAME);
    # VS Code sets __vsc_ipynb_file__.
    for name in (namespace.get("__session__"), namespace.get("__vsc_ipynb_file__"),
                 os.environ.get("JPY_SESSION_NAME")):
        if isinstance(name, str) and name:
            return name
    return None


def caller_namespace(depth: int) -> dict[str, Any]:
    shell = ipython_shell()
    ns = getattr(shell, "user_ns", None)
    if isinstance(ns, dict):
        return ns
    try:
        return sys._getframe(depth).f_globals  # noqa: SLF001 - the caller's globals, outside IPython
    except ValueError:
        return {}


def _show(result: SelfCheckResult) -> None:
    if ipython_shell() is not None:
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
