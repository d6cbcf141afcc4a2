"""Hidden checks of 02_qkv_attention: randomized inputs against solutions/, edge cases."""
from __future__ import annotations

import torch

from ..checks import Audience, Context, Kind, check

H = Audience.HIDDEN


@check("2.4", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案一致", en="agrees with the reference on random inputs", weight=3)
def _sdpa_reference(ctx: Context) -> None:
    for batch in ((), (3,), (2, 3)):
        Tq, Tk, Dk, Dv = ctx.sizes(4)
        for dtype in (torch.float32, torch.float64):
            Q, K, V = ctx.randn(*batch, Tq, Dk, dtype=dtype), ctx.randn(*batch, Tk, Dk, dtype=dtype), ctx.randn(*batch, Tk, Dv, dtype=dtype)
            out, weights = ctx.expect_tuple(ctx.call(Q, K, V), 2)
            want_out, want_w = ctx.reference(Q, K, V)
            ctx.expect_close(ctx.expect_tensor(weights, (*batch, Tq, Tk), dtype, what="weights"), want_w, dtype, what="weights")
            ctx.expect_close(ctx.expect_tensor(out, (*batch, Tq, Dv), dtype, what="out"), want_out, dtype, what="out")
