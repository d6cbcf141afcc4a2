"""One rule for scores (autograder.core.points): hundredths that add up wherever they are added up."""
from __future__ import annotations

import random

import pytest

from autograder.core import points as P
from autograder.course.config import load_course

COURSE = load_course()


@pytest.mark.parametrize("total,weights", [(2, [1] * 11), (1, [1] * 8), (3, [2, 1, 1]), (4, [1, 3, 0.5, 2, 2, 1, 1]),
                                           (0.5, [1] * 7), (1, [1] * 3)])
def test_shares_are_hundredths_that_add_up_to_the_total(total, weights):
    got = P.shares(total, weights)
    assert len(got) == len(weights)
    assert all(round(x * 100) == pytest.approx(x * 100, abs=1e-9) for x in got)
    assert P.total(got) == total
    assert max(map(P.cents, got)) - min(map(P.cents, got)) <= 1 or len(set(weights)) > 1  # equal weights: within 0.01
    assert got == P.shares(total, weights)                              # deterministic


def test_any_subset_of_shares_sums_to_what_the_kit_reports():
    """What Gradescope and Otter add up per test equals the kit's exercise score: 2/11 of 2 points no more
    gives 1.090909 in one place and 1.090905 in another."""
    rng = random.Random(0)
    for _ in range(200):
        weights = [rng.choice([0.5, 1, 1, 2]) for _ in range(rng.randint(1, 15))]
        shares = P.shares(rng.choice([1, 2, 3, 4, 2.5]), weights)
        passed = [s for s in shares if rng.random() < 0.5]
        assert round(sum(passed), 2) == P.total(passed)
        assert f"{P.total(passed):g}" == P.fmt(P.total(passed))


def test_scores_read_in_hundredths():
    assert P.fmt(6.090909) == "6.09" and P.fmt(2.0) == "2" and P.fmt(0.5) == "0.5"
    assert P.fraction(6.090909, 8) == "6.09 / 8"


def test_every_exercise_of_the_course_splits_exactly():
    from autograder import catalog as C

    C.load_catalog(hidden=True, mistakes=False)
    for ex in COURSE.exercises:
        found = C.checks_for(ex.id, (C.Audience.PUBLIC, C.Audience.HIDDEN))
        assert P.total(P.shares(ex.points, [c.weight for c in found])) == ex.points, ex.id
