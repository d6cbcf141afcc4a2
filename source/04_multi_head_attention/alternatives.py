"""Correct alternatives of 04_multi_head_attention (instructor side only): validate grades each as a submission.

Each is what a careful student may write instead of the reference: other reshapes for 4.1/4.2, per-head
loops, einsum, one projection matmul, additive masks, nan_to_num after a masked_fill, float64 inside for
4.3, modules built other ways for 4.4, integer arithmetic for 4.5. Every one must keep full marks, in its
own exercise and in those built on it (4.3 and 4.4 call split_heads, merge_heads, multi_head_attention).
"""
from __future__ import annotations

import functools
import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import alternative


# -- 4.1 split_heads ------------------------------------------------------------------
@alternative("4.1", "view-permute", zh="view(B, T, H, d) 再 permute(0, 2, 1, 3)",
             en="view as (B, T, H, d), then permute(0, 2, 1, 3)")
def _split_view_permute(x, num_heads):
    # the same cut of each token's features as reshape (x arrives contiguous), the same axis swap as transpose(1, 2)
    B, T, E = x.shape
    if E % num_heads:
        raise ValueError(f"embed_dim {E} is not divisible by num_heads {num_heads}")
    return x.view(B, T, num_heads, E // num_heads).permute(0, 2, 1, 3)


@alternative("4.1", "unflatten-transpose", zh="unflatten(-1, (H, -1))，再 transpose(1, 2)",
             en="unflatten the last dim into (H, -1), then transpose(1, 2)")
def _split_unflatten(x, num_heads):
    # unflatten(-1, (H, d)) is reshape(B, T, H, d) without naming B and T
    if x.shape[-1] % num_heads != 0:
        raise ValueError(f"cannot split {x.shape[-1]} features into {num_heads} heads of equal width")
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


@alternative("4.1", "stack-of-chunks", zh="沿最后一维切成 H 块，再 torch.stack(..., dim=1)",
             en="chunk the last dim into H pieces, stack them on dim=1")
def _split_stack(x, num_heads):
    # chunk h holds features h*d .. h*d + d - 1 of every token, (B, T, d): stacked on dim 1 it is head h
    E = x.shape[-1]
    if E % num_heads != 0:
        raise ValueError(f"E = {E} must be a multiple of num_heads = {num_heads}")
    return torch.stack(torch.split(x, E // num_heads, dim=-1), dim=1)


@alternative("4.1", "reshape-minus-one-movedim", zh="reshape(B, T, H, -1) 再 movedim(2, 1)，ValueError 自己写说明",
             en="reshape(B, T, H, -1), then movedim(2, 1); a ValueError with its own message")
def _split_movedim(x, num_heads):
    # movedim(2, 1) moves the head axis before time: the same permutation as transpose(1, 2)
    B, T, E = x.shape
    d, rest = divmod(E, num_heads)
    if rest:
        raise ValueError(f"{num_heads} heads do not divide the width {E} (remainder {rest})")
    return torch.movedim(x.reshape(B, T, num_heads, -1), 2, 1)


# -- 4.2 merge_heads ------------------------------------------------------------------
@alternative("4.2", "permute-reshape", zh="permute(0, 2, 1, 3) 再 reshape(B, T, H*d)", en="permute(0, 2, 1, 3), then reshape")
def _merge_permute(x):
    # permute(0, 2, 1, 3) is transpose(1, 2); reshape copies the non-contiguous result
    B, H, T, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * d)


@alternative("4.2", "transpose-flatten", zh="transpose(1, 2) 再 flatten(2)", en="transpose(1, 2), then flatten(2)")
def _merge_flatten(x):
    # flatten(2) merges the last two dims (H, d) into H*d, head 0's features first
    return x.transpose(1, 2).flatten(2)


@alternative("4.2", "cat-of-unbind", zh="unbind(1) 拆出各头，再 torch.cat(..., dim=-1)", en="unbind(1) the heads, cat on the last dim")
def _merge_cat(x):
    # head h's (B, T, d) lands at features h*d .. h*d + d - 1, exactly as split_heads cut them
    return torch.cat(x.unbind(dim=1), dim=-1)


@alternative("4.2", "contiguous-view", zh="transpose(1, 2)、contiguous()，再 view(B, T, H*d)", en="transpose, contiguous(), then view")
def _merge_view(x):
    # contiguous() makes the copy that view needs after a transpose
    B, H, T, d = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * d)


# -- 4.3 multi_head_attention ---------------------------------------------------------
def _stable_masked_softmax(scores, mask):
    """Softmax over the last dim, ``mask`` True = excluded, rows with no key left all zeros (no NaN either way)."""
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


@alternative("4.3", "loop-over-heads-linear", zh="逐个头循环：按头切 in_proj_weight 的行，用 F.linear 投影",
             en="a loop over the heads: in_proj_weight's rows sliced per head, projected with F.linear")
def _mha_loop(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
              key_padding_mask=None):
    # head h of q is rows h*d .. h*d + d - 1 of W_q (nn.Linear's layout); the heads side by side are merge_heads
    E = query.shape[-1]
    d = E // num_heads
    outs, maps = [], []
    for h in range(num_heads):
        rows = slice(h * d, (h + 1) * d)
        q = F.linear(query, in_proj_weight[:E][rows], in_proj_bias[:E][rows])              # (B, Tq, d)
        k = F.linear(key, in_proj_weight[E:2 * E][rows], in_proj_bias[E:2 * E][rows])      # (B, Tk, d)
        v = F.linear(value, in_proj_weight[2 * E:][rows], in_proj_bias[2 * E:][rows])      # (B, Tk, d)
        scores = q @ k.transpose(1, 2) / math.sqrt(d)                                      # (B, Tq, Tk)
        mask = None if key_padding_mask is None else key_padding_mask[:, None, :]
        w = _stable_masked_softmax(scores, mask)
        maps.append(w)
        outs.append(w @ v)
    return F.linear(torch.cat(outs, dim=-1), out_proj_weight, out_proj_bias), torch.stack(maps, dim=1)


@alternative("4.3", "einsum-nan-to-num", zh="全程 torch.einsum；masked_fill(-inf) 后 torch.softmax，再 nan_to_num",
             en="einsum throughout; masked_fill(-inf), torch.softmax, then nan_to_num")
def _mha_einsum(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                key_padding_mask=None):
    # a row of -inf gives NaN, nan_to_num makes it 0; the backward of masked_fill zeroes that row's gradient
    B, Tq, E = query.shape
    H, d = num_heads, E // num_heads
    W = in_proj_weight.reshape(3, H, d, E)
    b = in_proj_bias.reshape(3, H, d)
    q = torch.einsum("bte,hde->bhtd", query, W[0]) + b[0][:, None, :]
    k = torch.einsum("bse,hde->bhsd", key, W[1]) + b[1][:, None, :]
    v = torch.einsum("bse,hde->bhsd", value, W[2]) + b[2][:, None, :]
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(d)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    heads = torch.einsum("bhts,bhsd->bthd", weights, v)
    out = torch.einsum("bthd,ohd->bto", heads, out_proj_weight.reshape(E, H, d)) + out_proj_bias
    return out, weights


@alternative("4.3", "one-matmul-additive-mask", zh="q、k、v 拼成一次矩阵乘法再切开；加法浮点掩码 (0/-inf)，softmax 前处理全填充行",
             en="one matmul for q, k and v, then sliced; an additive float mask (0/-inf), fully padded rows handled "
                "before the softmax")
def _mha_one_matmul(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                    key_padding_mask=None):
    # each token's row times in_proj_weight.T: the q, k or v block is the slice of the columns it needs
    B, Tq, E = query.shape
    Tk = key.shape[1]
    proj = torch.cat([query, key, value], dim=1) @ in_proj_weight.T + in_proj_bias      # (B, Tq + 2Tk, 3E)
    q = split_heads(proj[:, :Tq, :E], num_heads)
    k = split_heads(proj[:, Tq:Tq + Tk, E:2 * E], num_heads)
    v = split_heads(proj[:, Tq + Tk:, 2 * E:], num_heads)
    scores = q @ k.transpose(-2, -1) * (E // num_heads) ** -0.5
    if key_padding_mask is not None:
        additive = torch.zeros(key_padding_mask.shape, dtype=scores.dtype, device=scores.device)
        scores = scores + additive.masked_fill(key_padding_mask, float("-inf"))[:, None, None, :]
    weights = _stable_masked_softmax(scores, None)
    return merge_heads(weights @ v) @ out_proj_weight.T + out_proj_bias, weights


@alternative("4.3", "hand-softmax-nan-to-num", zh="masked_fill(-inf)，手写 softmax（减最大值），再 nan_to_num",
             en="masked_fill(-inf), a hand-written softmax (max shift), then nan_to_num")
def _mha_hand_nan(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                  key_padding_mask=None):
    # exp(-inf - (-inf)) is NaN only in fully padded rows, which nan_to_num sets to 0; masked_fill's backward
    # zeroes their gradient
    W_q, W_k, W_v = in_proj_weight.split(query.shape[-1])
    b_q, b_k, b_v = in_proj_bias.split(query.shape[-1])
    q = split_heads(F.linear(query, W_q, b_q), num_heads)
    k = split_heads(F.linear(key, W_k, b_k), num_heads)
    v = split_heads(F.linear(value, W_v, b_v), num_heads)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = torch.nan_to_num(e / e.sum(dim=-1, keepdim=True), nan=0.0)
    return F.linear(merge_heads(weights @ v), out_proj_weight, out_proj_bias), weights


@alternative("4.3", "float64-inside", zh="在 float64 里算，最后 .to(query.dtype) 转回；logsumexp 归一化",
             en="computed in float64, cast back with .to(query.dtype); normalized with logsumexp")
def _mha_float64(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                 key_padding_mask=None):
    # more precision inside, the input's dtype outside; exp(s - logsumexp(s)) is a stable softmax, a row of
    # -inf (logsumexp -inf) is replaced by 0 weights before it can divide 0/0
    wide = torch.float64
    x_q, x_k, x_v = query.to(wide), key.to(wide), value.to(wide)
    W_q, W_k, W_v = in_proj_weight.to(wide).chunk(3)
    b_q, b_k, b_v = in_proj_bias.to(wide).chunk(3)
    q = split_heads(x_q @ W_q.T + b_q, num_heads)
    k = split_heads(x_k @ W_k.T + b_k, num_heads)
    v = split_heads(x_v @ W_v.T + b_v, num_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    dead = torch.isinf(lse)
    shift = torch.where(dead, torch.zeros_like(lse), lse)
    weights = torch.where(dead, torch.zeros_like(scores), torch.exp(scores - shift))
    out = merge_heads(weights @ v) @ out_proj_weight.to(wide).T + out_proj_bias.to(wide)
    return out.to(query.dtype), weights.to(query.dtype)


@alternative("4.3", "where-logsumexp", zh="torch.where 掩蔽，在输入的 dtype 里用 logsumexp 归一化",
             en="masked with torch.where, normalized with logsumexp in the input's dtype")
def _mha_where_lse(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                   key_padding_mask=None):
    # exp(s - logsumexp(s)) is the softmax; a fully padded row's logsumexp is -inf, shifted by 0 it gives exp(-inf) = 0
    d = query.shape[-1] // num_heads
    q, k, v = (split_heads(F.linear(x, W, b), num_heads)
               for x, W, b in zip((query, key, value), in_proj_weight.chunk(3), in_proj_bias.chunk(3)))
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if key_padding_mask is not None:
        scores = torch.where(key_padding_mask[:, None, None, :], torch.full_like(scores, float("-inf")), scores)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    weights = torch.exp(scores - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)))
    return F.linear(merge_heads(torch.matmul(weights, v)), out_proj_weight, out_proj_bias), weights


# -- 4.4 MultiHeadAttention -----------------------------------------------------------
@alternative("4.4", "parameters-without-linear",
             zh="不用 nn.Linear：out_proj 是一个空 nn.Module，out_proj.weight、out_proj.bias 作为 nn.Parameter 挂上去",
             en="no nn.Linear: out_proj is an empty nn.Module holding weight and bias as nn.Parameter")
class _ModuleNoLinear(nn.Module):
    # the names are what count: out_proj.weight and out_proj.bias load with strict=True all the same
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Module()
        self.out_proj.weight = nn.Parameter(torch.empty(embed_dim, embed_dim))
        self.out_proj.bias = nn.Parameter(torch.zeros(embed_dim)) if bias else None
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.xavier_uniform_(self.out_proj.weight)

    def forward(self, query, key, value, key_padding_mask=None):
        E = query.shape[-1]
        zeros = functools.partial(torch.zeros, dtype=query.dtype, device=query.device)
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else zeros(3 * E)
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else zeros(E)
        return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, in_bias,
                                    self.out_proj.weight, out_bias, key_padding_mask=key_padding_mask)


@alternative("4.4", "linear-calls-4-3", zh="nn.Linear 做 out_proj，register_parameter 登记没有的偏置，`forward` 调用 4.3",
             en="nn.Linear for out_proj, register_parameter for an absent bias, forward calls 4.3")
class _ModuleCalls43(nn.Module):
    # as torch builds it; without biases the zeros added by 4.3 change nothing
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"num_heads = {num_heads} must divide embed_dim = {embed_dim}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * embed_dim, embed_dim)))
        self.register_parameter("in_proj_bias", nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None):
        W = self.in_proj_weight
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else W.new_zeros(W.shape[0])
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else W.new_zeros(W.shape[1])
        return multi_head_attention(query, key, value, self.num_heads, W, in_bias, self.out_proj.weight, out_bias,
                                    key_padding_mask)


@alternative("4.4", "biases-as-they-are", zh="偏置原样交给 4.3：bias=False 时就是 None（4.3 把 None 当作没有偏置）",
             en="the biases handed to 4.3 as they are: None with bias=False (4.3 takes None as no bias)")
class _ModuleBiasesAsTheyAre(nn.Module):
    # "bias=False is a bias of 0": this 4.3 takes None for it, so 4.4 need not make the zeros itself
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None):
        return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                                    self.out_proj.weight, self.out_proj.bias, key_padding_mask)


@alternative("4.4", "own-loop-over-heads", zh="`forward` 自己逐个头循环（F.linear、masked_fill(-inf)、softmax、nan_to_num），不调用 4.3",
             en="forward loops over the heads itself (F.linear, masked_fill(-inf), softmax, nan_to_num), without 4.3",
             statement="用 `masked_fill` 填 $-\\infty$、softmax 之后再 `nan_to_num` 的写法也满足")
class _ModuleOwnLoop(nn.Module):
    # per head as 4.3 computes it; masked_fill's backward zeroes the fully padded rows' NaN gradient
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None):
        E, H = self.embed_dim, self.num_heads
        d = E // H
        W_q, W_k, W_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        heads, maps = [], []
        for h in range(H):
            rows = slice(h * d, (h + 1) * d)
            q = F.linear(query, W_q[rows], None if b_q is None else b_q[rows])
            k = F.linear(key, W_k[rows], None if b_k is None else b_k[rows])
            v = F.linear(value, W_v[rows], None if b_v is None else b_v[rows])
            scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)
            if key_padding_mask is not None:
                scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
            w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            maps.append(w)
            heads.append(torch.bmm(w, v))
        return self.out_proj(torch.cat(heads, dim=-1)), torch.stack(maps, dim=1)


# -- 4.5 attention_memory -------------------------------------------------------------
@alternative("4.5", "math-prod", zh="math.prod 乘起所有因子", en="math.prod of every factor")
def _memory_prod(batch, num_heads, seq_len, bytes_per_element=4):
    # math.prod of ints is an int, of any size
    return math.prod([batch, num_heads, seq_len, seq_len, bytes_per_element])


@alternative("4.5", "multiplication-chain", zh="先数元素个数，再乘字节数", en="count the elements, then times the bytes")
def _memory_chain(batch, num_heads, seq_len, bytes_per_element=4):
    # Python ints never overflow: 100k tokens are as exact as 10
    elements = batch * num_heads * seq_len * seq_len
    return elements * bytes_per_element


@alternative("4.5", "shift-for-powers-of-two", zh="字节数是 2 的幂时用左移，否则用乘法",
             en="a left shift when the bytes per element are a power of two, else a multiplication")
def _memory_shift(batch, num_heads, seq_len, bytes_per_element=4):
    # x << k is x * 2**k for ints; 1, 2, 4, 8 bytes are 2**0 .. 2**3
    elements = functools.reduce(operator.mul, (batch, num_heads, pow(seq_len, 2)), 1)
    if bytes_per_element > 0 and bytes_per_element & (bytes_per_element - 1) == 0:
        return elements << (bytes_per_element.bit_length() - 1)
    return elements * bytes_per_element
