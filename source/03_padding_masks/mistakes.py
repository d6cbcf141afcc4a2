"""Known mistakes of 03_padding_masks (instructor side only).

Each function has the student's signature and makes one realistic mistake; the
rest of it is right, so a match on the same inputs names exactly that mistake.
"""
from __future__ import annotations

import math

import torch

from autograder.catalog import mistake


def _key_mask(mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    B, Tk = mask.shape
    return mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)              # (B, 1.., 1, Tk)


def _softmax(x: torch.Tensor) -> torch.Tensor:
    """A hand softmax over the last dim, as a student writes it (3.2 forbids the library one).

    A row of -inf gives NaN, exactly as torch.softmax does.
    """
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def _safe_softmax(scores: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """Right masked softmax given a broadcastable ``hidden`` mask (zeros on fully hidden rows)."""
    filled = scores.masked_fill(hidden, float("-inf"))
    row_max = filled.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(filled - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _dead_rows(key_padding_mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(B, 1.., 1, 1): True for the batch rows whose keys are all padded."""
    B = key_padding_mask.shape[0]
    return key_padding_mask.all(dim=-1).reshape(B, *([1] * (scores.dim() - 1)))


def _filled_softmax(scores, key_padding_mask, fill, patch=None):
    """A finite ``fill`` in place of -inf, a hand softmax, then optionally a patch: ``"rows"`` zeroes the
    fully padded rows (torch.where on key_padding_mask.all(-1)), ``"pads"`` zeroes every padded key's
    weight (masked_fill after the softmax, the same as multiplying by ~mask)."""
    mask = _key_mask(key_padding_mask, scores)
    weights = _softmax(scores.masked_fill(mask, fill))
    if patch == "rows":
        weights = torch.where(_dead_rows(key_padding_mask, scores), torch.zeros_like(weights), weights)
    elif patch == "pads":
        weights = weights.masked_fill(mask, 0.0)
    return weights


def _exp_normalized(shifted: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """exp of ``shifted`` with the hidden keys at -inf, divided by its row sums (0 for a row that has none):
    right only when ``shifted`` keeps every exp finite and the largest one non-zero."""
    e = torch.exp(shifted.masked_fill(hidden, float("-inf")))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _guarded(e: torch.Tensor) -> torch.Tensor:
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _real_max(scores: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """Each row's max over its real keys, 0 for a row without one."""
    top = scores.masked_fill(hidden, float("-inf")).amax(dim=-1, keepdim=True)
    return torch.where(torch.isinf(top), torch.zeros_like(top), top)


# -- 3.1 padding_mask ---------------------------------------------------------------
def _positions(lengths, max_len):
    if max_len is None:
        max_len = int(lengths.max())
    return torch.arange(max_len, device=lengths.device).unsqueeze(0), lengths.unsqueeze(1)


# First: its values are right, only the dtype is not, and the diagnosis compares values; a later mistake is
# only ever named where its values are wrong.
@mistake("3.1", "float-mask", zh="返回的是 0/1 的浮点张量：要的是 bool 掩码（比较的结果本来就是 bool，不要再 .float()）",
         en="returns a float 0/1 tensor: a bool mask is asked for (a comparison already gives bool; drop .float())")
def _pad_float(lengths, max_len=None):
    positions, lens = _positions(lengths, max_len)
    return (positions >= lens).float()


@mistake("3.1", "mask-inverted", zh="掩码反了：True 应当标在填充位置，不是真实词元上",
         en="the mask is inverted: True marks padded positions, not real tokens")
def _pad_inverted(lengths, max_len=None):
    positions, lens = _positions(lengths, max_len)
    return positions < lens


@mistake("3.1", "off-by-one", zh="差一位：位置 == 长度 已经是填充（用 >=，不是 >）",
         en="off by one: position == length is already padding (use >=, not >)")
def _pad_off_by_one(lengths, max_len=None):
    positions, lens = _positions(lengths, max_len)
    return positions > lens


@mistake("3.1", "ignores-max-len", zh="忽略了 max_len 参数：给定时宽度应为 max_len",
         en="max_len is ignored: when given, the mask is max_len wide")
def _pad_no_max_len(lengths, max_len=None):
    positions, lens = _positions(lengths, None)
    return positions >= lens


@mistake("3.1", "one-early", zh="差一位：最后一个真实词元也标成了填充（t >= 长度 - 1），应当是 t >= 长度",
         en="off by one: the last real token is marked as padding too (t >= length - 1); use t >= length")
def _pad_one_early(lengths, max_len=None):
    positions, lens = _positions(lengths, max_len)
    return positions >= lens - 1


@mistake("3.1", "default-batch-width", zh="max_len 的默认值取成了批量大小 len(lengths)，应当是最长的长度 lengths.max()",
         en="max_len defaults to the batch size len(lengths); it should be the longest length, lengths.max()")
def _pad_batch_width(lengths, max_len=None):
    positions, lens = _positions(lengths, len(lengths) if max_len is None else max_len)
    return positions >= lens



# -- 3.2 masked_softmax ---------------------------------------------------------------
@mistake("3.2", "mask-inverted", zh="掩码用反了：True 表示填充，要掩蔽的是 True 的位置",
         en="the mask is used inverted: True means padded, hide the True positions")
def _msm_inverted(scores, key_padding_mask):
    return _safe_softmax(scores, _key_mask(~key_padding_mask, scores))


@mistake("3.2", "nan-on-fully-padded", zh="填 -inf 后直接 softmax：键全为填充的行得到 NaN，应当全为 0",
         en="-inf then a plain softmax: a row whose keys are all padded gets NaN, it should be all zeros")
def _msm_nan(scores, key_padding_mask):
    return _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), float("-inf")))


@mistake("3.2", "fill-minus-1e9", zh="用 -1e9 代替 -inf：键全为填充的行变成均匀分布，而不是全 0",
         en="-1e9 in place of -inf: a row whose keys are all padded comes out uniform instead of all zeros")
def _msm_1e9(scores, key_padding_mask):
    return _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), -1e9))


@mistake("3.2", "fill-zero", zh="用 0 填充被掩蔽的分数：exp(0) 不是 0，填充键仍有权重；应填 -inf",
         en="masked scores filled with 0: exp(0) is not 0, padded keys keep weight; fill with -inf")
def _msm_zero(scores, key_padding_mask):
    return _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), 0.0))


@mistake("3.2", "zeroed-after-softmax", zh="先 softmax 再把填充位置置 0，却没有重新归一化：每行加和小于 1",
         en="softmax first, then padded keys zeroed without renormalizing: rows sum to less than 1")
def _msm_after(scores, key_padding_mask):
    return _softmax(scores).masked_fill(_key_mask(key_padding_mask, scores), 0.0)


@mistake("3.2", "mask-on-queries", zh="掩码加在了查询轴（倒数第二维）上：key_padding_mask 掩蔽的是键（最后一维）",
         en="the mask went on the query axis (dim -2): key_padding_mask hides keys (the last dim)")
def _msm_queries(scores, key_padding_mask):
    B, Tk = key_padding_mask.shape
    rows = key_padding_mask.reshape(B, *([1] * (scores.dim() - 3)), Tk, 1)   # (B, 1.., Tk, 1)
    return _softmax(scores.masked_fill(rows, float("-inf")))


@mistake("3.2", "fill-minus-1e4", zh="用 -1e4 代替 -inf：键全为填充的行变成均匀分布；有效键的分数也在 -1e4 附近时，填充键还会分走权重",
         en="-1e4 in place of -inf: a fully padded row comes out uniform, and padded keys get weight when the "
            "real scores are near -1e4 too")
def _msm_1e4(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, -1e4)


@mistake("3.2", "fill-finfo-min", zh="用 torch.finfo(dtype).min 代替 -inf：键全为填充的行变成均匀分布，而不是全 0",
         en="torch.finfo(dtype).min in place of -inf: a fully padded row comes out uniform instead of all zeros")
def _msm_finfo(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, torch.finfo(scores.dtype).min)


# Listed before the -1e4 and -1e9 row fixes: on a row whose real keys all score -inf the three agree.
@mistake("3.2", "fill-finfo-min-row-fix", zh="用 torch.finfo(dtype).min 代替 -inf，再把整行填充的行改成 0：有效键的分数是 -inf 时"
                                            "（比如因果掩码留下的），填充键的 finfo.min 比它大，分走了全部权重",
         en="torch.finfo(dtype).min in place of -inf, fully padded rows then set to 0: where the real keys score "
            "-inf (a causal mask's, say) the padded keys' finfo.min is larger and takes all the weight")
def _msm_finfo_rows(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, torch.finfo(scores.dtype).min, "rows")


@mistake("3.2", "fill-minus-1e4-row-fix", zh="用 -1e4 代替 -inf，再把整行填充的行改成 0：有效键的分数也在 -1e4 附近时，填充键仍分走权重",
         en="-1e4 in place of -inf, fully padded rows then set to 0: padded keys still get weight when the real "
            "scores are near -1e4 too")
def _msm_1e4_rows(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, -1e4, "rows")


@mistake("3.2", "fill-minus-1e9-row-fix", zh="用 -1e9 代替 -inf，再把整行填充的行改成 0：有效键的分数也在 -1e9 附近时，填充键仍分走权重",
         en="-1e9 in place of -inf, fully padded rows then set to 0: padded keys still get weight when the real "
            "scores are near -1e9 too")
def _msm_1e9_rows(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, -1e9, "rows")


@mistake("3.2", "fill-minus-1e4-zero-pads", zh="用 -1e4 代替 -inf，softmax 之后再把填充键的权重清零：有效键的分数也在 -1e4 附近时，"
                                              "填充键先分走了一部分权重，清零后每行的和小于 1",
         en="-1e4 in place of -inf, the padded keys' weights zeroed after the softmax: when the real scores are "
            "near -1e4 too the padded keys took a share first, and the rows sum to less than 1")
def _msm_1e4_pads(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, -1e4, "pads")


@mistake("3.2", "fill-minus-1e9-zero-pads", zh="用 -1e9 代替 -inf，softmax 之后再把填充键的权重清零：有效键的分数也在 -1e9 附近时，"
                                              "填充键先分走了一部分权重，清零后每行的和小于 1",
         en="-1e9 in place of -inf, the padded keys' weights zeroed after the softmax: when the real scores are "
            "near -1e9 too the padded keys took a share first, and the rows sum to less than 1")
def _msm_1e9_pads(scores, key_padding_mask):
    return _filled_softmax(scores, key_padding_mask, -1e9, "pads")


@mistake("3.2", "zero-pads-after-nan", zh="填 -inf、普通 softmax，再把填充键的权重清零来去掉整行填充的 NaN：有效键的分数全是 -inf 的行"
                                        "（比如因果掩码留下的）在有效键上仍是 NaN；任何位置都不能出现 NaN",
         en="-inf, a plain softmax, then the padded keys' weights zeroed to clear the fully padded rows' NaN: a row "
            "whose real keys all score -inf (a causal mask's leftovers, say) keeps NaN at its real keys; no position "
            "may hold NaN")
def _msm_zero_pads_after_nan(scores, key_padding_mask):
    hidden = _key_mask(key_padding_mask, scores)
    return _softmax(scores.masked_fill(hidden, float("-inf"))).masked_fill(hidden, 0.0)


@mistake("3.2", "no-max-shift", zh="exp 之前没有减去行最大值：分数上千时 exp 溢出成 inf，得到 NaN",
         en="no max subtracted before exp: scores in the thousands overflow to inf and give NaN")
def _msm_no_shift(scores, key_padding_mask):
    return _exp_normalized(scores, _key_mask(key_padding_mask, scores))


@mistake("3.2", "shift-by-mean", zh="减去的是每行的均值而不是最大值：同一行的分数相差上千时，比均值大上千的分数 exp 溢出",
         en="each row's mean subtracted instead of its max: when a row's scores are thousands apart, those a "
            "thousand above the mean overflow in exp")
def _msm_mean(scores, key_padding_mask):
    return _exp_normalized(scores - scores.mean(dim=-1, keepdim=True), _key_mask(key_padding_mask, scores))


@mistake("3.2", "shift-by-min", zh="减去的是每行的最小值而不是最大值：同一行的分数相差上千时 exp 溢出",
         en="each row's min subtracted instead of its max: exp overflows when a row's scores are thousands apart")
def _msm_min(scores, key_padding_mask):
    return _exp_normalized(scores - scores.amin(dim=-1, keepdim=True), _key_mask(key_padding_mask, scores))


@mistake("3.2", "shift-by-global-max", zh="减去的是整个张量的最大值，不是每行自己的：比它低上千的行 exp 全部下溢成 0",
         en="the whole tensor's max subtracted, not each row's own: rows thousands below it underflow to all zeros")
def _msm_global(scores, key_padding_mask):
    hidden = _key_mask(key_padding_mask, scores)
    top = scores.masked_fill(hidden, float("-inf")).max()
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    return _exp_normalized(scores - top, hidden)


@mistake("3.2", "max-includes-padding", zh="行最大值把填充键也算进去了：填充键的分数大上千时，有效键的 exp 全部下溢成 0；"
                                          "最大值只在有效键上取（先 masked_fill(-inf) 再 amax(dim=-1)）",
         en="the row max counts the padded keys too: when they score a thousand more, every real key's exp "
            "underflows to 0; take the max over the real keys only (masked_fill(-inf), then amax)")
def _msm_max_all(scores, key_padding_mask):
    hidden = _key_mask(key_padding_mask, scores)
    return _guarded(torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * ~hidden)


@mistake("3.2", "multiply-mask-after-exp", zh="先 exp 再乘掩码：填充键的分数很大时 exp 溢出成 inf，inf × 0 = NaN；"
                                             "在 exp 之前掩蔽（填 -inf）",
         en="exp first, then the mask multiplied in: a large score at a padded key overflows to inf, and "
            "inf * 0 = NaN; mask before exp (fill -inf)")
def _msm_multiply(scores, key_padding_mask):
    hidden = _key_mask(key_padding_mask, scores)
    return _guarded(torch.exp(scores - _real_max(scores, hidden)) * ~hidden)


# -- 3.3 masked_attention -------------------------------------------------------------
def _attention(Q, K, V, hidden, scale):
    weights = _safe_softmax(Q @ K.transpose(-2, -1) * scale, hidden)
    return weights @ V, weights


@mistake("3.3", "no-scale", zh="看起来少了 1/√d 缩放", en="looks like the 1/sqrt(d) scale is missing")
def _mat_no_scale(Q, K, V, key_padding_mask):
    scores = Q @ K.transpose(-2, -1)
    return _attention(Q, K, V, _key_mask(key_padding_mask, scores), 1.0)


@mistake("3.3", "mask-ignored", zh="没有用上掩码：填充的键仍然得到了权重",
         en="the mask is not applied: padded keys still get weight")
def _mat_ignored(Q, K, V, key_padding_mask):
    return _attention(Q, K, V, torch.zeros((), dtype=torch.bool), 1 / math.sqrt(Q.shape[-1]))


@mistake("3.3", "mask-inverted", zh="掩码用反了：True 表示填充，要掩蔽的是 True 的位置",
         en="the mask is used inverted: True means padded, hide the True positions")
def _mat_inverted(Q, K, V, key_padding_mask):
    scores = Q @ K.transpose(-2, -1)
    return _attention(Q, K, V, _key_mask(~key_padding_mask, scores), 1 / math.sqrt(Q.shape[-1]))


@mistake("3.3", "nan-on-fully-padded", zh="填 -inf 后直接 softmax：键全为填充的行得到 NaN，应当全为 0",
         en="-inf then a plain softmax: a row whose keys are all padded gets NaN, it should be all zeros")
def _mat_nan(Q, K, V, key_padding_mask):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), float("-inf")))
    return weights @ V, weights


@mistake("3.3", "fill-minus-1e9", zh="掩码填的是 -1e9 而不是 -inf（多半在 masked_softmax 里）：键全为填充的行变成均匀分布",
         en="the mask fills -1e9, not -inf (likely inside masked_softmax): a row whose keys are all padded "
            "comes out uniform")
def _mat_1e9(Q, K, V, key_padding_mask):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), -1e9))
    return weights @ V, weights


def _scores(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])


def _filled_attention(Q, K, V, key_padding_mask, fill, patch=None):
    weights = _filled_softmax(_scores(Q, K), key_padding_mask, fill, patch)
    return weights @ V, weights


@mistake("3.3", "fill-minus-1e4", zh="掩码填的是 -1e4 而不是 -inf（多半在 masked_softmax 里）：键全为填充的行变成均匀分布；"
                                    "分数也在 -1e4 附近时填充键还会分走权重",
         en="the mask fills -1e4, not -inf (likely inside masked_softmax): a fully padded row comes out uniform, "
            "and padded keys get weight when the scores are near -1e4 too")
def _mat_1e4(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, -1e4)


@mistake("3.3", "fill-finfo-min", zh="掩码填的是 torch.finfo(dtype).min 而不是 -inf（多半在 masked_softmax 里）：键全为填充的行变成均匀分布",
         en="the mask fills torch.finfo(dtype).min, not -inf (likely inside masked_softmax): a fully padded row "
            "comes out uniform")
def _mat_finfo(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, torch.finfo(Q.dtype).min)


@mistake("3.3", "fill-minus-1e4-row-fix", zh="掩码填 -1e4、再把整行填充的行改成 0：分数也在 -1e4 附近时，填充键仍分走权重",
         en="the mask fills -1e4 and fully padded rows are then set to 0: padded keys still get weight when the "
            "scores are near -1e4 too")
def _mat_1e4_rows(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, -1e4, "rows")


@mistake("3.3", "fill-minus-1e9-row-fix", zh="掩码填 -1e9、再把整行填充的行改成 0：分数也在 -1e9 附近时，填充键仍分走权重",
         en="the mask fills -1e9 and fully padded rows are then set to 0: padded keys still get weight when the "
            "scores are near -1e9 too")
def _mat_1e9_rows(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, -1e9, "rows")


@mistake("3.3", "fill-minus-1e4-zero-pads", zh="掩码填 -1e4、softmax 之后再把填充键的权重清零：分数也在 -1e4 附近时，每行的和小于 1",
         en="the mask fills -1e4 and the padded keys' weights are zeroed after the softmax: the rows sum to less "
            "than 1 when the scores are near -1e4 too")
def _mat_1e4_pads(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, -1e4, "pads")


@mistake("3.3", "fill-minus-1e9-zero-pads", zh="掩码填 -1e9、softmax 之后再把填充键的权重清零：分数也在 -1e9 附近时，每行的和小于 1",
         en="the mask fills -1e9 and the padded keys' weights are zeroed after the softmax: the rows sum to less "
            "than 1 when the scores are near -1e9 too")
def _mat_1e9_pads(Q, K, V, key_padding_mask):
    return _filled_attention(Q, K, V, key_padding_mask, -1e9, "pads")


@mistake("3.3", "zeroed-after-softmax", zh="先 softmax 再把填充键的权重置 0，却没有重新归一化：每行加和小于 1",
         en="softmax first, then padded keys zeroed without renormalizing: rows sum to less than 1")
def _mat_after(Q, K, V, key_padding_mask):
    scores = _scores(Q, K)
    weights = _softmax(scores).masked_fill(_key_mask(key_padding_mask, scores), 0.0)
    return weights @ V, weights


@mistake("3.3", "shift-by-mean", zh="softmax 减去的是每行的均值而不是最大值：分数相差上千时 exp 溢出",
         en="the softmax subtracts each row's mean instead of its max: exp overflows when scores are thousands apart")
def _mat_mean(Q, K, V, key_padding_mask):
    scores = _scores(Q, K)
    weights = _exp_normalized(scores - scores.mean(dim=-1, keepdim=True), _key_mask(key_padding_mask, scores))
    return weights @ V, weights


@mistake("3.3", "shift-by-min", zh="softmax 减去的是每行的最小值而不是最大值：分数相差上千时 exp 溢出",
         en="the softmax subtracts each row's min instead of its max: exp overflows when scores are thousands apart")
def _mat_min(Q, K, V, key_padding_mask):
    scores = _scores(Q, K)
    weights = _exp_normalized(scores - scores.amin(dim=-1, keepdim=True), _key_mask(key_padding_mask, scores))
    return weights @ V, weights


# -- 3.4 masked_cross_entropy ---------------------------------------------------------
def _token_nll(logits, targets, ignore_index):
    """Per-position NLL (B, T), stable, 0 at ignored positions; and the keep mask."""
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)          # (B, T)
    return nll * keep, keep


@mistake("3.4", "mean-over-pads", zh="平均时把填充位置也算进了分母：应当只除以计入的目标个数",
         en="the mean counts padded positions too: divide by the number of counted targets only")
def _mce_mean_pads(logits, targets, ignore_index=-100):
    nll, _ = _token_nll(logits, targets, ignore_index)
    return nll.sum() / targets.numel()


@mistake("3.4", "sum-not-mean", zh="返回的是总和不是平均：除以计入的目标个数",
         en="returns the sum, not the mean: divide by the number of counted targets")
def _mce_sum(logits, targets, ignore_index=-100):
    nll, _ = _token_nll(logits, targets, ignore_index)
    return nll.sum()


@mistake("3.4", "no-max-subtraction", zh="log-sum-exp 没有先减最大值：logits 很大时 exp 溢出成 inf/NaN",
         en="log-sum-exp without subtracting the max: exp overflows to inf/NaN for large logits")
def _mce_unstable(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    log_z = torch.log(torch.exp(logits).sum(dim=-1))                    # (B, T), inf for large logits
    picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)          # (B, T)
    nll = (log_z - picked) * keep
    return nll.sum() / keep.sum()


@mistake("3.4", "softmax-over-time", zh="log-softmax 做在了时间轴上：应当对类别（最后一维）归一化",
         en="the log-softmax runs over the time axis: normalize over the classes (the last dim)")
def _mce_wrong_dim(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    log_probs = torch.log_softmax(logits, dim=1)
    nll = -log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1) * keep
    return nll.sum() / keep.sum()


@mistake("3.4", "hard-coded-ignore-index", zh="忽略的是写死的 -100，没有用 ignore_index 参数",
         en="ignores a hard-coded -100 instead of the ignore_index argument")
def _mce_hard_coded(logits, targets, ignore_index=-100):
    nll, keep = _token_nll(logits, targets, -100)
    return nll.sum() / keep.sum()


def _picked(logits, targets, ignore_index):
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    return logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1), keep            # (B, T) each


# Before the shifts by the mean and the min: where the target alone is far below the rest, all three give inf.
@mistake("3.4", "log-of-softmax", zh="先算出概率再取 log（log(exp(ℓ_y - m) / Σ exp)）：目标的概率下溢成 0 时 log 0 = -inf；"
                                    "直接用 log-sum-exp 减去 ℓ_y",
         en="the probabilities first, then their log: where the target's probability underflows to 0 the log is "
            "-inf; use the log-sum-exp minus the target's logit")
def _mce_log_probs(logits, targets, ignore_index=-100):
    e = torch.exp(logits - logits.amax(dim=-1, keepdim=True))
    probs = e / e.sum(dim=-1, keepdim=True)
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    nll = -torch.log(probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)) * keep
    return nll.sum() / keep.sum()


@mistake("3.4", "shift-by-mean", zh="log-sum-exp 里减去的是每个位置 logits 的均值而不是最大值：logits 相差上千时 exp 溢出",
         en="the log-sum-exp subtracts each position's mean logit instead of its max: exp overflows when the "
            "logits are thousands apart")
def _mce_mean(logits, targets, ignore_index=-100):
    shift = logits.mean(dim=-1, keepdim=True)
    log_z = shift.squeeze(-1) + torch.log(torch.exp(logits - shift).sum(dim=-1))
    picked, keep = _picked(logits, targets, ignore_index)
    return ((log_z - picked) * keep).sum() / keep.sum()


@mistake("3.4", "shift-by-min", zh="log-sum-exp 里减去的是每个位置 logits 的最小值而不是最大值：logits 相差上千时 exp 溢出",
         en="the log-sum-exp subtracts each position's min logit instead of its max: exp overflows when the "
            "logits are thousands apart")
def _mce_min(logits, targets, ignore_index=-100):
    shift = logits.amin(dim=-1, keepdim=True)
    log_z = shift.squeeze(-1) + torch.log(torch.exp(logits - shift).sum(dim=-1))
    picked, keep = _picked(logits, targets, ignore_index)
    return ((log_z - picked) * keep).sum() / keep.sum()


@mistake("3.4", "global-max-shift", zh="log-sum-exp 里减去的是整个 logits 张量的最大值，不是每个位置自己的：比它低上千的位置"
                                      "exp 全部下溢成 0，log 0 = -inf",
         en="the log-sum-exp subtracts the max of all the logits, not each position's own: positions thousands "
            "below it underflow to 0, and log 0 is -inf")
def _mce_global(logits, targets, ignore_index=-100):
    shift = logits.max()
    log_z = shift + torch.log(torch.exp(logits - shift).sum(dim=-1))
    picked, keep = _picked(logits, targets, ignore_index)
    return ((log_z - picked) * keep).sum() / keep.sum()


@mistake("3.4", "mean-of-sequence-means", zh="先对每句求平均、再对句子求平均：长短不同的句子权重一样了；应当对所有有效位置一起平均",
         en="each sequence's mean, then the mean over sequences: short and long sequences weigh the same; "
            "average over all counted positions at once")
def _mce_per_sequence(logits, targets, ignore_index=-100):
    nll, keep = _token_nll(logits, targets, ignore_index)
    return (nll.sum(dim=1) / keep.sum(dim=1)).mean()


# -- 3.5 causal_mask ------------------------------------------------------------------
@mistake("3.5", "diagonal-masked", zh="对角线也被掩蔽了（j >= i）：每个位置应当看得见自己，用 j > i",
         en="the diagonal is masked too (j >= i): every position sees itself, use j > i")
def _causal_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=0)


@mistake("3.5", "lower-triangle", zh="掩蔽了下三角（过去），应当掩蔽上三角（未来，j > i）",
         en="the lower triangle (the past) is masked; mask the upper one (the future, j > i)")
def _causal_lower(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)


@mistake("3.5", "mask-inverted", zh="掩码反了：True 应当标在看不见的位置（j > i）",
         en="the mask is inverted: True marks the positions a query may NOT see (j > i)")
def _causal_inverted(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=0)


# Before float-mask: values_match takes any finite value as close to an expected -inf (compare's first,
# vectorized test allows |got - expected| <= atol + rtol * |expected|, inf <= inf), so after it this is named
# float-mask.
@mistake("3.5", "float-ones-mask", zh="返回的是 0/1 的浮点张量（torch.ones 默认是 float）：要的是 bool 掩码，给 torch.ones 加上 dtype=torch.bool",
         en="returns a float 0/1 tensor (torch.ones is float by default): a bool mask is asked for; pass "
            "dtype=torch.bool to torch.ones")
def _causal_float_ones(T):
    return torch.ones(T, T).triu(diagonal=1)


@mistake("3.5", "float-mask", zh="返回的是 0/-inf 的浮点加性掩码：这里要的是 bool 掩码（True = 看不见）",
         en="returns a float additive 0/-inf mask: a bool mask is asked for (True = hidden)")
def _causal_float(T):
    return torch.full((T, T), float("-inf")).triu(diagonal=1)

