"""Reference solutions of 02_qkv_attention: GENERATED from source/02_qkv_attention/02_qkv_attention.ipynb by `autograder build`; do not edit."""
import math

import numpy as np
import torch
import torch.nn as nn
def project_qkv(x, W_q, W_k, W_v):
    """2.1  x (..., T, D) -> Q, K (..., T, Dk), V (..., T, Dv)."""
    return x @ W_q, x @ W_k, x @ W_v


def softmax(x, dim=-1):
    """2.2  numerically stable softmax by hand."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


def attention_scores(Q, K):
    """2.3  Q (..., Tq, Dk), K (..., Tk, Dk) -> Q K^T / sqrt(Dk), (..., Tq, Tk)."""
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])


def scaled_dot_product_attention(Q, K, V):
    """2.4  -> (out (..., Tq, Dv), weights (..., Tq, Tk))."""
    weights = softmax(attention_scores(Q, K), dim=-1)
    return weights @ V, weights
