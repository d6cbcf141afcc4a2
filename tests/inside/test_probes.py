"""The "inputs" and "grad" probes and the hidden checks built on them (autograder.catalog.integrity).

An in-place edit of an input and a ``.detach()`` keep every returned value right; these
probes make both visible, and the trusted side judges from the bytes that came back.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from autograder import catalog as C
from autograder.course.config import load_course
from autograder.catalog.integrity import CHANGED, expect_input_gradients, expect_inputs_unchanged, fixed_sum
from autograder.inside.probes import Request, execute, probe_grad, probe_inputs

COURSE = load_course()


def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def softmax_in_place(x, dim=-1):
    x.sub_(x.amax(dim=dim, keepdim=True))
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_detached(x, dim=-1):
    return softmax(x, dim).detach()


def attention(Q, K, V):
    w = softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]))
    return w @ V, w


def attention_weights_detached(Q, K, V):
    out, w = attention(Q, K, V)
    return out, w.detach()


def context(fn, reference=softmax, name="softmax") -> C.Context:
    return C.Context("2.2", name, "probe-test", C.in_process_runner({name: fn}), COURSE.tolerances, 0,
                     reference_fn=reference, audience=C.Audience.HIDDEN)


def test_probe_inputs_returns_the_arguments_as_left():
    x = torch.tensor([[1.0, 2.0, float("nan")]])
    got = probe_inputs(softmax_in_place, x, dim=-1)
    assert got["args"][0] is x and got["kwargs"] == {"dim": None}
    arr = np.ones(3)
    assert probe_inputs(lambda a, n: a, arr, 3)["args"] == [arr, None]


def test_probe_grad_reports_missing_gradients():
    x = torch.randn(2, 3, dtype=torch.float64)
    g = torch.randn(2, 3, dtype=torch.float64)
    assert probe_grad(softmax, (0,), g, x)["grads"][0] is not None
    assert probe_grad(softmax_detached, (0,), g, x)["grads"] == [None]
    assert x.grad is None and not x.requires_grad          # the caller's tensor is left alone


def test_grad_probe_through_execute_and_plain_data():
    x = torch.randn(2, 3, dtype=torch.float64)
    reply = execute({"softmax": softmax}, Request("softmax", ((0,), torch.ones(2, 3, dtype=torch.float64), x),
                                                  probe="grad"))
    assert reply.status == "ok"
    value = reply.value().to_python()
    assert torch.allclose(value["grads"][0], torch.zeros(2, 3, dtype=torch.float64), atol=1e-12)


def test_inputs_unchanged_passes_the_reference_and_names_an_in_place_edit():
    x = torch.randn(3, 4, dtype=torch.float64)
    x[0, 0] = float("nan")                                   # NaN-aware: the same bits pass
    expect_inputs_unchanged(context(softmax), x)
    with pytest.raises(C.CheckFailed) as failed:
        expect_inputs_unchanged(context(softmax_in_place), torch.randn(3, 4, dtype=torch.float64))
    assert failed.value.hidden == CHANGED and failed.value.diagnose
    assert "sub_" in CHANGED.en and "masked_fill_" in CHANGED.zh


def test_gradients_reach_the_inputs():
    expect_input_gradients(context(softmax), ("x",), (0,), torch.randn(2, 5, dtype=torch.float64))
    with pytest.raises(C.CheckFailed) as failed:
        expect_input_gradients(context(softmax_detached), ("x",), (0,), torch.randn(2, 5, dtype=torch.float64))
    assert "no gradient reached the input x" in failed.value.hidden.en


def test_a_detached_second_output_is_seen():
    args = tuple(torch.randn(2, n, 3, dtype=torch.float64) for n in (3, 4, 4))
    ctx = context(attention, attention, "attn")
    expect_input_gradients(ctx, ("Q", "K", "V"), (0, 1, 2), *args, outputs=("out", "weights"))
    ctx = context(attention_weights_detached, attention, "attn")
    with pytest.raises(C.CheckFailed) as failed:
        expect_input_gradients(ctx, ("Q", "K", "V"), (0, 1, 2), *args, outputs=("out", "weights"))
    assert "differs from the reference" in failed.value.hidden.en


def jacobian(weights):
    """2.5's formula: diag(p) - p p^T, p the weights (rows that sum to 1)."""
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def jacobian_renormalized(weights):
    """The weights divided by their sum first: the same values on rows that sum to 1, another gradient along the
    all-ones direction (the one direction such rows never move in)."""
    p = weights / weights.sum(dim=-1, keepdim=True)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)


def jacobian_outer_constant(weights):
    """Right values, the outer product taken as a constant: a gradient arrives, and differs in directions that keep
    the rows' sums."""
    p = weights.detach()
    return torch.diag_embed(weights) - p.unsqueeze(-1) * p.unsqueeze(-2)


def jacobian_zero_gradient(weights):
    """Right values, a gradient of zero everywhere: the computation is cut off (0 * weights keeps a graph)."""
    return jacobian(weights.detach()) + 0.0 * weights.unsqueeze(-1)


def test_a_gradient_is_compared_in_the_directions_the_input_may_move():
    """2.5's weights sum to 1 along their last dim: the answer that renormalizes them first keeps the gradient check
    where the comparison leaves out the all-ones direction, and loses it where it does not (issue 64)."""
    weights = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64), -1)
    rows = {"weights": fixed_sum(-1)}

    def check(fn, **fixed):
        expect_input_gradients(context(fn, jacobian, "softmax_jacobian"), ("weights",), (0,), weights, **fixed)

    check(jacobian, fixed=rows)
    check(jacobian_renormalized, fixed=rows)
    with pytest.raises(C.CheckFailed) as raw:
        check(jacobian_renormalized)          # compared in every direction: it differs along the all-ones one
    assert "with respect to the input weights differs" in raw.value.hidden.en
    with pytest.raises(C.CheckFailed) as other:
        check(jacobian_outer_constant, fixed=rows)
    said = other.value.hidden
    assert "the input weights, in the directions that keep each row's sum, differs" in said.en
    assert "保持每行之和不变的方向" in said.zh
    # A gradient that arrived and differs was not cut off: no .detach() or no_grad is suggested.
    for message in (said, raw.value.hidden, other.value.message):
        assert "detach" not in message.en + message.zh and "no_grad" not in message.en + message.zh
    with pytest.raises(C.CheckFailed) as zero:
        check(jacobian_zero_gradient, fixed=rows)
    assert "is zero everywhere" in zero.value.hidden.en and ".detach()" in zero.value.hidden.en
    assert "torch.no_grad()" in zero.value.hidden.zh and "处处为 0" in zero.value.hidden.zh
    with pytest.raises(ValueError, match="not among the inputs"):
        check(jacobian, fixed={"w": fixed_sum(-1)})

