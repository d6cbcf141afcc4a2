"""Known mistakes of 01_scaling (instructor side only)."""
from __future__ import annotations

from autograder.catalog import mistake


@mistake("1.1", "adds-one", zh="多加了 1：应为 2 * x，不是 x + x + 1", en="adds 1: it is 2 * x, not x + x + 1")
def _adds_one(x):
    return x + x + 1


@mistake("1.1", "triples", zh="乘了 3 而不是 2", en="multiplies by 3 instead of 2")
def _triples(x):
    return x * 3
