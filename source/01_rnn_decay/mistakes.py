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


@mistake("1.1", "forgot-one-minus", zh="看起来算的是 tanh(z)**2：导数是 1 - tanh(z)**2，前面的 1 - 不能丢",
         en="looks like tanh(z)**2: the derivative is 1 - tanh(z)**2, keep the 1 -")
def _tanh_squared(z):
    return _same_kind(z, lambda t: torch.tanh(t) ** 2, lambda a: np.tanh(a) ** 2, lambda x: math.tanh(x) ** 2)


@mistake("1.1", "tanh-of-z-squared", zh="看起来算的是 1 - tanh(z**2)：要先取 tanh 再平方，1 - tanh(z)**2",
         en="looks like 1 - tanh(z**2): take the tanh first, then square it, 1 - tanh(z)**2")
def _tanh_of_z_squared(z):
    return _same_kind(z, lambda t: 1 - torch.tanh(t ** 2), lambda a: 1 - np.tanh(a ** 2),
                      lambda x: 1 - math.tanh(x ** 2))


def _np_sech(a):
    with np.errstate(over="ignore"):
        return 1 / np.cosh(a)


@mistake("1.1", "sech-not-squared", zh="看起来算的是 1/cosh(z)：1 - tanh²(z) = 1/cosh²(z)，cosh 要平方",
         en="looks like 1/cosh(z): 1 - tanh²(z) = 1/cosh²(z), square the cosh")
def _sech_not_squared(z):
    return _same_kind(z, lambda t: 1 / torch.cosh(t), _np_sech, lambda x: 1 / math.cosh(x))


def _tanh_by_hand(t, exp):
    return (exp(t) - exp(-t)) / (exp(t) + exp(-t))


@mistake("1.1", "tanh-by-hand-overflows",
         zh="z 很大时出现了 NaN：看起来 tanh 是按 (e^z - e^-z)/(e^z + e^-z) 自己写的，e^z 溢出成 inf，inf/inf 得 NaN；"
            "用 torch.tanh / np.tanh / math.tanh",
         en="NaN for large z: looks like tanh written by hand as (e^z - e^-z)/(e^z + e^-z), where e^z overflows to inf "
            "and inf/inf is NaN; use torch.tanh / np.tanh / math.tanh")
def _tanh_by_hand_overflows(z):
    def numpy_way(a):
        with np.errstate(invalid="ignore", over="ignore"):
            return 1 - _tanh_by_hand(a, np.exp) ** 2
    return _same_kind(z, lambda t: 1 - _tanh_by_hand(t, torch.exp) ** 2, numpy_way,
                      lambda x: 1 - _tanh_by_hand(x, math.exp) ** 2)


@mistake("1.1", "tanh-in-place", zh="输入被原地改掉了（z.tanh_() 或 np.tanh(z, out=z)）：调用者的 z 变成了 tanh(z)；"
         "用不带下划线的 torch.tanh(z) / np.tanh(z)",
         en="the input is changed in place (z.tanh_() or np.tanh(z, out=z)): the caller's z became tanh(z); "
            "use torch.tanh(z) / np.tanh(z), which return a new result")
def _tanh_in_place(z):
    if isinstance(z, torch.Tensor):
        return 1 - z.tanh_() ** 2
    if isinstance(z, np.ndarray):
        return 1 - np.tanh(z, out=z) ** 2
    return 1 - math.tanh(z) ** 2


# -- 1.2 rnn_forward -------------------------------------------------------------
# First of 1.2's: its values are right, so it must be tried before any mistake that is right on the
# failing call (the diagnoser compares values, not the kind of what came back).
@mistake("1.2", "returns-a-tensor", zh="返回的是 torch 张量：要返回 Python float，用 float(h) 或 h.item() 转换",
         en="returns a torch tensor: return a Python float, convert with float(h) or h.item()")
def _rnn_returns_tensor(seq, W_hh=0.9, W_xh=0.5):
    h = torch.zeros(())
    for x in seq:
        h = torch.tanh(W_hh * h + W_xh * float(x))
    return h


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


@mistake("1.2", "tanh-only-at-the-end", zh="看起来 tanh 只在最后用了一次：每一步都要穿过 tanh，h_t = tanh(W_hh*h_{t-1} + W_xh*x_t)",
         en="looks like the tanh is applied once at the end: every step goes through it, h_t = tanh(W_hh*h_{t-1} + W_xh*x_t)")
def _rnn_tanh_at_end(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for x in seq:
        h = W_hh * h + W_xh * float(x)
    return math.tanh(h)


@mistake("1.2", "skips-first-input", zh="看起来从第二个输入开始读（range(1, len(seq))）：第一个输入 x_1 也要读",
         en="looks like reading starts at the second input (range(1, len(seq))): read the first input x_1 too")
def _rnn_skips_first(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for t in range(1, len(seq)):
        h = math.tanh(W_hh * h + W_xh * float(seq[t]))
    return float(h)


@mistake("1.2", "hard-coded-weights", zh="看起来写死了 0.9 和 0.5：要用传进来的 W_hh 和 W_xh",
         en="looks like 0.9 and 0.5 are hard-coded: use the W_hh and W_xh passed in")
def _rnn_hard_coded(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for x in seq:
        h = math.tanh(0.9 * h + 0.5 * float(x))
    return float(h)


@mistake("1.2", "numpy-scalar-not-converted",
         zh="seq 是 float32 数组或张量时返回的不是 Python float：np.tanh 的结果保留了输入的类型（numpy.float32，"
            "或张量进、张量出），最后要用 float(h) 转换",
         en="not a Python float when seq is a float32 array or a tensor: np.tanh keeps the input's kind (numpy.float32, "
            "or a tensor for a tensor); convert the result with float(h)")
def _rnn_numpy_scalar(seq, W_hh=0.9, W_xh=0.5):
    h = 0.0
    for x in seq:
        h = np.tanh(W_hh * h + W_xh * x)      # a list's float gives numpy.float64 (a float); others keep their kind
    return h


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


@mistake("1.3", "rest-of-weight-spread", zh="剩下的 1 - alpha 被平均分给了其他位置：题目里其他位置的权重是 0",
         en="the remaining 1 - alpha is spread over the other positions: here every other position weighs 0")
def _residual_rest_spread(seq, alpha=0.6):
    if len(seq) == 0:
        return 0.0
    rest = [float(x) for x in seq[1:]]
    return float(alpha * float(seq[0]) + ((1 - alpha) * sum(rest) / len(rest) if rest else 0.0))


@mistake("1.3", "hard-coded-alpha", zh="看起来写死了 0.6：要用传进来的 alpha",
         en="looks like 0.6 is hard-coded: use the alpha passed in")
def _residual_hard_coded(seq, alpha=0.6):
    if len(seq) == 0:
        return 0.0
    return float(0.6 * float(seq[0]))


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


@mistake("1.4", "length-off-by-one", zh="输入多了一个数：长度为 L 的输入是 [1] + [0] * (L - 1)，共 L 个数",
         en="the input is one element too long: the input of length L is [1] + [0] * (L - 1), L numbers in all")
def _table_off_by_one(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = [[_rnn([1.0] + [0.0] * int(n), W_hh, W_xh), alpha] for n in lengths]
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


@mistake("1.4", "returns-a-list", zh="返回的是 Python 列表：要返回 NumPy 数组，用 `np.array(rows)`",
         en="returns a Python list: return a NumPy array, np.array(rows)")
def _table_list(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    return [[_rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh), alpha] for n in lengths]


@mistake("1.4", "empty-not-reshaped", zh="lengths 为空时返回了形状 (0,) 的数组：要用 `reshape` 变成 (0, 2)",
         en="for empty lengths the array has shape (0,): reshape it to (0, 2)")
def _table_not_reshaped(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    return np.array([[_rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh), alpha] for n in lengths], dtype=np.float64)


@mistake("1.4", "float32-table", zh="返回的数组是 float32：看起来先建了 torch 张量再转成 NumPy（torch 默认 float32）；"
         "要 float64：建数组时指定 dtype 为 float64",
         en="the array is float32: it looks made from a torch tensor (float32 by default); it should be "
            "float64: give the array dtype float64")
def _table_float32(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = [[_rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh), alpha] for n in lengths]
    return torch.tensor(rows).reshape(len(rows), 2).numpy()


@mistake("1.4", "rows-sorted", zh="行按长度排了序：第 i 行应对应 lengths[i]，行的顺序与 lengths 相同",
         en="the rows are sorted by length: row i belongs to lengths[i], in the order lengths gives")
def _table_sorted(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6):
    rows = [[_rnn([1.0] + [0.0] * (int(n) - 1), W_hh, W_xh), alpha] for n in sorted(lengths)]
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


@mistake("1.5", "outputs-shifted-by-one", zh="outputs 里存的是每一步之前的状态（h_0 到 h_{T-1}）：先算出 h_t 再存进去",
         en="outputs holds the state before each step (h_0 to h_{T-1}): compute h_t first, then store it")
def _layer_outputs_shifted(x, W_xh, W_hh, b=None, h0=None):
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0
    outputs = []
    for t in range(T):
        outputs.append(h)
        pre = x[:, t] @ W_xh + h @ W_hh
        h = torch.tanh(pre if b is None else pre + b)
    return (torch.stack(outputs, dim=1) if outputs else x.new_zeros(B, 0, H)), h


@mistake("1.5", "stacked-on-dim-0", zh="outputs 的形状是 (T, B, H)：torch.stack 默认沿 dim=0 拼接，要用 dim=1 得到 (B, T, H)",
         en="outputs has shape (T, B, H): torch.stack joins along dim=0 by default, use dim=1 for (B, T, H)")
def _layer_stacked_dim0(x, W_xh, W_hh, b=None, h0=None):
    out, h = _layer(x, W_xh, W_hh, b, h0)
    return out.transpose(0, 1), h


@mistake("1.5", "bias-after-tanh", zh="偏置加在了 tanh 之后：b 属于 tanh 里面，h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)",
         en="the bias is added after the tanh: b goes inside it, h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)")
def _layer_bias_after_tanh(x, W_xh, W_hh, b=None, h0=None):
    B, T, _ = x.shape
    H = W_hh.shape[0]
    h = x.new_zeros(B, H) if h0 is None else h0
    outputs = []
    for t in range(T):
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh)
        if b is not None:
            h = h + b
        outputs.append(h)
    return (torch.stack(outputs, dim=1) if outputs else x.new_zeros(B, 0, H)), h


@mistake("1.5", "state-not-carried", zh="每一步都从初始状态出发：第 t 步要用上一步的 h_{t-1}，而不是 h0",
         en="every step starts from the initial state: step t uses the previous step's h_{t-1}, not h0")
def _layer_state_not_carried(x, W_xh, W_hh, b=None, h0=None):
    B, T, _ = x.shape
    H = W_hh.shape[0]
    start = x.new_zeros(B, H) if h0 is None else h0
    h = start
    outputs = []
    for t in range(T):
        pre = x[:, t] @ W_xh + start @ W_hh
        h = torch.tanh(pre if b is None else pre + b)
        outputs.append(h)
    return (torch.stack(outputs, dim=1) if outputs else x.new_zeros(B, 0, H)), h


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


@mistake("1.6", "shifted-by-mean", zh="减去的是分数的平均值：分数正负相差几千时，最大的分数减去平均值仍有几千，exp 溢出成 inf；要减去最大值",
         en="the scores are shifted by their mean: when they are thousands apart, the largest minus the mean is still "
            "thousands and exp overflows to inf; subtract the max")
def _weights_mean_shift(query, keys):
    scores = keys @ query
    e = torch.exp(scores - scores.mean())
    return e / e.sum()


@mistake("1.6", "shifted-by-min", zh="减去的是最小的分数：这样每个指数都 >= 0，分数相差很大时 exp 溢出成 inf；要减去最大值",
         en="the scores are shifted by their min: every exponent is then >= 0 and exp overflows to inf when the scores "
            "are far apart; subtract the max")
def _weights_min_shift(query, keys):
    scores = keys @ query
    e = torch.exp(scores - scores.min())
    return e / e.sum()


@mistake("1.6", "no-max-subtraction", zh="没有先减去最大分数：分数很大时 exp 溢出，得到 inf/NaN",
         en="the largest score is not subtracted first: exp overflows on large scores, giving inf/NaN")
def _weights_no_max(query, keys):
    e = torch.exp(keys @ query)
    return e / e.sum()


@mistake("1.6", "log-softmax", zh="看起来返回的是 log-softmax（对数权重，都是负数）：权重是 softmax 本身，非负且加和为 1",
         en="looks like the log-softmax (log weights, all negative): the weights are the softmax itself, "
            "non-negative and summing to 1")
def _weights_log_softmax(query, keys):
    scores = keys @ query
    return scores - torch.logsumexp(scores, dim=0)


@mistake("1.6", "not-normalized", zh="看起来只算了 exp(s - max)，没有除以它们的和：权重要加和为 1",
         en="looks like exp(s - max) without dividing by their sum: the weights must sum to 1")
def _weights_not_normalized(query, keys):
    scores = keys @ query
    return torch.exp(scores - scores.max())


@mistake("1.6", "sigmoid-not-softmax", zh="看起来用的是 sigmoid：它对每个分数单独压缩，权重的和不是 1；要用 softmax",
         en="looks like a sigmoid: it squashes each score on its own and the weights do not sum to 1; use a softmax")
def _weights_sigmoid(query, keys):
    return torch.sigmoid(keys @ query)
