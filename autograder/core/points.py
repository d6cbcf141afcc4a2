"""Points: one rule for how scores are made, summed and written.

Every score the kit reports is a whole number of hundredths of a point. An exercise's
points are shared among its checks by weight in hundredths (largest remainder: the shares
always add up to the exercise's points exactly), so a check earns its share or nothing, an
exercise's score is the sum of its checks' and a submission's the sum of its exercises'.
Whoever adds them up again (Gradescope and Otter per test, nbgrader per test cell, an LMS
per assignment) gets the same number, and no table shows ``6.091 / 8``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Hundredths: the unit of every score.
UNIT = 100


def cents(x: float) -> int:
    return int(round(float(x) * UNIT))


def of_cents(n: int) -> float:
    return round(n / UNIT, 2)


def hundredths(x: float) -> float:
    """A score as the kit keeps it: rounded to hundredths of a point (the one rounding of the kit)."""
    return of_cents(cents(x))


def shares(total: float, weights: Sequence[float]) -> list[float]:
    """``total`` points shared in proportion to ``weights``, in hundredths that add up exactly.

    Largest remainder (Hamilton): each share is rounded down, and the hundredths left over go
    to the largest remainders, ties to the earlier check, so the split is deterministic.
    """
    if not weights:
        return []
    whole = cents(total)
    weight_sum = float(sum(weights))
    if weight_sum <= 0:
        raise ValueError("shares: the weights add up to nothing")
    exact = [whole * float(w) / weight_sum for w in weights]
    floors = [int(e) for e in exact]
    left = whole - sum(floors)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    return [of_cents(n) for n in floors]


def total(values: Iterable[float]) -> float:
    """A sum of scores, exact in hundredths."""
    return of_cents(sum(cents(v) for v in values))


def fmt(x: float) -> str:
    """A score as people read it: ``6.09``, ``2``, ``0.5``."""
    return f"{hundredths(x):g}"


def fraction(points: float, max_points: float) -> str:
    """``6.09 / 8``."""
    return f"{fmt(points)} / {fmt(max_points)}"
