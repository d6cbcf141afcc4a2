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


# -- 3.1 padding_mask ---------------------------------------------------------------
def _positions(lengths, max_len):
    if max_len is None:
        max_len = int(lengths.max())
    return torch.arange(max_len, device=lengths.device).unsqueeze(0), lengths.unsqueeze(1)


@mistake("3.1", "mask-inverted", zh="掩码反了：True 应当标在填充位置，不是真实 token 上",
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


# -- 3.2 masked_softmax ---------------------------------------------------------------
@mistake("3.2", "mask-inverted", zh="掩码用反了：True 表示填充，要屏蔽的是 True 的位置",
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


@mistake("3.2", "fill-zero", zh="用 0 填充被屏蔽的分数：exp(0) 不是 0，填充键仍有权重；应填 -inf",
         en="masked scores filled with 0: exp(0) is not 0, padded keys keep weight; fill with -inf")
def _msm_zero(scores, key_padding_mask):
    return _softmax(scores.masked_fill(_key_mask(key_padding_mask, scores), 0.0))


@mistake("3.2", "zeroed-after-softmax", zh="先 softmax 再把填充位置置 0，却没有重新归一化：每行加和小于 1",
         en="softmax first, then padded keys zeroed without renormalizing: rows sum to less than 1")
def _msm_after(scores, key_padding_mask):
    return _softmax(scores).masked_fill(_key_mask(key_padding_mask, scores), 0.0)


@mistake("3.2", "mask-on-queries", zh="掩码加在了查询轴（倒数第二维）上：key_padding_mask 屏蔽的是键（最后一维）",
         en="the mask went on the query axis (dim -2): key_padding_mask hides keys (the last dim)")
def _msm_queries(scores, key_padding_mask):
    B, Tk = key_padding_mask.shape
    rows = key_padding_mask.reshape(B, *([1] * (scores.dim() - 3)), Tk, 1)   # (B, 1.., Tk, 1)
    return _softmax(scores.masked_fill(rows, float("-inf")))


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


@mistake("3.3", "mask-inverted", zh="掩码用反了：True 表示填充，要屏蔽的是 True 的位置",
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


# -- 3.5 causal_mask ------------------------------------------------------------------
@mistake("3.5", "diagonal-masked", zh="对角线也被屏蔽了（j >= i）：每个位置应当看得见自己，用 j > i",
         en="the diagonal is masked too (j >= i): every position sees itself, use j > i")
def _causal_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=0)


@mistake("3.5", "lower-triangle", zh="屏蔽了下三角（过去），应当屏蔽上三角（未来，j > i）",
         en="the lower triangle (the past) is masked; mask the upper one (the future, j > i)")
def _causal_lower(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)


@mistake("3.5", "mask-inverted", zh="掩码反了：True 应当标在看不见的位置（j > i）",
         en="the mask is inverted: True marks the positions a query may NOT see (j > i)")
def _causal_inverted(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=0)


@mistake("3.5", "float-mask", zh="返回的是 0/-inf 的浮点加性掩码：这里要的是 bool 掩码（True = 看不见）",
         en="returns a float additive 0/-inf mask: a bool mask is asked for (True = hidden)")
def _causal_float(T):
    return torch.full((T, T), float("-inf")).triu(diagonal=1)
