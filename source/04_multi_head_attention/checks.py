"""Public checks of 04_multi_head_attention (shipped to students: no reference solution here).

The truth is torch's own ``nn.MultiheadAttention(E, H, batch_first=True)`` with
dropout 0 and ``average_attn_weights=False``, loaded with the same weights, in
float64; reshapes are compared exactly with expected tensors built element by element. Torch gives NaN
on a batch row whose keys are all padded, so such rows are never compared with
torch: they are checked as a property (zero weights, out = out_proj.bias). Numerical stability is
tested on designed scores (:func:`designed_case`: exact in float32 and float64, rows thousands apart of
both signs, real scores far below a finite mask fill), where a softmax shifted by the mean or the
minimum, or a mask filled with -1e4 or -1e9, gives itself away.

4.4 (a class) runs through the engine's "module" probe: build with (E, H, bias=...),
load torch-named weights (strict=False there, so that a wrong name is reported as
missing rather than raised; the notebook teaches strict=True), forward with a key padding mask,
backward of (out * grad_out).sum(); it returns (out, weights), the gradient of
every loaded parameter and of the query (:func:`module_request`).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

from autograder.catalog import (Precision, precision, Audience, CheckFailed, Context, Kind, Msg, Pending, Value, brief, check, compare,
                                exercise, mismatch)
from autograder.catalog.comparison import label
from autograder.catalog.modules import torch_module
from ..padding_masks.checks import DTYPES, expect_exact, key_lengths, live, mask_from_lengths

P = Audience.PUBLIC

MHA_FORBIDDEN = ("nn.MultiheadAttention", "F.multi_head_attention_forward", "F.scaled_dot_product_attention")
exercise("4.3", forbidden=MHA_FORBIDDEN)
exercise("4.4", forbidden=MHA_FORBIDDEN)

#: What the notebook's conventions say of precision (its introduction): a float32 scalar or table inside a float64
#: call is correct (autograder.catalog.Precision.ONE_FLOAT32).
PRECISION_RULE = "输入是 float64 时，结果要与参考答案在 float64 下一致，但允许一个 float32 的中间量带来的误差"
precision(("4.1", "4.2", "4.3", "4.4", "4.5"), Precision.ONE_FLOAT32, statement=PRECISION_RULE)

PARAMETERS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")

#: 4.3's inputs, as its statement lists them (matches-torch feeds each: cross-attention, a bool mask).
MHA_INPUTS = ("`query`：`(B, Tq, E)`；`key`、`value`：`(B, Tk, E)`；`in_proj_weight`：`(3E, E)`；`in_proj_bias`：`(3E,)`；"
              "`out_proj_weight`：`(E, E)`；`out_proj_bias`：`(E,)`；`key_padding_mask`：`(B, Tk)` bool 或 `None`")


# -- inputs and torch's truth, shared with the hidden checks ----------------------------
def mha_state(ctx: Context, E: int, dtype: torch.dtype = torch.float64, bias: bool = True) -> dict[str, torch.Tensor]:
    """Torch-named weights of nn.MultiheadAttention(E, H): in_proj (3E, E) [+ (3E,)], out_proj (E, E) [+ (E,)]."""
    state = {"in_proj_weight": ctx.randn(3 * E, E, dtype=dtype, scale=1 / math.sqrt(E))}
    if bias:
        state["in_proj_bias"] = ctx.randn(3 * E, dtype=dtype, scale=0.3)
    state["out_proj.weight"] = ctx.randn(E, E, dtype=dtype, scale=1 / math.sqrt(E))
    if bias:
        state["out_proj.bias"] = ctx.randn(E, dtype=dtype, scale=0.3)
    return state


def functional_args(state: dict[str, torch.Tensor]) -> tuple[Any, ...]:
    """The four weight arguments of 4.3 (zero biases when the state has none)."""
    E = state["out_proj.weight"].shape[0]
    zeros = state["in_proj_weight"].new_zeros
    return (state["in_proj_weight"], state.get("in_proj_bias", zeros(3 * E)),
            state["out_proj.weight"], state.get("out_proj.bias", zeros(E)))


def _torch_module(E: int, H: int, state: dict[str, torch.Tensor]) -> nn.MultiheadAttention:
    bias = "in_proj_bias" in state
    mha = torch_module(("mha", E, H, bias),
                       lambda: nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=torch.float64))
    mha.load_state_dict({k: v.double() for k, v in state.items()})     # strict: every parameter set
    return mha


def torch_mha(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, H: int,
              state: dict[str, torch.Tensor], mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's (out, per-head weights) in float64."""
    mha = _torch_module(query.shape[-1], H, state)
    with torch.no_grad():
        return mha(query.double(), key.double(), value.double(), key_padding_mask=mask, need_weights=True,
                   average_attn_weights=False)


def torch_probe(E: int, H: int, state: dict[str, torch.Tensor], query: torch.Tensor, key: torch.Tensor,
                value: torch.Tensor, mask: torch.Tensor | None, grad_out: torch.Tensor) -> dict[str, Any]:
    """What the "module" probe returns, computed by torch's own module in float64."""
    mha = _torch_module(E, H, state)
    q = query.double().clone().requires_grad_(True)
    out, weights = mha(q, key.double(), value.double(), key_padding_mask=mask, need_weights=True,
                       average_attn_weights=False)
    (out * grad_out.double()).sum().backward()
    grads = {name: p.grad for name, p in mha.named_parameters() if name in state}
    return {"out": out.detach(), "weights": weights.detach(), "grads": grads, "grad_query": q.grad}


def attention_inputs(ctx: Context, B: int, Tq: int, Tk: int, E: int, dtype: torch.dtype,
                     *, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (ctx.randn(B, Tq, E, dtype=dtype, scale=scale), ctx.randn(B, Tk, E, dtype=dtype, scale=scale),
            ctx.randn(B, Tk, E, dtype=dtype, scale=scale))


def head_sizes(ctx: Context) -> tuple[int, int, int, int, int]:
    """(B, Tq, Tk, H, d), all distinct so that no transpose goes unnoticed."""
    B, Tq, Tk, H, d = ctx.sizes(5, low=2, high=7)
    return B, Tq, Tk, H, d


# -- designed scores: large spread, very negative real scores --------------------------
#: Per-head width of the designed cases: sqrt(16) = 4, so that every score is exact in float32 and float64.
DESIGNED_D = 16
#: Kinds of designed score rows (see :func:`designed_scores`).
SPREAD, NEGATIVE, EXTREME = "spread", "negative", "extreme"


def _signed_permutation(ctx: Context, n: int, dtype: torch.dtype) -> torch.Tensor:
    """An (n, n) matrix with one +1 or -1 in each row and column: x @ W.T moves and flips features, exactly."""
    perm = torch.randperm(n, generator=ctx.generator)
    signs = ctx.randint(0, 2, n) * 2 - 1
    w = torch.zeros(n, n, dtype=torch.float64)
    w[torch.arange(n), perm] = signs.double()
    return w.to(dtype)


def _small_ints(ctx: Context, *shape: int, bound: int = 2) -> torch.Tensor:
    return ctx.randint(-bound, bound + 1, *shape).double()


def designed_scores(ctx: Context, kind: str, B: int, H: int, Tq: int, Tk: int, dtype: torch.dtype) -> torch.Tensor:
    """Scores (B, H, Tq, Tk), whole numbers (exact in ``dtype``), that a sound normalization survives.

    ``SPREAD``: each row is either two-sided (+-3000 plus a few units, both signs in every row) or
    level with one key far below the others (2000 below in float64, 200 in float32): a softmax shifted
    by the row's mean overflows on the first kind, one shifted by its minimum on both, one shifted by
    its maximum on neither. ``NEGATIVE``: every score near -2e4, so a mask filled with -1e4 gives the
    padded keys all the weight. ``EXTREME`` (float64): every score near -1e9, as negative as a -1e9 fill.
    """
    if kind == SPREAD:
        jitter = _small_ints(ctx, B, H, Tq, Tk, bound=3)
        signs = ctx.randint(0, 2, B, H, Tq, Tk).double() * 2 - 1
        signs[..., 1] = -signs[..., 0]                                   # both signs in every row
        two_sided = 3000.0 * signs + jitter
        level = ctx.randint(-3000, 3001, B, H, Tq, 1).double() + jitter
        low = torch.randint(0, Tk, (B, H, Tq, 1), generator=ctx.generator)
        drop = 2000.0 if dtype == torch.float64 else 200.0
        level = level - drop * torch.zeros_like(level).scatter_(-1, low, 1.0)
        which = ctx.randint(0, 2, B, H, Tq, 1).bool()
        which[0, 0, 0], which[0, 0, 1] = True, False                     # one row of each kind at least
        return torch.where(which, two_sided, level)
    if kind == NEGATIVE:
        return -20000.0 + _small_ints(ctx, B, H, Tq, Tk, bound=5)
    if kind == EXTREME:
        return -1e9 + _small_ints(ctx, B, H, Tq, Tk, bound=20)
    raise ValueError(f"unknown kind of scores {kind!r}")


Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def designed_case(ctx: Context, kind: str, dtype: torch.dtype, *, empty_row: bool = False
                  ) -> tuple[Tensors, int, dict[str, torch.Tensor], torch.Tensor]:
    """((query, key, value), H, torch-named weights, key padding mask) whose scores are :func:`designed_scores`.

    Every weight is a signed permutation and every bias a small whole number, so each projection is
    exact; the keys project onto one-hot vectors and the queries onto 4 * the wanted scores (sqrt(d)
    = 4), so q k^T / sqrt(d) is exactly the designed score, in float32 as in float64, whichever order
    of operations computes it. The queries' magnitude is 4 * the scores': the comparison's
    scale-aware tolerance (Context.tol) covers a logsumexp's rounding of the weights at these scores,
    and :func:`expect_close_normwise` what that rounding does to the sums after them.
    """
    B, Tq, Tk = ctx.sizes(3, low=3, high=7)
    H = int(ctx.randint(2, 4, 1))
    d = DESIGNED_D
    E = H * d
    scores = designed_scores(ctx, kind, B, H, Tq, Tk, dtype)              # (B, H, Tq, Tk)
    # What query @ W_q.T + b_q and key @ W_k.T + b_k must give, head h in features h*d .. h*d + d - 1
    # (built block by block: the shipped checks hold no one-line answer of 4.1 or 4.2).
    q_want = torch.zeros(B, Tq, E, dtype=torch.float64)
    k_want = torch.zeros(B, Tk, E, dtype=torch.float64)
    for h in range(H):
        q_want[:, :, h * d:h * d + Tk] = 4.0 * scores[:, h]
        k_want[:, torch.arange(Tk), h * d + torch.arange(Tk)] = 1.0      # key j of each head: one-hot at j
    W_q, W_k, W_v, W_o = (_signed_permutation(ctx, E, torch.float64) for _ in range(4))
    b_q, b_k, b_v, b_o = (_small_ints(ctx, E) for _ in range(4))
    query = (q_want - b_q) @ W_q                                         # W is orthogonal: (x @ W) @ W.T = x
    key = (k_want - b_k) @ W_k
    value = _small_ints(ctx, B, Tk, E)
    state = {"in_proj_weight": torch.cat([W_q, W_k, W_v]), "in_proj_bias": torch.cat([b_q, b_k, b_v]),
             "out_proj.weight": W_o, "out_proj.bias": b_o}
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=empty_row), Tk)
    return ((query.to(dtype), key.to(dtype), value.to(dtype)), H, {k: v.to(dtype) for k, v in state.items()}, mask)


def expect_close_normwise(ctx: Context, got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    """Within the scale-aware tolerance relative to ``want``'s largest magnitude, not to each element's own.

    For what is summed after a softmax of designed scores (out, the gradients): any sound softmax
    rounds each weight by about eps * |score| (a logsumexp's exp(s - lse), say), and every term of the
    sum carries that, so an element whose terms cancel differs by that much of the largest term.
    """
    rtol, atol = ctx.tol(dtype)
    want = want.detach()
    finite = want[torch.isfinite(want)].abs()
    top = float(finite.max()) if finite.numel() else 0.0
    problem = compare(got, want, rtol, atol + rtol * top)
    if problem is not None:
        raise mismatch(problem, got, want, rtol, atol + rtol * top, what)


#: The name of the weights in messages: one (Tq, Tk) map per head.
ONE_MAP_PER_HEAD = Msg("weights (B, H, Tq, Tk)，每个头一张", "weights (B, H, Tq, Tk), one map per head")


def expect_mha(ctx: Context, value: Value, B: int, Tq: int, Tk: int, E: int, H: int,
               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    out, weights = ctx.expect_tuple(value, 2)
    return (ctx.expect_tensor(out, (B, Tq, E), dtype, what="out"),
            ctx.expect_tensor(weights, (B, H, Tq, Tk), dtype, what=ONE_MAP_PER_HEAD))


def expect_dead_rows(ctx: Context, out: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor,
                     out_bias: torch.Tensor) -> None:
    """Batch rows whose keys are all padded: zero weights (not NaN), out = out_proj.bias."""
    dead = ~live(mask)
    w, o = weights[dead].double(), out[dead].double()
    ctx.expect(not torch.isnan(w).any() and not torch.isnan(o).any(),
               "键全部是填充的那一批出现了 NaN：这些行的权重应当全为 0（torch 自带的模块在这里给 NaN，要自己处理）",
               "NaN in a batch row whose keys are all padded: its weights should be all zeros "
               "(torch's own module gives NaN here, handle it yourself)", diagnose=True, safe=True)
    ctx.expect(bool((w == 0).all()),
               f"键全部是填充的那一批，权重应当全为 0，实际最大 {w.abs().max().item():.6g}",
               f"in a batch row whose keys are all padded the weights should be all zeros, "
               f"got values up to {w.abs().max().item():.6g}", diagnose=True,
               hidden=Msg("键全部是填充的那一批，权重应当全为 0，实际不是",
                          "in a batch row whose keys are all padded the weights should be all zeros, they are not"))
    ctx.expect_close(o, out_bias.double().expand_as(o), out.dtype,
                     what=Msg("键全为填充的那一批的 out（应当等于 out_proj_bias）",
                              "out of a batch row whose keys are all padded (should equal out_proj_bias)"))


def expect_finite(ctx: Context, out: torch.Tensor, weights: torch.Tensor) -> None:
    """No inf/NaN in out or weights (designed scores thousands apart: a softmax not shifted by the row maximum)."""
    ctx.expect(bool(torch.isfinite(weights).all() and torch.isfinite(out).all()),
               "分数很大、同一行相差几千时 weights 或 out 里出现了 inf 或 NaN：softmax 之前每一行要减去它（未填充的键里）"
               "最大的分数；减均值或最小值，exp 仍会溢出",
               "inf or NaN in weights or out when a row's scores are large and thousands apart: subtract each row's "
               "largest score (over its unpadded keys) before exp; shifted by the mean or the minimum, exp still "
               "overflows", diagnose=True, safe=True)


# -- 4.1 split_heads ------------------------------------------------------------------
def heads_of(x: torch.Tensor, H: int) -> torch.Tensor:
    """Expected split_heads(x, H), element by element: out[b, h, t, i] = x[b, t, h*d + i].

    Built from Python lists, one value at a time (head h holds features h*d .. h*d + d - 1,
    the layout of nn.MultiheadAttention's in_proj), so it stays a plain statement of what
    each element must be.
    """
    B, T, E = x.shape
    d = E // H
    rows = x.tolist()
    table = [[[[rows[b][t][h * d + i] for i in range(d)] for t in range(T)] for h in range(H)] for b in range(B)]
    return torch.tensor(table, dtype=x.dtype).reshape(B, H, T, d)


def tokens_of(x: torch.Tensor) -> torch.Tensor:
    """Expected merge_heads(x), element by element: out[b, t, h*d + i] = x[b, h, t, i]."""
    B, H, T, d = x.shape
    rows = x.tolist()
    table = [[[rows[b][e // d][t][e % d] for e in range(H * d)] for t in range(T)] for b in range(B)]
    return torch.tensor(table, dtype=x.dtype).reshape(B, T, H * d)


def strided_heads(x: torch.Tensor, H: int) -> torch.Tensor:
    """The values of :func:`heads_of` as a non-contiguous tensor with the strides split_heads' view has."""
    B, T, E = x.shape
    d = E // H
    view = torch.empty_strided((B, H, T, d), (T * E, d, E, 1), dtype=x.dtype)
    return view.copy_(heads_of(x, H))


@check("4.1", "shape-dtype", P, Kind.SHAPE, zh="(B, T, E) → (B, H, T, E/H)，dtype 不变",
       en="(B, T, E) -> (B, H, T, E/H), same dtype", statement="`x`：`(B, T, E)`；返回 `(B, H, T, E/H)`")
def _split_shape(ctx: Context) -> Iterator[None]:
    B, T, H, d = ctx.sizes(4)
    # both in flight before either is read (see Context.start)
    started = [(dtype, ctx.start(ctx.randn(B, T, H * d, dtype=dtype), H)) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (B, H, T, d), dtype, what="split_heads")


@check("4.1", "matches-closed-form", P, Kind.NUMERIC,
       zh="逐个元素完全正确：out[b, h, t, i] = x[b, t, h*d + i]（nn.MultiheadAttention 的分头方式）",
       en="every element exact: out[b, h, t, i] = x[b, t, h*d + i] (nn.MultiheadAttention's head layout)", weight=2,
       statement=("`split_heads(x, num_heads)`", "第 `h` 个头是每个位置的第 `h*d` 到 `(h+1)*d - 1` 维特征"))
def _split_values(ctx: Context) -> Iterator[None]:
    B, T, H, d = ctx.sizes(4)
    x = ctx.randn(B, T, H * d)
    want = heads_of(x, H)
    pending = ctx.start(x, H)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (B, H, T, d), torch.float64, what="split_heads")
    expect_exact(ctx, got, want, "split_heads")


@check("4.1", "round-trip", P, Kind.PROPERTY, zh="合并回去得到原来的 x", en="merging the heads back gives x exactly")
def _split_round_trip(ctx: Context) -> Iterator[None]:
    B, T, H, d = ctx.sizes(4)
    x = ctx.randn(B, T, H * d)
    want = x.clone()
    pending = ctx.start(x, H)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (B, H, T, d), torch.float64, what="split_heads")
    # expect_exact names the value with one string in both languages: the case says what it is
    with ctx.case(zh="把 split_heads(x) 的各头按特征维拼回 (B, T, E)", en="split_heads(x), its heads put back side by side"):
        expect_exact(ctx, tokens_of(got), want, "split_heads(x)")


# A function that always raises ValueError passes this: its points need a correct output.
@check("4.1", "value-error", P, Kind.PROPERTY, zh="E 不能被 H 整除时抛出带说明的 ValueError",
       en="raises ValueError with a message when E % H != 0", needs_output=True,
       statement="`E` 不能被 `num_heads` 整除时抛出 `ValueError`")
def _split_error(ctx: Context) -> None:
    B, T, H = ctx.sizes(3, low=3)
    E = H * 2 + 1
    reply = ctx.call_raw(ctx.randn(B, T, E), H)
    ctx.expect(reply.status == "error",
               f"split_heads(x, {H}) 在 E = {E} 时应当抛出 ValueError，实际正常返回了",
               f"split_heads(x, {H}) with E = {E} should raise ValueError, it returned normally")
    ctx.expect(reply.error_type == "ValueError",
               f"E = {E} 不能被 {H} 整除时应当抛出 ValueError，实际抛出了 {reply.error_type}：{reply.error}",
               f"E = {E} not divisible by {H} should raise ValueError, got {reply.error_type}: {reply.error}")
    ctx.expect(bool(reply.error.strip()),
               "ValueError 需要一句说明（例如 E 和 H 的值）", "the ValueError needs a message (say E and H)")


# -- 4.2 merge_heads ------------------------------------------------------------------
@check("4.2", "shape-dtype", P, Kind.SHAPE, zh="(B, H, T, d) → (B, T, H*d)，dtype 不变",
       en="(B, H, T, d) -> (B, T, H*d), same dtype", statement="`x`：`(B, H, T, d)`；返回 `(B, T, H*d)`")
def _merge_shape(ctx: Context) -> Iterator[None]:
    B, H, T, d = ctx.sizes(4)
    # both in flight before either is read (see Context.start)
    started = [(dtype, ctx.start(ctx.randn(B, H, T, d, dtype=dtype))) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (B, T, H * d), dtype, what="merge_heads")


@check("4.2", "matches-closed-form", P, Kind.NUMERIC, zh="逐个元素完全正确：out[b, t, h*d + i] = x[b, h, t, i]",
       en="every element exact: out[b, t, h*d + i] = x[b, h, t, i]", weight=2, statement="`merge_heads(x)`")
def _merge_values(ctx: Context) -> Iterator[None]:
    B, H, T, d = ctx.sizes(4)
    x = ctx.randn(B, H, T, d)
    want = tokens_of(x)
    pending = ctx.start(x)
    yield      # the next check begins here, while the worker runs this call
    expect_exact(ctx, ctx.expect_tensor(pending.value(), (B, T, H * d), torch.float64, what="merge_heads"), want,
                 "merge_heads")


@check("4.2", "round-trip", P, Kind.PROPERTY, zh="merge_heads(split_heads(x)) 恰好等于 x",
       en="merge_heads(split_heads(x)) equals x exactly",
       statement="`merge_heads(split_heads(x, h))` 与 `x` **完全相等**——不是近似相等")
def _merge_round_trip(ctx: Context) -> Iterator[None]:
    B, T, H, d = ctx.sizes(4)
    x = ctx.randn(B, T, H * d)
    # A transposed view, as split_heads returns it: .view() fails on it, .reshape() does not. (In-process
    # only: across the sandbox boundary every tensor arrives contiguous.)
    split = strided_heads(x, H)
    pending = ctx.start(split)
    yield      # the next check begins here, while the worker runs this call
    expect_exact(ctx, ctx.expect_tensor(pending.value(), (B, T, H * d), torch.float64, what="merge_heads"), x,
                 "merge_heads(split_heads(x))")


# -- 4.3 multi_head_attention ---------------------------------------------------------
@check("4.3", "fact-16-4", P, Kind.FACT,
       zh="E=16、H=4、x (2, 5, 16)：out (2, 5, 16)、weights (2, 4, 5, 5)，与 nn.MultiheadAttention 一致",
       en="E=16, H=4, x (2, 5, 16): out (2, 5, 16), weights (2, 4, 5, 5), as nn.MultiheadAttention")
def _mha_fact(ctx: Context) -> Iterator[None]:
    state = mha_state(ctx, 16)
    x = ctx.randn(2, 5, 16)
    pending = ctx.start(x, x, x, 4, *functional_args(state))
    yield      # the next check begins here, while the worker runs these calls
    want_out, want_w = ctx.expected(torch_mha, x, x, x, 4, state)
    out, weights = expect_mha(ctx, pending.value(), 2, 5, 5, 16, 4, torch.float64)
    ctx.expect_close(weights, want_w, torch.float64, what="weights")
    ctx.expect_close(out, want_out, torch.float64, what="out")


@check("4.3", "shape-dtype", P, Kind.SHAPE, zh="交叉注意力（Tq ≠ Tk）下的形状和 dtype",
       en="shapes and dtype in cross-attention (Tq != Tk)",
       statement="返回 `(out, weights)`：`out` 形状 `(B, Tq, E)`，`weights` 是每个头各自的权重 `(B, H, Tq, Tk)`")
def _mha_shape(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, H, d = head_sizes(ctx)
    E = H * d
    started = []
    for dtype in DTYPES:
        state = mha_state(ctx, E, dtype)
        q, k, v = attention_inputs(ctx, B, Tq, Tk, E, dtype)
        mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
        started.append((dtype, ctx.start(q, k, v, H, *functional_args(state), key_padding_mask=mask)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        expect_mha(ctx, pending.value(), B, Tq, Tk, E, H, dtype)


@check("4.3", "matches-torch", P, Kind.NUMERIC, zh="带填充掩码时与 nn.MultiheadAttention 一致",
       en="agrees with nn.MultiheadAttention under a key padding mask", weight=3,
       statement=(MHA_INPUTS, "与 `nn.MultiheadAttention(E, H, batch_first=True)` 在相同权重、不用暂退法（dropout，即 "
                  "`dropout=0`）、`average_attn_weights=False` 时的结果一致"))
def _mha_torch(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, H, d = head_sizes(ctx)
    E = H * d
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = []            # both calls in flight before either is compared (see Context.start)
    for dtype in DTYPES:
        state = mha_state(ctx, E, dtype)
        q, k, v = attention_inputs(ctx, B, Tq, Tk, E, dtype)
        started.append((dtype, state, (q, k, v), ctx.start(q, k, v, H, *functional_args(state), key_padding_mask=mask)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, state, (q, k, v), pending in started:
        want_out, want_w = ctx.expected(torch_mha, q, k, v, H, state, mask)
        out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, H, dtype)
        ctx.expect_close(weights, want_w, dtype, what="weights")
        ctx.expect_close(out, want_out, dtype, what="out")


@check("4.3", "no-mask", P, Kind.NUMERIC, zh="不传掩码（默认 None）时与 nn.MultiheadAttention 一致",
       en="without a mask (the default None) agrees with nn.MultiheadAttention",
       statement=("`multi_head_attention(...)`", "`key_padding_mask`：`(B, Tk)` bool 或 `None`"))
def _mha_no_mask(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, H, d = head_sizes(ctx)
    E = H * d
    state = mha_state(ctx, E)
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, torch.float64)
    pending = ctx.start(q, k, v, H, *functional_args(state))
    yield      # the next check begins here, while the worker runs these calls
    want_out, want_w = ctx.expected(torch_mha, q, k, v, H, state)
    out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, H, torch.float64)
    ctx.expect_close(weights, want_w, torch.float64, what="weights")
    ctx.expect_close(out, want_out, torch.float64, what="out")


@check("4.3", "fully-padded-row", P, Kind.PROPERTY, zh="键全为填充的那一批：权重全 0、out 等于 out_proj_bias，其余与 torch 一致",
       en="a batch row whose keys are all padded: zero weights, out = out_proj_bias; the others as torch", weight=2)
def _mha_dead(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, H, d = ctx.sizes(5, low=3, high=7)
    E = H * d
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    state = mha_state(ctx, E)
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, torch.float64)
    alive = live(mask)
    pending = ctx.start(q, k, v, H, *functional_args(state), key_padding_mask=mask)
    yield      # the next check begins here, while the worker runs these calls
    want_out, want_w = ctx.expected(torch_mha, q[alive], k[alive], v[alive], H, state, mask[alive])
    out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, H, torch.float64)
    expect_dead_rows(ctx, out, weights, mask, state["out_proj.bias"])
    ctx.expect_close(weights[alive], want_w, torch.float64,
                     what=Msg("weights（至少有一个真实键的那几批）", "weights (rows with a real key)"))
    ctx.expect_close(out[alive], want_out, torch.float64,
                     what=Msg("out（至少有一个真实键的那几批）", "out (rows with a real key)"))


#: ctx.case's names of the designed kinds: the statement's rule they test, no input value.
SCORE_CASES = {SPREAD: ("分数相差几千、正负都有", "scores thousands apart, of both signs"),
               NEGATIVE: ("真实的分数都在 -1e4 以下", "every real score below -1e4"),
               EXTREME: ("真实的分数低到 -1e9 附近", "real scores as low as -1e9")}


def score_case(kind: str, dtype: torch.dtype, extra: tuple[str, str] = ("", "")) -> dict[str, str]:
    """ctx.case's names for a designed case: the kind of scores and the dtype, no values."""
    zh, en = SCORE_CASES[kind]
    name = str(dtype).replace("torch.", "")
    return {"zh": f"{zh}（{name}{extra[0]}）", "en": f"{en} ({name}{extra[1]})"}


@check("4.3", "large-scores", P, Kind.NUMERIC,
       zh="分数相差几千（正负都有）或真实分数本身非常负时，与 nn.MultiheadAttention 一致",
       en="agrees with nn.MultiheadAttention when scores are thousands apart (both signs) or the real scores are "
          "themselves very negative",
       # designed_scores: a shift by the mean, by the minimum or by the maximum over every key (padded ones
       # included: a row whose only live key sits thousands below a padded one) each fail here
       statement=("同一行的分数相差几千（正负都有）时也不能出现 inf 或 NaN",
                  "softmax 之前减去每行（未填充的键里）最大的分数；减均值或最小值，`exp` 都会溢出"))
def _mha_large_scores(ctx: Context) -> Iterator[None]:
    started = []
    for kind in (SPREAD, NEGATIVE):
        for dtype in DTYPES:
            (q, k, v), H, state, mask = designed_case(ctx, kind, dtype)
            started.append((kind, dtype, (q, k, v), H, state, mask,
                            ctx.start(q, k, v, H, *functional_args(state), key_padding_mask=mask)))
    yield      # the next check begins here, while the worker runs these calls
    for kind, dtype, (q, k, v), H, state, mask, pending in started:
        with ctx.case(**score_case(kind, dtype)):
            (B, Tq, E), Tk = q.shape, k.shape[1]
            want_out, want_w = ctx.expected(torch_mha, q, k, v, H, state, mask)
            out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, H, dtype)
            expect_finite(ctx, out, weights)
            ctx.expect_close(weights, want_w, dtype, what="weights")
            expect_close_normwise(ctx, out, want_out, dtype, what="out")


# -- 4.4 MultiHeadAttention -----------------------------------------------------------
def field(value: Value, key: str) -> Value:
    """One entry of the "module" probe's dict."""
    if value.kind != "dict" or key not in value.spec["items"]:
        raise CheckFailed(Msg(f"模块探针没有返回 {key}：{value.describe()}",
                              f"the module probe returned no {key}: {value.describe()}"),
                          hidden=Msg(f"模块探针没有返回 {key}", f"the module probe returned no {key}"))
    return Value(value.spec["items"][key], value.arrays)


def expect_module(ctx: Context, value: Value, state: dict[str, torch.Tensor], B: int, Tq: int, Tk: int,
                  H: int, dtype: torch.dtype) -> dict[str, Any]:
    """Check the probe's result (names, shapes, dtypes) and hand back its tensors; None for a missing gradient."""
    missing = field(value, "missing").to_python()
    if missing:
        # The probe reports names from the state it was given; a hidden check repeats only those.
        known = ", ".join(n for n in PARAMETERS if n in str(missing).split(",")) or "?"
        raise CheckFailed(Msg(
            f"找不到按 torch 命名的参数：{missing}。参数应叫 in_proj_weight、in_proj_bias、out_proj.weight、out_proj.bias，"
            f"这样 load_state_dict(torch_mha.state_dict(), strict=True) 才能加载",
            f"no parameter named as torch's: {missing}. Name them in_proj_weight, in_proj_bias, out_proj.weight, "
            f"out_proj.bias so that load_state_dict(torch_mha.state_dict(), strict=True) loads them"),
            hidden=Msg(f"找不到按 torch 命名的参数：{known}。参数应叫 in_proj_weight、in_proj_bias、out_proj.weight、"
                       f"out_proj.bias", f"no parameter named as torch's: {known}. Name them in_proj_weight, "
                       f"in_proj_bias, out_proj.weight, out_proj.bias"), diagnose=True)
    extra = field(value, "unexpected").to_python() if "unexpected" in value.spec.get("items", {}) else ""
    if extra:
        # Names the student's class chose: the hidden message counts them, never spells them.
        count = len(str(extra).split(","))
        raise CheckFailed(Msg(
            f"模块多出了 torch 的 nn.MultiheadAttention 没有的参数或缓冲区：{extra}。这样 "
            f"load_state_dict(torch_mha.state_dict(), strict=True) 会失败（bias=False 时不应有偏置）",
            f"the module holds parameters or buffers torch's nn.MultiheadAttention does not: {extra}; "
            f"load_state_dict(torch_mha.state_dict(), strict=True) would fail (no bias at all when bias=False)"),
            hidden=Msg(f"模块多出了 {count} 个 torch 的 nn.MultiheadAttention 没有的参数或缓冲区：strict=True 的加载会失败",
                       f"the module holds {count} parameters or buffers torch's nn.MultiheadAttention does not: "
                       f"a strict=True load would fail"), diagnose=True)
    E = state["in_proj_weight"].shape[1]
    out, weights = ctx.expect_tuple(field(value, "out"), 2)
    out = ctx.expect_tensor(out, (B, Tq, E), dtype, what="out")
    weights = ctx.expect_tensor(weights, (B, H, Tq, Tk), dtype, what=ONE_MAP_PER_HEAD)
    grads_value = field(value, "grads")
    grads: dict[str, torch.Tensor | None] = {}
    for name in state:
        g = Value(grads_value.spec["items"][name], grads_value.arrays)
        grads[name] = None if g.kind == "none" else ctx.expect_tensor(g, tuple(state[name].shape), dtype,
                                                                      what=f"{name}.grad")
    gq = ctx.expect_tuple(field(value, "input_grads"), 1)[0]
    grad_query = None if gq.kind == "none" else ctx.expect_tensor(gq, (B, Tq, E), dtype, what="query.grad")
    return {"out": out, "weights": weights, "grads": grads, "grad_query": grad_query}


def expect_gradients(ctx: Context, got: dict[str, Any], want: dict[str, Any], dtype: torch.dtype) -> None:
    for name, g in [*got["grads"].items(), ("query", got["grad_query"])]:
        ctx.expect(g is not None,
                   f"没有梯度传到 {name}：是不是用了 .detach()/.data，或者它没有参与计算？",
                   f"no gradient reached {name}: was it detached (.detach()/.data), or left out of the computation?",
                   diagnose=True, safe=True)     # the kit's parameter names
    for name, g in got["grads"].items():
        ctx.expect_close(g, want["grads"][name], dtype, what=f"{name}.grad")
    ctx.expect_close(got["grad_query"], want["grad_query"], dtype, what="query.grad")


def module_case(ctx: Context, dtype: torch.dtype, *, bias: bool | None = True, empty_row: bool = False,
                sizes: tuple[int, ...] | None = None) -> tuple[tuple[Any, ...], tuple[int, int, int, int]]:
    """Inputs of one probe call: (E, H, state, q, k, v, mask, grad_out, bias) plus the sizes."""
    B, Tq, Tk, H, d = sizes or head_sizes(ctx)
    E = H * d
    state = mha_state(ctx, E, dtype, bias=bias is not False)     # None: the class's default, which has biases
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, dtype)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=empty_row), Tk)
    grad_out = ctx.randn(B, Tq, E, dtype=dtype)
    return (E, H, state, q, k, v, mask, grad_out), (B, Tq, Tk, H)


def module_request(args: tuple[Any, ...], bias: bool | None = True) -> tuple[Any, ...]:
    """The engine's "module" probe arguments for :func:`module_case`'s ``args``: build with
    ``(E, H)`` and ``bias=`` (nothing for None: the class's default), forward ``(q, k, v)`` with the
    key padding mask, backpropagate ``grad_out`` into ``out``, the query's gradient asked for."""
    E, H, state, q, k, v, mask, grad_out = args
    return ((E, H), {} if bias is None else {"bias": bias}, state, (q, k, v), {"key_padding_mask": mask},
            (grad_out, None), (0,))


def module_result(result: dict[str, Any]) -> dict[str, Any]:
    """The "module" probe's dict, run in-process, in the form :func:`expect_module` returns."""
    out, weights = result["out"]
    return {"out": out, "weights": weights, "grads": result["grads"], "grad_query": result["input_grads"][0]}


def start_module(ctx: Context, args: tuple[Any, ...], bias: bool | None = True) -> Pending:
    """The "module" probe on :func:`module_case`'s ``args``, begun (see Context.start): its value is
    :func:`call_module`'s; compute the expected value before taking it."""
    return ctx.start(*module_request(args, bias), probe="module")


def call_module(ctx: Context, args: tuple[Any, ...], bias: bool | None = True) -> Value:
    return start_module(ctx, args, bias).value()


def start_modules(ctx: Context) -> list[tuple[torch.dtype, tuple[Any, ...], tuple[int, int, int, int], Pending]]:
    """:func:`module_case` and :func:`start_module` for each of DTYPES, all begun before any is compared
    (the worker runs the next while the check computes what the first should be)."""
    started = []
    for dtype in DTYPES:
        args, sizes = module_case(ctx, dtype)
        started.append((dtype, args, sizes, start_module(ctx, args)))
    return started


@check("4.4", "torch-names-shapes", P, Kind.SHAPE, zh="按 torch 命名的参数都能加载；out、weights、梯度的形状与 dtype",
       en="torch-named parameters load; shapes and dtype of out, weights and gradients",
       statement="`MultiHeadAttention(nn.Module)`")
def _module_shape(ctx: Context) -> Iterator[None]:
    started = start_modules(ctx)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, args, (B, Tq, Tk, H), pending in started:
        expect_module(ctx, pending.value(), args[2], B, Tq, Tk, H, dtype)


@check("4.4", "matches-torch", P, Kind.NUMERIC, zh="加载同样的权重后，输出与 nn.MultiheadAttention 一致",
       en="loaded with the same weights, the outputs agree with nn.MultiheadAttention", weight=2,
       statement="返回 `(out, weights)`，与 4.3 相同")
def _module_torch(ctx: Context) -> Iterator[None]:
    started = start_modules(ctx)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, args, (B, Tq, Tk, H), pending in started:
        want = ctx.expected(torch_probe, *args)
        got = expect_module(ctx, pending.value(), args[2], B, Tq, Tk, H, dtype)
        ctx.expect_close(got["weights"], want["weights"], dtype, what="weights")
        ctx.expect_close(got["out"], want["out"], dtype, what="out")


@check("4.4", "gradients-match-torch", P, Kind.GRADIENT, zh="参数与 query 的梯度与 nn.MultiheadAttention 一致",
       en="gradients of the parameters and of the query agree with nn.MultiheadAttention", weight=2,
       statement="只要每个样本至少有一个有效的键，全程用 torch 的张量运算（不 `.detach()`、不转 NumPy），梯度就与 torch 一致")
def _module_grads(ctx: Context) -> Iterator[None]:
    started = start_modules(ctx)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, args, (B, Tq, Tk, H), pending in started:
        want = ctx.expected(torch_probe, *args)
        got = expect_module(ctx, pending.value(), args[2], B, Tq, Tk, H, dtype)
        expect_gradients(ctx, got, want, dtype)


@check("4.4", "no-bias", P, Kind.NUMERIC, zh="bias=False 时输出和梯度与 torch 一致",
       en="with bias=False, outputs and gradients agree with torch", statement="`bias=False` 时相当于偏置为 0")
def _module_no_bias(ctx: Context) -> Iterator[None]:
    args, (B, Tq, Tk, H) = module_case(ctx, torch.float64, bias=False)
    pending = start_module(ctx, args, bias=False)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_probe, *args)
    got = expect_module(ctx, pending.value(), args[2], B, Tq, Tk, H, torch.float64)
    ctx.expect_close(got["weights"], want["weights"], torch.float64, what="weights")
    ctx.expect_close(got["out"], want["out"], torch.float64, what="out")
    expect_gradients(ctx, got, want, torch.float64)


@check("4.4", "fully-padded-row", P, Kind.PROPERTY, zh="键全为填充的那一批：权重全 0、out 等于 out_proj.bias、梯度有限",
       en="a batch row whose keys are all padded: zero weights, out = out_proj.bias, finite gradients",
       statement=("本题要求的是有限的梯度", "**加法掩码**加上 softmax 之后的 `nan_to_num`，前向对、梯度是 NaN，自查会点名这个陷阱"))
def _module_dead(ctx: Context) -> Iterator[None]:
    args, (B, Tq, Tk, H) = module_case(ctx, torch.float64, empty_row=True, sizes=tuple(ctx.sizes(5, low=3, high=7)))
    state, mask = args[2], args[6]
    pending = start_module(ctx, args)
    yield      # the next check begins here, while the worker runs this call
    got = expect_module(ctx, pending.value(), state, B, Tq, Tk, H, torch.float64)
    expect_dead_rows(ctx, got["out"], got["weights"], mask, state["out_proj.bias"])
    for name, g in [*got["grads"].items(), ("query", got["grad_query"])]:
        ctx.expect(g is None or bool(torch.isfinite(g).all()),
                   f"{name} 的梯度里有 NaN/inf：键全为填充的那一批，反向传播也不能经过 0/0 或 NaN。"
                   f"常见的原因是加法掩码：分数加上 0/-inf 的浮点掩码，softmax 在这一行算出 NaN，再用 nan_to_num "
                   f"或 torch.where 换成 0。前向对了，可 softmax 的反向要乘上它自己的输出（NaN），加法又把这个 NaN "
                   f"原样传回分数；用 masked_fill 填 -inf 时，它的反向把被填位置的梯度换成 0，NaN 就停在那里。"
                   f"最稳妥的是在 softmax 之前处理这一行：行最大值为 -inf 时换成 0，行和为 0 时换成 1",
                   f"the gradient of {name} holds NaN/inf: for a batch row whose keys are all padded the backward "
                   f"pass must not go through 0/0 or NaN either. The usual cause is an additive mask: a 0/-inf float "
                   f"mask added to the scores makes this row's softmax NaN, and nan_to_num or torch.where turns it "
                   f"into 0. The forward pass is right, but the softmax's backward multiplies by its own output (NaN) "
                   f"and the addition passes that NaN on to the scores unchanged; with masked_fill(-inf) the "
                   f"backward zeroes the filled positions' gradient and the NaN stops there. Safest: handle the row "
                   f"before the softmax, a -inf row max becomes 0, a zero row sum becomes 1", diagnose=True)


# -- 4.5 attention_memory -------------------------------------------------------------
BYTES_DTYPE = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}


def meta_bytes(batch: int, heads: int, seq_len: int, bytes_per_element: int = 4) -> int:
    """What torch would allocate for the weights (B, H, T, T), measured on the meta device (no memory used)."""
    w = torch.empty(batch, heads, seq_len, seq_len, dtype=BYTES_DTYPE[bytes_per_element], device="meta")
    return w.numel() * w.element_size()


def expect_int(ctx: Context, value: Value, want: int, what: str | Msg) -> None:
    """``what``: the call, a code expression, or a :class:`Msg` when it holds words."""
    zh, en = label(what)
    ctx.expect(value.kind == "int" and value.spec.get("type") == "int",
               f"{zh} 应当返回 Python int，实际是 {value.describe()}（用 int(...) 转换）",
               f"{en} should return a Python int, got {value.describe()} (convert with int(...))",
               diagnose=True,
               hidden=Msg(f"{zh} 应当返回 Python int，实际是 {brief(value)}（用 int(...) 转换）",
                          f"{en} should return a Python int, got {brief(value)} (convert with int(...))"))
    got = value.to_python()
    ctx.expect(got == want, f"{zh} 应为 {want} 字节，实际是 {got}", f"{en} should be {want} bytes, got {got}",
               diagnose=True, hidden=Msg(f"{zh} 的字节数不对", f"{en}: wrong number of bytes"))


@check("4.5", "python-int", P, Kind.SHAPE, zh="返回 Python int", en="returns a Python int",
       statement="返回 Python `int`（不是张量，也不是 float）")
def _memory_type(ctx: Context) -> Iterator[None]:
    b, h, t = ctx.sizes(3)
    pending = ctx.start(b, h, t)
    yield      # the next check begins here, while the worker runs this call
    value = pending.value()
    ctx.expect(value.kind == "int" and value.spec.get("type") == "int",
               f"应当返回 Python int，实际是 {value.describe()}", f"should return a Python int, got {value.describe()}",
               diagnose=True)


@check("4.5", "fact-one-gib", P, Kind.FACT, zh="批量 32、8 个头、1024 个词元、float32：恰好 1 GiB",
       en="batch 32, 8 heads, 1024 tokens, float32: exactly 1 GiB",
       statement="`attention_memory(batch, num_heads, seq_len, bytes_per_element=4)`")     # the default: 4 bytes
def _memory_fact(ctx: Context) -> Iterator[None]:
    pending = ctx.start(32, 8, 1024)
    yield      # the next check begins here, while the worker runs this call
    expect_int(ctx, pending.value(), 2**30, "attention_memory(32, 8, 1024)")


@check("4.5", "matches-torch", P, Kind.NUMERIC, zh="与 torch 在 `meta` 设备上分配的 (B, H, T, T) 张量字节数一致",
       en="equals the bytes of a (B, H, T, T) tensor torch allocates on the meta device", weight=2,
       statement=r"\text{bytes} = B \cdot H \cdot T^2 \cdot \text{每个元素的字节数}")
def _memory_torch(ctx: Context) -> Iterator[None]:
    # 4 first: 2 * b*h*t^2 * 2 (scores counted too) is b*h*t^2 * 4 (bytes_per_element ignored), and a
    # failure is diagnosed on the call that failed
    started = [(b, h, t, nbytes, ctx.start(b, h, t, nbytes))
               for nbytes in (4, 2, 8) for b, h, t in [ctx.sizes(3, low=2, high=40)]]
    yield      # the next check begins here, while the worker runs these calls
    for b, h, t, nbytes, pending in started:
        expect_int(ctx, pending.value(), meta_bytes(b, h, t, nbytes), f"attention_memory({b}, {h}, {t}, {nbytes})")
