"""Reference solutions of 04_multi_head_attention: GENERATED from source/04_multi_head_attention/04_multi_head_attention.ipynb by `autograder build`; do not edit."""
import math

import numpy as np
import torch
import torch.nn as nn
def split_heads(x, num_heads):
    """4.1  (B, T, E) -> (B, H, T, E/H)."""
    B, T, E = x.shape
    if E % num_heads != 0:
        raise ValueError(f"embed_dim {E} is not divisible by num_heads {num_heads}")
    return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)    # (B, H, T, d)


def merge_heads(x):
    """4.2  (B, H, T, d) -> (B, T, H*d)."""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)


def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                         out_proj_weight, out_proj_bias, key_padding_mask=None):
    """4.3  equals nn.MultiheadAttention(E, H, batch_first=True), dropout 0, per-head weights."""
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)        # each (E, E)
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0)          # each (E,)
    q = split_heads(query @ W_q.T + b_q, num_heads)       # (B, H, Tq, d)
    k = split_heads(key @ W_k.T + b_k, num_heads)         # (B, H, Tk, d)
    v = split_heads(value @ W_v.T + b_v, num_heads)       # (B, H, Tk, d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)   # (B, H, Tq, Tk)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))   # (B, H, Tq, Tk)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)                       # exactly 0 at padded keys
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)
    out = merge_heads(weights @ v) @ out_proj_weight.T + out_proj_bias   # (B, Tq, E)
    return out, weights


class MultiHeadAttention(nn.Module):
    """4.4  parameters named as torch's nn.MultiheadAttention."""

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None):
        E = self.embed_dim
        zeros = query.new_zeros(E)
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else zeros
        return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, in_bias,
                                    self.out_proj.weight, out_bias, key_padding_mask)


def attention_memory(batch, num_heads, seq_len, bytes_per_element=4):
    """4.5  bytes of the attention weights."""
    return int(batch) * int(num_heads) * int(seq_len) ** 2 * int(bytes_per_element)
