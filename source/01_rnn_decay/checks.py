"""Public checks of 01_rnn_decay (shipped to students: no reference solution here).

The truth here is torch's own code (``torch.tanh``, ``nn.RNN``, ``F.softmax``)
or closed-form math, in float64. The chapter's numbers are checked to the
precision the chapter prints them with (half a unit in the last printed digit).

References are computed *before* the student's function runs: in self-check the
student gets the very objects the check holds and could modify them in place.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import Precision, precision, Audience, CheckFailed, Context, Kind, Msg, Value, brief, check, compare
from autograder.catalog.comparison import OUTPUT, RETURN_VALUE, label
from autograder.catalog.modules import torch_module

#: What the notebook's conventions say of precision (its introduction): a float32 scalar or table inside a float64
#: call is correct (autograder.catalog.Precision.ONE_FLOAT32).
PRECISION_RULE = "输入是 float64 时，结果要与参考答案在 float64 下一致，但允许一个 float32 的中间量带来的误差"
precision(("1.1", "1.2", "1.3", "1.4", "1.5", "1.6"), Precision.ONE_FLOAT32, statement=PRECISION_RULE)

P = Audience.PUBLIC

#: The chapter's tables, as printed.
TANH_Z = [0.0, 0.5, 1.0, 2.0, 3.0]
TANH_DERIVATIVE = [1.0, 0.7864, 0.4200, 0.0707, 0.0099]
DECAY_LENGTHS = [5, 10, 20, 50]
RNN_RESIDUAL = [0.2610, 0.1452, 0.0493, 0.0021]
ATTENTION_RESIDUAL = 0.6
FACT_QUERY = [0.0, 1.0]
FACT_KEYS = [[1.0, 0.0], [0.0, 1.0], [0.8, 0.8]]     # 我, 爱, 猫
FACT_WEIGHTS = [0.168, 0.457, 0.374]

#: Python's float and NumPy's float64 (a subclass of float) both count as "a Python float".
FLOAT_TYPES = ("float", "numpy.float64")


# -- helpers shared by the checks of this assignment ----------------------------
def expect_printed(ctx: Context, got: object, expected: object, decimals: int, what: str | Msg) -> None:
    """Agreement with a number the chapter prints to ``decimals`` places."""
    atol = 0.5 * 10.0 ** -decimals + 1e-12
    problem = compare(got, torch.tensor(expected, dtype=torch.float64), 0.0, atol)
    if problem is not None:
        zh, en = problem
        what_zh, what_en = label(what)
        raise CheckFailed(Msg(f"{what_zh}（本章给出的数值，保留 {decimals} 位小数）：{zh}",
                              f"{what_en} (the chapter's value, to {decimals} decimals): {en}"), diagnose=True)


def expect_float(ctx: Context, value: Value, what: str | Msg = RETURN_VALUE) -> float:
    """A Python float (NumPy's float64 is one too); anything else fails with what came back."""
    if value.kind != "float" or value.spec.get("type") not in FLOAT_TYPES:
        zh, en = label(what)
        raise CheckFailed(Msg(f"{zh} 应当是 Python float，实际是 {value.describe()}（可以用 float(...) 转换）",
                              f"{en} should be a Python float, got {value.describe()} (convert with float(...))"),
                          diagnose=True,
                          hidden=Msg(f"{zh} 应当是 Python float，实际是 {brief(value)}（可以用 float(...) 转换）",
                                     f"{en} should be a Python float, got {brief(value)} (convert with float(...))"))
    return float(value.spec["v"])


def widened_hint(expected: object, got: object) -> tuple[str, str]:
    """What a float32 input that came back float64 most likely means (computed in float64, not cast back)."""
    if "float32" in str(expected) and "float64" in str(got):
        return ("（看起来是在 float64 里算完就直接返回了，例如 np.float64(...)、.astype(np.float64) 或 .double()："
                "最后要转回输入的 dtype）",
                " (looks like it was computed in float64 and returned as it is, e.g. np.float64(...), "
                ".astype(np.float64) or .double(): cast back to the input's dtype)")
    return "", ""


def expect_kept_dtype(ctx: Context, value: Value, shape: tuple[int, ...], dtype: torch.dtype,
                      what: str | Msg = OUTPUT) -> torch.Tensor:
    """``ctx.expect_tensor`` of this shape and dtype, with :func:`widened_hint` when the dtype widened."""
    if value.kind == "tensor" and value.spec["dtype"] != str(dtype) and tuple(value.spec["shape"]) == tuple(shape):
        hint_zh, hint_en = widened_hint(dtype, value.spec["dtype"])
        zh, en = label(what)
        message = Msg(f"{zh} 的 dtype 应为 {dtype}，实际是 {value.spec['dtype']}{hint_zh}",
                      f"{en} should have dtype {dtype}, got {value.spec['dtype']}{hint_en}")
        raise CheckFailed(message, hidden=message)
    return ctx.expect_tensor(value, shape, dtype, what=what)


def expect_ndarray(ctx: Context, value: Value, shape: tuple[int, ...], dtype: str | None = None,
                   what: str | Msg = OUTPUT) -> np.ndarray:
    """A NumPy array of this shape (and dtype, if given; else any floating dtype).

    Shapes and dtypes are safe to state to hidden checks (the dtype is the array's own).
    """
    zh, en = label(what)
    if value.kind != "ndarray":
        raise CheckFailed(Msg(f"{zh} 应当是 numpy.ndarray，实际是 {value.describe()}",
                              f"{en} should be a numpy.ndarray, got {value.describe()}"), diagnose=True,
                          hidden=Msg(f"{zh} 应当是 numpy.ndarray，实际是 {brief(value)}",
                                     f"{en} should be a numpy.ndarray, got {brief(value)}"))
    got_shape = tuple(value.spec["shape"])
    if got_shape != tuple(shape):
        message = Msg(f"{zh} 的形状应为 {tuple(shape)}，实际是 {got_shape}",
                      f"{en} should have shape {tuple(shape)}, got {got_shape}")
        raise CheckFailed(message, diagnose=True, hidden=message)
    array = value.ndarray()
    got_dtype = value.spec["dtype"]
    if dtype is not None and got_dtype != dtype:
        hint_zh, hint_en = widened_hint(dtype, got_dtype)
        raise CheckFailed(Msg(f"{zh} 的 dtype 应为 {dtype}，实际是 {got_dtype}{hint_zh}",
                              f"{en} should have dtype {dtype}, got {got_dtype}{hint_en}"),
                          hidden=Msg(f"{zh} 的 dtype 应为 {dtype}，实际是 {array.dtype.name}{hint_zh}",
                                     f"{en} should have dtype {dtype}, got {array.dtype.name}{hint_en}"))
    if dtype is None and np.dtype(got_dtype).kind != "f":
        raise CheckFailed(Msg(f"{zh} 应当是浮点数组，实际 dtype 是 {got_dtype}",
                              f"{en} should be a floating-point array, got dtype {got_dtype}"),
                          hidden=Msg(f"{zh} 应当是浮点数组，实际 dtype 是 {array.dtype.name}",
                                     f"{en} should be a floating-point array, got dtype {array.dtype.name}"))
    return array


def torch_rnn(x: torch.Tensor, W_xh: torch.Tensor, W_hh: torch.Tensor, b: torch.Tensor | None = None,
              h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.RNN(D, H, batch_first=True)`` in float64 with the course's weights (torch stores them transposed)."""
    D, H = W_xh.shape
    rnn = torch_module(("rnn", D, H), lambda: nn.RNN(D, H, batch_first=True, dtype=torch.float64))
    with torch.no_grad():       # every parameter set below: nothing of an earlier use is left
        rnn.weight_ih_l0.copy_(W_xh.double().T)         # (H, D)
        rnn.weight_hh_l0.copy_(W_hh.double().T)         # (H, H)
        rnn.bias_ih_l0.copy_(b.double() if b is not None else torch.zeros(H, dtype=torch.float64))
        rnn.bias_hh_l0.zero_()
        state = None if h0 is None else h0.double().unsqueeze(0)      # (1, B, H)
        out, h_n = rnn(x.double(), state)               # (B, T, H), (1, B, H)
    return out, h_n.squeeze(0)


def scalar_rnn(seq: list[float], W_hh: float = 0.9, W_xh: float = 0.5) -> float:
    """The chapter's scalar RNN, run through ``nn.RNN(1, 1)``; h_0 = 0."""
    x = torch.tensor(seq, dtype=torch.float64).reshape(1, len(seq), 1)       # (B=1, T, D=1)
    _, h = torch_rnn(x, torch.tensor([[W_xh]], dtype=torch.float64), torch.tensor([[W_hh]], dtype=torch.float64))
    return float(h)


def one_hot_sequence(length: int) -> list[float]:
    """The chapter's input: the first token is 1, every later one 0."""
    return [1.0] + [0.0] * (length - 1)


def random_sequence(ctx: Context, length: int, scale: float = 1.0) -> list[float]:
    return [float(v) for v in ctx.randn(length, scale=scale)]


def random_weight(ctx: Context, low: float, high: float) -> float:
    """A scalar in [low, high) from the check's seeded generator, rounded for readable messages."""
    u = float(torch.rand(1, generator=ctx.generator, dtype=torch.float64))
    return round(low + (high - low) * u, 4)


def tensor_input(dtype: torch.dtype, shape: tuple[int, ...] | None = None) -> Msg:
    """The name of ``tanh_derivative(z)`` in messages when ``z`` is a tensor of this dtype (and shape)."""
    if shape is None:
        return Msg(f"tanh_derivative(z)（z 是 {dtype} 张量）", f"tanh_derivative(z) (z a {dtype} tensor)")
    return Msg(f"tanh_derivative(z)（z 是形状 {shape} 的 {dtype} 张量）",
               f"tanh_derivative(z) (z a {dtype} tensor of shape {shape})")


NDARRAY_INPUT = Msg("tanh_derivative(z)（z 是 ndarray）", "tanh_derivative(z) (z an ndarray)")


# -- 1.1 tanh_derivative ---------------------------------------------------------
@check("1.1", "chapter-table", P, Kind.FACT, zh="本章的表：z = [0, 0.5, 1, 2, 3] 处的 tanh'",
       en="the chapter's table: tanh' at z = [0, 0.5, 1, 2, 3]")
def _tanh_table(ctx: Context) -> Iterator[None]:
    z = torch.tensor(TANH_Z)
    pending = ctx.start(z)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (5,), torch.float32, what="tanh_derivative(z)")
    expect_printed(ctx, got, TANH_DERIVATIVE, 4, "tanh_derivative(z)")


@check("1.1", "same-kind", P, Kind.SHAPE,
       zh="返回与输入同类：float、ndarray、Tensor（形状与 dtype 不变：float32 进 float32 出，float64 进 float64 出）",
       en="returns the kind it was given: float, ndarray, Tensor (same shape and dtype: float32 in, float32 out; "
          "float64 in, float64 out)",
       statement=("返回**同一种东西**：浮点数进、浮点数出；数组进、同形状且同 dtype 的数组出；张量进、同形状且同 dtype、"
                  "同设备的张量出", "dtype 不变的意思是 float32 进、float32 出，float64 进、float64 出"))
def _tanh_kind(ctx: Context) -> Iterator[None]:
    pending = ctx.start(0.7)
    yield      # the next check begins here, while the worker runs this call
    expect_float(ctx, pending.value(), what="tanh_derivative(0.7)")
    n, m = ctx.sizes(2)
    for np_dtype in (np.float64, np.float32):
        arr = ctx.randn(n, m).numpy().astype(np_dtype)
        name = np.dtype(np_dtype).name
        expect_ndarray(ctx, ctx.call(arr), (n, m), name,
                       what=Msg(f"tanh_derivative(z)（z 是 {name} 的 ndarray）",
                                f"tanh_derivative(z) (z an ndarray of {name})"))
    for dtype in (torch.float32, torch.float64):
        z = ctx.randn(m, n, dtype=dtype)
        expect_kept_dtype(ctx, ctx.call(z), (m, n), dtype, what=tensor_input(dtype))


@check("1.1", "even-and-bounded", P, Kind.PROPERTY, zh="tanh' 是偶函数，取值在 (0, 1]，在 0 处等于 1",
       en="tanh' is even, lies in (0, 1] and equals 1 at 0")
def _tanh_property(ctx: Context) -> Iterator[None]:
    n = ctx.sizes(1, 4, 9)[0]
    z = ctx.randn(n, scale=2.0).abs()
    z[0] = 0.0
    both = torch.cat([z, -z])                                # (2n,)
    pending = ctx.start(both)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (2 * n,), torch.float64, what="tanh_derivative(z)")
    ctx.expect(bool(torch.isfinite(got).all()), "结果中有 NaN 或 inf", "the result holds NaN or inf", diagnose=True)
    ctx.expect_close(got[n:], got[:n], torch.float64,
                     what=Msg("tanh_derivative(-z) 与 tanh_derivative(z)", "tanh_derivative(-z) against tanh_derivative(z)"))
    ctx.expect(bool(((got > 0) & (got <= 1)).all()),
               f"tanh' 应在 (0, 1] 之内，实际最小 {got.min().item():.4g}、最大 {got.max().item():.4g}",
               f"tanh' should lie in (0, 1], got min {got.min().item():.4g}, max {got.max().item():.4g}",
               diagnose=True)
    ctx.expect_close(got[0], 1.0, torch.float64, what="tanh_derivative(0)")


def autograd_tanh_grad(z: object) -> torch.Tensor:
    """tanh' as torch's autograd computes it (the backward of ``torch.tanh``), in float64."""
    t = torch.as_tensor(z, dtype=torch.float64).detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(torch.tanh(t).sum(), t)
    return grad


@check("1.1", "matches-torch", P, Kind.NUMERIC, zh="与 torch 自动求导给出的 tanh 导数一致（Tensor、ndarray、float）",
       en="agrees with the derivative of torch.tanh that autograd computes (Tensor, ndarray, float)", weight=2,
       statement=(r"\tanh'(z) = 1-\tanh^2(z)", r"写 `tanh_derivative(z)`，逐元素计算 $1-\tanh^2(z)$"))
def _tanh_numeric(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3)
    tensors = []
    for dtype, shape in ((torch.float32, (a, b)), (torch.float64, (c, a, b))):
        z = ctx.randn(*shape, dtype=dtype, scale=2.0)
        tensors.append((dtype, shape, z, ctx.start(z)))
    arr = ctx.randn(b, c, scale=2.0).numpy()
    arr_pending = ctx.start(arr)
    x = float(ctx.randn(1, scale=2.0))
    x_pending = ctx.start(x)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, shape, z, pending in tensors:
        want = autograd_tanh_grad(z)
        got = expect_kept_dtype(ctx, pending.value(), shape, dtype, what=tensor_input(dtype))
        ctx.expect_close(got, want, dtype, what=tensor_input(dtype))
    want = autograd_tanh_grad(arr)
    got = expect_ndarray(ctx, arr_pending.value(), (b, c), "float64", what=NDARRAY_INPUT)
    ctx.expect_close(got, want, torch.float64, what=NDARRAY_INPUT)
    want_x = float(autograd_tanh_grad(x))
    got_x = expect_float(ctx, x_pending.value(), what=f"tanh_derivative({x:.4g})")
    ctx.expect_close(got_x, want_x, torch.float64, what=f"tanh_derivative({x:.4g})")


# -- 1.2 rnn_forward -------------------------------------------------------------
@check("1.2", "returns-float", P, Kind.SHAPE, zh="返回 Python float", en="returns a Python float",
       statement="类型是 Python `float`")
def _rnn_forward_type(ctx: Context) -> Iterator[None]:
    pending = ctx.start(random_sequence(ctx, ctx.sizes(1)[0]))
    yield      # the next check begins here, while the worker runs this call
    expect_float(ctx, pending.value(), what="rnn_forward(seq)")


@check("1.2", "chapter-decay", P, Kind.FACT, zh="本章的衰减：h_L = 0.2610 / 0.1452 / 0.0493 / 0.0021（L = 5/10/20/50）",
       en="the chapter's decay: h_L = 0.2610 / 0.1452 / 0.0493 / 0.0021 at L = 5/10/20/50",
       statement=(r"h_t = \tanh(0.9\,h_{t-1} + 0.5\,x_t)", "rnn_forward(seq, W_hh=0.9, W_xh=0.5)"))
def _rnn_forward_fact(ctx: Context) -> Iterator[None]:
    started = [ctx.start(one_hot_sequence(length)) for length in DECAY_LENGTHS]
    yield      # the next check begins here, while the worker runs these calls
    for length, want, pending in zip(DECAY_LENGTHS, RNN_RESIDUAL, started):
        what = Msg(f"rnn_forward([1, 0, ...])（L = {length}）", f"rnn_forward([1, 0, ...]) (L={length})")
        got = expect_float(ctx, pending.value(), what=what)
        expect_printed(ctx, got, want, 4, what)


@check("1.2", "matches-torch-rnn", P, Kind.NUMERIC, zh="与 nn.RNN(1, 1) 一致（随机序列与权重）",
       en="agrees with nn.RNN(1, 1) (random sequences and weights)", weight=2,
       statement=(r"h_t = \tanh(0.9\,h_{t-1} + 0.5\,x_t)", "rnn_forward(seq, W_hh=0.9, W_xh=0.5)",
                  "从 $h_0 = 0$ 开始逐个读入，返回最后的隐状态"))
def _rnn_forward_numeric(ctx: Context) -> Iterator[None]:
    started = []
    for length in ctx.sizes(3, 2, 12):
        seq = random_sequence(ctx, length)
        W_hh, W_xh = random_weight(ctx, -1.2, 1.2), random_weight(ctx, -1.5, 1.5)
        started.append((length, seq, W_hh, W_xh, ctx.start(seq, W_hh=W_hh, W_xh=W_xh)))
    positional_seq = random_sequence(ctx, 7)
    positional = ctx.start(positional_seq, 0.3, -0.8)
    yield      # the next check begins here, while the worker runs these calls
    for length, seq, W_hh, W_xh, pending in started:
        want = ctx.expected(scalar_rnn, seq, W_hh, W_xh)
        got = expect_float(ctx, pending.value(), what=f"rnn_forward(seq, W_hh={W_hh}, W_xh={W_xh})")
        ctx.expect_close(got, want, torch.float64,
                         what=Msg(f"rnn_forward(seq, W_hh={W_hh}, W_xh={W_xh})（seq 长 {length}）",
                                  f"rnn_forward(seq of {length}, W_hh={W_hh}, W_xh={W_xh})"))
    want = ctx.expected(scalar_rnn, positional_seq, 0.3, -0.8)
    got = expect_float(ctx, positional.value(), what="rnn_forward(seq, 0.3, -0.8)")
    ctx.expect_close(got, want, torch.float64,
                     what=Msg("rnn_forward(seq, 0.3, -0.8)（按位置传参）", "rnn_forward(seq, 0.3, -0.8) (positional)"))


# -- 1.3 attention_residual ------------------------------------------------------
@check("1.3", "returns-float", P, Kind.SHAPE, zh="返回 Python float", en="returns a Python float",
       statement="返回 `seq` 的加权和，类型是 Python `float`")
def _residual_type(ctx: Context) -> Iterator[None]:
    pending = ctx.start(random_sequence(ctx, ctx.sizes(1)[0]))
    yield      # the next check begins here, while the worker runs this call
    expect_float(ctx, pending.value(), what="attention_residual(seq)")


@check("1.3", "chapter-constant", P, Kind.FACT, zh="本章的结论：任何长度下都保留 0.6",
       en="the chapter's point: 0.6 is kept at every length")
def _residual_fact(ctx: Context) -> Iterator[None]:
    started = [ctx.start(one_hot_sequence(length)) for length in DECAY_LENGTHS]
    yield      # the next check begins here, while the worker runs these calls
    for length, pending in zip(DECAY_LENGTHS, started):
        what = Msg(f"attention_residual([1, 0, ...])（L = {length}）", f"attention_residual([1, 0, ...]) (L={length})")
        got = expect_float(ctx, pending.value(), what=what)
        expect_printed(ctx, got, ATTENTION_RESIDUAL, 4, what)


@check("1.3", "matches-closed-form", P, Kind.NUMERIC, zh="随机序列与 alpha：alpha * seq[0]",
       en="random sequences and alpha: alpha * seq[0]", weight=2,
       statement=(r"\text{out} = \sum_i w_i\,x_i", "attention_residual(seq, alpha=0.6)",
                  "位置 0 的权重为 `alpha`，其余位置权重为 0，返回 `seq` 的加权和"))
def _residual_numeric(ctx: Context) -> Iterator[None]:
    started = []
    for length in ctx.sizes(3, 2, 12):
        seq = random_sequence(ctx, length)
        alpha = random_weight(ctx, 0.05, 0.95)
        started.append((length, seq, alpha, ctx.start(seq, alpha=alpha)))
    default_seq = random_sequence(ctx, 6)
    default = ctx.start(default_seq)
    yield      # the next check begins here, while the worker runs these calls
    for length, seq, alpha, pending in started:
        got = expect_float(ctx, pending.value(), what=f"attention_residual(seq, alpha={alpha})")
        ctx.expect_close(got, alpha * seq[0], torch.float64,
                         what=Msg(f"attention_residual(seq, alpha={alpha})（seq 长 {length}）",
                                  f"attention_residual(seq of {length}, alpha={alpha})"))
    got = expect_float(ctx, default.value(), what="attention_residual(seq)")
    ctx.expect_close(got, 0.6 * default_seq[0], torch.float64,
                     what=Msg("attention_residual(seq)（alpha 取默认值）", "attention_residual(seq) (default alpha)"))


# -- 1.4 decay_table -------------------------------------------------------------
def _decay_reference(lengths: list[int], W_hh: float, W_xh: float, alpha: float) -> torch.Tensor:
    return torch.tensor([[scalar_rnn(one_hot_sequence(n), W_hh, W_xh), alpha] for n in lengths],
                        dtype=torch.float64).reshape(len(lengths), 2)


@check("1.4", "shape", P, Kind.SHAPE, zh="返回形状为 (len(lengths), 2) 的 NumPy 浮点数组",
       en="returns a floating NumPy array of shape (len(lengths), 2)",
       statement="返回形状为 `(len(lengths), 2)` 的 NumPy 数组")
def _table_shape(ctx: Context) -> Iterator[None]:
    lengths = ctx.sizes(3, 1, 12)
    pending = ctx.start(lengths)
    yield      # the next check begins here, while the worker runs this call
    expect_ndarray(ctx, pending.value(), (3, 2), what="decay_table(lengths)")


@check("1.4", "chapter-table", P, Kind.FACT, zh="本章的表：L = 5/10/20/50 时 RNN 与注意力的残留",
       en="the chapter's table: RNN and attention residuals at L = 5/10/20/50",
       statement="decay_table(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6)")
def _table_fact(ctx: Context) -> Iterator[None]:
    pending = ctx.start(list(DECAY_LENGTHS))
    yield      # the next check begins here, while the worker runs this call
    got = expect_ndarray(ctx, pending.value(), (4, 2), what="decay_table([5, 10, 20, 50])")
    want = [[rnn, ATTENTION_RESIDUAL] for rnn in RNN_RESIDUAL]
    expect_printed(ctx, got, want, 4, "decay_table([5, 10, 20, 50])")


@check("1.4", "rnn-decays-attention-stays", P, Kind.PROPERTY,
       zh="按长度递增：第 0 列（RNN）严格下降，第 1 列（注意力）恒为 alpha",
       en="by increasing length: column 0 (RNN) strictly decreases, column 1 (attention) stays alpha",
       statement=("第 0 列：RNN 的残留", "第 1 列：注意力的残留"))
def _table_property(ctx: Context) -> Iterator[None]:
    lengths = sorted(ctx.sizes(5, 1, 30))
    pending = ctx.start(lengths)
    yield      # the next check begins here, while the worker runs this call
    got = torch.from_numpy(expect_ndarray(ctx, pending.value(), (5, 2), what=f"decay_table({lengths})"))
    column = [round(v, 4) for v in got[:, 0].tolist()]
    ctx.expect(bool((got[1:, 0] < got[:-1, 0]).all()),
               f"第 0 列应随长度 {lengths} 严格下降，实际是 {column}",
               f"column 0 should strictly decrease over lengths {lengths}, got {column}", diagnose=True)
    ctx.expect_close(got[:, 1], torch.full((5,), ATTENTION_RESIDUAL), torch.float64, what=Msg("第 1 列", "column 1"))


@check("1.4", "matches-torch-rnn", P, Kind.NUMERIC, zh="随机长度与参数：与 nn.RNN(1, 1) 和 alpha 一致",
       en="random lengths and parameters: agrees with nn.RNN(1, 1) and alpha", weight=2,
       statement=("decay_table(lengths, W_hh=0.9, W_xh=0.5, alpha=0.6)",
                  "第 0 列：RNN 的残留，`rnn_forward(seq, W_hh, W_xh)`",
                  "第 1 列：注意力的残留，`attention_residual(seq, alpha)`"))
def _table_numeric(ctx: Context) -> Iterator[None]:
    lengths = ctx.sizes(4, 1, 25)
    W_hh, W_xh, alpha = random_weight(ctx, 0.5, 1.1), random_weight(ctx, 0.2, 1.5), random_weight(ctx, 0.1, 0.9)
    pending = ctx.start(lengths, W_hh=W_hh, W_xh=W_xh, alpha=alpha)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(_decay_reference, lengths, W_hh, W_xh, alpha)
    got = expect_ndarray(ctx, pending.value(), (4, 2),
                         what=f"decay_table({lengths}, W_hh={W_hh}, W_xh={W_xh}, alpha={alpha})")
    ctx.expect_close(got, want, got.dtype, what=f"decay_table({lengths}, W_hh={W_hh}, W_xh={W_xh}, alpha={alpha})")


# -- 1.5 rnn_layer ---------------------------------------------------------------
def _rnn_inputs(ctx: Context, B: int, T: int, D: int, H: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {"x": ctx.randn(B, T, D, dtype=dtype), "W_xh": ctx.randn(D, H, dtype=dtype, scale=0.5),
            "W_hh": ctx.randn(H, H, dtype=dtype, scale=0.5), "b": ctx.randn(H, dtype=dtype, scale=0.5),
            "h0": ctx.randn(B, H, dtype=dtype)}


@check("1.5", "shapes", P, Kind.SHAPE, zh="返回 (outputs (B, T, H), h_T (B, H))，dtype 不变",
       en="returns (outputs (B, T, H), h_T (B, H)) in the input's dtype",
       statement=("返回元组 `(outputs, h_T)`：`outputs` 形状 (B, T, H)", "`h_T` 形状 (B, H)",
                  "结果与 `x` 同 dtype、同设备：不要在函数里调用 `.cuda()`、`.cpu()`、`.double()`"))
def _layer_shapes(ctx: Context) -> Iterator[None]:
    B, T, D, H = ctx.sizes(4)
    started = []
    for dtype in (torch.float32, torch.float64):
        a = _rnn_inputs(ctx, B, T, D, H, dtype)
        started.append((dtype, ctx.start(a["x"], a["W_xh"], a["W_hh"], a["b"], a["h0"])))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        out, h = ctx.expect_tuple(pending.value(), 2)
        ctx.expect_tensor(out, (B, T, H), dtype, what="outputs")
        ctx.expect_tensor(h, (B, H), dtype, what="h_T")


# A constant output passes this too: its points need a correct output (checks.OUTPUT_KINDS).
@check("1.5", "last-output-is-h_T", P, Kind.PROPERTY, zh="outputs[:, -1] 就是 h_T",
       en="outputs[:, -1] is h_T", needs_output=True, statement="`h_T` 形状 (B, H)，是最后一步的隐状态")
def _layer_last(ctx: Context) -> Iterator[None]:
    B, T, D, H = ctx.sizes(4)
    a = _rnn_inputs(ctx, B, T, D, H, torch.float64)
    pending = ctx.start(a["x"], a["W_xh"], a["W_hh"], a["b"], a["h0"])
    yield      # the next check begins here, while the worker runs this call
    out, h = ctx.expect_tuple(pending.value(), 2)
    out_t = ctx.expect_tensor(out, (B, T, H), torch.float64, what="outputs")
    h_t = ctx.expect_tensor(h, (B, H), torch.float64, what="h_T")
    ctx.expect_close(h_t, out_t[:, -1], torch.float64, what=Msg("h_T 与 outputs[:, -1]", "h_T against outputs[:, -1]"))


@check("1.5", "matches-torch-rnn", P, Kind.NUMERIC,
       zh="与 nn.RNN(D, H, batch_first=True) 一致（weight_ih_l0 = W_xh.T，weight_hh_l0 = W_hh.T，bias_ih_l0 = b）",
       en="agrees with nn.RNN(D, H, batch_first=True) (weight_ih_l0 = W_xh.T, weight_hh_l0 = W_hh.T, bias_ih_l0 = b)",
       weight=3,
       statement=(r"h_t = \tanh\big(x_t W_{xh} + h_{t-1} W_{hh} + b\big)", "rnn_layer(x, W_xh, W_hh, b=None, h0=None)",
                  "`x` | (B, T, D) | 一批序列，批量维在前（`batch_first`）", "`W_xh` | (D, H) | 输入到隐状态",
                  "`W_hh` | (H, H) | 隐状态到隐状态", "`b` | (H,) | 偏置", "`h0` | (B, H) | 初始隐状态",
                  "第 $t$ 个位置是 $h_t$"))
def _layer_numeric(ctx: Context) -> Iterator[None]:
    B, T, D, H = ctx.sizes(4)
    started = []
    for dtype in (torch.float32, torch.float64):
        a = _rnn_inputs(ctx, B, T, D, H, dtype)
        started.append((dtype, a, ctx.start(a["x"], a["W_xh"], a["W_hh"], b=a["b"], h0=a["h0"])))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, a, pending in started:
        want_out, want_h = ctx.expected(torch_rnn, a["x"], a["W_xh"], a["W_hh"], a["b"], a["h0"])
        out, h = ctx.expect_tuple(pending.value(), 2)
        ctx.expect_close(ctx.expect_tensor(out, (B, T, H), dtype, what="outputs"), want_out, dtype, what="outputs")
        ctx.expect_close(ctx.expect_tensor(h, (B, H), dtype, what="h_T"), want_h, dtype, what="h_T")


@check("1.5", "defaults", P, Kind.NUMERIC, zh="b=None、h0=None 时：无偏置，从全零状态开始",
       en="with b=None and h0=None: no bias, start from zeros",
       statement=("rnn_layer(x, W_xh, W_hh, b=None, h0=None)", "`None` 表示不加偏置", "`None` 表示全 0",
                  "新建张量用 `x.new_zeros(...)`"))
def _layer_defaults(ctx: Context) -> Iterator[None]:
    B, T, D, H = ctx.sizes(4)
    a = _rnn_inputs(ctx, B, T, D, H, torch.float64)
    pending = ctx.start(a["x"], a["W_xh"], a["W_hh"])
    yield      # the next check begins here, while the worker runs these calls
    want_out, want_h = ctx.expected(torch_rnn, a["x"], a["W_xh"], a["W_hh"])
    out, h = ctx.expect_tuple(pending.value(), 2)
    ctx.expect_close(ctx.expect_tensor(out, (B, T, H), torch.float64, what="outputs"), want_out, torch.float64,
                     what="outputs")
    ctx.expect_close(ctx.expect_tensor(h, (B, H), torch.float64, what="h_T"), want_h, torch.float64, what="h_T")


# -- 1.6 attention_weights -------------------------------------------------------
@check("1.6", "shape", P, Kind.SHAPE, zh="返回形状 (N,)，dtype 不变", en="returns shape (N,) in the input's dtype",
       statement=("`query` 形状 (D,)，`keys` 形状 (N, D)，都是 torch 张量；返回形状 (N,) 的权重",
                  "与 `query` 同 dtype（float32 或 float64）"))
def _weights_shape(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2)
    started = [(dtype, ctx.start(ctx.randn(D, dtype=dtype), ctx.randn(N, D, dtype=dtype)))
               for dtype in (torch.float32, torch.float64)]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (N,), dtype, what="attention_weights(query, keys)")


@check("1.6", "chapter-weights", P, Kind.FACT,
       zh="本章的例子：查询 [0, 1] 对 我/爱/猫 的权重为 [0.168, 0.457, 0.374]",
       en="the chapter's example: query [0, 1] over 我 (I) / 爱 (love) / 猫 (cat) gives [0.168, 0.457, 0.374]")
def _weights_fact(ctx: Context) -> Iterator[None]:
    pending = ctx.start(torch.tensor(FACT_QUERY), torch.tensor(FACT_KEYS))
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (3,), torch.float32,
                            what="attention_weights([0, 1], keys)")
    expect_printed(ctx, got, FACT_WEIGHTS, 3, "attention_weights([0, 1], keys)")


@check("1.6", "a-distribution", P, Kind.PROPERTY, zh="权重非负且加和为 1", en="the weights are non-negative and sum to 1")
def _weights_property(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2, 3, 9)
    pending = ctx.start(ctx.randn(D), ctx.randn(N, D))
    yield      # the next check begins here, while the worker runs this call
    w = ctx.expect_tensor(pending.value(), (N,), torch.float64, what="weights")
    ctx.expect(bool(torch.isfinite(w).all()), "权重中有 NaN 或 inf", "the weights hold NaN or inf", diagnose=True)
    ctx.expect(bool((w >= 0).all()), f"权重不应为负，实际最小 {w.min().item():.4g}",
               f"weights should not be negative, got min {w.min().item():.4g}", diagnose=True)
    ctx.expect_close(w.sum(), 1.0, torch.float64, what="weights.sum()")


@check("1.6", "matches-torch", P, Kind.NUMERIC, zh="与 F.softmax(keys @ query, dim=0) 一致",
       en="agrees with F.softmax(keys @ query, dim=0)", weight=2,
       statement=(r"s_i = k_i \cdot q,\qquad w_i = \frac{e^{s_i}}{\sum_j e^{s_j}}",
                  "即分数 `keys @ query` 在 N 这一维上的 softmax"))
def _weights_numeric(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2)
    started = [(dtype, query, keys, ctx.start(query, keys)) for dtype in (torch.float32, torch.float64)
               for query, keys in [(ctx.randn(D, dtype=dtype), ctx.randn(N, D, dtype=dtype))]]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, query, keys, pending in started:
        want = F.softmax(keys.double() @ query.double(), dim=0)
        got = ctx.expect_tensor(pending.value(), (N,), dtype, what="attention_weights(query, keys)")
        ctx.expect_close(got, want, dtype, what="attention_weights(query, keys)")


#: The cases of large scores, in the order the checks try them: each is survived by a softmax shifted by
#: something other than the max for as long as it can be, so the first case that fails tells which
#: shift it was (no shift fails on the first, by the min on the third, by the mean only on the last).
#: "low" comes first: there a sigmoid gives zeros, not the ones of a softmax over a dim of size 1.
SPREAD_CASES = (
    ("low", "分数都很大且为负、彼此接近", "scores all large in magnitude, negative and close together"),
    ("high", "分数都很大且为正、彼此接近", "scores all large, positive and close together"),
    ("gap", "多数分数靠近最大值，有一个低出一大截", "most scores near the largest, one far below"),
    ("both-signs", "分数正负都有、彼此相差几千", "scores of both signs, thousands apart"),
)


def spread_scores(ctx: Context, case: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    """``n`` (3 to 15) distinct integer scores for one of :data:`SPREAD_CASES`, from the check's seeded generator.

    ``gap``: the lowest score sits further below the others than exp can span in ``dtype`` (709 in
    float64, 88 in float32), while the largest stays where exp is finite and the mean close to it.
    """
    jitter = torch.randperm(15, generator=ctx.generator)[:n].double()           # distinct: no two weights equal
    if case in ("high", "low"):
        big = float(ctx.randint(2000, 9000, 1))
        return (big + jitter) if case == "high" else -(big + jitter)
    if case == "gap":
        top, gap = ((ctx.randint(300, 600, 1), ctx.randint(1000, 1400, 1)) if dtype == torch.float64
                    else (ctx.randint(40, 70, 1), ctx.randint(110, 140, 1)))
        scores = float(top) - jitter
        scores[int(ctx.randint(0, n, 1))] = float(top) - float(gap)
        return scores
    big = float(ctx.randint(2000, 9000, 1))
    signs = torch.ones(n, dtype=torch.float64)
    signs[torch.randperm(n, generator=ctx.generator)[: n // 2]] = -1.0          # half negative, at random places
    return signs * big + (jitter - 5)


def exact_inputs(ctx: Context, scores: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(query (D,), keys (N, D)) of small integers with keys @ query == scores exactly, in any dtype.

    Every product and partial sum is an integer far below 2**24, so float32 computes the scores
    without rounding, whatever order a matmul sums in: only the softmax itself is under test.
    """
    n = scores.shape[0]
    d = ctx.sizes(1, 2, 5)[0]
    query = ctx.randint(-2, 3, d).double()
    query[0] = 1.0
    keys = ctx.randint(-3, 4, n, d).double()
    keys[:, 0] = scores - keys[:, 1:] @ query[1:]
    perm = torch.randperm(d, generator=ctx.generator)                           # the 1 is not always first
    return query[perm].to(dtype), keys[:, perm].to(dtype)


def start_spread_cases(ctx: Context, high: int) -> list[tuple]:
    """Each of SPREAD_CASES in float64, then float32, on n <= ``high`` keys: its inputs drawn and its call begun,
    every call in flight before the first is compared (see Context.start)."""
    started = []
    for dtype in (torch.float64, torch.float32):
        for case, zh, en in SPREAD_CASES:
            n = ctx.sizes(1, 3, high)[0]
            query, keys = exact_inputs(ctx, spread_scores(ctx, case, n, dtype), dtype)
            started.append((dtype, zh, en, n, query, keys, ctx.start(query, keys)))
    return started


@check("1.6", "large-scores", P, Kind.EDGE,
       zh="分数很大（上千，正负都有，彼此相差上千）：没有 inf/NaN，与 F.softmax 一致（float32 与 float64）",
       en="large scores (thousands, both signs, thousands apart): no inf/NaN, agrees with F.softmax "
          "(float32 and float64)")
def _weights_large(ctx: Context) -> Iterator[None]:
    started = start_spread_cases(ctx, 8)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, zh, en, n, query, keys, pending in started:
        with ctx.case(zh=f"{zh}（{dtype}）", en=f"{en} ({dtype})"):
            scores = keys.double() @ query.double()
            want = F.softmax(scores, dim=0)
            shown = [int(s) for s in scores.tolist()]
            got = ctx.expect_tensor(pending.value(), (n,), dtype, what="attention_weights(query, keys)")
            ctx.expect(bool(torch.isfinite(got).all()),
                       f"权重里出现了 inf 或 NaN（分数是 {shown}）：exp 之前先减去分数的最大值",
                       f"the weights hold inf or NaN (the scores are {shown}): subtract the largest score "
                       f"before exp", diagnose=True)
            ctx.expect_close(got, want, dtype, what="attention_weights(query, keys)")
