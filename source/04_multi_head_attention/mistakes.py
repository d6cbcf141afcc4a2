"""Known mistakes of 04_multi_head_attention (instructor side only).

Functions for 4.1-4.3 and 4.5 have the student's signature; for 4.4 they are
nn.Module classes with the student's constructor, diagnosed through the same
"module" probe. Each makes one realistic mistake and is right otherwise.
4.3 forbids no softmax, so these may use torch.softmax. One mistake of 4.3 is a
forbidden call itself (``calls-sdpa``: right values, F.scaled_dot_product_attention):
it is named by that call, and validate proves that it costs 4.3 its points and 4.4,
which builds on 4.3, none.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

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
@mistake("4.1", "no-transpose", zh="reshape(B, T, H, d) 之后忘了 transpose(1, 2)：头的维度应在 T 之前",
         en="reshaped to (B, T, H, d) but forgot transpose(1, 2): the head dim goes before T")
def _split_no_transpose(x, num_heads):
    B, T, E = x.shape
    _check_divisible(E, num_heads)
    return x.reshape(B, T, num_heads, E // num_heads)                    # (B, T, H, d)


@mistake("4.1", "reshape-to-bhtd", zh="直接 reshape(B, H, T, d)：形状对了，数据却乱了；先 reshape(B, T, H, d)，再 transpose(1, 2)",
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


@mistake("4.1", "chunks-along-time", zh="沿时间维（dim=1）切块再堆叠：头要从每个位置的 E 维特征里切（最后一维），不是从 T 个位置里切",
         en="chunked along the time axis (dim=1) and stacked: heads are cut from each position's E features "
            "(the last dim), not from the T positions")
def _split_time_chunks(x, num_heads):
    B, T, E = x.shape
    _check_divisible(E, num_heads)
    return torch.stack(x.chunk(num_heads, dim=1), dim=1)              # (B, H, T/H, E) where it stacks at all


@mistake("4.1", "error-without-values",
         zh="ValueError 的信息里没有把 E 和 num_heads 的值都写出来：只说“不能整除”，读的人还得自己去找是哪两个数",
         en="the ValueError's message does not give both values, E and num_heads: it says they do not divide, and "
            "the reader has to find the two numbers")
def _split_error_without_values(x, num_heads):
    B, T, E = x.shape
    if E % num_heads != 0:
        raise ValueError("the width is not divisible by the number of heads")
    return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)


# -- 4.2 merge_heads ------------------------------------------------------------------
@mistake("4.2", "no-transpose-back", zh="直接 reshape(B, T, H*d)，没有先 transpose(1, 2) 换回来",
         en="reshaped straight to (B, T, H*d) without transposing back first (transpose(1, 2))")
def _merge_no_transpose(x):
    B, H, T, d = x.shape
    return x.reshape(B, T, H * d)


@mistake("4.2", "merge-as-d-h", zh="合并成了 (d, H) 的顺序：应当是 (H, d)，头 0 的 d 个通道在最前面",
         en="merged in (d, H) order: it is (H, d), head 0's d channels first")
def _merge_d_h(x):
    B, H, T, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, d * H)


@mistake("4.2", "no-reshape", zh="transpose(1, 2) 之后忘了 reshape(B, T, H*d)：应返回 (B, T, H*d)",
         en="transposed but forgot the reshape: return (B, T, H*d)")
def _merge_no_reshape(x):
    return x.transpose(1, 2)                                             # (B, T, H, d)


@mistake("4.2", "cat-along-time", zh="各头沿时间维拼接成了 (B, H*T, d)：要沿特征维（最后一维）拼成 (B, T, H*d)",
         en="the heads are concatenated along time, (B, H*T, d): concatenate along the features (the last dim), "
            "(B, T, H*d)")
def _merge_cat_time(x):
    return torch.cat(x.unbind(dim=1), dim=1)                           # (B, H*T, d)


@mistake("4.2", "wrong-transpose-axes", zh="transpose(2, 3) 换错了轴（最后两维）：要交换的是头和时间两维，transpose(1, 2)",
         en="transposed the wrong axes (the last two): swap the head and time axes, transpose(1, 2)")
def _merge_wrong_axes(x):
    B, H, T, d = x.shape
    return x.transpose(2, 3).reshape(B, T, H * d)


# -- 4.3 multi_head_attention ---------------------------------------------------------
def _safe_softmax(scores, dim=-1):
    row_max = scores.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _masked(scores, mask4):
    """The right normalization: -inf at padded keys, then a softmax that survives a row of -inf."""
    return _safe_softmax(scores if mask4 is None else scores.masked_fill(mask4, float("-inf")))


def _shifted_by(statistic):
    """A softmax shifted by the row's mean or minimum (over every key, before the mask) instead of its
    maximum; the padded keys are zeroed after the exp. Right for moderate scores, inf/inf = NaN once
    a row's largest score is far above its mean or its minimum."""
    def normalize(scores, mask4):
        e = torch.exp(scores - statistic(scores))
        if mask4 is not None:
            e = e.masked_fill(mask4, 0.0)
        total = e.sum(dim=-1, keepdim=True)
        return e / torch.where(total == 0, torch.ones_like(total), total)
    return normalize


def _filled_with(value, patch_dead_rows=False):
    """Padded keys filled with a large finite number instead of -inf (fully padded rows zeroed afterwards
    when ``patch_dead_rows``): padded keys keep weight when the real scores are as negative."""
    def normalize(scores, mask4):
        if mask4 is None:
            return _safe_softmax(scores)
        weights = _safe_softmax(scores.masked_fill(mask4, value))
        if patch_dead_rows:
            weights = weights.masked_fill(mask4.all(dim=-1, keepdim=True), 0.0)
        return weights
    return normalize


def _mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
         key_padding_mask=None, *, split=_split, order=(0, 1, 2), scale_dim=None, out_proj=True,
         average=False, use_mask=True, transpose_weights=True, normalize=_masked, additive_mask=False,
         mask_axis=-1, one_projection=False, bias_after_split=False, softmax_dim=-1):
    """Multi-head attention with one switch per known mistake (defaults: right)."""
    E = query.shape[-1]
    chunks_w = in_proj_weight.chunk(3, dim=0)
    chunks_b = in_proj_bias.chunk(3, dim=0)
    W_q, W_k, W_v = (chunks_w[i] for i in order)                        # each (E, E)
    b_q, b_k, b_v = (chunks_b[i] for i in order)                        # each (E,)
    if one_projection:
        W_k = W_v = W_q
        b_k = b_v = b_q

    def project(x, W, b):
        y = x @ (W.T if transpose_weights else W)
        if not bias_after_split:
            return split(y + b, num_heads)
        d = E // num_heads
        # the bias added to the heads, cut as (d, H) instead of (H, d)
        return split(y, num_heads) + b.reshape(d, num_heads).T[:, None, :]

    q = project(query, W_q, b_q)                                        # (B, H, Tq, d)
    k = project(key, W_k, b_k)                                          # (B, H, Tk, d)
    v = project(value, W_v, b_v)                                        # (B, H, Tk, d)
    d = scale_dim or E // num_heads
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)                     # (B, H, Tq, Tk)
    mask4 = None
    if key_padding_mask is not None and use_mask:
        # (B, 1, 1, Tk) along the keys; mask_axis=-2 puts it along the queries, (B, 1, Tk, 1)
        mask4 = key_padding_mask[:, None, None, :] if mask_axis == -1 else key_padding_mask[:, None, :, None]
    if mask4 is not None and additive_mask:
        # a float mask added to the scores: unlike masked_fill, its backward lets the gradient into padded keys
        scores = scores + torch.zeros_like(scores).masked_fill(mask4, float("-inf"))
        mask4 = None
    if softmax_dim != -1:
        weights = _safe_softmax(scores if mask4 is None else scores.masked_fill(mask4, float("-inf")),
                                dim=softmax_dim)
    else:
        weights = normalize(scores, mask4)
    out = _merge(weights @ v)                                           # (B, Tq, E)
    if out_proj:
        out = out @ (out_proj_weight.T if transpose_weights else out_proj_weight) + out_proj_bias
    return out, (weights.mean(dim=1) if average else weights)


def _split_without_transpose(x, num_heads):
    B, T, E = x.shape
    return x.reshape(B, num_heads, T, E // num_heads)                   # (B, H, T, d), scrambled


@mistake("4.3", "split-no-transpose", zh="拆头时直接 reshape(B, H, T, d)，少了 transpose(1, 2)：各头拿到的是打乱的数据",
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
    return _mha(*args, **kwargs, normalize=_plain_softmax)


def _plain_softmax(scores, mask4):
    """-inf at the padded keys, then torch.softmax: a row of -inf comes out NaN."""
    return torch.softmax(scores if mask4 is None else scores.masked_fill(mask4, float("-inf")), dim=-1)


@mistake("4.3", "softmax-over-heads", zh="softmax 沿头的维度（dim=1）做了：每个查询在自己的那一行键上归一化，应当是最后一维",
         en="the softmax runs over the heads (dim=1): each query normalizes over its own row of keys, the last dim")
def _mha_softmax_heads(*args, **kwargs):
    return _mha(*args, **kwargs, softmax_dim=1)


@mistake("4.3", "mask-along-queries",
         zh="掩码变成了 (B, 1, Tk, 1)，沿查询的方向广播：key_padding_mask 掩蔽的是键，要变成 (B, 1, 1, Tk)",
         en="the mask became (B, 1, Tk, 1), broadcast along the queries: key_padding_mask hides keys, "
            "make it (B, 1, 1, Tk)")
def _mha_mask_queries(*args, **kwargs):
    return _mha(*args, **kwargs, mask_axis=-2)


@mistake("4.3", "bias-heads-interleaved",
         zh="偏置在拆头之后才加，并且按 (d, H) 切开：要么拆头之前加，要么按 (H, d) 切，第 h 个头拿第 h*d 到 (h+1)*d - 1 个偏置",
         en="the bias is added after the heads are split, cut as (d, H): add it before the split, or cut it as "
            "(H, d), head h taking biases h*d to (h+1)*d - 1")
def _mha_bias_interleaved(*args, **kwargs):
    return _mha(*args, **kwargs, bias_after_split=True)


@mistake("4.3", "one-projection-for-qkv",
         zh="q、k、v 用了同一块权重（in_proj_weight 的前 E 行）：三块各不相同，按 q、k、v 的顺序上下堆叠",
         en="q, k and v all use the same weights (the first E rows of in_proj_weight): the three blocks differ, "
            "stacked q, k, v from the top")
def _mha_one_projection(*args, **kwargs):
    return _mha(*args, **kwargs, one_projection=True)


@mistake("4.3", "shift-by-mean",
         zh="softmax 之前减去的是每行的均值，不是最大值：同一行的分数相差几千时 exp 溢出成 inf，inf/inf 得到 NaN",
         en="the softmax subtracts each row's mean, not its maximum: when a row's scores are thousands apart, "
            "exp overflows to inf and inf/inf gives NaN")
def _mha_shift_mean(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_shifted_by(lambda s: s.mean(dim=-1, keepdim=True)))


@mistake("4.3", "shift-by-min",
         zh="softmax 之前减去的是每行的最小值，不是最大值：exp 的指数全都 ≥ 0，分数相差几百时就溢出成 inf，得到 NaN",
         en="the softmax subtracts each row's minimum, not its maximum: every exponent is >= 0 and overflows "
            "to inf once a row's scores are a few hundred apart, giving NaN")
def _mha_shift_min(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_shifted_by(lambda s: s.amin(dim=-1, keepdim=True)))


def _max_over_every_key(scores, mask4):
    """Shifted by the row's maximum over every key, the padded ones included (taken before the mask), the
    padded keys zeroed after the exp: a row whose live keys all sit thousands below a padded key's score
    underflows to 0 everywhere."""
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    if mask4 is not None:
        e = e.masked_fill(mask4, 0.0)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


@mistake("4.3", "max-over-padded-keys",
         zh="softmax 之前减去的最大值是在掩蔽之前、连同填充的键一起取的：填充键的分数比真实的键高出几千时，"
            "真实的键 exp 之后全是 0，这一行的权重全丢了；先填 -inf，再取每行（未填充的键里）的最大值",
         en="the maximum subtracted before the softmax is taken before the mask, over the padded keys too: when a "
            "padded key scores thousands above the real ones, every real key's exp is 0 and the row loses all its "
            "weight; fill -inf first, then take each row's maximum (over its unpadded keys)")
def _mha_max_over_padded(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_max_over_every_key)


@mistake("4.3", "fill-minus-1e9",
         zh="填充键填的是 -1e9（或 torch.finfo(dtype).min 这样有限的大负数），不是 -inf：键全为填充的那一批变成均匀分布，"
            "而不是全 0；真实分数同样很负时，填充键还会分走权重",
         en="padded keys filled with -1e9 (or another large finite number such as torch.finfo(dtype).min), not "
            "-inf: a batch row whose keys are all padded comes out uniform instead of all zeros, and padded keys "
            "take weight when the real scores are as negative")
def _mha_fill_1e9(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_filled_with(-1e9))


@mistake("4.3", "fill-minus-1e4-patched",
         zh="填充键填的是 -1e4，再把全填充的那一批补成 0：真实分数本身比 -1e4 还小时，填充键反而拿走了权重；要填 -inf",
         en="padded keys filled with -1e4, the fully padded rows then set to 0: when the real scores are below "
            "-1e4 the padded keys take the weight; fill with -inf")
def _mha_fill_1e4_patched(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_filled_with(-1e4, patch_dead_rows=True))


@mistake("4.3", "fill-minus-1e9-patched",
         zh="填充键填的是 -1e9，再把全填充的那一批补成 0：真实分数低到 -1e9 附近时，填充键和真实的键分权重；"
            "任何有限的数都有比它更小的分数，要填 -inf",
         en="padded keys filled with -1e9, the fully padded rows then set to 0: when the real scores are near "
            "-1e9 the padded keys share the weight; every finite number has scores below it, fill with -inf")
def _mha_fill_1e9_patched(*args, **kwargs):
    return _mha(*args, **kwargs, normalize=_filled_with(-1e9, patch_dead_rows=True))


# Last of 4.3's: its values are the reference's, so it never matches a wrong output before a value mistake does.
@mistake("4.3", "calls-sdpa", calls=("F.scaled_dot_product_attention",),
         zh="各头的输出是用 F.scaled_dot_product_attention 算的：本题禁止调用它，分数、掩码、softmax 和加权求和都要亲手写"
            "（权重本来就要自己算出来返回），用了它整道题记 0 分",
         en="the heads' output is computed with F.scaled_dot_product_attention: this exercise forbids it; write the "
            "scores, the mask, the softmax and the weighted sum by hand (the weights you return are yours anyway); "
            "with it the whole exercise scores 0")
def _mha_sdpa(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
              key_padding_mask=None):
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0)
    q, k, v = (_split(x @ W.T + b, num_heads) for x, W, b in ((query, W_q, b_q), (key, W_k, b_k), (value, W_v, b_v)))
    mask4 = None if key_padding_mask is None else key_padding_mask[:, None, None, :]     # (B, 1, 1, Tk)
    weights = _masked(q @ k.transpose(-2, -1) / math.sqrt(E // num_heads), mask4)       # SDPA returns none
    attend = dead = None
    if mask4 is not None:
        # SDPA's bool mask says where to attend; a fully padded row attends everywhere, then is zeroed (no NaN)
        dead = mask4.all(dim=-1, keepdim=True)                                          # (B, 1, 1, 1)
        attend = ~mask4 | dead
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attend)                   # (B, H, Tq, d)
    if dead is not None:
        heads = heads.masked_fill(dead, 0.0)
    return _merge(heads) @ out_proj_weight.T + out_proj_bias, weights


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


@mistake("4.4", "no-out-proj", zh="`forward` 里没有用 out_proj：合并各头后还要经过输出投影",
         en="forward skips out_proj: the merged heads still go through the output projection")
class _ModuleNoOut(_Module):
    options = {"out_proj": False}


@mistake("4.4", "weights-not-transposed", zh="投影写成了 x @ W：nn.Linear 约定的是 x @ W.T + b（torch 存的是转置）",
         en="projections written as x @ W: nn.Linear's convention is x @ W.T + b (torch stores the transpose)")
class _ModuleNoTranspose(_Module):
    options = {"transpose_weights": False}


@mistake("4.4", "detached-weights", zh="in_proj_weight 被切断在计算图之外（.detach() 或 .data）：梯度传不到它",
         en="in_proj_weight is detached (.detach() or .data): no gradient reaches it")
class _ModuleDetached(_Module):
    def weights(self, query):
        W_in, b_in, W_out, b_out = super().weights(query)
        return W_in.detach(), b_in, W_out, b_out


def _softmax_then_nan_to_num(scores, mask4):
    """The additive-mask recipe (the mask is already in the scores): torch.softmax makes NaN on a fully
    masked row, nan_to_num hides it."""
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)


@mistake("4.4", "nan-to-num-backward",
         zh="加法掩码（分数加上 0/-inf 的浮点掩码）让全填充行的 softmax 算出 NaN，再用 nan_to_num 换成 0：前向对了，"
            "可 softmax 的反向要乘上它自己的输出（NaN），加法又把 NaN 原样传回分数：in_proj_weight、in_proj_bias 里 q、k 两块的梯度，"
            "还有这一批 query 的梯度，都成了 NaN"
            "（torch 自己的模块在这里也是这样加的，所以也是 NaN）。用 masked_fill 填 -inf，它的反向会把这一行的梯度换成 0；"
            "最稳妥的是在 softmax 之前处理：行最大值为 -inf 时换成 0，行和为 0 时换成 1",
         en="an additive mask (a 0/-inf float mask added to the scores) makes the fully padded row's softmax NaN, "
            "and nan_to_num turns it into 0: the forward pass is right, but the softmax's backward multiplies by "
            "its own output (NaN) and the addition passes the NaN on to the scores: the gradients of the q and k "
            "blocks of in_proj_weight and in_proj_bias, and of this batch row's query, are NaN (torch's own "
            "module adds its mask the same way, hence its NaN). masked_fill(-inf) would zero this row's gradient in its backward; safest: handle the row "
            "before the softmax, a -inf row max becomes 0, a zero row sum becomes 1")
class _ModuleNanToNum(_Module):
    # With masked_fill the backward zeroes the padded keys' gradient and hides the NaN; an additive mask does not.
    options = {"normalize": _softmax_then_nan_to_num, "additive_mask": True}


@mistake("4.4", "bias-not-registered",
         zh="in_proj_bias 是普通张量（torch.zeros(...)），没有用 nn.Parameter 包起来：它不在 state_dict 里，"
            "load_state_dict 装不进 torch 的偏置，也不会被训练",
         en="in_proj_bias is a plain tensor (torch.zeros(...)), not wrapped in nn.Parameter: it is not in the "
            "state_dict, load_state_dict cannot load torch's bias into it, and it is never trained")
class _ModulePlainBias(_Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__(embed_dim, num_heads, bias)
        if bias:
            del self.in_proj_bias
            self.in_proj_bias = torch.zeros(3 * embed_dim)             # a plain attribute, not a parameter


@mistake("4.4", "bias-kept-without-bias",
         zh="bias=False 时仍然创建了 in_proj_bias（全 0 的 nn.Parameter）：输出一样，可 torch 的 nn.MultiheadAttention"
            "（bias=False）没有这个参数，load_state_dict(..., strict=True) 会报错；bias=False 时要 "
            "register_parameter(\"in_proj_bias\", None)",
         en="with bias=False it still creates in_proj_bias (an nn.Parameter of zeros): the output is the same, but "
            "torch's nn.MultiheadAttention (bias=False) has no such parameter and load_state_dict(..., strict=True) "
            "raises; with bias=False, register_parameter(\"in_proj_bias\", None)")
class _ModuleBiasAlways(_Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__(embed_dim, num_heads, bias)
        if not bias:
            del self.in_proj_bias
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))   # zeros: the output does not change


@mistake("4.4", "out-proj-twice",
         zh="输出投影做了两次：multi_head_attention 已经乘过 out_proj_weight.T、加过 out_proj_bias，`forward` 里又用了一次 self.out_proj",
         en="the output projection is applied twice: multi_head_attention already applies out_proj_weight.T and "
            "out_proj_bias, and forward applies self.out_proj again")
class _ModuleOutTwice(_Module):
    def forward(self, query, key, value, key_padding_mask=None):
        out, weights = super().forward(query, key, value, key_padding_mask)
        return self.out_proj(out), weights


@mistake("4.4", "fill-minus-1e9",
         zh="填充键填的是 -1e9（或 torch.finfo(dtype).min 这样有限的大负数），不是 -inf：键全为填充的那一批变成均匀分布，"
            "而不是全 0",
         en="padded keys filled with -1e9 (or another large finite number such as torch.finfo(dtype).min), not "
            "-inf: a batch row whose keys are all padded comes out uniform instead of all zeros")
class _ModuleFill1e9(_Module):
    options = {"normalize": _filled_with(-1e9)}


@mistake("4.4", "fill-minus-1e4-patched",
         zh="填充键填的是 -1e4，再把全填充的那一批补成 0：真实分数本身比 -1e4 还小时，填充键反而拿走了权重；要填 -inf",
         en="padded keys filled with -1e4, the fully padded rows then set to 0: when the real scores are below "
            "-1e4 the padded keys take the weight; fill with -inf")
class _ModuleFill1e4Patched(_Module):
    options = {"normalize": _filled_with(-1e4, patch_dead_rows=True)}


@mistake("4.4", "shift-by-mean",
         zh="softmax 之前减去的是每行的均值，不是最大值：同一行的分数相差几千时 exp 溢出成 inf，inf/inf 得到 NaN",
         en="the softmax subtracts each row's mean, not its maximum: when a row's scores are thousands apart, "
            "exp overflows to inf and inf/inf gives NaN")
class _ModuleShiftMean(_Module):
    options = {"normalize": _shifted_by(lambda s: s.mean(dim=-1, keepdim=True))}


@mistake("4.4", "shift-by-min",
         zh="softmax 之前减去的是每行的最小值，不是最大值：exp 的指数全都 ≥ 0，分数相差几百时就溢出成 inf，得到 NaN",
         en="the softmax subtracts each row's minimum, not its maximum: every exponent is >= 0 and overflows "
            "to inf once a row's scores are a few hundred apart, giving NaN")
class _ModuleShiftMin(_Module):
    options = {"normalize": _shifted_by(lambda s: s.amin(dim=-1, keepdim=True))}


@mistake("4.4", "no-mask-as-all-padded",
         zh="不传 key_padding_mask 时，把它换成了全 True 的掩码：True 表示填充，于是每个键都被当成填充，"
            "权重全为 0；None 表示没有填充，要么不加掩码，要么换成全 False 的掩码",
         en="without a key_padding_mask it uses a mask of all True: True means padding, so every key counts as "
            "padded and the weights are all 0; None means no padding: apply no mask, or one of all False")
class _ModuleNoMaskAllPadded(_Module):
    def forward(self, query, key, value, key_padding_mask=None):
        if key_padding_mask is None:
            key_padding_mask = torch.ones(key.shape[:2], dtype=torch.bool, device=key.device)
        return super().forward(query, key, value, key_padding_mask)


# -- 4.5 attention_memory -------------------------------------------------------------
# First: it matches only a right number of the wrong type, which no other mistake's failing call returns.
@mistake("4.5", "returns-float", zh="返回了 float（或张量），不是 Python int：math.pow、/、** 0.5 这些都会变成浮点数，"
                                  "字节数要用整数运算（* 和 **）算，必要时 int(...)",
         en="returns a float (or a tensor), not a Python int: math.pow, / and ** 0.5 all make floats; count the "
            "bytes with integer arithmetic (* and **), int(...) where needed")
def _memory_float(batch, num_heads, seq_len, bytes_per_element=4):
    return batch * num_heads * math.pow(seq_len, 2) * bytes_per_element


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


@mistake("4.5", "counts-scores-too", zh="把分数矩阵也算进来了（乘了 2）：这里只数注意力权重这一张 (B, H, T, T)",
         en="counted the score matrix too (a factor 2): only the attention weights, one (B, H, T, T), are asked for")
def _memory_scores_too(batch, num_heads, seq_len, bytes_per_element=4):
    return 2 * batch * num_heads * seq_len ** 2 * bytes_per_element
