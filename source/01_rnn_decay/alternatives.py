"""Correct alternatives of 01_rnn_decay (instructor side only): validate grades each as a submission.

Each is a way a careful student may solve the exercise other than the reference's: NumPy or torch for
everything, sech² or exponentials instead of tanh, loops against vectorized code, preallocated outputs
against ``torch.stack``, ``F.linear`` / ``torch.addmm`` / ``einsum`` steps, ``nn.RNN`` with copied
weights (1.5's statement allows every call), logsumexp or float64-and-back softmaxes. 1.4's may call
the student's own 1.2 and 1.3 (the solved notebook defines them) or inline them.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from autograder.catalog import alternative


# -- 1.1 tanh_derivative ---------------------------------------------------------
@alternative("1.1", "sech-squared", zh="sech²(z) = 1 / cosh²(z)：cosh 溢出成 inf 时结果正好是 0",
             en="sech²(z) = 1 / cosh²(z): where cosh overflows to inf the result is exactly 0")
def _tanh_sech_squared(z):
    # 1 - tanh² = 1 / cosh²; cosh(±1e4) = inf gives 1 / inf = 0, the right limit. Python floats go through
    # NumPy's float64 (math.cosh raises OverflowError instead of giving inf).
    if isinstance(z, torch.Tensor):
        return 1 / torch.cosh(z) ** 2
    if isinstance(z, np.ndarray):
        with np.errstate(over="ignore"):
            return 1 / np.cosh(z) ** 2
    with np.errstate(over="ignore"):
        return float(1 / np.cosh(np.float64(z)) ** 2)


@alternative("1.1", "stable-exponentials", zh="4e^{-2|z|} / (1 + e^{-2|z|})²：只有不会溢出的指数",
             en="4 e^{-2|z|} / (1 + e^{-2|z|})²: exponentials that never overflow")
def _tanh_stable_exponentials(z):
    # 1 - tanh² = 4 / (e^z + e^-z)²; multiplied through by e^{-2|z|} no exponential exceeds 1.
    if isinstance(z, torch.Tensor):
        e = torch.exp(-2 * z.abs())
        return 4 * e / (1 + e) ** 2
    if isinstance(z, np.ndarray):
        e = np.exp(-2 * np.abs(z))
        return 4 * e / (1 + e) ** 2
    e = math.exp(-2 * abs(z))
    return 4 * e / (1 + e) ** 2


@alternative("1.1", "torch-for-everything", zh="一律转成张量用 torch.tanh 算，再还原成输入的类型",
             en="everything through torch.tanh, converted back to the kind it came as")
def _tanh_torch_for_everything(z):
    # torch.as_tensor keeps an array's dtype (and shares its memory: nothing is written to it);
    # a Python float goes in as float64 so no precision is lost, and .item() gives the float back.
    if isinstance(z, torch.Tensor):
        return 1 - torch.tanh(z).square()
    t = torch.as_tensor(z) if isinstance(z, np.ndarray) else torch.tensor(z, dtype=torch.float64)
    out = 1 - torch.tanh(t).square()
    return out.numpy() if isinstance(z, np.ndarray) else out.item()


@alternative("1.1", "elementwise-loop", zh="数组逐个元素用 math.tanh 算，按原形状和 dtype 装回",
             en="arrays element by element with math.tanh, put back in the input's shape and dtype")
def _tanh_elementwise_loop(z):
    # A loop over z.flat with math.tanh; np.array(..., dtype=z.dtype) keeps float32 float32.
    if isinstance(z, torch.Tensor):
        t = torch.tanh(z)
        return 1 - t * t
    if isinstance(z, np.ndarray):
        values = [1 - math.tanh(float(v)) ** 2 for v in z.flat]
        return np.array(values, dtype=z.dtype).reshape(z.shape)
    return 1 - math.tanh(z) ** 2


@alternative("1.1", "float64-and-back", zh="在 float64 里算，再转回输入的 dtype",
             en="computed in float64, cast back to the input's dtype",
             statement="中间在 float64 里算（比如用了 `np.float64(...)`、`.astype(np.float64)`）也可以，但返回之前要转回输入的 dtype")
def _tanh_float64_and_back(z):
    # More precision inside, the input's dtype outside (.to(z.dtype) / .astype(z.dtype)).
    if isinstance(z, torch.Tensor):
        return (1 - torch.tanh(z.to(torch.float64)) ** 2).to(z.dtype)
    if isinstance(z, np.ndarray):
        return (1 - np.tanh(z.astype(np.float64)) ** 2).astype(z.dtype)
    return 1.0 - math.tanh(z) ** 2


# -- 1.2 rnn_forward -------------------------------------------------------------
@alternative("1.2", "numpy-float64", zh="用 np.tanh 和 np.float64 循环（numpy.float64 也是 Python float）",
             en="a loop with np.tanh on np.float64 (numpy.float64 is a Python float)")
def _rnn_forward_numpy(seq, W_hh=0.9, W_xh=0.5):
    # np.float64 subclasses float, so the return value is a Python float.
    h = np.float64(0.0)
    for x in np.asarray(seq, dtype=np.float64):
        h = np.tanh(W_hh * h + W_xh * x)
    return h


@alternative("1.2", "torch-scalar", zh="用 0 维 float64 张量循环，最后 .item()",
             en="a loop on a 0-d float64 tensor, .item() at the end")
def _rnn_forward_torch(seq, W_hh=0.9, W_xh=0.5):
    # float64 keeps the reference's precision; .item() turns the 0-d tensor into a Python float.
    h = torch.zeros((), dtype=torch.float64)
    for x in seq:
        h = torch.tanh(W_hh * h + W_xh * float(x))
    return h.item()


@alternative("1.2", "reduce", zh="functools.reduce 把每一步折叠起来", en="the steps folded with functools.reduce")
def _rnn_forward_reduce(seq, W_hh=0.9, W_xh=0.5):
    # reduce starts from h_0 = 0.0 and applies one step per element; an empty seq gives 0.0.
    return float(functools.reduce(lambda h, x: math.tanh(W_hh * h + W_xh * float(x)), seq, 0.0))


@alternative("1.2", "index-loop", zh="按下标循环，状态存进列表", en="a loop over indices keeping every state in a list")
def _rnn_forward_states(seq, W_hh=0.9, W_xh=0.5):
    # states[t] is h_t; states[0] = h_0 = 0, so the last one is h_L (h_0 for an empty seq).
    states = [0.0]
    for t in range(len(seq)):
        states.append(math.tanh(W_hh * states[t] + W_xh * float(seq[t])))
    return float(states[-1])


# -- 1.3 attention_residual ------------------------------------------------------
@alternative("1.3", "explicit-weights", zh="写出整组权重 [alpha, 0, ..., 0] 再求加权和",
             en="the whole weight list [alpha, 0, ..., 0], then the weighted sum")
def _residual_explicit_weights(seq, alpha=0.6):
    # Every weight but position 0's is 0, so the sum is alpha * seq[0]; an empty seq sums to 0.0.
    weights = [alpha] + [0.0] * (len(seq) - 1) if len(seq) else []
    return float(sum(w * float(x) for w, x in zip(weights, seq)))


@alternative("1.3", "numpy-dot", zh="NumPy 的权重向量与序列做点积", en="a NumPy weight vector dotted with the sequence")
def _residual_numpy_dot(seq, alpha=0.6):
    # np.dot of two empty float arrays is 0.0.
    x = np.asarray(seq, dtype=np.float64).reshape(-1)
    w = np.zeros_like(x)
    w[:1] = alpha
    return float(np.dot(w, x))


@alternative("1.3", "torch-weights", zh="torch 的权重张量与序列逐元素相乘再求和",
             en="a torch weight tensor times the sequence, summed")
def _residual_torch(seq, alpha=0.6):
    # float64 keeps the reference's precision; the sum of an empty tensor is 0.
    x = torch.as_tensor(np.asarray(seq, dtype=np.float64))
    w = torch.zeros_like(x)
    w[:1] = alpha
    return (w * x).sum().item()


@alternative("1.3", "enumerate-loop", zh="`enumerate` 循环，只有位置 0 的权重是 alpha",
             en="an enumerate loop where only position 0 weighs alpha")
def _residual_enumerate(seq, alpha=0.6):
    # The loop body adds alpha * x at i = 0 and 0 elsewhere.
    total = 0.0
    for i, x in enumerate(seq):
        total += (alpha if i == 0 else 0.0) * float(x)
    return total


# -- 1.4 decay_table -------------------------------------------------------------
def _one_hot(length):
    """The chapter's input [1, 0, ..., 0] of this length."""
    seq = [0.0] * int(length)
    seq[0] = 1.0
    return seq


@alternative("1.4", "preallocated", zh="先建 (n, 2) 的零数组，再逐行填入 1.2 与 1.3 的结果",
             en="a (n, 2) array of zeros filled row by row with 1.2's and 1.3's results")
def _table_preallocated(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    # np.zeros((n, 2)) has the right shape and dtype even for n = 0.
    table = np.zeros((len(lengths), 2), dtype=np.float64)
    for i, length in enumerate(lengths):
        seq = _one_hot(length)
        table[i, 0] = rnn_forward(seq, W_hh=W_hh, W_xh=W_xh)        # the student's 1.2
        table[i, 1] = attention_residual(seq, alpha=alpha)           # the student's 1.3
    return table


@alternative("1.4", "inlined", zh="不调用 1.2、1.3，自己写 RNN 循环；注意力那一列就是 alpha",
             en="no call to 1.2 or 1.3: its own RNN loop, and the attention column is alpha itself")
def _table_inlined(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    # For [1, 0, ..., 0] the attention residual is alpha * 1; the RNN reads x_1 = 1, then L - 1 zeros.
    rows = []
    for length in lengths:
        h = math.tanh(W_xh * 1.0)
        for _ in range(int(length) - 1):
            h = math.tanh(W_hh * h)
        rows.append((h, alpha * 1.0))
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


@alternative("1.4", "column-stack", zh="两列分别算好，再用 np.column_stack 拼起来",
             en="each column computed on its own, joined with np.column_stack")
def _table_column_stack(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    # np.column_stack of two empty float arrays has shape (0, 2).
    seqs = [[1.0] + [0.0] * (int(n) - 1) for n in lengths]
    rnn = np.array([rnn_forward(s, W_hh, W_xh) for s in seqs], dtype=np.float64)
    attention = np.array([attention_residual(s, alpha) for s in seqs], dtype=np.float64)
    return np.column_stack([rnn, attention])


@alternative("1.4", "numpy-input", zh="输入做成 NumPy 数组（np.eye 的第一行）交给 1.2 与 1.3",
             en="the input as a NumPy array (the first row of np.eye) handed to 1.2 and 1.3")
def _table_numpy_input(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    # 1.2 and 1.3 accept NumPy arrays; np.empty((0, 2)) covers no lengths at all.
    seqs = [np.eye(1, int(n))[0] for n in lengths]                                  # [1, 0, ..., 0]
    rows = [[rnn_forward(s, W_hh, W_xh), attention_residual(s, alpha)] for s in seqs]
    return np.array(rows, dtype=np.float64) if rows else np.empty((0, 2))


# -- 1.5 rnn_layer ---------------------------------------------------------------
@alternative("1.5", "F-linear", zh="每一步用 F.linear（它乘的是权重的转置，所以传 W.T）",
             en="each step with F.linear (it multiplies by the weight's transpose, so pass W.T)")
def _layer_linear(x, W_xh, W_hh, b=None, h0=None):
    # F.linear(v, W) = v @ W.T: W_xh.T and W_hh.T give v @ W_xh and h @ W_hh; its bias is b (or None).
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = h0 if h0 is not None else x.new_zeros(B, H)
    outputs = []
    for t in range(T):
        h = torch.tanh(F.linear(x[:, t], W_xh.T, b) + F.linear(h, W_hh.T))
        outputs.append(h)
    out = torch.stack(outputs, dim=1) if outputs else x.new_zeros(B, 0, H)
    return out, h


@alternative("1.5", "addmm-preallocated", zh="先一次算出全部 x_t W_xh + b，再逐步 torch.addmm，写进预先分配的输出",
             en="every x_t W_xh + b at once, then torch.addmm per step into a preallocated output")
def _layer_addmm(x, W_xh, W_hh, b=None, h0=None):
    # The input part does not depend on h, so it is computed for all t in one matmul; addmm(c, h, W) = c + h @ W.
    B, T, _ = x.shape
    H = W_hh.shape[0]
    pre_x = x @ W_xh                                        # (B, T, H)
    if b is not None:
        pre_x = pre_x + b
    h = x.new_zeros(B, H) if h0 is None else h0
    out = x.new_empty(B, T, H)
    for t in range(T):
        h = torch.tanh(torch.addmm(pre_x[:, t], h, W_hh))
        out[:, t] = h
    return out, h


@alternative("1.5", "einsum-cat", zh="用 `einsum` 写矩阵乘法，每步 `unsqueeze` 后用 `torch.cat` 拼接",
             en="the products as einsum, each step unsqueezed and joined with torch.cat")
def _layer_einsum(x, W_xh, W_hh, b=None, h0=None):
    # torch.cat accepts a list holding one empty (B, 0, H) piece, so T = 0 needs no special case.
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = torch.zeros(B, H, dtype=x.dtype, device=x.device) if h0 is None else h0
    bias = b if b is not None else torch.zeros(H, dtype=x.dtype, device=x.device)
    pieces = [x.new_zeros(B, 0, H)]
    for t in range(T):
        h = torch.tanh(torch.einsum("bd,dh->bh", x[:, t], W_xh) + torch.einsum("bk,kh->bh", h, W_hh) + bias)
        pieces.append(h.unsqueeze(1))
    return torch.cat(pieces, dim=1), h


@alternative("1.5", "torch-rnn-module", zh="把权重转置后拷进 nn.RNN（题目不禁止任何调用）",
             en="the weights transposed into an nn.RNN (the statement forbids no call)")
def _layer_torch_module(x, W_xh, W_hh, b=None, h0=None):
    # nn.RNN keeps (H, D) and (H, H) weights and two biases: copy W.T, put b in bias_ih, zero bias_hh.
    # It refuses T = 0: then nothing is read and the state is still the initial one.
    B, T, D = x.shape
    H = W_hh.shape[0]
    if T == 0:
        return x.new_zeros(B, 0, H), (h0 if h0 is not None else x.new_zeros(B, H))
    rnn = torch.nn.RNN(D, H, batch_first=True, dtype=x.dtype, device=x.device)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh.T)
        rnn.weight_hh_l0.copy_(W_hh.T)
        rnn.bias_ih_l0.copy_(b if b is not None else torch.zeros(H, dtype=x.dtype, device=x.device))
        rnn.bias_hh_l0.zero_()
    out, h_n = rnn(x, None if h0 is None else h0.unsqueeze(0))      # (B, T, H), (1, B, H)
    return out, h_n[0]


@alternative("1.5", "list-of-steps", zh="先把 x 拆成 T 个 (B, D) 的切片（unbind），逐个读",
             en="x unbound into T slices of (B, D), read one after another")
def _layer_unbind(x, W_xh, W_hh, b=None, h0=None):
    # x.unbind(1) gives x[:, 0], ..., x[:, T-1]; torch.stack needs a non-empty list, hence the T = 0 case.
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0
    if T == 0:
        return x.new_zeros(B, 0, H), h
    states = []
    for x_t in x.unbind(1):
        pre = x_t @ W_xh + h @ W_hh
        h = torch.tanh(pre if b is None else pre + b)
        states.append(h)
    return torch.stack(states, dim=1), h


# -- 1.6 attention_weights -------------------------------------------------------
@alternative("1.6", "torch-softmax", zh="torch.softmax（本题允许）", en="torch.softmax (allowed here)")
def _weights_torch_softmax(query, keys):
    # The statement allows torch.softmax, which is stable on its own.
    return torch.softmax(keys @ query, dim=0)


@alternative("1.6", "logsumexp", zh="exp(s - logsumexp(s))", en="exp(s - logsumexp(s))")
def _weights_logsumexp(query, keys):
    # log softmax = s - logsumexp(s); logsumexp is computed stably by torch.
    scores = torch.mv(keys, query)
    return torch.exp(scores - torch.logsumexp(scores, dim=0))


@alternative("1.6", "einsum-max-shift", zh="用 `einsum` 打分，减去最大值后手写 softmax",
             en="einsum scores, a softmax by hand after subtracting the max")
def _weights_einsum(query, keys):
    # Any shift leaves the softmax unchanged; the max makes every exponent <= 0.
    scores = torch.einsum("nd,d->n", keys, query)
    e = torch.exp(scores - scores.max())
    return e / e.sum()


@alternative("1.6", "float64-and-back", zh="逐元素相乘求和打分，在 float64 里做 softmax，再转回输入的 dtype",
             en="scores as an elementwise product summed, the softmax in float64, cast back to the input's dtype")
def _weights_float64(query, keys):
    # (keys * query).sum(-1) is keys @ query; .to() is differentiable, so gradients still reach both inputs.
    scores = (keys * query).sum(dim=-1).to(torch.float64)
    e = torch.exp(scores - scores.amax())
    return (e / e.sum()).to(query.dtype)


@alternative("1.6", "F-softmax-where-max", zh="F.softmax 之前先减去 torch.max(...).values",
             en="F.softmax after subtracting torch.max(...).values")
def _weights_F_softmax(query, keys):
    # Subtracting the max first is redundant for F.softmax and harmless.
    scores = query @ keys.T
    return F.softmax(scores - torch.max(scores, dim=0).values, dim=0)
