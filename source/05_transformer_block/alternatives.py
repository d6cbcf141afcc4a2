"""Correct alternatives of 05_transformer_block (instructor side only): validate grades each as a submission.

Each is what a careful student may write instead of the reference: the exp/log form of the frequencies, an
interleave by stack and flatten, float64 inside for 5.1; var_mean, rsqrt, float64 inside for 5.2; F.linear,
einsum, clamp for 5.3; blocks that call their nn.LayerNorm and nn.Linear directly, or merge both masks into
one, for 5.4; other ways to build the model of 5.5, the loss of 5.6, the draw of 5.7, the cache of 5.8 and the
count of 5.9. Every one must keep full marks, in its own exercise and in those built on it. They use the
helpers the student's notebook holds (layer_norm, feed_forward, positional_encoding, MultiHeadAttention,
masked_cross_entropy), as the student's own answer would.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import alternative


# -- 5.1 positional_encoding ------------------------------------------------------------
@alternative("5.1", "exp-log-frequencies", zh="频率写成 exp(-2i·ln(10000)/D)，偶数列和奇数列分别赋值",
             en="frequencies as exp(-2i ln(10000) / D), even and odd columns assigned separately")
def _pe_exp(positions, D):
    # exp(-2i ln 10000 / D) is 10000^(-2i/D); column 2i takes sin, 2i+1 cos of the same angle
    half = (D + 1) // 2
    i = torch.arange(half, device=positions.device, dtype=positions.dtype)
    angle = positions[:, None] * torch.exp(-2 * i * math.log(10000.0) / D)       # (T, ceil(D/2))
    pe = positions.new_zeros(positions.shape[0], D)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, :D // 2])
    return pe


@alternative("5.1", "stack-flatten", zh="正弦和余弦沿新的一维 `torch.stack`，再 `flatten` 交错，奇数 D 时去掉最后一列",
             en="sin and cos stacked on a new dim and flattened to interleave them, the last column dropped for odd D")
def _pe_stack(positions, D):
    half = (D + 1) // 2
    i = torch.arange(half, device=positions.device).to(positions.dtype)
    angle = positions[:, None] / 10000.0 ** (2 * i / D)                            # (T, ceil(D/2))
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)[:, :D]


@alternative("5.1", "float64-loop-over-columns", zh="在 float64 里逐列循环算，最后 .to(positions.dtype)",
             en="a loop over the columns in float64, cast back with .to(positions.dtype)")
def _pe_loop(positions, D):
    p = positions.to(torch.float64)
    columns = []
    for j in range(D):
        angle = p / 10000.0 ** (2 * (j // 2) / D)
        columns.append(torch.sin(angle) if j % 2 == 0 else torch.cos(angle))
    return torch.stack(columns, dim=-1).to(positions.dtype)


@alternative("5.1", "hint-default-dtype", zh="照着公式：`j = torch.arange(D)`，频率 `10000 ** (-(j - j % 2) / D)` 在默认 dtype（float32）里算",
             en="the formula as written: j = torch.arange(D), the frequencies 10000 ** (-(j - j % 2) / D) in the default "
                "dtype (float32)", statement="允许一个 float32 的中间量带来的误差")
def _pe_default_dtype(positions, D):
    j = torch.arange(D, device=positions.device)
    frequency = 10000 ** (-(j - j % 2) / D)                      # (D,) float32: the default dtype
    angle = positions[:, None] * frequency                       # (T, D) in positions' dtype
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))


@alternative("5.1", "d2l-float32-table", zh="d2l-zh 的写法：`torch.pow(10000, torch.arange(0, D, 2, dtype=torch.float32) / D)` 的 float32 频率表",
             en="d2l-zh's idiom: a float32 table torch.pow(10000, torch.arange(0, D, 2, dtype=torch.float32) / D)",
             statement="允许一个 float32 的中间量带来的误差")
def _pe_d2l(positions, D):
    X = positions.reshape(-1, 1) / torch.pow(10000, torch.arange(0, D, 2, dtype=torch.float32,
                                                                 device=positions.device) / D)
    P = torch.zeros(positions.shape[0], D, dtype=positions.dtype, device=positions.device)
    P[:, 0::2] = torch.sin(X)
    P[:, 1::2] = torch.cos(X[:, :D // 2])
    return P


# -- 5.2 layer_norm ----------------------------------------------------------------------
@alternative("5.2", "var-mean-rsqrt", zh="torch.var_mean(correction=0) 一次求出方差和均值，再乘 `torch.rsqrt`",
             en="torch.var_mean(correction=0) for both moments, then a multiplication by rsqrt")
def _ln_var_mean(x, weight=None, bias=None, eps=1e-5):
    # var_mean subtracts the mean before squaring: stable for large offsets, biased with correction=0
    variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(variance + eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


@alternative("5.2", "float64-inside", zh="在 float64 里算，最后 .to(x.dtype) 转回", en="computed in float64, cast back with .to(x.dtype)")
def _ln_float64(x, weight=None, bias=None, eps=1e-5):
    wide = x.to(torch.float64)
    centered = wide - wide.mean(dim=-1, keepdim=True)
    y = centered / torch.sqrt(centered.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(torch.float64)
    if bias is not None:
        y = y + bias.to(torch.float64)
    return y.to(x.dtype)


@alternative("5.2", "torch-var-unbiased-false", zh="torch.var(unbiased=False) 与 `torch.addcmul`：weight 缺省时用 1、bias 缺省时用 0",
             en="torch.var(unbiased=False) and addcmul, with ones for a missing weight and zeros for a missing bias")
def _ln_addcmul(x, weight=None, bias=None, eps=1e-5):
    D = x.shape[-1]
    weight = x.new_ones(D) if weight is None else weight
    bias = x.new_zeros(D) if bias is None else bias
    centered = x - x.mean(dim=-1, keepdim=True)
    normalized = centered / (torch.var(x, dim=-1, keepdim=True, unbiased=False) + eps).sqrt()
    return torch.addcmul(bias, normalized, weight)


# -- 5.3 feed_forward ---------------------------------------------------------------------
@alternative("5.3", "f-linear", zh="F.linear 两次，中间 F.relu", en="F.linear twice with F.relu between")
def _ffn_linear(x, W1, b1, W2, b2):
    return F.linear(F.relu(F.linear(x, W1, b1)), W2, b2)


@alternative("5.3", "einsum-clamp", zh="torch.einsum 做矩阵乘法，clamp(min=0) 当 ReLU", en="torch.einsum for the products, clamp(min=0) as the ReLU")
def _ffn_einsum(x, W1, b1, W2, b2):
    hidden = (torch.einsum("...d,fd->...f", x, W1) + b1).clamp(min=0)
    return torch.einsum("...f,df->...d", hidden, W2) + b2


@alternative("5.3", "flatten-addmm", zh="把前面的维度并成一维，torch.addmm 两次，torch.maximum 与 0 比，再 `reshape` 回去",
             en="leading dims flattened, torch.addmm twice, torch.maximum against 0, reshaped back")
def _ffn_addmm(x, W1, b1, W2, b2):
    flat = x.reshape(-1, x.shape[-1])
    hidden = torch.addmm(b1, flat, W1.T)
    hidden = torch.maximum(hidden, torch.zeros_like(hidden))
    return torch.addmm(b2, hidden, W2.T).reshape(*x.shape[:-1], W2.shape[0])


# -- 5.4 TransformerBlock -----------------------------------------------------------------
@alternative("5.4", "modules-called-directly", zh="直接调用 self.norm1(x)、self.linear1(h) 这些 torch 模块，不经过 5.2、5.3",
             en="torch's modules called directly (self.norm1(x), self.linear1(h)), not through 5.2 and 5.3")
class _BlockModules(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)  # the notebook's (5.4's cell)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask)[0]
        return x + self.linear2(torch.relu(self.linear1(self.norm2(x))))


class _Norm(nn.Module):
    """Two parameters, weight (D,) and bias (D,), for layer_norm: the names nn.LayerNorm gives them."""

    def __init__(self, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias)  # the notebook's 5.2


@alternative("5.4", "own-norm-module", zh="自己写一个有 weight、bias 两个 nn.Parameter 的小模块当 norm1、norm2",
             en="a small module of its own with the two nn.Parameters weight and bias as norm1 and norm2")
class _BlockOwnNorm(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = _Norm(d_model)
        self.norm2 = _Norm(d_model)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        h = self.norm1(x)
        attended, _weights = self.self_attn(h, h, h, key_padding_mask, attn_mask)
        x = x + attended
        return x + feed_forward(self.norm2(x), self.linear1.weight, self.linear1.bias,
                                self.linear2.weight, self.linear2.bias)


@alternative("5.4", "masks-merged", zh="把填充掩码和因果掩码并成一个 (B, 1, T, T) 的 attn_mask 再交给注意力",
             en="the padding and causal masks merged into one (B, 1, T, T) attn_mask before the attention")
class _BlockMerged(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        B, T, _ = x.shape
        merged = torch.zeros(B, 1, T, T, dtype=torch.bool, device=x.device)
        if key_padding_mask is not None:
            merged = merged | key_padding_mask[:, None, None, :]
        if attn_mask is not None:
            merged = merged | attn_mask
        h = layer_norm(x, self.norm1.weight, self.norm1.bias)
        x = x + self.self_attn(h, h, h, attn_mask=merged)[0]
        h = layer_norm(x, self.norm2.weight, self.norm2.bias)
        return x + feed_forward(h, self.linear1.weight, self.linear1.bias, self.linear2.weight,
                                self.linear2.bias)


# -- 5.5 TinyLM -----------------------------------------------------------------------------
@alternative("5.5", "buffer-not-persistent", zh="位置编码算一张够长的表，register_buffer(persistent=False) 存起来，按长度切",
             en="a long enough positional table kept with register_buffer(persistent=False), sliced to the length",
             statement="或者用 `register_buffer(..., persistent=False)` 存起来")
class _LMBuffer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.register_buffer("table", positional_encoding(torch.arange(256.0), d_model), persistent=False)

    def forward(self, tokens, key_padding_mask=None):
        T = tokens.shape[1]
        weight = self.token_embedding.weight
        x = self.token_embedding(tokens) + self.table[:T].to(dtype=weight.dtype, device=weight.device)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tokens.device), diagonal=1)
        for block in self.blocks:
            x = block(x, key_padding_mask, causal)
        return F.linear(layer_norm(x, self.norm.weight, self.norm.bias), weight)


@alternative("5.5", "norm-module-and-f-embedding", zh="F.embedding 查表，最后的规范化直接调用 self.norm(x)，因果掩码用 `torch.arange` 比较",
             en="F.embedding for the lookup, self.norm(x) called directly, the causal mask from an arange comparison")
class _LMFunctional(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(num_layers):
            self.blocks.append(TransformerBlock(d_model, num_heads, d_ff))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, tokens, key_padding_mask=None):
        W = self.token_embedding.weight
        T = tokens.shape[1]
        steps = torch.arange(T, device=tokens.device)
        x = F.embedding(tokens, W) + positional_encoding(steps.to(W.dtype), W.shape[1])
        later = steps[None, :] > steps[:, None]
        for block in self.blocks:
            x = block(x, key_padding_mask=key_padding_mask, attn_mask=later)
        return torch.einsum("btd,vd->btv", self.norm(x), W)


@alternative("5.5", "embedding-module-list-loop", zh="块逐个放进 nn.ModuleList 的下标循环，输出层 x @ W.T 写成 torch.matmul",
             en="the blocks looped over by index, the output layer as torch.matmul with W.T")
class _LMIndexed(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.num_layers = num_layers
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([TransformerBlock(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)

    def forward(self, tokens, key_padding_mask=None):
        W = self.token_embedding.weight
        B, T = tokens.shape
        pe = positional_encoding(torch.arange(T, dtype=W.dtype, device=W.device), W.shape[1])
        x = self.token_embedding(tokens) + pe[None]
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        for i in range(self.num_layers):
            x = self.blocks[i](x, key_padding_mask=key_padding_mask, attn_mask=mask)
        h = layer_norm(x, self.norm.weight, self.norm.bias)
        return torch.matmul(h, W.T)


# -- 5.6 lm_loss -------------------------------------------------------------------------------
@alternative("5.6", "where-ignore-index", zh="用 torch.where 把填充的目标换成 -100，再交给 masked_cross_entropy",
             en="torch.where sets padded targets to -100 before masked_cross_entropy")
def _loss_where(logits, tokens, key_padding_mask=None):
    targets = tokens[:, 1:]
    if key_padding_mask is not None:
        targets = torch.where(key_padding_mask[:, 1:], torch.full_like(targets, -100), targets)
    return masked_cross_entropy(logits[:, :-1], targets)  # the notebook's 3.4


@alternative("5.6", "narrow-and-clone", zh="`narrow` 切出错开一位的 logits 和目标，`clone` 之后按布尔下标赋 -100",
             en="narrow for the shifted logits and targets, a clone with -100 assigned through a boolean index")
def _loss_narrow(logits, tokens, key_padding_mask=None):
    T = tokens.shape[1]
    targets = tokens.narrow(1, 1, T - 1).clone()
    if key_padding_mask is not None:
        targets[key_padding_mask.narrow(1, 1, T - 1)] = -100
    return masked_cross_entropy(logits.narrow(1, 0, T - 1), targets, ignore_index=-100)


@alternative("5.6", "own-ignore-index", zh="用另一个 ignore_index（-1）标出填充的目标", en="another ignore_index (-1) for the padded targets")
def _loss_minus_one(logits, tokens, key_padding_mask=None):
    targets = tokens[:, 1:]
    if key_padding_mask is not None:
        targets = targets.masked_fill(key_padding_mask[:, 1:], -1)
    return masked_cross_entropy(logits[:, :-1], targets, ignore_index=-1)


# -- 5.7 sample_next_token ------------------------------------------------------------------
@alternative("5.7", "max-indices-and-named-arguments", zh="贪心用 torch.max(...).indices，采样用 num_samples=1 的关键字写法",
             en="torch.max(...).indices for greedy, keyword arguments (num_samples=1) for the draw")
def _sample_keywords(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return torch.max(logits, dim=-1).indices
    probs = F.softmax(logits / temperature, dim=-1)
    if seed is None:
        return torch.multinomial(probs, num_samples=1)[:, 0]
    g = torch.Generator(device=logits.device)
    g.manual_seed(seed)
    return torch.multinomial(probs, num_samples=1, generator=g)[:, 0]


@alternative("5.7", "log-softmax-exp", zh="概率写成 log_softmax 再 exp", en="the probabilities as the exp of a log_softmax")
def _sample_log_softmax(logits, temperature=0.0, seed=None):
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.log_softmax(logits / temperature, dim=-1).exp()
    generator = torch.Generator(device=logits.device).manual_seed(seed) if seed is not None else None
    return torch.multinomial(probs, 1, generator=generator).view(-1)


@alternative("5.7", "scaled-logits-first", zh="先把 logits 除以温度存起来，再 softmax；squeeze(1) 去掉抽样的那一维",
             en="the logits divided by the temperature first, then the softmax; squeeze(1) drops the sample dim")
def _sample_scaled(logits, temperature=0.0, seed=None):
    if not temperature:
        return logits.argmax(dim=1)
    scaled = logits / temperature
    kwargs = {} if seed is None else {"generator": torch.Generator(device=logits.device).manual_seed(seed)}
    return torch.multinomial(scaled.softmax(dim=-1), 1, **kwargs).squeeze(1)


# -- 5.8 cached_self_attention ------------------------------------------------------------------
@alternative("5.8", "one-projection-and-where-mask", zh="q、k、v 一次投影再 `chunk`；因果掩码用 torch.where 填 -inf",
             en="q, k and v from one projection then chunked; the causal mask applied with torch.where")
def _cache_one_projection(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    B, T_new, E = x.shape
    d = E // num_heads
    q, k, v = (t.reshape(B, T_new, num_heads, d).transpose(1, 2)
               for t in F.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1))
    if cache is not None:
        k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
    S = k.shape[2] - T_new
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    key_pos = torch.arange(S + T_new, device=x.device)
    query_pos = torch.arange(S, S + T_new, device=x.device)
    scores = torch.where(key_pos[None, :] <= query_pos[:, None], scores, torch.full_like(scores, float("-inf")))
    out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T_new, E)
    return F.linear(out, out_proj_weight, out_proj_bias), (k, v)


@alternative("5.8", "einsum-heads", zh="全程 torch.einsum，头用 `view` 拆开；掩码用 `triu` 的 `diagonal` 参数",
             en="torch.einsum throughout, heads split with view; the mask from triu's diagonal argument")
def _cache_einsum(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    B, T_new, E = x.shape
    d = E // num_heads
    W_q, W_k, W_v = in_proj_weight.chunk(3)
    b_q, b_k, b_v = in_proj_bias.chunk(3)
    q = torch.einsum("bte,fe->btf", x, W_q).add(b_q).view(B, T_new, num_heads, d).permute(0, 2, 1, 3)
    k = torch.einsum("bte,fe->btf", x, W_k).add(b_k).view(B, T_new, num_heads, d).permute(0, 2, 1, 3)
    v = torch.einsum("bte,fe->btf", x, W_v).add(b_v).view(B, T_new, num_heads, d).permute(0, 2, 1, 3)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=-2)
        v = torch.cat([cache[1], v], dim=-2)
    S = k.shape[2] - T_new
    blocked = torch.ones(T_new, S + T_new, dtype=torch.bool, device=x.device).triu(diagonal=S + 1)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d)
    weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    out = torch.einsum("bhqk,bhkd->bqhd", weights, v).reshape(B, T_new, E)
    return out @ out_proj_weight.T + out_proj_bias, (k, v)


@alternative("5.8", "split-merge-additive-mask", zh="用 4.1、4.2 的 split_heads、merge_heads；因果掩码写成 0 / -inf 的浮点张量，加到分数上",
             en="split_heads and merge_heads from 4.1 and 4.2, a float mask of 0 and -inf added to the scores")
def _cache_additive(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    W_q, W_k, W_v = in_proj_weight.chunk(3)
    b_q, b_k, b_v = in_proj_bias.chunk(3)
    q = split_heads(x @ W_q.T + b_q, num_heads)  # the notebook's 4.1
    k = split_heads(x @ W_k.T + b_k, num_heads)
    v = split_heads(x @ W_v.T + b_v, num_heads)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)
        v = torch.cat([cache[1], v], dim=2)
    T_new, total = q.shape[2], k.shape[2]
    later = torch.arange(total, device=x.device)[None, :] - (total - T_new) > torch.arange(T_new, device=x.device)[:, None]
    additive = torch.zeros(T_new, total, dtype=x.dtype, device=x.device).masked_fill(later, float("-inf"))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + additive, dim=-1)
    return merge_heads(weights @ v) @ out_proj_weight.T + out_proj_bias, (k, v)


# -- 5.9 kv_cache_memory -------------------------------------------------------------------
@alternative("5.9", "math-prod", zh="math.prod 乘起所有因子", en="math.prod of every factor")
def _kv_prod(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return math.prod((2, batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element))


@alternative("5.9", "per-layer-sum", zh="逐层累加 K 和 V 的字节数", en="the bytes of K and V added up layer by layer")
def _kv_loop(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    total = 0
    for _ in range(num_layers):
        one = batch * num_heads * seq_len * head_dim * bytes_per_element
        total += one + one                   # a K and a V
    return total


@alternative("5.9", "elements-then-bytes", zh="先数元素个数，再乘字节数，int(...) 收尾", en="count the elements, then times the bytes, int(...)")
def _kv_elements(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    elements = 2 * num_layers * batch * num_heads * seq_len * head_dim
    return int(elements * bytes_per_element)
