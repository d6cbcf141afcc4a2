"""``compare``: its verdict is the rule its docstring states, on every kind of value (the fast path for the
common case and the full rules below it must agree with that rule, NaN, infinities and slack included)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.catalog.comparison import compare


def stated_rule(got, expected, rtol, atol, slack=None) -> bool:
    """Close: |got - expected| <= atol + rtol * |expected| + slack everywhere; an infinite expected value is
    met only by the same infinity; a NaN is never close to a number; where the expected value itself is NaN
    (the reference leaves the element undefined) any value is accepted. Element by element, in plain Python."""
    g = np.asarray(torch.as_tensor(got).double()).ravel().tolist()
    e = np.asarray(torch.as_tensor(expected).double()).ravel().tolist()
    s = np.asarray(slack.double()).ravel().tolist() if slack is not None else [0.0] * len(e)
    for a, b, extra in zip(g, e, s, strict=True):
        if b != b:
            continue
        if a != a:
            return False
        if abs(b) == float("inf"):
            if a != b:
                return False
            continue
        if not abs(a - b) <= atol + rtol * abs(b) + extra:
            return False
    return True


def test_the_verdict_is_the_stated_rule_on_random_values_nan_and_infinities_included():
    gen = torch.Generator().manual_seed(7)
    passed = failed = 0
    for _ in range(3000):
        dims = int(torch.randint(0, 3, (1,), generator=gen))
        shape = tuple(int(d) for d in torch.randint(1, 5, (dims,), generator=gen))
        scale = 10.0 ** int(torch.randint(-3, 5, (1,), generator=gen))
        expected = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
        noise = 10.0 ** int(torch.randint(-12, 0, (1,), generator=gen))
        got = expected + torch.randn(shape, generator=gen, dtype=torch.float64) * noise * expected.abs()
        flags = torch.rand(4, generator=gen)
        flat_got, flat_exp = got.view(-1), expected.view(-1)
        if flags[0] < 0.1:
            flat_got[0] = float("nan")
        elif flags[0] < 0.15:
            flat_exp[0] = float("nan")
        if flags[1] < 0.15:
            flat_exp[-1] = float("inf") if flags[2] < 0.5 else -float("inf")
            if flags[3] < 0.5:
                flat_got[-1] = flat_exp[-1]
        slack = torch.rand(shape, generator=gen, dtype=torch.float64) * 1e-6 if flags[2] < 0.5 else None
        if flags[3] < 0.3:
            got = got.float()
        for rtol, atol in ((1e-5, 1e-6), (1e-9, 1e-10), (0.0, 0.0)):
            want = stated_rule(got, expected, rtol, atol, slack)
            for hidden in (False, True):
                assert (compare(got, expected, rtol, atol, hidden=hidden, slack=slack) is None) == want
            passed += want
            failed += not want
    assert passed > 1000 and failed > 1000          # both verdicts were exercised


@pytest.mark.parametrize("got, expected, close", [
    (torch.tensor([1.0, -0.0]), torch.tensor([1.0, 0.0], dtype=torch.float64), True),
    (torch.tensor(2.0, dtype=torch.float64), torch.tensor(2.0 + 1e-3, dtype=torch.float64), False),
    (np.array([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64), True),
    (torch.tensor([float("inf")]), torch.tensor([float("inf")], dtype=torch.float64), True),
    (torch.tensor([1e300], dtype=torch.float64), torch.tensor([float("inf")], dtype=torch.float64), False),
    (torch.tensor([-float("inf")]), torch.tensor([float("inf")], dtype=torch.float64), False),
    (torch.tensor([float("nan")]), torch.tensor([0.0], dtype=torch.float64), False),
    (torch.tensor([float("nan"), 5.0]), torch.tensor([float("nan")] * 2, dtype=torch.float64), True),
    (3, torch.tensor(3.0, dtype=torch.float64), True),
])
def test_edge_values(got, expected, close):
    assert (compare(got, expected, 1e-6, 1e-8) is None) is close


def test_compare_leaves_both_sides_as_they_were():
    got = torch.tensor([1.0, 2.0, 3.5], dtype=torch.float64)
    expected = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    before = got.clone(), expected.clone()
    assert compare(got, expected, 1e-6, 1e-8) is not None
    assert compare(expected, expected, 1e-6, 1e-8) is None
    assert torch.equal(got, before[0]) and torch.equal(expected, before[1])


def test_a_shape_mismatch_and_an_empty_tensor():
    assert "shape" in compare(torch.zeros(2), torch.zeros(3, dtype=torch.float64), 1e-6, 1e-8)[1]
    assert compare(torch.zeros(0), torch.zeros(0, dtype=torch.float64), 1e-6, 1e-8) is None
