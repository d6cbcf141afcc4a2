"""The public checks, run over the student's functions with copies of their inputs and a time limit on each call.

The namespace is the student's kernel's, or the one ``autograder check`` ran a saved notebook in; the inputs are
copied as the sandbox would pass them, so that an in-place edit cannot fool a check. A call still running after
``limits.call_seconds`` is stopped and named (:func:`time_limited`), a known mistake is named from the
self-check data, and an exercise that fails where an earlier one it calls does gets a note saying which to fix
first.

It trusts nothing the student's code returns (the catalog's checks judge it, and a check broken by an odd value
is an error row, never a raise); the checks' own time (:class:`ChecksTime`) bounds the whole, and an exercise
it runs out on is listed as not checked.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.core.messages import say
from autograder.selfcheck.results import Note, not_checked, whole_exercise
from autograder.selfcheck.timelimit import TimeLimitExceeded, stopped_in, time_limit

if TYPE_CHECKING:
    from autograder.course.config import Course


@dataclass(frozen=True)
class ChecksTime:
    """The checks' own time in ``autograder check``: ``seconds`` in all, until ``deadline`` (time.monotonic())."""

    deadline: float
    seconds: float


class ChecksOutOfTime(BaseException):
    """The checks' own time (:class:`ChecksTime`) ran out during a call: the exercise it was checking and every one
    after it are not checked. A BaseException: the catalog's checks catch ``Exception`` from the student's code."""


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
        return whole_exercise(C, ex, C.Status.ERROR, say("selfcheck.exit"))
    except Exception as exc:  # noqa: BLE001 - a check broken by an odd return value
        return whole_exercise(C, ex, C.Status.ERROR, say(
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
