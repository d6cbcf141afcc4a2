"""The stopwatch the checks and the sandbox account their time with (the result's timing profile)."""
from __future__ import annotations

import time

import pytest

from autograder.stopwatch import OFF, Stopwatch


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


def test_off_measures_nothing():
    with OFF.section("compare"):
        pass
    OFF.add("student", 1.0)
    assert OFF.seconds == {}
