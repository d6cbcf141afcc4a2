"""Correct alternatives of 03_padding_masks (instructor side only): validate grades each as a submission.

Each is what a careful student may write instead of the reference: other comparisons, a loop and a cumsum
for 3.1; an additive -inf mask, a logsumexp, nan_to_num after a plain hand softmax, a mask multiplied in
after a safe exp, a loop over the batch and float64 inside for 3.2 (its library softmax is forbidden, here
as for students); masked_softmax by name, einsum and float64 for 3.3; logsumexp, log_softmax with a one-hot
sum and boolean selection for 3.4 (log_softmax and logsumexp are allowed there); triu, arange comparisons,
an inverted tril and a loop for 3.5. Every one must keep full marks, in its own exercise and in those built
on it (3.3 calls masked_softmax).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import alternative


# -- 3.1 padding_mask ---------------------------------------------------------------
@alternative("3.1", "not-less-than", zh="位置 torch.arange(max_len) 与长度比较 <，再取反", en="arange < lengths, negated")
def _pad_not_less(lengths, max_len=None):
    # t >= length is "not t < length"; an empty batch has no max, so its width is 0
    if max_len is None:
        max_len = int(lengths.max()) if len(lengths) else 0
    positions = torch.arange(max_len, device=lengths.device)
    return ~(positions[None, :] < lengths[:, None])


@alternative("3.1", "lengths-le-arange", zh="lengths[:, None] <= torch.arange(max_len)", en="lengths[:, None] <= arange")
def _pad_le(lengths, max_len=None):
    # the same comparison written from the lengths' side; an empty batch returns early
    if lengths.numel() == 0:
        return torch.zeros(0, 0 if max_len is None else max_len, dtype=torch.bool, device=lengths.device)
    width = lengths.max().item() if max_len is None else max_len
    return lengths[:, None] <= torch.arange(width, device=lengths.device)


@alternative("3.1", "loop", zh="逐行循环：先全 True，再把前 lengths[b] 个置 False",
             en="a loop over rows: all True, then the first lengths[b] set to False")
def _pad_loop(lengths, max_len=None):
    # one row at a time; slicing past the end stops at the width, a zero-length row stays all True
    if max_len is None:
        max_len = max(lengths.tolist(), default=0)
    mask = torch.ones(len(lengths), max_len, dtype=torch.bool, device=lengths.device)
    for b, n in enumerate(lengths.tolist()):
        mask[b, :n] = False
    return mask


@alternative("3.1", "cumsum", zh="一行 1 的累加和（位置 + 1）大于长度", en="a cumulative sum of ones (position + 1) > length")
def _pad_cumsum(lengths, max_len=None):
    # cumsum of ones along a row is t + 1, and t + 1 > length exactly when t >= length
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    ones = torch.ones(lengths.shape[0], max_len, dtype=torch.int64, device=lengths.device)
    return ones.cumsum(dim=1) > lengths.unsqueeze(1)


@alternative("3.1", "where", zh="torch.where 在比较结果上选 True/False", en="torch.where picking True/False on the comparison")
def _pad_where(lengths, max_len=None):
    # where(cond, True, False) is cond itself, as a bool tensor
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    positions = torch.arange(max_len, device=lengths.device).expand(lengths.shape[0], max_len)
    padded = positions >= lengths.unsqueeze(-1)
    return torch.where(padded, torch.ones_like(padded), torch.zeros_like(padded))


# -- 3.2 masked_softmax ---------------------------------------------------------------
@alternative("3.2", "nan-to-num", zh="masked_fill(-inf)、手写的减最大值 softmax，再 nan_to_num 把 NaN 换成 0",
             en="masked_fill(-inf), a hand max-shift softmax, then nan_to_num turning NaN into 0")
def _msm_nan_to_num(scores, key_padding_mask):
    # only a row without a finite score gives NaN (-inf - (-inf)): exactly the rows that should be all zeros
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.view(B, *([1] * (scores.dim() - 2)), Tk)
    filled = scores.masked_fill(mask, float("-inf"))
    e = torch.exp(filled - filled.amax(dim=-1, keepdim=True))
    return torch.nan_to_num(e / e.sum(dim=-1, keepdim=True), nan=0.0)


@alternative("3.2", "additive-mask", zh="加性浮点掩码（0 / -inf）加到分数上，再做稳定的 softmax",
             en="an additive float mask (0 / -inf) added to the scores, then a stable softmax")
def _msm_additive(scores, key_padding_mask):
    # x + (-inf) = -inf for every finite x, so the sum is the masked_fill; the guards keep empty rows at 0
    additive = torch.zeros(key_padding_mask.shape, dtype=scores.dtype, device=scores.device)
    additive = additive.masked_fill(key_padding_mask, float("-inf"))
    for _ in range(scores.dim() - 2):
        additive = additive.unsqueeze(1)                                 # (B, 1, ..., 1, Tk)
    s = scores + additive
    top = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(top == float("-inf"), torch.zeros_like(top), top))
    total = e.sum(dim=-1, keepdim=True)
    return e / total.clamp_min(torch.finfo(scores.dtype).tiny)


@alternative("3.2", "logsumexp", zh="exp(s - logsumexp(s))，整行被掩蔽时把 logsumexp 换成 0",
             en="exp(s - logsumexp(s)), the logsumexp replaced by 0 on a fully masked row")
def _msm_logsumexp(scores, key_padding_mask):
    # softmax = exp(s - logsumexp(s)); logsumexp is -inf exactly where every key is masked, and exp(-inf - 0) = 0
    B, Tk = key_padding_mask.shape
    filled = scores.masked_fill(key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk), float("-inf"))
    lse = torch.logsumexp(filled, dim=-1, keepdim=True)
    return torch.exp(filled - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse))


@alternative("3.2", "multiply-after-safe-exp", zh="有效键上取最大值，exp 之后乘上 ~key_padding_mask，除法前把 0 换成 1",
             en="the max over the real keys, exp, then times ~mask, a zero sum replaced by 1 before dividing")
def _msm_multiply(scores, key_padding_mask):
    # the padded scores never reach exp (where puts 0 there, so garbage cannot overflow); * keep zeroes them
    B, Tk = key_padding_mask.shape
    keep = ~key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)
    top = torch.where(keep, scores, torch.full_like(scores, float("-inf"))).amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(torch.where(keep, scores - top, torch.zeros_like(scores))) * keep
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


@alternative("3.2", "loop-over-batch", zh="逐个样本循环，只对有效键做 softmax，填回全 0 的张量",
             en="a loop over the batch: a softmax over the real keys only, put back into zeros")
def _msm_loop(scores, key_padding_mask):
    # each sample's real keys by boolean indexing; a sample without any stays all zeros
    rows = []
    for b in range(scores.shape[0]):
        keep = ~key_padding_mask[b]
        w = torch.zeros_like(scores[b])
        if keep.any():
            s = scores[b][..., keep]
            top = s.amax(dim=-1, keepdim=True)
            e = torch.exp(s - torch.where(torch.isinf(top), torch.zeros_like(top), top))
            total = e.sum(dim=-1, keepdim=True)
            w[..., keep] = e / torch.where(total == 0, torch.ones_like(total), total)
        rows.append(w)
    return torch.stack(rows)


@alternative("3.2", "float64-inside", zh="在 float64 里算，最后 .to(scores.dtype) 转回", en="computed in float64, cast back with .to(scores.dtype)")
def _msm_float64(scores, key_padding_mask):
    # more precision inside changes nothing but rounding; the result has the input's dtype again
    s = scores.to(torch.float64)
    B, Tk = key_padding_mask.shape
    s = s.masked_fill(key_padding_mask.reshape(B, *([1] * (s.dim() - 2)), Tk), float("-inf"))
    top = s.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    e = (s - top).exp()
    total = e.sum(dim=-1, keepdim=True)
    return (e / total.masked_fill(total == 0, 1.0)).to(scores.dtype)


# -- 3.3 masked_attention -------------------------------------------------------------
@alternative("3.3", "calls-masked-softmax", zh="torch.matmul 与 .mT 算分数，交给自己的 masked_softmax",
             en="scores by matmul and .mT, weighted by the student's own masked_softmax")
def _mat_by_name(Q, K, V, key_padding_mask):
    # the reference's recipe in other words: .mT is transpose(-2, -1), * (1 / sqrt(d)) is / sqrt(d)
    scores = torch.matmul(Q, K.mT) * (1.0 / math.sqrt(Q.size(-1)))
    weights = masked_softmax(scores, key_padding_mask)   # the notebook's 3.2
    return torch.matmul(weights, V), weights


@alternative("3.3", "scale-queries-first", zh="先把 Q 除以 √d，再乘 K 的转置", en="Q divided by sqrt(d) first, then times K transposed")
def _mat_scale_first(Q, K, V, key_padding_mask):
    # (Q / sqrt(d)) K^T = Q K^T / sqrt(d)
    weights = masked_softmax((Q / Q.shape[-1] ** 0.5) @ K.transpose(-2, -1), key_padding_mask)
    return weights @ V, weights


@alternative("3.3", "einsum-inline", zh="torch.einsum 算分数和输出，带掩码的 softmax 直接写在函数里（加性 -inf 掩码 + logsumexp）",
             en="einsum for the scores and the output, the masked softmax inline (additive -inf mask, logsumexp)")
def _mat_einsum(Q, K, V, key_padding_mask):
    # '...qd,...kd->...qk' is Q K^T over any leading dims; the inline softmax is 3.2's logsumexp form
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)
    scores = scores + torch.zeros_like(scores).masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    weights = torch.exp(scores - lse.masked_fill(torch.isinf(lse), 0.0))
    return torch.einsum("...qk,...kv->...qv", weights, V), weights


@alternative("3.3", "float64-inside", zh="在 float64 里算，最后 .to(Q.dtype) 转回", en="computed in float64, cast back with .to(Q.dtype)")
def _mat_float64(Q, K, V, key_padding_mask):
    # the same attention with more precision inside; both outputs come back in the inputs' dtype
    q, k, v = (t.to(torch.float64) for t in (Q, K, V))
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), key_padding_mask)
    return (weights @ v).to(Q.dtype), weights.to(Q.dtype)


# -- 3.4 masked_cross_entropy ---------------------------------------------------------
@alternative("3.4", "logsumexp-gather", zh="torch.logsumexp 减去 gather() 取出的目标类别的 logits，torch.where 清零忽略位置",
             en="torch.logsumexp minus the gathered target logit, ignored positions zeroed by torch.where",
             statement="可以用 torch.logsumexp")
def _mce_logsumexp(logits, targets, ignore_index=-100):
    # logsumexp is the stable log-sum-exp; the mean is over the counted positions only
    keep = targets != ignore_index
    picked = logits.gather(-1, torch.where(keep, targets, 0).unsqueeze(-1)).squeeze(-1)
    nll = torch.where(keep, torch.logsumexp(logits, dim=-1) - picked, torch.zeros_like(picked))
    return nll.sum() / keep.sum()


@alternative("3.4", "log-softmax-one-hot", zh="F.log_softmax 乘独热编码的目标再求和", en="F.log_softmax times one-hot targets, summed",
             statement="F.log_softmax（本题不禁止它们）")
def _mce_one_hot(logits, targets, ignore_index=-100):
    # sum_c onehot_c * log p_c picks log p_y; ignored positions get an all-zero one-hot row
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    one_hot = one_hot * keep.unsqueeze(-1)
    return -(F.log_softmax(logits, dim=-1) * one_hot).sum() / keep.sum()


@alternative("3.4", "boolean-selection", zh="用布尔索引只取出计入的位置，再做 log-softmax 和取值",
             en="boolean indexing keeps the counted positions only, then a log-softmax and a pick")
def _mce_select(logits, targets, ignore_index=-100):
    # logits[keep] is (N, C) for the N counted positions; their mean is the loss
    keep = targets != ignore_index
    rows, labels = logits[keep], targets[keep]
    log_probs = rows - rows.logsumexp(dim=-1, keepdim=True)
    return -log_probs[torch.arange(labels.numel(), device=labels.device), labels].mean()


@alternative("3.4", "float64-inside", zh="在 float64 里手写减最大值的 log-sum-exp，最后 .to(logits.dtype) 转回",
             en="a hand max-shift log-sum-exp in float64, cast back with .to(logits.dtype)")
def _mce_float64(logits, targets, ignore_index=-100):
    # more precision inside; the 0-d result comes back in the logits' dtype
    x = logits.to(torch.float64)
    top = x.max(dim=-1, keepdim=True).values
    log_z = (top + (x - top).exp().sum(dim=-1, keepdim=True).log()).squeeze(-1)
    keep = (targets != ignore_index).to(torch.float64)
    picked = x.gather(-1, targets.masked_fill(keep == 0, 0).unsqueeze(-1)).squeeze(-1)
    return (((log_z - picked) * keep).sum() / keep.sum()).to(logits.dtype)


# -- 3.5 causal_mask ------------------------------------------------------------------
@alternative("3.5", "triu-function", zh="torch.triu(全 True, diagonal=1)", en="torch.triu(all True, diagonal=1)")
def _causal_triu(T):
    # the strict upper triangle of an all-True matrix
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


@alternative("3.5", "arange-compare", zh="两个 torch.arange(T) 比较：j > i", en="two aranges compared: j > i")
def _causal_arange(T):
    # column index j against row index i, broadcast to (T, T)
    i = torch.arange(T)
    return i.unsqueeze(0) > i.unsqueeze(1)


@alternative("3.5", "tril-inverted", zh="下三角（含对角线）取反", en="the lower triangle with its diagonal, inverted")
def _causal_tril(T):
    # j <= i is what a query may see; everything else is hidden
    return ~torch.tril(torch.ones(T, T, dtype=torch.bool))


@alternative("3.5", "loop", zh="两重循环逐个填", en="two loops, entry by entry")
def _causal_loop(T):
    # [i, j] is True exactly when j > i
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(i + 1, T):
            mask[i, j] = True
    return mask


@alternative("3.5", "from-transformer", zh="nn.Transformer 的加性因果掩码里 -inf 的位置", en="where nn.Transformer's additive causal mask is -inf")
def _causal_transformer(T):
    # torch's own causal mask is 0 / -inf floats, -inf exactly where j > i
    return torch.isinf(nn.Transformer.generate_square_subsequent_mask(T))
