"""The stopwatch the checks and the sandbox account their time with (the result's timing profile)."""
from __future__ import annotations

import time

import pytest

from autograder.core.stopwatch import OFF, Stopwatch


def test_sections_add_up_and_an_exception_still_counts_and_propagates():
    timer = Stopwatch()
    for _ in range(3):
        with timer.section("compare"):
            time.sleep(0.002)
    with pytest.raises(KeyError):
        with timer.section("reference"):
            time.sleep(0.002)
            raise KeyError("raised inside")
    with timer.section("compare"), timer.section("inputs"):     # nested sections both count
        pass
    assert set(timer.seconds) == {"compare", "reference", "inputs"}
    assert timer.seconds["compare"] >= 0.006 and timer.seconds["reference"] >= 0.002


def test_a_section_entered_again_while_open_counts_once():
    timer = Stopwatch()
    with timer.section("reference"):
        time.sleep(0.01)
        with timer.section("reference"):        # a truth inside an expected value
            time.sleep(0.01)
    outer = timer.seconds["reference"]
    assert 0.02 <= outer < 0.039, outer             # the outer block's seconds, not 0.03 and more
    with timer.section("reference"):            # and once it is closed, the next entry counts again
        time.sleep(0.005)
    assert timer.seconds["reference"] >= outer + 0.005 and not timer.open


def test_off_measures_nothing():
    with OFF.section("compare"):
        pass
    OFF.add("student", 1.0)
    assert OFF.seconds == {}


def test_an_expected_value_is_the_references_work_and_a_truth_inside_it_counts_once(monkeypatch):
    import torch

    from autograder import catalog as C
    from autograder.core import stopwatch
    from autograder.course.config import load_course

    clock = [0.0]       # a clock that moves only when the work below says so: exact seconds, no flakes
    monkeypatch.setattr(stopwatch.time, "perf_counter", lambda: clock[0])

    def reference(x):
        clock[0] += 0.01
        return torch.softmax(x, -1)

    timer = Stopwatch()
    ctx = C.Context("2.2", "softmax", "timing-test", C.in_process_runner({}), load_course().tolerances, 0,
                    reference_fn=reference, timer=timer)
    x = torch.randn(3, 4, dtype=torch.float64)

    def slow_expected(x):      # an expected value of the check's own, and the reference's truth inside it
        clock[0] += 0.01
        return ctx.reference(x)

    got = ctx.expected(slow_expected, x)
    assert torch.equal(got, torch.softmax(x, -1))           # fn's value as it is
    assert timer.seconds == {"reference": pytest.approx(0.02)}      # 10 ms + 10 ms, not 10 + 2 x 10
