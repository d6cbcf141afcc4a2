"""Hidden checks of 02_qkv_attention: randomized inputs against solutions/, edge cases, forbidden calls.

The reference is ``ctx.reference`` (the solution on float64 CPU copies), always
computed before the student's function runs on the same inputs. Tolerances are
scale-aware (``Context.tol``): a correct answer for inputs near 1e4 passes in float32
too, whichever stable method computed it.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

from autograder.catalog import Audience, Context, Kind, Msg, check, near_answer, not_graded
from autograder.catalog.integrity import fixed_sum, input_gradients, inputs_unchanged, together
from .checks import BATCHES, batch_names, batched_value, jacobian_value, sizes_apart, softmax_rows, spread_slices

H = Audience.HIDDEN

#: The notebook's conventions (its introduction), quoted by the shared checks that enforce them.
INPUTS_UNCHANGED = "函数不能修改传入的张量"
GRADIENTS_FLOW = "梯度要能从输出传回每个输入"
#: What the statements of 2.2 and 2.4 say about large inputs.
STABLE_2_2 = "输入在几千的量级时也不能出现 `inf` 或 `nan`，同一个切片里的值有正有负、相差几千（比如 `[3000, -3000]`）时也一样"
STABLE_2_4 = "分数上万时结果也不能出现 `nan`"
#: What the statement of 2.5 says about the edge cases and about gradients.
EDGES_2_5 = "`N = 1` 时返回 `[[0.]]`（只有一个键，权重总是 1，分数怎么变都不影响它）；独热的 `weights`（一个 1，其余是 0）的雅可比全是 0"
GRADIENTS_2_5 = "和本章其他函数一样，梯度要能从输出传回 `weights`"
SCORES_2_3 = r"返回 $QK^\top / \sqrt{d_k}$，形状 (..., Tq, Tk)"


def _expect_like(ctx: Context, value, want: torch.Tensor, dtype: torch.dtype, what: str | Msg) -> None:
    ctx.expect_close(ctx.expect_tensor(value, tuple(want.shape), dtype, what=what), want, dtype, what=what)


# -- 2.1 project_qkv -------------------------------------------------------------
def _project_start(ctx: Context, batch: tuple[int, ...], dtype: torch.dtype, T: int, D: int, Dk: int, Dv: int,
                   scale: float = 1.0) -> tuple:
    """One case's inputs, drawn, and its call, begun (:func:`_project_finish` compares it with the reference)."""
    x = ctx.randn(*batch, T, D, dtype=dtype, scale=scale)
    W_q, W_k, W_v = ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dk, dtype=dtype), ctx.randn(D, Dv, dtype=dtype)
    return (batch, dtype, T, D, Dk, Dv), (x, W_q, W_k, W_v), ctx.start(x, W_q, W_k, W_v)


def _project_finish(ctx: Context, started: tuple) -> None:
    (batch, dtype, T, D, Dk, Dv), args, pending = started
    want = ctx.reference(*args)
    got = ctx.expect_tuple(pending.value(), 3)
    batch_zh, batch_en = batch_names(batch)
    for name, g, w in zip("QKV", got, want):
        _expect_like(ctx, g, w, dtype, Msg(f"{name}（{batch_zh}，T={T}、D={D}、Dk={Dk}、Dv={Dv}，{dtype}）",
                                           f"{name} ({batch_en}, T={T}, D={D}, Dk={Dk}, Dv={Dv}, {dtype})"))


@check("2.1", "reference-random", H, Kind.NUMERIC, zh="随机尺寸、批量维、dtype：与参考答案一致",
       en="random sizes, batch dims, dtypes: agrees with the reference", weight=2, same_as="matches-matmul")
def _project_reference(ctx: Context) -> Iterator[None]:
    started = []
    for batch, dtype in zip(BATCHES, (torch.float64, torch.float32, torch.float64)):
        T, D, Dk, Dv = ctx.sizes(4)
        started.append(_project_start(ctx, batch, dtype, T, D, Dk, Dv))
    yield      # the next check begins here, while the worker runs these calls
    for case in started:
        _project_finish(ctx, case)


@check("2.1", "edge-T1-large", H, Kind.EDGE, zh="T = 1、Dk = 1，以及 1e4 量级的输入",
       en="T = 1, Dk = 1, and inputs of order 1e4", same_as="matches-matmul")
def _project_edge(ctx: Context) -> Iterator[None]:
    D, Dv = ctx.sizes(2, 2, 9)
    started = [(("一个词元（T = 1）、Dk = 1", "one token (T = 1), Dk = 1"), _project_start(ctx, (2,), torch.float32, 1, D, 1, Dv))]
    T, D, Dk, Dv = ctx.sizes(4)
    started.append((("上万的输入", "inputs in the tens of thousands"),
                    _project_start(ctx, (), torch.float64, T, D, Dk, Dv, scale=1e4)))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in started:
        with ctx.case(zh=zh, en=en):
            _project_finish(ctx, case)


# -- 2.2 softmax -----------------------------------------------------------------
@check("2.2", "reference-random", H, Kind.NUMERIC, zh="随机形状、dim、dtype：与参考答案一致",
       en="random shapes, dims, dtypes: agrees with the reference", weight=2, same_as="matches-torch")
def _softmax_reference(ctx: Context) -> Iterator[None]:
    a, b, c, d = ctx.sizes(4)
    started = []        # every call in flight before the first is compared (see Context.start)
    for shape, dim, dtype in (((a,), 0, torch.float64), ((a, b), -1, torch.float32), ((a, b, c), 1, torch.float64),
                              ((d, a, b, c), -3, torch.float32), ((b, c, d), 2, torch.float64)):
        x = ctx.randn(*shape, dtype=dtype, scale=4.0)
        started.append((shape, dim, dtype, x, ctx.start(x, dim=dim)))
    yield      # the next check begins here, while the worker runs these calls
    for shape, dim, dtype, x, pending in started:
        want = ctx.reference(x, dim=dim)
        _expect_like(ctx, pending.value(), want, dtype, f"softmax(x {shape}, dim={dim}, {dtype})")


@check("2.2", "edge-extremes", H, Kind.EDGE,
       zh="±1e4 附近的输入、同一切片里相差几千且有正有负的值、沿 dim 只有一个元素、整行相同的值",
       en="inputs near ±1e4, slices spread over thousands of either sign, a dim of size 1, rows of equal values",
       statement=STABLE_2_2, same_as="matches-torch")
def _softmax_edge(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3, 3, 9)
    # Every call of the first two kinds in flight before the first is compared (see Context.start).
    # Rows from -1e4 to 1e4: exp overflows on some, underflows to 0/0 on others, and a shift by
    # the whole tensor's max (not each slice's) underflows every row far below the top one.
    rows_apart = [(dtype, x, ctx.start(x)) for dtype in (torch.float32, torch.float64)
                  for x in [(ctx.randn(a, b, scale=3.0) + torch.linspace(-1e4, 1e4, a).unsqueeze(-1)).to(dtype)]]
    # One slice spreads over thousands of both signs, along several dims.
    spread = []
    for dtype, dim in ((torch.float64, -1), (torch.float32, 1), (torch.float64, 0), (torch.float32, -1)):
        rows = spread_slices(ctx, a * c, b, dtype)                       # (slices, values along dim)
        x = rows.reshape(a, c, b).movedim(-1, dim).contiguous()            # the b values of a slice along dim
        spread.append((dtype, dim, x, ctx.start(x, dim=dim)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, pending in rows_apart:
        with ctx.case(zh=f"相邻的行相差几千、最大上万（{dtype}）", en=f"rows thousands apart, up to ten thousand ({dtype})"):
            want = ctx.reference(x)
            _expect_like(ctx, pending.value(), want, dtype, f"softmax(x {tuple(x.shape)}, {dtype})")
    for dtype, dim, x, pending in spread:
        with ctx.case(zh=f"同一切片里的值有正有负、相差几千（dim={dim}，{dtype}）",
                      en=f"slices spread over thousands of either sign (dim={dim}, {dtype})"):
            want = ctx.reference(x, dim=dim)
            _expect_like(ctx, pending.value(), want, dtype, f"softmax(x {tuple(x.shape)}, dim={dim}, {dtype})")
    with ctx.case(zh="沿 dim 只有一个元素", en="a dim of size 1"):
        x = ctx.randn(a, 1, c)
        _expect_like(ctx, ctx.call(x, dim=1), ctx.reference(x, dim=1), torch.float64,
                     f"softmax(x {tuple(x.shape)}, dim=1)")
    with ctx.case(zh="整行相同的值", en="rows of equal values"):
        x = torch.full((b, c), 7.5, dtype=torch.float64)
        _expect_like(ctx, ctx.call(x), ctx.reference(x), torch.float64, f"softmax(x {tuple(x.shape)})")


@check("2.2", "no-forbidden-calls", H, Kind.FORBIDDEN,
       zh="没有调用 torch.softmax / F.softmax / Tensor.softmax / log_softmax",
       en="does not call torch.softmax / F.softmax / Tensor.softmax / log_softmax",
       statement="禁止调用**（评分器运行本题时一旦检测到，本题记 0 分，反馈里会写出调用名）：`torch.softmax`、`F.softmax`、"
                 "`Tensor.softmax`、`F.log_softmax`、`torch.log_softmax`")
def _softmax_forbidden(ctx: Context) -> Iterator[None]:
    # A call's value records forbidden calls and fails the check (and the exercise) on the first one.
    a, b = ctx.sizes(2)
    started = [ctx.start(ctx.randn(a, b), dim=dim) for dim in (-1, 0)]
    started.append(ctx.start(ctx.randn(b, a, dtype=torch.float32)))
    yield      # the next check begins here, while the worker runs these calls
    for pending in started:
        pending.value()


not_graded("2.2", r"\frac{e^{x_i - c}}{\sum_j e^{x_j - c}}",
           why="derives why subtracting a constant leaves the softmax unchanged; the stability it motivates is "
               "graded by large-inputs and edge-extremes")


# -- 2.3 attention_scores --------------------------------------------------------
def _scores_start(ctx: Context, batch: tuple[int, ...], dtype: torch.dtype, Tq: int, Tk: int, Dk: int,
                  scale: float = 1.0) -> tuple:
    """One case's inputs, drawn, and its call, begun (:func:`_scores_finish` compares it with the reference)."""
    Q, K = ctx.randn(*batch, Tq, Dk, dtype=dtype, scale=scale), ctx.randn(*batch, Tk, Dk, dtype=dtype, scale=scale)
    return (batch, dtype, Tq, Tk, Dk), (Q, K), ctx.start(Q, K)


def _scores_finish(ctx: Context, started: tuple) -> None:
    (batch, dtype, Tq, Tk, Dk), (Q, K), pending = started
    want = ctx.reference(Q, K)
    batch_zh, batch_en = batch_names(batch)
    _expect_like(ctx, batched_value(ctx, (Q, K), pending), want, dtype,
                 Msg(f"attention_scores(Q, K)（{batch_zh}，Tq={Tq}、Tk={Tk}、Dk={Dk}，{dtype}）",
                     f"attention_scores(Q, K) ({batch_en}, Tq={Tq}, Tk={Tk}, Dk={Dk}, {dtype})"))


@check("2.3", "reference-random", H, Kind.NUMERIC, zh="随机尺寸、批量维、dtype：与参考答案一致",
       en="random sizes, batch dims, dtypes: agrees with the reference", weight=2, statement=SCORES_2_3,
       same_as="batch-dims")
def _scores_reference(ctx: Context) -> Iterator[None]:
    started = []
    for batch, dtype in zip(BATCHES, (torch.float32, torch.float64, torch.float64)):
        Tq, Tk, Dk = sizes_apart(ctx, 3)
        started.append(_scores_start(ctx, batch, dtype, Tq, Tk, Dk))
    yield      # the next check begins here, while the worker runs these calls
    for case in started:
        _scores_finish(ctx, case)


@check("2.3", "edge-T1-large", H, Kind.EDGE, zh="Tq = 1、Dk = 1，以及 1e4 量级的输入",
       en="Tq = 1, Dk = 1, and inputs of order 1e4", statement=SCORES_2_3)
def _scores_edge(ctx: Context) -> Iterator[None]:
    Tq, Tk = sizes_apart(ctx, 2, 2, 9)
    started = [(("Dk = 1", "Dk = 1"), _scores_start(ctx, (), torch.float64, Tq, Tk, 1))]
    Tq, Tk, Dk = sizes_apart(ctx, 3)
    started.append((("上万的输入", "inputs in the tens of thousands"),
                    _scores_start(ctx, (2,), torch.float64, Tq, Tk, Dk, scale=1e4)))
    Tk, Dk = sizes_apart(ctx, 2, 3, 9)
    # Two batch dims: Q.shape[1] = 2 is then neither Tq = 1, Tk nor Dk.
    started.append((("一个查询（Tq = 1）", "one query (Tq = 1)"), _scores_start(ctx, (3, 2), torch.float32, 1, Tk, Dk)))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in started:
        with ctx.case(zh=zh, en=en):
            _scores_finish(ctx, case)


# -- 2.4 scaled_dot_product_attention ----------------------------------------------
def _sdpa_start(ctx: Context, batch: tuple[int, ...], dtype: torch.dtype, Tq: int, Tk: int, Dk: int, Dv: int,
                scale: float = 1.0) -> tuple:
    """One case's inputs, drawn, and its call, begun (:func:`_sdpa_finish` compares it with the reference)."""
    Q = ctx.randn(*batch, Tq, Dk, dtype=dtype, scale=scale)
    K = ctx.randn(*batch, Tk, Dk, dtype=dtype, scale=scale)
    V = ctx.randn(*batch, Tk, Dv, dtype=dtype)
    return (batch, dtype, Tq, Tk, Dk, Dv), (Q, K, V), ctx.start(Q, K, V)


def _sdpa_finish(ctx: Context, started: tuple) -> None:
    (batch, dtype, Tq, Tk, Dk, Dv), (Q, K, V), pending = started
    want_out, want_w = ctx.reference(Q, K, V)
    out, weights = ctx.expect_tuple(batched_value(ctx, (Q, K, V), pending), 2)
    batch_zh, batch_en = batch_names(batch)
    zh = f"{batch_zh}，Tq={Tq}、Tk={Tk}、Dk={Dk}、Dv={Dv}，{dtype}"
    en = f"{batch_en}, Tq={Tq}, Tk={Tk}, Dk={Dk}, Dv={Dv}, {dtype}"
    _expect_like(ctx, weights, want_w, dtype, Msg(f"weights（{zh}）", f"weights ({en})"))
    _expect_like(ctx, out, want_out, dtype, Msg(f"out（{zh}）", f"out ({en})"))


@check("2.4", "reference-random", H, Kind.NUMERIC, zh="随机输入与参考答案一致", en="agrees with the reference on random inputs",
       weight=3, same_as="matches-torch")
def _sdpa_reference(ctx: Context) -> Iterator[None]:
    started = []
    for batch in BATCHES:
        Tq, Tk, Dk, Dv = sizes_apart(ctx, 4)
        for dtype in (torch.float32, torch.float64):
            started.append(_sdpa_start(ctx, batch, dtype, Tq, Tk, Dk, Dv))
    yield      # the next check begins here, while the worker runs these calls
    for case in started:
        _sdpa_finish(ctx, case)


@check("2.4", "edge-one-query-one-key-large", H, Kind.EDGE,
       zh="Tq = 1、Tk = 1（权重为 1），以及 1e4 量级的分数（无 NaN）",
       en="Tq = 1, Tk = 1 (weight 1), and scores of order 1e4 (no NaN)", statement=STABLE_2_4,
       same_as="matches-torch")
def _sdpa_edge(ctx: Context) -> Iterator[None]:
    Tk, Dk, Dv = sizes_apart(ctx, 3)
    started = [(("一个查询（Tq = 1）", "one query (Tq = 1)"), _sdpa_start(ctx, (2,), torch.float32, 1, Tk, Dk, Dv))]
    Tq, Dk, Dv = sizes_apart(ctx, 3)
    # A batch dim: a softmax over the whole tensor is then not one over the queries (dim -2).
    started.append((("一个键（Tk = 1，权重为 1）", "one key (Tk = 1, weight 1)"),
                    _sdpa_start(ctx, (2,), torch.float64, Tq, 1, Dk, Dv)))
    Tq, Tk, Dk, Dv = sizes_apart(ctx, 4)
    # Q and K of order 100: each row of scores spreads over tens of thousands, of both signs.
    started.append((("上万的分数", "scores in the tens of thousands"),
                    _sdpa_start(ctx, (2,), torch.float64, Tq, Tk, Dk, Dv, scale=100.0)))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), case in started:
        with ctx.case(zh=zh, en=en):
            _sdpa_finish(ctx, case)


@check("2.4", "no-forbidden-calls", H, Kind.FORBIDDEN,
       zh="没有调用 F.scaled_dot_product_attention / nn.MultiheadAttention / F.multi_head_attention_forward",
       en="does not call F.scaled_dot_product_attention / nn.MultiheadAttention / F.multi_head_attention_forward",
       statement=("禁止调用**（评分器运行本题时一旦检测到，本题记 0 分）：`F.scaled_dot_product_attention`、"
                  "`nn.MultiheadAttention`、`F.multi_head_attention_forward`", "但你的实现里不能用它"))
def _sdpa_forbidden(ctx: Context) -> Iterator[None]:
    # A call's value records forbidden calls and fails the check (and the exercise) on the first one.
    started = []
    for batch in ((), (2,)):
        Tq, Tk, Dk, Dv = sizes_apart(ctx, 4)
        started.append(ctx.start(ctx.randn(*batch, Tq, Dk), ctx.randn(*batch, Tk, Dk), ctx.randn(*batch, Tk, Dv)))
    yield      # the next check begins here, while the worker runs these calls
    for pending in started:
        pending.value()


# -- 2.5 softmax_jacobian ------------------------------------------------------------
@check("2.5", "reference-random", H, Kind.NUMERIC, zh="随机尺寸、批量维、dtype，平的和尖的权重：与参考答案一致",
       en="random sizes, batch dims, dtypes, flat and peaked weights: agrees with the reference", weight=2,
       same_as="matches-autograd")
def _jacobian_reference(ctx: Context) -> Iterator[None]:
    started = []
    for batch, dtype, scale in zip(BATCHES, (torch.float32, torch.float64, torch.float32), (0.5, 3.0, 8.0)):
        N = ctx.sizes(1, 2, 12)[0]
        _, weights = softmax_rows(ctx, *batch, N, dtype=dtype, scale=scale)
        started.append((batch, dtype, weights, ctx.start(weights)))
    yield      # the next check begins here, while the worker runs these calls
    for batch, dtype, weights, pending in started:
        want = ctx.reference(weights)
        batch_zh, batch_en = batch_names(batch)
        N = weights.shape[-1]
        _expect_like(ctx, jacobian_value(ctx, weights, pending), want, dtype,
                     Msg(f"softmax_jacobian(weights)（{batch_zh}，N={N}，{dtype}）",
                         f"softmax_jacobian(weights) ({batch_en}, N={N}, {dtype})"))


@check("2.5", "edge-one-key-one-hot", H, Kind.EDGE, zh="N = 1（雅可比为 [[0.]]）与独热的权重（雅可比全为 0）",
       en="N = 1 (the Jacobian is [[0.]]) and one-hot weights (the Jacobian is all 0)", statement=EDGES_2_5)
def _jacobian_edge(ctx: Context) -> Iterator[None]:
    B, N = ctx.sizes(2, 2, 9)
    one_key = torch.ones(B, 1, dtype=torch.float32)
    hot = torch.zeros(B, N, dtype=torch.float64)
    hot[torch.arange(B), torch.randint(0, N, (B,), generator=ctx.generator)] = 1.0
    started = [(("一个键（N = 1）", "one key (N = 1)"), one_key, ctx.start(one_key)),
               (("独热的权重", "one-hot weights"), hot, ctx.start(hot))]
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), weights, pending in started:
        with ctx.case(zh=zh, en=en):
            want = ctx.reference(weights)
            _expect_like(ctx, jacobian_value(ctx, weights, pending), want, weights.dtype,
                         f"softmax_jacobian(weights {tuple(weights.shape)})")


# -- inputs left alone, gradients through (autograder.catalog.integrity) ---------------
INPUTS_ZH, INPUTS_EN = "不修改传入的张量（没有对输入做原地操作）", "leaves the tensors it is given unchanged (no in-place op on an input)"
GRAD_ZH, GRAD_EN = "梯度能传回每个输入，且与参考答案一致", "gradients reach every input and agree with the reference's"


@check("2.1", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_UNCHANGED)
def _project_inputs(ctx: Context) -> Iterator[None]:
    T, D, Dk, Dv = ctx.sizes(4, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(2, T, D), ctx.randn(D, Dk), ctx.randn(D, Dk), ctx.randn(D, Dv))


@check("2.1", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENTS_FLOW)
def _project_gradients(ctx: Context) -> Iterator[None]:
    T, D, Dk, Dv = ctx.sizes(4, low=2, high=6)
    yield from input_gradients(ctx, ("x", "W_q", "W_k", "W_v"), (0, 1, 2, 3), ctx.randn(2, T, D), ctx.randn(D, Dk),
                     ctx.randn(D, Dk), ctx.randn(D, Dv), outputs=("Q", "K", "V"))


@check("2.2", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_UNCHANGED)
def _softmax_inputs(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3, low=2, high=6)
    # the next check begins at together's yield, while the worker runs these calls
    yield from together(inputs_unchanged(ctx, ctx.randn(a, b, c, scale=4.0), dim=1),
                        inputs_unchanged(ctx, ctx.randn(b, a, dtype=torch.float32, scale=4.0)))


@check("2.2", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENTS_FLOW)
def _softmax_gradients(ctx: Context) -> Iterator[None]:
    a, b, c = ctx.sizes(3, low=2, high=6)
    yield from input_gradients(ctx, ("x",), (0,), ctx.randn(a, b, c, scale=2.0), dim=1)


@check("2.3", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_UNCHANGED)
def _scores_inputs(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk = ctx.sizes(3, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(2, Tq, Dk), ctx.randn(2, Tk, Dk))


@check("2.3", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENTS_FLOW)
def _scores_gradients(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk = ctx.sizes(3, low=2, high=6)
    yield from input_gradients(ctx, ("Q", "K"), (0, 1), ctx.randn(2, Tq, Dk), ctx.randn(2, Tk, Dk))


@check("2.4", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_UNCHANGED)
def _sdpa_inputs(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk, Dv = ctx.sizes(4, low=2, high=6)
    yield from inputs_unchanged(ctx, ctx.randn(2, Tq, Dk), ctx.randn(2, Tk, Dk), ctx.randn(2, Tk, Dv))


@check("2.4", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH + "（out 与 weights 两个输出）",
       en=GRAD_EN + " (through both outputs, out and weights)", statement=GRADIENTS_FLOW)
def _sdpa_gradients(ctx: Context) -> Iterator[None]:
    Tq, Tk, Dk, Dv = ctx.sizes(4, low=2, high=6)
    yield from input_gradients(ctx, ("Q", "K", "V"), (0, 1, 2), ctx.randn(2, Tq, Dk), ctx.randn(2, Tk, Dk),
                     ctx.randn(2, Tk, Dv), outputs=("out", "weights"))


@check("2.5", "inputs-unchanged", H, Kind.PROPERTY, zh=INPUTS_ZH, en=INPUTS_EN, needs_output=True,
       statement=INPUTS_UNCHANGED)
def _jacobian_inputs(ctx: Context) -> Iterator[None]:
    B, N = ctx.sizes(2, low=2, high=6)
    _, weights = softmax_rows(ctx, B, N, dtype=torch.float64)
    yield from inputs_unchanged(ctx, weights)


@check("2.5", "gradients", H, Kind.GRADIENT, zh=GRAD_ZH, en=GRAD_EN, statement=GRADIENTS_2_5)
def _jacobian_gradients(ctx: Context) -> Iterator[None]:
    B, N = ctx.sizes(2, low=2, high=6)
    _, weights = softmax_rows(ctx, B, N, dtype=torch.float64)
    # weights is a softmax's output: each row sums to 1, so no allowed input moves along the all-ones direction,
    # and an answer that divides by the row sum first (the same values on every such input) may differ there only.
    yield from input_gradients(ctx, ("weights",), (0,), weights, fixed={"weights": fixed_sum(-1)})


# -- near-answers: what `autograder build` refuses in the student bundle (autograder.catalog.NEAR_ANSWERS) --
# 2.3 attention_scores: the scaled product itself
near_answer("2.3", r"@[\w.()]*(transpose\(-2,-1\)|\.mT)\)?/(math|np|numpy|torch)\.sqrt\(")
# 2.4 scaled_dot_product_attention: a softmax of the scaled scores
near_answer("2.4", r"softmax\(.*@.*(transpose\(-2,-1\)|\.mT).*/")
# 2.5 softmax_jacobian: the diagonal matrix less the outer product
near_answer("2.5", r"diag_embed\(\w+\)-\w+\.unsqueeze\(-1\)\*\w+\.unsqueeze\(-2\)")
