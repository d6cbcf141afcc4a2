# GENERATED from source/02_qkv_attention/02_qkv_attention.ipynb by autograder build; do not edit.
"""Reference solutions of 02_qkv_attention: hidden, never shipped to students."""
import math

import torch


def project_qkv(x, W_q, W_k, W_v):
    """练习 2.1：把词元向量投影成查询、键和值。

    x: (..., T, D)，W_q: (D, Dk)，W_k: (D, Dk)，W_v: (D, Dv)。
    返回 (Q, K, V)，形状依次为 (..., T, Dk)、(..., T, Dk)、(..., T, Dv)。
    """
    # @ 把 x 的前导维当作批量维。
    return x @ W_q, x @ W_k, x @ W_v                    # (..., T, Dk), (..., T, Dk), (..., T, Dv)


def softmax(x, dim=-1):
    """练习 2.2：亲手写沿 dim 的数值稳定 softmax。

    x: 任意形状的张量。返回与 x 同形状、同 dtype 的张量，沿 dim 的每个切片都是正数、加和为 1；
    输入在几千的量级时结果也是有限值。
    """
    # 减去最大值不改变 softmax，还让每个指数都 <= 0。
    shifted = x - x.amax(dim=dim, keepdim=True)         # 与 x 同形状，沿 dim 的最大值为 0
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


def attention_scores(Q, K):
    """练习 2.3：缩放点积分数 Q K^T / sqrt(Dk)。

    Q: (..., Tq, Dk)，K: (..., Tk, Dk)。返回 (..., Tq, Tk)。
    """
    # transpose(-2, -1) 只交换最后两维；K.T 会把批量维也倒过来。
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])   # (..., Tq, Dk) @ (..., Dk, Tk) -> (..., Tq, Tk)


def scaled_dot_product_attention(Q, K, V):
    """练习 2.4：softmax(Q K^T / sqrt(Dk)) V，用练习 2.2 和 2.3 的函数搭起来。

    Q: (..., Tq, Dk)，K: (..., Tk, Dk)，V: (..., Tk, Dv)。
    返回 (out, weights)：out 形状 (..., Tq, Dv)；weights 形状 (..., Tq, Tk)，每行加和为 1。
    """
    # 每个查询把注意力分给各个键：沿最后一维归一化。
    weights = softmax(attention_scores(Q, K), dim=-1)   # (..., Tq, Tk)
    return weights @ V, weights                         # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def softmax_jacobian(weights):
    """练习 2.5：softmax 的雅可比，只用它的输出 weights 表示。

    weights: (..., N)，沿最后一维是一行 softmax 的输出（非负、加和为 1）。
    返回 (..., N, N)：[..., i, j] 处是 ∂p_i/∂x_j，dtype 与 weights 相同。
    """
    # i = j 时 p_i (1 - p_i)，i ≠ j 时 -p_i p_j：合起来是对角阵 diag(p) 减去外积 p p^T。
    outer = weights.unsqueeze(-1) * weights.unsqueeze(-2)    # (..., N, N)：p_i p_j
    return torch.diag_embed(weights) - outer
