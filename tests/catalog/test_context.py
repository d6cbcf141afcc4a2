"""A call begun with ``Context.start`` while the check computes its expected value: the same requests in the
same order as ``call``, the verdict unchanged, the reply read whatever the trusted side did meanwhile.

In a sandbox the request travels at ``start`` (the worker runs the student's code while this side computes
the reference); in this process the call is made at ``value()``, after what the check did meanwhile.
"""
from __future__ import annotations

import time

import pytest
import torch

from autograder import catalog as C
from autograder.course.config import Limits, load_course
from autograder.grading.timing import PROFILE_SECTIONS, flat_profile
from autograder.course.notebook import Cell
from autograder.inside.probes import Request
from autograder.core.stopwatch import Stopwatch

LIMITS = Limits(call_seconds=1.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)
COURSE = load_course()


def cells(*sources: str) -> list[Cell]:
    return [Cell(i, None, s, s, None) for i, s in enumerate(sources)]


def context(runner, name: str = "softmax", timer: Stopwatch | None = None) -> C.Context:
    return C.Context("2.2", name, "overlap-test", runner, COURSE.tolerances, 0, timer=timer or Stopwatch())


# -- in this process: the call is made at value(), in the order the check reads --------------------------
def test_in_process_start_makes_the_call_at_value_after_the_checks_own_work():
    order: list[str] = []

    def double(t):
        order.append("student")
        out = t * 2
        t.mul_(100)                      # edits its argument: the check's own tensor must not see it
        return out

    ctx = context(C.in_process_runner({"double": double}), "double")
    x = torch.ones(3)
    pending = ctx.start(x)
    order.append("reference")
    want = x * 2
    assert order == ["reference"]
    got = pending.value()
    assert order == ["reference", "student"]
    assert torch.equal(got.tensor(), want) and torch.equal(x, torch.ones(3))
    assert ctx.last_request is not None and ctx.last_request.site == "overlap-test#1"
    assert ctx.last_value is got


def test_a_deferred_call_the_check_never_took_is_dropped_never_made():
    made: list[int] = []
    ctx = context(C.in_process_runner({"f": lambda t: made.append(1) or t}), "f")
    ctx.start(torch.ones(2))
    ctx.settle()
    assert made == [] and ctx.calls == 1


class StartingRunner:
    """A runner with ``start``, as a sandbox handle: records when each request is sent and finished."""

    def __init__(self, fn):
        self.fn, self.log = fn, []

    def __call__(self, request: Request):
        return self.start(request)()

    def start(self, request: Request):
        self.log.append(("sent", request.site))
        reply = C.in_process_runner({request.function: self.fn})(request)

        def finish():
            self.log.append(("read", request.site))
            return reply
        return finish


def test_a_check_that_stops_between_start_and_value_has_its_call_read_before_the_next_check():
    """run_exercise settles a started call whatever the check did: the runner is free for the next one."""
    runner = StartingRunner(lambda scores, dim=-1: torch.softmax(scores, dim))

    def abandoning(ctx: C.Context) -> None:
        ctx.start(ctx.randn(2, 3))
        raise C.CheckFailed(C.Msg("停在中间", "stopped half-way"))

    ctx = context(runner)
    with pytest.raises(C.CheckFailed):
        try:
            abandoning(ctx)
        finally:
            ctx.settle()
    assert runner.log == [("sent", "overlap-test#1"), ("read", "overlap-test#1")]
    assert ctx._pending == []


def test_start_then_value_gives_what_call_gives_and_fails_the_same_way():
    runner = StartingRunner(lambda t: t.float())      # the wrong dtype
    a, b = context(runner), context(C.in_process_runner({"softmax": lambda t: t.float()}))
    x = torch.randn(2, 3, dtype=torch.float64)
    got_a = a.start(x).value()
    got_b = b.call(x)
    assert got_a.spec == got_b.spec
    with pytest.raises(C.CheckFailed) as one:
        a.expect_tensor(got_a, (2, 3), torch.float64)
    with pytest.raises(C.CheckFailed) as two:
        b.expect_tensor(got_b, (2, 3), torch.float64)
    assert one.value.message == two.value.message


# -- in a sandbox: the request travels at start -------------------------------------------------------------
SLOW_SOURCE = ("import time, torch\n"
               "def slow(t):\n"
               "    time.sleep(0.3)\n"
               "    return t + 1\n"
               "def when(t):\n"
               "    began = time.time()\n"
               "    time.sleep(0.3)\n"
               "    return torch.tensor([began, float(t.sum())], dtype=torch.float64)\n"
               "def big(t):\n"
               "    return torch.full((2_000_000,), 3.0)\n"
               "def quick(t):\n"
               "    return t * 3\n")


def test_the_worker_runs_while_this_side_works_and_the_profile_still_adds_up(sandbox):
    timer = Stopwatch()
    with sandbox.open(cells(SLOW_SOURCE), label="overlap") as worker:
        ctx = context(worker, "when", timer)
        x = torch.zeros(2, dtype=torch.float64)
        pending = ctx.start(x)
        x.add_(50)                       # after start: the worker already holds its own bytes
        time.sleep(0.3)                  # this side's own work, as long as the student's
        back = time.time()
        began, plus = pending.value().tensor().tolist()
        assert plus == 0.0
        assert began < back, "the student's code began only after this side's own work: not overlapped"
        sandbox_side = dict(worker.timer.seconds)
    assert sandbox_side.get("hidden", 0.0) > 0.2
    grader = dict(timer.seconds)
    total = 2.0
    profile = flat_profile(grader, sandbox_side, total)
    assert set(profile) == set(PROFILE_SECTIONS)
    assert profile["overlap"] == pytest.approx(-sandbox_side["hidden"], abs=1e-3)
    assert sum(profile.values()) == pytest.approx(total, abs=1e-3)
    assert profile["student"] >= 0.29 and profile["ipc"] >= 0.0


def test_a_reply_that_came_while_this_side_was_away_past_the_call_limit_is_read_not_timed_out(sandbox):
    """call_seconds is 1 s: this side away 1.5 s after sending a call the worker answered at once."""
    with sandbox.open(cells(SLOW_SOURCE), label="away") as worker:
        ctx = context(worker, "big")          # 8 MB: more than a socket holds, the rest sent as it is read
        pending = ctx.start(torch.ones(2))
        time.sleep(1.5)
        got = pending.value().tensor()
        assert got.shape == (2_000_000,) and bool((got == 3.0).all())


def test_a_call_that_runs_past_its_limit_still_times_out_when_started(sandbox):
    src = cells("def forever(t):\n    while True:\n        pass\n", SLOW_SOURCE)
    with sandbox.open(src, label="forever") as worker:
        ctx = context(worker, "forever")
        pending = ctx.start(torch.ones(2))
        time.sleep(0.2)
        began = time.monotonic()
        reply = pending.reply()
        assert reply.status == "timeout"
        assert time.monotonic() - began < 1.5
        # the worker is forked again for the next call
        assert torch.equal(context(worker, "quick").call(torch.ones(1)).tensor(), torch.full((1,), 3.0))


def test_starting_another_call_or_closing_reads_the_one_in_flight_first(sandbox):
    with sandbox.open(cells(SLOW_SOURCE), label="two") as worker:
        first = worker.start(Request("slow", (torch.zeros(1),), {}))
        second = worker.start(Request("quick", (torch.ones(1),), {}))     # waits for the first's reply
        assert torch.equal(second().value().tensor(), torch.full((1,), 3.0))
        assert torch.equal(first().value().tensor(), torch.ones(1))
        assert first() is first()                                        # read once
        third = worker.start(Request("slow", (torch.ones(1),), {}))
    assert torch.equal(third().value().tensor(), torch.full((1,), 2.0))   # closed after reading it


def test_in_process_a_check_that_edits_its_inputs_after_start_does_not_reach_the_student():
    """As a sandbox's bytes are made at start, this process copies the arguments at start: the call made at
    value() sees them as they were then."""
    seen: list[list[float]] = []
    ctx = context(C.in_process_runner({"record": lambda t: seen.append(t.tolist()) or t * 2}), "record")
    x = torch.ones(3)
    pending = ctx.start(x)
    x.mul_(100)                          # the check's own work on its tensor, before the value is taken
    got = pending.value().tensor()
    assert seen == [[1.0, 1.0, 1.0]] and torch.equal(got, torch.full((3,), 2.0))
    assert ctx.last_request is not None and torch.equal(ctx.last_request.args[0], torch.ones(3))
