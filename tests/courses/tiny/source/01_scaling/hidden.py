"""Hidden checks of 01_scaling: random inputs against the reference (``ctx.reference``)."""
from __future__ import annotations

import torch

from autograder.catalog import Audience, Context, Kind, check, near_answer

H = Audience.HIDDEN


@check("1.1", "reference-random", H, Kind.NUMERIC, zh="随机形状与 dtype：与参考答案一致",
       en="random shapes and dtypes: agrees with the reference", weight=2, same_as="seeded-values")
def _double_reference(ctx: Context) -> None:
    a, b, c = ctx.sizes(3)
    for dtype, shape in ((torch.float64, (b,)), (torch.float32, (a, c)), (torch.float64, (c, b, a))):
        x = ctx.randn(*shape, dtype=dtype, scale=10.0)
        want = ctx.reference(x)
        got = ctx.expect_tensor(ctx.call(x), shape, dtype, what=f"double(x {shape}, {dtype})")
        ctx.expect_close(got, want, dtype, what=f"double(x {shape}, {dtype})")


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
near_answer("1.1", r"return(2\*x|x\*2|x\+x)$")
