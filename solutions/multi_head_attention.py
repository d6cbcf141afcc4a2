# GENERATED from source/04_multi_head_attention/04_multi_head_attention.ipynb by autograder build; do not edit.
"""Reference solutions of 04_multi_head_attention: hidden, never shipped to students."""
import math

import torch
import torch.nn as nn


def split_heads(x, num_heads):
    """练习 4.1：把最后一维切成多个头，(B, T, E) -> (B, H, T, E/H)。

    E 不能被 num_heads 整除时抛出 ValueError。
    """
    B, T, E = x.shape
    if E % num_heads != 0:
        raise ValueError(f"E = {E} 不能被 num_heads = {num_heads} 整除")
    d = E // num_heads
    # `reshape` 只切开每个词元的特征；`transpose` 再把头变成一个批量维
    return x.reshape(B, T, num_heads, d).transpose(1, 2)   # (B, T, H, d) -> (B, H, T, d)


def merge_heads(x):
    """练习 4.2：把各头拼回去，(B, H, T, d) -> (B, T, H*d)。"""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)   # (B, T, H, d) -> (B, T, H*d)


def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                         out_proj_weight, out_proj_bias, key_padding_mask=None):
    """练习 4.3：多头注意力，权重布局与 nn.MultiheadAttention 相同（batch_first=True，dropout=0）。

    query：(B, Tq, E)；key、value：(B, Tk, E)；in_proj_weight：(3E, E)，q、k、v 按这个顺序上下堆叠；
    in_proj_bias：(3E,)；out_proj_weight：(E, E)；out_proj_bias：(E,)；
    key_padding_mask：(B, Tk) bool，True 表示填充的键；或者 None。
    返回 (out (B, Tq, E), weights (B, H, Tq, Tk))，每个头一张权重矩阵。
    """
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)                   # each (E, E)
    # None 表示没有偏置（bias=False 的模块里存的就是 None），所以调用者传 None 都按 0 算
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0) if in_proj_bias is not None else (0.0,) * 3
    q = split_heads(query @ W_q.T + b_q, num_heads)                  # (B, Tq, E) -> (B, H, Tq, d)
    k = split_heads(key @ W_k.T + b_k, num_heads)                    # (B, Tk, E) -> (B, H, Tk, d)
    v = split_heads(value @ W_v.T + b_v, num_heads)                  # (B, Tk, E) -> (B, H, Tk, d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)     # (B, H, Tq, Tk)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))   # 掩码 (B, 1, 1, Tk)
    row_max = scores.amax(dim=-1, keepdim=True)                      # (B, H, Tq, 1)
    # 整行都是填充时最大值是 -inf：改成减 0，exp 得 0 而不是 NaN
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)                                  # 填充的键上恰好为 0
    total = e.sum(dim=-1, keepdim=True)                              # (B, H, Tq, 1)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)   # (B, H, Tq, Tk)
    out = merge_heads(weights @ v) @ out_proj_weight.T                    # (B, Tq, E)
    out = out + out_proj_bias if out_proj_bias is not None else out
    return out, weights


class MultiHeadAttention(nn.Module):
    """练习 4.4：多头注意力模块，参数名与 nn.MultiheadAttention（batch_first=True）相同。

    参数：in_proj_weight (3E, E)，in_proj_bias (3E,) 或 None，out_proj.weight (E, E)，out_proj.bias (E,)。
    forward(query (B, Tq, E), key (B, Tk, E), value (B, Tk, E), key_padding_mask (B, Tk) bool 或 None)
    返回 (out (B, Tq, E), weights (B, H, Tq, Tk))。
    """

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim = {embed_dim} 不能被 num_heads = {num_heads} 整除")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))   # (3E, E): q, k, v
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))           # (3E,)
        else:
            self.register_parameter("in_proj_bias", None)                           # 与 torch 相同：完全没有偏置
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)                  # out_proj.weight (E, E)
        # 与 torch 的初始化相同：in_proj_weight 用 xavier，两个偏置为 0，out_proj.weight 同 nn.Linear
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None):
        E = self.embed_dim
        # 没有偏置时 torch 什么也不加：传 0 既保持 4.3 的签名，结果也相同
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else query.new_zeros(E)
        return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, in_bias,
                                    self.out_proj.weight, out_bias, key_padding_mask)


def attention_memory(batch, num_heads, seq_len, bytes_per_element=4):
    """练习 4.5：注意力权重 (batch, num_heads, seq_len, seq_len) 占的字节数，返回 Python int。"""
    return int(batch) * int(num_heads) * int(seq_len) ** 2 * int(bytes_per_element)
