# GENERATED from source/03_padding_masks/03_padding_masks.ipynb by autograder build; do not edit.
"""Reference solutions of 03_padding_masks: hidden, never shipped to students."""
import math

import torch


def padding_mask(lengths, max_len=None):
    """Exercise 3.1: key padding mask from sequence lengths.

    lengths: (B,) int64, the true length of each sequence.
    max_len: width of the mask; defaults to lengths.max().
    Returns a bool tensor (B, max_len), True at padded positions (position >= length).
    """
    if max_len is None:
        # an empty batch has no longest sequence: the mask is (0, 0)
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    positions = torch.arange(max_len, device=lengths.device)   # (max_len,)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)      # (1, max_len) vs (B, 1) -> (B, max_len)


def masked_softmax(scores, key_padding_mask):
    """Exercise 3.2: softmax over the last dim that ignores padded keys.

    scores: (B, ..., Tq, Tk); key_padding_mask: (B, Tk) bool, True = padded key.
    Returns weights of the shape of scores: exactly 0 at padded keys, rows summing to 1,
    and all zeros (never NaN) in a row whose keys are all padded.
    """
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)   # (B, 1, ..., 1, Tk)
    filled = scores.masked_fill(mask, float("-inf"))                      # (B, ..., Tq, Tk)
    row_max = filled.amax(dim=-1, keepdim=True)                           # (B, ..., Tq, 1)
    # a fully padded row has max -inf; -inf - (-inf) would be NaN, so shift it by 0 instead
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(filled - row_max)                                       # exp(-inf) = 0 at padded keys
    total = e.sum(dim=-1, keepdim=True)                                   # (B, ..., Tq, 1)
    # a fully padded row sums to 0: divide it by 1 so that it stays all zeros
    return e / torch.where(total == 0, torch.ones_like(total), total)


def masked_attention(Q, K, V, key_padding_mask):
    """Exercise 3.3: scaled dot-product attention that ignores padded keys.

    Q: (B, ..., Tq, Dk), K: (B, ..., Tk, Dk), V: (B, ..., Tk, Dv),
    key_padding_mask: (B, Tk) bool, True = padded key.
    Returns (out (B, ..., Tq, Dv), weights (B, ..., Tq, Tk)).
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])   # (B, ..., Tq, Tk)
    weights = masked_softmax(scores, key_padding_mask)          # (B, ..., Tq, Tk)
    return weights @ V, weights                                 # (B, ..., Tq, Dv)


def masked_cross_entropy(logits, targets, ignore_index=-100):
    """Exercise 3.4: mean cross entropy over the positions whose target is not ignore_index.

    logits: (B, T, C); targets: (B, T) int64 in 0..C-1 or ignore_index.
    Returns a 0-dim tensor.
    """
    keep = targets != ignore_index                                          # (B, T)
    # gather needs a valid class everywhere; ignored positions are zeroed below
    safe = torch.where(keep, targets, torch.zeros_like(targets))           # (B, T)
    row_max = logits.amax(dim=-1, keepdim=True)                             # (B, T, 1)
    log_z = row_max.squeeze(-1) + torch.log(torch.exp(logits - row_max).sum(dim=-1))   # (B, T)
    picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)              # (B, T)
    nll = (log_z - picked) * keep                                           # (B, T)
    return nll.sum() / keep.sum()


def causal_mask(T):
    """Exercise 3.5: causal mask: bool (T, T), True where key j > query i (the future a query may not see)."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)   # (T, T), strictly above the diagonal
