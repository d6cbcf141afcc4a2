"""The reference solutions in solutions/ against torch's own modules, float32 and float64.

These are the truth the hidden grader compares students with, so they are tested
directly against torch (nn.RNN, F.softmax, nn.MultiheadAttention, F.cross_entropy)
on seeded random inputs of distinct sizes.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from solutions import multi_head_attention as mha
from solutions import padding_masks as pm
from solutions import qkv_attention as qkv
from solutions import rnn_decay as rnn

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-9, atol=1e-11)}


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def test_chapter_facts():
    z = np.array([0, 0.5, 1, 2, 3])
    np.testing.assert_allclose(rnn.tanh_derivative(z), [1.0, 0.7864, 0.4200, 0.0707, 0.0099], atol=5e-5)
    assert isinstance(rnn.tanh_derivative(0.5), float)
    assert isinstance(rnn.tanh_derivative(torch.tensor([0.5])), torch.Tensor)
    table = rnn.decay_table([5, 10, 20, 50])
    np.testing.assert_allclose(table[:, 0], [0.2610, 0.1452, 0.0493, 0.0021], atol=5e-5)
    np.testing.assert_allclose(table[:, 1], 0.6)
    w = rnn.attention_weights(torch.tensor([0.0, 1.0]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.8, 0.8]]))
    np.testing.assert_allclose(w.numpy(), [0.168, 0.457, 0.374], atol=5e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias_h0", [False, True])
def test_rnn_layer_equals_nn_rnn(gen, dtype, with_bias_h0):
    B, T, D, H = 3, 7, 5, 4
    torch_rnn = nn.RNN(D, H, batch_first=True).to(dtype)
    x = torch.randn(B, T, D, generator=gen).to(dtype)
    h0 = torch.randn(1, B, H, generator=gen).to(dtype) if with_bias_h0 else None
    with torch.no_grad():
        if not with_bias_h0:
            torch_rnn.bias_ih_l0.zero_()
        torch_rnn.bias_hh_l0.zero_()
        want_out, want_h = torch_rnn(x, h0)
        b = torch_rnn.bias_ih_l0 if with_bias_h0 else None
        out, h = rnn.rnn_layer(x, torch_rnn.weight_ih_l0.T, torch_rnn.weight_hh_l0.T, b,
                               None if h0 is None else h0[0])
    torch.testing.assert_close(out, want_out, **TOL[dtype])
    torch.testing.assert_close(h, want_h[0], **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_attention_equal_torch(gen, dtype):
    x = (torch.randn(2, 3, 6, 5, generator=gen) * 1000).to(dtype)
    for dim in (-1, 0, 2):
        torch.testing.assert_close(qkv.softmax(x, dim=dim), F.softmax(x, dim=dim), **TOL[dtype])
    Q = torch.randn(2, 3, 6, 4, generator=gen).to(dtype)
    K = torch.randn(2, 3, 7, 4, generator=gen).to(dtype)
    V = torch.randn(2, 3, 7, 9, generator=gen).to(dtype)
    out, weights = qkv.scaled_dot_product_attention(Q, K, V)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, K, V), **TOL[dtype])
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 6, dtype=dtype), **TOL[dtype])
    torch.testing.assert_close(qkv.attention_scores(Q, K), Q @ K.transpose(-2, -1) / 2.0, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_softmax_matches_torch_on_real_rows_and_zeros_elsewhere(gen, dtype):
    lengths = torch.tensor([5, 2, 0, 3])
    mask = pm.padding_mask(lengths)
    assert mask.dtype == torch.bool and mask.shape == (4, 5)
    scores = torch.randn(4, 2, 3, 5, generator=gen).to(dtype)
    w = pm.masked_softmax(scores, mask)
    want = F.softmax(scores.masked_fill(mask[:, None, None, :], -math.inf), dim=-1)
    real = lengths > 0
    torch.testing.assert_close(w[real], want[real], **TOL[dtype])
    assert torch.equal(w[~real], torch.zeros_like(w[~real]))
    assert (w.masked_select(mask[:, None, None, :].expand_as(w)) == 0).all()
    assert not torch.isnan(w).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_cross_entropy_equals_torch(gen, dtype):
    B, T, C = 3, 6, 5
    logits = (torch.randn(B, T, C, generator=gen) * 30).to(dtype)
    targets = torch.randint(0, C, (B, T), generator=gen)
    targets[0, 2:] = -100
    targets[2, :] = -100
    targets[1, 0] = -100
    want = F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(pm.masked_cross_entropy(logits, targets), want, **TOL[dtype])
    assert torch.equal(pm.causal_mask(4), torch.ones(4, 4, dtype=torch.bool).triu(1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_equals_nn_multihead_attention(gen, dtype):
    E, H, B, Tq, Tk = 12, 3, 2, 4, 6
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True).to(dtype)
    with torch.no_grad():
        torch_mha.in_proj_bias.normal_(generator=gen)
        torch_mha.out_proj.bias.normal_(generator=gen)
    q = torch.randn(B, Tq, E, generator=gen).to(dtype)
    kv = torch.randn(B, Tk, E, generator=gen).to(dtype)
    mask = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
    want_out, want_w = torch_mha(q, kv, kv, key_padding_mask=mask, average_attn_weights=False)
    args = (torch_mha.in_proj_weight, torch_mha.in_proj_bias, torch_mha.out_proj.weight, torch_mha.out_proj.bias)
    out, w = mha.multi_head_attention(q, kv, kv, H, *args, key_padding_mask=mask)
    torch.testing.assert_close(out, want_out, **TOL[dtype])
    torch.testing.assert_close(w, want_w, **TOL[dtype])

    # The module: same parameters by name, same outputs and gradients.
    mine = mha.MultiHeadAttention(E, H).to(dtype)
    mine.load_state_dict(torch_mha.state_dict(), strict=False)
    q1, q2 = q.clone().requires_grad_(True), q.clone().requires_grad_(True)
    out1, _ = mine(q1, kv, kv, key_padding_mask=mask)
    out2, _ = torch_mha(q2, kv, kv, key_padding_mask=mask, average_attn_weights=False)
    grad = torch.randn(out1.shape, generator=gen).to(dtype)
    (out1 * grad).sum().backward()
    (out2 * grad).sum().backward()
    torch.testing.assert_close(q1.grad, q2.grad, **TOL[dtype])
    torch.testing.assert_close(mine.in_proj_weight.grad, torch_mha.in_proj_weight.grad, **TOL[dtype])
    torch.testing.assert_close(mine.out_proj.weight.grad, torch_mha.out_proj.weight.grad, **TOL[dtype])


def test_fully_padded_batch_row_gives_zero_weights_and_bias_output(gen):
    E, H = 8, 2
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True).double()
    x = torch.randn(2, 3, E, generator=gen, dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [False, False, True]])
    out, w = mha.multi_head_attention(x, x, x, H, torch_mha.in_proj_weight, torch_mha.in_proj_bias,
                                      torch_mha.out_proj.weight, torch_mha.out_proj.bias, mask)
    assert torch.equal(w[0], torch.zeros_like(w[0]))
    torch.testing.assert_close(out[0], torch_mha.out_proj.bias.detach().expand(3, E))


def test_split_merge_round_trip_and_memory(gen):
    x = torch.randn(2, 5, 12, generator=gen)
    assert torch.equal(mha.merge_heads(mha.split_heads(x, 3)), x)
    assert mha.split_heads(x, 4).shape == (2, 4, 5, 3)
    with pytest.raises(ValueError, match="整除"):
        mha.split_heads(x, 5)
    assert mha.attention_memory(2, 8, 1024) == 2 * 8 * 1024 * 1024 * 4
    assert type(mha.attention_memory(2, 8, 1024)) is int
