"""Hidden checks of 04_multi_head_attention: randomized inputs against solutions/, edge cases, forbidden calls.

4.4 is a class: ``ctx.reference`` cannot call it, so its reference runs the same
"module" probe on the solution class with float64 copies of the inputs.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import torch

from autograder.catalog import (Audience, CheckFailed, Context, Kind, Msg, Status, as_float64, check, near_answer,
                                not_graded, probe_module)
from autograder.catalog.integrity import input_gradients, inputs_unchanged
from .checks import (EXTREME, NEGATIVE, SPREAD, attention_inputs, designed_case, expect_close_normwise,
                     expect_dead_rows, expect_finite, expect_gradients, expect_int, expect_mha, expect_module,
                     functional_args, heads_of, mha_state, module_case, module_request, module_result, score_case,
                     start_module)
from ..padding_masks.checks import DTYPES, expect_exact, key_lengths, live, mask_from_lengths

H = Audience.HIDDEN

#: The intro's conventions (约定), which the shared hidden checks enforce.
UNCHANGED_RULE = "不要修改传入的张量"
GRADIENT_RULE = "梯度要能流回每个输入"


# -- 4.1 split_heads / 4.2 merge_heads ------------------------------------------------
def _split_cases(ctx: Context) -> list[tuple[int, int, int, int]]:
    """(B, T, H, d): random, one head, d = 1 (H = E), one position."""
    B, T, Hn, d = ctx.sizes(4, low=2, high=9)
    return [(B, T, Hn, d), (B, T, 1, d), (B, T, Hn, 1), (B, 1, Hn, d)]


@check("4.1", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案完全一致", en="agrees exactly with the reference",
       weight=2, same_as="matches-closed-form")
def _split_reference(ctx: Context) -> Iterator[None]:
    B, T, Hn, d = ctx.sizes(4, low=2, high=9)
    # both in flight before either is compared (see Context.start)
    started = [(dtype, x, ctx.start(x, Hn)) for dtype in DTYPES for x in [ctx.randn(B, T, Hn * d, dtype=dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, pending in started:
        want = ctx.reference(x, Hn)
        got = ctx.expect_tensor(pending.value(), (B, Hn, T, d), dtype, what="split_heads")
        expect_exact(ctx, got.double(), want, f"split_heads(x {tuple(x.shape)}, {Hn})")


#: ctx.case's names of _split_cases()[1:], in that order.
EDGE_NAMES = (("一个头", "one head"), ("每个头宽 d = 1", "heads of width d = 1"), ("只有一个位置 T = 1", "one position, T = 1"))


@check("4.1", "edge-cases", H, Kind.EDGE, zh="一个头、d = 1、T = 1", en="one head, d = 1, T = 1",
       same_as="matches-closed-form")
def _split_edges(ctx: Context) -> Iterator[None]:
    started = [(sizes, names, x, ctx.start(x, sizes[2])) for sizes, names in zip(_split_cases(ctx)[1:], EDGE_NAMES)
               for x in [ctx.randn(sizes[0], sizes[1], sizes[2] * sizes[3])]]
    yield      # the next check begins here, while the worker runs these calls
    for (B, T, Hn, d), (zh, en), x, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(x, Hn)
            got = ctx.expect_tensor(pending.value(), (B, Hn, T, d), torch.float64, what=f"split_heads(H={Hn}, T={T})")
            expect_exact(ctx, got, want, f"split_heads(x {tuple(x.shape)}, {Hn})")


def _says(text: str, number: int) -> bool:
    """``number`` written in ``text`` as a number of its own (13 is not in 130 or 213)."""
    return re.search(rf"(?<!\d){number}(?!\d)", text) is not None


# A function that always raises ValueError with the two numbers passes this: its points need a correct output.
@check("4.1", "value-error-values", H, Kind.PROPERTY, zh="E 不能被 num_heads 整除时，ValueError 的信息里写明 E 和 num_heads 的值",
       en="when E is not divisible by num_heads, the ValueError's message gives the values of E and num_heads",
       needs_output=True, statement="信息里写明 `E` 和 `num_heads` 的值")
def _split_error_values(ctx: Context) -> None:
    Hn, d = ctx.sizes(2, low=3, high=7)
    E = Hn * d + int(ctx.randint(1, Hn, 1))             # not a multiple of Hn; E > 9 > Hn, no number inside the other
    # The failing call's (B, T) = (2, 1): neither is E or num_heads, so a message that shows x.shape must
    # still name num_heads.
    # First a call that may succeed: only an answer right there, whose ValueError says no values, is the known
    # mistake error-without-values (an error has no output to compare: this check names it itself).
    x = ctx.randn(2, 3, Hn * d)         # T > 1, H > 1, d > 1: every known mistake of 4.1 is wrong here
    try:
        ok = ctx.call(x, Hn)
        right = ok.kind == "tensor" and torch.equal(ok.tensor(), heads_of(x, Hn))
    except CheckFailed as failed:
        if failed.status not in (Status.FAILED, Status.ERROR):
            raise       # not attempted, timed out, crashed: as any other check would say
        right = False   # wrong there too: other checks say so, this one reads the message only
    reply = ctx.call_raw(ctx.randn(2, 1, E), Hn)
    if reply.status != "error" or reply.error_type != "ValueError":
        return          # no ValueError at all: value-error says so; this check reads the message of one
    if not (_says(reply.error, E) and _says(reply.error, Hn)):
        raise CheckFailed(Msg(f"split_heads(x, {Hn}) 在 E = {E} 时抛出的 ValueError 应当写明 E = {E} 和 num_heads = {Hn}，"
                              f"实际的信息是：{reply.error}",
                              f"the ValueError of split_heads(x, {Hn}) with E = {E} should give E = {E} and "
                              f"num_heads = {Hn}, its message is: {reply.error}"),
                          mistake="error-without-values" if right else None,
                          hidden=Msg("E 不能被 num_heads 整除时，ValueError 的信息里要写明 E 和 num_heads 这两个值",
                                     "when E is not divisible by num_heads, the ValueError's message must give both "
                                     "values, E and num_heads"))


@check("4.2", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案完全一致", en="agrees exactly with the reference",
       weight=2, same_as="matches-closed-form")
def _merge_reference(ctx: Context) -> Iterator[None]:
    B, Hn, T, d = ctx.sizes(4, low=2, high=9)
    # both in flight before either is compared (see Context.start)
    started = [(dtype, x, ctx.start(x)) for dtype in DTYPES for x in [ctx.randn(B, Hn, T, d, dtype=dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, pending in started:
        want = ctx.reference(x)
        got = ctx.expect_tensor(pending.value(), (B, T, Hn * d), dtype, what="merge_heads")
        expect_exact(ctx, got.double(), want, f"merge_heads(x {tuple(x.shape)})")


@check("4.2", "edge-cases", H, Kind.EDGE, zh="一个头、d = 1、T = 1", en="one head, d = 1, T = 1",
       same_as="matches-closed-form")
def _merge_edges(ctx: Context) -> Iterator[None]:
    started = [(sizes, names, x, ctx.start(x)) for sizes, names in zip(_split_cases(ctx)[1:], EDGE_NAMES)
               for x in [ctx.randn(sizes[0], sizes[2], sizes[1], sizes[3])]]
    yield      # the next check begins here, while the worker runs these calls
    for (B, T, Hn, d), (zh, en), x, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(x)
            expect_exact(ctx, ctx.expect_tensor(pending.value(), (B, T, Hn * d), torch.float64, what="merge_heads"), want,
                         f"merge_heads(x {tuple(x.shape)})")


# -- 4.3 multi_head_attention ---------------------------------------------------------
def _mha_start(ctx: Context, B: int, Tq: int, Tk: int, Hn: int, d: int, dtype: torch.dtype,
               *, empty_row: bool, with_mask: bool = True, scale: float = 1.0, self_attention: bool = False) -> tuple:
    """One case's inputs, drawn, and its call, begun: :func:`_mha_finish` compares it. A check begins all
    its cases before it compares the first (the worker runs the next while this side computes the first's
    expected value; the inputs are drawn in the same order either way)."""
    E = Hn * d
    state = mha_state(ctx, E, dtype)
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, dtype, scale=scale)
    if self_attention:                                   # one sequence x as query, key and value (Tq = Tk)
        k = v = q
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=empty_row), Tk) if with_mask else None
    args = (q, k, v, Hn, *functional_args(state))
    return args, state, mask, empty_row, ctx.start(*args, key_padding_mask=mask)


def _mha_finish(ctx: Context, started: tuple) -> None:
    args, state, mask, empty_row, pending = started
    (q, k, _v, Hn), dtype = args[:4], args[0].dtype
    (B, Tq, E), Tk = q.shape, k.shape[1]
    want_out, want_w = ctx.reference(*args, key_padding_mask=mask)
    out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, Hn, dtype)
    if mask is not None and empty_row:
        # First: its messages name the rows (fully padded) where a hidden message shows no values.
        expect_dead_rows(ctx, out, weights, mask, state["out_proj.bias"])
    ctx.expect_close(weights, want_w, dtype, what=f"weights (H={Hn}, Tq={Tq}, Tk={Tk})")
    ctx.expect_close(out, want_out, dtype, what=f"out (H={Hn}, Tq={Tq}, Tk={Tk})")


@check("4.3", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行）与参考答案一致",
       en="agrees with the reference on random inputs (fully padded rows included)", weight=3,
       same_as="matches-torch", statement="前向的权重全为 0，于是第 6 步得到零向量，输出恰好等于 out_proj_bias")
def _mha_reference(ctx: Context) -> Iterator[None]:
    started = []
    for dtype in DTYPES:
        B, Tq, Tk, Hn, d = ctx.sizes(5, low=3, high=7)
        started.append((dtype, _mha_start(ctx, B, Tq, Tk, Hn, d, dtype, empty_row=True)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, case in started:
        with ctx.case(zh=f"{str(dtype)[6:]}，含全填充的那一批", en=f"{str(dtype)[6:]}, a fully padded batch row included"):
            _mha_finish(ctx, case)


@check("4.3", "edge-cases", H, Kind.EDGE, zh="自注意力（带掩码）、一个头、T = 1", en="self-attention (with a mask), one head, T = 1",
       same_as="matches-torch")
def _mha_edges(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Hn, d = ctx.sizes(5, low=2, high=6)
    f64 = torch.float64
    # first: a mask broadcast along the queries (B, 1, Tk, 1) only runs, and is named, when Tq = Tk
    cases = [(("自注意力，带填充掩码", "self-attention with a padding mask"),
              _mha_start(ctx, B, Tk, Tk, Hn, d, f64, empty_row=False, self_attention=True)),
             (("一个头", "one head"), _mha_start(ctx, B, Tq, Tk, 1, d, f64, empty_row=False)),
             (("一个查询、一个键，不带掩码", "one query, one key, no mask"),
              _mha_start(ctx, B, 1, 1, Hn, d, f64, empty_row=False, with_mask=False)),
             (("一个查询", "one query"), _mha_start(ctx, B, 1, Tk, Hn, d, f64, empty_row=False))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in cases:
        with ctx.case(zh=zh, en=en):
            _mha_finish(ctx, case)


def _designed_mha_start(ctx: Context, kind: str, dtype: torch.dtype) -> tuple:
    """Designed scores (checks.designed_case), a fully padded batch row included: the call begun
    (:func:`_designed_mha_finish` compares it with the reference)."""
    (q, k, v), Hn, state, mask = designed_case(ctx, kind, dtype, empty_row=True)
    args = (q, k, v, Hn, *functional_args(state))
    return args, state, mask, dtype, ctx.start(*args, key_padding_mask=mask)


def _designed_mha_finish(ctx: Context, started: tuple) -> None:
    args, state, mask, dtype, pending = started
    q, k, Hn = args[0], args[1], args[3]
    (B, Tq, E), Tk = q.shape, k.shape[1]
    want_out, want_w = ctx.reference(*args, key_padding_mask=mask)
    out, weights = expect_mha(ctx, pending.value(), B, Tq, Tk, E, Hn, dtype)
    expect_dead_rows(ctx, out, weights, mask, state["out_proj.bias"])
    expect_finite(ctx, out, weights)
    ctx.expect_close(weights, want_w, dtype, what="weights")
    expect_close_normwise(ctx, out, want_out, dtype, what="out")


DEAD_ROW = ("，含全填充的那一批", ", a fully padded batch row included")
LARGE_STATEMENT = "同一行的分数相差几千（正负都有）时也不能出现 inf 或 NaN"
NEGATIVE_STATEMENT = "填充键的权重恰好为 0，不论真实的分数有多小"


@check("4.3", "edge-large-scores", H, Kind.EDGE,
       zh="分数相差几千（正负都有）、分数在 1e4 量级（带填充掩码、含全填充行）：没有 inf/NaN，与参考答案一致",
       en="scores thousands apart (both signs), scores of order 1e4 (with a padding mask, fully padded rows "
          "included): no inf/NaN, agrees with the reference", statement=LARGE_STATEMENT)
def _mha_large(ctx: Context) -> Iterator[None]:
    # First the designed rows, on which a softmax shifted by the mean and one shifted by the minimum differ
    designed = [(dtype, _designed_mha_start(ctx, SPREAD, dtype)) for dtype in (torch.float64, torch.float32)]
    B, Tq, Tk, Hn, d = ctx.sizes(5, low=3, high=7)
    # inputs of 100 through weights of 1/sqrt(E): scores q.k/sqrt(d) of order 1e4, far past exp's range
    masked = _mha_start(ctx, B, Tq, Tk, Hn, d, torch.float64, empty_row=True, scale=100.0)
    unmasked = _mha_start(ctx, B, Tq, Tk, Hn, d, torch.float64, empty_row=False, with_mask=False, scale=100.0)
    E = Hn * d
    state = mha_state(ctx, E, torch.float32)
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, torch.float32, scale=100.0)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    single = ctx.start(q, k, v, Hn, *functional_args(state), key_padding_mask=mask)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, case in designed:
        with ctx.case(**score_case(SPREAD, dtype, DEAD_ROW)):
            _designed_mha_finish(ctx, case)
    with ctx.case(zh="随机输入，分数在 1e4 量级（float64，带掩码）", en="random inputs, scores of order 1e4 (float64, masked)"):
        _mha_finish(ctx, masked)
    with ctx.case(zh="随机输入，分数在 1e4 量级（float64，不带掩码）", en="random inputs, scores of order 1e4 (float64, no mask)"):
        _mha_finish(ctx, unmasked)
    # float32: random scores of 1e4 carry rounding of 1e-3, so only finiteness and the rows' sums are checked
    with ctx.case(zh="随机输入，分数在 1e4 量级（float32）", en="random inputs, scores of order 1e4 (float32)"):
        out, weights = expect_mha(ctx, single.value(), B, Tq, Tk, E, Hn, torch.float32)
        expect_finite(ctx, out, weights)
        want_sums = live(mask).to(torch.float64)[:, None, None].expand(B, Hn, Tq)     # 1 per live row, 0 if all padded
        ctx.expect_close(weights.double().sum(-1), want_sums, torch.float32,
                         what=Msg("weights.sum(-1)（分数很大）", "weights.sum(-1) (large scores)"))


@check("4.3", "edge-very-negative-scores", H, Kind.EDGE,
       zh="真实的分数本身非常负（-2e4 附近、-1e9 附近，含全填充行）：填充键的权重仍恰好为 0，与参考答案一致",
       en="real scores that are themselves very negative (near -2e4, near -1e9; fully padded rows included): "
          "padded keys still get exactly 0, agrees with the reference", statement=NEGATIVE_STATEMENT)
def _mha_negative(ctx: Context) -> Iterator[None]:
    started = [(kind, dtype, _designed_mha_start(ctx, kind, dtype))
               for kind, dtype in ((NEGATIVE, torch.float32), (NEGATIVE, torch.float64), (EXTREME, torch.float64))]
    yield      # the next check begins here, while the worker runs these calls
    for kind, dtype, case in started:
        with ctx.case(**score_case(kind, dtype, DEAD_ROW)):
            _designed_mha_finish(ctx, case)


FORBIDDEN_STATEMENT = "禁止调用（评分器运行本题时一旦检测到，本题记 0 分）"


@check("4.3", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的多头注意力", en="no library multi-head attention",
       statement=FORBIDDEN_STATEMENT)
def _mha_forbidden(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Hn, d = ctx.sizes(5, low=2, high=6)
    E = Hn * d
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, torch.float64)
    pending = ctx.start(q, k, v, Hn, *functional_args(mha_state(ctx, E)))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 4.4 MultiHeadAttention -----------------------------------------------------------
def reference_probe(ctx: Context, args: tuple[Any, ...], bias: bool) -> dict[str, Any]:
    """The solution class through the same "module" probe, on float64 CPU copies."""
    if ctx.reference_fn is None:
        raise RuntimeError(f"check {ctx.exercise}/{ctx.check} has no reference")
    return module_result(probe_module(ctx.reference_fn, *as_float64(module_request(args, bias))))


def _module_start(ctx: Context, dtype: torch.dtype, *, bias: bool | None = True, empty_row: bool = False,
                  sizes: tuple[int, ...] | None = None) -> tuple:
    """One case's inputs, drawn, and its probe call, begun (:func:`_module_finish` compares it with the
    reference): a check begins all its cases first."""
    args, shape = module_case(ctx, dtype, bias=bias, empty_row=empty_row, sizes=sizes)
    return dtype, bias, args, shape, start_module(ctx, args, bias=bias)


def _module_finish(ctx: Context, started: tuple) -> None:
    dtype, bias, args, (B, Tq, Tk, Hn), pending = started
    want = ctx.expected(reference_probe, ctx, args, bias)
    got = expect_module(ctx, pending.value(), args[2], B, Tq, Tk, Hn, dtype)
    ctx.expect_close(got["weights"], want["weights"], dtype, what="weights")
    ctx.expect_close(got["out"], want["out"], dtype, what="out")
    expect_gradients(ctx, got, want, dtype)


@check("4.4", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行）下输出和梯度与参考答案一致",
       en="outputs and gradients agree with the reference on random inputs (fully padded rows included)", weight=3,
       same_as="gradients-match-torch", statement="要求的是有限的梯度")
def _module_reference(ctx: Context) -> Iterator[None]:
    cases = [((f"{str(dtype)[6:]}，含全填充的那一批", f"{str(dtype)[6:]}, a fully padded batch row included"),
              _module_start(ctx, dtype, empty_row=True, sizes=tuple(ctx.sizes(5, low=3, high=7)))) for dtype in DTYPES]
    cases.append((("bias=False，含全填充的那一批", "bias=False, a fully padded batch row included"),
                  _module_start(ctx, torch.float64, bias=False, empty_row=True, sizes=tuple(ctx.sizes(5, low=3, high=7)))))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in cases:
        with ctx.case(zh=zh, en=en):
            _module_finish(ctx, case)


@check("4.4", "edge-cases", H, Kind.EDGE, zh="一个头、T = 1；不传 bias 时默认带偏置（与 nn.MultiheadAttention 相同）",
       en="one head, T = 1; without a bias argument the module has biases (as nn.MultiheadAttention)",
       same_as="matches-torch", statement="__init__(embed_dim, num_heads, bias=True)")
def _module_edges(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Hn, d = ctx.sizes(5, low=2, high=6)
    cases = [(("一个头", "one head"), _module_start(ctx, torch.float64, sizes=(B, Tq, Tk, 1, d))),
             (("一个查询、一个键", "one query, one key"), _module_start(ctx, torch.float64, sizes=(B, 1, 1, Hn, d))),
             (("不传 bias（默认带偏置）", "no bias argument (biases by default)"),
              _module_start(ctx, torch.float64, bias=None, sizes=(B, Tq, Tk, Hn, d)))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in cases:
        with ctx.case(zh=zh, en=en):
            _module_finish(ctx, case)


def _unmasked(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """:func:`checks.module_request` without the key padding mask: forward(query, key, value), its default None."""
    E, Hn, state, q, k, v, _mask, grad_out = args
    return ((E, Hn), {}, state, (q, k, v), {}, (grad_out, None), (0,))


@check("4.4", "no-mask", H, Kind.NUMERIC, zh="不传 key_padding_mask（默认 None）时，输出和梯度与参考答案一致",
       en="without key_padding_mask (its default None), outputs and gradients agree with the reference",
       same_as="matches-torch", statement="`forward(query, key, value, key_padding_mask=None)`")
def _module_no_mask(ctx: Context) -> Iterator[None]:
    args, (B, Tq, Tk, Hn) = module_case(ctx, torch.float64)
    pending = ctx.start(*_unmasked(args), probe="module")
    yield      # the next check begins here, while the worker runs this call
    if ctx.reference_fn is None:
        raise RuntimeError(f"check {ctx.exercise}/{ctx.check} has no reference")
    want = ctx.expected(lambda: module_result(probe_module(ctx.reference_fn, *as_float64(_unmasked(args)))))
    got = expect_module(ctx, pending.value(), args[2], B, Tq, Tk, Hn, torch.float64)
    ctx.expect_close(got["weights"], want["weights"], torch.float64, what="weights")
    ctx.expect_close(got["out"], want["out"], torch.float64, what="out")
    expect_gradients(ctx, got, want, torch.float64)


@check("4.4", "edge-extreme-scores", H, Kind.EDGE,
       zh="分数相差几千（正负都有）或真实分数本身非常负（含全填充行）：输出与参考答案一致，梯度有限",
       en="scores thousands apart (both signs) or real scores that are themselves very negative (fully padded "
          "rows included): the outputs agree with the reference, the gradients are finite",
       statement="数值稳定和填充键的要求与 4.3 相同")
def _module_extreme(ctx: Context) -> Iterator[None]:
    # Outputs compared, gradients only finite: through scores this large they carry rounding of order
    # eps * |score| * |query| (the key bias's gradient, exactly 0, comes out near 1e-6 in float64 from any
    # sound softmax), which the ordinary inputs of reference-random compare instead.
    started = []
    for kind, dtype in ((SPREAD, torch.float64), (SPREAD, torch.float32), (NEGATIVE, torch.float64),
                        (NEGATIVE, torch.float32)):
        (q, k, v), Hn, state, mask = designed_case(ctx, kind, dtype, empty_row=True)
        (B, Tq, E), Tk = q.shape, k.shape[1]
        args = (E, Hn, state, q, k, v, mask, ctx.randn(B, Tq, E, dtype=dtype))
        started.append((kind, dtype, args, start_module(ctx, args)))
    yield      # the next check begins here, while the worker runs these calls
    for kind, dtype, args, pending in started:
        _e, Hn, state, q, k, _v, mask, _g = args
        (B, Tq, E), Tk = q.shape, k.shape[1]
        with ctx.case(**score_case(kind, dtype, DEAD_ROW)):
            want = ctx.expected(reference_probe, ctx, args, True)
            got = expect_module(ctx, pending.value(), state, B, Tq, Tk, Hn, dtype)
            expect_dead_rows(ctx, got["out"], got["weights"], mask, state["out_proj.bias"])
            expect_finite(ctx, got["out"], got["weights"])
            ctx.expect_close(got["weights"], want["weights"], dtype, what="weights")
            expect_close_normwise(ctx, got["out"], want["out"], dtype, what="out")
            for name, g in [*got["grads"].items(), ("query", got["grad_query"])]:
                ctx.expect(g is None or bool(torch.isfinite(g).all()),
                           f"分数很大时 {name} 的梯度里出现了 inf 或 NaN", f"inf or NaN in the gradient of {name} "
                           f"when the scores are large", diagnose=True, safe=True)     # the kit's parameter names


# A class whose __init__ always raises ValueError passes this: its points need a correct output.
@check("4.4", "value-error", H, Kind.PROPERTY, zh="embed_dim 不能被 num_heads 整除时 __init__ 抛出 ValueError",
       en="__init__ raises ValueError when embed_dim is not divisible by num_heads", needs_output=True,
       statement="embed_dim 不能被 num_heads 整除时抛出 ValueError")
def _module_error(ctx: Context) -> None:
    Hn, d = ctx.sizes(2, low=2, high=6)
    for E in (Hn * d + 1, Hn * d - 1):
        reply = ctx.call_raw(E, Hn)
        ctx.expect(reply.status == "error" and reply.error_type == "ValueError",
                   f"MultiHeadAttention({E}, {Hn}) 应当抛出 ValueError（{E} 不能被 {Hn} 整除），"
                   f"实际{'抛出了 ' + reply.error_type if reply.status == 'error' else '正常返回了'}",
                   f"MultiHeadAttention({E}, {Hn}) should raise ValueError ({E} is not divisible by {Hn}), "
                   f"{'got ' + reply.error_type if reply.status == 'error' else 'it returned normally'}",
                   hidden=Msg("embed_dim 不能被 num_heads 整除时，__init__ 应当抛出 ValueError",
                              "__init__ should raise ValueError when embed_dim is not divisible by num_heads"))


@check("4.4", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的多头注意力", en="no library multi-head attention",
       statement=FORBIDDEN_STATEMENT)
def _module_forbidden(ctx: Context) -> Iterator[None]:
    args, _ = module_case(ctx, torch.float64)
    pending = start_module(ctx, args)
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 4.5 attention_memory -------------------------------------------------------------
@check("4.5", "reference-random", H, Kind.NUMERIC, zh="随机参数与参考答案一致（含很长的序列）",
       en="agrees with the reference on random arguments (very long sequences included)", weight=2,
       same_as="matches-torch")
def _memory_reference(ctx: Context) -> Iterator[None]:
    b, h, t = ctx.sizes(3, low=2, high=64)
    started = [(nbytes, ctx.start(b, h, t, nbytes)) for nbytes in (1, 2, 8)]
    long = ctx.start(b, h, 100_000)
    yield      # the next check begins here, while the worker runs these calls
    # Labels name the case, not the sizes: the sizes are this check's hidden inputs.
    for nbytes, pending in started:
        expect_int(ctx, pending.value(), ctx.reference(b, h, t, nbytes),
                   Msg(f"attention_memory(b, h, t, bytes_per_element={nbytes})，b、h、t 随机",
                       f"attention_memory(random b, h, t, bytes_per_element={nbytes})"))
    # 100k tokens: past 2**32, where a fixed-width integer would wrap
    expect_int(ctx, long.value(), ctx.reference(b, h, 100_000),
               Msg("attention_memory(b, h, 100000)，b、h 随机，序列有 10 万个词元",
                   "attention_memory(random b, h, a 100k-token sequence)"))


@check("4.5", "edge-cases", H, Kind.EDGE, zh="一个词元、一个头、批量 1", en="one token, one head, batch 1",
       same_as="matches-torch")
def _memory_edges(ctx: Context) -> Iterator[None]:
    ones, two_bytes = ctx.start(1, 1, 1), ctx.start(3, 1, 1, 2)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case(zh="批量、头数、词元都是 1", en="batch, heads and tokens all 1"):
        expect_int(ctx, ones.value(), ctx.reference(1, 1, 1), "attention_memory(1, 1, 1)")
    with ctx.case(zh="一个头、一个词元，2 字节", en="one head, one token, 2 bytes"):
        expect_int(ctx, two_bytes.value(), ctx.reference(3, 1, 1, 2), "attention_memory(3, 1, 1, 2)")


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量（没有对输入做原地操作）", "leaves the tensors it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个输入，且与参考答案一致", "gradients reach every input and agree with the reference's"


@check("4.1", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=UNCHANGED_RULE)
def _split_inputs(ctx: Context) -> Iterator[None]:
    B, T, Hn, d = ctx.sizes(4, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(B, T, Hn * d), Hn)


@check("4.1", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _split_gradients(ctx: Context) -> Iterator[None]:
    B, T, Hn, d = ctx.sizes(4, low=2, high=6)
    yield from input_gradients(ctx, ("x",), (0,), ctx.randn(B, T, Hn * d), Hn)


@check("4.2", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=UNCHANGED_RULE)
def _merge_inputs(ctx: Context) -> Iterator[None]:
    B, Hn, T, d = ctx.sizes(4, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(B, Hn, T, d))


@check("4.2", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _merge_gradients(ctx: Context) -> Iterator[None]:
    B, Hn, T, d = ctx.sizes(4, low=2, high=6)
    yield from input_gradients(ctx, ("x",), (0,), ctx.randn(B, Hn, T, d))


def _mha_args(ctx: Context) -> tuple[tuple[Any, ...], torch.Tensor]:
    B, Tq, Tk, Hn, d = ctx.sizes(5, low=2, high=6)
    E = Hn * d
    q, k, v = attention_inputs(ctx, B, Tq, Tk, E, torch.float64)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    return (q, k, v, Hn, *functional_args(mha_state(ctx, E))), mask


@check("4.3", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=UNCHANGED_RULE)
def _mha_inputs(ctx: Context) -> Iterator[None]:
    args, mask = _mha_args(ctx)
    yield from inputs_unchanged(ctx, *args, key_padding_mask=mask)


@check("4.3", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH + "（out 与 weights 两个输出）",
       en=GRAD_EN + " (through both outputs, out and weights)", statement=GRADIENT_RULE)
def _mha_gradients(ctx: Context) -> Iterator[None]:
    args, mask = _mha_args(ctx)
    yield from input_gradients(ctx, ("query", "key", "value", "in_proj_weight", "in_proj_bias", "out_proj_weight",
                           "out_proj_bias"), (0, 1, 2, 4, 5, 6, 7), *args, key_padding_mask=mask,
                     outputs=("out", "weights"))


# -- requirement sentences no check enforces, on purpose (autograder.authoring.requirements) ----------------
not_graded("4.4", "初始化不计分", why="the statement says the initialization is not graded (the checks load "
           "torch-named weights before every call); the rest of the sentence only recommends torch's scheme")
not_graded("4.4", "同一个随机种子下的初始参数就与 `nn.MultiheadAttention` 完全相同",
           why="explains how to reproduce torch's initial parameters, which the sentence before says is not graded")


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
# 4.1 split_heads / merge_heads with variable sizes
near_answer("4.1", r"\.(reshape|view)\([A-Za-z_]\w*,[A-Za-z_]\w*,[A-Za-z_][\w.]*,[^()]*\)\.(transpose\(1,2\)|permute\(0,2,1,3\))")
near_answer("4.2", r"\.(transpose\(1,2\)|permute\(0,2,1,3\))(\.contiguous\(\))?\.(reshape|view)\([A-Za-z_]")
