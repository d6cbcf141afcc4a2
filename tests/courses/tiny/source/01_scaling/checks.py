"""Public checks of 01_scaling (shipped to students: no reference solution here).

The expected values are built element by element from the input, in float64.
"""
from __future__ import annotations

import torch

from autograder.catalog import Audience, Context, Kind, Precision, check, precision

P = Audience.PUBLIC
# Doubling is exact: the notebook asks for float64's own precision (no float32 intermediate allowed).
precision(["1.1"], Precision.FLOAT64, statement="for float64 inputs the result must agree with the reference to "
          "float64's precision")


def doubled(x: torch.Tensor) -> torch.Tensor:
    """Twice every element of ``x``, one element at a time, in float64."""
    flat = [value + value for value in x.double().flatten().tolist()]
    return torch.tensor(flat, dtype=torch.float64).reshape(x.shape)


@check("1.1", "shape-dtype", P, Kind.SHAPE, zh="输出与输入同形状、同 dtype", en="same shape and dtype as the input")
def _double_shape(ctx: Context) -> None:
    a, b = ctx.sizes(2)
    for dtype in (torch.float32, torch.float64):
        ctx.expect_tensor(ctx.call(ctx.randn(a, b, dtype=dtype)), (a, b), dtype, what="double(x)")


@check("1.1", "seeded-values", P, Kind.NUMERIC, zh="每个元素都是输入的两倍（float32 与 float64）",
       en="every element is twice the input's (float32 and float64)", weight=2)
def _double_values(ctx: Context) -> None:
    a, b, c = ctx.sizes(3)
    for dtype, shape in ((torch.float32, (a,)), (torch.float64, (a, b)), (torch.float32, (c, a, b))):
        x = ctx.randn(*shape, dtype=dtype, scale=3.0)
        want = doubled(x)
        got = ctx.expect_tensor(ctx.call(x), shape, dtype, what=f"double(x {shape})")
        ctx.expect_close(got, want, dtype, what=f"double(x {shape})")
