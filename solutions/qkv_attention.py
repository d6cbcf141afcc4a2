# GENERATED from source/02_qkv_attention/02_qkv_attention.ipynb by autograder build; do not edit.
"""Reference solutions of 02_qkv_attention: hidden, never shipped to students."""
import math

import torch


def project_qkv(x, W_q, W_k, W_v):
    """Exercise 2.1: project token vectors to queries, keys and values.

    x: (..., T, D), W_q: (D, Dk), W_k: (D, Dk), W_v: (D, Dv).
    Returns (Q, K, V) with shapes (..., T, Dk), (..., T, Dk), (..., T, Dv).
    """
    # matmul treats the leading dims of x as batch dims.
    return x @ W_q, x @ W_k, x @ W_v                    # (..., T, Dk), (..., T, Dk), (..., T, Dv)


def softmax(x, dim=-1):
    """Exercise 2.2: numerically stable softmax along dim, by hand.

    x: a tensor of any shape. Returns a tensor of x's shape and dtype whose
    slices along dim are positive and sum to 1; finite for inputs in the thousands.
    """
    # Subtracting the max leaves softmax unchanged and keeps every exponent <= 0.
    shifted = x - x.amax(dim=dim, keepdim=True)         # x's shape, max along dim is 0
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


def attention_scores(Q, K):
    """Exercise 2.3: scaled dot-product scores Q K^T / sqrt(Dk).

    Q: (..., Tq, Dk), K: (..., Tk, Dk). Returns (..., Tq, Tk).
    """
    # transpose(-2, -1) swaps only the last two dims; K.T would also reverse the batch dims.
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])   # (..., Tq, Dk) @ (..., Dk, Tk) -> (..., Tq, Tk)


def scaled_dot_product_attention(Q, K, V):
    """Exercise 2.4: softmax(Q K^T / sqrt(Dk)) V, built from exercises 2.2 and 2.3.

    Q: (..., Tq, Dk), K: (..., Tk, Dk), V: (..., Tk, Dv).
    Returns (out, weights): out (..., Tq, Dv), weights (..., Tq, Tk) with rows summing to 1.
    """
    # Each query distributes its attention over the keys: normalize over the last dim.
    weights = softmax(attention_scores(Q, K), dim=-1)   # (..., Tq, Tk)
    return weights @ V, weights                         # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)
