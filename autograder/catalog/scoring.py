"""Running one exercise's checks and scoring it (:func:`run_exercise`), under the catalog's two rules:
hidden stays hidden, and no points without output.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from inspect import isgeneratorfunction
from types import GeneratorType
from typing import Any

import torch

from autograder.inside import plain
from autograder.catalog.context import Context, Diagnoser, Runner, stable_seed
from autograder.catalog.declarations import (MISTAKES, OUTPUT_KINDS, SPECS, Audience, Check, ExerciseSpec,
                                             Mistake, checks_for, mistake_by_calls, precision_of)
from autograder.catalog.outcomes import CheckFailed, CheckResult, ExerciseResult, Status, hidden_message, with_case
from autograder.core.messages import Msg
from autograder.core.points import shares as share_points
from autograder.core.points import total as total_points
from autograder.core.stopwatch import OFF, Stopwatch


def run_exercise(exercise: Any, runner: Runner, *, audiences: Iterable[Audience], tolerances: Any,
                 seed_parts: tuple[Any, ...], device: str = "cpu", reference: Callable[..., Any] | None = None,
                 diagnoser: Diagnoser | None = None, timer: Stopwatch = OFF) -> ExerciseResult:
    """Run every check of one exercise (a course.yml :class:`~autograder.course.config.Exercise`: its ID,
    function and points) for these audiences; score it.

    ``timer`` accumulates seconds per section: ``inputs`` (ctx.randn and friends), ``call`` (round
    trips to the student's code, of which ``student`` is the time inside it), ``reference``,
    ``compare`` (ctx.expect_tensor / expect_close) and ``diagnose`` (known mistakes run on the
    failing inputs).

    The two rules of the module docstring apply here: a hidden check's message is
    :func:`hidden_message` (its full one kept in ``CheckResult.detail`` for the
    instructor), and a ``needs_output`` check keeps its status but earns 0 points,
    ``withheld``, unless a check of ``OUTPUT_KINDS`` of this exercise passed.
    """
    exercise_id, function, max_points = exercise.id, exercise.function, exercise.points
    checks = checks_for(exercise_id, audiences)
    if not checks:
        raise ValueError(f"no checks declared for exercise {exercise_id}")
    spec = SPECS.get(exercise_id, ExerciseSpec(exercise_id))
    precision = precision_of(exercise_id)
    # Each check's share in hundredths of a point, adding up to max_points exactly (autograder.core.points).
    check_shares = share_points(max_points, [c.weight for c in checks])
    run = _Run(exercise_id, diagnoser, timer)
    for c, share in zip(checks, check_shares):
        if run.stop_status is not None:
            run.stopped(c, share)
            continue
        ctx = Context(exercise_id, function, c.name, runner, tolerances,
                      stable_seed(*seed_parts, exercise_id, c.name), spec.forbidden, device, reference,
                      timer=timer, audience=c.audience, precision=precision,
                      builds_on=bool(getattr(exercise, "builds_on", None)))
        run.step(c, share, ctx)
    if run.ahead is not None:
        run.conclude(run.ahead)
    if diagnoser is not None:
        _diagnose(run.asked, run.concluded, diagnoser, reference, timer)
    _withhold_without_output(checks, run.results)
    points, overall = _score(run.results, run.stop_status)
    return ExerciseResult(exercise_id, function, points, max_points, overall, run.results)


class _Run:
    """One exercise's checks as :func:`run_exercise` runs them: their results so far, the check ahead, the stop.

    A check written as a generator yields once, after it started its calls and before it waits for
    them: the next check begins then (its inputs drawn, its calls sent behind the first's), and the
    first finishes after that. The worker runs the next check's calls while this side computes the
    first's expected values. The order is the checks' own, whatever the timing: begin k, begin k+1,
    finish k, begin k+2, finish k+1... A plain check runs whole, after the one ahead of it finished.
    """

    __slots__ = ("exercise_id", "diagnoser", "timer", "results", "stop_status", "ahead", "asked", "concluded")

    def __init__(self, exercise_id: str, diagnoser: Diagnoser | None, timer: Stopwatch):
        self.exercise_id, self.diagnoser, self.timer = exercise_id, diagnoser, timer
        self.results: list[CheckResult] = []
        self.stop_status: Status | None = None
        self.ahead: _Begun | None = None
        # Failures that asked for a diagnosis, named once every check ran: every other call is evidence.
        self.asked: list[tuple[CheckResult, Context]] = []
        self.concluded: list[Context] = []

    def stopped(self, c: Check, share: float) -> None:
        """A check not run once a check stopped the exercise (not attempted / missing: it would say the same)."""
        assert self.stop_status is not None
        self.results.append(CheckResult(self.exercise_id, c.name, c.audience.value, c.kind.value, c.title,
                                        self.stop_status, 0.0, share, message=self.results[-1].message))

    def conclude(self, begun: _Begun) -> None:
        """Finish a begun check and record its result; a not attempted or missing one stops the exercise."""
        result = _result(begun, self.exercise_id, self.diagnoser, self.timer, self.asked)
        self.results.append(result)
        self.concluded.append(begun.ctx)
        if result.status in (Status.NOT_ATTEMPTED, Status.MISSING):
            self.stop_status = result.status

    def step(self, c: Check, share: float, ctx: Context) -> None:
        """Begin one check, concluding the one ahead where its turn has come; keep a generator check ahead."""
        if self.ahead is not None and not isgeneratorfunction(c.run):
            # A plain check waits for its calls at once, and for those in flight before them: the one
            # ahead finishes first, its expected values computed while the worker still runs its calls.
            self.conclude(self.ahead)
            self.ahead = None
            if self.stop_status is not None:
                self.stopped(c, share)
                return
        begun = _begin(c, share, ctx)
        if self.ahead is not None:
            self.conclude(self.ahead)
            self.ahead = None
            if self.stop_status is not None:     # this check began before the stop was known: undone
                begun.discard()
                self.stopped(c, share)
                return
        if begun.steps is None:
            self.conclude(begun)
        else:
            self.ahead = begun


def _score(results: list[CheckResult], stop_status: Status | None) -> tuple[float, Status]:
    """An exercise's points and status from its checks' results (a forbidden call zeroes every check's
    points); ``stop_status``: not attempted or missing, when a check stopped the exercise."""
    forbidden = sorted({f for r in results for f in r.forbidden})
    points = total_points(r.points for r in results)
    if forbidden:
        points = 0.0
        for r in results:
            r.points = 0.0
        overall = Status.FORBIDDEN
    elif all(r.passed for r in results):
        overall = Status.PASSED
    elif stop_status is not None and all(r.status is stop_status for r in results):
        overall = stop_status
    else:
        overall = next((r.status for r in results if r.status in (Status.TIMEOUT, Status.CRASHED)),
                       Status.FAILED)
    return points, overall


class _Begun:
    """One check begun: run whole (``steps`` None, ``error`` what it raised, if anything), or up to the
    yield of a check written as a generator (``steps``: the rest of it)."""

    __slots__ = ("check", "share", "ctx", "steps", "error")

    def __init__(self, check: Check, share: float, ctx: Context):
        self.check, self.share, self.ctx = check, share, ctx
        self.steps: Generator[Any, None, None] | None = None
        self.error: Exception | None = None

    def finish(self) -> None:
        """The rest of a generator check, after its yield (nothing for one that ran whole)."""
        steps, self.steps = self.steps, None
        if steps is None:
            return
        try:
            try:
                next(steps)
            except StopIteration:
                return
            steps.close()
            raise RuntimeError(f"check {self.check.exercise}/{self.check.name} yields more than once")
        except Exception as exc:  # noqa: BLE001 - judged by _result as a plain check's exception is
            self.error = exc
        finally:
            self.ctx.settle()

    def discard(self) -> None:
        """Undo a check begun before an earlier one stopped the exercise: its calls in flight dropped."""
        steps, self.steps = self.steps, None
        try:
            if steps is not None:
                steps.close()
        finally:
            self.ctx.settle()


def _begin(c: Check, share: float, ctx: Context) -> _Begun:
    begun = _Begun(c, share, ctx)
    try:
        try:
            steps = c.run(ctx)
            if isinstance(steps, GeneratorType):
                grad = torch.is_grad_enabled()
                try:
                    next(steps)
                except StopIteration:
                    pass
                else:
                    if torch.is_grad_enabled() != grad:     # the next check would begin in its mode
                        steps.close()
                        raise RuntimeError(f"check {c.exercise}/{c.name} yields inside a change of grad mode")
                    begun.steps = steps
                    return begun
        finally:
            if begun.steps is None:
                ctx.settle()      # a call the check started and left: its reply read before the next check
    except Exception as exc:  # noqa: BLE001 - judged by _result
        begun.error = exc
    return begun


def _result(begun: _Begun, exercise_id: str, diagnoser: Diagnoser | None, timer: Stopwatch,
            asked: list[tuple[CheckResult, Context]]) -> CheckResult:
    """The check's result: it finishes first where it yielded. A failure that asks for a diagnosis joins
    ``asked`` (:func:`_diagnose` names its mistake)."""
    begun.finish()
    c, ctx, share, error = begun.check, begun.ctx, begun.share, begun.error
    hidden = c.audience is Audience.HIDDEN
    status: Status = Status.PASSED
    message: Msg | None = None
    detail: Msg | None = None
    found: Mistake | None = None
    ask = False
    if isinstance(error, CheckFailed):
        status, message, detail = _failed_messages(c, error, hidden)
        found, ask = _mistake_of(error, exercise_id, diagnoser, ctx)
    elif error is not None:
        status, message, detail = _error_messages(c, error, hidden)
    result = CheckResult(
        ctx.exercise, c.name, c.audience.value, c.kind.value, c.title, status,
        share if status is Status.PASSED else 0.0, share, message=message,
        mistake=found.name if found else None, mistake_message=found.message if found else None,
        forbidden=list(ctx.forbidden_seen), seconds=ctx.seconds, detail=detail)
    if ask:
        asked.append((result, ctx))
    return result


def _failed_messages(c: Check, failed: CheckFailed, hidden: bool) -> tuple[Status, Msg | None, Msg | None]:
    """(status, message, detail) of a check that failed: a hidden check's full message kept as its detail."""
    message, detail = with_case(failed.message, failed.case), None
    if hidden:
        detail, message = message, with_case(hidden_message(c, failed), failed.case, hidden=True)
    return failed.status, message, detail


def _mistake_of(failed: CheckFailed, exercise_id: str, diagnoser: Diagnoser | None,
                ctx: Context) -> tuple[Mistake | None, bool]:
    """(the known mistake a failure names, whether it asks for a diagnosis on its last call)."""
    if failed.mistake is not None and diagnoser is not None:
        # recognised by the check itself (an error's message): named as declared, where the catalog holds it
        return next((m for m in MISTAKES.get(exercise_id, []) if m.name == failed.mistake), None), False
    if failed.diagnose and diagnoser is not None and ctx.last_request is not None \
            and ctx.last_value is not None:
        return None, True
    if failed.status is Status.FORBIDDEN and diagnoser is not None:
        # stopped by a forbidden call before any value was compared: a known mistake that is that call
        return mistake_by_calls(exercise_id, ctx.forbidden_seen), False
    return None, False


def _error_messages(c: Check, error: Exception, hidden: bool) -> tuple[Status, Msg, Msg | None]:
    """(status, message, detail) of a check that raised other than CheckFailed: a wrong kind of value, or a
    fault in the check itself (which must not lose the exercise)."""
    detail: Msg | None = None
    if isinstance(error, plain.PlainDataError):
        # The text describes the student's value (describe()): hidden checks keep it as detail.
        message = Msg(f"返回值不对：{error}", f"wrong return value: {error}")
        if hidden:
            detail, message = message, Msg(f"返回值的类型或结构不对：{c.title.zh}",
                                           f"wrong kind of return value: {c.title.en}")
        return Status.FAILED, message, detail
    message = Msg(f"检查程序本身出错（{type(error).__name__}: {error}），请告诉助教",
                  f"the check itself failed ({type(error).__name__}: {error}); tell the teaching staff")
    if hidden:
        kind = type(error).__name__
        detail, message = message, Msg(f"检查程序本身出错（{kind}），请告诉助教",
                                       f"the check itself failed ({kind}); tell the teaching staff")
    return Status.CHECK_ERROR, message, detail


def _diagnose(asked: list[tuple[CheckResult, Context]], concluded: list[Context], diagnoser: Diagnoser,
              reference: Callable[..., Any] | None, timer: Stopwatch) -> None:
    """Name the known mistake behind each failure that asked for one, on its failing call, with every other call of
    the exercise's checks as evidence: a mistake the student's other outputs contradict is not named."""
    calls = [call for ctx in concluded for call in ctx.values]
    for result, ctx in asked:
        request, value = ctx.last_request, ctx.last_value
        assert request is not None and value is not None        # (asked only with both)
        evidence = [(q, v) for q, v in calls if q is not request]
        with timer.section("diagnose"):
            found = diagnoser(result.exercise, request, value, reference=reference, evidence=evidence)
        if found is not None:
            result.mistake, result.mistake_message = found.name, found.message


WITHHELD = Msg("这一项要和正确的输出一起才得分：本练习还没有一项比较输出数值的检查通过",
               "earns its points together with a correct output: no check of this exercise that compares "
               "the output's values passed")


def _withhold_without_output(checks: list[Check], results: list[CheckResult]) -> None:
    """No points without output: a passed ``needs_output`` check scores 0 unless an output check passed.

    A function that returns None calls nothing forbidden; one that always raises
    ValueError raises "a ValueError when E % H != 0". Such passes are worth their share
    only next to a value the student got right (a passed check of ``OUTPUT_KINDS``).
    """
    if any(r.passed and c.kind in OUTPUT_KINDS and not c.needs_output for c, r in zip(checks, results)):
        return
    for c, r in zip(checks, results):
        if c.needs_output and r.passed:
            r.points, r.withheld, r.message = 0.0, True, WITHHELD
