"""Checks written as generators: the next check begins at a check's yield (scoring.run_exercise).

The order is fixed by the checks alone (begin k, begin k+1, finish k, ...; a plain check after the one
ahead of it finished), never by timing; the results are
the ones the same checks give run one after another; a stop (not attempted, missing) undoes the check begun
ahead of it; a yield inside a change of grad mode, or a second yield, is the check's own error. In a sandbox
the worker runs the next check's call while this side finishes the first.
"""
from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace


import pytest
import torch

from autograder import catalog as C
from autograder.catalog.declarations import Audience, Check, Kind
from autograder.course.config import Limits, load_course
from autograder.course.notebook import Cell
from autograder.inside.probes import Request
from autograder.sandbox import Sandbox

COURSE = load_course()
EXERCISE = SimpleNamespace(id="9.9", function="double", points=3.0)
LIMITS = Limits(call_seconds=2.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)


class LoggingRunner:
    """A runner with ``start``, as a sandbox handle: logs each request sent and each reply read."""

    def __init__(self, namespace: dict, log: list):
        self.run, self.log = C.in_process_runner(namespace), log

    def __call__(self, request: Request):
        return self.start(request)()

    def start(self, request: Request):
        self.log.append(("sent", request.site))
        reply = self.run(request)

        def finish():
            self.log.append(("read", request.site))
            return reply
        return finish


def declare(monkeypatch, *runs) -> None:
    checks = [Check("9.9", run.__name__, Audience.PUBLIC, Kind.NUMERIC, C.Msg(run.__name__, run.__name__), run)
              for run in runs]
    monkeypatch.setitem(C.CHECKS, "9.9", checks)


def grade(runner) -> C.ExerciseResult:
    return C.run_exercise(EXERCISE, runner, audiences=[Audience.PUBLIC], tolerances=COURSE.tolerances,
                          seed_parts=("ahead", 0))


def whole(run):
    """The same check run whole where it begins (a plain function)."""
    def plain(ctx: C.Context) -> None:
        for _ in run(ctx):
            pass
    plain.__name__ = run.__name__
    return plain


def make_checks(log: list):
    def first(ctx: C.Context):
        xs = [ctx.randn(2, 3), ctx.randn(4)]
        pending = [ctx.start(x) for x in xs]
        yield
        log.append(("compare", "first"))
        for x, p in zip(xs, pending):
            ctx.expect_close(ctx.expect_tensor(p.value(), tuple(x.shape)), x * 2, torch.float64)

    def second(ctx: C.Context):
        x = ctx.randn(3)
        pending = ctx.start(x)
        yield
        log.append(("compare", "second"))
        ctx.expect_close(ctx.expect_tensor(pending.value(), (3,)), x * 3, torch.float64)   # wrong on purpose

    def third(ctx: C.Context) -> None:
        x = ctx.randn(5)
        ctx.expect_close(ctx.expect_tensor(ctx.call(x), (5,)), x * 2, torch.float64)

    return first, second, third


def test_the_next_check_begins_at_a_yield_and_the_results_are_those_of_one_after_another(monkeypatch):
    log: list = []
    declare(monkeypatch, *make_checks(log))
    ahead = grade(LoggingRunner({"double": lambda t: t * 2}, log))
    assert log == [("sent", "first#1"), ("sent", "first#2"), ("sent", "second#1"),
                   ("compare", "first"), ("read", "first#1"), ("read", "first#2"),
                   # a plain check begins only after the one ahead of it finished
                   ("compare", "second"), ("read", "second#1"), ("sent", "third#1"), ("read", "third#1")]
    log.clear()
    declare(monkeypatch, *(whole(run) if run.__name__ != "third" else run for run in make_checks(log)))
    serial = grade(LoggingRunner({"double": lambda t: t * 2}, log))
    assert log[:5] == [("sent", "first#1"), ("sent", "first#2"), ("compare", "first"), ("read", "first#1"),
                       ("read", "first#2")]

    def verdicts(result):
        return [dataclasses.replace(r, seconds=0.0) for r in result.checks]
    assert verdicts(ahead) == verdicts(serial)
    assert [r.status for r in ahead.checks] == [C.Status.PASSED, C.Status.FAILED, C.Status.PASSED]
    assert ahead.points == serial.points and ahead.status == serial.status


def test_a_stop_undoes_the_check_begun_ahead_of_it(monkeypatch):
    log: list = []
    finished: list[str] = []

    def stub(t):
        raise NotImplementedError

    def first(ctx: C.Context):
        pending = ctx.start(ctx.randn(2))
        yield
        pending.value()

    def second(ctx: C.Context):
        ctx.start(ctx.randn(2))
        yield
        finished.append("second")       # never: the exercise stopped before it

    def third(ctx: C.Context) -> None:
        finished.append("third")

    declare(monkeypatch, first, second, third)
    result = grade(LoggingRunner({"double": stub}, log))
    assert [r.status for r in result.checks] == [C.Status.NOT_ATTEMPTED] * 3
    assert result.status is C.Status.NOT_ATTEMPTED and result.points == 0.0
    assert result.checks[1].message == result.checks[0].message
    assert finished == []
    # the call begun ahead was read (dropped) before the exercise ended: the runner is free
    assert log == [("sent", "first#1"), ("sent", "second#1"), ("read", "first#1"), ("read", "second#1")]


def test_a_yield_inside_a_change_of_grad_mode_or_a_second_yield_is_the_checks_error(monkeypatch):
    modes: list[bool] = []

    def no_grad_yield(ctx: C.Context):
        with torch.no_grad():
            ctx.start(ctx.randn(2))
            yield

    def twice(ctx: C.Context):
        yield
        yield

    def after(ctx: C.Context):
        modes.append(torch.is_grad_enabled())
        yield
        modes.append(torch.is_grad_enabled())

    declare(monkeypatch, no_grad_yield, twice, after)
    result = grade(LoggingRunner({"double": lambda t: t * 2}, []))
    assert [r.status for r in result.checks] == [C.Status.CHECK_ERROR, C.Status.CHECK_ERROR, C.Status.PASSED]
    assert "grad mode" in result.checks[0].message.en and "more than once" in result.checks[1].message.en
    assert modes == [True, True]


SOURCE = ("import time, torch\n"
          "def double(t):\n"
          "    began = time.time()\n"
          "    time.sleep(0.3)\n"
          "    return torch.tensor([began], dtype=torch.float64)\n")


def test_in_a_sandbox_the_worker_runs_the_next_checks_call_while_this_side_finishes_the_first(monkeypatch):
    seen: dict[str, float] = {}

    def first(ctx: C.Context):
        pending = ctx.start(torch.zeros(1, dtype=torch.float64))
        yield
        pending.value()
        time.sleep(0.4)               # this side's own work on the first check, after its reply
        seen["first done"] = time.time()

    def second(ctx: C.Context):
        pending = ctx.start(torch.zeros(1, dtype=torch.float64))
        yield
        seen["second began"] = pending.value().tensor().item()

    declare(monkeypatch, first, second)
    with Sandbox(LIMITS) as sandbox, sandbox.open([Cell(0, None, SOURCE, SOURCE, None)], label="ahead") as worker:
        result = grade(worker)
    assert [r.status for r in result.checks] == [C.Status.PASSED, C.Status.PASSED]
    assert seen["second began"] < seen["first done"] - 0.2, "the second check's call waited for the first check"


FAILING_SOURCE = ("import os, time, torch\n"
                  "def double(t):\n"
                  "    if float(t.flatten()[0]) == 13.0:\n"
                  "        os._exit(1)\n"
                  "    if float(t.flatten()[0]) == 17.0:\n"
                  "        while True:\n"
                  "            pass\n"
                  "    if float(t.flatten()[0]) == 19.0:\n"
                  "        raise NotImplementedError\n"
                  "    return t * 2\n")


def failing_checks(first_value: float):
    def first(ctx: C.Context):
        pending = ctx.start(torch.tensor([first_value, 1.0], dtype=torch.float64))
        yield
        ctx.expect_close(ctx.expect_tensor(pending.value(), (2,)), torch.tensor([first_value * 2, 2.0]), torch.float64)

    def second(ctx: C.Context):
        x = ctx.randn(3)
        pending = ctx.start(x)
        yield
        ctx.expect_close(ctx.expect_tensor(pending.value(), (3,)), x * 2, torch.float64)

    def third(ctx: C.Context) -> None:
        x = ctx.randn(4)
        ctx.expect_close(ctx.expect_tensor(ctx.call(x), (4,)), x * 2, torch.float64)

    return first, second, third


# (first case's input, its status, the later checks' status, the status of a call of the function afterwards):
# a crash once leaves the function callable; a timeout poisons it (its later calls time out at once, by design).
FAILURES = [(13.0, C.Status.CRASHED, C.Status.PASSED, "ok"), (17.0, C.Status.TIMEOUT, C.Status.TIMEOUT, "timeout"),
            (19.0, C.Status.NOT_ATTEMPTED, C.Status.NOT_ATTEMPTED, "ok")]


@pytest.mark.slow
@pytest.mark.parametrize("first_value, status, later, after_status", FAILURES)
def test_in_a_sandbox_a_crash_a_timeout_or_a_stop_ahead_gives_what_one_after_another_gives(monkeypatch, first_value,
                                                                                          status, later, after_status):
    """The second check's call was sent behind the first's: after a crash it runs in the next worker, after a
    timeout or a stop it is not made; either way the results are those of the checks run whole, one after
    another, and the function's next call gets what it gets after them."""
    src = [Cell(0, None, FAILING_SOURCE, FAILING_SOURCE, None)]
    outcomes = []
    with Sandbox(LIMITS) as sandbox:
        for runs in (failing_checks(first_value), [whole(r) if r.__name__ != "third" else r
                                                   for r in failing_checks(first_value)]):
            declare(monkeypatch, *runs)
            with sandbox.open(src, label="ahead-failing") as worker:
                result = grade(worker)
                after = worker(Request("double", (torch.ones(2),), {}))
            assert after.status == after_status
            if after_status == "ok":
                assert torch.equal(after.value().tensor(), torch.full((2,), 2.0))
            outcomes.append([(r.status, r.points, r.message) for r in result.checks])
    ahead, serial = outcomes
    assert ahead == serial
    assert [s for s, _, _ in ahead] == [status, later, later]
