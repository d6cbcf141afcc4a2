"""Reference solutions of 03_padding_masks: GENERATED from source/03_padding_masks/03_padding_masks.ipynb by `autograder build`; do not edit."""
import math

import numpy as np
import torch
import torch.nn as nn
def padding_mask(lengths, max_len=None):
    """3.1  lengths (B,) -> bool (B, max_len), True at padded positions."""
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    positions = torch.arange(max_len, device=lengths.device)   # (max_len,)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)      # (B, max_len)


def masked_softmax(scores, key_padding_mask):
    """3.2  scores (B, ..., Tq, Tk), mask (B, Tk) True = padded; padded keys exactly 0, all-padded rows 0."""
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)   # (B, 1.., 1, Tk)
    filled = scores.masked_fill(mask, float("-inf"))
    row_max = filled.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(filled - row_max)                       # exp(-inf) = 0 at padded keys
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def masked_attention(Q, K, V, key_padding_mask):
    """3.3  attention with the padding mask -> (out, weights)."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = masked_softmax(scores, key_padding_mask)
    return weights @ V, weights


def masked_cross_entropy(logits, targets, ignore_index=-100):
    """3.4  mean cross entropy over positions whose target != ignore_index."""
    keep = targets != ignore_index                        # (B, T)
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    m = logits.amax(dim=-1, keepdim=True)
    log_z = m.squeeze(-1) + torch.log(torch.exp(logits - m).sum(dim=-1))   # (B, T)
    picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)            # (B, T)
    nll = (log_z - picked) * keep
    return nll.sum() / keep.sum()


def causal_mask(T):
    """3.5  bool (T, T), True where key j > query i."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
