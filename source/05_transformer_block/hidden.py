"""Hidden checks of 05_transformer_block: randomized inputs against solutions/, edge cases, forbidden calls.

5.4 and 5.5 are classes: ``ctx.reference`` cannot call them, so their reference runs the same "module"
probe on the solution class with float64 copies of the inputs (5.5's model is made float64 here, since
the probe leaves a model whose forward takes only integer tokens in its own dtype).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from autograder.catalog import Audience, CheckFailed, Context, Kind, Msg, Value, as_float64, check, not_graded
from autograder.catalog.modules import torch_module
from autograder.catalog.integrity import global_random_changed, input_gradients, inputs_unchanged
from .checks import (attention_args, expect_close_normwise, block_case, block_request, cache_case, call_block, call_lm,
                     expect_probe_gradients, expect_step, expect_tokens, ffn_weights, lm_case, lm_request, loss_case,
                     norm_parameters, start_block, start_lm, step_finish, step_start)
from ..multi_head_attention.checks import expect_int
from ..padding_masks.checks import DTYPES, expect_exact

H = Audience.HIDDEN

#: The intro's conventions (约定), which the shared hidden checks enforce.
UNCHANGED_RULE = "不要修改传入的张量"
GRADIENT_RULE = "梯度要能流回每个输入"
FORBIDDEN_STATEMENT = "禁止调用（评分器运行本题时一旦检测到，本题记 0 分）"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# -- 5.1 positional_encoding ------------------------------------------------------------
@check("5.1", "reference-random", H, Kind.NUMERIC, zh="随机的位置（不从 0 开始）与参考答案一致",
       en="agrees with the reference on random positions (not starting at 0)", weight=2, same_as="matches-formula",
       statement=("5.8 之后逐个生成时，只编码新的位置", "第 `k` 行是位置 `positions[k]` 的编码"))
def _pe_reference(ctx: Context) -> Iterator[None]:
    started = []
    for dtype in DTYPES:
        T, D = ctx.sizes(2, low=2, high=33)
        start = int(ctx.randint(1, 30, 1))      # not 0: the positions given, whatever they are
        positions = torch.arange(start, start + T, dtype=dtype)
        started.append((dtype, T, D, positions, ctx.start(positions, D)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, T, D, positions, pending in started:
        with ctx.case(zh=f"从某个位置开始的 T 个位置（{dtype_name(dtype)}）", en=f"T positions from start ({dtype_name(dtype)})"):
            got = ctx.expect_tensor(pending.value(), (T, D), dtype, what="positional_encoding")
            ctx.expect_close(got, ctx.reference(positions, D), dtype, what="positional_encoding")


@check("5.1", "edge-cases", H, Kind.EDGE, zh="D = 1、D = 2、一个位置、D 为奇数", en="D = 1, D = 2, one position, odd D",
       same_as="matches-formula", statement=r"`D = 1` 时只有一列 $\sin(t)$")
def _pe_edges(ctx: Context) -> Iterator[None]:
    odd = 2 * int(ctx.randint(2, 10, 1)) + 1
    started = [(T, D, names, positions, ctx.start(positions, D))
               for (T, D), names in (((6, 1), ("D = 1", "D = 1")), ((6, 2), ("D = 2", "D = 2")),
                                     ((1, 8), ("一个位置", "one position")), ((9, odd), ("D 为奇数", "odd D")))
               for positions in [torch.arange(T, dtype=torch.float64)]]
    yield      # the next check begins here, while the worker runs these calls
    for T, D, (zh, en), positions, pending in started:
        with ctx.case(zh=zh, en=en):
            got = ctx.expect_tensor(pending.value(), (T, D), torch.float64, what="positional_encoding")
            ctx.expect_close(got, ctx.reference(positions, D), torch.float64, what="positional_encoding")


# -- 5.2 layer_norm ----------------------------------------------------------------------
@check("5.2", "reference-random", H, Kind.NUMERIC, zh="随机输入（不同的批量维、带和不带 weight、bias）与参考答案一致",
       en="agrees with the reference on random inputs (other batch dims, with and without weight and bias)",
       weight=2, same_as="matches-torch",
       statement=("`x`：`(..., D)`，沿最后一维规范化", "`weight`、`bias`：`(D,)` 或 `None`（`None` 即不缩放、不平移）"))
def _ln_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for batch in ((), (3,), (2, 3)):
        for dtype in DTYPES:
            D = int(ctx.randint(2, 20, 1))
            x = ctx.randn(*batch, 4, D, dtype=dtype, scale=3.0)
            weight, bias = norm_parameters(ctx, D, dtype)
            started.append((batch, dtype, x, weight, bias, ctx.start(x, weight, bias), ctx.start(x, weight)))
    yield      # the next check begins here, while the worker runs these calls
    for batch, dtype, x, weight, bias, pending, pending_no_bias in started:
        with ctx.case(zh=f"批量维 {batch}（{dtype_name(dtype)}）", en=f"batch dims {batch} ({dtype_name(dtype)})"):
            want = ctx.reference(x, weight, bias)
            got = ctx.expect_tensor(pending.value(), tuple(x.shape), dtype, what="layer_norm")
            ctx.expect_close(got, want, dtype, what="layer_norm")
            want = ctx.reference(x, weight)
            got = ctx.expect_tensor(pending_no_bias.value(), tuple(x.shape), dtype, what="layer_norm(x, weight)")
            ctx.expect_close(got, want, dtype, what="layer_norm(x, weight)")


@check("5.2", "edge-cases", H, Kind.EDGE, zh="D = 1、每行都相同（方差 0）、1e4 附近的大偏移",
       en="D = 1, constant rows (variance 0), large offsets near 1e4", statement="输入在 $10^4$ 附近、彼此只差几个单位时")
def _ln_edges(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2, low=3, high=12)
    weight, bias = norm_parameters(ctx, D, torch.float64)
    wide = max(D, 8)
    wide_weight, wide_bias = norm_parameters(ctx, wide, torch.float64)
    cases = ((("D = 1", "D = 1"), ctx.randn(T, 1), None, None),
             (("每行都相同", "constant rows"), ctx.randn(T, 1).expand(T, D).contiguous(), weight, bias),
             # at 1e4, rows of at least 8 values (as the public check): float32's rounding of a row's mean moves
             # its outputs by about ulp(1e4) / the row's spread, which 3 close values can make large for any
             # sound method
             (("1e4 附近（float32）", "near 1e4 (float32)"), (1e4 + ctx.randn(T, wide, scale=3.0)).float(), None, None),
             (("-1e4 附近，带 weight、bias（float32）", "near -1e4 with weight and bias (float32)"),
              (-1e4 + ctx.randn(T, wide, scale=3.0)).float(), wide_weight.float(), wide_bias.float()))
    started = [(names, x, w, b, ctx.start(x, w, b)) for names, x, w, b in cases]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), x, w, b, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(x, w, b)
            got = ctx.expect_tensor(pending.value(), tuple(x.shape), x.dtype, what="layer_norm")
            ctx.expect(bool(torch.isfinite(got).all()), "输出里有 NaN 或 inf", "NaN or inf in the output", diagnose=True,
                       safe=True)
            expect_close_normwise(ctx, got, want, x.dtype, what="layer_norm")


@check("5.2", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的层规范化", en="no library layer normalization",
       statement=("禁止调用（评分器运行本题时一旦检测到，本题记 0 分）：`F.layer_norm`、`nn.LayerNorm`",
                  "但你的实现里不能用"))
def _ln_forbidden(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2, low=3, high=12)
    weight, bias = norm_parameters(ctx, D, torch.float64)
    pending = ctx.start(ctx.randn(2, T, D), weight, bias)
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 5.3 feed_forward ---------------------------------------------------------------------
@check("5.3", "reference-random", H, Kind.NUMERIC, zh="随机输入（不同的批量维）与参考答案一致",
       en="agrees with the reference on random inputs (other batch dims)", weight=2, same_as="matches-torch")
def _ffn_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for batch in ((), (2,), (2, 3)):
        for dtype in DTYPES:
            T, D, Fw = ctx.sizes(3)
            x = ctx.randn(*batch, T, D, dtype=dtype)
            weights = ffn_weights(ctx, D, Fw, dtype)
            started.append((batch, dtype, x, weights, ctx.start(x, *weights)))
    yield      # the next check begins here, while the worker runs these calls
    for batch, dtype, x, weights, pending in started:
        with ctx.case(zh=f"批量维 {batch}（{dtype_name(dtype)}）", en=f"batch dims {batch} ({dtype_name(dtype)})"):
            want = ctx.reference(x, *weights)
            got = ctx.expect_tensor(pending.value(), tuple(x.shape), dtype, what="feed_forward")
            ctx.expect_close(got, want, dtype, what="feed_forward")


@check("5.3", "edge-cases", H, Kind.EDGE, zh="F = 1、一个位置、全部被 ReLU 截成 0（输出恰好是 b2）",
       en="F = 1, one position, everything cut to 0 by the ReLU (the output is exactly b2)", same_as="matches-torch")
def _ffn_edges(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2, low=2, high=7)
    started = []
    for (zh, en), (t, f) in ((("F = 1", "F = 1"), (T + 10, 1)), (("一个位置", "one position"), (1, 2 * D))):
        x = ctx.randn(t, D)
        weights = ffn_weights(ctx, D, f, torch.float64)
        started.append(((zh, en), t, x, weights, ctx.start(x, *weights)))
    x = ctx.randn(T, D)
    W1, _b1, W2, b2 = ffn_weights(ctx, D, 2 * D, torch.float64)
    b1 = -(x @ W1.T).abs().amax(dim=0) - 1.0                     # below every pre-activation
    negative = ctx.start(x, W1, b1, W2, b2)
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), t, x_t, weights, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(x_t, *weights)
            got = ctx.expect_tensor(pending.value(), (t, D), torch.float64, what="feed_forward")
            ctx.expect_close(got, want, torch.float64, what="feed_forward")
    with ctx.case(zh="第一层的输出全为负", en="every first-layer output negative"):
        want = ctx.reference(x, W1, b1, W2, b2)
        got = ctx.expect_tensor(negative.value(), (T, D), torch.float64, what="feed_forward")
        ctx.expect_close(got, want, torch.float64, what="feed_forward")


# -- 5.4 TransformerBlock -----------------------------------------------------------------
def reference_model(ctx: Context, *sizes: int) -> torch.nn.Module:
    """The solution class built for ``sizes`` in float64, once per grading thread and sizes (torch_module: its own
    initialization never moves the caller's random numbers); every use loads all its parameters (strict) first."""
    cls = ctx.reference_function()
    return torch_module(("reference", cls, *sizes), lambda: cls(*sizes).double())


def block_reference(ctx: Context, args: tuple[Any, ...]) -> dict[str, Any]:
    """What the "module" probe returns, computed by the solution class on float64 copies: the same steps as the
    probe (every parameter loaded, forward with both masks, grad_out backpropagated), on a model built once."""
    D, Hn, Fw, state, x, mask, am, grad_out = as_float64(args)
    model = reference_model(ctx, D, Hn, Fw)
    model.load_state_dict(state, strict=True)
    leaf = x.clone().requires_grad_(True)
    out = model(leaf, key_padding_mask=mask, attn_mask=am)
    (out * grad_out).sum().backward()
    return {"out": out.detach(), "grads": {n: p.grad for n, p in model.named_parameters()}, "grad_x": leaf.grad}


def without_none(request: tuple[Any, ...]) -> tuple[Any, ...]:
    """A "module" probe request whose forward gets no keyword argument that is None: forward(x) or
    forward(tokens=...) alone, the masks left to the signature's defaults."""
    init_args, init_kwargs, state, args, kwargs, grad_out, wrt = request
    return init_args, init_kwargs, state, args, {k: v for k, v in kwargs.items() if v is not None}, grad_out, wrt


def _block_start(ctx: Context, dtype: torch.dtype, *, defaults: bool = False, **options: Any) -> tuple:
    """One case's inputs, drawn, and its probe call, begun (:func:`_block_finish` compares it with the
    reference): a check begins all its cases before it compares the first (see Context.start). ``defaults``:
    an absent mask is not passed at all (forward(x)), rather than passed as None."""
    args = block_case(ctx, dtype, **options)
    if defaults:
        return dtype, args, ctx.start(*without_none(block_request(args)), probe="module")
    return dtype, args, start_block(ctx, args)


def _block_finish(ctx: Context, started: tuple) -> None:
    dtype, args, pending = started
    want = ctx.expected(block_reference, ctx, args)
    got = call_block(ctx, args, pending)
    expect_close_normwise(ctx, got["out"], want["out"], dtype, what="TransformerBlock(...)(x)")
    expect_probe_gradients(ctx, got, want, dtype)


not_graded("5.4", "评分只用每个样本至少有一个真实词元的输入",
           why="a promise about the grader's inputs (every sample has a real token, so no fully masked row; torch's "
               "layer gives NaN there): block_case draws lengths of at least 1")


@check("5.4", "reference-random", H, Kind.NUMERIC, zh="随机输入（两种掩码都带）下输出和梯度与参考答案一致",
       en="outputs and gradients agree with the reference on random inputs (both masks)", weight=3,
       same_as="gradients-match-torch")
def _block_reference(ctx: Context) -> Iterator[None]:
    started = [_block_start(ctx, dtype) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for case in started:
        with ctx.case(zh=dtype_name(case[0]), en=dtype_name(case[0])):
            _block_finish(ctx, case)


@check("5.4", "edge-cases", H, Kind.EDGE, zh="一个头、一个位置、不带任何掩码（只调用 forward(x)）",
       en="one head, one position, no mask at all (forward(x) alone)", same_as="matches-torch",
       statement="`forward(x, key_padding_mask=None, attn_mask=None)`")
def _block_edges(ctx: Context) -> Iterator[None]:
    B, T, Hn, d = ctx.sizes(4, low=2, high=6)
    cases = [(("一个头", "one head"), _block_start(ctx, torch.float64, sizes=(B, T, 1, d))),
             (("一个位置", "one position"), _block_start(ctx, torch.float64, sizes=(B, 1, Hn, d))),
             (("不带掩码：只调用 forward(x)", "no mask: forward(x) alone"),
              _block_start(ctx, torch.float64, defaults=True, padding=False, causal_mask=False))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in cases:
        with ctx.case(zh=zh, en=en):
            _block_finish(ctx, case)


@check("5.4", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的多头注意力", en="no library multi-head attention",
       statement=FORBIDDEN_STATEMENT)
def _block_forbidden(ctx: Context) -> Iterator[None]:
    pending = ctx.start(*block_request(block_case(ctx, torch.float64)), probe="module")
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 5.5 TinyLM -----------------------------------------------------------------------------
def lm_reference(ctx: Context, args: tuple[Any, ...]) -> dict[str, Any]:
    """The solution model in float64: its logits and every parameter's gradient."""
    V, D, Hn, Fw, L, state, tokens, mask, grad_out = args
    model = reference_model(ctx, V, D, Hn, Fw, L)
    model.load_state_dict({k: v.double() for k, v in state.items()}, strict=True)
    logits = model(tokens, key_padding_mask=mask)
    (logits * grad_out.double()).sum().backward()
    return {"out": logits.detach(), "grads": {n: p.grad for n, p in model.named_parameters()}}


def _lm_start(ctx: Context, *, defaults: bool = False, **options: Any) -> tuple:
    """One case's model and tokens, drawn, and its probe call, begun (:func:`_lm_finish` compares it).
    ``defaults``: no padding mask is passed at all (forward(tokens)), rather than passed as None."""
    args = lm_case(ctx, **options)
    if defaults:
        return args, ctx.start(*without_none(lm_request(args)), probe="module")
    return args, start_lm(ctx, args)


def _lm_finish(ctx: Context, started: tuple) -> None:
    args, pending = started
    want = ctx.expected(lm_reference, ctx, args)
    got = call_lm(ctx, args, pending)
    expect_close_normwise(ctx, got["out"], want["out"], torch.float32, what="logits")
    expect_probe_gradients(ctx, got, want, torch.float32)


@check("5.5", "reference-random", H, Kind.NUMERIC, zh="随机的模型和词元下 logits 与梯度与参考答案一致",
       en="logits and gradients agree with the reference on random models and tokens", weight=2,
       same_as="gradients-match-torch")
def _lm_reference(ctx: Context) -> Iterator[None]:
    started = []
    for layers in (1, 2):
        B, T, V = ctx.sizes(3, low=2, high=9)
        Hn, d = ctx.sizes(2, low=2, high=4)
        started.append((layers, _lm_start(ctx, sizes=(B, T, V, Hn, d, layers))))
    yield      # the next check begins here, while the worker runs these calls
    for layers, case in started:
        with ctx.case(zh=f"{layers} 个块", en=f"{layers} blocks"):
            _lm_finish(ctx, case)


@check("5.5", "edge-cases", H, Kind.EDGE, zh="一个词元、词表只有 2 个、不带填充掩码（只传 tokens）",
       en="one token, a vocabulary of 2, no padding mask (tokens alone)", same_as="matches-torch",
       statement="`forward(tokens, key_padding_mask=None)`")
def _lm_edges(ctx: Context) -> Iterator[None]:
    B, T, V = ctx.sizes(3, low=2, high=7)
    cases = [(("一个词元", "one token"), _lm_start(ctx, sizes=(B, 1, V, 2, 3, 1))),
             (("词表只有 2 个", "a vocabulary of 2"), _lm_start(ctx, sizes=(B, T, 2, 2, 3, 2))),
             (("不带填充掩码：只传 tokens", "no padding mask: tokens alone"), _lm_start(ctx, defaults=True, padding=False))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in cases:
        with ctx.case(zh=zh, en=en):
            _lm_finish(ctx, case)


@check("5.5", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的多头注意力", en="no library multi-head attention",
       statement=FORBIDDEN_STATEMENT)
def _lm_forbidden(ctx: Context) -> Iterator[None]:
    args = lm_case(ctx)
    pending = start_lm(ctx, args)
    yield      # the next check begins here, while the worker runs this call
    call_lm(ctx, args, pending)


# -- 5.6 lm_loss -------------------------------------------------------------------------------
@check("5.6", "reference-random", H, Kind.NUMERIC, zh="随机输入（带填充掩码）与参考答案一致",
       en="agrees with the reference on random inputs (with padding)", weight=2, same_as="matches-torch")
def _loss_reference(ctx: Context) -> Iterator[None]:
    started = []
    for dtype in DTYPES:
        logits, tokens, mask = loss_case(ctx, dtype)
        started.append((dtype, logits, tokens, mask, ctx.start(logits, tokens, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, logits, tokens, mask, pending in started:
        want = ctx.reference(logits, tokens, mask)
        got = ctx.expect_tensor(pending.value(), (), dtype, what="lm_loss")
        ctx.expect_close(got, want, dtype, what="lm_loss")


@check("5.6", "edge-cases", H, Kind.EDGE, zh="T = 2（每个样本一个目标，不传 key_padding_mask）、只剩一个目标要算、logits 很大",
       en="T = 2 (one target per sample, no key_padding_mask passed), a single target left to count, large logits",
       statement=("`lm_loss(logits, tokens, key_padding_mask=None)`", "评分只用至少有一个目标要算的输入"))
def _loss_edges(ctx: Context) -> Iterator[None]:
    B, V = ctx.sizes(2, low=3, high=9)
    T = int(ctx.randint(3, 8, 1))
    short_logits, short_tokens = ctx.randn(B, 2, V), ctx.randint(0, V, B, 2)
    short = ctx.start(short_logits, short_tokens)       # key_padding_mask left to its default, as the notebook's training calls it
    one_logits, one_tokens = ctx.randn(B, T, V), ctx.randint(0, V, B, T)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, :2] = False                                   # sample 0: two real tokens, one target
    one = ctx.start(one_logits, one_tokens, mask)
    large_logits, large_tokens = ctx.randn(B, T, V, scale=1000.0), ctx.randint(0, V, B, T)
    large = ctx.start(large_logits, large_tokens, None)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case(zh="T = 2，只传 logits 和 tokens", en="T = 2, logits and tokens alone"):
        want = ctx.reference(short_logits, short_tokens, None)
        got = ctx.expect_tensor(short.value(), (), torch.float64, what="lm_loss")
        ctx.expect_close(got, want, torch.float64, what="lm_loss")
    with ctx.case(zh="只剩一个目标要算", en="a single target left to count"):
        want = ctx.reference(one_logits, one_tokens, mask)
        got = ctx.expect_tensor(one.value(), (), torch.float64, what="lm_loss")
        ctx.expect_close(got, want, torch.float64, what="lm_loss")
    with ctx.case(zh="logits 在几千的量级", en="logits in the thousands"):
        want = ctx.reference(large_logits, large_tokens, None)
        got = ctx.expect_tensor(large.value(), (), torch.float64, what="lm_loss")
        ctx.expect(bool(torch.isfinite(got)), "logits 很大时损失是 inf 或 NaN", "inf or NaN loss for large logits",
                   diagnose=True, safe=True)
        ctx.expect_close(got, want, torch.float64, what="lm_loss")


@check("5.6", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的交叉熵", en="no library cross entropy",
       statement="3.4 自己不许用的 `F.cross_entropy` 等，这里也不要用")
def _loss_forbidden(ctx: Context) -> Iterator[None]:
    pending = ctx.start(*loss_case(ctx, torch.float64))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


@check("5.6", "gradients", H, Kind.GRADIENT, zh="梯度能传回 logits，且与参考答案一致",
       en="gradients reach logits and agree with the reference's", statement=GRADIENT_RULE)
def _loss_gradients(ctx: Context) -> Iterator[None]:
    logits, tokens, mask = loss_case(ctx, torch.float64)
    yield from input_gradients(ctx, ("logits",), (0,), logits, tokens, mask)


# -- 5.7 sample_next_token ------------------------------------------------------------------
@check("5.7", "reference-random", H, Kind.NUMERIC, zh="随机的 logits、温度和种子下与参考答案抽到的完全相同",
       en="draws exactly what the reference draws on random logits, temperatures and seeds", weight=2,
       same_as="same-draws-as-multinomial")
def _sample_reference(ctx: Context) -> None:
    for dtype in DTYPES:
        B, V = int(ctx.randint(100, 300, 1)), int(ctx.randint(2, 12, 1))
        temperature = float(0.3 + 2 * torch.rand(1, generator=ctx.generator))
        seed = int(ctx.randint(0, 1_000_000, 1))
        logits = ctx.randn(B, V, dtype=dtype, scale=2.0)
        with ctx.case(zh=f"随机温度（{dtype_name(dtype)}）", en=f"a random temperature ({dtype_name(dtype)})"), \
                ctx.on_device("cpu"):     # a seeded draw: on the CPU, as in same-draws-as-multinomial
            got = expect_tokens(ctx, ctx.call(logits, temperature, seed=seed), B, "sample_next_token")
            expect_exact(ctx, got, ctx.reference(logits, temperature, seed=seed), "sample_next_token")
        with ctx.case(zh=f"贪心（{dtype_name(dtype)}）", en=f"greedy ({dtype_name(dtype)})"):
            got = expect_tokens(ctx, ctx.call(logits, 0.0, seed=seed), B, "sample_next_token")
            expect_exact(ctx, got, ctx.reference(logits, 0.0, seed=seed), "sample_next_token")


@check("5.7", "edge-cases", H, Kind.EDGE, zh="logits 在几千的量级、词表只有 1 个、温度很低",
       en="logits in the thousands, a vocabulary of 1, a very low temperature",
       statement="`logits` 很大（几千）时也不能出现 NaN")
def _sample_edges(ctx: Context) -> None:
    B, V = int(ctx.randint(20, 60, 1)), int(ctx.randint(3, 9, 1))
    seed = int(ctx.randint(0, 1_000_000, 1))
    for (zh, en), logits, temperature in ((("logits 在几千的量级", "logits in the thousands"), ctx.randn(B, V, scale=3000.0), 1.0),
                                          (("词表只有 1 个", "a vocabulary of 1"), ctx.randn(B, 1), 1.0),
                                          (("温度 0.01", "temperature 0.01"), ctx.randn(B, V), 0.01)):
        with ctx.case(zh=zh, en=en), ctx.on_device("cpu"):      # seeded draws: on the CPU (see above)
            got = expect_tokens(ctx, ctx.call(logits, temperature, seed=seed), B, "sample_next_token")
            expect_exact(ctx, got, ctx.reference(logits, temperature, seed=seed), "sample_next_token")


@check("5.7", "global-random-untouched", H, Kind.PROPERTY, zh="temperature = 0 或给了 seed：全局随机数的状态不变",
       en="at temperature 0, or with a seed: torch's global random state is left as it was",
       statement=("给了 `seed` 时全局随机数的状态不变", "不用随机数"), needs_output=True)
def _sample_global_random(ctx: Context) -> None:
    """The statement's own generator: a seeded draw (or a greedy one) leaves the global random numbers alone."""
    B, V = int(ctx.randint(3, 20, 1)), int(ctx.randint(3, 9, 1))
    seed = int(ctx.randint(0, 1_000_000, 1))
    logits = ctx.randn(B, V, scale=2.0)
    for (zh, en), temperature, kwargs in ((("temperature = 0", "temperature 0"), 0.0, {}),
                                          (("temperature = 1、给了 seed", "temperature 1 with a seed"), 1.0,
                                           {"seed": seed})):
        with ctx.case(zh=zh, en=en), ctx.on_device("cpu"):
            ctx.expect(not global_random_changed(ctx, logits, temperature, **kwargs),
                       "调用之后全局随机数的状态变了：抽样请用自己的 torch.Generator(...).manual_seed(seed)，"
                       "不要调用 torch.manual_seed，也不要从全局随机数里抽",
                       "the global random state changed across the call: draw with a generator of its own, "
                       "torch.Generator(...).manual_seed(seed), never torch.manual_seed nor the global random "
                       "numbers", diagnose=True, safe=True)


UNREADABLE_DRAW = Msg("读不出这次调用的返回值", "the call's return value could not be read")


@check("5.7", "unseeded-draws-global", H, Kind.PROPERTY,
       zh="temperature > 0、没有 seed：从全局随机数里抽，不是从新建的 torch.Generator 里抽（它的种子是固定的）",
       en="temperature > 0 without a seed: drawn from the global random numbers, not from a new torch.Generator "
          "(whose seed is fixed)",
       statement="`seed` 为 `None` 时不传生成器（用全局随机数）", needs_output=True)
def _sample_unseeded(ctx: Context) -> None:
    """A new torch.Generator() starts from a fixed seed, so that "a generator of its own whether or not a seed is
    given" draws the same tokens on every call: without a seed the statement draws from the global numbers. The
    "random" probe draws from them once before the call, so the global state is never a new generator's."""
    B, V = int(ctx.randint(40, 80, 1)), int(ctx.randint(4, 9, 1))
    logits = ctx.randn(B, V, scale=0.5)                         # float64, near-uniform rows: every draw is open
    with ctx.on_device("cpu"):     # the global numbers the probe touches are the CPU's (as global-random-untouched)
        value = ctx.call(logits, 1.0, probe="random")
        if value.kind != "dict" or "out" not in value.spec["items"]:
            raise CheckFailed(UNREADABLE_DRAW, hidden=UNREADABLE_DRAW)
        got = expect_tokens(ctx, Value(value.spec["items"]["out"], value.arrays), B, "sample_next_token(logits, 1.0)")
    fixed = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=torch.Generator()).squeeze(-1)
    ctx.expect(not torch.equal(got, fixed),
               "没有 seed 时抽到的恰好是新建的 torch.Generator() 抽到的：新建的生成器种子是固定的，每次调用都抽出同样的词元；"
               "seed 为 None 时不要传生成器，用全局随机数",
               "without a seed the draws are exactly those of a new torch.Generator(): a new generator starts from a "
               "fixed seed, so every call draws the same tokens; when seed is None pass no generator and draw from "
               "the global random numbers", diagnose=True, safe=True)


# -- 5.8 cached_self_attention ------------------------------------------------------------------
@check("5.8", "reference-random", H, Kind.NUMERIC, zh="随机的缓存长度和新位置数下与参考答案一致",
       en="agrees with the reference on random cache lengths and numbers of new positions", weight=2,
       same_as="step-matches-torch")
def _cache_reference(ctx: Context) -> Iterator[None]:
    started = []
    for dtype in DTYPES:
        S, T_new = int(ctx.randint(1, 9, 1)), int(ctx.randint(1, 5, 1))
        x_all, Hn, state = cache_case(ctx, dtype, S, T_new)
        # the cache the call is given: the reference's, on the first S positions (no call of the student's)
        cache = ctx.reference(x_all[:, :S], None, Hn, *attention_args(state))[1]
        cache = tuple(t.to(dtype) for t in cache)
        started.append((dtype, S, T_new, x_all, Hn, state, cache,
                        ctx.start(x_all[:, S:], cache, Hn, *attention_args(state))))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, S, T_new, x_all, Hn, state, cache, pending in started:
        B, total, E = x_all.shape
        with ctx.case(zh=f"缓存 S 个位置、新来 T_new 个（{dtype_name(dtype)}）",
                      en=f"a cache of S positions, T_new new ones ({dtype_name(dtype)})"):
            want_out, (want_k, want_v) = ctx.reference(x_all[:, S:], cache, Hn, *attention_args(state))
            out, k, v = expect_step(ctx, pending.value(), B, Hn, T_new, total, E, dtype)
            ctx.expect_close(k, want_k, dtype, what=Msg("返回的 k", "the returned k"))
            ctx.expect_close(v, want_v, dtype, what=Msg("返回的 v", "the returned v"))
            ctx.expect_close(out, want_out, dtype, what="out")


@check("5.8", "edge-cases", H, Kind.EDGE, zh="一个头、只有一个位置、长缓存之后新来一个位置",
       en="one head, a single position, one new position after a long cache", same_as="step-matches-torch")
def _cache_edges(ctx: Context) -> Iterator[None]:
    B, Hn, d = ctx.sizes(3, low=2, high=5)
    x_all, _, state = cache_case(ctx, torch.float64, 3, 2, sizes=(B, 1, d))
    started = [(("一个头", "one head"), step_start(ctx, x_all, 1, state, 3))]
    x_all, Hn, state = cache_case(ctx, torch.float64, 0, 1, sizes=(B, Hn, d))
    started.append((("没有缓存、只有一个位置", "no cache, a single position"), step_start(ctx, x_all, Hn, state, 0)))
    x_all, Hn, state = cache_case(ctx, torch.float64, 40, 1, sizes=(B, Hn, d))
    started.append((("长缓存之后新来一个位置", "one new position after a long cache"), step_start(ctx, x_all, Hn, state, 40)))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), step in started:
        with ctx.case(zh=zh, en=en):
            step_finish(ctx, step)


@check("5.8", "inputs-unchanged", H, Kind.PROPERTY, zh="不修改传入的张量（缓存也不改）", en="leaves the tensors it is given unchanged (the cache too)",
       needs_output=True, statement=UNCHANGED_RULE)
def _cache_inputs(ctx: Context) -> Iterator[None]:
    x_all, Hn, state = cache_case(ctx, torch.float64, 3, 1)
    cache = tuple(ctx.reference(x_all[:, :3], None, Hn, *attention_args(state))[1])
    yield from inputs_unchanged(ctx, x_all[:, 3:], cache, Hn, *attention_args(state))


@check("5.8", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的多头注意力", en="no library multi-head attention",
       statement=FORBIDDEN_STATEMENT)
def _cache_forbidden(ctx: Context) -> Iterator[None]:
    x_all, Hn, state = cache_case(ctx, torch.float64, 0, 3)
    pending = ctx.start(x_all, None, Hn, *attention_args(state))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 5.9 kv_cache_memory -------------------------------------------------------------------
@check("5.9", "reference-random", H, Kind.NUMERIC, zh="随机参数与参考答案一致（含很长的序列）",
       en="agrees with the reference on random arguments (very long sequences included)", weight=2, same_as="matches-torch")
def _kv_reference(ctx: Context) -> Iterator[None]:
    b, L, h, t, d = ctx.sizes(5, low=2, high=64)
    started = [(nbytes, ctx.start(b, L, h, t, d, nbytes)) for nbytes in (1, 2, 8)]
    million = ctx.start(b, L, h, 1_000_000, d)
    yield      # the next check begins here, while the worker runs these calls
    for nbytes, pending in started:
        expect_int(ctx, pending.value(), ctx.reference(b, L, h, t, d, nbytes),
                   Msg(f"kv_cache_memory(...)，参数随机，bytes_per_element={nbytes}",
                       f"kv_cache_memory(random arguments, bytes_per_element={nbytes})"))
    expect_int(ctx, million.value(), ctx.reference(b, L, h, 1_000_000, d),
               Msg("kv_cache_memory(...)，序列有 100 万个词元", "kv_cache_memory(a million-token sequence)"))


@check("5.9", "edge-cases", H, Kind.EDGE, zh="每个参数都是 1（bytes_per_element 用默认值和 2）",
       en="every argument 1 (bytes_per_element left to its default, and 2)", same_as="matches-torch",
       statement="`kv_cache_memory(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4)`")
def _kv_edges(ctx: Context) -> Iterator[None]:
    pending = ctx.start(1, 1, 1, 1, 1)
    yield      # the next check begins here, while the worker runs this call
    expect_int(ctx, pending.value(), ctx.reference(1, 1, 1, 1, 1), "kv_cache_memory(1, 1, 1, 1, 1)")
    expect_int(ctx, ctx.call(1, 1, 1, 1, 1, 2), ctx.reference(1, 1, 1, 1, 1, 2), "kv_cache_memory(1, 1, 1, 1, 1, 2)")


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量（没有对输入做原地操作）", "leaves the tensors it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个输入，且与参考答案一致", "gradients reach every input and agree with the reference's"


@check("5.2", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True, statement=UNCHANGED_RULE)
def _ln_inputs(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2)
    yield from inputs_unchanged(ctx, ctx.randn(T, D), *norm_parameters(ctx, D, torch.float64))


@check("5.2", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _ln_gradients(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2)
    yield from input_gradients(ctx, ("x", "weight", "bias"), (0, 1, 2), ctx.randn(T, D), *norm_parameters(ctx, D, torch.float64))


@check("5.3", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True, statement=UNCHANGED_RULE)
def _ffn_inputs(ctx: Context) -> Iterator[None]:
    T, D, Fw = ctx.sizes(3)
    yield from inputs_unchanged(ctx, ctx.randn(T, D), *ffn_weights(ctx, D, Fw, torch.float64))


@check("5.3", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _ffn_gradients(ctx: Context) -> Iterator[None]:
    T, D, Fw = ctx.sizes(3)
    yield from input_gradients(ctx, ("x", "W1", "b1", "W2", "b2"), (0, 1, 2, 3, 4), ctx.randn(T, D),
                           *ffn_weights(ctx, D, Fw, torch.float64))


@check("5.6", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True, statement=UNCHANGED_RULE)
def _loss_inputs(ctx: Context) -> Iterator[None]:
    yield from inputs_unchanged(ctx, *loss_case(ctx, torch.float64))


@check("5.7", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True, statement=UNCHANGED_RULE)
def _sample_inputs(ctx: Context) -> Iterator[None]:
    B, V = ctx.sizes(2, low=3, high=9)
    yield from inputs_unchanged(ctx, ctx.randn(B, V, scale=2.0), 0.7, seed=int(ctx.randint(0, 1000, 1)))


@check("5.8", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH + "（经过 out）", en=GRAD_EN + " (through out)", statement=GRADIENT_RULE)
def _cache_gradients(ctx: Context) -> Iterator[None]:
    x_all, Hn, state = cache_case(ctx, torch.float64, 0, 4)
    yield from input_gradients(ctx, ("x", "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias"),
                           (0, 3, 4, 5, 6), x_all, None, Hn, *attention_args(state), outputs=("out", "cache"))
