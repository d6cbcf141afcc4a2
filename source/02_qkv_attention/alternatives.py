"""Correct alternatives of 02_qkv_attention (instructor side only): validate grades each as a submission.

Each is a way a careful student may solve the exercise other than the reference: einsum against
matmul, a loop against vectorized code, logsumexp against the max shift, float64 and back. None calls
a forbidden function (2.2: torch.softmax and friends; 2.4: torch's own attention). The 2.4 ones that
call ``softmax`` or ``attention_scores`` use the notebook's own 2.2 and 2.3 (so no module-level
function here may be named like an exercise's function: it would replace the student's).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.catalog import alternative


# -- 2.1 project_qkv -------------------------------------------------------------
@alternative("2.1", "einsum", zh="用 `torch.einsum` 写三个投影", en="the three projections with einsum")
def _project_einsum(x, W_q, W_k, W_v):
    # "...td,de->...te" is x @ W for any number of leading batch dims.
    return tuple(torch.einsum("...td,de->...te", x, W) for W in (W_q, W_k, W_v))


@alternative("2.1", "fused-then-split", zh="三个矩阵拼成一个，乘一次再按 [Dk, Dk, Dv] 切开",
             en="one matmul with the three matrices concatenated, split as [Dk, Dk, Dv]")
def _project_fused(x, W_q, W_k, W_v):
    # x @ [W_q | W_k | W_v] holds x @ W_q, x @ W_k, x @ W_v side by side; split takes them apart.
    fused = x @ torch.cat([W_q, W_k, W_v], dim=1)
    Q, K, V = fused.split([W_q.shape[1], W_k.shape[1], W_v.shape[1]], dim=-1)
    return Q, K, V


@alternative("2.1", "F-linear", zh="用 F.linear(x, W.T)（nn.Linear 的存法是 (Dk, D)）",
             en="F.linear(x, W.T) (nn.Linear stores its weight as (Dk, D))")
def _project_linear(x, W_q, W_k, W_v):
    # F.linear(x, A) is x @ A.T: with A = W.T it is x @ W; it takes any leading dims.
    return F.linear(x, W_q.T), F.linear(x, W_k.T), F.linear(x, W_v.T)


@alternative("2.1", "flatten-batch-mm", zh="把批量维摊平成 (N, D)，用 torch.mm 再变回原形状",
             en="batch dims flattened to (N, D), torch.mm, then reshaped back")
def _project_flatten(x, W_q, W_k, W_v):
    # Every row of x is projected on its own: a 2-D matmul over all rows, reshaped to (..., T, width).
    rows = x.reshape(-1, x.shape[-1])
    return tuple(torch.mm(rows, W).reshape(*x.shape[:-1], W.shape[1]) for W in (W_q, W_k, W_v))


# -- 2.2 softmax -----------------------------------------------------------------
@alternative("2.2", "logsumexp", zh="减去 logsumexp 再取指数", en="exp(x - logsumexp(x))",
             statement="其余 torch 函数都可以用")
def _softmax_logsumexp(x, dim=-1):
    # log softmax(x) = x - logsumexp(x), and torch.logsumexp is computed stably.
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


@alternative("2.2", "torch-max-values", zh="用 torch.max(x, dim, keepdim=True).values 求最大值",
             en="the max from torch.max(x, dim, keepdim=True).values", statement="其余 torch 函数都可以用")
def _softmax_torch_max(x, dim=-1):
    # The same max shift as the reference, the max taken with torch.max (values and indices).
    m = torch.max(x, dim=dim, keepdim=True).values
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=dim, keepdim=True)


@alternative("2.2", "float64-and-back", zh="在 float64 里计算，最后转回输入的 dtype",
             en="computed in float64, cast back to the input's dtype")
def _softmax_float64(x, dim=-1):
    # More precision inside changes nothing but rounding; .to(x.dtype) gives the input's dtype back.
    x64 = x.to(torch.float64)
    e = torch.exp(x64 - x64.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


@alternative("2.2", "movedim-to-last", zh="把 dim 挪到最后一维，算完再挪回去",
             en="dim moved to the last place, the softmax there, then moved back")
def _softmax_movedim(x, dim=-1):
    # Moving the axis and back is a permutation: the softmax along the last axis is along dim.
    last = x.movedim(dim, -1)
    e = torch.exp(last - last.max(dim=-1, keepdim=True).values)
    return (e / e.sum(dim=-1, keepdim=True)).movedim(-1, dim)


@alternative("2.2", "loop-over-slices", zh="逐个切片循环：每个切片减去自己的最大值",
             en="a loop over the slices along dim, each shifted by its own max")
def _softmax_loop(x, dim=-1):
    # Each 1-D slice along dim is normalized on its own, then the slices are stacked back in place.
    last = x.movedim(dim, -1)
    rows = last.reshape(-1, last.shape[-1])
    if rows.shape[0] == 0:
        return x.clone()
    out = []
    for row in rows:
        e = torch.exp(row - row.max())
        out.append(e / e.sum())
    return torch.stack(out).reshape(last.shape).movedim(-1, dim)


# -- 2.3 attention_scores --------------------------------------------------------
@alternative("2.3", "einsum", zh="用 `torch.einsum` 算所有查询与键的点积", en="every query-key dot product with einsum")
def _scores_einsum(Q, K):
    # "...qd,...kd->...qk" is Q @ K^T over any leading batch dims.
    return torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])


@alternative("2.3", "matmul-mT", zh="torch.matmul(Q, K.mT) 乘以 Dk ** -0.5",
             en="torch.matmul(Q, K.mT) times Dk ** -0.5")
def _scores_mt(Q, K):
    # K.mT swaps the last two dims only (like transpose(-2, -1)); times d**-0.5 is over sqrt(d).
    return torch.matmul(Q, K.mT) * Q.shape[-1] ** -0.5


@alternative("2.3", "bmm-flattened", zh="把批量维摊平成一维，用 torch.bmm 再变回原形状",
             en="batch dims flattened into one, torch.bmm, then reshaped back")
def _scores_bmm(Q, K):
    # bmm multiplies matching (Tq, Dk) @ (Dk, Tk) pairs; reshape keeps the batch order both ways.
    Tq, Dk = Q.shape[-2:]
    Tk = K.shape[-2]
    q = Q.reshape(-1, Tq, Dk)
    k = K.reshape(-1, Tk, Dk)
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(Dk)
    return scores.reshape(*Q.shape[:-2], Tq, Tk)


@alternative("2.3", "scale-Q-first", zh="先把 Q 除以 √Dk 再与 K^T 相乘", en="Q divided by sqrt(Dk) before the product")
def _scores_scale_first(Q, K):
    # (Q / s) @ K^T = (Q @ K^T) / s: the scale is linear, where it is applied does not matter.
    return (Q / math.sqrt(Q.shape[-1])) @ K.transpose(-1, -2)


@alternative("2.3", "scale-both", zh="Q 和 K 各除以 Dk 的四次方根", en="Q and K each divided by Dk ** 0.25")
def _scores_scale_both(Q, K):
    # (Q / d**0.25) @ (K / d**0.25)^T = Q K^T / sqrt(d); also keeps the products smaller.
    s = Q.shape[-1] ** 0.25
    return (Q / s) @ (K / s).transpose(-2, -1)


@alternative("2.3", "float32-sqrt-tensor", zh="除以 `torch.sqrt(torch.tensor(d_k))`：一个 float32 的标量（教程里最常见的写法）",
             en="divided by torch.sqrt(torch.tensor(d_k)): a float32 scalar (the tutorials' usual idiom)",
             statement="允许一个 float32 的中间量带来的误差")
def _scores_float32_scale(Q, K):
    # torch.tensor(d_k) is float32 (the default dtype): the scale is rounded to float32, the result stays float64.
    d_k = Q.size(-1)
    return Q @ K.transpose(-2, -1) / torch.sqrt(torch.tensor(d_k))


# -- 2.4 scaled_dot_product_attention --------------------------------------------
@alternative("2.4", "calls-by-name-broadcast-sum", zh="调用 2.2、2.3 的函数，out 用广播相乘再求和",
             en="calls 2.2's and 2.3's functions; out as a broadcast product summed over the keys")
def _sdpa_by_name(Q, K, V):
    # out[..., i, :] = sum_j w[..., i, j] V[..., j, :]: a broadcast product summed over j is weights @ V.
    weights = softmax(attention_scores(Q, K), dim=-1)                       # the notebook's
    out = (weights.unsqueeze(-1) * V.unsqueeze(-3)).sum(dim=-2)
    return out, weights


@alternative("2.4", "inlined", zh="不调用前面的函数，在函数里重写打分和 softmax",
             en="the scores and the softmax written out inline")
def _sdpa_inlined(Q, K, V):
    # The same formula without the helpers: scaled scores, max-shifted softmax over the keys, weighted sum.
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ V, weights


@alternative("2.4", "einsum", zh="打分与加权求和都用 `torch.einsum`", en="einsum for the scores and for the weighted sum")
def _sdpa_einsum(Q, K, V):
    # Two einsums are Q @ K^T and weights @ V; the softmax is the max-shifted one over the keys.
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    e = torch.exp(scores - torch.max(scores, dim=-1, keepdim=True).values)
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights


@alternative("2.4", "logsumexp-weights", zh="权重用 exp(分数 - logsumexp(分数))",
             en="the weights as exp(scores - logsumexp(scores))")
def _sdpa_logsumexp(Q, K, V):
    # exp(s - logsumexp(s)) over the keys is softmax(s): rows sum to 1, stable for large scores.
    scores = torch.matmul(Q, K.mT) / math.sqrt(Q.shape[-1])
    weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    return torch.matmul(weights, V), weights


@alternative("2.4", "float64-and-back", zh="在 float64 里计算，最后转回输入的 dtype",
             en="computed in float64, cast back to the input's dtype")
def _sdpa_float64(Q, K, V):
    # More precision inside changes only rounding; both outputs go back to the inputs' dtype.
    q, k, v = (t.to(torch.float64) for t in (Q, K, V))
    weights = softmax(attention_scores(q, k), dim=-1)                       # the notebook's
    return (weights @ v).to(Q.dtype), weights.to(Q.dtype)


# -- 2.5 softmax_jacobian ----------------------------------------------------------
@alternative("2.5", "p-times-delta-minus-p", zh="直接按推导的式子 p_i(δ_ij - p_j)：p 乘以（单位阵减去 p）",
             en="the derivation's own form p_i(delta_ij - p_j): p times (the identity less p)")
def _jacobian_delta(weights):
    # [..., i, j] = p_i * (delta_ij - p_j): a column of p times (I - a row of p), broadcast over the batch dims.
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype, device=weights.device)
    return weights.unsqueeze(-1) * (eye - weights.unsqueeze(-2))


@alternative("2.5", "einsum", zh="对角阵与外积都用 `torch.einsum`", en="the diagonal and the outer product with einsum")
def _jacobian_einsum(weights):
    # "...i,ij->...ij" puts p on the diagonal of the identity; "...i,...j->...ij" is the outer product p p^T.
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype, device=weights.device)
    return torch.einsum("...i,ij->...ij", weights, eye) - torch.einsum("...i,...j->...ij", weights, weights)


@alternative("2.5", "matmul-then-diagonal", zh="外积用矩阵乘法 (N, 1) @ (1, N)，再把 p 加到它的对角线上",
             en="the outer product as a matmul (N, 1) @ (1, N), then p added onto its diagonal")
def _jacobian_matmul(weights):
    # -p p^T as a matmul of a column and a row; diagonal() is a view of the new matrix, add_ edits that matrix only.
    jacobian = -(weights.unsqueeze(-1) @ weights.unsqueeze(-2))
    jacobian.diagonal(dim1=-2, dim2=-1).add_(weights)
    return jacobian


@alternative("2.5", "loop-over-slices", zh="逐个切片循环：每个一维切片用 torch.diag 和 torch.outer",
             en="a loop over the 1-D slices, each with torch.diag and torch.outer")
def _jacobian_loop(weights):
    # torch.diag and torch.outer take 1-D tensors: flatten the batch dims, one (N, N) per slice, stack, reshape.
    N = weights.shape[-1]
    rows = weights.reshape(-1, N)
    if rows.shape[0] == 0:
        return weights.new_zeros(*weights.shape, N)
    return torch.stack([torch.diag(p) - torch.outer(p, p) for p in rows]).reshape(*weights.shape, N)


@alternative("2.5", "float64-and-back", zh="在 float64 里计算，最后转回输入的 dtype",
             en="computed in float64, cast back to the input's dtype")
def _jacobian_float64(weights):
    # More precision inside changes nothing but rounding; .to(weights.dtype) gives the input's dtype back.
    p = weights.to(torch.float64)
    return (torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)).to(weights.dtype)


@alternative("2.5", "renormalized-first", zh="先把 weights 除以每行的和（重新归一化），再算 diag(p) - p p^T",
             en="weights divided by each row's sum first (renormalized), then diag(p) - p p^T")
def _jacobian_renormalized(weights):
    # Rows that sum to 1 divided by their sum are the same rows: the same values on every input the statement
    # allows; the gradient differs from the reference's only along the all-ones direction, which no such row moves in.
    p = weights / weights.sum(dim=-1, keepdim=True)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
