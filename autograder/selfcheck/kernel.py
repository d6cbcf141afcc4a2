"""``check("2.4")`` in a student's notebook: find the student's functions in the kernel, run the public
checks on copies of their inputs, name a known mistake from the self-check data, show the result;
and ``check("2.4", score=True)``, the exercise's nbgrader test cell.

A self-check stopped part way (the stop button, the checks' own time in ``autograder check``) still lists
every exercise it was to check: those it checked with their results, the others as not checked and why
(:class:`Progress`).
"""
from __future__ import annotations

import contextlib
import difflib
import html
import io
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.core.errors import ConfigError
from autograder.core.messages import Msg, say
from autograder.course.notebook import Bounds, assignments_of_cells, notebook_claims, said_in, scan_notebook
from autograder.core.points import fraction, total
from autograder.selfcheck.render import render_html, render_text
from autograder.selfcheck.timelimit import TimeLimitExceeded, stopped_in, time_limit

if TYPE_CHECKING:
    from autograder.course.config import Course


LANGUAGES = ("zh", "en")


#: A message in both languages: the catalogue's (autograder.core.messages), one type for the whole kit.
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
        shell = ipython_shell()
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


@dataclass
class Progress:
    """How far a self-check got: the exercises it was to check (course.yml Exercise objects, or anything with
    their ``id``, ``function`` and ``points``), in order, under ``title``, and the results so far."""

    exercises: list[Any] = field(default_factory=list)
    title: str = ""
    results: list[Any] = field(default_factory=list)

    def listed(self, why: Msg, status: str = "timeout") -> list[Any]:
        """Every exercise, in order: its result where it was checked, else a row saying it was not, and ``why``."""
        done = {r.exercise: r for r in self.results}
        return [done[ex.id] if ex.id in done else not_checked(ex, why, status) for ex in self.exercises]


@dataclass(frozen=True)
class ChecksTime:
    """The checks' own time in ``autograder check``: ``seconds`` in all, until ``deadline`` (time.monotonic())."""

    deadline: float
    seconds: float


class ChecksOutOfTime(BaseException):
    """The checks' own time (:class:`ChecksTime`) ran out during a call: the exercise it was checking and every one
    after it are not checked. A BaseException: the catalog's checks catch ``Exception`` from the student's code."""


def not_checked(ex: Any, why: Msg, status: str = "timeout") -> Any:
    """The result of an exercise the self-check did not check (0 points, one row saying so, and ``why``)."""
    return _whole_exercise(C, ex, C.Status(status), say("selfcheck.not_checked", why=why))


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


def run_public(namespace: dict[str, Any], exercises: list[Any], course: Course, *,
               fingerprints: dict[str, Any] | None = None, notes: list[Note] | None = None,
               on_call: Any = None, on_result: Callable[[Any], None] | None = None,
               time_left: ChecksTime | None = None) -> list[Any]:
    """Run the public checks of ``exercises`` (course.yml Exercise objects) over ``namespace``.

    ``on_call`` (for ``autograder check``'s clock) is told ("call", exercise ID, function)
    before each call into the student's code and None when it returns; ``on_result`` is given each
    exercise's result as soon as it is known. ``time_left``: the checks' own time; an exercise it runs out on,
    and every one after it, is reported as not checked.
    """
    from autograder.catalog.fingerprints import FingerprintDiagnoser, copying_runner  # noqa: PLC0415 - loads torch

    if not exercises:
        return []
    C.load_catalog(course, hidden=False, mistakes=False)
    # Copies of the inputs, as the sandbox would pass: an in-place edit cannot fool a check. A call still
    # running after limits.call_seconds is stopped and named, and the function is not called again.
    deadline = time_left.deadline if time_left is not None else None
    runner = time_limited(copying_runner(namespace), course.limits.call_seconds, namespace,
                          {e.function for e in course.exercises}, deadline=deadline)
    diagnoser = FingerprintDiagnoser(course.tolerances, fingerprints, course=course)
    out_of_time = say("selfcheck.why.checks_time", seconds=f"{time_left.seconds:g}" if time_left else "")
    results = []
    spent = False
    unchecked: set[str] = set()
    for ex in exercises:
        if not C.checks_for(ex.id, [C.Audience.PUBLIC]):
            if notes is not None:
                notes.append(Note("info", say("selfcheck.no_public_checks", exercise=ex.id)))
            continue
        spent = spent or (deadline is not None and time.monotonic() >= deadline)
        result = None if spent else _check_public(C, ex, _timed(runner, ex, on_call), course, diagnoser)
        if result is None:      # the checks' time ran out, before this exercise or in it
            spent = True
            unchecked.add(ex.id)
            result = not_checked(ex, out_of_time)
        results.append(result)
        if on_result is not None:
            on_result(result)
    if notes is not None:
        _earlier_first(C, namespace, exercises, [r for r in results if r.exercise not in unchecked], course,
                       runner, diagnoser, notes)
    if notes is not None and not diagnoser.data.get("exercises") \
            and any(r.status is not C.Status.PASSED for r in results):
        notes.append(Note("info", say("selfcheck.no_fingerprints")))
    return results


def _earlier_first(C: Any, namespace: dict[str, Any], exercises: list[Any], results: list[Any], course: Course,
                   runner: Any, diagnoser: Any, notes: list[Note]) -> None:
    """For an exercise that did not pass and calls an earlier exercise's function of the student's that fails
    its own public checks (2.4 calling 2.3's attention_scores, 5.4 a pasted split_heads), a note saying so and
    which one to fix first, as the grader would say it: the failure may be that earlier one's. The earlier
    exercise's checks are run here if they were not (silently: only its pass or fail is used)."""
    status = {r.exercise: r.status for r in results}
    by_id = {e.id: e for e in course.exercises}

    def passed(exercise_id: str) -> bool | None:
        if exercise_id not in status:
            dep = by_id.get(exercise_id)
            if dep is None or not callable(namespace.get(dep.function)) or \
                    not C.checks_for(dep.id, [C.Audience.PUBLIC]):
                return None            # not written yet, or nothing to tell by
            try:
                status[exercise_id] = C.run_exercise(dep, runner, audiences=[C.Audience.PUBLIC],
                                                     tolerances=course.tolerances, seed_parts=(C.PUBLIC_SEED,),
                                                     diagnoser=diagnoser).status
            except (Exception, SystemExit, ChecksOutOfTime):  # noqa: BLE001 - it cannot tell: say nothing of it
                return None
        return status[exercise_id] is C.Status.PASSED

    for result in list(results):
        ex = by_id.get(result.exercise)
        if ex is None or result.status is C.Status.PASSED:
            continue
        failing = [d for d in ex.builds_on if passed(d) is False]
        if failing:
            first = by_id[failing[0]]
            notes.append(Note("info", say("selfcheck.earlier_first", exercise=ex.id, earlier=first.id,
                                          function=first.function)))


def time_limited(runner: Any, seconds: float, namespace: dict[str, Any] | None = None,
                 functions: set[str] | None = None, deadline: float | None = None) -> Any:
    """``runner`` with each call stopped after ``seconds`` (:func:`~autograder.selfcheck.timelimit.time_limit`):
    a timeout reply naming the function (and the student's function among ``functions`` it was stopped in,
    2.3's inside 2.4's), and every later call of it answered without running it. A call that ``deadline``
    (time.monotonic()) stops, or one made after it, raises :class:`ChecksOutOfTime` instead."""
    from autograder.inside.probes import Reply  # noqa: PLC0415 - loads torch

    slow: dict[str, Any] = {}
    limit = f"{seconds:g}"

    def run(request: Any) -> Any:
        function = str(getattr(request, "function", ""))
        if function in slow:
            return Reply("timeout", message=slow[function])
        budget = seconds
        if deadline is not None:
            budget = min(seconds, deadline - time.monotonic())
            if budget <= 0:
                raise ChecksOutOfTime
        try:
            with time_limit(budget):
                return runner(request)
        except TimeLimitExceeded as exc:
            if budget < seconds:          # the checks' time ran out, not this call's: no verdict on the function
                raise ChecksOutOfTime from None
            slow[function] = say("sandbox.slow_again", function=function, seconds=limit)
            inner = stopped_in(exc, functions or set(), namespace)
            if inner and inner != function:
                return Reply("timeout", message=say("selfcheck.call_stopped_in", function=function, seconds=limit,
                                                    inner=inner))
            return Reply("timeout", message=say("selfcheck.call_stopped", function=function, seconds=limit))

    return run


def _check_public(C: Any, ex: Any, runner: Any, course: Course, diagnoser: Any) -> Any:
    """One exercise's public checks run; None where the checks' own time ran out in them."""
    try:
        return C.run_exercise(ex, runner, audiences=[C.Audience.PUBLIC], tolerances=course.tolerances,
                              seed_parts=(C.PUBLIC_SEED,), diagnoser=diagnoser)
    except ChecksOutOfTime:
        return None
    except SystemExit:
        return _whole_exercise(C, ex, C.Status.ERROR, say("selfcheck.exit"))
    except Exception as exc:  # noqa: BLE001 - a check broken by an odd return value
        return _whole_exercise(C, ex, C.Status.ERROR, say(
            "selfcheck.unfinished", kind=type(exc).__name__, detail=exc))


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
def resolve(course: Course, exercise: Any, namespace: dict[str, Any],
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


def guess_assignment(course: Course, namespace: dict[str, Any], notebook: str | None = None, nb: Any = None) -> Any:
    """The notebook's assignment: what it says of itself (the assignment the release wrote into its metadata,
    else its cells' nbgrader ids), read from ``nb`` or the notebook's file; else by its file name; else by
    the exercise functions it defines."""
    claimed = claimed_assignment(course, notebook, nb)
    if claimed is not None:
        return claimed
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


def claimed_assignment(course: Course, notebook: str | None, nb: Any) -> Any:
    """The assignment a notebook says it is (autograder.course.notebook.notebook_claims), or None: from the parsed
    ``nb``, else from the file at ``notebook`` (a bounded look at it, never a parse)."""
    declared: str | None = None
    grade_ids: set[str] = set()
    if isinstance(nb, dict):
        declared, grade_ids = said_in(nb)
    elif notebook:
        try:
            path = Path(str(notebook))
            if not path.is_file():
                return None
            shape = scan_notebook(path.read_bytes(), Bounds.of(course.limits), path.name)
        except Exception:  # noqa: BLE001 - unreadable or unsaved: the file name and the functions decide
            return None
        declared, grade_ids = shape.declared, set(shape.grade_ids)
    claimed, _how = notebook_claims(declared, assignments_of_cells(grade_ids, course))
    return next((a for a in course.assignments if a.id == claimed), None)


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


def ipython_shell() -> Any:
    ipython = sys.modules.get("IPython")   # never import IPython just to learn it is absent
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # noqa: BLE001 - a half-imported or odd IPython: treated as no shell
        return None


def language_of(language: str | None, course: Course | None, strict: bool = False) -> Any:
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
