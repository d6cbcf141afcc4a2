"""Hidden checks of 01_rnn_decay: randomized inputs against solutions/, edge cases.

The reference is ``ctx.reference`` (the solution on float64 CPU copies), always
computed before the student's function runs on the same inputs. Labels (``what``)
name the case by its sizes and kind, never by an input's value: a hidden check's
message must not show its inputs (see ``checks.hidden_message``).
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import torch

from autograder.catalog import Audience, CheckFailed, Context, Kind, Msg, Value, brief, check, near_answer, not_graded
from autograder.catalog.integrity import input_gradients, inputs_unchanged, together
from autograder.catalog.comparison import label
from .checks import (expect_float, expect_kept_dtype, expect_ndarray, random_sequence,
                     random_weight, start_spread_cases, tensor_input)

H = Audience.HIDDEN


def expect_number(ctx: Context, value: Value, what: str | Msg) -> float:
    """Any real number (int or float): for edge cases where only the value matters."""
    if value.kind not in ("float", "int"):
        zh, en = label(what)
        raise CheckFailed(Msg(f"{zh} 应当是一个数，实际是 {value.describe()}",
                              f"{en} should be a number, got {value.describe()}"), diagnose=True,
                          hidden=Msg(f"{zh} 应当是一个数，实际是 {brief(value)}",
                                     f"{en} should be a number, got {brief(value)}"))
    return float(value.spec["v"])


# -- 1.1 tanh_derivative ---------------------------------------------------------
@check("1.1", "reference-random", H, Kind.NUMERIC, zh="随机输入（Tensor、ndarray、float）与参考答案一致",
       en="agrees with the reference on random inputs (Tensor, ndarray, float)", weight=2,
       statement="数组进、同形状且同 dtype 的数组出", same_as="matches-torch")
def _tanh_reference(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3)
    cases = (((a,), torch.float32), ((b, c), torch.float64), ((a, b, c), torch.float32), ((), torch.float64))
    # Every call in flight before the first is compared (see Context.start), in the order the inputs are drawn.
    # ctx.randn wants at least one size: draw flat, then shape (also the 0-d case).
    tensors = [(shape, dtype, ctx.start(z), z) for shape, dtype in cases
               for z in [ctx.randn(math.prod(shape), dtype=dtype, scale=3.0).reshape(shape)]]
    arrays = [(shape, dtype, ctx.start(arr), arr) for shape, dtype in (((c, a), np.float64), ((b,), np.float32))
              for arr in [ctx.randn(*shape, scale=3.0).numpy().astype(dtype)]]
    floats = [(x, ctx.start(x)) for x in ctx.randn(3, scale=3.0).tolist()]
    yield      # the next check begins here, while the worker runs these calls
    for shape, dtype, pending, z in tensors:
        want = ctx.reference(z)
        got = expect_kept_dtype(ctx, pending.value(), shape, dtype, what=tensor_input(dtype, shape))
        ctx.expect_close(got, want, dtype, what=tensor_input(dtype, shape))
    for shape, dtype, pending, arr in arrays:
        want = ctx.reference(arr)
        what = Msg(f"tanh_derivative(z)（z 是形状 {shape} 的 ndarray）", f"tanh_derivative(z) (z an ndarray of shape {shape})")
        got = expect_ndarray(ctx, pending.value(), shape, np.dtype(dtype).name, what=what)
        ctx.expect_close(got, want, np.dtype(dtype).name, what=what)
    for x, pending in floats:
        want = ctx.reference(x)
        what = Msg("tanh_derivative(z)（z 是 Python float）", "tanh_derivative(z) (z a Python float)")
        got = expect_float(ctx, pending.value(), what=what)
        ctx.expect_close(got, want, torch.float64, what=what)


@check("1.1", "edge-saturation-and-empty", H, Kind.EDGE, zh="±1e4 处趋于 0（无 NaN），空输入返回空输出",
       en="goes to 0 near ±1e4 (no NaN); an empty input gives an empty output",
       statement="空数组、空张量，以及 |z| 很大（比如 10^4）的 z 也是合法输入")
def _tanh_edge(ctx: Context) -> Iterator[None]:
    n = ctx.sizes(1, 3, 9)[0]
    tensors = []
    for dtype in (torch.float32, torch.float64):
        z = ctx.randn(n, dtype=torch.float64, scale=5.0) + torch.where(torch.arange(n) % 2 == 0, 1e4, -1e4)
        z = z.to(dtype)
        tensors.append((dtype, z, ctx.start(z)))
    arrays = [(np.dtype(np_dtype).name, arr, ctx.start(arr)) for np_dtype in (np.float64, np.float32)
              for arr in [np.array([1e4, -1e4, 0.0], dtype=np_dtype)]]
    empty = ctx.start(torch.zeros(0, dtype=torch.float64))
    empty_array = ctx.start(np.zeros(0))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, z, pending in tensors:
        with ctx.case(zh=f"绝对值很大的 z（Tensor {dtype}）", en=f"z of large magnitude (Tensor {dtype})"):
            want = ctx.reference(z)
            got = expect_kept_dtype(ctx, pending.value(), (n,), dtype, what="tanh_derivative(z ~ ±1e4)")
            ctx.expect_close(got, want, dtype, what="tanh_derivative(z ~ ±1e4)")
    for name, arr, pending in arrays:
        with ctx.case(zh=f"绝对值很大的 z（ndarray {name}）", en=f"z of large magnitude (ndarray {name})"):
            want = ctx.reference(arr)
            what = Msg("tanh_derivative(z)（z 是 ±1e4 与 0 的 ndarray）", "tanh_derivative(z) (z an ndarray of ±1e4 and 0)")
            ctx.expect_close(expect_ndarray(ctx, pending.value(), (3,), name, what=what), want, name, what=what)
    with ctx.case(zh="空张量", en="an empty Tensor"):
        ctx.expect_tensor(empty.value(), (0,), torch.float64,
                          what=Msg("tanh_derivative(z)（z 是空张量）", "tanh_derivative(z) (z an empty tensor)"))
    with ctx.case(zh="空数组", en="an empty ndarray"):
        expect_ndarray(ctx, empty_array.value(), (0,), "float64",
                       what=Msg("tanh_derivative(z)（z 是空数组）", "tanh_derivative(z) (z an empty ndarray)"))


# -- 1.2 rnn_forward -------------------------------------------------------------
@check("1.2", "reference-random", H, Kind.NUMERIC, zh="随机序列与权重与参考答案一致",
       en="agrees with the reference on random sequences and weights", weight=2, same_as="matches-torch-rnn")
def _rnn_forward_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for length in ctx.sizes(4, 2, 40):
        seq = random_sequence(ctx, length, scale=2.0)
        W_hh, W_xh = random_weight(ctx, -1.5, 1.5), random_weight(ctx, -2.0, 2.0)
        started.append((length, seq, W_hh, W_xh, ctx.start(seq, W_hh=W_hh, W_xh=W_xh)))
    yield      # the next check begins here, while the worker runs these calls
    for length, seq, W_hh, W_xh, pending in started:
        want = ctx.reference(seq, W_hh, W_xh)
        got = expect_float(ctx, pending.value(), what="rnn_forward(seq, W_hh, W_xh)")
        ctx.expect_close(got, want, torch.float64,
                         what=Msg(f"rnn_forward(seq, W_hh, W_xh)（seq 长 {length}，W_hh 与 W_xh 随机）",
                                  f"rnn_forward(a sequence of {length}, random W_hh and W_xh)"))
    seq = random_sequence(ctx, 9)
    pending = ctx.start(seq)
    want = ctx.reference(seq)
    got = expect_float(ctx, pending.value(), what="rnn_forward(seq)")
    ctx.expect_close(got, want, torch.float64,
                     what=Msg("rnn_forward(seq)（seq 长 9，权重取默认值）", "rnn_forward(seq of 9) (default weights)"))


@check("1.2", "edge-short-long-large", H, Kind.EDGE, zh="长度 1、空序列（h_0 = 0）、±1e4 的输入",
       en="length 1, an empty sequence (h_0 = 0), inputs near ±1e4",
       statement="空序列什么也没读，返回 h_0，也就是 0.0", same_as="matches-torch-rnn")
def _rnn_forward_edge(ctx: Context) -> Iterator[None]:
    x = random_sequence(ctx, 1)
    one = ctx.start(x)
    empty = ctx.start([])
    seq = [1e4 if v > 0 else -1e4 for v in random_sequence(ctx, 6)]
    large = ctx.start(seq, 0.7, 0.3)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case(zh="长度为 1 的序列", en="a sequence of length 1"):
        want = ctx.reference(x)
        got = expect_float(ctx, one.value(), what="rnn_forward([x])")
        ctx.expect_close(got, want, torch.float64, what=Msg("rnn_forward([x])（长度为 1 的序列）", "rnn_forward(a sequence of 1)"))
    with ctx.case(zh="空序列", en="an empty sequence"):
        got = expect_number(ctx, empty.value(), what="rnn_forward([])")
        ctx.expect_close(got, 0.0, torch.float64, what=Msg("rnn_forward([])（应为 h_0 = 0）", "rnn_forward([]) (h_0 = 0)"))
    with ctx.case(zh="绝对值很大的输入", en="inputs of large magnitude"):
        want = ctx.reference(seq, 0.7, 0.3)
        got = expect_float(ctx, large.value(), what="rnn_forward(seq ~ ±1e4)")
        ctx.expect_close(got, want, torch.float64,
                         what=Msg("rnn_forward(seq ~ ±1e4, W_hh, W_xh)（换了一组 W_hh 与 W_xh）",
                                  "rnn_forward(seq ~ ±1e4, other W_hh and W_xh)"))


#: The kinds of sequence 1.2's statement names besides a list, each with the dtype whose tolerance its answer gets.
SEQUENCE_KINDS = (("ndarray", np.float64, torch.float64), ("ndarray", np.float32, torch.float32),
                  ("tensor", torch.float64, torch.float64), ("tensor", torch.float32, torch.float32))


@check("1.2", "sequence-kinds", H, Kind.NUMERIC,
       zh="seq 是 NumPy 数组或一维张量（float64 与 float32）：与参考答案一致，返回的仍是 Python float",
       en="seq as a NumPy array or a 1-D tensor (float64 and float32): agrees with the reference and still "
          "returns a Python float",
       statement=("列表、NumPy 数组或一维张量都可能", "返回最后的隐状态，类型是 Python `float`"))
def _rnn_forward_kinds(ctx: Context) -> Iterator[None]:
    # On the CPU whatever the device under test: the statement names the sequence's kinds, not a device
    # (np.asarray(seq) is a fair way to read a tensor there). float64 arrays first: a float32 input whose
    # answer stays a NumPy or torch scalar (np.tanh without float()) fails on its own case.
    # A short sequence and weights that keep the first input's trace above rounding, so the answers of
    # other mistakes (starting from x_0, skipping it) stay apart and feedback names the right one.
    n = ctx.sizes(1, 3, 6)[0]
    W_hh, W_xh = random_weight(ctx, 0.6, 1.1), random_weight(ctx, 0.3, 0.9)
    started = []
    with ctx.on_device("cpu"):
        for kind, dtype, tol in SEQUENCE_KINDS:
            values = ctx.randn(n, scale=1.5)
            seq = values.numpy().astype(dtype) if kind == "ndarray" else values.to(dtype)
            started.append((kind, str(seq.dtype).replace("torch.", ""), tol, seq, ctx.start(seq, W_hh, W_xh)))
    yield      # the next check begins here, while the worker runs these calls
    for kind, name, tol, seq, pending in started:
        zh_kind = "NumPy 数组" if kind == "ndarray" else "一维张量"
        en_kind = "a NumPy array" if kind == "ndarray" else "a 1-D tensor"
        with ctx.case(zh=f"seq 是 {name} 的{zh_kind}", en=f"seq {en_kind} of {name}"):
            want = ctx.reference(seq, W_hh, W_xh)
            what = Msg(f"rnn_forward(seq, W_hh, W_xh)（seq 是长 {n} 的 {name} {zh_kind}）",
                       f"rnn_forward(seq, W_hh, W_xh) (seq {en_kind} of {n} {name} values)")
            got = expect_float(ctx, pending.value(), what=what)
            ctx.expect_close(got, want, tol, what=what)


not_graded("1.3", r"h_L \le 0.462 \times 0.9^{\,L-1}",
           why="a bound derived to explain why the RNN's residual decays; attention_residual does not compute it")


# -- 1.3 attention_residual ------------------------------------------------------
@check("1.3", "reference-random", H, Kind.NUMERIC, zh="随机序列与 alpha 与参考答案一致",
       en="agrees with the reference on random sequences and alpha", weight=2, same_as="matches-closed-form")
def _residual_reference(ctx: Context) -> Iterator[None]:
    started = []
    for length in ctx.sizes(4, 2, 40):
        seq = random_sequence(ctx, length, scale=3.0)
        alpha = random_weight(ctx, 0.0, 1.0)
        started.append((length, seq, alpha, ctx.start(seq, alpha)))
    yield      # the next check begins here, while the worker runs these calls
    for length, seq, alpha, pending in started:
        want = ctx.reference(seq, alpha)
        got = expect_float(ctx, pending.value(), what="attention_residual(seq, alpha)")
        ctx.expect_close(got, want, torch.float64,
                         what=Msg(f"attention_residual(seq, alpha)（seq 长 {length}，alpha 随机）",
                                  f"attention_residual(a sequence of {length}, random alpha)"))


@check("1.3", "edge-short-large", H, Kind.EDGE, zh="长度 1 的序列、空序列（返回 0.0）、±1e4 的输入",
       en="a sequence of length 1, an empty sequence (0.0), inputs near ±1e4",
       statement="空序列返回 0.0", same_as="matches-closed-form")
def _residual_edge(ctx: Context) -> Iterator[None]:
    empty, empty_alpha = ctx.start([]), ctx.start([], alpha=0.25)
    x = random_sequence(ctx, 1)
    one = ctx.start(x)
    seq = [v * 1e4 for v in random_sequence(ctx, 5)]
    large = ctx.start(seq, alpha=0.25)
    yield      # the next check begins here, while the worker runs these calls
    with ctx.case(zh="空序列", en="an empty sequence"):
        got = expect_number(ctx, empty.value(), what="attention_residual([])")
        ctx.expect_close(got, 0.0, torch.float64,
                         what=Msg("attention_residual([])（空序列应返回 0.0）", "attention_residual([]) (an empty sequence gives 0.0)"))
        got = expect_number(ctx, empty_alpha.value(), what="attention_residual([], alpha)")
        ctx.expect_close(got, 0.0, torch.float64,
                         what=Msg("attention_residual([], alpha)（换一个 alpha）", "attention_residual([], another alpha)"))
    with ctx.case(zh="长度为 1 的序列", en="a sequence of length 1"):
        want = ctx.reference(x)
        ctx.expect_close(expect_float(ctx, one.value(), what="attention_residual([x])"), want, torch.float64,
                         what=Msg("attention_residual([x])（长度为 1 的序列）", "attention_residual(a sequence of 1)"))
    with ctx.case(zh="绝对值很大的输入", en="inputs of large magnitude"):
        want = ctx.reference(seq, alpha=0.25)
        ctx.expect_close(expect_float(ctx, large.value(), what="attention_residual(seq ~ 1e4)"), want,
                         torch.float64, what=Msg("attention_residual(seq ~ 1e4, alpha)（换一个 alpha）",
                                                 "attention_residual(seq ~ 1e4, another alpha)"))


# -- 1.4 decay_table -------------------------------------------------------------
@check("1.4", "reference-random", H, Kind.NUMERIC, zh="随机长度（Python 列表或 NumPy 数组）与参数：与参考答案一致",
       en="agrees with the reference on random lengths (list or ndarray) and parameters", weight=2,
       statement=("lengths 是一串长度，Python 列表或 NumPy 整数数组都可能", "行的顺序与 `lengths` 相同"),
       same_as="matches-torch-rnn")
def _table_reference(ctx: Context) -> Iterator[None]:
    lengths = ctx.sizes(6, 1, 60)
    W_hh, W_xh, alpha = random_weight(ctx, 0.3, 1.2), random_weight(ctx, -1.5, 1.5), random_weight(ctx, 0.0, 1.0)
    pending = ctx.start(lengths, W_hh, W_xh, alpha)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.reference(lengths, W_hh, W_xh, alpha)
    got = expect_ndarray(ctx, pending.value(), (6, 2), what="decay_table(lengths, ...)")
    ctx.expect_close(got, want, got.dtype,
                     what=Msg("decay_table(lengths, W_hh, W_xh, alpha)（6 个随机长度，参数随机）",
                              "decay_table(6 random lengths, random W_hh, W_xh, alpha)"))
    arr = np.array(ctx.sizes(3, 1, 20), dtype=np.int64)
    pending = ctx.start(arr)
    want = ctx.reference(arr)
    got = expect_ndarray(ctx, pending.value(), (3, 2), what="decay_table(np.array(lengths))")
    ctx.expect_close(got, want, got.dtype,
                     what=Msg("decay_table(np.array(lengths))（3 个长度）", "decay_table(an np.array of 3 lengths)"))


@check("1.4", "rows-in-order-float64", H, Kind.NUMERIC,
       zh="lengths 次序打乱且有重复：每行对应 lengths 同一位置的长度，数组的 dtype 是 float64",
       en="lengths out of order and repeated: each row belongs to the length at its position, and the array "
          "is float64",
       statement=("NumPy 数组（float64）", "行的顺序与 `lengths` 相同"))
def _table_order_dtype(ctx: Context) -> Iterator[None]:
    short, middle, long = sorted(ctx.sizes(3, 1, 30))
    lengths = [middle, long, short, long]        # neither ascending nor descending, and one length twice
    W_hh, W_xh, alpha = random_weight(ctx, 0.5, 1.1), random_weight(ctx, 0.2, 1.5), random_weight(ctx, 0.1, 0.9)
    pending = ctx.start(lengths, W_hh, W_xh, alpha)
    yield      # the next check begins here, while the worker runs this call
    want = ctx.reference(lengths, W_hh, W_xh, alpha)
    what = Msg("decay_table(lengths, W_hh, W_xh, alpha)（4 个长度，次序打乱且有重复）",
               "decay_table(4 lengths out of order, one repeated, W_hh, W_xh, alpha)")
    got = expect_ndarray(ctx, pending.value(), (4, 2), what=what)
    ctx.expect(got.dtype == np.float64,
               f"返回数组的 dtype 应为 float64，实际是 {got.dtype.name}（torch 张量默认是 float32，转成 NumPy 后仍是 "
               f"float32；建数组时指定 dtype 为 float64）",
               f"the array should have dtype float64, got {got.dtype.name} (a torch tensor is float32 by default and "
               f"stays float32 as a NumPy array; give the array dtype float64)", diagnose=True, safe=True)
    ctx.expect_close(got, want, torch.float64, what=what)


@check("1.4", "edge-one-length", H, Kind.EDGE, zh="只有一个长度、长度为 1、很长的序列、没有长度",
       en="a single length, length 1, a long sequence, no lengths at all",
       statement="lengths 为空时也要返回形状 (0, 2) 的数组", same_as="matches-torch-rnn")
def _table_edge(ctx: Context) -> Iterator[None]:
    started = [(lengths, en, zh, ctx.start(lengths))
               for lengths, en, zh in (([1], "a single length of 1", "只有一个长度，且长度为 1"),
                                       ([200], "a single long sequence", "只有一个长度，且序列很长"),
                                       ([1, 300], "length 1 and a long sequence", "长度 1 和一个很长的序列"))]
    empty = ctx.start([])
    yield      # the next check begins here, while the worker runs these calls
    for lengths, en, zh, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(lengths)
            got = expect_ndarray(ctx, pending.value(), (len(lengths), 2), what="decay_table(lengths)")
            ctx.expect_close(got, want, got.dtype, what="decay_table(lengths)")
    with ctx.case(zh="lengths 为空", en="no lengths at all"):
        expect_ndarray(ctx, empty.value(), (0, 2), what="decay_table([])")


# -- 1.5 rnn_layer ---------------------------------------------------------------
def _layer_start(ctx: Context, B: int, T: int, D: int, Hd: int, dtype: torch.dtype, *, with_bias: bool,
                 with_h0: bool, scale: float = 1.0, keywords: bool = True) -> tuple:
    """One case's inputs, drawn, and its call, begun (:func:`_layer_finish` compares it with the reference)."""
    x = ctx.randn(B, T, D, dtype=dtype, scale=scale)
    W_xh, W_hh = ctx.randn(D, Hd, dtype=dtype, scale=0.5), ctx.randn(Hd, Hd, dtype=dtype, scale=0.5)
    b = ctx.randn(Hd, dtype=dtype, scale=0.5) if with_bias else None
    h0 = ctx.randn(B, Hd, dtype=dtype) if with_h0 else None
    if keywords:
        pending = ctx.start(x, W_xh, W_hh, **({"b": b} if with_bias else {}), **({"h0": h0} if with_h0 else {}))
    else:
        pending = ctx.start(x, W_xh, W_hh, b, h0)
    return (x, W_xh, W_hh, b, h0), (B, T, D, Hd, dtype, with_bias, with_h0), pending


def _layer_finish(ctx: Context, started: tuple) -> None:
    (x, W_xh, W_hh, b, h0), (B, T, D, Hd, dtype, with_bias, with_h0), pending = started
    want_out, want_h = ctx.reference(x, W_xh, W_hh, b, h0)
    out, h = ctx.expect_tuple(pending.value(), 2)
    case_en = (f"(B={B}, T={T}, D={D}, H={Hd}, {dtype}, b={'given' if with_bias else 'None'}, "
               f"h0={'given' if with_h0 else 'None'})")
    case_zh = (f"（B={B}，T={T}，D={D}，H={Hd}，{dtype}，b {'给定' if with_bias else '为 None'}，"
               f"h0 {'给定' if with_h0 else '为 None'}）")
    ctx.expect_close(ctx.expect_tensor(out, (B, T, Hd), dtype, what="outputs"), want_out, dtype,
                     what=Msg(f"outputs{case_zh}", f"outputs {case_en}"))
    ctx.expect_close(ctx.expect_tensor(h, (B, Hd), dtype, what="h_T"), want_h, dtype,
                     what=Msg(f"h_T{case_zh}", f"h_T {case_en}"))


@check("1.5", "reference-random", H, Kind.NUMERIC, zh="随机尺寸、dtype、有无 b 与 h0：与参考答案一致",
       en="random sizes, dtypes, with and without b and h0: agrees with the reference", weight=3,
       same_as="matches-torch-rnn")
def _layer_reference(ctx: Context) -> Iterator[None]:
    cases = ((torch.float32, True, True, True), (torch.float64, False, True, True),
             (torch.float64, True, False, False), (torch.float32, False, False, True))
    started = []
    for dtype, with_bias, with_h0, keywords in cases:
        B, T, D, Hd = ctx.sizes(4)
        started.append(_layer_start(ctx, B, T, D, Hd, dtype, with_bias=with_bias, with_h0=with_h0, keywords=keywords))
    yield      # the next check begins here, while the worker runs these calls
    for case in started:
        _layer_finish(ctx, case)


@check("1.5", "edge-tiny-and-large", H, Kind.EDGE, zh="T = 1、B = 1、H = 1，以及 1e4 量级的输入（饱和，无 NaN）",
       en="T = 1, B = 1, H = 1, and inputs of order 1e4 (saturated, no NaN)", same_as="matches-torch-rnn")
def _layer_edge(ctx: Context) -> Iterator[None]:
    B, D, Hd = ctx.sizes(3)
    started = [(("T = 1", "T = 1"), _layer_start(ctx, B, 1, D, Hd, torch.float64, with_bias=True, with_h0=True)),
               (("B = 1、H = 1（float32）", "B = 1 and H = 1 (float32)"),
                _layer_start(ctx, 1, 4, D, 1, torch.float32, with_bias=True, with_h0=True)),
               (("1e4 量级的输入", "inputs of order 1e4"),
                _layer_start(ctx, B, 3, D, Hd, torch.float64, with_bias=True, with_h0=True, scale=1e4))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in started:
        with ctx.case(zh=zh, en=en):
            _layer_finish(ctx, case)


@check("1.5", "edge-empty-sequence", H, Kind.EDGE,
       zh="T = 0：outputs 是形状 (B, 0, H) 的空张量，h_T 是初始状态（h0，或 h0=None 时的全零 (B, H)），dtype 不变",
       en="T = 0: outputs is an empty (B, 0, H) tensor and h_T the initial state (h0, or zeros (B, H) for "
          "h0=None), in the input's dtype",
       statement="这时返回形状 (B, 0, H) 的空输出和初始隐状态")
def _layer_empty(ctx: Context) -> Iterator[None]:
    B, D, Hd = ctx.sizes(3)
    started = [(("T = 0，h0=None（float64）", "T = 0 with h0=None (float64)"),
                _layer_start(ctx, B, 0, D, Hd, torch.float64, with_bias=True, with_h0=False)),
               (("T = 0，给了 h0（float32）", "T = 0 with h0 given (float32)"),
                _layer_start(ctx, B, 0, D, Hd, torch.float32, with_bias=False, with_h0=True)),
               (("T = 0，h0=None，位置参数（float32）", "T = 0 with h0=None, positional arguments (float32)"),
                _layer_start(ctx, B, 0, D, Hd, torch.float32, with_bias=False, with_h0=False, keywords=False))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in started:
        with ctx.case(zh=zh, en=en):
            _layer_finish(ctx, case)


# -- 1.6 attention_weights -------------------------------------------------------
@check("1.6", "reference-random", H, Kind.NUMERIC, zh="随机 query 与 keys 与参考答案一致",
       en="agrees with the reference on random queries and keys", weight=2, same_as="matches-torch")
def _weights_reference(ctx: Context) -> Iterator[None]:
    started = []        # every call in flight before the first is compared (see Context.start)
    for dtype in (torch.float32, torch.float64, torch.float64):
        N, D = ctx.sizes(2, 2, 12)
        query, keys = ctx.randn(D, dtype=dtype, scale=1.5), ctx.randn(N, D, dtype=dtype, scale=1.5)
        started.append((dtype, N, D, query, keys, ctx.start(query, keys)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, N, D, query, keys, pending in started:
        want = ctx.reference(query, keys)
        got = ctx.expect_tensor(pending.value(), (N,), dtype,
                                what=Msg(f"attention_weights(query, keys)（N={N}，D={D}）",
                                         f"attention_weights (N={N}, D={D})"))
        ctx.expect_close(got, want, dtype, what=Msg(f"attention_weights(query, keys)（N={N}，D={D}，{dtype}）",
                                                    f"attention_weights (N={N}, D={D}, {dtype})"))


@check("1.6", "edge-one-key-one-dim", H, Kind.EDGE, zh="只有一个键（权重为 1）、D = 1",
       en="a single key (weight 1), D = 1", same_as="matches-torch")
def _weights_edge(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2, 2, 9)
    started = [(query, keys, zh, en, ctx.start(query, keys))
               for (query, keys), zh, en in (((ctx.randn(D), ctx.randn(1, D)), "只有一个键", "a single key"),
                                             ((ctx.randn(1), ctx.randn(N, 1)), "D = 1", "D = 1"))]
    yield      # the next check begins here, while the worker runs these calls
    for query, keys, zh, en, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(query, keys)
            what = Msg(f"attention_weights(query, keys)（keys 的形状为 {tuple(keys.shape)}）",
                       f"attention_weights (keys {tuple(keys.shape)})")
            got = ctx.expect_tensor(pending.value(), (keys.shape[0],), torch.float64, what=what)
            ctx.expect_close(got, want, torch.float64, what=what)


@check("1.6", "edge-large-scores", H, Kind.EDGE,
       zh="分数在 1e3～1e4 量级、正负都有、彼此相差上千：没有 inf/NaN，与参考答案一致（float32 与 float64）",
       en="scores of order 1e3 to 1e4, of both signs, thousands apart: no inf/NaN, agrees with the reference "
          "(float32 and float64)", statement="分数的绝对值可能上千，正负都有，彼此也可能相差上千", same_as="large-scores")
def _weights_large(ctx: Context) -> Iterator[None]:
    # The cases of checks.SPREAD_CASES, in their order (the first that fails tells which shift a softmax
    # used), on integer inputs whose scores float32 computes exactly.
    started = start_spread_cases(ctx, 12)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, zh, en, n, query, keys, pending in started:
        with ctx.case(zh=f"{zh}（{dtype}）", en=f"{en} ({dtype})"):
            want = ctx.reference(query, keys)
            got = ctx.expect_tensor(pending.value(), (n,), dtype, what="attention_weights(query, keys)")
            ctx.expect(bool(torch.isfinite(got).all()),
                       "分数很大时权重里出现了 inf 或 NaN：exp 之前先减去分数的最大值",
                       "the weights hold inf or NaN when the scores are large: subtract the largest score "
                       "before exp", diagnose=True, safe=True)
            ctx.expect_close(got, want, dtype, what="attention_weights(query, keys)")


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量或数组（没有对输入做原地操作）", \
    "leaves the tensors and arrays it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个输入，且与参考答案一致", "gradients reach every input and agree with the reference's"
#: What the notebook's conventions (its introduction) say about both.
INPUTS_STATED = "函数不修改传入的张量或数组"
GRAD_STATED = "梯度要能沿你的计算一路传回每个输入张量"


@check("1.1", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_STATED)
def _tanh_inputs(ctx: Context) -> Iterator[None]:
    n = ctx.sizes(1)[0]
    # the next check begins at together's yield, while the worker runs these calls
    yield from together(inputs_unchanged(ctx, ctx.randn(n, dtype=torch.float32, scale=2.0)),
                        inputs_unchanged(ctx, ctx.randn(n, scale=2.0).numpy()))


@check("1.5", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_STATED)
def _layer_inputs(ctx: Context) -> Iterator[None]:
    B, T, D, Hd = ctx.sizes(4, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(B, T, D), ctx.randn(D, Hd, scale=0.5), ctx.randn(Hd, Hd, scale=0.5),
                            b=ctx.randn(Hd, scale=0.5), h0=ctx.randn(B, Hd))


@check("1.6", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_STATED)
def _weights_inputs(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2)
    yield from inputs_unchanged(ctx, ctx.randn(D, scale=1.5), ctx.randn(N, D, scale=1.5))


@check("1.6", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRAD_STATED)
def _weights_gradients(ctx: Context) -> Iterator[None]:
    N, D = ctx.sizes(2)
    yield from input_gradients(ctx, ("query", "keys"), (0, 1), ctx.randn(D, scale=1.5), ctx.randn(N, D, scale=1.5))


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
# 1.1 tanh_derivative: 1 - tanh(z)**2 as code (the notebook's markdown writes the math: 1 - tanh(z)^2)
near_answer("1.1", r"1-(torch|np|numpy|math)\.tanh\(([^()]|\([^()]*\))*\)(\*\*2|\.pow\(2\)|\.square\(\))",
            r"1-(torch|np|numpy)\.square\((torch|np|numpy|math)\.tanh")
