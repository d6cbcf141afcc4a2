"""Reference solutions of 01_rnn_decay: GENERATED from source/01_rnn_decay/01_rnn_decay.ipynb by `autograder build`; do not edit."""
import math

import numpy as np
import torch
import torch.nn as nn
def tanh_derivative(z):
    """1.1  1 - tanh(z)^2, elementwise; float -> float, ndarray -> ndarray, Tensor -> Tensor."""
    if isinstance(z, torch.Tensor):
        return 1 - torch.tanh(z) ** 2
    if isinstance(z, np.ndarray):
        return 1 - np.tanh(z) ** 2
    return 1 - math.tanh(z) ** 2


def rnn_forward(seq, W_hh=0.9, W_xh=0.5):
    """1.2  scalar RNN h_t = tanh(W_hh*h_{t-1} + W_xh*x_t), h_0 = 0; final h as float."""
    h = 0.0
    for x in seq:
        h = math.tanh(W_hh * h + W_xh * float(x))
    return float(h)


def attention_residual(seq, alpha=0.6):
    """1.3  weight alpha on position 0, 0 elsewhere; weighted sum as float."""
    if len(seq) == 0:
        return 0.0
    return float(alpha * float(seq[0]))


def decay_table(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    """1.4  (len(lengths), 2): [RNN residual, attention residual] for [1, 0, ..., 0]."""
    rows = []
    for length in lengths:
        seq = [1.0] + [0.0] * (int(length) - 1)
        rows.append([rnn_forward(seq, W_hh, W_xh), attention_residual(seq, alpha)])
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


def rnn_layer(x, W_xh, W_hh, b=None, h0=None):
    """1.5  x (B, T, D), W_xh (D, H), W_hh (H, H), b (H,), h0 (B, H) -> (out (B, T, H), h_T (B, H))."""
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0          # (B, H)
    outputs = []
    for t in range(T):
        pre = x[:, t] @ W_xh + h @ W_hh                   # (B, H)
        if b is not None:
            pre = pre + b
        h = torch.tanh(pre)
        outputs.append(h)
    if T == 0:
        return x.new_zeros(B, 0, H), h
    return torch.stack(outputs, dim=1), h                 # (B, T, H), (B, H)


def attention_weights(query, keys):
    """1.6  softmax over N of keys @ query; query (D,), keys (N, D) -> (N,)."""
    scores = keys @ query                                 # (N,)
    scores = scores - scores.max()
    e = torch.exp(scores)
    return e / e.sum()
