"""Public checks of 03_padding_masks (shipped to students: no reference solution here).

The truth here is torch's own code (``F.softmax`` after ``masked_fill(-inf)``,
``F.scaled_dot_product_attention``, ``F.cross_entropy``,
``nn.Transformer.generate_square_subsequent_mask``) or closed-form math, in
float64. Torch's softmax gives NaN on a row whose keys are all padded (and its
modules do on some paths), so those rows are compared with torch nowhere: they are checked as a property (all zeros, no NaN); so
are the rows whose real keys all score -inf (their padded keys exactly 0).

References are computed *before* the student's function runs: in self-check the
student gets the very tensors the check holds and could modify them in place.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from autograder.catalog import Precision, precision, Audience, CheckFailed, Context, Kind, Msg, Status, Value, check, exercise
from autograder.catalog.comparison import label

P = Audience.PUBLIC

SOFTMAX_FORBIDDEN = ("torch.softmax", "F.softmax", "Tensor.softmax", "F.log_softmax", "torch.log_softmax")
ATTENTION_FORBIDDEN = ("F.scaled_dot_product_attention", "nn.MultiheadAttention", "F.multi_head_attention_forward")
LOSS_FORBIDDEN = ("F.cross_entropy", "nn.CrossEntropyLoss", "F.nll_loss", "nn.NLLLoss")

exercise("3.2", forbidden=SOFTMAX_FORBIDDEN)
exercise("3.3", forbidden=ATTENTION_FORBIDDEN + SOFTMAX_FORBIDDEN)
exercise("3.4", forbidden=LOSS_FORBIDDEN)

#: What the notebook's conventions say of precision (its introduction): a float32 scalar or table inside a float64
#: call is correct (autograder.catalog.Precision.ONE_FLOAT32).
PRECISION_RULE = "输入是 float64 时，结果要与参考答案在 float64 下一致，但允许一个 float32 的中间量带来的误差"
precision(("3.1", "3.2", "3.3", "3.4", "3.5"), Precision.ONE_FLOAT32, statement=PRECISION_RULE)

DTYPES = (torch.float32, torch.float64)
#: What a mask is called in a message when no code expression names it.
MASK = Msg("掩码", "the mask")


# -- inputs and closed forms shared with the hidden checks --------------------------
def key_lengths(ctx: Context, batch: int, keys: int, *, empty_row: bool = False) -> torch.Tensor:
    """Lengths (batch,) in [1, keys]: row 0 full, row 1 shorter (when keys > 1), the last row 0 if ``empty_row``."""
    lengths = ctx.randint(1, keys + 1, batch)
    lengths[0] = keys
    if batch > 1 and keys > 1:
        lengths[1] = int(ctx.randint(1, keys, 1))
    if empty_row:
        lengths[-1] = 0
    return lengths


def mask_from_lengths(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """bool (B, max_len), True at padded positions: where torch's own ``pad_sequence`` pads.

    One all-False sequence per length, padded with True by torch; a last sequence of
    ``max_len`` sets the width and is dropped.
    """
    sequences = [torch.zeros(int(n), dtype=torch.bool) for n in lengths.tolist()]
    sequences.append(torch.zeros(max_len, dtype=torch.bool))
    return pad_sequence(sequences, batch_first=True, padding_value=True)[:-1]


def key_mask_like(mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(B, Tk) -> (B, 1, ..., 1, Tk): broadcasts over every dim of ``scores`` but the keys."""
    B, Tk = mask.shape
    return mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)


def torch_masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """torch's own masked softmax of ``scores``, in float64: ``F.scaled_dot_product_attention`` with the
    identity as K and V and scale 1 (so q k^T is the scores and weights @ I the weights), the boolean
    mask as its attn_mask. Rows whose keys are all padded are left to the checks' properties."""
    s = scores.double()
    eye = torch.eye(s.shape[-1], dtype=torch.float64).expand(*s.shape[:-2], -1, -1)
    return F.scaled_dot_product_attention(s, eye, eye, attn_mask=~key_mask_like(mask, s), scale=1.0)


def live(mask: torch.Tensor) -> torch.Tensor:
    """(B,) True for batch rows with at least one real key."""
    return ~mask.all(dim=-1)


def expect_exact(ctx: Context, got: torch.Tensor, want: torch.Tensor, what: str | Msg, diagnose: bool = True) -> None:
    """Exact equality (masks, reshapes): the message shows how many and the first place they differ.

    ``what``: a code expression (the same in both languages) or a :class:`Msg`. The hidden message says
    only whether every element or some differ.
    """
    zh, en = label(what)
    if got.shape != want.shape:
        message = Msg(f"{zh} 的形状应为 {tuple(want.shape)}，实际是 {tuple(got.shape)}",
                      f"{en} should have shape {tuple(want.shape)}, got {tuple(got.shape)}")
        raise CheckFailed(message, diagnose=diagnose, hidden=message)
    bad = got != want
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        n_bad = int(bad.sum())
        every = n_bad == got.numel()
        raise CheckFailed(Msg(f"{zh}：{n_bad}/{got.numel()} 个元素不符，第一个在位置 {idx}：期望 {want[idx].item()}，"
                              f"得到 {got[idx].item()}",
                              f"{en}: {n_bad}/{got.numel()} elements differ, the first at {idx}: "
                              f"expected {want[idx].item()}, got {got[idx].item()}"), diagnose=diagnose,
                          hidden=Msg(f"{zh}：与参考答案不完全相同（{'每个元素都' if every else '有元素'}不符）",
                                     f"{en}: not exactly the reference "
                                     f"({'every element differs' if every else 'some elements differ'})"))


def expect_bool(ctx: Context, value: Value, shape: tuple[int, ...], device: str | None = None,
                what: str | Msg = MASK, diagnose: bool = True) -> torch.Tensor:
    """A bool tensor of this shape; a float 0/-inf mask is a known mistake, so the dtype is diagnosed."""
    t = ctx.expect_tensor(value, shape, None, device, what=what)
    zh, en = label(what)
    ctx.expect(t.dtype == torch.bool,
               f"{zh} 的 dtype 应为 torch.bool（True 表示不可见/填充），实际是 {value.spec['dtype']}",
               f"{en} should have dtype torch.bool (True = hidden/padded), got {value.spec['dtype']}",
               diagnose=diagnose, safe=True)      # a tensor's dtype, checked by expect_tensor
    return t


def expect_masked_weights(ctx: Context, weights: torch.Tensor, mask: torch.Tensor, what: str | Msg = "weights", *,
                          scores: torch.Tensor | None = None, diagnose_dead: bool = True) -> None:
    """The three properties of masked attention weights (B, ..., Tq, Tk) under a key mask (B, Tk).

    ``scores``: the scores the weights came from, when some real keys score -inf (a causal mask's
    leftovers): a query whose real keys all score -inf has nothing to weigh, so only its padded keys are
    checked (exactly 0) and it is left out of the row sums. A NaN at those padded keys is not diagnosed:
    any softmax shifted by a mean or a min of the row gives it there, whatever else it does.
    ``diagnose_dead``: False where every real score is ordinary, so that the known mistakes filling a
    large finite number in place of -inf (-1e4, -1e9, finfo.min) all give a fully padded row the same
    uniform weights: the checks with very negative real scores tell them apart and name them.
    """
    zh, en = label(what)
    w = weights.double()
    alive = live(mask)
    dead = w[~alive]
    if torch.isnan(dead).any():
        message = Msg(
            f"{zh}：键全部是填充的那一行出现了 NaN。对全是 -inf 的一行做 softmax 是 0/0；这一行应当全为 0"
            f"（torch 自带的 softmax 和 nn.MultiheadAttention 的一些路径在这里也给 NaN，所以要自己处理）",
            f"{en}: NaN in a row whose keys are all padded. A softmax over a row of -inf is 0/0; "
            f"that row should be all zeros (torch's own softmax, and nn.MultiheadAttention on some paths, give NaN "
            f"here too, so handle it yourself)")
        raise CheckFailed(message, diagnose=True, hidden=message)
    if (dead != 0).any():
        top = dead.abs().max().item()
        raise CheckFailed(Msg(
            f"{zh}：键全部是填充的那一行应当全为 0，实际最大值 {top:.6g}"
            f"（用 -1e9、-1e4、finfo.min 或 0 这样的有限数代替 -inf 会得到均匀分布）",
            f"{en}: a row whose keys are all padded should be all zeros, got values up to {top:.6g} "
            f"(-1e9, -1e4, finfo.min or 0 in place of -inf gives a uniform row)"), diagnose=diagnose_dead,
            hidden=Msg(f"{zh}：键全部是填充的那一行应当全为 0，实际不是（用 -1e9、-1e4、finfo.min 或 0 这样的有限数"
                       f"代替 -inf 会得到均匀分布）",
                       f"{en}: a row whose keys are all padded should be all zeros, it is not "
                       f"(-1e9, -1e4, finfo.min or 0 in place of -inf gives a uniform row)"))
    pads = key_mask_like(mask, w).expand_as(w)
    rows = alive.reshape(-1, *([1] * (w.dim() - 2))).expand(w.shape[:-1])   # (B, ..., Tq): has a real key
    blocked = torch.zeros_like(rows)
    if scores is not None:
        blocked = rows & ~((~pads) & (scores.double() > float("-inf"))).any(dim=-1)
    at_pads = w[pads & ~blocked[..., None]]
    nonzero = at_pads != 0
    if nonzero.any():
        n_bad, top = int(nonzero.sum()), at_pads.abs().max().item()
        raise CheckFailed(Msg(
            f"{zh}：填充位置的权重应当恰好为 0，有 {n_bad}/{at_pads.numel()} 个不是（最大 {top:.3g}）",
            f"{en}: padded keys should get exactly 0, {n_bad}/{at_pads.numel()} do not (largest {top:.3g})"),
            diagnose=True, hidden=Msg(f"{zh}：填充位置（被掩蔽的键）的权重应当恰好为 0，有的不是",
                                      f"{en}: padded (masked) keys should get exactly 0, some do not"))
    if blocked.any():
        at_pads = w[pads & blocked[..., None]]
        if torch.isnan(at_pads).any():
            message = Msg(f"{zh}：有效键的分数全是 -inf 的那一行，填充键的权重出现了 NaN，应当恰好为 0",
                          f"{en}: NaN at the padded keys of a row whose real keys all score -inf; "
                          f"they should get exactly 0")
            raise CheckFailed(message, hidden=message)
        if (at_pads != 0).any():
            message = Msg(f"{zh}：有效键的分数全是 -inf 的那一行，填充键分到了权重，应当恰好为 0"
                          f"（用 finfo.min 这样的有限数代替 -inf，填充键就比 -inf 大）",
                          f"{en}: the padded keys of a row whose real keys all score -inf get weight; they "
                          f"should get exactly 0 (a finite fill such as finfo.min is larger than -inf)")
            raise CheckFailed(message, diagnose=True, hidden=message)
    counted = rows & ~blocked
    sums = w.sum(dim=-1)[counted]
    ctx.expect_close(sums, torch.ones_like(sums), weights.dtype,
                     what=Msg(f"{zh}.sum(-1)（有有效键的行）", f"{en}.sum(-1) (rows with a real key)"))


# -- 3.1 padding_mask ---------------------------------------------------------------
@check("3.1", "shape-dtype", P, Kind.SHAPE, zh="形状 (B, max_len)、dtype bool、与 lengths 同设备",
       en="shape (B, max_len), dtype bool, on the device of lengths",
       statement=("返回形状 (B, max_len) 的 bool 张量", "结果放在 lengths 所在的设备上"))
def _pad_shape(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=3)
    lengths = key_lengths(ctx, B, T)
    pending, longer = ctx.start(lengths), ctx.start(lengths, T + 3)
    yield      # the next check begins here, while the worker runs these calls
    expect_bool(ctx, pending.value(), (B, T), what="padding_mask(lengths)")
    expect_bool(ctx, longer.value(), (B, T + 3), what=f"padding_mask(lengths, max_len={T + 3})")


@check("3.1", "matches-closed-form", P, Kind.NUMERIC, zh="与 torch 的 pad_sequence 填充的位置完全一致",
       en="True exactly where torch's pad_sequence pads", weight=2,
       statement=("padding_mask(lengths, max_len=None)", "max_len 默认取 lengths.max()；给定时按给定宽度生成",
                  "第 b 行第 t 列为 True 当且仅当 t >= lengths[b]"))
def _pad_values(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=3)
    lengths = key_lengths(ctx, B, T)
    pending = ctx.start(lengths)
    # The second call's lengths in a tensor of their own: the first call's stay as they were sent (a call
    # sent anew after a worker stopped is encoded again from its request; the diagnoser reads its arguments).
    with_empty = lengths.clone()
    with_empty[-1] = 0
    longer = ctx.start(with_empty, max_len=T + 2)
    yield      # the next check begins here, while the worker runs these calls
    expect_exact(ctx, expect_bool(ctx, pending.value(), (B, T), what="padding_mask(lengths)"),
                 mask_from_lengths(lengths, T), "padding_mask(lengths)")
    want = mask_from_lengths(with_empty, T + 2)
    expect_exact(ctx, expect_bool(ctx, longer.value(), (B, T + 2),
                                  what=f"padding_mask(lengths, max_len={T + 2})"), want,
                 f"padding_mask(lengths, max_len={T + 2})")


@check("3.1", "counts-real-tokens", P, Kind.PROPERTY, zh="每行 False 的个数等于长度",
       en="each row has exactly lengths[b] False entries, all at the front",
       statement="lengths：形状 (B,) 的 int64 张量，每句的真实长度")
def _pad_counts(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=3)
    lengths = key_lengths(ctx, B, T)
    pending = ctx.start(lengths)
    yield      # the next check begins here, while the worker runs this call
    mask = expect_bool(ctx, pending.value(), (B, T), what="padding_mask(lengths)")
    real = (~mask).sum(dim=-1)
    ctx.expect(torch.equal(real, lengths),
               f"每行未填充（False）的个数应等于 lengths={lengths.tolist()}，实际是 {real.tolist()}",
               f"the number of real (False) positions per row should equal lengths={lengths.tolist()}, "
               f"got {real.tolist()}", diagnose=True)


@check("3.1", "empty-batch", P, Kind.EDGE, zh="空批量：不给 max_len 时形状 (0, 0)，给了时形状 (0, max_len)",
       en="an empty batch: shape (0, 0) without max_len, (0, max_len) with it",
       statement=("不给 max_len 时返回形状 (0, 0) 的掩码，给了 max_len 时形状是 (0, max_len)",
                  "注意空张量没有最大值，lengths.max() 在这里会报错，要单独处理"))
def _pad_empty(ctx: Context) -> Iterator[None]:
    T = ctx.sizes(1, low=2)[0]
    started = [(kwargs, shape, zh, en, ctx.start(torch.zeros(0, dtype=torch.int64), **kwargs))
               for kwargs, shape, zh, en in (({}, (0, 0), "空批量、不给 max_len", "an empty batch, max_len left out"),
                                             ({"max_len": T}, (0, T), "空批量、给了 max_len",
                                              "an empty batch with max_len"))]
    yield      # the next check begins here, while the worker runs these calls
    for kwargs, shape, zh, en, pending in started:
        with ctx.case(zh=zh, en=en):
            try:
                value = pending.value()
            except CheckFailed as failed:
                if failed.status is not Status.ERROR:
                    raise
                hint = Msg(f"{failed.message.zh.rstrip('。. ')}。空张量没有最大值，lengths.max() 在空批量上会报错：这种情况要单独处理"
                           f"（不给 max_len 时返回形状 (0, 0) 的掩码）",
                           f"{failed.message.en.rstrip('. ')}. An empty tensor has no max: lengths.max() raises on an empty "
                           f"batch, so handle it on its own (a (0, 0) mask when max_len is left out)")
                raise CheckFailed(hint, status=Status.ERROR, error_type=failed.error_type,
                                  hidden=Msg("空批量时函数报错了：空张量没有最大值，lengths.max() 会报错，要单独处理",
                                             "the function raised on an empty batch: an empty tensor has no max, "
                                             "lengths.max() raises there, handle it on its own")) from None
            expect_bool(ctx, value, shape, what=Msg(f"padding_mask（空批量{'，给了 max_len' if kwargs else ''}）",
                                                    f"padding_mask(an empty batch{', max_len' if kwargs else ''})"))


# -- 3.2 masked_softmax ---------------------------------------------------------------
#: Real scores as negative as a finite fill: a mask filled with -1e4 or -1e9 in place of -inf gives the padded
#: keys weight (or, with the padded weights zeroed afterwards, rows that no longer sum to 1) when the real
#: scores are near it, and torch.finfo(dtype).min does when they are -inf.
LEVELS = {"-1e4": -1e4, "-1e9": -1e9}
#: (dtype, kinds): one call each, float64 first with every very negative kind at once, so that the one call
#: tells the finite fills apart (which one, and whether the fully padded rows were patched afterwards), and
#: no ordinary row, so that a shift by the whole tensor's max (the -1e4 row's) differs from no shift at all;
#: float32's rounding of -1e9 leaves only the exact zeros to check (the scale-aware tolerance takes the rest).
NEGATIVE_CALLS = ((torch.float64, ("-1e4", "-1e9", "-inf", "dead")),
                  (torch.float32, ("normal", "-1e4", "-inf", "dead")),
                  (torch.float32, ("-1e9", "-inf", "dead")))
KIND_NAMES = {"normal": ("普通分数", "ordinary scores"), "-1e4": ("-1e4 附近的分数", "scores near -1e4"),
              "-1e9": ("-1e9 附近的分数", "scores near -1e9"), "-inf": ("有效键全是 -inf", "every real key at -inf"),
              "dead": ("整行填充", "a fully padded row")}


#: The rows of a very-negative call that torch's softmax can be the truth for.
FINITE_ROWS = Msg("masked_softmax（有效键的分数有限的行）", "masked_softmax (the rows with a finite real score)")


def negative_case(dtype: torch.dtype, kinds: tuple[str, ...], hidden: bool = False) -> tuple[str, str]:
    """The case's name: its dtype and its kinds of rows (the hidden checks name no level)."""
    if hidden:
        return (f"{dtype}：有效键的分数非常负的行", f"{dtype}: rows whose real scores are very negative")
    return (f"{dtype}：" + "、".join(KIND_NAMES[k][0] for k in kinds),
            f"{dtype}: " + ", ".join(KIND_NAMES[k][1] for k in kinds))


def negative_rows(ctx: Context, kinds: tuple[str, ...], Tq: int, Tk: int, dtype: torch.dtype,
                  lead: tuple[int, ...] = ()) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Scores (B, *lead, Tq, Tk), a key mask (B, Tk), one batch row per kind (B = len(kinds)), and the rows
    whose real scores are finite: "normal" (noise around 0), "-1e4" and "-1e9" (every score of the row near
    that level, the padded keys' too), "-inf" (every real key scores -inf, as a causal mask leaves them),
    "dead" (no real key). Every row but "dead" has at least one real and one padded key."""
    lengths = ctx.randint(1, Tk, len(kinds))
    scores = ctx.randn(len(kinds), *lead, Tq, Tk)
    for b, kind in enumerate(kinds):
        if kind == "dead":
            lengths[b] = 0
        elif kind == "-inf":
            scores[b, ..., :int(lengths[b])] = float("-inf")
        elif kind in LEVELS:
            scores[b] += LEVELS[kind]
    finite = [b for b, kind in enumerate(kinds) if kind not in ("-inf", "dead")]
    return scores.to(dtype), mask_from_lengths(lengths, Tk), finite


def garbage_padding(ctx: Context, B: int, Tq: int, Tk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (B, Tq, Tk) float64 whose padded keys hold garbage a thousand above every real score, and the
    key mask: row 0 has no padded key, row 1's padded keys score like its real ones, row 2 (when B > 2) has
    a single padded key. Exp of the garbage overflows (a mask multiplied in after exp gives inf * 0 = NaN);
    a shift by the max over every key underflows the real ones."""
    lengths = key_lengths(ctx, B, Tk)
    if B > 2:
        lengths[2] = Tk - 1
    mask = mask_from_lengths(lengths, Tk)
    scores = ctx.randn(B, Tq, Tk)
    garbage = scores.amax(dim=-1, keepdim=True) + 1000.0 + 10.0 * ctx.randn(B, Tq, Tk).abs()
    garbage[1] = scores[1]
    return torch.where(key_mask_like(mask, scores), garbage, scores), mask


@check("3.2", "shape-dtype", P, Kind.SHAPE, zh="输出与 scores 同形状、同 dtype", en="output has the shape and dtype of scores",
       statement=("masked_softmax(scores, key_padding_mask)", "批量维 B 在最前，中间可以有任意多维（比如多头的 H）",
                  "返回与 scores 同形状、同 dtype 的权重"))
def _msm_shape(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk = ctx.sizes(4)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = []
    for lead in ((B,), (B, H)):
        for dtype in DTYPES:
            scores = ctx.randn(*lead, Tq, Tk, dtype=dtype)
            started.append((lead, dtype, ctx.start(scores, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for lead, dtype, pending in started:
        ctx.expect_tensor(pending.value(), (*lead, Tq, Tk), dtype, what="masked_softmax")


@check("3.2", "padded-keys-zero", P, Kind.PROPERTY, zh="填充键的权重恰好为 0，其余每行加和为 1",
       en="padded keys get exactly 0, every row sums to 1", weight=2,
       statement=("key_padding_mask：形状 (B, Tk) 的 bool 张量，True = 填充", "填充键的权重恰好为 0；至少有一个有效键的行，和为 1"))
def _msm_zero(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk = ctx.sizes(4)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = [(dtype, ctx.start(ctx.randn(B, H, Tq, Tk, dtype=dtype), mask)) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        weights = ctx.expect_tensor(pending.value(), (B, H, Tq, Tk), dtype, what="masked_softmax")
        expect_masked_weights(ctx, weights, mask)


@check("3.2", "fully-padded-rows", P, Kind.PROPERTY, zh="键全为填充的行全为 0，没有 NaN",
       en="a row whose keys are all padded is all zeros, never NaN", weight=2,
       statement=("整行都是填充的，全为 0", "任何位置都不能出现 NaN 或 inf"))
def _msm_dead(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3, low=3)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    started = [(dtype, ctx.start(ctx.randn(B, Tq, Tk, dtype=dtype), mask)) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        weights = ctx.expect_tensor(pending.value(), (B, Tq, Tk), dtype, what="masked_softmax")
        # ordinary real scores: every finite fill gives the fully padded row the same uniform weights
        expect_masked_weights(ctx, weights, mask, diagnose_dead=False)


@check("3.2", "matches-torch", P, Kind.NUMERIC, zh="与 torch 的 F.scaled_dot_product_attention 的带掩码权重一致",
       en="agrees with the masked weights of torch's F.scaled_dot_product_attention", weight=2)
def _msm_torch(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk = ctx.sizes(4)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = [(lead, dtype, scores, ctx.start(scores, mask)) for lead in ((B,), (B, H)) for dtype in DTYPES
               for scores in [ctx.randn(*lead, Tq, Tk, dtype=dtype, scale=3.0)]]
    yield      # the next check begins here, while the worker runs these calls
    for lead, dtype, scores, pending in started:
        want = ctx.expected(torch_masked_softmax, scores, mask)
        got = ctx.expect_tensor(pending.value(), (*lead, Tq, Tk), dtype, what="masked_softmax")
        ctx.expect_close(got, want, dtype, what="masked_softmax")


@check("3.2", "very-negative-scores", P, Kind.NUMERIC, zh="有效键的分数本身很负（-1e4、-1e9、-inf）时填充键的权重仍恰好为 0",
       en="padded keys still get exactly 0 when the real scores are very negative themselves (-1e4, -1e9, -inf)",
       weight=2, statement=("有效键的分数本身也可能很负（比如 -1e4，甚至 -1e9 以下），这时填充键的权重也必须恰好为 0",
                            r"scores 里可能已经有 $-\infty$（比如先用 3.5 的因果掩码填过），填充键的权重照样恰好为 0"))
def _msm_negative(ctx: Context) -> Iterator[None]:
    # At most 32 weights a call: self-check's fingerprints keep a mistake's whole output, so the one place
    # where two fills differ (a fully padded row, patched or not) is never sampled away.
    Tq, Tk = 2, ctx.sizes(1, low=3, high=4)[0]
    started = [(dtype, kinds, case, ctx.start(case[0], case[1])) for dtype, kinds in NEGATIVE_CALLS
               for case in [negative_rows(ctx, kinds, Tq, Tk, dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, kinds, (scores, mask, finite), pending in started:
        with ctx.case(*negative_case(dtype, kinds)):
            want = ctx.expected(torch_masked_softmax, scores[finite], mask[finite])
            got = ctx.expect_tensor(pending.value(), tuple(scores.shape), dtype, what="masked_softmax")
            expect_masked_weights(ctx, got, mask, scores=scores)
            ctx.expect_close(got[finite], want, dtype, what=FINITE_ROWS)


@check("3.2", "padded-scores-ignored", P, Kind.NUMERIC, zh="填充键位置上的分数再大（比有效键大上千）也不影响结果",
       en="the scores at padded keys change nothing, even a thousand above the real ones",
       statement="填充键位置上的分数可以是任何有限的数（比如比有效键大上千的垃圾值），都不能影响结果")
def _msm_garbage(ctx: Context) -> Iterator[None]:
    B, Tq, Tk = ctx.sizes(3, low=3)
    scores, mask = garbage_padding(ctx, B, Tq, Tk)
    # float64 first: its exp overflows later than float32's
    started = [(dtype, s, ctx.start(s, mask)) for dtype in DTYPES[::-1] for s in [scores.to(dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, s, pending in started:
        with ctx.case(f"{dtype}：填充键上是很大的垃圾值", f"{dtype}: large garbage at the padded keys"):
            want = ctx.expected(torch_masked_softmax, s, mask)
            got = ctx.expect_tensor(pending.value(), (B, Tq, Tk), dtype, what="masked_softmax")
            expect_masked_weights(ctx, got, mask)
            ctx.expect_close(got, want, dtype, what="masked_softmax")


# -- 3.3 masked_attention -------------------------------------------------------------
def torch_masked_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor,
                           mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's masked attention in float64: ``F.scaled_dot_product_attention`` with the boolean mask.

    Its weights are the same call with the identity as V (weights @ I = weights). Rows
    whose keys are all padded are set to 0, whatever this torch version gives there
    (NaN in some, 0 in others): the checks test them as a property.
    """
    q, k, v = Q.double(), K.double(), V.double()
    keep = ~key_mask_like(mask, q)                                 # (B, 1.., Tk): True = may attend
    eye = torch.eye(k.shape[-2], dtype=torch.float64).expand(*k.shape[:-1], k.shape[-2])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=keep)
    dead = ~live(mask)
    out[dead], weights[dead] = 0.0, 0.0
    return out, weights


def random_qkv(ctx: Context, lead: tuple[int, ...], Tq: int, Tk: int, Dk: int, Dv: int,
               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded Q (*lead, Tq, Dk), K (*lead, Tk, Dk), V (*lead, Tk, Dv)."""
    return (ctx.randn(*lead, Tq, Dk, dtype=dtype), ctx.randn(*lead, Tk, Dk, dtype=dtype),
            ctx.randn(*lead, Tk, Dv, dtype=dtype))


@check("3.3", "shape-dtype", P, Kind.SHAPE, zh="out 与 weights 的形状和 dtype", en="shapes and dtype of out and weights",
       statement=("masked_attention(Q, K, V, key_padding_mask)",
                  "out 形状 (B, ..., Tq, Dv)，weights 形状 (B, ..., Tq, Tk)"))
def _mat_shape(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk, Dk, Dv = ctx.sizes(6)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = []
    for lead in ((B,), (B, H)):
        for dtype in DTYPES:
            Q, K, V = random_qkv(ctx, lead, Tq, Tk, Dk, Dv, dtype)
            started.append((lead, dtype, ctx.start(Q, K, V, mask)))
    yield      # the next check begins here, while the worker runs these calls
    for lead, dtype, pending in started:
        out, weights = ctx.expect_tuple(pending.value(), 2)
        ctx.expect_tensor(out, (*lead, Tq, Dv), dtype, what="out")
        ctx.expect_tensor(weights, (*lead, Tq, Tk), dtype, what="weights")


@check("3.3", "masked-weights", P, Kind.PROPERTY, zh="填充键权重为 0、每行加和为 1、全填充行为 0 且 out 为 0",
       en="padded keys 0, rows sum to 1, fully padded rows zero with out zero", weight=2,
       statement="权重满足 3.2 的全部性质")
def _mat_props(ctx: Context) -> Iterator[None]:
    B, Tq, Tk, D = ctx.sizes(4, low=3)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk, empty_row=True), Tk)
    Q, K, V = ctx.randn(B, Tq, D), ctx.randn(B, Tk, D), ctx.randn(B, Tk, D)
    pending = ctx.start(Q, K, V, mask)
    yield      # the next check begins here, while the worker runs this call
    out, weights = ctx.expect_tuple(pending.value(), 2)
    w = ctx.expect_tensor(weights, (B, Tq, Tk), torch.float64, what="weights")
    o = ctx.expect_tensor(out, (B, Tq, D), torch.float64, what="out")
    expect_masked_weights(ctx, w, mask, diagnose_dead=False)      # ordinary scores: see expect_masked_weights
    dead = o[~live(mask)]
    ctx.expect(not torch.isnan(dead).any() and bool((dead == 0).all()),
               "键全部是填充的那一行，out 应当全为 0（权重全 0，乘 V 还是 0），实际不是",
               "for a row whose keys are all padded, out should be all zeros (zero weights times V), it is not",
               diagnose=True)


@check("3.3", "matches-torch", P, Kind.NUMERIC, zh="与带 attn_mask 的 F.scaled_dot_product_attention 一致",
       en="agrees with F.scaled_dot_product_attention with attn_mask", weight=3,
       statement=("Q：(B, ..., Tq, Dk)，K：(B, ..., Tk, Dk)，V：(B, ..., Tk, Dv)，key_padding_mask：(B, Tk)，True = 填充",
                  "用 Q 的最后一维 $D_k$ 缩放；转置用 K.transpose(-2, -1)（有批量维时 K.T 是错的）"))
def _mat_torch(ctx: Context) -> Iterator[None]:
    B, H, Tq, Tk, Dk, Dv = ctx.sizes(6)
    mask = mask_from_lengths(key_lengths(ctx, B, Tk), Tk)
    started = [(lead, dtype, qkv, ctx.start(*qkv, mask)) for lead in ((B,), (B, H)) for dtype in DTYPES
               for qkv in [random_qkv(ctx, lead, Tq, Tk, Dk, Dv, dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for lead, dtype, (Q, K, V), pending in started:
        want_out, want_w = ctx.expected(torch_masked_attention, Q, K, V, mask)
        out, weights = ctx.expect_tuple(pending.value(), 2)
        ctx.expect_close(ctx.expect_tensor(weights, (*lead, Tq, Tk), dtype, what="weights"), want_w, dtype,
                         what="weights")
        ctx.expect_close(ctx.expect_tensor(out, (*lead, Tq, Dv), dtype, what="out"), want_out, dtype,
                         what="out")


#: As NEGATIVE_CALLS for 3.3 (no -inf: finite Q and K cannot score -inf).
NEGATIVE_QKV_CALLS = ((torch.float64, ("normal", "-1e4", "-1e9", "dead")),
                      (torch.float32, ("normal", "-1e4", "dead")))


def negative_qkv(ctx: Context, kinds: tuple[str, ...], Tq: int, Tk: int, Dv: int,
                 dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q (B, Tq, 4), K (B, Tk, 4), V (B, Tk, Dv) and a key mask, one batch row per kind as in
    :func:`negative_rows`. The first feature carries the level (q0 = 2 * level, k0 = 1, so that
    Q K^T / sqrt(4) = level + the rest), the others are small integers: every score is exact, in
    float32 as in float64."""
    B, Dk = len(kinds), 4
    Q = ctx.randint(-2, 3, B, Tq, Dk).double()
    K = ctx.randint(-2, 3, B, Tk, Dk).double()
    V = ctx.randn(B, Tk, Dv)
    lengths = ctx.randint(1, Tk, B)
    for b, kind in enumerate(kinds):
        if kind == "dead":
            lengths[b] = 0
        elif kind in LEVELS:
            Q[b, :, 0] = 2.0 * LEVELS[kind]
            K[b, :, 0] = 1.0
    return Q.to(dtype), K.to(dtype), V.to(dtype), mask_from_lengths(lengths, Tk)


@check("3.3", "very-negative-scores", P, Kind.NUMERIC, zh="分数本身很负（-1e4、-1e9）时填充键的权重仍恰好为 0",
       en="padded keys still get exactly 0 when the real scores are very negative themselves (-1e4, -1e9)", weight=2,
       statement="填充键的权重恰好为 0（有效键的分数本身很负时也一样）")
def _mat_negative(ctx: Context) -> Iterator[None]:
    # At most 32 elements an output (see 3.2's very-negative-scores)
    Tq, Tk, Dv = 2, ctx.sizes(1, low=3, high=4)[0], ctx.sizes(1, low=2, high=4)[0]
    started = [(dtype, kinds, (Q, K, V, mask), ctx.start(Q, K, V, mask)) for dtype, kinds in NEGATIVE_QKV_CALLS
               for Q, K, V, mask in [negative_qkv(ctx, kinds, Tq, Tk, Dv, dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, kinds, (Q, K, V, mask), pending in started:
        with ctx.case(*negative_case(dtype, kinds)):
            want_out, want_w = ctx.expected(torch_masked_attention, Q, K, V, mask)
            out, weights = ctx.expect_tuple(pending.value(), 2)
            w = ctx.expect_tensor(weights, (len(kinds), Tq, Tk), dtype, what="weights")
            o = ctx.expect_tensor(out, (len(kinds), Tq, Dv), dtype, what="out")
            expect_masked_weights(ctx, w, mask)
            ctx.expect_close(w, want_w, dtype, what="weights")
            ctx.expect_close(o, want_out, dtype, what="out")


# -- 3.4 masked_cross_entropy ---------------------------------------------------------
#: The statement's formula of the loss, as the student reads it (a check's statement=).
LOSS_FORMULA = (r"\mathcal{L} = \frac{1}{N_{\text{有效}}}\sum_{(b,t):\ y_{bt} \neq \text{ignore}} "
                r"\Big(\log\sum_c e^{\ell_{btc}} - \ell_{b,t,y_{bt}}\Big)")


def padded_targets(ctx: Context, batch: int, steps: int, classes: int, lengths: torch.Tensor,
                   ignore_index: int) -> torch.Tensor:
    """Targets (B, T) int64: real classes before each length, ``ignore_index`` after."""
    low = 1 if ignore_index == 0 else 0      # ignore_index may itself be a class id
    targets = ctx.randint(low, classes, batch, steps)
    return targets.masked_fill(mask_from_lengths(lengths, steps), ignore_index)


def torch_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    C = logits.shape[-1]
    return F.cross_entropy(logits.double().reshape(-1, C), targets.reshape(-1), ignore_index=ignore_index)


def expect_loss(ctx: Context, value: Value, dtype: torch.dtype) -> torch.Tensor:
    return ctx.expect_tensor(value, (), dtype, what=Msg("masked_cross_entropy（0 维张量）",
                                                         "masked_cross_entropy (a 0-d tensor)"))


@check("3.4", "shape-dtype", P, Kind.SHAPE, zh="返回 0 维张量，dtype 与 logits 相同",
       en="returns a 0-d tensor with the dtype of logits",
       statement="返回一个 0 维张量，dtype 与 logits 相同（float32 进、float32 出")
def _mce_shape(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3)
    targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100)
    started = [(dtype, ctx.start(ctx.randn(B, T, C, dtype=dtype), targets)) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        expect_loss(ctx, pending.value(), dtype)


@check("3.4", "matches-torch", P, Kind.NUMERIC, zh="与 F.cross_entropy(..., ignore_index) 一致",
       en="agrees with F.cross_entropy(..., ignore_index)", weight=3,
       statement=("masked_cross_entropy(logits, targets, ignore_index=-100)", LOSS_FORMULA,
                  "logits：(B, T, C)，targets：(B, T) 的 int64，取值为 0..C-1 或 ignore_index",
                  "就等于 F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1), ignore_index=ignore_index)"))
def _mce_torch(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3, low=3)
    lengths = key_lengths(ctx, B, T)
    started = []
    for ignore_index in (-100, 0):
        targets = padded_targets(ctx, B, T, C, lengths, ignore_index)
        for dtype in DTYPES:
            logits = ctx.randn(B, T, C, dtype=dtype, scale=2.0)
            if ignore_index == -100:
                pending = ctx.start(logits, targets)                  # the default
            else:
                pending = ctx.start(logits, targets, ignore_index=ignore_index)
            started.append((ignore_index, targets, dtype, logits, pending))
    yield      # the next check begins here, while the worker runs these calls
    for ignore_index, targets, dtype, logits, pending in started:
        want = ctx.expected(torch_cross_entropy, logits, targets, ignore_index)
        ctx.expect_close(expect_loss(ctx, pending.value(), dtype), want, dtype,
                         what=f"masked_cross_entropy(logits, targets, ignore_index={ignore_index})")


@check("3.4", "no-padding", P, Kind.NUMERIC, zh="没有填充时等于普通交叉熵", en="without padding it is the plain cross entropy")
def _mce_plain(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3)
    logits, targets = ctx.randn(B, T, C), ctx.randint(0, C, B, T)
    pending = ctx.start(logits, targets)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_cross_entropy, logits, targets)
    ctx.expect_close(expect_loss(ctx, pending.value(), torch.float64), want, torch.float64,
                     what="masked_cross_entropy")


#: The loss's name in the messages of the checks with logits near 1e4.
NEAR_1E4 = Msg("masked_cross_entropy（logits 在 1e4 附近）", "masked_cross_entropy (logits near 1e4)")


@check("3.4", "large-logits", P, Kind.PROPERTY, zh="logits 在 1e4 附近时结果有限且正确（log-sum-exp 要减最大值）",
       en="logits near 1e4 give a finite, correct loss (subtract the max inside log-sum-exp)",
       statement="先减去每个位置 logits 的最大值，logits 上千也不能溢出")
def _mce_large(ctx: Context) -> Iterator[None]:
    B, T, C = ctx.sizes(3)
    targets = padded_targets(ctx, B, T, C, key_lengths(ctx, B, T), -100)
    logits = 1e4 + ctx.randn(B, T, C)
    pending = ctx.start(logits, targets)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_cross_entropy, logits, targets)
    got = expect_loss(ctx, pending.value(), torch.float64)
    ctx.expect(bool(torch.isfinite(got)),
               f"logits 在 1e4 附近时损失是 {got.item()}：exp(1e4) 溢出了，先减去每行最大值再做 log-sum-exp",
               f"with logits near 1e4 the loss is {got.item()}: exp(1e4) overflows; subtract each row's max "
               f"before the log-sum-exp", diagnose=True)
    ctx.expect_close(got, want, torch.float64, what=NEAR_1E4)


#: Logits thousands apart within a position, each case its own call, every target counted: "one-low" (one
#: class 3000 below the rest, never the target: a shift by the row's min overflows), "others-low" (every
#: class but the target 3000 below it: a shift by the mean overflows), "target-low" (the target alone 3000
#: below the rest: the log of a softmax computed by division is log 0), "positions-apart" (each position near
#: its own level, the levels 3000 apart: a shift by the max of all the logits underflows). Float64 first, where
#: each case catches only its own shift (float32's exp overflows past 88, where a mean shift fails "one-low" too).
SPREAD_CASES = {"one-low": ("有一个类别的 logits 比其余类别低上千", "one class's logit thousands below the rest"),
                "others-low": ("目标之外的 logits 都比目标低上千", "every logit but the target's thousands below it"),
                "target-low": ("目标类别的 logits 比其余类别低上千", "the target's logit thousands below the rest"),
                "positions-apart": ("各位置的 logits 相差上千", "positions whose logits are thousands apart")}


def spread_logits(ctx: Context, case: str, B: int, T: int, C: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (B, T, C) float64 and targets (B, T), every target counted (see SPREAD_CASES; C >= 6)."""
    logits = ctx.randn(B, T, C)
    if case == "one-low":
        targets = ctx.randint(1, C, B, T)                     # class 0 is the low one
        logits[..., 0] -= 3000.0
    elif case == "positions-apart":
        targets = ctx.randint(0, C, B, T)
        logits = logits + (torch.arange(B * T, dtype=torch.float64).reshape(B, T, 1) % 3 - 1) * 3000.0
    else:
        targets = ctx.randint(0, C, B, T)
        at_target = torch.zeros(B, T, C, dtype=torch.bool).scatter(-1, targets.unsqueeze(-1), True)
        low = ~at_target if case == "others-low" else at_target
        logits = logits - 3000.0 * low
    return logits, targets


@check("3.4", "large-spread", P, Kind.NUMERIC, zh="logits 相差上千（同一位置之内或各位置之间）时结果有限且正确",
       en="logits thousands apart (within a position or between positions) give a finite, correct loss", weight=2,
       statement="同一位置的 logits 相差上千（比如 3000 和 -3000），或者各位置的 logits 相差上千时也一样")
def _mce_spread(ctx: Context) -> Iterator[None]:
    B, T = ctx.sizes(2, low=2, high=5)
    C = ctx.sizes(1, low=6, high=9)[0]
    started = []        # every call in flight before the first is compared (see Context.start)
    for dtype in DTYPES[::-1]:
        for case, names in SPREAD_CASES.items():
            logits, targets = spread_logits(ctx, case, B, T, C)
            logits = logits.to(dtype)
            started.append((dtype, names, logits, targets, ctx.start(logits, targets)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, (zh, en), logits, targets, pending in started:
        with ctx.case(f"{dtype}：{zh}", f"{dtype}: {en}"):
            want = ctx.expected(torch_cross_entropy, logits, targets)
            got = expect_loss(ctx, pending.value(), dtype)
            ctx.expect_close(got, want, dtype, what="masked_cross_entropy")


# -- 3.5 causal_mask ------------------------------------------------------------------
def torch_causal(T: int) -> torch.Tensor:
    """torch's own causal mask (0 / -inf floats) as bool: True where key j > query i."""
    return torch.isinf(nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64))


def expect_causal_value(ctx: Context, value: Value, T: int, diagnose: bool = True) -> torch.Tensor:
    """The value of a call ``causal_mask(T)`` (begun with Context.start): a bool (T, T) mask."""
    device = value.spec.get("device") if value.kind == "tensor" else None
    # causal_mask(T) has no input tensor to follow: any device is fine.
    return expect_bool(ctx, value, (T, T), device=device, what=f"causal_mask({T})", diagnose=diagnose)


@check("3.5", "shape-dtype", P, Kind.SHAPE, zh="形状 (T, T)，dtype bool", en="shape (T, T), dtype bool",
       statement=("causal_mask(T)", "返回形状 (T, T) 的 bool 张量"))
def _causal_shape(ctx: Context) -> Iterator[None]:
    started = [(T, ctx.start(T)) for T in ctx.sizes(3)]
    yield      # the next check begins here, while the worker runs these calls
    for T, pending in started:
        expect_causal_value(ctx, pending.value(), T)


@check("3.5", "matches-torch", P, Kind.NUMERIC, zh="与 nn.Transformer.generate_square_subsequent_mask 一致",
       en="agrees with nn.Transformer.generate_square_subsequent_mask", weight=2,
       statement="[i, j] 为 True 当且仅当 j > i")
def _causal_torch(ctx: Context) -> Iterator[None]:
    started = [(T, ctx.start(T)) for T in ctx.sizes(3)]
    yield      # the next check begins here, while the worker runs these calls
    for T, pending in started:
        expect_exact(ctx, expect_causal_value(ctx, pending.value(), T), torch_causal(T), f"causal_mask({T})")


@check("3.5", "sees-itself-and-past", P, Kind.PROPERTY, zh="每个位置看得见自己和之前的位置，第 i 行有 i+1 个可见",
       en="each position sees itself and the past: row i has i+1 visible keys",
       statement="对角线（看自己）是 False")
def _causal_rows(ctx: Context) -> Iterator[None]:
    T = ctx.sizes(1, low=4)[0]
    pending = ctx.start(T)
    yield      # the next check begins here, while the worker runs this call
    mask = expect_causal_value(ctx, pending.value(), T)
    ctx.expect(not mask.diagonal().any(),
               "对角线应当是 False：每个位置都能看见自己（用 j > i，不是 j >= i）",
               "the diagonal should be False: every position sees itself (use j > i, not j >= i)", diagnose=True)
    visible = (~mask).sum(dim=-1)
    ctx.expect(torch.equal(visible, torch.arange(1, T + 1)),
               f"第 i 行应有 i+1 个可见位置 {list(range(1, T + 1))}，实际是 {visible.tolist()}",
               f"row i should have i+1 visible keys {list(range(1, T + 1))}, got {visible.tolist()}", diagnose=True)
