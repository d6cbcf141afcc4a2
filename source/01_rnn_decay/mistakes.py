"""Known mistakes of 01_rnn_decay (instructor side only).

Each function is a realistic wrong answer with the student's signature. When a
student's output fails a check and equals one of these on the same inputs, the
feedback names it. ``autograder validate`` proves each one loses points and is
named as itself and nothing else.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from autograder.catalog import mistake


def _same_kind(z, torch_fn, numpy_fn, math_fn):
    """Apply the right library's version of a function to a Tensor, an ndarray or a float."""
    if isinstance(z, torch.Tensor):
        return torch_fn(z)
    if isinstance(z, np.ndarray):
        return numpy_fn(z)
    return math_fn(z)


# -- 1.1 tanh_derivative ---------------------------------------------------------
@mistake("1.1", "one-minus-tanh", zh="看起来算的是 1 - tanh(z)：tanh 要平方，1 - tanh(z)**2",
         en="looks like 1 - tanh(z): square the tanh, 1 - tanh(z)**2")
def _one_minus_tanh(z):
    return _same_kind(z, lambda t: 1 - torch.tanh(t), lambda a: 1 - np.tanh(a), lambda x: 1 - math.tanh(x))


@mistake("1.1", "one-minus-z-squared", zh="看起来算的是 1 - z**2：少了 tanh，应为 1 - tanh(z)**2",
         en="looks like 1 - z**2: the tanh is missing, it is 1 - tanh(z)**2")
def _one_minus_z_squared(z):
    return 1 - z ** 2


@mistake("1.1", "tensor-for-every-input", zh="输入是 float 或 ndarray 时返回了 Tensor：要返回与输入同类的结果",
         en="returns a Tensor for a float or ndarray input: return the kind you were given")
def _tensor_for_every_input(z):
    return 1 - torch.tanh(torch.as_tensor(z)) ** 2


# -- 1.2 rnn_forward -------------------------------------------------------------
@mistake("1.2", "missing-tanh", zh="看起来少了 tanh：h_t = tanh(W_hh*h_{t-1} + W_xh*x_t)",
         en="looks like the tanh is missing: h_t = tanh(W_hh*h_{t-1} + W_xh*x_t)")
def _rnn_missing_tanh(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for x in seq:
        h = W_hh * h + W_xh * float(x)
    return float(h)


@mistake("1.2", "weights-swapped", zh="W_hh 与 W_xh 用反了：W_hh 乘上一个状态 h，W_xh 乘输入 x",
         en="W_hh and W_xh swapped: W_hh multiplies the previous state h, W_xh the input x")
def _rnn_weights_swapped(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for x in seq:
        h = math.tanh(W_xh * h + W_hh * float(x))
    return float(h)


@mistake("1.2", "starts-from-first-input", zh="看起来从 h_0 = x_0 开始：应从 h_0 = 0 开始，并且每个输入都要走一步",
         en="looks like it starts from h_0 = x_0: start from h_0 = 0 and take one step per input")
def _rnn_starts_from_x0(seq, W_hh=0.9, W_xh=0.5):
    h = float(seq[0])
    for x in seq[1:]:
        h = math.tanh(W_hh * h + W_xh * float(x))
    return float(h)


# -- 1.3 attention_residual ------------------------------------------------------
@mistake("1.3", "last-position", zh="权重放在了最后一个位置：注意力回看的是位置 0（seq[0]）",
         en="the weight sits on the last position: attention looks back at position 0 (seq[0])")
def _residual_last(seq, alpha=0.6):
    return float(alpha * float(seq[-1]))


@mistake("1.3", "forgot-alpha", zh="少了权重 alpha：结果应为 alpha * seq[0]",
         en="alpha is missing: the result should be alpha * seq[0]")
def _residual_no_alpha(seq, alpha=0.6):
    return float(seq[0])


@mistake("1.3", "alpha-on-every-position", zh="alpha 乘在了每个位置上：其他位置的权重是 0，只有位置 0 是 alpha",
         en="alpha on every position: every position but 0 has weight 0")
def _residual_every_position(seq, alpha=0.6):
    return float(alpha * sum(float(x) for x in seq))


# -- 1.4 decay_table -------------------------------------------------------------
def _rnn(seq, W_hh, W_xh):
    h = 0.0
    for x in seq:
        h = math.tanh(W_hh * h + W_xh * x)
    return h


@mistake("1.4", "columns-swapped", zh="两列顺序反了：第 0 列是 RNN，第 1 列是注意力",
         en="the columns are swapped: column 0 is the RNN, column 1 attention")
def _table_swapped(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = [[alpha, _rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh)] for n in lengths]
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


@mistake("1.4", "one-at-the-end", zh="输入写成了 [0, ..., 0, 1]：1 应当在开头，[1, 0, ..., 0]",
         en="the input is [0, ..., 0, 1]: the 1 goes first, [1, 0, ..., 0]")
def _table_one_at_end(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = []
    for n in lengths:
        seq = [0.0] * (int(n) - 1) + [1.0]
        rows.append([_rnn(seq, W_hh, W_xh), alpha * seq[0]])
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


@mistake("1.4", "table-transposed", zh="表转置了：应为 (len(lengths), 2)，每个长度一行",
         en="the table is transposed: it is (len(lengths), 2), one row per length")
def _table_transposed(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rnn = [_rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh) for n in lengths]
    return np.array([rnn, [alpha] * len(rnn)], dtype=np.float64)


@mistake("1.4", "parameters-not-passed", zh="W_hh、W_xh、alpha 没有传下去：看起来一直用的是默认值 0.9、0.5、0.6",
         en="W_hh, W_xh and alpha are not passed on: looks like the defaults 0.9, 0.5, 0.6 are always used")
def _table_defaults(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = [[_rnn([1.0] + [0.0] * (int(n) - 1), 0.9, 0.5), 0.6] for n in lengths]
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


# -- 1.5 rnn_layer ---------------------------------------------------------------
def _layer(x, W_xh, W_hh, b, h0, *, transpose_hh=False, bias_times=1, before_tanh=False, return_h0=False,
           ignore_h0=False):
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if (h0 is None or ignore_h0) else h0           # (B, H)
    start = h
    outputs = []
    for t in range(T):
        pre = x[:, t] @ W_xh + h @ (W_hh.T if transpose_hh else W_hh)    # (B, H)
        if b is not None:
            pre = pre + bias_times * b
        h = torch.tanh(pre)
        outputs.append(pre if before_tanh else h)
    return torch.stack(outputs, dim=1), (start if return_h0 else h)     # (B, T, H), (B, H)


@mistake("1.5", "W_hh-transposed", zh="看起来用了 h @ W_hh.T（torch 的存法）：这里 W_hh 是 (H, H)，应为 h @ W_hh",
         en="looks like h @ W_hh.T (torch's layout): here W_hh is (H, H) and the step is h @ W_hh")
def _layer_hh_transposed(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, b, h0, transpose_hh=True)


@mistake("1.5", "bias-missing", zh="少了偏置 b", en="the bias b is missing")
def _layer_no_bias(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, None, h0)


@mistake("1.5", "bias-added-twice", zh="偏置加了两次：nn.RNN 的 bias_hh_l0 在这里是 0，b 只加一次",
         en="the bias is added twice: nn.RNN's bias_hh_l0 is 0 here, add b once")
def _layer_bias_twice(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, b, h0, bias_times=2)


@mistake("1.5", "returns-h0", zh="第二个返回值是初始状态 h0：应返回最后一步的 h_T",
         en="the second return value is the initial state h0: return the last step's h_T")
def _layer_returns_h0(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, b, h0, return_h0=True)


@mistake("1.5", "outputs-before-tanh", zh="outputs 里存的是 tanh 之前的值：每一步存 tanh 之后的 h_t",
         en="outputs holds the values before the tanh: store each step's h_t after the tanh")
def _layer_before_tanh(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, b, h0, before_tanh=True)


@mistake("1.5", "ignores-h0", zh="没有用 h0：给了 h0 时应从 h0 开始", en="h0 is ignored: start from h0 when it is given")
def _layer_ignores_h0(x, W_xh, W_hh, b=None, h0=None):
    return _layer(x, W_xh, W_hh, b, h0, ignore_h0=True)


# -- 1.6 attention_weights -------------------------------------------------------
@mistake("1.6", "no-softmax", zh="少了 softmax：返回的是原始分数 keys @ query",
         en="the softmax is missing: these are the raw scores keys @ query")
def _weights_no_softmax(query, keys):
    return keys @ query


@mistake("1.6", "softmax-over-wrong-dim", zh="softmax 的维度不对：看起来对只有一个元素的维度做了归一化，结果全是 1",
         en="softmax over the wrong dim: looks like it normalized over a dim of size 1, so every weight is 1")
def _weights_wrong_dim(query, keys):
    scores = query.unsqueeze(0) @ keys.T          # (1, N)
    return torch.softmax(scores, dim=0).squeeze(0)


@mistake("1.6", "divided-by-sum-of-scores", zh="看起来是 scores / scores.sum()：少了 exp，应当用 softmax",
         en="looks like scores / scores.sum(): the exp is missing, use a softmax")
def _weights_sum_normalized(query, keys):
    scores = keys @ query
    return scores / scores.sum()


@mistake("1.6", "scaled-by-sqrt-d", zh="多除了 √D：这一章的打分就是点积 keys @ query，没有缩放",
         en="divided by sqrt(D): this chapter's score is the plain dot product keys @ query, no scale")
def _weights_scaled(query, keys):
    return torch.softmax(keys @ query / math.sqrt(query.shape[-1]), dim=0)


@mistake("1.6", "no-max-subtraction", zh="没有先减去最大分数：分数很大时 exp 溢出，得到 inf/NaN",
         en="the largest score is not subtracted first: exp overflows on large scores, giving inf/NaN")
def _weights_no_max(query, keys):
    e = torch.exp(keys @ query)
    return e / e.sum()
