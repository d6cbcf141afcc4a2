"""Public checks of 02_qkv_attention (shipped to students: no reference solution here).

The truth here is torch's own code (``F.softmax``, ``F.scaled_dot_product_attention``)
or closed-form math, in float64. Sizes are drawn distinct per dimension so a
transposed axis cannot go unnoticed, and batch dims are exercised because
``K.T`` only works on 2-D tensors.

References are computed *before* the student's function runs: in self-check the
student gets the very tensors the check holds and could modify them in place.
"""
from __future__ import annotations


from collections.abc import Iterator

import torch
import torch.nn.functional as F

from autograder.catalog import (Precision, precision, Audience, CheckFailed, Context, Kind, Msg, Pending, Status, Value, check, compare,
                                exercise)

P = Audience.PUBLIC

SOFTMAX_FORBIDDEN = ("torch.softmax", "F.softmax", "Tensor.softmax", "F.log_softmax", "torch.log_softmax")
ATTENTION_FORBIDDEN = ("F.scaled_dot_product_attention", "nn.MultiheadAttention", "F.multi_head_attention_forward")

exercise("2.2", forbidden=SOFTMAX_FORBIDDEN)
exercise("2.4", forbidden=ATTENTION_FORBIDDEN)

#: What the notebook's conventions say of precision (its introduction): a float32 scalar or table inside a float64
#: call is correct (autograder.catalog.Precision.ONE_FLOAT32).
PRECISION_RULE = "输入是 float64 时，结果要与参考答案在 float64 下一致，但允许一个 float32 的中间量带来的误差"
precision(("2.1", "2.2", "2.3", "2.4", "2.5"), Precision.ONE_FLOAT32, statement=PRECISION_RULE)

#: The chapter's softmax example (scores of query [0, 1] over 我/love/猫).
FACT_SCORES = [0.0, 1.0, 0.8]
FACT_WEIGHTS = [0.168, 0.457, 0.374]
BATCHES = ((), (3,), (2, 3))


def seeded_example() -> tuple[torch.Tensor, ...]:
    """The notebook's example: ``torch.manual_seed(0)``, x = randn(5, 8), W_q, W_k, W_v = randn(8, 8) * 0.3.

    Drawn from a private generator with the same seed (the same numbers as the
    global one) so that self-check leaves the student's RNG alone.
    """
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g)
    W_q, W_k, W_v = (torch.randn(8, 8, generator=g) * 0.3 for _ in range(3))
    return x, W_q, W_k, W_v


def reference_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, weights) in float64: torch's fused attention; the weights are the same call with V = I."""
    q, k, v = Q.double(), K.double(), V.double()
    eye = torch.eye(k.shape[-2], dtype=torch.float64).expand(*k.shape[:-1], k.shape[-2])
    return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, eye)


def spread_slices(ctx: Context, n: int, m: int, dtype: torch.dtype) -> torch.Tensor:
    """(n, m): n slices (rows) of m >= 3 values spread over thousands, of both signs.

    Each row holds values near +3000, near 0 and near -3000 (for m >= 4 two or more near +3000, within a
    few units of each other, so its softmax is not one-hot), the whole row shifted by +1000 or -1000 in turn.
    The max shift gives the right answer; a shift by the row's mean or min leaves exponents in the
    thousands (inf/NaN), and so does none; each of those fails on other elements, so feedback can
    tell them apart.
    """
    levels = torch.tensor([3000.0, 0.0, -3000.0], dtype=torch.float64)
    picks = torch.stack([torch.randperm(m, generator=ctx.generator) % 3 for _ in range(n)])   # every level in each row
    offsets = torch.where(torch.arange(n) % 2 == 0, 1000.0, -1000.0).to(torch.float64).unsqueeze(-1)
    return (levels[picks] + offsets + ctx.randn(n, m, scale=2.0)).to(dtype)


def batch_names(batch: tuple[int, ...]) -> tuple[str, str]:
    """(zh, en) naming a case's batch dims in feedback: "批量维 (2, 3)", or "无批量维" for none."""
    return (f"批量维 {batch}", f"batch dims {batch}") if batch else ("无批量维", "no batch dims")


def sizes_apart(ctx: Context, n: int, low: int = 2, high: int = 9) -> list[int]:
    """``ctx.sizes``, drawn again until no size is the square of another (no Tk = Dk ** 2).

    A scale taken from the wrong size (sqrt(Tk), sqrt(Dv), sqrt(Q.shape[1])) then never equals another
    known mistake's (dividing by Dk), so feedback can tell them apart.
    """
    while True:
        sizes = ctx.sizes(n, low, high)
        if not any(a == b * b for a in sizes for b in sizes):
            return sizes


def batched_value(ctx: Context, args: tuple[torch.Tensor, ...], pending: Pending) -> Value:
    """The value of the call ``ctx.start(*args)`` began, with batched inputs; a call that raises only because of
    the batch dims gets a pointed message."""
    try:
        return pending.value()
    except CheckFailed as failed:
        if failed.status is not Status.ERROR:
            raise
        first = tuple(a.reshape(-1, *a.shape[-2:])[0] for a in args)     # one 2-D slice of each input
        if ctx.call_raw(*first).status != "ok":
            raise
        raise CheckFailed(Msg(
            f"2 维输入可以运行，带批量维（{tuple(args[0].shape)}）时却报错。如果用了 K.T 或 K.t()："
            f"它们只能转置 2 维张量，请用 K.transpose(-2, -1) 或 K.mT。原错误：{failed.message.zh}",
            f"works on 2-D inputs but raises with batch dims ({tuple(args[0].shape)}). If you used K.T or K.t(): "
            f"they transpose only 2-D tensors, use K.transpose(-2, -1) or K.mT. The error: {failed.message.en}"),
            status=Status.ERROR, error_type=failed.error_type) from None


# -- 2.1 project_qkv -------------------------------------------------------------
@check("2.1", "shapes", P, Kind.SHAPE, zh="Q、K 形状 (..., T, Dk)，V 形状 (..., T, Dv)，dtype 不变",
       en="Q, K have shape (..., T, Dk), V (..., T, Dv), in the input's dtype",
       statement="返回元组 `(Q, K, V)`，形状依次为 (..., T, Dk)、(..., T, Dk)、(..., T, Dv)")
def _project_shapes(ctx: Context) -> Iterator[None]:
    B, T, D, Dk, Dv = ctx.sizes(5)
    started = []
    for dtype, batch in ((torch.float32, (B,)), (torch.float64, ())):
        x = ctx.randn(*batch, T, D, dtype=dtype)
        W_q, W_k, W_v = ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dv, dtype=dtype)
        started.append((dtype, batch, ctx.start(x, W_q, W_k, W_v)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, batch, pending in started:
        Q, K, V = ctx.expect_tuple(pending.value(), 3)
        ctx.expect_tensor(Q, (*batch, T, Dk), dtype, what="Q")
        ctx.expect_tensor(K, (*batch, T, Dk), dtype, what="K")
        ctx.expect_tensor(V, (*batch, T, Dv), dtype, what="V")


@check("2.1", "seeded-example", P, Kind.FACT, zh="本章的例子（torch.manual_seed(0)，x (5, 8)）：Q = x @ W_q 等",
       en="the chapter's example (torch.manual_seed(0), x (5, 8)): Q = x @ W_q and so on")
def _project_fact(ctx: Context) -> Iterator[None]:
    x, W_q, W_k, W_v = seeded_example()
    want = [x.double() @ W.double() for W in (W_q, W_k, W_v)]
    pending = ctx.start(x, W_q, W_k, W_v)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tuple(pending.value(), 3)
    for name, g, w in zip("QKV", got, want):
        ctx.expect_close(ctx.expect_tensor(g, (5, 8), torch.float32, what=name), w, torch.float32, what=name)


@check("2.1", "matches-matmul", P, Kind.NUMERIC, zh="与 x @ W 一致（带批量维，float32 与 float64）",
       en="agrees with x @ W (batch dims, float32 and float64)", weight=2,
       statement="写 `project_qkv(x, W_q, W_k, W_v)`，返回元组 `(Q, K, V)`")
def _project_numeric(ctx: Context) -> Iterator[None]:
    started = []
    for dtype, batch in ((torch.float32, ()), (torch.float64, (2,)), (torch.float32, (2, 3))):
        T, D, Dk, Dv = ctx.sizes(4)
        x = ctx.randn(*batch, T, D, dtype=dtype)
        W_q, W_k, W_v = ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dv, dtype=dtype)
        started.append((dtype, batch, (T, Dk, Dv), (x, W_q, W_k, W_v), ctx.start(x, W_q, W_k, W_v)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, batch, (T, Dk, Dv), (x, W_q, W_k, W_v), pending in started:
        want = [x.double() @ W.double() for W in (W_q, W_k, W_v)]
        got = ctx.expect_tuple(pending.value(), 3)
        for name, g, w, width in zip("QKV", got, want, (Dk, Dk, Dv)):
            ctx.expect_close(ctx.expect_tensor(g, (*batch, T, width), dtype, what=name), w, dtype, what=name)


# -- 2.2 softmax ----------------------------------------------------------------
@check("2.2", "shape-dtype", P, Kind.SHAPE, zh="输出与输入同形状、同 dtype", en="same shape and dtype as the input",
       statement="返回与 `x` 同形状、同 dtype 的张量")
def _softmax_shape(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3)
    started = [(dtype, dim, ctx.start(ctx.randn(a, b, c, dtype=dtype), dim=dim))
               for dtype, dim in ((torch.float32, -1), (torch.float64, 1))]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, dim, pending in started:
        ctx.expect_tensor(pending.value(), (a, b, c), dtype, what=f"softmax(x, dim={dim})")


@check("2.2", "chapter-weights", P, Kind.FACT, zh="本章的例子：softmax([0, 1, 0.8]) = [0.168, 0.457, 0.374]",
       en="the chapter's example: softmax([0, 1, 0.8]) = [0.168, 0.457, 0.374]")
def _softmax_fact(ctx: Context) -> Iterator[None]:
    pending = ctx.start(torch.tensor(FACT_SCORES))
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (3,), torch.float32, what="softmax([0, 1, 0.8])")
    problem = _printed(got, FACT_WEIGHTS, 3)
    if problem is not None:
        raise CheckFailed(Msg(f"softmax([0, 1, 0.8])（本章的数值，保留 3 位小数）：{problem[0]}",
                              f"softmax([0, 1, 0.8]) (the chapter's values, to 3 decimals): {problem[1]}"),
                          diagnose=True)


def _printed(got: torch.Tensor, expected: list[float], decimals: int) -> tuple[str, str] | None:
    """compare() against numbers printed to ``decimals`` places (half a unit in the last digit)."""
    return compare(got, torch.tensor(expected, dtype=torch.float64), 0.0, 0.5 * 10.0 ** -decimals + 1e-12)


@check("2.2", "sums-to-one", P, Kind.PROPERTY, zh="沿 dim 加和为 1，且没有负数", en="sums to 1 along dim, no negatives")
def _softmax_property(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3)
    started = [(dim, ctx.start(ctx.randn(a, b, c, scale=3.0), dim=dim)) for dim in (-1, 0)]
    yield      # the next check begins here, while the worker runs these calls
    for dim, pending in started:
        got = ctx.expect_tensor(pending.value(), (a, b, c), torch.float64, what=f"softmax(x, dim={dim})")
        ctx.expect(bool(torch.isfinite(got).all()), "结果中有 NaN 或 inf", "the result holds NaN or inf", diagnose=True)
        ctx.expect(bool((got >= 0).all()), f"softmax 不应为负，实际最小 {got.min().item():.4g}",
                   f"softmax should not be negative, got min {got.min().item():.4g}", diagnose=True)
        sums = got.sum(dim)
        ctx.expect_close(sums, torch.ones_like(sums), torch.float64, what=f"softmax(x, dim={dim}).sum({dim})")


@check("2.2", "large-inputs", P, Kind.PROPERTY,
       zh="数值稳定：输入在几千（±1e4 附近）时，以及同一个切片里的值有正有负、相差几千时，都没有 inf/NaN，"
          "仍与 F.softmax 一致（先减去沿 dim 的最大值）",
       en="numerically stable: inputs in the thousands (near ±1e4), and slices whose values spread over thousands "
          "of either sign, give no inf/NaN and still agree with F.softmax (subtract the max along dim first)",
       statement=("做数值稳定的 softmax", "输入在几千的量级时也不能出现 `inf` 或 `nan`，同一个切片里的值有正有负、相差几千"
                  "（比如 `[3000, -3000]`）时也一样"))
def _softmax_stable(ctx: Context) -> Iterator[None]:
    a, b = ctx.sizes(2, 3, 9)
    near = []
    for dtype in (torch.float32, torch.float64):
        # Rows near +1e4 overflow exp(); rows near -1e4 underflow it to 0/0.
        x = ctx.randn(a, b, scale=2.0) + torch.where(torch.arange(a) % 2 == 0, 1e4, -1e4).unsqueeze(-1)
        x = x.to(dtype)
        near.append((dtype, x, ctx.start(x)))
    # One slice spreads over thousands of both signs: only a shift by its max keeps every exponent <= 0.
    spread = []
    for dtype, dim, shape in ((torch.float32, -1, (a, b)), (torch.float64, 0, (b, a, 2))):
        rows = spread_slices(ctx, a * (1 if dim == -1 else 2), b, dtype)      # (slices, values along dim)
        x = rows if dim == -1 else rows.reshape(a, 2, b).permute(2, 0, 1).contiguous()
        spread.append((dtype, dim, shape, x, ctx.start(x, dim=dim)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, pending in near:
        with ctx.case(zh=f"输入约为 ±1e4（{dtype}）", en=f"inputs near ±1e4 ({dtype})"):
            want = F.softmax(x.double(), dim=-1)
            got = ctx.expect_tensor(pending.value(), (a, b), dtype, what="softmax(x)")
            n_bad = int((~torch.isfinite(got)).sum())
            ctx.expect(n_bad == 0,
                       f"出现了 {n_bad} 个 inf/NaN：exp 上溢成 inf，或整行下溢成 0/0 了；先减去每行自己的最大值",
                       f"{n_bad} inf/NaN values: exp overflowed to inf, or a whole row underflowed to 0/0; subtract "
                       f"each row's own max first", diagnose=True)
            ctx.expect_close(got, want, dtype, what="softmax(x)")
    for dtype, dim, shape, x, pending in spread:
        with ctx.case(zh=f"同一切片里的值有正有负、相差几千（dim={dim}，{dtype}）",
                      en=f"slices spread over thousands of either sign (dim={dim}, {dtype})"):
            want = F.softmax(x.double(), dim=dim)
            got = ctx.expect_tensor(pending.value(), shape, dtype, what=f"softmax(x, dim={dim})")
            n_bad = int((~torch.isfinite(got)).sum())
            ctx.expect(n_bad == 0,
                       f"出现了 {n_bad} 个 inf/NaN：减去的常数必须是沿 dim 的最大值；减去平均值或最小值，"
                       f"比它们大几千的那一项仍会让 exp 溢出",
                       f"{n_bad} inf/NaN values: the constant subtracted must be the max along dim; after "
                       f"subtracting the mean or the min, a value thousands above them still overflows exp",
                       diagnose=True)
            ctx.expect_close(got, want, dtype, what=f"softmax(x, dim={dim})")


@check("2.2", "matches-torch", P, Kind.NUMERIC, zh="与 F.softmax 一致（各个 dim，float32 与 float64）",
       en="agrees with F.softmax (every dim, float32 and float64)", weight=2,
       statement="写 `softmax(x, dim=-1)`，沿 `dim` 这一维做数值稳定的 softmax")
def _softmax_numeric(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3)
    started = []
    for dtype, dim in ((torch.float32, -1), (torch.float64, 0), (torch.float64, 1), (torch.float32, -2)):
        x = ctx.randn(a, b, c, dtype=dtype, scale=2.0)
        started.append((dtype, dim, x, ctx.start(x, dim=dim)))
    x = ctx.randn(c, b)
    default = ctx.start(x)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, dim, x_dim, pending in started:
        want = F.softmax(x_dim.double(), dim=dim)
        got = ctx.expect_tensor(pending.value(), (a, b, c), dtype, what=f"softmax(x, dim={dim})")
        ctx.expect_close(got, want, dtype, what=f"softmax(x, dim={dim})")
    got = ctx.expect_tensor(default.value(), (c, b), torch.float64, what="softmax(x)")
    ctx.expect_close(got, F.softmax(x, dim=-1), torch.float64,
                     what=Msg("softmax(x)（默认 dim=-1）", "softmax(x) (default dim=-1)"))


# -- 2.3 attention_scores --------------------------------------------------------
def _torch_log_weights(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """The log of torch's own attention weights for Q and K, in float64.

    ``F.scaled_dot_product_attention`` with the identity as V returns its weights (weights @ I);
    their log is the scaled scores less each row's logsumexp. The checks compare the student's
    scores through ``log_softmax``, so no implementation of 2.3 ships with them.
    """
    q, k = Q.double(), K.double()
    eye = torch.eye(k.shape[-2], dtype=torch.float64).expand(*k.shape[:-2], -1, -1)
    return torch.log(F.scaled_dot_product_attention(q, k, eye))


def _expect_scores(ctx: Context, got: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, dtype: torch.dtype,
                   what: str) -> None:
    """The student's scores give torch's attention weights (row by row, up to a constant no softmax sees)."""
    ctx.expect_close(F.log_softmax(got.double(), dim=-1), _torch_log_weights(Q, K), dtype,
                     what=f"log_softmax({what}, dim=-1)")


@check("2.3", "shapes", P, Kind.SHAPE, zh="输出形状 (..., Tq, Tk)，dtype 不变",
       en="output shape (..., Tq, Tk) in the input's dtype", statement="形状 (..., Tq, Tk)")
def _scores_shapes(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk = sizes_apart(ctx, 3)
    started = [(dtype, ctx.start(ctx.randn(Tq, Dk, dtype=dtype), ctx.randn(Tk, Dk, dtype=dtype)))
               for dtype in (torch.float32, torch.float64)]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (Tq, Tk), dtype, what="attention_scores(Q, K)")


@check("2.3", "seeded-example", P, Kind.FACT, zh="本章的例子：分数形状 (5, 5)，softmax 后与 torch 的注意力权重一致",
       en="the chapter's example: scores of shape (5, 5) whose softmax is torch's attention weights")
def _scores_fact(ctx: Context) -> Iterator[None]:
    x, W_q, W_k, _ = seeded_example()
    Q, K = x @ W_q, x @ W_k
    pending = ctx.start(Q, K)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (5, 5), torch.float32, what="attention_scores(Q, K)")
    _expect_scores(ctx, got, Q, K, torch.float32, "attention_scores(Q, K)")


@check("2.3", "matches-closed-form", P, Kind.NUMERIC,
       zh="softmax 后与 torch 的 F.scaled_dot_product_attention 的注意力权重一致（缩放 1/√Dk）",
       en="after a softmax, torch's F.scaled_dot_product_attention weights (scaled by 1/sqrt(Dk))", weight=2,
       statement=r"返回 $QK^\top / \sqrt{d_k}$")
def _scores_numeric(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk = sizes_apart(ctx, 3)
    started = []
    for dtype in (torch.float32, torch.float64):
        Q, K = ctx.randn(Tq, Dk, dtype=dtype), ctx.randn(Tk, Dk, dtype=dtype)
        started.append((dtype, Q, K, ctx.start(Q, K)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, Q, K, pending in started:
        got = ctx.expect_tensor(pending.value(), (Tq, Tk), dtype, what="attention_scores(Q, K)")
        _expect_scores(ctx, got, Q, K, dtype, "attention_scores(Q, K)")


@check("2.3", "batch-dims", P, Kind.NUMERIC, zh="带批量维 (B, Tq, Dk) 与 (B, H, Tq, Dk) 也能用（K.T 不行）",
       en="works with batch dims (B, Tq, Dk) and (B, H, Tq, Dk) (K.T does not)", weight=2,
       statement="必须支持批量维")
def _scores_batched(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk, Dk = sizes_apart(ctx, 5)
    started = []
    for dtype, batch in ((torch.float64, (B,)), (torch.float32, (B, H))):
        Q, K = ctx.randn(*batch, Tq, Dk, dtype=dtype), ctx.randn(*batch, Tk, Dk, dtype=dtype)
        started.append((dtype, batch, Q, K, ctx.start(Q, K)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, batch, Q, K, pending in started:
        with ctx.case(*batch_names(batch)):
            got = ctx.expect_tensor(batched_value(ctx, (Q, K), pending), (*batch, Tq, Tk), dtype,
                                    what="attention_scores(Q, K)")
            _expect_scores(ctx, got, Q, K, dtype, "attention_scores(Q, K)")


# -- 2.4 scaled_dot_product_attention --------------------------------------------
@check("2.4", "shapes", P, Kind.SHAPE, zh="输出形状与 dtype", en="output shapes and dtype",
       statement="返回元组 `(out, weights)`，`out` 形状 (..., Tq, Dv)，`weights` 形状 (..., Tq, Tk)")
def _sdpa_shapes(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Dk, Dv = sizes_apart(ctx, 5)
    started = []
    for dtype in (torch.float32, torch.float64):
        Q = ctx.randn(B, Tq, Dk, dtype=dtype)
        K, V = ctx.randn(B, Tk, Dk, dtype=dtype), ctx.randn(B, Tk, Dv, dtype=dtype)
        started.append((dtype, (Q, K, V), ctx.start(Q, K, V)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, args, pending in started:
        out, weights = ctx.expect_tuple(batched_value(ctx, args, pending), 2)
        ctx.expect_tensor(out, (B, Tq, Dv), dtype, what="out")
        ctx.expect_tensor(weights, (B, Tq, Tk), dtype, what="weights")


@check("2.4", "seeded-example", P, Kind.FACT,
       zh="本章的例子（torch.manual_seed(0)）：weights 形状 (5, 5)、每行加和为 1，out 形状 (5, 8)",
       en="the chapter's example (torch.manual_seed(0)): weights of shape (5, 5) whose rows sum to 1, out of shape (5, 8)")
def _sdpa_fact(ctx: Context) -> Iterator[None]:
    x, W_q, W_k, W_v = seeded_example()
    pending = ctx.start(x @ W_q, x @ W_k, x @ W_v)
    yield      # the next check begins here, while the worker runs this call
    out, weights = ctx.expect_tuple(pending.value(), 2)
    w = ctx.expect_tensor(weights, (5, 5), torch.float32, what="weights")
    ctx.expect_tensor(out, (5, 8), torch.float32, what="out")
    ctx.expect_close(w.sum(-1), torch.ones(5), torch.float32, what="weights.sum(-1)")


@check("2.4", "rows-sum-to-one", P, Kind.PROPERTY, zh="每行权重非负且加和为 1，分数上万时也没有 NaN",
       en="every row of weights is non-negative and sums to 1, with no NaN even for scores in the tens of thousands",
       statement="分数上万时结果也不能出现 `nan`")
def _sdpa_rows(ctx: Context) -> Iterator[None]:
    Tq, Tk, D = sizes_apart(ctx, 3)
    started = [(case, ctx.start(ctx.randn(Tq, D, scale=scale), ctx.randn(Tk, D, scale=scale), ctx.randn(Tk, D)))
               for scale, case in ((1.0, ("普通大小的分数", "scores of ordinary size")),
                                   (100.0, ("上万的分数（Q、K 约为 100）",
                                            "scores in the tens of thousands (Q, K near 100)")))]
    yield      # the next check begins here, while the worker runs these calls
    for case, pending in started:
        with ctx.case(*case):
            _, weights = ctx.expect_tuple(pending.value(), 2)
            w = ctx.expect_tensor(weights, (Tq, Tk), torch.float64, what="weights")
            n_bad = int((~torch.isfinite(w)).sum())
            ctx.expect(n_bad == 0, f"weights 中有 {n_bad} 个 NaN/inf：softmax 要先减去每行的最大值（2.2）",
                       f"weights hold {n_bad} NaN/inf: the softmax must subtract each row's max first (2.2)",
                       diagnose=True)
            ctx.expect(bool((w >= 0).all()), f"权重不应为负，实际最小 {w.min().item():.4g}",
                       f"weights should not be negative, got min {w.min().item():.4g}", diagnose=True)
            ctx.expect_close(w.sum(-1), torch.ones(Tq, dtype=torch.float64), torch.float64, what="weights.sum(-1)")


@check("2.4", "matches-torch", P, Kind.NUMERIC,
       zh="与 F.scaled_dot_product_attention 一致（含批量维，也包括 Tq = Tk = Dk = Dv 的方阵情形）",
       en="agrees with F.scaled_dot_product_attention (with batch dims, and in the square case Tq = Tk = Dk = Dv)",
       weight=3,
       statement=(r"\text{weights} = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right),\qquad "
                  r"\text{out} = \text{weights}\cdot V",
                  "写 `scaled_dot_product_attention(Q, K, V)`：`Q` (..., Tq, Dk)，`K` (..., Tk, Dk)，`V` (..., Tk, Dv)",
                  "自查会拿你的结果和 `F.scaled_dot_product_attention` 对比"))
def _sdpa_torch(ctx: Context) -> Iterator[None]:
    # The square case first: an answer whose shapes fit only there (V @ weights, say) gets its name here.
    n = sizes_apart(ctx, 1, 3, 9)[0]
    cases = [((2,), torch.float64, (n, n, n, n))] + [(batch, dtype, tuple(sizes_apart(ctx, 4))) for batch, dtype in
                                                     zip(BATCHES, (torch.float32, torch.float64, torch.float32))]
    started = []
    for batch, dtype, (Tq, Tk, Dk, Dv) in cases:
        Q = ctx.randn(*batch, Tq, Dk, dtype=dtype)
        K, V = ctx.randn(*batch, Tk, Dk, dtype=dtype), ctx.randn(*batch, Tk, Dv, dtype=dtype)
        started.append((batch, dtype, (Tq, Tk, Dk, Dv), (Q, K, V), ctx.start(Q, K, V)))
    yield      # the next check begins here, while the worker runs these calls
    for batch, dtype, (Tq, Tk, Dk, Dv), (Q, K, V), pending in started:
        batch_zh, batch_en = batch_names(batch)
        with ctx.case(zh=f"{batch_zh}，Tq={Tq}、Tk={Tk}、Dk={Dk}、Dv={Dv}（{dtype}）",
                      en=f"{batch_en}, Tq={Tq}, Tk={Tk}, Dk={Dk}, Dv={Dv} ({dtype})"):
            want_out, want_w = reference_attention(Q, K, V)
            out, weights = ctx.expect_tuple(batched_value(ctx, (Q, K, V), pending), 2)
            ctx.expect_close(ctx.expect_tensor(weights, (*batch, Tq, Tk), dtype, what="weights"), want_w, dtype,
                             what="weights")
            ctx.expect_close(ctx.expect_tensor(out, (*batch, Tq, Dv), dtype, what="out"), want_out, dtype,
                             what="out")


# -- 2.5 softmax_jacobian ----------------------------------------------------------
#: What the statement of 2.5 says about the shapes and the value (quoted by the checks that enforce it).
JACOBIAN_SHAPE = "返回形状 (..., N, N)、dtype 与 `weights` 相同的张量"
JACOBIAN_VALUE = r"`[..., i, j]` 处是 $\partial p_i / \partial x_j$"
JACOBIAN_BATCH = "必须支持批量维：前面的每个位置各有一个 (N, N) 的雅可比"
JACOBIAN_TRUTH = "自查会拿你的结果和 `torch.autograd.functional.jacobian` 对 `F.softmax` 求出的雅可比对比"


def softmax_rows(ctx: Context, *shape: int, dtype: torch.dtype, scale: float = 2.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, weights): scores of ``shape`` in float64 and their softmax along the last dim, in ``dtype``."""
    scores = ctx.randn(*shape, scale=scale)
    return scores, F.softmax(scores, dim=-1).to(dtype)


def autograd_jacobian(scores: torch.Tensor) -> torch.Tensor:
    """(..., N) -> (..., N, N) in float64: the Jacobian of F.softmax by autograd, each slice's own.

    torch.autograd.functional.jacobian of one slice backpropagates the one-hot vectors e_1 ... e_N through the
    softmax, one at a time; here the N of them go through every slice in one batched backward pass
    (``is_grads_batched``): the same operations on the same numbers, so the same bits (a test compares them
    with torch.autograd.functional.jacobian slice by slice), in one pass instead of N per slice.
    """
    N = scores.shape[-1]
    rows = scores.double().reshape(-1, N).detach().requires_grad_(True)
    weights = F.softmax(rows, dim=-1)
    one_hot = torch.eye(N, dtype=weights.dtype)[:, None, :].expand(N, rows.shape[0], N)
    (grads,) = torch.autograd.grad(weights, rows, grad_outputs=one_hot, is_grads_batched=True)
    return grads.permute(1, 0, 2).reshape(*scores.shape, N)   # grads[i, r, j] = d weights[r, i] / d rows[r, j]


def jacobian_value(ctx: Context, weights: torch.Tensor, pending: Pending) -> Value:
    """The value of ``pending`` (a call on ``weights``); one that raises only because of the batch dims (its first
    1-D slice runs) gets a pointed message: torch.diag and torch.outer take 1-D tensors only."""
    try:
        return pending.value()
    except CheckFailed as failed:
        if failed.status is not Status.ERROR or weights.dim() < 2:
            raise
        if ctx.call_raw(weights.reshape(-1, weights.shape[-1])[0]).status != "ok":
            raise
        raise CheckFailed(Msg(
            f"一维的 weights 可以运行，带批量维（{tuple(weights.shape)}）时却报错。如果用了 torch.diag 或 torch.outer："
            f"它们只接受一维张量（torch.diag 遇到二维输入会取出对角线）；请用 torch.diag_embed，外积用 "
            f"w.unsqueeze(-1) * w.unsqueeze(-2)。原错误：{failed.message.zh}",
            f"works on 1-D weights but raises with batch dims ({tuple(weights.shape)}). If you used torch.diag or "
            f"torch.outer: they take 1-D tensors only (torch.diag takes the diagonal out of a 2-D input); use "
            f"torch.diag_embed, and w.unsqueeze(-1) * w.unsqueeze(-2) for the outer product. The error: "
            f"{failed.message.en}"), status=Status.ERROR, error_type=failed.error_type) from None


@check("2.5", "shape-dtype", P, Kind.SHAPE, zh="输出形状 (..., N, N)，dtype 不变（带批量维，float32 与 float64）",
       en="output shape (..., N, N) in the input's dtype (batch dims, float32 and float64)",
       statement=(JACOBIAN_SHAPE, JACOBIAN_BATCH))
def _jacobian_shapes(ctx: Context) -> Iterator[None]:
    B, H, N = ctx.sizes(3)
    started = []
    for dtype, batch in ((torch.float32, ()), (torch.float64, (B,)), (torch.float32, (B, H))):
        _, weights = softmax_rows(ctx, *batch, N, dtype=dtype)
        started.append((dtype, batch, weights, ctx.start(weights)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, batch, weights, pending in started:
        with ctx.case(*batch_names(batch)):
            ctx.expect_tensor(jacobian_value(ctx, weights, pending), (*batch, N, N), dtype,
                              what="softmax_jacobian(weights)")


@check("2.5", "matches-autograd", P, Kind.NUMERIC,
       zh="与 torch.autograd.functional.jacobian 对 F.softmax 求出的雅可比一致（带批量维，float32 与 float64）",
       en="agrees with torch.autograd.functional.jacobian of F.softmax (batch dims, float32 and float64)", weight=2,
       statement=(JACOBIAN_VALUE, JACOBIAN_TRUTH, JACOBIAN_BATCH))
def _jacobian_autograd(ctx: Context) -> Iterator[None]:
    B, H, N = ctx.sizes(3)
    started = []
    for dtype, batch, scale in ((torch.float64, (), 2.0), (torch.float32, (B,), 1.0), (torch.float64, (B, H), 4.0)):
        scores, weights = softmax_rows(ctx, *batch, N, dtype=dtype, scale=scale)
        started.append((dtype, batch, scores, weights, ctx.start(weights)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, batch, scores, weights, pending in started:
        with ctx.case(*batch_names(batch)):
            want = ctx.expected(autograd_jacobian, scores)
            got = ctx.expect_tensor(jacobian_value(ctx, weights, pending), (*batch, N, N), dtype,
                                    what="softmax_jacobian(weights)")
            ctx.expect_close(got, want, dtype, what="softmax_jacobian(weights)")


@check("2.5", "rows-sum-to-zero-symmetric", P, Kind.PROPERTY, zh="每行加和为 0，而且是对称矩阵",
       en="every row sums to 0, and the matrix is symmetric")
def _jacobian_property(ctx: Context) -> Iterator[None]:
    B, N = ctx.sizes(2, 3, 9)
    _, weights = softmax_rows(ctx, B, N, dtype=torch.float64, scale=3.0)
    pending = ctx.start(weights)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(jacobian_value(ctx, weights, pending), (B, N, N), torch.float64,
                            what="softmax_jacobian(weights)")
    rtol, atol = ctx.tol(torch.float64)
    worst = got.sum(dim=-1).abs().max().item()
    ctx.expect(worst <= atol, f"每行应当加和为 0（整行分数加上同一个数，softmax 不变），实际最大偏离 {worst:.3g}",
               f"every row should sum to 0 (adding one number to a whole row of scores leaves the softmax unchanged), "
               f"the largest row sum is {worst:.3g}", diagnose=True)
    asymmetry = (got - got.mT).abs().max().item()
    ctx.expect(asymmetry <= atol + rtol * got.abs().max().item(),
               f"雅可比应当是对称的（[i, j] 与 [j, i] 相等），实际最大相差 {asymmetry:.3g}：是不是有一项的下标用反了？",
               f"the Jacobian should be symmetric ([i, j] equal to [j, i]), the largest difference is "
               f"{asymmetry:.3g}: is one term's index the wrong way round?", diagnose=True)
