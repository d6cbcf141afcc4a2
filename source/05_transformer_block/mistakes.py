"""Known mistakes of 05_transformer_block (instructor side only).

Functions have the student's signature; for 5.4 and 5.5 they are nn.Module classes with the student's
constructor, diagnosed through the same "module" probe. Each makes one realistic mistake and is right
otherwise. The module mistakes carry their own attention (torch-named, as the student's 4.4) so that
they stand alone.
"""
from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import mistake


# -- 5.1 positional_encoding ------------------------------------------------------------
def _pe(positions, D, *, swap=False, per_column=False, halves=False, multiply=False):
    column = torch.arange(D, device=positions.device)
    pair = column if per_column else column - column % 2
    exponent = pair.to(positions.dtype) / D
    frequency = 10000.0 ** (exponent if multiply else -exponent)
    angle = positions[:, None] * frequency
    if halves:
        # first ceil(D/2) columns the sines of frequencies 0, 1, ..., then the cosines
        half = (D + 1) // 2
        i = torch.arange(half, device=positions.device).to(positions.dtype)
        w = 10000.0 ** (-2 * i / D)
        a = positions[:, None] * w
        return torch.cat([torch.sin(a), torch.cos(a)[:, :D - half]], dim=-1)
    even = column % 2 == 0
    return torch.where(even, torch.cos(angle), torch.sin(angle)) if swap else torch.where(even, torch.sin(angle), torch.cos(angle))


@mistake("5.1", "sin-cos-swapped", zh="正弦和余弦放反了：偶数列（2i）是正弦，奇数列（2i+1）是余弦",
         en="sin and cos are swapped: even columns (2i) hold the sin, odd columns (2i+1) the cos")
def _pe_swapped(positions, D):
    return _pe(positions, D, swap=True)


@mistake("5.1", "exponent-per-column", zh="指数用了列号 j（10000^(j/D)）：第 2i 和 2i+1 列共用同一个频率 10000^(2i/D)",
         en="the exponent uses the column j (10000^(j/D)): columns 2i and 2i+1 share the frequency 10000^(2i/D)")
def _pe_per_column(positions, D):
    return _pe(positions, D, per_column=True)


@mistake("5.1", "halves-not-interleaved", zh="前一半列放正弦、后一半列放余弦：要交错排列，第 2i 列正弦、第 2i+1 列余弦",
         en="the sines fill the first half of the columns and the cosines the second: interleave them, sin in column "
            "2i, cos in column 2i+1")
def _pe_halves(positions, D):
    return _pe(positions, D, halves=True)


@mistake("5.1", "multiplied-by-frequency-power", zh="乘了 10000^(2i/D)，没有除：位置要除以 10000^(2i/D)，高维转得慢",
         en="multiplied by 10000^(2i/D) instead of dividing: positions are divided by 10000^(2i/D), so high columns "
            "turn slowly")
def _pe_multiplied(positions, D):
    return _pe(positions, D, multiply=True)


@mistake("5.1", "positions-ignored", zh="没有用传进来的 positions，而是按行号 0、1、2…… 编码：第 k 行要编码位置 positions[k]"
         "（逐个生成时传进来的是新的位置，不从 0 开始）",
         en="the positions given are ignored and the rows 0, 1, 2, ... are encoded instead: row k encodes "
            "positions[k] (when generating one token at a time the new positions do not start at 0)")
def _pe_row_numbers(positions, D):
    rows = torch.arange(positions.shape[0], device=positions.device).to(positions.dtype)
    return _pe(rows, D)


# -- 5.2 layer_norm ----------------------------------------------------------------------
def _affine(y, weight, bias):
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


@mistake("5.2", "unbiased-variance", zh="方差用了无偏估计（除以 D-1，torch.var 的默认）：层规范化除以 D",
         en="the variance is unbiased (divided by D-1, torch.var's default): layer norm divides by D")
def _ln_unbiased(x, weight=None, bias=None, eps=1e-5):
    quiet = warnings.catch_warnings()
    with quiet:
        warnings.simplefilter("ignore")          # D = 1: torch warns that D - 1 = 0 (the result is NaN)
        y = (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
    return _affine(y, weight, bias)


@mistake("5.2", "eps-outside-sqrt", zh="eps 加在了根号外面（σ + eps）：应当是 sqrt(σ² + eps)",
         en="eps is added outside the square root (sigma + eps): it is sqrt(sigma^2 + eps)")
def _ln_eps_outside(x, weight=None, bias=None, eps=1e-5):
    centered = x - x.mean(dim=-1, keepdim=True)
    y = centered / (torch.sqrt((centered * centered).mean(dim=-1, keepdim=True)) + eps)
    return _affine(y, weight, bias)


@mistake("5.2", "variance-as-mean-of-squares", zh="方差按 E[x²] - E[x]² 算：输入在 1e4 附近时 float32 减出来是 0 甚至负数；"
                                               "先减均值，再平方求平均",
         en="the variance is computed as E[x^2] - E[x]^2: for inputs near 1e4 float32 gives 0 or a negative number; "
            "subtract the mean first, then average the squares")
def _ln_naive(x, weight=None, bias=None, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    variance = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    return _affine((x - mean) / torch.sqrt(variance + eps), weight, bias)


@mistake("5.2", "weight-bias-ignored", zh="没有用上 weight 和 bias：规范化之后还要乘 weight、加 bias",
         en="weight and bias are not applied: after normalizing, multiply by weight and add bias")
def _ln_no_affine(x, weight=None, bias=None, eps=1e-5):
    centered = x - x.mean(dim=-1, keepdim=True)
    return centered / torch.sqrt((centered * centered).mean(dim=-1, keepdim=True) + eps)


# -- 5.3 feed_forward ---------------------------------------------------------------------
@mistake("5.3", "no-relu", zh="少了 ReLU：两层线性变换之间没有非线性，合起来仍是一个线性变换",
         en="the ReLU is missing: with no nonlinearity between them the two linear maps are one linear map")
def _ffn_no_relu(x, W1, b1, W2, b2):
    return (x @ W1.T + b1) @ W2.T + b2


@mistake("5.3", "relu-on-output-too", zh="输出也过了一次 ReLU：只有中间层过 ReLU，第二层的输出可正可负",
         en="the output goes through a ReLU too: only the hidden layer does, the second layer's output may be negative")
def _ffn_relu_twice(x, W1, b1, W2, b2):
    return torch.relu(torch.relu(x @ W1.T + b1) @ W2.T + b2)


@mistake("5.3", "gelu-instead-of-relu", zh="用了 `F.gelu`：nn.TransformerEncoderLayer 默认的激活函数是 ReLU",
         en="GELU is used: nn.TransformerEncoderLayer's default activation is ReLU")
def _ffn_gelu(x, W1, b1, W2, b2):
    return F.gelu(x @ W1.T + b1) @ W2.T + b2


@mistake("5.3", "bias-after-relu", zh="b1 加在了 ReLU 之后：要先加 b1，再过 ReLU",
         en="b1 is added after the ReLU: add b1 first, then apply the ReLU")
def _ffn_bias_after(x, W1, b1, W2, b2):
    return (torch.relu(x @ W1.T) + b1) @ W2.T + b2


# -- 5.4 TransformerBlock -----------------------------------------------------------------
class _Attention(nn.Module):
    """Torch-named multi-head self-attention with both masks (what the student brings from 04 and extends)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        B, T, E = query.shape
        H = self.num_heads
        q, k, v = (F.linear(t, w, b).reshape(B, t.shape[1], H, E // H).transpose(1, 2)
                   for t, w, b in zip((query, key, value), self.in_proj_weight.chunk(3), self.in_proj_bias.chunk(3)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(E // H)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E)), weights


def _ln(x, norm):
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias)


class _Block(nn.Module):
    """torch's names; ``options`` switch on one mistake each."""

    options: dict = {}

    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = _Attention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def ffn(self, h):
        return self.linear2(torch.relu(self.linear1(h)))

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        o = self.options
        if o.get("ignore_padding"):
            key_padding_mask = None
        if o.get("ignore_causal"):
            attn_mask = None
        if o.get("post_norm"):
            x = _ln(x + self.self_attn(x, x, x, key_padding_mask, attn_mask)[0], self.norm1)
            return _ln(x + self.ffn(x), self.norm2)
        h = _ln(x, self.norm1)
        a = self.self_attn(h, h, h, key_padding_mask, attn_mask)[0]
        x = a if o.get("no_attention_residual") else x + a
        h = _ln(x, self.norm1 if o.get("norm1_twice") else self.norm2)
        return x + self.ffn(h)


@mistake("5.4", "post-norm", zh="规范化放在了残差之后（后置规范化，LN(x + 子层(x))）：本题是前置规范化，x + 子层(LN(x))",
         en="the norm comes after the residual (post-norm, LN(x + sublayer(x))): this block is pre-norm, "
            "x + sublayer(LN(x))")
class _BlockPostNorm(_Block):
    options = {"post_norm": True}


@mistake("5.4", "no-attention-residual", zh="注意力子层没有残差连接：要把注意力的输出加回原来的 x",
         en="the attention sublayer has no residual connection: add its output back to x")
class _BlockNoResidual(_Block):
    options = {"no_attention_residual": True}


@mistake("5.4", "norm1-used-twice", zh="前馈子层之前也用了 norm1：两个子层各有自己的规范化参数，前馈之前是 norm2",
         en="norm1 is used before the feed-forward sublayer too: each sublayer has its own norm, norm2 before the "
            "feed-forward")
class _BlockNorm1Twice(_Block):
    options = {"norm1_twice": True}


@mistake("5.4", "attn-mask-ignored", zh="attn_mask 没有交给注意力：因果掩码不起作用，每个位置都看到了后面的词元",
         en="attn_mask is not passed to the attention: the causal mask has no effect and every position sees the "
            "later tokens")
class _BlockNoCausal(_Block):
    options = {"ignore_causal": True}


@mistake("5.4", "padding-mask-ignored", zh="key_padding_mask 没有交给注意力：填充的词元仍然被看到了",
         en="key_padding_mask is not passed to the attention: padded tokens are still attended to")
class _BlockNoPadding(_Block):
    options = {"ignore_padding": True}


# -- 5.5 TinyLM -----------------------------------------------------------------------------
def _sinusoids(T, D, like):
    positions = torch.arange(T, dtype=like.dtype, device=like.device)
    column = torch.arange(D, device=like.device)
    angle = positions[:, None] * 10000.0 ** (-(column - column % 2).to(like.dtype) / D)
    return torch.where(column % 2 == 0, torch.sin(angle), torch.cos(angle))


class _LM(nn.Module):
    options: dict = {}

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([_Block(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        if self.options.get("untied"):
            # seeded, so that the diagnosis can run it again and get the same head
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if self.options.get("persistent_positions"):
            self.register_buffer("positions", _sinusoids(512, d_model, self.token_embedding.weight.detach()))

    def forward(self, tokens, key_padding_mask=None):
        o = self.options
        B, T = tokens.shape
        W = self.token_embedding.weight
        x = self.token_embedding(tokens)
        if o.get("scaled"):
            x = x * math.sqrt(W.shape[1])
        if not o.get("no_positions"):
            x = x + _sinusoids(T, W.shape[1], W)
        causal = None if o.get("no_causal") else torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        for block in self.blocks:
            x = block(x, key_padding_mask=key_padding_mask, attn_mask=causal)
        if not o.get("no_final_norm"):
            x = _ln(x, self.norm)
        return self.lm_head(x) if o.get("untied") else x @ W.T


@mistake("5.5", "untied-output-layer", zh="输出层另建了一个 nn.Linear（lm_head）：本题的输出层与词元嵌入共用权重，"
                                         "logits = h @ token_embedding.weight.T，没有别的参数",
         en="the output layer is a separate nn.Linear (lm_head): here it shares the token embedding's weights, "
            "logits = h @ token_embedding.weight.T, with no parameter of its own")
class _LMUntied(_LM):
    options = {"untied": True}


@mistake("5.5", "no-positional-encoding", zh="没有加位置编码：注意力不知道顺序，词元嵌入之后要加上 5.1 的位置编码",
         en="no positional encoding: attention knows no order, add 5.1's encoding to the token embeddings")
class _LMNoPositions(_LM):
    options = {"no_positions": True}


@mistake("5.5", "no-final-norm", zh="最后一个块之后少了一次层规范化（norm）：前置规范化的块输出没有规范化过",
         en="the final layer norm (norm) after the last block is missing: a pre-norm block's output is not normalized")
class _LMNoFinalNorm(_LM):
    options = {"no_final_norm": True}


@mistake("5.5", "no-causal-mask", zh="块里没有用因果掩码：每个位置都看得到后面的词元，也就看到了它要预测的答案",
         en="the blocks get no causal mask: every position sees the later tokens, its own answer among them")
class _LMNoCausal(_LM):
    options = {"no_causal": True}


@mistake("5.5", "embedding-scaled", zh="词元嵌入乘了 √D（原论文的做法）：本题直接把嵌入和位置编码相加，不缩放",
         en="the token embeddings are multiplied by sqrt(D) (as in the original paper): here they are added to the "
            "positional encoding unscaled")
class _LMScaled(_LM):
    options = {"scaled": True}


@mistake("5.5", "positions-persistent-buffer", zh="位置编码用 register_buffer 存成了持久的缓冲区：它会进 state_dict，"
                                                 "strict=True 的加载就失败了；用 persistent=False，或者每次现算",
         en="the positional encoding is a persistent buffer (register_buffer): it enters the state_dict and a "
            "strict=True load fails; use persistent=False, or compute it each time")
class _LMPersistent(_LM):
    options = {"persistent_positions": True}


# -- 5.6 lm_loss -------------------------------------------------------------------------------
def _ce(logits, targets):
    """Cross entropy over targets != -100 (the 3.4 the student brings)."""
    keep = targets != -100
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, torch.where(keep, targets, 0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


def _targets(tokens, mask, sl=slice(1, None)):
    t = tokens[:, sl]
    return t if mask is None else t.masked_fill(mask[:, sl], -100)


@mistake("5.6", "not-shifted", zh="没有错开一位：logits[:, t] 预测的是下一个词元 tokens[:, t+1]，不是 tokens[:, t]",
         en="not shifted: logits[:, t] predicts the next token tokens[:, t+1], not tokens[:, t]")
def _loss_no_shift(logits, tokens, key_padding_mask=None):
    return _ce(logits, _targets(tokens, key_padding_mask, slice(None)))


@mistake("5.6", "shifted-the-wrong-way", zh="错位的方向反了：要用 logits[:, :-1] 对 tokens[:, 1:]，不是 logits[:, 1:] 对 tokens[:, :-1]",
         en="shifted the wrong way: logits[:, :-1] goes with tokens[:, 1:], not logits[:, 1:] with tokens[:, :-1]")
def _loss_wrong_way(logits, tokens, key_padding_mask=None):
    return _ce(logits[:, 1:], _targets(tokens, key_padding_mask, slice(None, -1)))


@mistake("5.6", "padding-counted", zh="填充的目标也算进了损失：key_padding_mask[:, 1:] 为 True 的目标要换成 -100",
         en="padded targets count in the loss: targets where key_padding_mask[:, 1:] is True become -100")
def _loss_padding(logits, tokens, key_padding_mask=None):
    return _ce(logits[:, :-1], tokens[:, 1:])


@mistake("5.6", "mean-of-sample-means", zh="先对每个样本求平均、再对样本求平均：要对所有要算的目标一起平均，每个词元一样重",
         en="averaged each sample, then the samples: average over every counted target at once, each token "
            "weighing the same")
def _loss_per_sample(logits, tokens, key_padding_mask=None):
    targets = _targets(tokens, key_padding_mask)
    return torch.stack([_ce(logits[b:b + 1, :-1], targets[b:b + 1]) for b in range(tokens.shape[0])]).mean()


# -- 5.7 sample_next_token ------------------------------------------------------------------
def _draw(probs, seed):
    generator = None if seed is None else torch.Generator(device=probs.device).manual_seed(seed)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@mistake("5.7", "temperature-multiplied", zh="logits 乘了温度：要除以温度，softmax(logits / temperature)",
         en="the logits are multiplied by the temperature: divide, softmax(logits / temperature)")
def _sample_times(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(torch.softmax(logits * temperature, dim=-1), seed)


@mistake("5.7", "softmax-over-batch", zh="softmax 沿批量维（dim=0）做了：每一行是一个分布，沿最后一维（词表）归一化",
         en="the softmax runs over the batch dim (dim=0): each row is one distribution, normalize over the last dim "
            "(the vocabulary)")
def _sample_batch_dim(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(torch.softmax(logits / temperature, dim=0), seed)


@mistake("5.7", "keeps-sample-dim", zh="返回了 (B, 1)：torch.multinomial(..., 1) 之后要 squeeze(-1)，返回 (B,)",
         en="returns (B, 1): squeeze(-1) after torch.multinomial(..., 1), return (B,)")
def _sample_column(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    return _draw(torch.softmax(logits / temperature, dim=-1), seed)[:, None]


@mistake("5.7", "ties-to-the-last", zh="并列时取了编号最大的：要和 argmax 一样取编号最小的",
         en="a tie goes to the highest index: as argmax, it goes to the lowest")
def _sample_last_tie(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)
    return _draw(torch.softmax(logits / temperature, dim=-1), seed)


@mistake("5.7", "reseeds-the-global-generator", zh="用 torch.manual_seed(seed) 重置了全局随机数：要用自己的 "
         "torch.Generator(...).manual_seed(seed)，不动全局的状态",
         en="torch.manual_seed(seed) resets the global random numbers: draw with a generator of its own, "
            "torch.Generator(...).manual_seed(seed), and leave the global state alone")
def _sample_global_seed(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if seed is not None:
        torch.manual_seed(seed)          # the same draws as a generator of that seed, and the global state lost
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1).squeeze(-1)


@mistake("5.7", "own-generator-without-seed", zh="没有 seed 时也新建了一个 torch.Generator：新建的生成器种子是固定的，"
         "每次调用都抽出同样的词元；seed 为 None 时不传生成器，用全局随机数",
         en="a torch.Generator of its own even without a seed: a new generator starts from a fixed seed, so every "
            "call draws the same tokens; when seed is None pass no generator and draw from the global random numbers")
def _sample_own_generator(logits, temperature=0.0, seed=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    generator = torch.Generator(device=logits.device)
    if seed is not None:
        generator.manual_seed(seed)
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator).squeeze(-1)


# -- 5.8 cached_self_attention ------------------------------------------------------------------
def _heads(t, H):
    B, T, E = t.shape
    return t.reshape(B, T, H, E // H).transpose(1, 2)


def _cached(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, *,
            causal=True, new_first=False, return_new=False, mask_from_zero=False, scale_e=False):
    B, T_new, E = x.shape
    q, k, v = (_heads(F.linear(x, w, b), num_heads) for w, b in zip(in_proj_weight.chunk(3), in_proj_bias.chunk(3)))
    k_new, v_new = k, v
    if cache is not None:
        k = torch.cat([k, cache[0]] if new_first else [cache[0], k], dim=2)
        v = torch.cat([v, cache[1]] if new_first else [cache[1], v], dim=2)
    total = k.shape[2]
    S = 0 if mask_from_zero else total - T_new
    scores = q @ k.transpose(-2, -1) / math.sqrt(E if scale_e else E // num_heads)
    if causal:
        later = torch.arange(total, device=x.device)[None, :] > S + torch.arange(T_new, device=x.device)[:, None]
        scores = scores.masked_fill(later, float("-inf"))
    out = F.linear((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T_new, E), out_proj_weight,
                   out_proj_bias)
    return out, ((k_new, v_new) if return_new else (k, v))


@mistake("5.8", "no-causal-mask", zh="没有因果掩码：一次送进好几个位置时，前面的位置看到了后面的位置",
         en="no causal mask: when several positions come at once, the earlier ones see the later ones")
def _cache_no_mask(*args):
    return _cached(*args, causal=False)


@mistake("5.8", "new-keys-first", zh="新位置的键和值接在了缓存前面：要 torch.cat([k_cache, k], dim=2)，缓存在前",
         en="the new keys and values are put before the cache: torch.cat([k_cache, k], dim=2), the cache first")
def _cache_new_first(*args):
    return _cached(*args, new_first=True)


@mistake("5.8", "returns-new-keys-only", zh="返回的缓存只有新位置的键和值：要返回接好的整段，下一步才看得到前面所有的位置",
         en="the returned cache holds only the new positions' keys and values: return the whole concatenation, so "
            "that the next step sees every earlier position")
def _cache_new_only(*args):
    return _cached(*args, return_new=True)


@mistake("5.8", "mask-ignores-cache-offset", zh="因果掩码没有算上缓存的长度：新位置 i 是整段里的第 S + i 个位置，看得到键 0 .. S + i",
         en="the causal mask ignores the cache's length: new position i is position S + i of the sequence and sees "
            "keys 0 .. S + i")
def _cache_offset(*args):
    return _cached(*args, mask_from_zero=True)


@mistake("5.8", "scale-sqrt-e", zh="用 √E 缩放了：每个头的分数除以 √d，d = E / H",
         en="scaled by sqrt(E): each head's scores are divided by sqrt(d), d = E / H")
def _cache_scale(*args):
    return _cached(*args, scale_e=True)


# -- 5.9 kv_cache_memory -------------------------------------------------------------------
@mistake("5.9", "returns-float", zh="返回了 float（或张量），不是 Python int：字节数要用整数运算算",
         en="returns a float (or a tensor), not a Python int: count the bytes with integer arithmetic")
def _kv_float(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return 2.0 * batch * num_layers * num_heads * seq_len * head_dim * bytes_per_element


@mistake("5.9", "only-keys", zh="只算了 K（少了乘 2）：每层一份 K、一份 V",
         en="only K is counted (the factor 2 is missing): every layer holds a K and a V")
def _kv_only_keys(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return batch * num_layers * num_heads * seq_len * head_dim * bytes_per_element


@mistake("5.9", "forgets-layers", zh="忘了乘层数：每一层都有自己的缓存",
         en="forgot the layers: every layer holds its own cache")
def _kv_no_layers(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return 2 * batch * num_heads * seq_len * head_dim * bytes_per_element


@mistake("5.9", "seq-len-squared", zh="seq_len 平方了：那是注意力权重（4.5）；缓存每个位置存一个键、一个值，随长度线性增长",
         en="seq_len is squared: that is the attention weights (4.5); the cache holds one key and one value per "
            "position and grows linearly")
def _kv_squared(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return 2 * batch * num_layers * num_heads * seq_len ** 2 * head_dim * bytes_per_element


@mistake("5.9", "ignores-bytes-per-element", zh="没有用 bytes_per_element，总按 4 字节算",
         en="bytes_per_element is ignored: always counts 4 bytes")
def _kv_fixed(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    return 2 * batch * num_layers * num_heads * seq_len * head_dim * 4
