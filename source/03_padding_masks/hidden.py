"""Hidden checks of 03_padding_masks: randomized inputs against solutions/, edge cases, forbidden calls.

Labels and messages name a case by its sizes and kind, never by an input's or an
output's value (see ``checks.hidden_message``). Each check names the requirement it
enforces: ``statement=`` words of what the student reads, ``same_as=`` the public check
that tests the same property on other inputs.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

from autograder.catalog import Audience, CheckFailed, Context, Kind, Msg, Pending, check, near_answer, not_graded
from autograder.catalog.integrity import input_gradients, inputs_unchanged, together
from .checks import (DTYPES, FINITE_ROWS, NEAR_1E4, NEGATIVE_CALLS, expect_bool, expect_causal_value, expect_exact,
                     expect_loss, expect_masked_weights, key_lengths, key_mask_like, live, mask_from_lengths,
                     negative_case, negative_rows, padded_targets)

H = Audience.HIDDEN

#: What the student reads, quoted (the notebook's statement cells and conventions).
MASK_RULE = "第 b 行第 t 列为 True 当且仅当 t >= lengths[b]"
STABLE_3_2 = "数值稳定：分数上千也不能溢出"
NO_NAN_3_2 = "任何位置都不能出现 NaN 或 inf"
STABLE_3_3 = "Q、K 的数值很大、分数上千时也不能溢出"
STABLE_3_4 = "logits 上千也不能溢出"
FORBIDDEN_RULE = "禁止调用（评分器运行本题时一旦检测到，本题记 0 分）"
FORBIDDEN_3_3 = "和 2.4 一样，不能调用 F.scaled_dot_product_attention、nn.MultiheadAttention"
INPUTS_RULE = "不要修改传入的张量"
GRADIENT_RULE = "梯度要能从输出传回每个浮点输入"


def expect_close_live_rows_first(ctx: Context, got: torch.Tensor, want: torch.Tensor, mask: torch.Tensor,
                                 dtype: torch.dtype, what: str) -> None:
    """``got`` against the reference: first the batch rows with a real key (diagnosed), then all of it
    (not diagnosed: with ordinary scores every finite fill in place of -inf gives a fully padded row the
    same uniform weights, so only a check with very negative real scores can name which fill it was)."""
    alive = live(mask)
    ctx.expect_close(got[alive], want[alive], dtype, what=what)
    ctx.expect_close(got, want, dtype, what=what, diagnose=False)


# -- 3.1 padding_mask ---------------------------------------------------------------
@check("3.1", "reference-random", H, Kind.NUMERIC, zh="随机长度与参考答案一致", en="agrees with the reference on random lengths",
       weight=2, same_as="matches-closed-form")
def _pad_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for _ in range(3):
        B, T = ctx.sizes(2, low=2, high=12)
        lengths = ctx.randint(0, T + 1, B)
        started.append((B, T, lengths, ctx.start(lengths), ctx.start(lengths, T + 4)))
    yield      # the next check begins here, while the worker runs these calls
    for B, T, lengths, pending, longer in started:
        want = ctx.reference(lengths)
        expect_exact(ctx, expect_bool(ctx, pending.value(), tuple(want.shape), what="padding_mask(lengths)"), want,
                     "padding_mask(lengths)")
        want = ctx.reference(lengths, T + 4)
        expect_exact(ctx, expect_bool(ctx, longer.value(), (B, T + 4), what=f"padding_mask(lengths, {T + 4})"),
                     want, f"padding_mask(lengths, {T + 4})")


@check("3.1", "edge-cases", H, Kind.EDGE, zh="T = 1、长度为 0 的行、max_len 等于最大长度、只有一句",
       en="T = 1, a row of length 0, max_len equal to the longest length, a batch of one sequence",
       statement=MASK_RULE)
def _pad_edges(ctx: Context) -> Iterator[None]:
    B = ctx.sizes(1, low=3)[0]
    ones = ctx.start(torch.ones(B, dtype=torch.int64))
    lengths = torch.tensor([3, 0, 1], dtype=torch.int64)
    with_zero = ctx.start(lengths, max_len=3)
    T = ctx.sizes(1, low=2, high=9)[0]
    single = ctx.start(torch.tensor([T], dtype=torch.int64))
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case("每句长度都是 1", "every length 1"):
        # Several mistakes give the same all-True mask here (t >= length - 1, t < length): fail without naming one.
        what = Msg("padding_mask（每句长度都是 1）", "padding_mask(all lengths 1)")
        expect_exact(ctx, expect_bool(ctx, ones.value(), (B, 1), what=what), torch.zeros(B, 1, dtype=torch.bool),
                     what, diagnose=False)
    with ctx.case("有长度为 0 的句子，max_len 等于最大长度", "a row of length 0, max_len the longest length"):
        what = Msg("padding_mask（有长度为 0 的句子，max_len 等于最大长度）",
                   "padding_mask(lengths with a 0, max_len = the longest length)")
        expect_exact(ctx, expect_bool(ctx, with_zero.value(), (3, 3), what=what), ctx.reference(lengths, 3),
                     what)
    with ctx.case("只有一句，不给 max_len", "a batch of one sequence, max_len left out"):
        what = Msg("padding_mask（只有一句）", "padding_mask(a batch of one sequence)")
        expect_exact(ctx, expect_bool(ctx, single.value(), (1, T), what=what), torch.zeros(1, T, dtype=torch.bool),
                     what)


# -- 3.2 masked_softmax ---------------------------------------------------------------
@check("3.2", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行、多个批量维）与参考答案一致",
       en="agrees with the reference on random inputs (fully padded rows, several batch dims)", weight=3,
       same_as="matches-torch", statement="中间可以有任意多维（比如多头的 H）")
def _msm_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for extra in ((), (2,), (3, 2)):
        B, Tq, Tk = ctx.sizes(3, low=3)
        mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
        for dtype in DTYPES:
            scores = ctx.randn(B, *extra, Tq, Tk, dtype=dtype, scale=4.0)
            started.append(((B, *extra, Tq, Tk), dtype, scores, mask, ctx.start(scores, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for shape, dtype, scores, mask, pending in started:
        want = ctx.reference(scores, mask)
        got = ctx.expect_tensor(pending.value(), shape, dtype, what="masked_softmax")
        # The properties first: their messages name the positions (padded keys, fully padded rows)
        # where a hidden message cannot show values.
        expect_masked_weights(ctx, got, mask, diagnose_dead=False)
        ctx.expect_close(got, want, dtype, what="masked_softmax")


@check("3.2", "self-attention", H, Kind.NUMERIC, zh="Tq == Tk 时掩码作用在键上而不是查询上",
       en="with Tq == Tk the mask still applies to keys, not queries",
       statement="填充键的权重恰好为 0；至少有一个有效键的行，和为 1")
def _msm_square(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=3)
    mask = mask_from_lengths(key_lengths(ctx, B, T), T)
    scores = ctx.randn(B, T, T)
    pending = ctx.start(scores, mask)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.reference(scores, mask)
    got = ctx.expect_tensor(pending.value(), (B, T, T), torch.float64, what="masked_softmax")
    ctx.expect_close(got, want, torch.float64, what="masked_softmax (Tq == Tk)")


@check("3.2", "edge-cases", H, Kind.EDGE, zh="一个查询、一个键", en="one query, one key", same_as="matches-torch")
def _msm_edges(ctx: Context) -> Iterator[None]:
    B, Tk = ctx.sizes(2, low=3)
    scores = ctx.randn(B, 1, Tk)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    pending = ctx.start(scores, mask)
    one_key, one_key_mask = ctx.randn(B, 2, 1), torch.zeros(B, 1, dtype=torch.bool)
    one_key_pending = ctx.start(one_key, one_key_mask)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case("Tq = 1，含整行填充的行", "Tq = 1, with a fully padded row"):
        want = ctx.reference(scores, mask)
        got = ctx.expect_tensor(pending.value(), (B, 1, Tk), torch.float64, what="masked_softmax")
        expect_masked_weights(ctx, got, mask, diagnose_dead=False)
        ctx.expect_close(got, want, torch.float64, what="masked_softmax (Tq = 1)")
    with ctx.case("Tk = 1：唯一的键权重为 1", "Tk = 1: the only key gets weight 1"):
        want = ctx.reference(one_key, one_key_mask)
        got = ctx.expect_tensor(one_key_pending.value(), (B, 2, 1), torch.float64, what="masked_softmax")
        ctx.expect_close(got, want, torch.float64, what="masked_softmax (Tk = 1)")


@check("3.2", "large-scores", H, Kind.EDGE, zh="分数在 1e4 附近、同一行相差上千、各行相差上千",
       en="scores near 1e4, thousands apart within a row, rows thousands apart",
       statement=(STABLE_3_2, NO_NAN_3_2))
def _msm_large(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3, low=3)

    started = []        # every call in flight before the first is compared (see Context.start)

    def begin(names: tuple[str, str], scores: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype) -> None:
        scores = scores.to(dtype)
        started.append((names, scores, mask, dtype, ctx.start(scores, mask)))

    def run(scores: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype, pending: Pending) -> None:
        want = ctx.reference(scores, mask)
        got = ctx.expect_tensor(pending.value(), tuple(scores.shape), dtype, what="masked_softmax")
        ctx.expect(bool(torch.isfinite(got).all()),
                   "出现了 inf/NaN：先减去每行（有效键上）的最大值", "inf/NaN in the weights: subtract each row's max "
                   "(over the real keys) first", diagnose=True, safe=True)
        expect_masked_weights(ctx, got, mask, diagnose_dead=False)
        ctx.expect_close(got, want, dtype, what="masked_softmax")

    # No fully padded row here: fully-padded-rows tests them, and at 1e4 a mask multiplied in after exp gives
    # such a row NaN (exp(1e4) * 0) as a plain softmax after -inf does, so one would be named as the other.
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    for dtype in DTYPES:
        begin((f"{dtype}：分数在 1e4 附近", f"{dtype}: scores near 1e4"), 1e4 + ctx.randn(B, Tq, Tk), mask, dtype)
    # Float64 first: a shift by the mean and one by the min then overflow at different places.
    for dtype in DTYPES[::-1]:
        begin((f"{dtype}：同一行的分数相差上千（正负都有）", f"{dtype}: scores thousands apart within a row, of both signs"),
              ctx.randn(B, Tq, Tk, scale=1500.0), mask, dtype)
    # Each query's row near its own level, the levels thousands apart: only a shift by each row's own max works.
    offsets = (torch.arange(B * Tq, dtype=torch.float64).reshape(B, Tq, 1) % 3 - 1) * 3000.0
    for dtype in DTYPES[::-1]:
        begin((f"{dtype}：各行的分数相差上千", f"{dtype}: rows thousands apart"), offsets + ctx.randn(B, Tq, Tk), mask,
              dtype)
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), scores, mask, dtype, pending in started:
        with ctx.case(zh, en):
            run(scores, mask, dtype, pending)


@check("3.2", "very-negative-random", H, Kind.EDGE, zh="有效键的分数非常负、有多个批量维时，填充键的权重仍恰好为 0",
       en="padded keys still get exactly 0 when the real scores are very negative, with several batch dims",
       same_as="very-negative-scores")
def _msm_negative(ctx: Context) -> Iterator[None]:
    Tq, Tk, Hn = ctx.sizes(3, low=2, high=6)
    started = [(dtype, kinds, (scores, mask, finite), ctx.start(scores, mask)) for dtype, kinds in NEGATIVE_CALLS
               for scores, mask, finite in [negative_rows(ctx, kinds, Tq, Tk, dtype, lead=(Hn,))]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, kinds, (scores, mask, finite), pending in started:
        with ctx.case(*negative_case(dtype, kinds, hidden=True)):
            want = ctx.reference(scores, mask)
            got = ctx.expect_tensor(pending.value(), tuple(scores.shape), dtype, what="masked_softmax")
            expect_masked_weights(ctx, got, mask, scores=scores)
            ctx.expect_close(got[finite], want[finite], dtype, what=FINITE_ROWS)


@check("3.2", "inf-scores-finite", H, Kind.EDGE, zh="scores 里已有 -inf（有效键的分数全是 -inf 的行）时，任何位置都没有 NaN 或 inf",
       en="scores that already hold -inf (rows whose real keys all score -inf): no NaN or inf anywhere",
       statement=NO_NAN_3_2)
def _msm_inf_finite(ctx: Context) -> Iterator[None]:
    # A row whose real keys all score -inf (a causal mask's leftovers) is not a fully padded row: a softmax that
    # gives it NaN and then zeroes only the padded keys (masked_fill(mask, 0) after the softmax, which clears the
    # fully padded rows' NaN) keeps NaN at its real keys. Only that is diagnosed here: an answer with NaN or inf
    # anywhere else fails too, undiagnosed (the checks of the padded keys and the fully padded rows name those).
    Tq, Tk = ctx.sizes(2, low=2, high=5)
    started = []
    for dtype in DTYPES:
        scores, mask, _ = negative_rows(ctx, ("-inf", "normal", "-inf"), Tq, Tk, dtype, lead=(2,))
        started.append((dtype, scores, mask, ctx.start(scores, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, scores, mask, pending in started:
        with ctx.case(f"{dtype}：有效键的分数全是 -inf 的行", f"{dtype}: rows whose real keys all score -inf"):
            got = ctx.expect_tensor(pending.value(), tuple(scores.shape), dtype, what="masked_softmax").double()
            real = ~key_mask_like(mask, got).expand_as(got)
            blocked = real & ~((scores.double() > float("-inf")) & real).any(dim=-1, keepdim=True)
            if not torch.isfinite(got[~blocked]).all():
                message = Msg("masked_softmax 的输出里有 NaN 或 inf：任何位置都不能出现 NaN 或 inf",
                              "NaN or inf in the output of masked_softmax: no position may hold NaN or inf")
                raise CheckFailed(message, hidden=message)
            ctx.expect(bool(torch.isfinite(got[blocked]).all()),
                       "有效键的分数全是 -inf 的行（比如因果掩码留下的），有效键上出现了 NaN 或 inf：任何位置都不能出现 NaN 或 inf"
                       "（softmax 之后只把填充键清零，去不掉这一行的 NaN）",
                       "NaN or inf at the real keys of a row whose real keys all score -inf (a causal mask's leftovers, "
                       "say): no position may hold NaN or inf (zeroing the padded keys after the softmax leaves this "
                       "row's NaN)", diagnose=True, safe=True)


@check("3.2", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的 softmax", en="no library softmax",
       statement=FORBIDDEN_RULE)
def _msm_forbidden(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3)
    pending = ctx.start(ctx.randn(B, Tq, Tk), mask_from_lengths(key_lengths(ctx, B, Tk), Tk))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 3.3 masked_attention -------------------------------------------------------------
@check("3.3", "reference-random", H, Kind.NUMERIC, zh="随机输入（含全填充行、多个批量维）与参考答案一致",
       en="agrees with the reference on random inputs (fully padded rows, several batch dims)", weight=3,
       same_as="matches-torch")
def _mat_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for extra in ((), (2,), (3, 2)):
        B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=3)
        mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
        for dtype in DTYPES:
            Q, K, V = (ctx.randn(B, *extra, Tq, Dk, dtype=dtype), ctx.randn(B, *extra, Tk, Dk, dtype=dtype),
                       ctx.randn(B, *extra, Tk, Dv, dtype=dtype))
            started.append((dtype, (Q, K, V), mask, ctx.start(Q, K, V, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, (Q, K, V), mask, pending in started:
        want_out, want_w = ctx.reference(Q, K, V, mask)
        out, weights = ctx.expect_tuple(pending.value(), 2)
        w = ctx.expect_tensor(weights, (*Q.shape[:-1], K.shape[-2]), dtype, what="weights")
        o = ctx.expect_tensor(out, (*Q.shape[:-1], V.shape[-1]), dtype, what="out")
        expect_close_live_rows_first(ctx, w, want_w, mask, dtype, "weights")
        expect_close_live_rows_first(ctx, o, want_out, mask, dtype, "out")


@check("3.3", "edge-cases", H, Kind.EDGE, zh="一个查询、一个键", en="one query, one key", same_as="matches-torch")
def _mat_edges(ctx: Context) -> Iterator[None]:
    B, Tk, D = ctx.sizes(3, low=3)
    cases = [
        (ctx.randn(B, 1, D), ctx.randn(B, Tk, D), ctx.randn(B, Tk, D),
         mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk), ("Tq = 1，含整行填充的行", "Tq = 1, with a "
                                                                         "fully padded row")),
        (ctx.randn(B, 2, D), ctx.randn(B, 1, D), ctx.randn(B, 1, D), torch.zeros(B, 1, dtype=torch.bool),
         ("Tk = 1", "Tk = 1")),
    ]
    started = [(Q, K, V, mask, names, ctx.start(Q, K, V, mask)) for Q, K, V, mask, names in cases]
    yield      # the next check begins here, while the worker runs these calls
    for Q, K, V, mask, (zh, en), pending in started:
        with ctx.case(zh, en):
            want_out, want_w = ctx.reference(Q, K, V, mask)
            out, weights = ctx.expect_tuple(pending.value(), 2)
            Tq, Tk_ = Q.shape[-2], K.shape[-2]
            w = ctx.expect_tensor(weights, (B, Tq, Tk_), torch.float64, what="weights")
            o = ctx.expect_tensor(out, (B, Tq, V.shape[-1]), torch.float64, what="out")
            expect_close_live_rows_first(ctx, w, want_w, mask, torch.float64, "weights")
            expect_close_live_rows_first(ctx, o, want_out, mask, torch.float64, "out")


@check("3.3", "large-scores", H, Kind.EDGE, zh="Q、K 数值很大，分数上千（正负都有）", en="large Q and K: scores in the "
       "thousands, of both signs", statement=STABLE_3_3)
def _mat_large(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, D = ctx.sizes(4, low=3)
    # Scores of order 900 (thousands apart within a row), none near -1e4, where a -1e4 fill would get weight
    # whether or not its fully padded rows were patched, so that this check cannot tell those two apart.
    Q, K, V = ctx.randn(B, Tq, D, scale=30.0), ctx.randn(B, Tk, D, scale=30.0), ctx.randn(B, Tk, D)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    pending = ctx.start(Q, K, V, mask)
    yield      # the next check begins here, while the worker runs this call
    with ctx.case("分数上千（正负都有）", "scores in the thousands, of both signs"):
        want_out, want_w = ctx.reference(Q, K, V, mask)
        out, weights = ctx.expect_tuple(pending.value(), 2)
        ctx.expect_close(ctx.expect_tensor(weights, (B, Tq, Tk), torch.float64, what="weights"), want_w,
                         torch.float64, what=Msg("weights（分数上千）", "weights (scores in the thousands)"))
        ctx.expect_close(ctx.expect_tensor(out, (B, Tq, D), torch.float64, what="out"), want_out,
                         torch.float64, what=Msg("out（分数上千）", "out (scores in the thousands)"))


@check("3.3", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的注意力或 softmax",
       en="no library attention or softmax", statement=FORBIDDEN_3_3)
def _mat_forbidden(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, D = ctx.sizes(4)
    pending = ctx.start(ctx.randn(B, Tq, D), ctx.randn(B, Tk, D), ctx.randn(B, Tk, D),
                        mask_from_lengths(key_lengths(ctx, B, Tk), Tk))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 3.4 masked_cross_entropy ---------------------------------------------------------
not_graded("3.4", "本题不对这种情况打分",
           why="the statement itself leaves the no-counted-position case (0/0, NaN in torch) ungraded; no check "
               "feeds targets that are all ignore_index")


@check("3.4", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案一致", en="agrees with the reference on random inputs",
       weight=3, same_as="matches-torch")
def _mce_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for ignore_index in (-100, -1, 0):
        B, T, C = ctx.sizes(3, low=3, high=11)
        targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), ignore_index)
        for dtype in DTYPES:
            logits = ctx.randn(B, T, C, dtype=dtype, scale=3.0)
            started.append((ignore_index, dtype, logits, targets, ctx.start(logits, targets, ignore_index)))
    yield      # the next check begins here, while the worker runs these calls
    for ignore_index, dtype, logits, targets, pending in started:
        want = ctx.reference(logits, targets, ignore_index)
        got = expect_loss(ctx, pending.value(), dtype)
        ctx.expect_close(got, want, dtype, what=f"masked_cross_entropy(logits, targets, ignore_index={ignore_index})")


@check("3.4", "edge-cases", H, Kind.EDGE, zh="只有一个目标计入、T = 1", en="a single counted target, T = 1",
       statement="只要至少有一个有效位置，就等于 F.cross_entropy")
def _mce_edges(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3, low=3)
    targets = torch.full((B, T), -100, dtype=torch.int64)
    targets[1, 2] = int(ctx.randint(0, C, 1))
    logits = ctx.randn(B, T, C)
    pending = ctx.start(logits, targets)
    short_logits, short_targets = ctx.randn(B, 1, C), ctx.randint(0, C, B, 1)
    short = ctx.start(short_logits, short_targets)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case("只有一个目标计入", "a single counted target"):
        want = ctx.reference(logits, targets)
        ctx.expect_close(expect_loss(ctx, pending.value(), torch.float64), want, torch.float64,
                         what=Msg("masked_cross_entropy（只有一个目标计入）", "masked_cross_entropy (one counted target)"))
    with ctx.case("T = 1", "T = 1"):
        want = ctx.reference(short_logits, short_targets)
        ctx.expect_close(expect_loss(ctx, short.value(), torch.float64), want, torch.float64,
                         what="masked_cross_entropy (T = 1)")


@check("3.4", "large-logits-edges", H, Kind.EDGE, zh="logits 在 1e4 附近、各位置的 logits 相差上千",
       en="logits near 1e4, positions whose logits are thousands apart", statement=STABLE_3_4)
def _mce_large(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3, low=3)
    targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100)
    near = [(dtype, logits, ctx.start(logits, targets)) for dtype in DTYPES
            for logits in [(1e4 + ctx.randn(B, T, C)).to(dtype)]]
    # Each position's logits spread over hundreds and the positions thousands apart: only a shift by the
    # max of each position's own row keeps every exp finite and non-zero (not the global max, the min, the
    # mean). Every target counts, so a NaN or an inf cannot hide at an ignored position.
    counted = ctx.randint(0, C, B, T)
    offsets = (torch.arange(B * T, dtype=torch.float64).reshape(B, T, 1) % 3 - 1) * 3000.0
    apart = [(dtype, logits, ctx.start(logits, counted)) for dtype in DTYPES[::-1]
             for logits in [(ctx.randn(B, T, C, scale=400.0) + offsets).to(dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, logits, pending in near:
        with ctx.case(f"{dtype}：logits 在 1e4 附近", f"{dtype}: logits near 1e4"):
            want = ctx.reference(logits, targets)
            got = expect_loss(ctx, pending.value(), dtype)
            ctx.expect(bool(torch.isfinite(got)),
                       f"logits 在 1e4 附近时损失是 {got.item()}：先减去每行最大值再做 log-sum-exp",
                       f"with logits near 1e4 the loss is {got.item()}: subtract each row's max first",
                       diagnose=True, hidden=Msg("logits 在 1e4 附近时损失是 inf 或 NaN：先减去每行最大值再做 log-sum-exp",
                                                 "with logits near 1e4 the loss is inf or NaN: subtract each row's "
                                                 "max first"))
            ctx.expect_close(got, want, dtype, what=NEAR_1E4)
    for dtype, logits, pending in apart:
        with ctx.case(f"{dtype}：各位置的 logits 相差上千", f"{dtype}: positions thousands apart"):
            want = ctx.reference(logits, counted)
            got = expect_loss(ctx, pending.value(), dtype)
            # Not diagnosed: several shifts give an infinite loss here, and values_match takes any loss as close
            # to an infinite one (compare's first test: inf <= atol + rtol * inf); large-spread names each shift
            # on a case of its own.
            ctx.expect_close(got, want, dtype, what=Msg("masked_cross_entropy（各位置的 logits 相差上千）",
                                                        "masked_cross_entropy (positions thousands apart)"),
                             diagnose=False)


@check("3.4", "no-forbidden-calls", H, Kind.FORBIDDEN, zh="没有调用现成的交叉熵或 NLL", en="no library cross entropy or NLL",
       statement=FORBIDDEN_RULE)
def _mce_forbidden(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3)
    pending = ctx.start(ctx.randn(B, T, C), padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100))
    yield      # the next check begins here, while the worker runs this call
    pending.value()


# -- 3.5 causal_mask ------------------------------------------------------------------
@check("3.5", "reference-random", H, Kind.NUMERIC, zh="随机 T 与参考答案一致", en="agrees with the reference on random T",
       weight=2, same_as="matches-torch")
def _causal_reference(ctx: Context) -> Iterator[None]:
    started = [(T, ctx.start(T)) for T in ctx.sizes(2, low=5, high=16)]
    yield      # the next check begins here, while the worker runs these calls
    for T, pending in started:
        expect_exact(ctx, expect_causal_value(ctx, pending.value(), T), ctx.reference(T), f"causal_mask({T})")


# A constant all-False mask passes this too: its points need a correct output.
@check("3.5", "edge-one-position", H, Kind.EDGE, zh="T = 1：[[False]]", en="T = 1: [[False]]", needs_output=True,
       statement="[i, j] 为 True 当且仅当 j > i")
def _causal_one(ctx: Context) -> Iterator[None]:
    pending = ctx.start(1)
    yield      # the next check begins here, while the worker runs this call
    # At T = 1 several mistakes give the same [[True]]: fail without naming one.
    expect_exact(ctx, expect_causal_value(ctx, pending.value(), 1, diagnose=False), ctx.reference(1), "causal_mask(1)",
                 diagnose=False)


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量（没有对输入做原地操作）", "leaves the tensors it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个浮点输入，且与参考答案一致", "gradients reach every float input and agree with the reference's"


@check("3.1", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_RULE)
def _pad_inputs(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=2, high=9)
    lengths = ctx.randint(0, T + 1, B)
    # the next check begins at together's yield, while the worker runs these calls
    yield from together(inputs_unchanged(ctx, lengths), inputs_unchanged(ctx, lengths, T + 2))


@check("3.2", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_RULE)
def _msm_inputs(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3, low=3, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    yield from inputs_unchanged(ctx, ctx.randn(B, 2, Tq, Tk, scale=4.0), mask)


@check("3.2", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _msm_gradients(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3, low=3, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    yield from input_gradients(ctx, ("scores",), (0,), ctx.randn(B, Tq, Tk, scale=2.0), mask)


@check("3.3", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_RULE)
def _mattn_inputs(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=2, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    yield from inputs_unchanged(ctx, ctx.randn(B, Tq, Dk), ctx.randn(B, Tk, Dk), ctx.randn(B, Tk, Dv), mask)


@check("3.3", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH + "（out 与 weights 两个输出）",
       en=GRAD_EN + " (through both outputs, out and weights)", statement=GRADIENT_RULE)
def _mattn_gradients(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, Dk, Dv = ctx.sizes(5, low=2, high=7)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    yield from input_gradients(ctx, ("Q", "K", "V"), (0, 1, 2), ctx.randn(B, Tq, Dk), ctx.randn(B, Tk, Dk),
                           ctx.randn(B, Tk, Dv), mask, outputs=("out", "weights"))


def _ce_inputs(ctx: Context) -> tuple[torch.Tensor, torch.Tensor]:
    B, T, Cn = ctx.sizes(3, low=2, high=7)
    lengths = key_lengths(ctx, B, T)
    return ctx.randn(B, T, Cn, scale=2.0), padded_targets(ctx, B, T, Cn, lengths, -100)


@check("3.4", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_RULE)
def _ce_inputs_unchanged(ctx: Context) -> Iterator[None]:
    yield from inputs_unchanged(ctx, *_ce_inputs(ctx))


@check("3.4", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENT_RULE)
def _ce_gradients(ctx: Context) -> Iterator[None]:
    yield from input_gradients(ctx, ("logits",), (0,), *_ce_inputs(ctx))


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
# 3.1 padding_mask: positions (1, T) compared with lengths (B, 1)
near_answer("3.1", r"(\.unsqueeze\(0\)|\[None,:\]|\[None\])(>=|<)[A-Za-z_][\w.]*(\.unsqueeze\(1\)|\[:,None\])",
            r"[A-Za-z_][\w.]*(\.unsqueeze\(1\)|\[:,None\])(<=|>)[\w.()]*arange")
# 3.2 masked_softmax: a softmax of scores filled with -inf where masked
near_answer("3.2", r"(?<!masked_)softmax\([\w.()]*masked_fill\(.*-inf")
# 3.3 masked_attention: scaled scores handed to a masked softmax
near_answer("3.3", r"masked_softmax\(.*@.*(transpose\(-2,-1\)|\.mT)")
