"""Hidden checks of 03_padding_masks: randomized inputs against solutions/, edge cases, forbidden calls.

Labels and messages name a case by its sizes and kind, never by an input's or an
output's value (see ``checks.hidden_message``).
"""
from __future__ import annotations

import torch

from autograder.catalog import Audience, Context, Kind, Msg, check, near_answer
from autograder.catalog.integrity import expect_input_gradients, expect_inputs_unchanged
from .checks import (DTYPES, expect_bool, expect_causal, expect_exact, expect_loss, expect_masked_weights,
                     key_lengths, mask_from_lengths, padded_targets)

H = Audience.HIDDEN


# -- 3.1 padding_mask ---------------------------------------------------------------
@check("3.1", "reference-random", H, Kind.NUMERIC, zh="随机长度与参考答案一致", en="agrees with the reference on random lengths",
       weight=2)
def _pad_reference(ctx: Context) -> None:
    for _ in range(3):
        B, T = ctx.sizes(2, low=2, high=12)
        lengths = ctx.randint(0, T + 1, B)
        want = ctx.reference(lengths)
        expect_exact(ctx, expect_bool(ctx, ctx.call(lengths), tuple(want.shape)), want, "padding_mask(lengths)")
        want = ctx.reference(lengths, T + 4)
        expect_exact(ctx, expect_bool(ctx, ctx.call(lengths, T + 4), (B, T + 4)), want,
                     f"padding_mask(lengths, {T + 4})")


@check("3.1", "edge-cases", H, Kind.EDGE, zh="T = 1、长度为 0 的行、max_len 等于最大长度",
       en="T = 1, a row of length 0, max_len equal to the longest length")
def _pad_edges(ctx: Context) -> None:
    B = ctx.sizes(1, low=3)[0]
    ones = torch.ones(B, dtype=torch.int64)
    expect_exact(ctx, expect_bool(ctx, ctx.call(ones), (B, 1)), torch.zeros(B, 1, dtype=torch.bool),
                 "padding_mask(all lengths 1)")
    lengths = torch.tensor([3, 0, 1], dtype=torch.int64)
    expect_exact(ctx, expect_bool(ctx, ctx.call(lengths, max_len=3), (3, 3)), ctx.reference(lengths, 3),
                 "padding_mask(lengths with a 0, max_len = the longest length)")
    # max_len left to its default: one sequence (the longest is the only one), and an empty batch (0, 0)
    T = ctx.sizes(1, low=2, high=9)[0]
    single = torch.tensor([T], dtype=torch.int64)
    expect_exact(ctx, expect_bool(ctx, ctx.call(single), (1, T)), torch.zeros(1, T, dtype=torch.bool),
                 "padding_mask(a batch of one sequence)")
    empty = torch.zeros(0, dtype=torch.int64)
    expect_exact(ctx, expect_bool(ctx, ctx.call(empty), (0, 0)), torch.zeros(0, 0, dtype=torch.bool),
                 "padding_mask(an empty batch)")


# -- 3.2 masked_softmax ---------------------------------------------------------------
@check("3.2", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行、多个批维度）与参考答案一致",
       en="agrees with the reference on random inputs (fully padded rows, several batch dims)", weight=3)
def _msm_reference(ctx: Context) -> None:
    for extra in ((), (2,), (3, 2)):
        B, Tq, Tk = ctx.sizes(3, low=3)
        mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
        for dtype in DTYPES:
            scores = ctx.randn(B, *extra, Tq, Tk, dtype=dtype, scale=4.0)
            want = ctx.reference(scores, mask)
            got = ctx.expect_tensor(ctx.call(scores, mask), (B, *extra, Tq, Tk), dtype, what="masked_softmax")
            # The properties first: their messages name the positions (padded keys, fully padded rows)
            # where a hidden message cannot show values.
            expect_masked_weights(ctx, got, mask)
            ctx.expect_close(got, want, dtype, what="masked_softmax")


@check("3.2", "self-attention", H, Kind.NUMERIC, zh="Tq == Tk 时掩码作用在键上而不是查询上",
       en="with Tq == Tk the mask still applies to keys, not queries")
def _msm_square(ctx: Context) -> None:
    B, T = ctx.sizes(2, low=3)
    mask = mask_from_lengths(key_lengths(ctx, B, T), T)
    scores = ctx.randn(B, T, T)
    want = ctx.reference(scores, mask)
    got = ctx.expect_tensor(ctx.call(scores, mask), (B, T, T), torch.float64, what="masked_softmax")
    ctx.expect_close(got, want, torch.float64, what="masked_softmax (Tq == Tk)")


@check("3.2", "edge-cases", H, Kind.EDGE, zh="一个查询、一个键、分数在 1e4 附近", en="one query, one key, scores near 1e4")
def _msm_edges(ctx: Context) -> None:
    B, Tk = ctx.sizes(2, low=3)
    cases = [
        # one query over padded keys, one fully padded batch row
        (ctx.randn(B, 1, Tk), mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk), "Tq = 1"),
        # a single real key per row: weight exactly 1
        (ctx.randn(B, 2, 1), torch.zeros(B, 1, dtype=torch.bool), "Tk = 1"),
    ]
    for scores, mask, label in cases:
        want = ctx.reference(scores, mask)
        got = ctx.expect_tensor(ctx.call(scores, mask), tuple(scores.shape), torch.float64, what=label)
        ctx.expect_close(got, want, torch.float64, what=f"masked_softmax ({label})")
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    for dtype in DTYPES:
        scores = (1e4 + ctx.randn(B, 2, Tk)).to(dtype)
        want = ctx.reference(scores, mask)
        got = ctx.expect_tensor(ctx.call(scores, mask), (B, 2, Tk), dtype, what="masked_softmax")
        ctx.expect(bool(torch.isfinite(got).all()),
                   "分数在 1e4 附近时出现了 inf/NaN：先减去每行（未填充部分）的最大值",
                   "scores near 1e4 gave inf/NaN: subtract each row's max (over the real keys) first", diagnose=True,
                   safe=True)
        ctx.expect_close(got, want, dtype, what="masked_softmax (scores near 1e4)")


@check("3.2", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的 softmax", en="no library softmax")
def _msm_forbidden(ctx: Context) -> None:
    B, Tq, Tk = ctx.sizes(3)
    ctx.call(ctx.randn(B, Tq, Tk), mask_from_lengths(key_lengths(ctx, B, Tk), Tk))


# -- 3.3 masked_attention -------------------------------------------------------------
@check("3.3", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行、多个批维度）与参考答案一致",
       en="agrees with the reference on random inputs (fully padded rows, several batch dims)", weight=3)
def _mat_reference(ctx: Context) -> None:
    for extra in ((), (2,), (3, 2)):
        B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=3)
        mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
        for dtype in DTYPES:
            Q, K, V = (ctx.randn(B, *extra, Tq, Dk, dtype=dtype), ctx.randn(B, *extra, Tk, Dk, dtype=dtype),
                       ctx.randn(B, *extra, Tk, Dv, dtype=dtype))
            want_out, want_w = ctx.reference(Q, K, V, mask)
            out, weights = ctx.expect_tuple(ctx.call(Q, K, V, mask), 2)
            ctx.expect_close(ctx.expect_tensor(weights, (B, *extra, Tq, Tk), dtype, what="weights"), want_w, dtype,
                             what="weights")
            ctx.expect_close(ctx.expect_tensor(out, (B, *extra, Tq, Dv), dtype, what="out"), want_out, dtype,
                             what="out")


@check("3.3", "edge-cases", H, Kind.EDGE, zh="一个查询、一个键、大数值输入", en="one query, one key, large inputs")
def _mat_edges(ctx: Context) -> None:
    B, Tk, D = ctx.sizes(3, low=3)
    cases = [
        (ctx.randn(B, 1, D), ctx.randn(B, Tk, D), ctx.randn(B, Tk, D),
         mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk), "Tq = 1"),
        (ctx.randn(B, 2, D), ctx.randn(B, 1, D), ctx.randn(B, 1, D), torch.zeros(B, 1, dtype=torch.bool), "Tk = 1"),
        (ctx.randn(B, 2, D, scale=100.0), ctx.randn(B, Tk, D, scale=100.0), ctx.randn(B, Tk, D),
         mask_from_lengths(key_lengths(ctx, B, Tk), Tk), "scores in the thousands"),
    ]
    for Q, K, V, mask, label in cases:
        want_out, want_w = ctx.reference(Q, K, V, mask)
        out, weights = ctx.expect_tuple(ctx.call(Q, K, V, mask), 2)
        Tq, Tk_ = Q.shape[-2], K.shape[-2]
        ctx.expect_close(ctx.expect_tensor(weights, (B, Tq, Tk_), torch.float64, what="weights"), want_w,
                         torch.float64, what=f"weights ({label})")
        ctx.expect_close(ctx.expect_tensor(out, (B, Tq, V.shape[-1]), torch.float64, what="out"), want_out,
                         torch.float64, what=f"out ({label})")


@check("3.3", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的注意力或 softmax",
       en="no library attention or softmax")
def _mat_forbidden(ctx: Context) -> None:
    B, Tq, Tk, D = ctx.sizes(4)
    ctx.call(ctx.randn(B, Tq, D), ctx.randn(B, Tk, D), ctx.randn(B, Tk, D),
             mask_from_lengths(key_lengths(ctx, B, Tk), Tk))


# -- 3.4 masked_cross_entropy ---------------------------------------------------------
@check("3.4", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案一致", en="agrees with the reference on random inputs",
       weight=3)
def _mce_reference(ctx: Context) -> None:
    for ignore_index in (-100, -1, 0):
        B, T, C = ctx.sizes(3, low=3, high=11)
        targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), ignore_index)
        for dtype in DTYPES:
            logits = ctx.randn(B, T, C, dtype=dtype, scale=3.0)
            want = ctx.reference(logits, targets, ignore_index)
            got = expect_loss(ctx, ctx.call(logits, targets, ignore_index), dtype)
            ctx.expect_close(got, want, dtype, what=f"masked_cross_entropy (ignore_index={ignore_index})")


@check("3.4", "edge-cases", H, Kind.EDGE, zh="只有一个目标计入、T = 1、logits 在 1e4 附近、各位置 logits 量级相差很大",
       en="a single counted target, T = 1, logits near 1e4, logits of very different magnitudes per position")
def _mce_edges(ctx: Context) -> None:
    B, T, C = ctx.sizes(3, low=3)
    targets = torch.full((B, T), -100, dtype=torch.int64)
    targets[1, 2] = int(ctx.randint(0, C, 1))
    logits = ctx.randn(B, T, C)
    want = ctx.reference(logits, targets)
    ctx.expect_close(expect_loss(ctx, ctx.call(logits, targets), torch.float64), want, torch.float64,
                     what="masked_cross_entropy (one counted target)")
    logits, targets = ctx.randn(B, 1, C), ctx.randint(0, C, B, 1)
    want = ctx.reference(logits, targets)
    ctx.expect_close(expect_loss(ctx, ctx.call(logits, targets), torch.float64), want, torch.float64,
                     what="masked_cross_entropy (T = 1)")
    targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100)
    for dtype in DTYPES:
        logits = (1e4 + ctx.randn(B, T, C)).to(dtype)
        want = ctx.reference(logits, targets)
        got = expect_loss(ctx, ctx.call(logits, targets), dtype)
        ctx.expect(bool(torch.isfinite(got)),
                   f"logits 在 1e4 附近（{dtype}）时损失是 {got.item()}：先减去每行最大值再做 log-sum-exp",
                   f"with logits near 1e4 ({dtype}) the loss is {got.item()}: subtract each row's max first",
                   diagnose=True, hidden=Msg(f"logits 在 1e4 附近（{dtype}）时损失是 inf 或 NaN：先减去每行最大值再做 log-sum-exp",
                                             f"with logits near 1e4 ({dtype}) the loss is inf or NaN: subtract each "
                                             f"row's max first"))
        if dtype == torch.float64:
            # float32 cannot hold log-sum-exp (~1e4) minus the picked logit (~1e4) to 1e-4: finiteness only
            ctx.expect_close(got, want, dtype, what="masked_cross_entropy (logits near 1e4)")
    # Each position's logits spread over hundreds and the positions thousands apart: only a shift by the
    # max of each position's own row keeps every exp finite and non-zero (not the global max, the min, the mean).
    spread = ctx.randn(B, T, C, scale=400.0)
    offsets = (torch.arange(B * T, dtype=torch.float64).reshape(B, T, 1) % 3 - 1) * 3000.0
    logits = spread + offsets
    want = ctx.reference(logits, targets)
    got = expect_loss(ctx, ctx.call(logits, targets), torch.float64)
    ctx.expect_close(got, want, torch.float64, what="masked_cross_entropy (logits of very different magnitudes)")


@check("3.4", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的交叉熵或 NLL", en="no library cross entropy or NLL")
def _mce_forbidden(ctx: Context) -> None:
    B, T, C = ctx.sizes(3)
    ctx.call(ctx.randn(B, T, C), padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100))


# -- 3.5 causal_mask ------------------------------------------------------------------
@check("3.5", "reference-random", H, Kind.NUMERIC, zh="随机 T 与参考答案一致", en="agrees with the reference on random T",
       weight=2)
def _causal_reference(ctx: Context) -> None:
    for T in ctx.sizes(2, low=5, high=16):
        expect_exact(ctx, expect_causal(ctx, T), ctx.reference(T), f"causal_mask({T})")


# A constant all-False mask passes this too: its points need a correct output.
@check("3.5", "edge-one-position", H, Kind.EDGE, zh="T = 1：[[False]]", en="T = 1: [[False]]", needs_output=True)
def _causal_one(ctx: Context) -> None:
    # At T = 1 several mistakes give the same [[True]]: fail without naming one.
    expect_exact(ctx, expect_causal(ctx, 1, diagnose=False), ctx.reference(1), "causal_mask(1)", diagnose=False)


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量（没有对输入做原地操作）", "leaves the tensors it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个浮点输入，且与参考答案一致", "gradients reach every float input and agree with the reference's"


@check("3.1", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True)
def _pad_inputs(ctx: Context) -> None:
    B, T = ctx.sizes(2, low=2, high=9)
    lengths = ctx.randint(0, T + 1, B)
    expect_inputs_unchanged(ctx, lengths)
    expect_inputs_unchanged(ctx, lengths, T + 2)


@check("3.2", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True)
def _msm_inputs(ctx: Context) -> None:
    B, Tq, Tk = ctx.sizes(3, low=3, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    expect_inputs_unchanged(ctx, ctx.randn(B, 2, Tq, Tk, scale=4.0), mask)


@check("3.2", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN)
def _msm_gradients(ctx: Context) -> None:
    B, Tq, Tk = ctx.sizes(3, low=3, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    expect_input_gradients(ctx, ("scores",), (0,), ctx.randn(B, Tq, Tk, scale=2.0), mask)


@check("3.3", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True)
def _mattn_inputs(ctx: Context) -> None:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=2, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    expect_inputs_unchanged(ctx, ctx.randn(B, Tq, Dk), ctx.randn(B, Tk, Dk), ctx.randn(B, Tk, Dv), mask)


@check("3.3", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH + "（out 与 weights 两个输出）",
       en=GRAD_EN + " (through both outputs, out and weights)")
def _mattn_gradients(ctx: Context) -> None:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=2, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    expect_input_gradients(ctx, ("Q", "K", "V"), (0, 1, 2), ctx.randn(B, Tq, Dk), ctx.randn(B, Tk, Dk),
                     ctx.randn(B, Tk, Dv), mask, outputs=("out", "weights"))


def _ce_inputs(ctx: Context) -> tuple[torch.Tensor, torch.Tensor]:
    B, T, Cn = ctx.sizes(3, low=2, high=7)
    lengths = key_lengths(ctx, B, T)
    return ctx.randn(B, T, Cn, scale=2.0), padded_targets(ctx, B, T, Cn, lengths, -100)


@check("3.4", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True)
def _ce_inputs_unchanged(ctx: Context) -> None:
    expect_inputs_unchanged(ctx, *_ce_inputs(ctx))


@check("3.4", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN)
def _ce_gradients(ctx: Context) -> None:
    expect_input_gradients(ctx, ("logits",), (0,), *_ce_inputs(ctx))


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
# 3.1 padding_mask: positions (1, T) compared with lengths (B, 1)
near_answer("3.1", r"(\.unsqueeze\(0\)|\[None,:\]|\[None\])(>=|<)[A-Za-z_][\w.]*(\.unsqueeze\(1\)|\[:,None\])",
            r"[A-Za-z_][\w.]*(\.unsqueeze\(1\)|\[:,None\])(<=|>)[\w.()]*arange")
# 3.2 masked_softmax: a softmax of scores filled with -inf where masked
near_answer("3.2", r"(?<!masked_)softmax\([\w.()]*masked_fill\(.*-inf")
# 3.3 masked_attention: scaled scores handed to a masked softmax
near_answer("3.3", r"masked_softmax\(.*@.*(transpose\(-2,-1\)|\.mT)")
