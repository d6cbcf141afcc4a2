# GENERATED from source/01_rnn_decay/01_rnn_decay.ipynb by autograder build; do not edit.
"""Reference solutions of 01_rnn_decay: hidden, never shipped to students."""
import math

import numpy as np
import torch


def tanh_derivative(z):
    """Exercise 1.1: the derivative of tanh, 1 - tanh(z)^2, elementwise.

    z: a Python float, a NumPy array (any shape) or a torch tensor (any shape).
    Returns the same kind as z: float -> float, ndarray -> ndarray of z's shape and dtype,
    Tensor -> Tensor of z's shape, dtype and device.
    """
    if isinstance(z, torch.Tensor):
        return 1 - torch.tanh(z) ** 2
    if isinstance(z, np.ndarray):
        return 1 - np.tanh(z) ** 2
    return 1 - math.tanh(z) ** 2


def rnn_forward(seq, W_hh=0.9, W_xh=0.5):
    """Exercise 1.2: scalar RNN h_t = tanh(W_hh * h_{t-1} + W_xh * x_t) with h_0 = 0.

    seq: a 1-D sequence of numbers (list, ndarray or tensor) of length L.
    Returns h_L, the hidden state after the last element, as a Python float.
    """
    h = 0.0
    for x in seq:
        # One stop of the conveyor belt: the new state needs the previous one.
        h = math.tanh(W_hh * h + W_xh * float(x))
    return float(h)


def attention_residual(seq, alpha=0.6):
    """Exercise 1.3: weight alpha on position 0, 0 elsewhere; the weighted sum of seq.

    seq: a 1-D sequence of numbers of length L (may be empty).
    Returns alpha * seq[0] as a Python float (0.0 for an empty seq).
    """
    if len(seq) == 0:
        return 0.0
    # Every other weight is 0, so the weighted sum has a single term.
    return float(alpha * float(seq[0]))


def decay_table(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    """Exercise 1.4: residual of the input [1, 0, ..., 0] for each length.

    lengths: a sequence of n lengths L >= 1.
    Returns an ndarray of shape (n, 2), float64: column 0 the RNN's h_L
    (rnn_forward), column 1 attention's residual (attention_residual).
    """
    rows = []
    for length in lengths:
        seq = [1.0] + [0.0] * (int(length) - 1)
        rows.append([rnn_forward(seq, W_hh, W_xh), attention_residual(seq, alpha)])
    # reshape keeps the (0, 2) shape when lengths is empty.
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)   # (n, 2)


def rnn_layer(x, W_xh, W_hh, b=None, h0=None):
    """Exercise 1.5: a batched tanh RNN layer, h_t = tanh(x_t W_xh + h_{t-1} W_hh + b).

    x: (B, T, D), W_xh: (D, H), W_hh: (H, H), b: (H,) or None, h0: (B, H) or None (zeros).
    Returns (outputs, h_T): outputs (B, T, H) holds h_1 .. h_T, h_T is (B, H).
    """
    B, T, _ = x.shape                                   # (B, T, D)
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0         # (B, H)
    outputs = []
    for t in range(T):
        # Step t needs h from step t - 1: this loop cannot run in parallel over t.
        pre = x[:, t] @ W_xh + h @ W_hh                 # (B, D) @ (D, H) + (B, H) @ (H, H) -> (B, H)
        if b is not None:
            pre = pre + b
        h = torch.tanh(pre)                             # (B, H)
        outputs.append(h)
    if T == 0:
        # torch.stack refuses an empty list; nothing was read, so h is still h0.
        return x.new_zeros(B, 0, H), h
    return torch.stack(outputs, dim=1), h               # (B, T, H), (B, H)


def attention_weights(query, keys):
    """Exercise 1.6: softmax over the N keys of their dot products with one query.

    query: (D,), keys: (N, D). Returns the weights, shape (N,), summing to 1.
    """
    scores = keys @ query                               # (N, D) @ (D,) -> (N,)
    # Shifting by the max changes nothing mathematically and keeps exp finite.
    scores = scores - scores.max()
    e = torch.exp(scores)                               # (N,)
    return e / e.sum()
