"""Public checks of 02_qkv_attention (shipped to students: no reference solution here)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import Audience, Context, Kind, check, exercise

P, H = Audience.PUBLIC, Audience.HIDDEN

exercise("2.4", forbidden=("F.scaled_dot_product_attention", "nn.MultiheadAttention",
                           "F.multi_head_attention_forward"))


@check("2.4", "shapes", P, Kind.SHAPE, zh="输出形状与 dtype", en="output shapes and dtype")
def _sdpa_shapes(ctx: Context) -> None:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5)
    for dtype in (torch.float32, torch.float64):
        Q, K, V = ctx.randn(B, Tq, Dk, dtype=dtype), ctx.randn(B, Tk, Dk, dtype=dtype), ctx.randn(B, Tk, Dv, dtype=dtype)
        out, weights = ctx.expect_tuple(ctx.call(Q, K, V), 2)
        ctx.expect_tensor(out, (B, Tq, Dv), dtype, what="out")
        ctx.expect_tensor(weights, (B, Tq, Tk), dtype, what="weights")


@check("2.4", "rows-sum-to-one", P, Kind.PROPERTY, zh="每行权重加和为 1", en="every row of weights sums to 1")
def _sdpa_rows(ctx: Context) -> None:
    Tq, Tk, D = ctx.sizes(3)
    Q, K, V = ctx.randn(Tq, D), ctx.randn(Tk, D), ctx.randn(Tk, D)
    _, weights = ctx.expect_tuple(ctx.call(Q, K, V), 2)
    w = ctx.expect_tensor(weights, (Tq, Tk), torch.float64, what="weights")
    ctx.expect_close(w.sum(-1), torch.ones(Tq), torch.float64, what="weights.sum(-1)")


@check("2.4", "matches-torch", P, Kind.NUMERIC, zh="与 F.scaled_dot_product_attention 一致",
       en="agrees with F.scaled_dot_product_attention", weight=2)
def _sdpa_torch(ctx: Context) -> None:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5)
    for dtype in (torch.float32, torch.float64):
        Q, K, V = ctx.randn(B, Tq, Dk, dtype=dtype), ctx.randn(B, Tk, Dk, dtype=dtype), ctx.randn(B, Tk, Dv, dtype=dtype)
        out, weights = ctx.expect_tuple(ctx.call(Q, K, V), 2)
        q, k, v = Q.double(), K.double(), V.double()
        want_w = F.softmax(q @ k.transpose(-2, -1) / Dk ** 0.5, dim=-1)
        ctx.expect_close(ctx.expect_tensor(weights, (B, Tq, Tk), dtype, what="weights"), want_w, dtype, what="weights")
        ctx.expect_close(ctx.expect_tensor(out, (B, Tq, Dv), dtype, what="out"),
                         F.scaled_dot_product_attention(q, k, v), dtype, what="out")
