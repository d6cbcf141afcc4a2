"""Running one exercise's checks and scoring it (:func:`run_exercise`), under the catalog's two rules:
hidden stays hidden, and no points without output.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from autograder import plain
from autograder.messages import Msg
from autograder.points import shares as share_points, total as total_points
from autograder.stopwatch import OFF, Stopwatch
from autograder.catalog.context import Context, Diagnoser, Runner, stable_seed
from autograder.catalog.declarations import Audience, Check, ExerciseSpec, OUTPUT_KINDS, SPECS, checks_for
from autograder.catalog.outcomes import CheckFailed, CheckResult, ExerciseResult, Status, hidden_message, with_case


def run_exercise(exercise: Any, runner: Runner, *, audiences: Iterable[Audience], tolerances: Any,
                 seed_parts: tuple[Any, ...], device: str = "cpu", reference: Callable[..., Any] | None = None,
                 diagnoser: Diagnoser | None = None, timer: Stopwatch = OFF) -> ExerciseResult:
    """Run every check of one exercise (a course.yml :class:`~autograder.config.Exercise`: its ID,
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
    # Each check's share in hundredths of a point, adding up to max_points exactly (autograder.points).
    check_shares = share_points(max_points, [c.weight for c in checks])
    results: list[CheckResult] = []
    stop_status: Status | None = None
    for c, share in zip(checks, check_shares):
        if stop_status is not None:
            # Not attempted / missing: every later check would say the same.
            results.append(CheckResult(exercise_id, c.name, c.audience.value, c.kind.value, c.title,
                                       stop_status, 0.0, share, message=results[-1].message))
            continue
        ctx = Context(exercise_id, function, c.name, runner, tolerances,
                      stable_seed(*seed_parts, exercise_id, c.name), spec.forbidden, device, reference,
                      timer=timer, audience=c.audience)
        hidden = c.audience is Audience.HIDDEN
        status, message, found, detail = Status.PASSED, None, None, None
        try:
            try:
                c.run(ctx)
            finally:
                ctx.settle()      # a call the check started and left: its reply read before the next check
        except CheckFailed as failed:
            status, message = failed.status, with_case(failed.message, failed.case)
            if hidden:
                detail, message = message, with_case(hidden_message(c, failed), failed.case, hidden=True)
            if failed.diagnose and diagnoser is not None and ctx.last_request is not None \
                    and ctx.last_value is not None:
                with timer.section("diagnose"):
                    found = diagnoser(exercise_id, ctx.last_request, ctx.last_value)
        except plain.PlainDataError as exc:
            # The text describes the student's value (describe()): hidden checks keep it as detail.
            status, message = Status.FAILED, Msg(f"返回值不对：{exc}", f"wrong return value: {exc}")
            if hidden:
                detail, message = message, Msg(f"返回值的类型或结构不对：{c.title.zh}",
                                               f"wrong kind of return value: {c.title.en}")
        except Exception as exc:  # noqa: BLE001 - a fault in the check itself must not lose the exercise
            status = Status.CHECK_ERROR
            message = Msg(f"检查程序本身出错（{type(exc).__name__}: {exc}），请告诉助教",
                          f"the check itself failed ({type(exc).__name__}: {exc}); tell the teaching staff")
            if hidden:
                kind = type(exc).__name__
                detail, message = message, Msg(f"检查程序本身出错（{kind}），请告诉助教",
                                               f"the check itself failed ({kind}); tell the teaching staff")
        results.append(CheckResult(
            exercise_id, c.name, c.audience.value, c.kind.value, c.title, status,
            share if status is Status.PASSED else 0.0, share, message=message,
            mistake=found.name if found else None, mistake_message=found.message if found else None,
            forbidden=list(ctx.forbidden_seen), seconds=ctx.seconds, detail=detail))
        if status in (Status.NOT_ATTEMPTED, Status.MISSING):
            stop_status = status
    _withhold_without_output(checks, results)
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
    return ExerciseResult(exercise_id, function, points, max_points, overall, results)


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
