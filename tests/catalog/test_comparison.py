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


def _normwise_one_by_one(pairs, rtol, atol) -> bool:
    """Each pair as the checks compare a gradient: compare(got, want, rtol, atol + rtol * its largest finite |want|)."""
    for got, want in pairs:
        finite = want[torch.isfinite(want)].abs()
        top = float(finite.max()) if finite.numel() else 0.0
        if compare(got, want, rtol, atol + rtol * top) is not None:
            return False
    return True


@pytest.mark.parametrize("seed", range(40))
def test_all_close_normwise_says_close_only_where_every_pair_is(seed):
    """The batched test of many tensors at once (a model's gradients) is True exactly where each pair would pass
    on its own, and never True where one would not: a difference just past one tensor's own bound, a NaN, an
    infinity, a shape, mixed float dtypes."""
    from autograder.catalog.comparison import all_close_normwise

    g = torch.Generator().manual_seed(seed)
    shapes = [tuple(int(s) for s in torch.randint(1, 6, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g))
              for _ in range(int(torch.randint(1, 8, (1,), generator=g)))]
    wants = [torch.randn(*s, generator=g, dtype=torch.float64) * float(10 ** torch.randint(-3, 4, (1,), generator=g))
             for s in shapes]
    rtol, atol = 1e-4, 1e-6
    gots = [(w + w.abs().max() * 1e-5 * torch.randn(w.shape, generator=g, dtype=torch.float64)).float() for w in wants]
    kind = seed % 5
    k = int(torch.randint(0, len(wants), (1,), generator=g))
    if kind == 1:       # one element just past its own tensor's bound
        top = float(wants[k].abs().max())
        bound = atol + rtol * top + rtol * abs(float(wants[k].reshape(-1)[0]))
        gots[k] = gots[k].double()
        gots[k].reshape(-1)[0] = wants[k].reshape(-1)[0] + 1.01 * bound
    elif kind == 2:
        gots[k] = gots[k].clone()
        gots[k].reshape(-1)[0] = float("nan")
    elif kind == 3:
        wants[k] = wants[k].clone()
        wants[k].reshape(-1)[0] = float("inf")
    elif kind == 4:
        gots[k] = gots[k].reshape(-1)[:-1] if gots[k].numel() > 1 else gots[k].reshape(1, 1, 1)
    pairs = list(zip(gots, wants))
    batched = all_close_normwise(pairs, rtol, atol)
    one_by_one = kind != 4 and _normwise_one_by_one(pairs, rtol, atol)
    assert batched == one_by_one
    if kind == 0:
        assert batched and one_by_one
    if kind in (1, 2, 3, 4):
        assert not batched
    assert all_close_normwise([], rtol, atol)


def test_a_difference_past_six_digits_shows_in_the_message():
    """Two values that agree to 8 significant digits printed to 6 read the same ("expected 0.00239768, got
    0.00239768"): the message prints as many digits as it takes to tell them apart, and no more where 6 do."""
    import re

    from autograder.catalog.comparison import shown_apart

    expected = torch.tensor([0.002397681234], dtype=torch.float64)
    got = torch.tensor([0.002397681239], dtype=torch.float64)
    assert f"{expected.item():.8g}" == f"{got.item():.8g}"            # equal to 8 significant digits
    for text in compare(got, expected, 1e-12, 0.0):
        want, seen = re.search(r"(?:期望|expected) ([-+.\de]+)[，,] ?(?:得到|got) ([-+.\de]+)", text).groups()
        assert want != seen and float(want) != float(seen), text
        assert float(want) == pytest.approx(expected.item(), rel=1e-8)
        assert float(seen) == pytest.approx(got.item(), rel=1e-8)
    assert shown_apart(0.5, 0.25) == ("0.5", "0.25")                  # 6 digits where they tell the two apart
    assert shown_apart(1.0, 1.0 + 2 ** -52) == ("1", "1.0000000000000002")   # up to float64's 17
    assert shown_apart(2.0, 2.0) == ("2", "2")
