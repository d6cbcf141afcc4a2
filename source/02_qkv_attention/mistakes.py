"""Known mistakes of 02_qkv_attention (instructor side only).

Each function is a realistic wrong answer with the student's signature. When a
student's output fails a check and equals one of these on the same inputs, the
feedback names it. ``autograder validate`` proves each one loses points and is
named as itself and nothing else. The 2.2 mistakes compute their softmax by
hand: the forbidden-call guard is active while validate runs them as students.
"""
from __future__ import annotations

import math

import torch

from autograder.catalog import mistake


# -- 2.1 project_qkv -------------------------------------------------------------
@mistake("2.1", "W_q-W_k-swapped", zh="W_q 与 W_k 用反了：Q = x @ W_q，K = x @ W_k",
         en="W_q and W_k swapped: Q = x @ W_q, K = x @ W_k")
def _project_swapped(x, W_q, W_k, W_v):
    return x @ W_k, x @ W_q, x @ W_v


@mistake("2.1", "V-projected-with-W_k", zh="V 用了 W_k：V = x @ W_v", en="V was projected with W_k: V = x @ W_v")
def _project_v_with_k(x, W_q, W_k, W_v):
    return x @ W_q, x @ W_k, x @ W_k


@mistake("2.1", "nn-Linear-layout", zh="看起来用了 x @ W.T（nn.Linear 的存法）：这里 W 是 (D, Dk)，应为 x @ W",
         en="looks like x @ W.T (nn.Linear's layout): here W is (D, Dk), so it is x @ W")
def _project_linear_layout(x, W_q, W_k, W_v):
    return x @ W_q.T, x @ W_k.T, x @ W_v.T


# -- 2.2 softmax -----------------------------------------------------------------
@mistake("2.2", "no-max-subtraction", zh="没有先减去最大值：输入很大时 exp 溢出，得到 inf/NaN",
         en="the max is not subtracted first: exp overflows on large inputs, giving inf/NaN")
def _softmax_no_max(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "sums-over-wrong-dim", zh="求和的维度不对：看起来总是对 dim=0 求和，应对参数 dim 求和",
         en="sums over the wrong dim: looks like it always sums over dim=0, sum over the dim argument")
def _softmax_sum_dim0(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)


@mistake("2.2", "divides-by-max", zh="除以了最大值而不是总和：softmax 要除以 exp 的总和",
         en="divides by the max instead of the sum: softmax divides by the sum of the exps")
def _softmax_by_max(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.amax(dim=dim, keepdim=True)


@mistake("2.2", "ignores-dim", zh="忽略了参数 dim：看起来总是对最后一维做 softmax",
         en="the dim argument is ignored: looks like the softmax always runs over the last dim")
def _softmax_last_dim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


@mistake("2.2", "in-place-max-subtraction",
         zh="原地减去了最大值（x.sub_ / x -= ...）：结果对，但调用者传进来的 x 被改掉了，请写 x - x.amax(...)",
         en="subtracts the max in place (x.sub_ or x -= ...): the result is right, but the caller's x is changed; "
            "write x - x.amax(...)")
def _softmax_in_place(x, dim=-1):
    # Last among 2.2's mistakes: the live diagnoser runs them on the check's own inputs, which this one edits.
    x -= x.amax(dim=dim, keepdim=True)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


# -- 2.3 attention_scores --------------------------------------------------------
@mistake("2.3", "no-scale", zh="看起来少了 1/√d 缩放", en="looks like the 1/sqrt(d) scale is missing")
def _scores_no_scale(Q, K):
    return Q @ K.transpose(-2, -1)


@mistake("2.3", "scaled-by-d", zh="除以了 d 而不是 √d", en="divided by d instead of sqrt(d)")
def _scores_by_d(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1]


@mistake("2.3", "scaled-by-sqrt-Tk", zh="除以了 √Tk（键的个数）：缩放用的是每个向量的维度 √Dk",
         en="divided by sqrt(Tk), the number of keys: the scale is sqrt(Dk), the vectors' width")
def _scores_by_tk(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-2])


@mistake("2.3", "reshape-instead-of-transpose", zh="用 reshape/view 代替了转置：形状对了，元素却被打乱，请用 K.transpose(-2, -1)",
         en="reshape/view used instead of a transpose: the shape fits but the elements are scrambled; "
            "use K.transpose(-2, -1)")
def _scores_reshape(Q, K):
    K_t = K.reshape(*K.shape[:-2], K.shape[-1], K.shape[-2])        # (..., Dk, Tk), not a transpose
    return Q @ K_t / math.sqrt(Q.shape[-1])


@mistake("2.3", "keys-times-queries", zh="算成了 K @ Q^T，形状是 (..., Tk, Tq)：应为 Q @ K^T，(..., Tq, Tk)",
         en="computed K @ Q^T, of shape (..., Tk, Tq): it is Q @ K^T, (..., Tq, Tk)")
def _scores_kq(Q, K):
    return K @ Q.transpose(-2, -1) / math.sqrt(Q.shape[-1])


# -- 2.4 scaled_dot_product_attention ----------------------------------------------
def _scores(Q, K, scale):
    return Q @ K.transpose(-2, -1) / scale


@mistake("2.4", "no-scale", zh="看起来少了 1/√d 缩放", en="looks like the 1/sqrt(d) scale is missing")
def _no_scale(Q, K, V):
    w = torch.softmax(_scores(Q, K, 1.0), dim=-1)
    return w @ V, w


@mistake("2.4", "scaled-by-d", zh="除以了 d 而不是 √d", en="divided by d instead of sqrt(d)")
def _by_d(Q, K, V):
    w = torch.softmax(_scores(Q, K, Q.shape[-1]), dim=-1)
    return w @ V, w


@mistake("2.4", "softmax-wrong-dim", zh="softmax 的维度不对：应当对键（最后一维）归一化",
         en="softmax over the wrong dim: normalize over the keys (the last dim)")
def _wrong_dim(Q, K, V):
    w = torch.softmax(_scores(Q, K, math.sqrt(Q.shape[-1])), dim=-2)
    return w @ V, w


@mistake("2.4", "no-softmax", zh="少了 softmax：weights 是原始分数，每行加和不为 1",
         en="the softmax is missing: the weights are the raw scores and rows do not sum to 1")
def _no_softmax(Q, K, V):
    w = _scores(Q, K, math.sqrt(Q.shape[-1]))
    return w @ V, w


@mistake("2.4", "weights-returned-transposed", zh="返回的 weights 是 (..., Tk, Tq)：应为 (..., Tq, Tk)，每个查询一行",
         en="the weights come back as (..., Tk, Tq): they are (..., Tq, Tk), one row per query")
def _weights_transposed(Q, K, V):
    w_kq = torch.softmax(K @ Q.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-2)    # (..., Tk, Tq)
    return w_kq.transpose(-2, -1) @ V, w_kq


@mistake("2.4", "weights-times-K", zh="输出乘的是 K：out = weights @ V", en="the output uses K: out = weights @ V")
def _times_k(Q, K, V):
    w = torch.softmax(_scores(Q, K, math.sqrt(Q.shape[-1])), dim=-1)
    return w @ K, w


@mistake("2.4", "unstable-softmax", zh="自己写的 softmax 没有先减去最大值：分数很大时 exp 溢出，得到 NaN",
         en="a hand-written softmax without subtracting the max: exp overflows on large scores, giving NaN")
def _unstable(Q, K, V):
    e = torch.exp(_scores(Q, K, math.sqrt(Q.shape[-1])))
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ V, w
