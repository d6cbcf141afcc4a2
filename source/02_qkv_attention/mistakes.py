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


@mistake("2.1", "all-projected-with-W_q", zh="Q、K、V 都用了 W_q：三者各有自己的投影矩阵，K = x @ W_k，V = x @ W_v",
         en="Q, K and V were all projected with W_q: each has its own matrix, K = x @ W_k, V = x @ W_v")
def _project_all_with_q(x, W_q, W_k, W_v):
    return x @ W_q, x @ W_q, x @ W_q


@mistake("2.1", "V-not-projected", zh="V 直接用了 x，没有投影：V = x @ W_v，形状 (..., T, Dv)",
         en="V is x itself, not projected: V = x @ W_v, of shape (..., T, Dv)")
def _project_v_is_x(x, W_q, W_k, W_v):
    return x @ W_q, x @ W_k, x


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


@mistake("2.2", "shifted-by-mean", zh="减去的是平均值而不是最大值：一个切片里的值相差几千时，最大的一项 exp 仍会溢出",
         en="subtracts the mean instead of the max: when a slice's values spread over thousands, exp still "
            "overflows on the largest")
def _softmax_shift_mean(x, dim=-1):
    e = torch.exp(x - x.mean(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "shifted-by-min", zh="减去的是最小值而不是最大值：一个切片里的值相差几千时，exp 会溢出",
         en="subtracts the min instead of the max: when a slice's values spread over thousands, exp overflows")
def _softmax_shift_min(x, dim=-1):
    e = torch.exp(x - x.amin(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "shifted-by-global-max",
         zh="减去的是整个张量的最大值（x.max()），不是沿 dim 每个切片自己的最大值：比它小几千的切片全部下溢成 0/0",
         en="subtracts the max of the whole tensor (x.max()), not each slice's own max along dim: slices thousands "
            "below it underflow to 0/0")
def _softmax_global_max(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "clamped-exponent", zh="把 exp 的参数截断（clamp）到一个范围里：不溢出了，但截断改变了结果；应当减去最大值",
         en="clamps the exponent into a range: no overflow any more, but the clamp changes the result; subtract the "
            "max instead")
def _softmax_clamped(x, dim=-1):
    e = torch.exp(x.clamp(-80.0, 80.0))
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "clamped-above", zh="把 exp 的参数截断在一个上限以下（clamp(max=...)）：不溢出了，但截断改变了结果，"
         "很大的负数仍下溢成 0/0；应当减去最大值",
         en="clamps the exponent below a bound (clamp(max=...)): no overflow any more, but the clamp changes the "
            "result and large negative inputs still underflow to 0/0; subtract the max instead")
def _softmax_clamped_above(x, dim=-1):
    e = torch.exp(x.clamp(max=80.0))
    return e / e.sum(dim=dim, keepdim=True)


@mistake("2.2", "nan-patched", zh="没有先减去最大值，再用 nan_to_num 把 NaN 换成 0：输入很大时整行都成了 0，加和不为 1",
         en="no max subtracted, the NaN then replaced by 0 (nan_to_num): on large inputs whole rows become 0 and "
            "do not sum to 1")
def _softmax_nan_patched(x, dim=-1):
    e = torch.exp(x)
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)


@mistake("2.2", "logsumexp-without-shift",
         zh="自己写的 logsumexp 没有先减去最大值（log(exp(x).sum())）：输入很大时它本身就溢出成 ±inf",
         en="a hand-written logsumexp without the max shift (log(exp(x).sum())): it overflows to ±inf itself on "
            "large inputs")
def _softmax_naive_logsumexp(x, dim=-1):
    return torch.exp(x - torch.log(torch.exp(x).sum(dim=dim, keepdim=True)))


@mistake("2.2", "sums-over-all-elements", zh="分母对整个张量求和（少了 dim=dim）：每个切片应当各自加和为 1",
         en="the denominator sums the whole tensor (no dim=dim): each slice should sum to 1 on its own")
def _softmax_sum_all(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum()


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


@mistake("2.3", "reshape-instead-of-transpose", zh="用 `reshape`/`view` 代替了转置：形状对了，元素却被打乱，请用 K.transpose(-2, -1)",
         en="reshape/view used instead of a transpose: the shape fits but the elements are scrambled; "
            "use K.transpose(-2, -1)")
def _scores_reshape(Q, K):
    K_t = K.reshape(*K.shape[:-2], K.shape[-1], K.shape[-2])        # (..., Dk, Tk), not a transpose
    return Q @ K_t / math.sqrt(Q.shape[-1])


@mistake("2.3", "keys-times-queries", zh="算成了 K @ Q^T，形状是 (..., Tk, Tq)：应为 Q @ K^T，(..., Tq, Tk)",
         en="computed K @ Q^T, of shape (..., Tk, Tq): it is Q @ K^T, (..., Tq, Tk)")
def _scores_kq(Q, K):
    return K @ Q.transpose(-2, -1) / math.sqrt(Q.shape[-1])


@mistake("2.3", "d-from-shape-1",
         zh="Dk 取成了 Q.shape[1]：它只在二维输入时是 Dk，输入为 (B, Tq, Dk) 时它是 Tq；用 Q.shape[-1]",
         en="Dk taken as Q.shape[1]: that is Dk only for 2-D input, for (B, Tq, Dk) it is Tq; use Q.shape[-1]")
def _scores_shape_1(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[1])


@mistake("2.3", "multiplied-by-sqrt-d", zh="乘以了 √Dk：应当除以 √Dk", en="multiplied by sqrt(Dk): divide by it")
def _scores_times_sqrt(Q, K):
    return Q @ K.transpose(-2, -1) * math.sqrt(Q.shape[-1])


@mistake("2.3", "transposed-Q", zh="转置的是 Q（Q^T @ K）：应为 Q @ K^T，转置 K",
         en="Q transposed (Q^T @ K): it is Q @ K^T, K transposed")
def _scores_q_transposed(Q, K):
    return Q.transpose(-2, -1) @ K / math.sqrt(Q.shape[-1])


@mistake("2.3", "elementwise-product-sum",
         zh="逐元素相乘再求和 (Q * K).sum(-1)：只得到第 i 个查询与第 i 个键的点积；要每个查询与每个键的点积 Q @ K^T",
         en="an elementwise product summed, (Q * K).sum(-1): only query i with key i; every query with every key is "
            "Q @ K^T")
def _scores_elementwise(Q, K):
    return (Q * K).sum(dim=-1) / math.sqrt(Q.shape[-1])


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


@mistake("2.4", "softmax-over-all-scores",
         zh="softmax 对全部分数一起做（max 和 sum 没有指定 dim，整个矩阵加和为 1）：应当每个查询一行、沿键（最后一维）归一化",
         en="the softmax runs over all the scores at once (max and sum without a dim: the whole matrix sums to 1): "
            "normalize each query's row over the keys (the last dim)")
def _softmax_all_scores(Q, K, V):
    s = _scores(Q, K, math.sqrt(Q.shape[-1]))
    e = torch.exp(s - s.max())
    w = e / e.sum()
    return w @ V, w


@mistake("2.4", "normalized-without-exp", zh="没有取 exp，直接除以每行的和：权重可能为负；softmax 先取 exp 再归一化",
         en="divided by the row sum without exp: weights can be negative; softmax takes exp, then normalizes")
def _without_exp(Q, K, V):
    s = _scores(Q, K, math.sqrt(Q.shape[-1]))
    w = s / s.sum(dim=-1, keepdim=True)
    return w @ V, w


@mistake("2.4", "V-times-weights", zh="输出算成了 V @ weights（只在 Tq = Tk = Dv 时形状才对得上）：应为 weights @ V",
         en="the output computed as V @ weights (the shapes fit only when Tq = Tk = Dv): it is weights @ V")
def _v_times_weights(Q, K, V):
    w = torch.softmax(_scores(Q, K, math.sqrt(Q.shape[-1])), dim=-1)
    return V @ w, w


@mistake("2.4", "scores-returned-as-weights", zh="返回的 weights 是 softmax 之前的分数：应返回 softmax 之后、每行加和为 1 的权重",
         en="the weights returned are the scores before the softmax: return the weights after it, rows summing to 1")
def _scores_as_weights(Q, K, V):
    s = _scores(Q, K, math.sqrt(Q.shape[-1]))
    return torch.softmax(s, dim=-1) @ V, s


@mistake("2.4", "scaled-after-softmax", zh="1/√d 用在了 softmax 之后：缩放的是分数，先缩放再 softmax",
         en="the 1/sqrt(d) scale is applied after the softmax: scale the scores, then take the softmax")
def _scaled_after(Q, K, V):
    w = torch.softmax(_scores(Q, K, 1.0), dim=-1) / math.sqrt(Q.shape[-1])
    return w @ V, w


@mistake("2.4", "scaled-by-sqrt-Dv", zh="除以了 √Dv（值的宽度）：缩放用的是查询和键的宽度 √Dk",
         en="divided by sqrt(Dv), the values' width: the scale is sqrt(Dk), the queries' and keys' width")
def _by_dv(Q, K, V):
    w = torch.softmax(_scores(Q, K, math.sqrt(V.shape[-1])), dim=-1)
    return w @ V, w


# -- 2.5 softmax_jacobian ----------------------------------------------------------
def _outer(p):
    return p.unsqueeze(-1) * p.unsqueeze(-2)          # (..., N, N): p_i p_j


def _eye_like(p):
    return torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)


@mistake("2.5", "diagonal-only", zh="只有对角阵 diag(p)：少了减去的外积 p p^T（i ≠ j 时 ∂p_i/∂x_j = -p_i p_j，不是 0）",
         en="only the diagonal matrix diag(p): the outer product p p^T is not subtracted (for i ≠ j, "
            "dp_i/dx_j = -p_i p_j, not 0)")
def _jacobian_diagonal_only(weights):
    return torch.diag_embed(weights)


@mistake("2.5", "outer-product-only", zh="只有 -p p^T：少了对角线上的 p_i（i = j 时 ∂p_i/∂x_i = p_i - p_i^2）",
         en="only -p p^T: the p_i on the diagonal is missing (for i = j, dp_i/dx_i = p_i - p_i^2)")
def _jacobian_outer_only(weights):
    return -_outer(weights)


@mistake("2.5", "sign-flipped", zh="符号反了：算成了 p p^T - diag(p)，应为 diag(p) - p p^T（对角线上 p_i(1 - p_i) 不会是负数）",
         en="the sign is flipped: p p^T - diag(p), it is diag(p) - p p^T (the diagonal p_i(1 - p_i) is never "
            "negative)")
def _jacobian_sign_flipped(weights):
    return _outer(weights) - torch.diag_embed(weights)


@mistake("2.5", "diagonal-like-sigmoid",
         zh="只算了对角线 p_i(1 - p_i)，像 sigmoid 的导数那样逐元素求导：softmax 的每个输出都依赖每个分数，"
            "i ≠ j 处是 -p_i p_j，不是 0",
         en="only the diagonal p_i(1 - p_i), an elementwise derivative like sigmoid's: every output of softmax "
            "depends on every score, the entries i ≠ j are -p_i p_j, not 0")
def _jacobian_like_sigmoid(weights):
    return torch.diag_embed(weights * (1 - weights))


@mistake("2.5", "log-softmax-jacobian",
         zh="算成了 log softmax 的雅可比 δ_ij - p_j（I - 1 p^T）：∂log p_i/∂x_j 还要乘上 p_i 才是 ∂p_i/∂x_j",
         en="the Jacobian of log softmax, delta_ij - p_j (I - 1 p^T): dlog p_i/dx_j times p_i is dp_i/dx_j")
def _jacobian_of_log_softmax(weights):
    return _eye_like(weights) - weights.unsqueeze(-2)


@mistake("2.5", "log-softmax-jacobian-transposed",
         zh="算成了 δ_ij - p_i（I - p 1^T，log softmax 的雅可比的转置）：∂p_i/∂x_j = p_i(δ_ij - p_j)，少了 p_i 这个因子",
         en="delta_ij - p_i (I - p 1^T, the transpose of log softmax's Jacobian): dp_i/dx_j = p_i(delta_ij - p_j), "
            "the factor p_i is missing")
def _jacobian_of_log_softmax_transposed(weights):
    return _eye_like(weights) - weights.unsqueeze(-1)
