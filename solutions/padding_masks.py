# GENERATED from source/03_padding_masks/03_padding_masks.ipynb by autograder build; do not edit.
"""Reference solutions of 03_padding_masks: hidden, never shipped to students."""
import math

import torch


def padding_mask(lengths, max_len=None):
    """练习 3.1：由每句的长度生成填充掩码。

    lengths：(B,) 的 int64 张量，每句的真实长度。
    max_len：掩码的宽度，默认取 lengths.max()。
    返回 (B, max_len) 的 bool 张量，填充位置（位置 >= 长度）为 True。
    """
    if max_len is None:
        # 空批量没有最长的句子：掩码的形状是 (0, 0)
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    positions = torch.arange(max_len, device=lengths.device)   # (max_len,)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)      # (1, max_len) vs (B, 1) -> (B, max_len)


def masked_softmax(scores, key_padding_mask):
    """练习 3.2：在最后一维上做 softmax，填充的键不参与。

    scores：(B, ..., Tq, Tk)；key_padding_mask：(B, Tk) 的 bool 张量，True = 填充的键。
    返回与 scores 同形状的权重：填充键恰好为 0，每行的和为 1；
    键全部是填充的那一行全为 0（不是 NaN）。
    """
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)   # (B, 1, ..., 1, Tk)
    filled = scores.masked_fill(mask, float("-inf"))                      # (B, ..., Tq, Tk)
    row_max = filled.amax(dim=-1, keepdim=True)                           # (B, ..., Tq, 1)
    # 整行被掩蔽的行最大值是 -inf，-inf - (-inf) 会得到 NaN，所以这种行改为减 0
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(filled - row_max)                                       # 填充键上 exp(-inf) = 0
    total = e.sum(dim=-1, keepdim=True)                                   # (B, ..., Tq, 1)
    # 整行被掩蔽的行和为 0：改为除以 1，它就保持全 0
    return e / torch.where(total == 0, torch.ones_like(total), total)


def masked_attention(Q, K, V, key_padding_mask):
    """练习 3.3：填充的键不参与的缩放点积注意力。

    Q：(B, ..., Tq, Dk)，K：(B, ..., Tk, Dk)，V：(B, ..., Tk, Dv)，
    key_padding_mask：(B, Tk) 的 bool 张量，True = 填充的键。
    返回 (out (B, ..., Tq, Dv), weights (B, ..., Tq, Tk))。
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])   # (B, ..., Tq, Tk)
    weights = masked_softmax(scores, key_padding_mask)          # (B, ..., Tq, Tk)
    return weights @ V, weights                                 # (B, ..., Tq, Dv)


def masked_cross_entropy(logits, targets, ignore_index=-100):
    """练习 3.4：目标不是 ignore_index 的位置上，交叉熵的平均值。

    logits：(B, T, C)；targets：(B, T) 的 int64，取值为 0..C-1 或 ignore_index。
    返回一个 0 维张量。
    """
    keep = targets != ignore_index                                          # (B, T)
    # gather 要求每个位置都是合法的类别；忽略的位置在下面清零
    safe = torch.where(keep, targets, torch.zeros_like(targets))           # (B, T)
    row_max = logits.amax(dim=-1, keepdim=True)                             # (B, T, 1)
    log_z = row_max.squeeze(-1) + torch.log(torch.exp(logits - row_max).sum(dim=-1))   # (B, T)
    picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)              # (B, T)
    nll = (log_z - picked) * keep                                           # (B, T)
    return nll.sum() / keep.sum()


def causal_mask(T):
    """练习 3.5：因果掩码：(T, T) 的 bool 张量，键 j > 查询 i 处为 True（查询不许看的未来）。"""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)   # (T, T)，对角线以上的严格上三角
