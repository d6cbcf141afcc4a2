# GENERATED from source/05_transformer_block/05_transformer_block.ipynb by autograder build; do not edit.
"""Reference solutions of 05_transformer_block: hidden, never shipped to students."""
import math

import torch
import torch.nn as nn


def positional_encoding(positions, D):
    """练习 5.1：正弦位置编码。

    positions：(T,) 浮点张量（位置 0、1、2……）；返回 (T, D)，dtype 和设备与 positions 相同。
    """
    column = torch.arange(D, device=positions.device)                                  # (D,)
    # 第 2i 列和第 2i+1 列共用频率 10000^(-2i/D)；D 为奇数时最后一列是 sin
    frequency = 10000.0 ** (-(column - column % 2).to(positions.dtype) / D)            # (D,)
    angle = positions[:, None] * frequency                                              # (T, D)
    return torch.where(column % 2 == 0, torch.sin(angle), torch.cos(angle))             # (T, D)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """练习 5.2：沿最后一维做层规范化，与 F.layer_norm(x, x.shape[-1:], weight, bias, eps) 相同。"""
    mean = x.mean(dim=-1, keepdim=True)                          # (..., 1)
    centered = x - mean                                          # 先减均值：偏移很大时也稳定
    variance = (centered * centered).mean(dim=-1, keepdim=True)  # 有偏估计，与 F.layer_norm 相同
    y = centered / torch.sqrt(variance + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def feed_forward(x, W1, b1, W2, b2):
    """练习 5.3：逐位置的前馈网络 relu(x @ W1.T + b1) @ W2.T + b2。"""
    hidden = torch.relu(x @ W1.T + b1)          # (..., T, D) -> (..., T, F)
    return hidden @ W2.T + b2                   # (..., T, F) -> (..., T, D)


def split_heads(x, num_heads):
    """第 04 章的练习 4.1：(B, T, E) -> (B, H, T, E/H)；E 不能被 num_heads 整除时抛出 ValueError。"""
    B, T, E = x.shape
    if E % num_heads != 0:
        raise ValueError(f"E = {E} 不能被 num_heads = {num_heads} 整除")
    return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)   # (B, T, H, d) -> (B, H, T, d)


def merge_heads(x):
    """第 04 章的练习 4.2：(B, H, T, d) -> (B, T, H*d)。"""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)                       # (B, T, H, d) -> (B, T, H*d)


def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                         out_proj_weight, out_proj_bias, key_padding_mask=None, attn_mask=None):
    """第 04 章的练习 4.3，多了 attn_mask：(Tq, Tk) bool，True 表示这个查询不许看这个键；或者 None。

    返回 (out (B, Tq, E), weights (B, H, Tq, Tk))。
    """
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)                   # each (E, E)
    # None 表示没有偏置（bias=False 的模块里存的就是 None），所以调用者传 None 都按 0 算
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0) if in_proj_bias is not None else (0.0,) * 3
    q = split_heads(query @ W_q.T + b_q, num_heads)                  # (B, H, Tq, d)
    k = split_heads(key @ W_k.T + b_k, num_heads)                    # (B, H, Tk, d)
    v = split_heads(value @ W_v.T + b_v, num_heads)                  # (B, H, Tk, d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)     # (B, H, Tq, Tk)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))   # (B, 1, 1, Tk)
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))                            # (Tq, Tk) 广播
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)   # (B, H, Tq, Tk)
    out = merge_heads(weights @ v) @ out_proj_weight.T                    # (B, Tq, E)
    out = out + out_proj_bias if out_proj_bias is not None else out
    return out, weights


class MultiHeadAttention(nn.Module):
    """第 04 章的练习 4.4，`forward` 多了 attn_mask（交给 multi_head_attention）。"""

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim = {embed_dim} 不能被 num_heads = {num_heads} 整除")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        E = self.embed_dim
        in_bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
        out_bias = self.out_proj.bias if self.out_proj.bias is not None else query.new_zeros(E)
        return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, in_bias,
                                    self.out_proj.weight, out_bias, key_padding_mask, attn_mask)


class TransformerBlock(nn.Module):
    """练习 5.4：前置规范化（pre-norm）的 Transformer 编码器块。

    参数名与 nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0, batch_first=True,
    norm_first=True) 相同：self_attn.*（你的 MultiHeadAttention）、linear1.*、linear2.*、norm1.*、norm2.*。
    forward(x (B, T, D), key_padding_mask (B, T) bool 或 None, attn_mask (T, T) bool 或 None) -> (B, T, D)。
    """

    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)   # self_attn.in_proj_weight, ...
        self.linear1 = nn.Linear(d_model, d_ff)                   # linear1.weight (F, D)
        self.linear2 = nn.Linear(d_ff, d_model)                   # linear2.weight (D, F)
        self.norm1 = nn.LayerNorm(d_model)                        # 含 norm1.weight、norm1.bias
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        h = layer_norm(x, self.norm1.weight, self.norm1.bias)                          # (B, T, D)
        attended, _ = self.self_attn(h, h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        x = x + attended                                                                # 残差连接 1
        h = layer_norm(x, self.norm2.weight, self.norm2.bias)
        return x + feed_forward(h, self.linear1.weight, self.linear1.bias,
                                self.linear2.weight, self.linear2.bias)                 # 残差连接 2


class TinyLM(nn.Module):
    """练习 5.5：一个很小的因果语言模型，输出层与词元嵌入共用权重。

    参数：token_embedding.weight (V, D)，`blocks.0.*` 到 `blocks.{N-1}.*`（N 个 TransformerBlock），
    norm.weight (D,)，norm.bias (D,)。forward(tokens (B, T) int64, key_padding_mask (B, T) bool 或 None)
    返回 logits (B, T, V)。
    """

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([TransformerBlock(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)                           # 最后的规范化：norm.weight、norm.bias

    def forward(self, tokens, key_padding_mask=None):
        B, T = tokens.shape
        weight = self.token_embedding.weight                                             # (V, D)
        positions = torch.arange(T, dtype=weight.dtype, device=weight.device)             # (T,)
        x = self.token_embedding(tokens) + positional_encoding(positions, weight.shape[1])  # (B, T, D)
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)        # True：之后的键
        for block in self.blocks:
            x = block(x, key_padding_mask=key_padding_mask, attn_mask=causal)            # (B, T, D)
        x = layer_norm(x, self.norm.weight, self.norm.bias)
        return x @ weight.T                                                              # 共用权重：(B, T, V)


def masked_cross_entropy(logits, targets, ignore_index=-100):
    """第 03 章的练习 3.4：logits (B, T, C)，targets (B, T) int64；对 targets != ignore_index 的位置取平均。"""
    keep = targets != ignore_index                                               # (B, T)
    safe = torch.where(keep, targets, torch.zeros_like(targets))                 # 处处是合法的下标
    top = logits.amax(dim=-1, keepdim=True)
    log_z = top.squeeze(-1) + torch.log(torch.exp(logits - top).sum(dim=-1))     # (B, T)
    picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)                   # (B, T)
    nll = (log_z - picked) * keep
    return nll.sum() / keep.sum()


def lm_loss(logits, tokens, key_padding_mask=None):
    """练习 5.6：下一个词元的交叉熵。logits (B, T, V)，tokens (B, T) int64，key_padding_mask (B, T) bool 或 None。"""
    targets = tokens[:, 1:]                                        # 位置 t 预测词元 t + 1
    if key_padding_mask is not None:
        targets = targets.masked_fill(key_padding_mask[:, 1:], -100)   # 填充的目标不算
    return masked_cross_entropy(logits[:, :-1], targets)


def sample_next_token(logits, temperature=0.0, seed=None):
    """练习 5.7：logits (B, V) -> 下一个词元 (B,) int64。temperature = 0 时取最大（贪心），否则按温度采样。"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)            # (B, V)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=logits.device).manual_seed(seed)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def cached_self_attention(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """练习 5.8：带键值缓存的因果自注意力。

    x：(B, T_new, E) 新来的位置；cache：None 或 (k_cache, v_cache)，各 (B, H, S, d)，是前 S 个位置投影、
    拆头之后的键和值。返回 (out (B, T_new, E), (k, v))，k、v 各 (B, H, S + T_new, d)。
    """
    B, T_new, E = x.shape
    d = E // num_heads
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0)
    q = split_heads(x @ W_q.T + b_q, num_heads)                     # (B, H, T_new, d)
    k = split_heads(x @ W_k.T + b_k, num_heads)
    v = split_heads(x @ W_v.T + b_v, num_heads)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)                         # (B, H, S + T_new, d)
        v = torch.cat([cache[1], v], dim=2)
    S = k.shape[2] - T_new
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)                 # (B, H, T_new, S + T_new)
    # 新的第 i 个位置就是绝对位置 S + i：它看得到键 0 .. S + i
    later = torch.arange(S + T_new, device=x.device)[None, :] > S + torch.arange(T_new, device=x.device)[:, None]
    weights = torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)
    out = merge_heads(weights @ v) @ out_proj_weight.T + out_proj_bias
    return out, (k, v)


def kv_cache_memory(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4):
    """练习 5.9：键值缓存占的字节数（每层一份 K、一份 V，各 (batch, num_heads, seq_len, head_dim)），Python int。"""
    return 2 * int(num_layers) * int(batch) * int(num_heads) * int(seq_len) * int(head_dim) * int(bytes_per_element)
