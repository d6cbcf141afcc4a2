# GENERATED from source/01_rnn_decay/01_rnn_decay.ipynb by autograder build; do not edit.
"""Reference solutions of 01_rnn_decay: hidden, never shipped to students."""
import math

import numpy as np
import torch


def tanh_derivative(z):
    """练习 1.1：tanh 的导数 1 - tanh(z)^2，逐元素计算。

    z：Python 浮点数、NumPy 数组（任意形状）或 torch 张量（任意形状）。
    返回与 z 同类的结果：浮点数进、浮点数出；ndarray 进，出同形状、同 dtype 的 ndarray；
    Tensor 进，出同形状、同 dtype、同设备的 Tensor。
    """
    if isinstance(z, torch.Tensor):
        return 1 - torch.tanh(z) ** 2
    if isinstance(z, np.ndarray):
        return 1 - np.tanh(z) ** 2
    return 1 - math.tanh(z) ** 2


def rnn_forward(seq, W_hh=0.9, W_xh=0.5):
    """练习 1.2：标量 RNN，h_t = tanh(W_hh * h_{t-1} + W_xh * x_t)，h_0 = 0。

    seq：长度为 L 的一维数字序列（列表、ndarray 或张量）。
    返回读完最后一个元素后的隐状态 h_L，类型是 Python float。
    """
    h = 0.0
    for x in seq:
        # 传送带上的一站：新的状态要用到上一个状态。
        h = math.tanh(W_hh * h + W_xh * float(x))
    return float(h)


def attention_residual(seq, alpha=0.6):
    """练习 1.3：位置 0 的权重为 alpha，其余位置为 0；返回 seq 的加权和。

    seq：长度为 L 的一维数字序列（可以为空）。
    返回 alpha * seq[0]，类型是 Python float（seq 为空时返回 0.0）。
    """
    if len(seq) == 0:
        return 0.0
    # 其余权重都是 0，加权和只剩一项。
    return float(alpha * float(seq[0]))


def decay_table(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    """练习 1.4：对每个长度，输入 [1, 0, ..., 0] 的残留。

    lengths：n 个长度，每个 L >= 1。
    返回形状 (n, 2)、dtype 为 float64 的 ndarray：第 0 列是 RNN 的 h_L（rnn_forward），
    第 1 列是注意力的残留（attention_residual）。
    """
    rows = []
    for length in lengths:
        seq = [1.0] + [0.0] * (int(length) - 1)
        rows.append([rnn_forward(seq, W_hh, W_xh), attention_residual(seq, alpha)])
    # lengths 为空时，reshape 让形状仍是 (0, 2)。
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)   # (n, 2)


def rnn_layer(x, W_xh, W_hh, b=None, h0=None):
    """练习 1.5：批量的 tanh RNN 层，h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)。

    x：(B, T, D)，W_xh：(D, H)，W_hh：(H, H)，b：(H,) 或 None，h0：(B, H) 或 None（全 0）。
    返回 (outputs, h_T)：outputs 形状 (B, T, H)，依次是 h_1 .. h_T；h_T 形状 (B, H)。
    """
    B, T, _ = x.shape                                   # (B, T, D)
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0         # (B, H)
    outputs = []
    for t in range(T):
        # 第 t 步要用第 t - 1 步的 h：这个循环没法沿 t 并行。
        pre = x[:, t] @ W_xh + h @ W_hh                 # (B, D) @ (D, H) + (B, H) @ (H, H) -> (B, H)
        if b is not None:
            pre = pre + b
        h = torch.tanh(pre)                             # (B, H)
        outputs.append(h)
    if T == 0:
        # torch.stack 不接受空列表；什么也没读，h 仍是 h0。
        return x.new_zeros(B, 0, H), h
    return torch.stack(outputs, dim=1), h               # (B, T, H), (B, H)


def attention_weights(query, keys):
    """练习 1.6：一个查询与 N 个键的点积，在 N 这一维上做 softmax。

    query：(D,)，keys：(N, D)。返回权重，形状 (N,)，加和为 1。
    """
    scores = keys @ query                               # (N, D) @ (D,) -> (N,)
    # 减去最大值在数学上什么也没改变，却让 exp 不会溢出。
    scores = scores - scores.max()
    e = torch.exp(scores)                               # (N,)
    return e / e.sum()
