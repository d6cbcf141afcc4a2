"""Known mistakes of 04_multi_head_attention (instructor side only).

Functions for 4.1-4.3 and 4.5 have the student's signature; for 4.4 they are
nn.Module classes with the student's constructor, diagnosed through the same
"module" probe. Each makes one realistic mistake and is right otherwise.
4.3 forbids no softmax, so these may use torch.softmax.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from autograder.catalog import mistake


def _check_divisible(E, num_heads):
    if E % num_heads != 0:
        raise ValueError(f"embed_dim {E} is not divisible by num_heads {num_heads}")


def _split(x, num_heads):
    B, T, E = x.shape
    return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)    # (B, H, T, d)


def _merge(x):
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)                        # (B, T, H*d)


# -- 4.1 split_heads ------------------------------------------------------------------
@mistake("4.1", "no-transpose", zh="reshape 成 (B, T, H, d) 后忘了 transpose(1, 2)：头的维度应在 T 之前",
         en="reshaped to (B, T, H, d) but forgot transpose(1, 2): the head dim goes before T")
def _split_no_transpose(x, num_heads):
    B, T, E = x.shape
    _check_divisible(E, num_heads)
    return x.reshape(B, T, num_heads, E // num_heads)                    # (B, T, H, d)


@mistake("4.1", "reshape-to-bhtd", zh="直接 reshape 成 (B, H, T, d)：形状对了但数据乱了，先 reshape 成 (B, T, H, d) 再 transpose",
         en="reshaped straight to (B, H, T, d): right shape, scrambled data; reshape to (B, T, H, d), then transpose")
def _split_direct(x, num_heads):
    B, T, E = x.shape
    _check_divisible(E, num_heads)
    return x.reshape(B, num_heads, T, E // num_heads)                    # (B, H, T, d), wrong order


@mistake("4.1", "split-as-d-h", zh="把 E 拆成了 (d, H) 而不是 (H, d)：每个头应当拿连续的 d 个通道",
         en="E split as (d, H) instead of (H, d): each head takes d consecutive channels")
def _split_d_h(x, num_heads):
    B, T, E = x.shape
    _check_divisible(E, num_heads)
    return x.reshape(B, T, E // num_heads, num_heads).permute(0, 3, 1, 2)   # (B, H, T, d), interleaved


# -- 4.2 merge_heads ------------------------------------------------------------------
@mistake("4.2", "no-transpose-back", zh="直接 reshape 成 (B, T, H*d)，没有先 transpose(1, 2) 回来",
         en="reshaped straight to (B, T, H*d) without transposing back first (transpose(1, 2))")
def _merge_no_transpose(x):
    B, H, T, d = x.shape
    return x.reshape(B, T, H * d)


@mistake("4.2", "merge-as-d-h", zh="合并成了 (d, H) 的顺序：应当是 (H, d)，头 0 的 d 个通道在最前面",
         en="merged in (d, H) order: it is (H, d), head 0's d channels first")
def _merge_d_h(x):
    B, H, T, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, d * H)


@mistake("4.2", "no-reshape", zh="transpose 之后忘了 reshape：应返回 (B, T, H*d)",
         en="transposed but forgot the reshape: return (B, T, H*d)")
def _merge_no_reshape(x):
    return x.transpose(1, 2)                                             # (B, T, H, d)


# -- 4.3 multi_head_attention ---------------------------------------------------------
def _safe_softmax(scores):
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
         key_padding_mask=None, *, split=_split, order=(0, 1, 2), scale_dim=None, out_proj=True,
         average=False, use_mask=True, transpose_weights=True, softmax=_safe_softmax, additive_mask=False):
    """Multi-head attention with one switch per known mistake (defaults: right)."""
    E = query.shape[-1]
    chunks_w = in_proj_weight.chunk(3, dim=0)
    chunks_b = in_proj_bias.chunk(3, dim=0)
    W_q, W_k, W_v = (chunks_w[i] for i in order)                        # each (E, E)
    b_q, b_k, b_v = (chunks_b[i] for i in order)                        # each (E,)

    def project(x, W, b):
        return x @ (W.T if transpose_weights else W) + b

    q = split(project(query, W_q, b_q), num_heads)                      # (B, H, Tq, d)
    k = split(project(key, W_k, b_k), num_heads)                        # (B, H, Tk, d)
    v = split(project(value, W_v, b_v), num_heads)                      # (B, H, Tk, d)
    d = scale_dim or E // num_heads
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)                     # (B, H, Tq, Tk)
    if key_padding_mask is not None and use_mask and additive_mask:
        # a float mask added to the scores: unlike masked_fill, its backward lets the gradient into padded keys
        scores = scores + torch.zeros_like(scores).masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    elif key_padding_mask is not None and use_mask:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    weights = softmax(scores)
    out = _merge(weights @ v)                                           # (B, Tq, E)
    if out_proj:
        out = out @ (out_proj_weight.T if transpose_weights else out_proj_weight) + out_proj_bias
    return out, (weights.mean(dim=1) if average else weights)


def _split_without_transpose(x, num_heads):
    B, T, E = x.shape
    return x.reshape(B, num_heads, T, E // num_heads)                   # (B, H, T, d), scrambled


@mistake("4.3", "split-no-transpose", zh="拆头时直接 reshape 成 (B, H, T, d)，少了 transpose：各头拿到的是打乱的数据",
         en="heads split with a plain reshape to (B, H, T, d), no transpose: each head gets scrambled data")
def _mha_no_transpose(*args, **kwargs):
    return _mha(*args, **kwargs, split=_split_without_transpose)


@mistake("4.3", "qkv-chunk-order", zh="in_proj_weight 的三块顺序不对：torch 的顺序是 q、k、v",
         en="wrong order of the in_proj_weight chunks: torch's order is q, k, v")
def _mha_order(*args, **kwargs):
    return _mha(*args, **kwargs, order=(1, 0, 2))


@mistake("4.3", "no-out-proj", zh="少了输出投影：合并各头后还要乘 out_proj_weight.T 再加 out_proj_bias",
         en="the output projection is missing: after merging the heads apply out_proj_weight.T and out_proj_bias")
def _mha_no_out(*args, **kwargs):
    return _mha(*args, **kwargs, out_proj=False)


@mistake("4.3", "averaged-weights", zh="返回了各头平均后的权重：这里要每个头一张 (B, H, Tq, Tk)",
         en="returns the weights averaged over heads: one map per head is asked for, (B, H, Tq, Tk)")
def _mha_average(*args, **kwargs):
    return _mha(*args, **kwargs, average=True)


@mistake("4.3", "scale-sqrt-e", zh="用 √E 缩放了：每个头的分数应除以 √d，d = E / H",
         en="scaled by sqrt(E): each head's scores are divided by sqrt(d), d = E / H")
def _mha_scale_e(query, *args, **kwargs):
    return _mha(query, *args, **kwargs, scale_dim=query.shape[-1])


@mistake("4.3", "mask-ignored", zh="没有用上 key_padding_mask：填充的键仍然得到了权重",
         en="key_padding_mask is not applied: padded keys still get weight")
def _mha_no_mask(*args, **kwargs):
    return _mha(*args, **kwargs, use_mask=False)


@mistake("4.3", "nan-on-fully-padded", zh="填 -inf 后直接 softmax：键全为填充的那一批得到 NaN，权重应当全为 0",
         en="-inf then a plain softmax: a batch row whose keys are all padded gets NaN, its weights should be 0")
def _mha_nan(*args, **kwargs):
    return _mha(*args, **kwargs, softmax=lambda scores: torch.softmax(scores, dim=-1))


# -- 4.4 MultiHeadAttention -----------------------------------------------------------
class _Module(nn.Module):
    """Torch-named parameters, as the exercise asks; subclasses get forward wrong in one way."""

    options: dict = {}

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        _check_divisible(embed_dim, num_heads)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def weights(self, query):
        E = self.embed_dim
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else query.new_zeros(E)
        return self.in_proj_weight, in_bias, self.out_proj.weight, out_bias

    def forward(self, query, key, value, key_padding_mask=None):
        return _mha(query, key, value, self.num_heads, *self.weights(query), key_padding_mask, **self.options)


@mistake("4.4", "no-out-proj", zh="forward 里没有用 out_proj：合并各头后还要经过输出投影",
         en="forward skips out_proj: the merged heads still go through the output projection")
class _ModuleNoOut(_Module):
    options = {"out_proj": False}


@mistake("4.4", "weights-not-transposed", zh="投影写成了 x @ W：nn.Linear 约定的是 x @ W.T + b（torch 存的是转置）",
         en="projections written as x @ W: nn.Linear's convention is x @ W.T + b (torch stores the transpose)")
class _ModuleNoTranspose(_Module):
    options = {"transpose_weights": False}


@mistake("4.4", "detached-weights", zh="in_proj_weight 被 detach 了（.detach() 或 .data）：梯度传不到它",
         en="in_proj_weight is detached (.detach() or .data): no gradient reaches it")
class _ModuleDetached(_Module):
    def weights(self, query):
        W_in, b_in, W_out, b_out = super().weights(query)
        return W_in.detach(), b_in, W_out, b_out


def _softmax_then_nan_to_num(scores):
    """The additive-mask recipe: torch.softmax makes NaN on a fully masked row, nan_to_num hides it."""
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)


@mistake("4.4", "nan-to-num-backward",
         zh="分数加上 -inf 的浮点掩码，全填充行的 softmax 算出 NaN，再用 nan_to_num 换成 0：前向对了，反向传播却仍经过那次 0/0，"
            "梯度全是 NaN（torch 自己的模块在这里也是 NaN）；要在 softmax 之前处理：行最大值为 -inf 时换成 0，行和为 0 时换成 1",
         en="an additive -inf float mask makes the fully padded row's softmax NaN and nan_to_num turns it into 0: "
            "the forward pass is right, but "
            "the backward pass still goes through that 0/0 and the gradients are NaN (torch's own module's too); "
            "handle the row before the softmax: a -inf row max becomes 0, a zero row sum becomes 1")
class _ModuleNanToNum(_Module):
    # With masked_fill the backward zeroes the padded keys' gradient and hides the NaN; an additive mask does not.
    options = {"softmax": _softmax_then_nan_to_num, "additive_mask": True}


# -- 4.5 attention_memory -------------------------------------------------------------
@mistake("4.5", "forgets-batch", zh="忘了乘 batch：每个样本都有自己的一组权重矩阵",
         en="forgot the batch: every sample holds its own weight matrices")
def _memory_no_batch(batch, num_heads, seq_len, bytes_per_element=4):
    return num_heads * seq_len ** 2 * bytes_per_element


@mistake("4.5", "forgets-heads", zh="忘了乘头数：每个头都有一张 T×T 的权重矩阵",
         en="forgot the heads: every head holds a T x T weight matrix")
def _memory_no_heads(batch, num_heads, seq_len, bytes_per_element=4):
    return batch * seq_len ** 2 * bytes_per_element


@mistake("4.5", "seq-len-not-squared", zh="seq_len 没有平方：权重矩阵是 T×T",
         en="seq_len is not squared: the weight matrix is T x T")
def _memory_linear(batch, num_heads, seq_len, bytes_per_element=4):
    return batch * num_heads * seq_len * bytes_per_element


@mistake("4.5", "bits-not-bytes", zh="算成了比特（多乘了 8）：要的是字节",
         en="counted bits (an extra factor 8): bytes are asked for")
def _memory_bits(batch, num_heads, seq_len, bytes_per_element=4):
    return batch * num_heads * seq_len ** 2 * bytes_per_element * 8


@mistake("4.5", "ignores-bytes-per-element", zh="没有用 bytes_per_element，总按 4 字节算",
         en="bytes_per_element is ignored: always counts 4 bytes")
def _memory_fixed_bytes(batch, num_heads, seq_len, bytes_per_element=4):
    return batch * num_heads * seq_len ** 2 * 4
