"""Public checks of 05_transformer_block (shipped to students: no reference solution here).

The truth is torch's own code wherever torch has it: ``F.layer_norm``, two ``nn.Linear`` (the layout of
``nn.TransformerEncoderLayer``'s linear1/linear2), ``nn.TransformerEncoderLayer(..., dropout=0,
batch_first=True, norm_first=True)`` in training mode (so that no fast path is taken) for 5.4 and for each
block of 5.5, ``nn.MultiheadAttention`` with a causal ``attn_mask`` for 5.8, ``torch.multinomial`` with a
seeded ``torch.Generator`` for 5.7, ``F.cross_entropy`` for 5.6, tensors on the meta device for 5.9; the
sinusoidal table of 5.1 is built element by element from ``math.sin``/``math.cos``.

5.4 and 5.5 are classes, run through the engine's "module" probe as 4.4 is. 5.4 gets ``x`` as its first
positional argument, so the probe moves the block to x's dtype. 5.5's ``forward`` takes integer tokens,
which the probe cannot move a module to: they go as keyword arguments and the model stays in the dtype
``nn.Module`` builds it in (float32), which is how 5.5 is compared. Every sample has at least one real
token (torch's module gives NaN on a fully padded one, and the statement leaves that case out).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalog import Precision, precision, Audience, CheckFailed, all_close_normwise, Context, Kind, Msg, Pending, Value, check, exercise
from autograder.catalog.modules import torch_module
from ..multi_head_attention.checks import BYTES_DTYPE, MHA_FORBIDDEN, expect_close_normwise, expect_int, field, mha_state
from ..padding_masks.checks import DTYPES, LOSS_FORBIDDEN, expect_exact, key_lengths, mask_from_lengths

P = Audience.PUBLIC

#: 5.2 is layer normalization by hand: torch's own is the truth the checks compare with, never the answer.
LAYER_NORM_FORBIDDEN = ("F.layer_norm", "nn.LayerNorm")
exercise("5.2", forbidden=LAYER_NORM_FORBIDDEN)
exercise("5.4", forbidden=MHA_FORBIDDEN)
exercise("5.5", forbidden=MHA_FORBIDDEN)
exercise("5.6", forbidden=LOSS_FORBIDDEN)
exercise("5.8", forbidden=MHA_FORBIDDEN)

#: What the notebook's conventions say of precision (its introduction): a float32 scalar or table inside a float64
#: call is correct (autograder.catalog.Precision.ONE_FLOAT32).
PRECISION_RULE = "输入是 float64 时，结果要与参考答案在 float64 下一致，但允许一个 float32 的中间量带来的误差"
precision(("5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7", "5.8", "5.9"), Precision.ONE_FLOAT32, statement=PRECISION_RULE)

#: The statements' display formulas, as the checks that enforce them quote them (statement=).
PE_FORMULA = (r"PE[t, 2i] = \sin\!\left(\frac{t}{10000^{2i/D}}\right), \qquad "
              r"PE[t, 2i+1] = \cos\!\left(\frac{t}{10000^{2i/D}}\right)")
LN_FORMULA = (r"y = \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \cdot \gamma + \beta, \qquad "
              r"\mu = \frac1D\sum_j x_j, \quad \sigma^2 = \frac1D\sum_j (x_j - \mu)^2")
FFN_FORMULA = r"\mathrm{FFN}(x) = \mathrm{ReLU}(x W_1^\top + b_1)\, W_2^\top + b_2"
BLOCK_FORMULA = (r"x \leftarrow x + \mathrm{Attention}(\mathrm{LN}_1(x)), \qquad "
                 r"x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_2(x))")
KV_FORMULA = r"\text{bytes} = 2 \cdot L \cdot B \cdot H \cdot T \cdot d \cdot \text{每个元素的字节数}"

#: The parameters of nn.TransformerEncoderLayer(norm_first=True), the names 5.4 must use.
BLOCK_PARAMETERS = ("self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")


def causal(T: int) -> torch.Tensor:
    """bool (T, T), True where the key comes after the query (3.5's causal_mask)."""
    return torch.tensor([[j > i for j in range(T)] for i in range(T)], dtype=torch.bool)


# -- 5.1 positional_encoding ------------------------------------------------------------
def sinusoid_table(positions: torch.Tensor, D: int) -> torch.Tensor:
    """The statement's formula, one element at a time: column j uses 10000^(-2*floor(j/2)/D), sin at even j."""
    rows = []
    for p in positions.double().tolist():
        row = []
        for j in range(D):
            angle = p / 10000.0 ** (2 * (j // 2) / D)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), D)


@check("5.1", "shape-dtype", P, Kind.SHAPE, zh="返回 (T, D)，dtype 与 positions 相同",
       en="returns (T, D) in the dtype of positions",
       statement=("`positional_encoding(positions, D)`",
                  "返回 `(T, D)`，第 `k` 行是位置 `positions[k]` 的编码，dtype 和设备与 `positions` 相同"))
def _pe_shape(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2, low=3, high=12)
    started = [(dtype, ctx.start(torch.arange(T, dtype=dtype), D)) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (T, D), dtype, what=f"positional_encoding(arange({T}), {D})")


@check("5.1", "fact-position-zero", P, Kind.FACT, zh="位置 0：偶数列恰好是 0（正弦），奇数列恰好是 1（余弦）",
       en="position 0: even columns exactly 0 (sin 0), odd columns exactly 1 (cos 0)")
def _pe_zero(ctx: Context) -> Iterator[None]:
    pending = ctx.start(torch.zeros(1, dtype=torch.float64), 8)
    yield      # the next check begins here, while the worker runs this call
    got = ctx.expect_tensor(pending.value(), (1, 8), torch.float64,
                            what="positional_encoding(tensor([0.]), 8)")
    expect_exact(ctx, got, torch.tensor([[0.0, 1.0] * 4], dtype=torch.float64), "positional_encoding(tensor([0.]), 8)")


@check("5.1", "matches-formula", P, Kind.NUMERIC, zh="与公式逐个元素一致（D 为偶数和奇数）",
       en="agrees with the formula element by element (even and odd D)", weight=2,
       statement=(PE_FORMULA, "`D` 为奇数时公式不变"))
def _pe_formula(ctx: Context) -> Iterator[None]:
    T = int(ctx.randint(5, 40, 1))
    started = [(D, dtype, positions, ctx.start(positions, D))
               for D in (16, 7) for dtype in DTYPES for positions in [torch.arange(T, dtype=dtype)]]
    yield      # the next check begins here, while the worker runs these calls
    for D, dtype, positions, pending in started:
        with ctx.case(zh=f"D = {D}（{str(dtype)[6:]}）", en=f"D = {D} ({str(dtype)[6:]})"):
            got = ctx.expect_tensor(pending.value(), (T, D), dtype, what=f"positional_encoding(arange(T), {D})")
            ctx.expect_close(got, sinusoid_table(positions, D), dtype, what=f"positional_encoding(arange(T), {D})")


# -- 5.2 layer_norm ----------------------------------------------------------------------
def torch_layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                     eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def norm_parameters(ctx: Context, D: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return (1.0 + ctx.randn(D, dtype=torch.float64, scale=0.3)).to(dtype), ctx.randn(D, dtype=dtype, scale=0.3)


@check("5.2", "shape-dtype", P, Kind.SHAPE, zh="形状和 dtype 与输入相同（含批量维）",
       en="the input's shape and dtype (batch dims included)",
       statement="沿最后一维规范化，返回同样形状、同样 dtype")
def _ln_shape(ctx: Context) -> Iterator[None]:
    B, T, D = ctx.sizes(3)
    started = [(dtype, ctx.start(ctx.randn(B, T, D, dtype=dtype))) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (B, T, D), dtype, what="layer_norm(x)")


@check("5.2", "matches-torch", P, Kind.NUMERIC, zh="与 F.layer_norm 一致（带和不带 weight、bias，eps 另给时也一样）",
       en="agrees with F.layer_norm (with and without weight and bias, and with another eps)", weight=2,
       statement=("`layer_norm(x, weight=None, bias=None, eps=1e-5)`", LN_FORMULA,
                  "`weight`、`bias`：`(D,)` 或 `None`（`None` 即不缩放、不平移）",
                  "与 `F.layer_norm(x, x.shape[-1:], weight, bias, eps)` 一致"))
def _ln_torch(ctx: Context) -> Iterator[None]:
    B, T, D = ctx.sizes(3)
    started = []
    for dtype in DTYPES:
        x = ctx.randn(B, T, D, dtype=dtype, scale=2.0)
        weight, bias = norm_parameters(ctx, D, dtype)
        started.append((dtype, x, weight, bias, ctx.start(x), ctx.start(x, weight, bias)))
    x_eps = ctx.randn(T, D, scale=0.01)
    eps_pending = ctx.start(x_eps, eps=0.1)
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, weight, bias, pending, affine in started:
        with ctx.case(zh=f"不带 weight、bias（{str(dtype)[6:]}）", en=f"no weight, no bias ({str(dtype)[6:]})"):
            want = ctx.truth(torch_layer_norm, x)
            got = ctx.expect_tensor(pending.value(), (B, T, D), dtype, what="layer_norm(x)")
            # normwise: float32's rounding of the mean at 1e4 moves every output by the same absolute amount
            expect_close_normwise(ctx, got, want, dtype, what="layer_norm(x)")
        with ctx.case(zh=f"带 weight、bias（{str(dtype)[6:]}）", en=f"with weight and bias ({str(dtype)[6:]})"):
            want = ctx.truth(torch_layer_norm, x, weight, bias)
            got = ctx.expect_tensor(affine.value(), (B, T, D), dtype, what="layer_norm(x, weight, bias)")
            ctx.expect_close(got, want, dtype, what="layer_norm(x, weight, bias)")
    with ctx.case(zh="eps=0.1，方差比 eps 小", en="eps=0.1, a variance below eps"):
        want = ctx.truth(torch_layer_norm, x_eps, eps=0.1)
        got = ctx.expect_tensor(eps_pending.value(), (T, D), torch.float64, what="layer_norm(x, eps=0.1)")
        ctx.expect_close(got, want, torch.float64, what="layer_norm(x, eps=0.1)")


@check("5.2", "large-offset", P, Kind.NUMERIC, zh="输入在 1e4 附近、彼此只差几个单位（float32 也一样）：没有 NaN，与 F.layer_norm 一致",
       en="inputs near 1e4 a few units apart (float32 too): no NaN, agrees with F.layer_norm",
       statement="输入在 $10^4$ 附近、彼此只差几个单位时（float32 也一样）仍然一致，不出现 NaN")
def _ln_offset(ctx: Context) -> Iterator[None]:
    T, D = ctx.sizes(2, low=8, high=40)
    started = []
    for dtype in (torch.float32, torch.float64):
        x = (1e4 + ctx.randn(T, D, scale=3.0)).to(dtype)
        started.append((dtype, x, ctx.start(x)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, pending in started:
        with ctx.case(zh=f"1e4 附近（{str(dtype)[6:]}）", en=f"near 1e4 ({str(dtype)[6:]})"):
            want = ctx.truth(torch_layer_norm, x)
            got = ctx.expect_tensor(pending.value(), (T, D), dtype, what="layer_norm(x)")
            ctx.expect(bool(torch.isfinite(got).all()),
                       "输入在 1e4 附近时输出里有 NaN 或 inf：方差用 E[x²] - E[x]² 算，float32 里会减出 0 甚至负数；"
                       "先减均值，再平方求平均",
                       "NaN or inf in the output for inputs near 1e4: a variance computed as E[x^2] - E[x]^2 comes out "
                       "0 or negative in float32; subtract the mean first, then average the squares",
                       diagnose=True, safe=True)
            # normwise: float32's rounding of the mean at 1e4 moves every output by the same absolute amount
            expect_close_normwise(ctx, got, want, dtype, what="layer_norm(x)")


# -- 5.3 feed_forward ---------------------------------------------------------------------
def ffn_weights(ctx: Context, D: int, Fw: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """W1 (F, D), b1 (F,), W2 (D, F), b2 (D,): nn.Linear's layout."""
    return (ctx.randn(Fw, D, dtype=dtype, scale=1 / math.sqrt(D)), ctx.randn(Fw, dtype=dtype, scale=0.5),
            ctx.randn(D, Fw, dtype=dtype, scale=1 / math.sqrt(Fw)), ctx.randn(D, dtype=dtype, scale=0.5))


def torch_ffn(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """linear2(relu(linear1(x))) with torch's own nn.Linear modules holding the given weights."""
    linear1 = torch_module(("linear1", W1.shape, x.dtype), lambda: nn.Linear(W1.shape[1], W1.shape[0], dtype=x.dtype))
    linear2 = torch_module(("linear2", W2.shape, x.dtype), lambda: nn.Linear(W2.shape[1], W2.shape[0], dtype=x.dtype))
    with torch.no_grad():       # every parameter set below
        linear1.weight.copy_(W1)
        linear1.bias.copy_(b1)
        linear2.weight.copy_(W2)
        linear2.bias.copy_(b2)
        return linear2(torch.relu(linear1(x)))


@check("5.3", "shape-dtype", P, Kind.SHAPE, zh="(..., T, D) → (..., T, D)，dtype 不变", en="(..., T, D) -> (..., T, D), dtype kept",
       statement="`x`：`(..., T, D)`；`W1`：`(F, D)`，`b1`：`(F,)`；`W2`：`(D, F)`，`b2`：`(D,)`；返回 `(..., T, D)`，dtype 不变")
def _ffn_shape(ctx: Context) -> Iterator[None]:
    B, T, D, Fw = ctx.sizes(4)
    started = []
    for dtype in DTYPES:
        x = ctx.randn(B, T, D, dtype=dtype)
        started.append((dtype, ctx.start(x, *ffn_weights(ctx, D, Fw, dtype))))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (B, T, D), dtype, what="feed_forward")


@check("5.3", "matches-torch", P, Kind.NUMERIC, zh="与装上同样权重的 linear2(relu(linear1(x))) 一致",
       en="agrees with linear2(relu(linear1(x))) holding the same weights", weight=2,
       statement=("`feed_forward(x, W1, b1, W2, b2)`", FFN_FORMULA,
                  "与 `linear2(relu(linear1(x)))` 一致（`linear1 = nn.Linear(D, F)`、`linear2 = nn.Linear(F, D)`，装上同样的权重）"))
def _ffn_torch(ctx: Context) -> Iterator[None]:
    B, T, D, Fw = ctx.sizes(4)
    started = []
    for dtype in DTYPES:
        x = ctx.randn(B, T, D, dtype=dtype)
        weights = ffn_weights(ctx, D, Fw, dtype)
        started.append((dtype, x, weights, ctx.start(x, *weights)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, x, weights, pending in started:
        want = ctx.truth(torch_ffn, x, *weights)
        got = ctx.expect_tensor(pending.value(), (B, T, D), dtype, what="feed_forward")
        ctx.expect_close(got, want, dtype, what="feed_forward")


# -- 5.4 TransformerBlock ---------------------------------------------------------------
def block_state(ctx: Context, D: int, Fw: int, dtype: torch.dtype, prefix: str = "") -> dict[str, torch.Tensor]:
    """Random weights under nn.TransformerEncoderLayer's names (norms near 1, so that they matter)."""
    state = {prefix + "self_attn." + k: v for k, v in mha_state(ctx, D, dtype).items()}
    W1, b1, W2, b2 = ffn_weights(ctx, D, Fw, dtype)
    state.update({prefix + "linear1.weight": W1, prefix + "linear1.bias": b1, prefix + "linear2.weight": W2,
                  prefix + "linear2.bias": b2})
    for n in ("norm1", "norm2"):
        weight, bias = norm_parameters(ctx, D, dtype)
        state[prefix + n + ".weight"], state[prefix + n + ".bias"] = weight, bias
    return state


def torch_layer(D: int, H: int, Fw: int, state: dict[str, torch.Tensor], slot: int = 0) -> nn.TransformerEncoderLayer:
    """torch's pre-norm layer in float64, training mode (dropout 0: no randomness, and no fast path); ``slot``:
    which of the layers used at once (a stack of them) this one is."""
    layer = torch_module(("encoder-layer", D, H, Fw, slot), lambda: nn.TransformerEncoderLayer(
        D, H, Fw, dropout=0.0, batch_first=True, norm_first=True, dtype=torch.float64))
    layer.load_state_dict({k: v.double() for k, v in state.items()}, strict=True)     # every parameter set
    return layer.train()


def torch_block_probe(D: int, H: int, Fw: int, state: dict[str, torch.Tensor], x: torch.Tensor,
                      mask: torch.Tensor | None, attn_mask: torch.Tensor | None, grad_out: torch.Tensor) -> dict[str, Any]:
    """What the "module" probe returns for 5.4, computed by torch's own layer in float64."""
    layer = torch_layer(D, H, Fw, state)
    leaf = x.double().clone().requires_grad_(True)
    out = layer(leaf, src_mask=attn_mask, src_key_padding_mask=mask)
    (out * grad_out.double()).sum().backward()
    return {"out": out.detach(), "grads": {n: p.grad for n, p in layer.named_parameters()}, "grad_x": leaf.grad}


def block_case(ctx: Context, dtype: torch.dtype, *, padding: bool = True, causal_mask: bool = True,
               sizes: tuple[int, int, int, int] | None = None) -> tuple[Any, ...]:
    """(D, H, F, state, x, key_padding_mask, attn_mask, grad_out): every sample has a real token."""
    B, T, H, d = sizes or ctx.sizes(4, low=2, high=6)
    D = H * d
    Fw = int(ctx.randint(D, 2 * D + 1, 1))
    state = block_state(ctx, D, Fw, dtype)
    x = ctx.randn(B, T, D, dtype=dtype)
    mask = mask_from_lengths(key_lengths(ctx, B, T), T) if padding else None
    am = causal(T) if causal_mask else None
    return D, H, Fw, state, x, mask, am, ctx.randn(B, T, D, dtype=dtype)


def block_request(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The "module" probe's arguments: build (D, H, F), load the state, forward x with both masks,
    backpropagate grad_out, the gradient of x asked for."""
    D, H, Fw, state, x, mask, am, grad_out = args
    return ((D, H, Fw), {}, state, (x,), {"key_padding_mask": mask, "attn_mask": am}, (grad_out,), (0,))


def module_names(ctx: Context, value: Value, state: dict[str, torch.Tensor], names: tuple[str, str]) -> None:
    """The probe's missing/unexpected names: each a diagnosed failure, as 4.4's. ``names``: whose names (zh, en)."""
    torch_zh, torch_en = names
    missing = field(value, "missing").to_python()
    if missing:
        known = ", ".join(n for n in state if n in str(missing).split(",")) or "?"
        raise CheckFailed(Msg(f"找不到按 {torch_zh} 命名的参数：{missing}；名字对不上，"
                              f"load_state_dict(..., strict=True) 就装不上 torch 的权重",
                              f"no parameter named as {torch_en}'s: {missing}; with other names "
                              f"load_state_dict(..., strict=True) cannot load torch's weights"),
                          hidden=Msg(f"找不到按 {torch_zh} 命名的参数：{known}", f"no parameter named as {torch_en}'s: {known}"),
                          diagnose=True)
    extra = field(value, "unexpected").to_python()
    if extra:
        count = len(str(extra).split(","))
        raise CheckFailed(Msg(f"模块多出了 {torch_zh} 没有的参数或持久的缓冲区：{extra}；"
                              f"load_state_dict(..., strict=True) 会失败",
                              f"the module holds parameters or persistent buffers {torch_en} does not: {extra}; "
                              f"load_state_dict(..., strict=True) would fail"),
                          hidden=Msg(f"模块多出了 {count} 个 {torch_zh} 没有的参数或持久的缓冲区",
                                     f"the module holds {count} parameters or persistent buffers {torch_en} does not"),
                          diagnose=True)


def expect_probe(ctx: Context, value: Value, state: dict[str, torch.Tensor], out_shape: tuple[int, ...],
                 dtype: torch.dtype, names: tuple[str, str], *, input_grad: tuple[int, ...] | None) -> dict[str, Any]:
    """Names, shapes and dtypes of a "module" probe's result; its tensors (None for a missing gradient)."""
    module_names(ctx, value, state, names)
    out = ctx.expect_tensor(field(value, "out"), out_shape, dtype, what="forward")
    grads_value = field(value, "grads")
    grads: dict[str, torch.Tensor | None] = {}
    for name in state:
        g = Value(grads_value.spec["items"][name], grads_value.arrays)
        grads[name] = None if g.kind == "none" else ctx.expect_tensor(g, tuple(state[name].shape), dtype,
                                                                      what=f"{name}.grad")
    grad_x = None
    if input_grad is not None:
        gx = ctx.expect_tuple(field(value, "input_grads"), 1)[0]
        grad_x = None if gx.kind == "none" else ctx.expect_tensor(gx, input_grad, dtype, what="x.grad")
    return {"out": out, "grads": grads, "grad_x": grad_x}


def expect_probe_gradients(ctx: Context, got: dict[str, Any], want: dict[str, Any], dtype: torch.dtype) -> None:
    pairs = list(got["grads"].items()) + ([("x", got["grad_x"])] if "grad_x" in want else [])
    for name, g in pairs:
        ctx.expect(g is not None, f"没有梯度传到 {name}：是不是用了 .detach()/.data，或者它没有参与计算？",
                   f"no gradient reached {name}: was it detached (.detach()/.data), or left out of the computation?",
                   diagnose=True, safe=True)
    # Normwise: a gradient is a sum over every position, head and block, so each element carries rounding of
    # the order of the largest term (float32 through two blocks: 1e-5 on elements of 0.05), whatever its own size.
    # Every gradient at once first (the same test, element by element); one by one only to say which differs.
    rtol, atol = ctx.tol(dtype)
    if all_close_normwise([(g, want["grads"][name]) for name, g in got["grads"].items()] +
                          ([(got["grad_x"], want["grad_x"])] if "grad_x" in want else []), rtol, atol):
        return
    for name, g in got["grads"].items():
        expect_close_normwise(ctx, g, want["grads"][name], dtype, what=f"{name}.grad")
    if "grad_x" in want:
        expect_close_normwise(ctx, got["grad_x"], want["grad_x"], dtype, what="x.grad")


TORCH_LAYER = ("nn.TransformerEncoderLayer", "nn.TransformerEncoderLayer")


def start_block(ctx: Context, args: tuple[Any, ...]) -> Pending:
    """The "module" probe on :func:`block_case`'s ``args``, begun (see Context.start): hand it to
    :func:`call_block` once the expected value is computed."""
    return ctx.start(*block_request(args), probe="module")


def call_block(ctx: Context, args: tuple[Any, ...], pending: Pending | None = None) -> dict[str, Any]:
    D, H, Fw, state, x, mask, am, grad_out = args
    value = (pending or start_block(ctx, args)).value()
    return expect_probe(ctx, value, state, tuple(x.shape), x.dtype, TORCH_LAYER, input_grad=tuple(x.shape))


@check("5.4", "torch-names-shapes", P, Kind.SHAPE, zh="nn.TransformerEncoderLayer 的参数名都能加载；输出与梯度的形状和 dtype",
       en="nn.TransformerEncoderLayer's parameter names load; shapes and dtype of the output and the gradients",
       statement=("`TransformerBlock(nn.Module)`",
                  "`__init__(d_model, num_heads, d_ff)`；参数名与上表相同，不多也不少（`strict=True` 能加载）",
                  "`forward(x, key_padding_mask=None, attn_mask=None)`：`x` `(B, T, D)`；`key_padding_mask` `(B, T)` bool，"
                  "`True` = 填充；`attn_mask` `(T, T)` bool，`True` = 不许看；返回 `(B, T, D)`"))
def _block_shape(ctx: Context) -> Iterator[None]:
    started = [(args, start_block(ctx, args)) for args in [block_case(ctx, dtype) for dtype in DTYPES]]
    yield      # the next check begins here, while the worker runs these calls
    for args, pending in started:       # both in flight before either is read (see Context.start)
        call_block(ctx, args, pending)


#: ctx.case's names of the three mask settings.
MASK_CASES = {(True, False): ("只带填充掩码", "a padding mask only"), (False, True): ("只带因果掩码", "a causal mask only"),
              (True, True): ("填充掩码和因果掩码都带", "both a padding and a causal mask")}


@check("5.4", "matches-torch", P, Kind.NUMERIC, zh="装上同样的权重后，输出与 nn.TransformerEncoderLayer(norm_first=True) 一致（三种掩码）",
       en="loaded with the same weights, the output agrees with nn.TransformerEncoderLayer(norm_first=True) (three "
          "mask settings)", weight=2,
       statement=(BLOCK_FORMULA, "只带填充掩码、只带因果掩码、两个都带，都一样"))
def _block_torch(ctx: Context) -> Iterator[None]:
    # one dtype per mask setting (the self-check data stores what each known mistake returns on every call)
    started = []        # every case in flight before the first is compared (see Context.start)
    for ((padding, causal_mask), names), dtype in zip(MASK_CASES.items(), (torch.float64, torch.float32, torch.float64)):
        args = block_case(ctx, dtype, padding=padding, causal_mask=causal_mask)
        started.append((names, dtype, args, start_block(ctx, args)))
    yield      # the next check begins here, while the worker runs these calls
    for (zh, en), dtype, args, pending in started:
        with ctx.case(zh=f"{zh}（{str(dtype)[6:]}）", en=f"{en} ({str(dtype)[6:]})"):
            want = ctx.expected(torch_block_probe, *args)
            got = call_block(ctx, args, pending)
            expect_close_normwise(ctx, got["out"], want["out"], dtype, what="TransformerBlock(...)(x)")


@check("5.4", "gradients-match-torch", P, Kind.GRADIENT, zh="每个参数和 x 的梯度与 nn.TransformerEncoderLayer 一致",
       en="the gradients of every parameter and of x agree with nn.TransformerEncoderLayer", weight=2,
       statement="装上同样的权重后，输出和梯度（对每个参数、对 `x`）都与 `nn.TransformerEncoderLayer(..., dropout=0, batch_first=True, norm_first=True)` 一致")
def _block_grads(ctx: Context) -> Iterator[None]:
    args = block_case(ctx, torch.float64)
    pending = start_block(ctx, args)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_block_probe, *args)
    expect_probe_gradients(ctx, call_block(ctx, args, pending), want, torch.float64)


# -- 5.5 TinyLM ---------------------------------------------------------------------------
def lm_state(ctx: Context, V: int, D: int, Fw: int, L: int, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    state = {"token_embedding.weight": ctx.randn(V, D, dtype=dtype)}
    for i in range(L):
        state.update(block_state(ctx, D, Fw, dtype, prefix=f"blocks.{i}."))
    state["norm.weight"], state["norm.bias"] = norm_parameters(ctx, D, dtype)
    return state


def lm_case(ctx: Context, *, padding: bool = True, sizes: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """(V, D, H, F, L, state, tokens, key_padding_mask, grad_out): float32, every sample with a real token."""
    B, T, V, H, d, L = sizes or (*ctx.sizes(3, low=2, high=7), *ctx.sizes(2, low=2, high=4), 1)
    D = H * d
    Fw = int(ctx.randint(D, 2 * D + 1, 1))
    state = lm_state(ctx, V, D, Fw, L)
    tokens = ctx.randint(0, V, B, T)
    mask = mask_from_lengths(key_lengths(ctx, B, T), T) if padding else None
    return V, D, H, Fw, L, state, tokens, mask, ctx.randn(B, T, V, dtype=torch.float32)


def lm_request(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Build (V, D, H, F, L), load the state, forward(tokens=..., key_padding_mask=...) as keywords (the
    probe moves the module to the tokens' device and the state's dtype), backpropagate grad_out."""
    V, D, H, Fw, L, state, tokens, mask, grad_out = args
    return ((V, D, H, Fw, L), {}, state, (), {"tokens": tokens, "key_padding_mask": mask}, (grad_out,), ())


def torch_lm_probe(V: int, D: int, H: int, Fw: int, L: int, state: dict[str, torch.Tensor], tokens: torch.Tensor,
                   mask: torch.Tensor | None, grad_out: torch.Tensor) -> dict[str, Any]:
    """The statement's five steps with torch's modules in float64: logits and every parameter's gradient."""
    T = tokens.shape[1]
    embedding = state["token_embedding.weight"].double().clone().requires_grad_(True)
    layers = [torch_layer(D, H, Fw, {k[len(f"blocks.{i}."):]: v for k, v in state.items() if k.startswith(f"blocks.{i}.")},
                          slot=i) for i in range(L)]
    norm_w = state["norm.weight"].double().clone().requires_grad_(True)
    norm_b = state["norm.bias"].double().clone().requires_grad_(True)
    x = F.embedding(tokens, embedding) + sinusoid_table(torch.arange(T), D)
    for layer in layers:
        x = layer(x, src_mask=causal(T), src_key_padding_mask=mask)
    logits = F.layer_norm(x, (D,), norm_w, norm_b) @ embedding.T
    (logits * grad_out.double()).sum().backward()
    grads = {"token_embedding.weight": embedding.grad, "norm.weight": norm_w.grad, "norm.bias": norm_b.grad}
    for i, layer in enumerate(layers):
        grads.update({f"blocks.{i}.{n}": p.grad for n, p in layer.named_parameters()})
    return {"out": logits.detach(), "grads": grads}


TORCH_LM = Msg("按说明用 torch 的模块搭出来的模型", "the model built from torch's modules as stated")


def start_lm(ctx: Context, args: tuple[Any, ...]) -> Pending:
    """The "module" probe on :func:`lm_case`'s ``args``, begun (see Context.start): hand it to :func:`call_lm`
    once the expected value is computed."""
    return ctx.start(*lm_request(args), probe="module")


def call_lm(ctx: Context, args: tuple[Any, ...], pending: Pending | None = None) -> dict[str, Any]:
    V, D, H, Fw, L, state, tokens, mask, grad_out = args
    value = (pending or start_lm(ctx, args)).value()
    return expect_probe(ctx, value, state, (*tokens.shape, V), torch.float32, ("本题说明", "the statement"), input_grad=None)


@check("5.5", "names-shapes", P, Kind.SHAPE, zh="参数名都能加载（没有多余的）；logits (B, T, V) 与梯度的形状和 dtype",
       en="the parameter names load (none extra); shapes and dtype of logits (B, T, V) and of the gradients",
       statement=("`TinyLM(nn.Module)`",
                  "`__init__(vocab_size, d_model, num_heads, d_ff, num_layers)`；参数只有 `token_embedding.weight`",
                  "位置编码不是参数",
                  "`tokens` `(B, T)` int64，`key_padding_mask` `(B, T)` bool 或 `None`；返回 `logits` `(B, T, V)`"))
def _lm_shape(ctx: Context) -> Iterator[None]:
    args = lm_case(ctx)
    pending = start_lm(ctx, args)
    yield      # the next check begins here, while the worker runs this call
    call_lm(ctx, args, pending)


@check("5.5", "matches-torch", P, Kind.NUMERIC, zh="logits 与用 torch 的模块按五步搭出来的模型一致（带填充掩码和不带）",
       en="logits agree with the model built from torch's modules in the five steps (with and without padding)",
       weight=2,
       statement="装上同样的权重后，`logits` 和每个参数的梯度与用 torch 的模块")
def _lm_torch(ctx: Context) -> Iterator[None]:
    started = [(padding, args, start_lm(ctx, args)) for padding, args in
               [(padding, lm_case(ctx, padding=padding)) for padding in (False, True)]]
    yield      # the next check begins here, while the worker runs these calls
    for padding, args, pending in started:
        with ctx.case(zh="带填充掩码" if padding else "不带填充掩码", en="with padding" if padding else "no padding"):
            want = ctx.expected(torch_lm_probe, *args)
            got = call_lm(ctx, args, pending)
            expect_close_normwise(ctx, got["out"], want["out"], torch.float32, what="logits")


@check("5.5", "gradients-match-torch", P, Kind.GRADIENT, zh="每个参数的梯度与 torch 搭出来的模型一致",
       en="every parameter's gradient agrees with the model built from torch's modules",
       statement="`logits` 和每个参数的梯度与用 torch 的模块（`nn.Embedding`、`nn.TransformerEncoderLayer(..., norm_first=True)`、`F.layer_norm`）按上面五步搭出来的模型一致")
def _lm_grads(ctx: Context) -> Iterator[None]:
    args = lm_case(ctx)
    pending = start_lm(ctx, args)
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_lm_probe, *args)
    expect_probe_gradients(ctx, call_lm(ctx, args, pending), want, torch.float32)


# -- 5.6 lm_loss -------------------------------------------------------------------------------
def torch_lm_loss(logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """F.cross_entropy over the shifted targets, padded targets ignored."""
    V = logits.shape[-1]
    targets = tokens[:, 1:].clone()
    if mask is not None:
        targets[mask[:, 1:]] = -100
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def loss_case(ctx: Context, dtype: torch.dtype, *, padding: bool = True) -> tuple[torch.Tensor, ...]:
    B, T, V = ctx.sizes(3, low=3, high=9)
    logits = ctx.randn(B, T, V, dtype=dtype, scale=2.0)
    tokens = ctx.randint(0, V, B, T)
    lengths = key_lengths(ctx, B, T)
    lengths[0] = T                      # at least one target counts
    return logits, tokens, (mask_from_lengths(lengths, T) if padding else None)


@check("5.6", "scalar", P, Kind.SHAPE, zh="返回 0 维张量，dtype 与 logits 相同", en="returns a 0-d tensor in the dtype of logits",
       statement="返回 0 维张量")
def _loss_shape(ctx: Context) -> Iterator[None]:
    started = [(dtype, ctx.start(*loss_case(ctx, dtype))) for dtype in DTYPES]
    yield      # the next check begins here, while the worker runs these calls
    for dtype, pending in started:
        ctx.expect_tensor(pending.value(), (), dtype, what="lm_loss")


@check("5.6", "matches-torch", P, Kind.NUMERIC, zh="与错开一位、填充目标换成 -100 之后的 F.cross_entropy 一致",
       en="agrees with F.cross_entropy on targets shifted by one, padded ones set to -100", weight=2,
       statement=("`logits`：`(B, T, V)`；`tokens`：`(B, T)` int64；`key_padding_mask`：`(B, T)` bool 或 `None`",
                  "所有**目标不是填充**的位置上交叉熵的平均（每个词元一样重，不是先对每个样本求平均）",
                  "等于 `F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)`"))
def _loss_torch(ctx: Context) -> Iterator[None]:
    started = [(padding, dtype, args, ctx.start(*args)) for padding in (True, False) for dtype in DTYPES
               for args in [loss_case(ctx, dtype, padding=padding)]]
    yield      # the next check begins here, while the worker runs these calls
    for padding, dtype, (logits, tokens, mask), pending in started:
        with ctx.case(zh=f"{'带' if padding else '不带'}填充掩码（{str(dtype)[6:]}）",
                      en=f"{'with' if padding else 'without'} padding ({str(dtype)[6:]})"):
            want = ctx.truth(torch_lm_loss, logits, tokens, mask)
            got = ctx.expect_tensor(pending.value(), (), dtype, what="lm_loss")
            ctx.expect_close(got, want, dtype, what="lm_loss")


# -- 5.7 sample_next_token ------------------------------------------------------------------
def torch_sample(logits: torch.Tensor, temperature: float, seed: int | None) -> torch.Tensor:
    """The statement's draw: torch.multinomial of softmax(logits / temperature) with a generator seeded ``seed``."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed)).squeeze(-1)


def expect_tokens(ctx: Context, value: Value, B: int, what: str) -> torch.Tensor:
    return ctx.expect_tensor(value, (B,), torch.int64, what=what)


@check("5.7", "shape-dtype", P, Kind.SHAPE, zh="贪心和采样都返回 (B,) int64", en="greedy and sampling both return (B,) int64",
       statement=("`sample_next_token(logits, temperature=0.0, seed=None)`", "`logits`：`(B, V)`；返回 `(B,)` int64，每行一个词元编号"))
def _sample_shape(ctx: Context) -> Iterator[None]:
    B, V = ctx.sizes(2, low=3, high=12)
    logits = ctx.randn(B, V, dtype=torch.float32)
    pending = ctx.start(logits)
    yield      # the next check begins here, while the worker runs this call
    expect_tokens(ctx, pending.value(), B, "sample_next_token(logits)")
    expect_tokens(ctx, ctx.call(logits, 1.0, seed=0), B, "sample_next_token(logits, 1.0, seed=0)")
    # without a seed: the global random numbers, on rows whose softmax is one-hot (every other logit 1e4 lower,
    # exp underflows to 0), so that any generator draws the row's top token
    top = ctx.randint(0, V, B)
    one_hot = torch.full((B, V), -1e4).scatter(1, top[:, None], 0.0)
    drawn = expect_tokens(ctx, ctx.call(one_hot, 1.0), B, "sample_next_token(logits, 1.0)")
    expect_exact(ctx, drawn, top, Msg("sample_next_token(logits, 1.0)（softmax 只有一个非零的概率）",
                                      "sample_next_token(logits, 1.0) (a one-hot softmax)"))


@check("5.7", "greedy", P, Kind.NUMERIC, zh="temperature = 0（默认值）：恰好是 logits.argmax(dim=-1)，并列时取编号最小的",
       en="temperature = 0 (the default): exactly logits.argmax(dim=-1), a tie going to the lowest index",
       statement=("`sample_next_token(logits, temperature=0.0, seed=None)`",
                  "`temperature == 0`：返回 `logits.argmax(dim=-1)`（并列时取编号最小的那个，与 `argmax` 相同）"))
def _sample_greedy(ctx: Context) -> Iterator[None]:
    B, V = ctx.sizes(2, low=3, high=12)
    started = []
    for dtype in DTYPES:
        logits = ctx.randn(B, V, dtype=dtype)
        started.append((logits, ctx.start(logits, 0.0), ctx.start(logits)))
    # Ties: each row's top value twice (at two random places), the statement's rule is argmax's, the lower index.
    tied = ctx.randn(B, V, dtype=torch.float32)
    places = torch.stack([torch.randperm(V, generator=ctx.generator)[:2] for _ in range(B)])       # (B, 2)
    tied.scatter_(1, places, tied.abs().amax(dim=-1, keepdim=True).expand(B, 2) + 1.0)
    tied_pending = ctx.start(tied, 0.0)
    yield      # the next check begins here, while the worker runs these calls
    for logits, pending, default in started:
        got = expect_tokens(ctx, pending.value(), B, "sample_next_token(logits, 0.0)")
        expect_exact(ctx, got, logits.argmax(dim=-1), "sample_next_token(logits, 0.0)")
        # temperature's default is 0: greedy
        got = expect_tokens(ctx, default.value(), B, "sample_next_token(logits)")
        expect_exact(ctx, got, logits.argmax(dim=-1), "sample_next_token(logits)")
    got = expect_tokens(ctx, tied_pending.value(), B, "sample_next_token(logits, 0.0)")
    expect_exact(ctx, got, places.amin(dim=-1), Msg("sample_next_token(logits, 0.0)（每行最大值出现两次：取编号小的）",
                                                    "sample_next_token(logits, 0.0) (each row's top value twice: "
                                                    "the lower index)"))


@check("5.7", "same-draws-as-multinomial", P, Kind.NUMERIC,
       zh="temperature > 0、给了 seed：与同一个种子下 torch.multinomial(softmax(logits / temperature)) 抽到的完全相同",
       en="temperature > 0 with a seed: exactly what torch.multinomial(softmax(logits / temperature)) draws with a "
          "generator of that seed", weight=2,
       statement="`temperature > 0`：返回 `torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=g).squeeze(-1)`")
def _sample_multinomial(ctx: Context) -> None:
    V = int(ctx.randint(4, 9, 1))
    for temperature in (0.5, 2.0):
        for dtype in DTYPES:
            seed = int(ctx.randint(0, 10_000, 1))
            logits = ctx.randn(300, V, dtype=dtype, scale=2.0)
            what = f"sample_next_token(logits, {temperature}, seed={seed})"
            # On the CPU whatever the device under test: the statement's generator lives on logits' device, and
            # only a CPU generator's draws are known here (a GPU's draws other numbers from the same seed).
            with ctx.on_device("cpu"):
                got = expect_tokens(ctx, ctx.call(logits, temperature, seed=seed), 300, what)
            expect_exact(ctx, got, torch_sample(logits, temperature, seed), what)


# -- 5.8 cached_self_attention ------------------------------------------------------------------
def stacked_heads(x: torch.Tensor, H: int) -> torch.Tensor:
    """(B, T, E) -> (B, H, T, d), head h holding features h*d .. h*d + d - 1 (torch.split, then stacked)."""
    return torch.stack(torch.split(x, x.shape[-1] // H, dim=-1), dim=1)


def projected_cache(x: torch.Tensor, H: int, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values of x (B, S, E) as the cache holds them: projected, then split into heads."""
    E = x.shape[-1]
    W, b = state["in_proj_weight"].to(x.dtype), state["in_proj_bias"].to(x.dtype)
    k = F.linear(x, W[E:2 * E], b[E:2 * E])
    v = F.linear(x, W[2 * E:], b[2 * E:])
    return stacked_heads(k, H), stacked_heads(v, H)


def torch_causal_mha(x: torch.Tensor, H: int, state: dict[str, torch.Tensor]) -> torch.Tensor:
    """nn.MultiheadAttention over the whole sequence x (B, T, E) with a causal attn_mask, float64."""
    E = x.shape[-1]
    mha = torch_module(("mha", E, H), lambda: nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64))
    mha.load_state_dict({k: v.double() for k, v in state.items()})     # strict: every parameter set
    with torch.no_grad():
        out, _ = mha(x.double(), x.double(), x.double(), attn_mask=causal(x.shape[1]), need_weights=False)
    return out


def attention_args(state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return state["in_proj_weight"], state["in_proj_bias"], state["out_proj.weight"], state["out_proj.bias"]


def expect_step(ctx: Context, value: Value, B: int, H: int, T_new: int, total: int, E: int,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out (B, T_new, E), k (B, H, total, d), v (B, H, total, d)) from one call."""
    out, cache = ctx.expect_tuple(value, 2)
    k, v = ctx.expect_tuple(cache, 2, what=Msg("返回的缓存 (k, v)", "the returned cache (k, v)"))
    d = E // H
    return (ctx.expect_tensor(out, (B, T_new, E), dtype, what="out"),
            ctx.expect_tensor(k, (B, H, total, d), dtype, what=Msg("返回的 k", "the returned k")),
            ctx.expect_tensor(v, (B, H, total, d), dtype, what=Msg("返回的 v", "the returned v")))


def cache_case(ctx: Context, dtype: torch.dtype, S: int, T_new: int,
               sizes: tuple[int, int, int] | None = None) -> tuple[Any, ...]:
    """(x_all (B, S + T_new, E), H, state)."""
    B, H, d = sizes or ctx.sizes(3, low=2, high=6)
    E = H * d
    return ctx.randn(B, S + T_new, E, dtype=dtype), H, mha_state(ctx, E, dtype)


def step_start(ctx: Context, x_all: torch.Tensor, H: int, state: dict[str, torch.Tensor], S: int) -> tuple:
    """The call on the new positions x_all[:, S:] after a cache of the first S, begun (:func:`step_finish`
    compares its out, k and v with torch's)."""
    cache = None if S == 0 else tuple(t.to(x_all.dtype) for t in projected_cache(x_all[:, :S].double(), H, state))
    return x_all, H, state, S, ctx.start(x_all[:, S:], cache, H, *attention_args(state))


def step_finish(ctx: Context, started: tuple) -> None:
    x_all, H, state, S, pending = started
    B, total, E = x_all.shape
    dtype = x_all.dtype
    want_k, want_v = projected_cache(x_all.double(), H, {n: t.double() for n, t in state.items()})
    want_out = ctx.expected(torch_causal_mha, x_all, H, state)[:, S:]
    out, k, v = expect_step(ctx, pending.value(), B, H, total - S, total, E, dtype)
    ctx.expect_close(k, want_k, dtype, what=Msg("返回的 k（缓存在前，新位置在后）", "the returned k (the cache first, then the new positions)"))
    ctx.expect_close(v, want_v, dtype, what=Msg("返回的 v", "the returned v"))
    ctx.expect_close(out, want_out, dtype,
                     what=Msg("out（整段因果自注意力的最后几行）", "out (the last rows of causal self-attention over the whole sequence)"))


@check("5.8", "shapes", P, Kind.SHAPE, zh="out (B, T_new, E)；返回的 k、v 各 (B, H, S + T_new, d)",
       en="out (B, T_new, E); the returned k and v each (B, H, S + T_new, d)",
       statement=("`cached_self_attention(x, cache, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias)`",
                  "`x`：`(B, T_new, E)`，`T_new ≥ 1`；`cache`：`None` 或 `(k_cache, v_cache)`，各 `(B, H, S, d)`",
                  "返回 `(out, (k, v))`：`out` `(B, T_new, E)`；`k`、`v` 各 `(B, H, S + T_new, d)`"))
def _cache_shape(ctx: Context) -> Iterator[None]:
    dtype = torch.float32
    x_all, H, state = cache_case(ctx, dtype, 3, 2)
    B, total, E = x_all.shape
    whole = ctx.start(x_all, None, H, *attention_args(state))
    cache = tuple(t.to(dtype) for t in projected_cache(x_all[:, :3].double(), H, state))
    step = ctx.start(x_all[:, 3:], cache, H, *attention_args(state))
    yield      # the next check begins here, while the worker runs these calls
    expect_step(ctx, whole.value(), B, H, total, total, E, dtype)
    expect_step(ctx, step.value(), B, H, 2, total, E, dtype)


@check("5.8", "prefill-matches-torch", P, Kind.NUMERIC, zh="没有缓存时：等于带因果掩码的 nn.MultiheadAttention，k、v 是投影拆头后的键和值",
       en="without a cache: equals nn.MultiheadAttention with a causal mask; k and v are the projected keys and "
          "values split into heads",
       statement="后面是新位置的键和值（投影并拆头之后，第 `h` 个头是第 `h*d` 到 `(h+1)*d - 1` 维）")
def _cache_prefill(ctx: Context) -> Iterator[None]:
    started = []
    for dtype in DTYPES:
        x_all, H, state = cache_case(ctx, dtype, 0, int(ctx.randint(3, 8, 1)))
        started.append((dtype, step_start(ctx, x_all, H, state, 0)))
    yield      # the next check begins here, while the worker runs these calls
    for dtype, step in started:
        with ctx.case(zh=f"整段一次送入（{str(dtype)[6:]}）", en=f"the whole sequence at once ({str(dtype)[6:]})"):
            step_finish(ctx, step)


@check("5.8", "step-matches-torch", P, Kind.NUMERIC,
       zh="有缓存时（新来 1 个或几个位置）：out 等于整段因果自注意力的最后几行，k、v 是缓存接上新位置",
       en="with a cache (one or a few new positions): out equals the last rows of causal self-attention over the "
          "whole sequence, k and v are the cache followed by the new positions", weight=2,
       statement=("`k`、`v` 各 `(B, H, S + T_new, d)`，前 `S` 个位置就是传进来的缓存",
                  "`out` 等于整段序列（缓存里的位置加上新位置）做因果自注意力（`nn.MultiheadAttention` 带 `attn_mask=causal_mask`）的最后 `T_new` 行"))
def _cache_step(ctx: Context) -> Iterator[None]:
    started = []
    for T_new, dtype in ((1, torch.float64), (3, torch.float32)):
        S = int(ctx.randint(2, 7, 1))
        x_all, H, state = cache_case(ctx, dtype, S, T_new)
        started.append((T_new, dtype, step_start(ctx, x_all, H, state, S)))
    yield      # the next check begins here, while the worker runs these calls
    for T_new, dtype, step in started:
        with ctx.case(zh=f"缓存之后新来 {T_new} 个位置（{str(dtype)[6:]}）",
                      en=f"{T_new} new positions after a cache ({str(dtype)[6:]})"):
            step_finish(ctx, step)


@check("5.8", "step-by-step", P, Kind.PROPERTY, zh="先送提示、再逐个位置送（每次传回上一次返回的缓存）：与一次算完一致",
       en="a prompt, then one position at a time (each call given the cache the last one returned): the same as "
          "all at once",
       statement="一次送完和分几次送，结果一致")
def _cache_loop(ctx: Context) -> Iterator[None]:
    x_all, H, state = cache_case(ctx, torch.float64, 0, 5)
    B, total, E = x_all.shape
    pending = ctx.start(x_all[:, :2], None, H, *attention_args(state))
    yield      # the next check begins here, while the worker runs these calls
    want = ctx.expected(torch_causal_mha, x_all, H, state)
    value = pending.value()
    out, k, v = expect_step(ctx, value, B, H, 2, 2, E, torch.float64)
    # each call's out right after it: a failure is then the call that went wrong (and what self-check names)
    ctx.expect_close(out, want[:, :2], torch.float64, what=Msg("提示那一步的 out", "out of the prompt's call"))
    for t in range(2, total):
        value = ctx.call(x_all[:, t:t + 1], (k, v), H, *attention_args(state))
        out, k, v = expect_step(ctx, value, B, H, 1, t + 1, E, torch.float64)
        ctx.expect_close(out, want[:, t:t + 1], torch.float64,
                         what=Msg(f"第 {t} 个位置那一步的 out", f"out of the call for position {t}"))


# -- 5.9 kv_cache_memory -------------------------------------------------------------------
def meta_cache_bytes(batch: int, layers: int, heads: int, seq_len: int, head_dim: int, nbytes: int = 4) -> int:
    """What torch allocates for a K and a V per layer, (2, L, B, H, T, d), on the meta device."""
    t = torch.empty(2, layers, batch, heads, seq_len, head_dim, dtype=BYTES_DTYPE[nbytes], device="meta")
    return t.numel() * t.element_size()


@check("5.9", "python-int", P, Kind.SHAPE, zh="返回 Python int", en="returns a Python int",
       statement="返回 Python `int`（不是张量，也不是 float）")
def _kv_type(ctx: Context) -> Iterator[None]:
    pending = ctx.start(*ctx.sizes(5))
    yield      # the next check begins here, while the worker runs this call
    value = pending.value()
    ctx.expect(value.kind == "int" and value.spec.get("type") == "int",
               f"应当返回 Python int，实际是 {value.describe()}", f"should return a Python int, got {value.describe()}",
               diagnose=True)


@check("5.9", "fact-36-mib", P, Kind.FACT, zh="12 层、12 个头、每头 64 维、1024 个词元、float16、批量 1：恰好 36 MiB",
       en="12 layers, 12 heads of width 64, 1024 tokens, float16, batch 1: exactly 36 MiB",
       statement=KV_FORMULA)
def _kv_fact(ctx: Context) -> Iterator[None]:
    pending = ctx.start(1, 12, 12, 1024, 64, 2)
    yield      # the next check begins here, while the worker runs this call
    expect_int(ctx, pending.value(), 36 * 2**20, "kv_cache_memory(1, 12, 12, 1024, 64, 2)")


@check("5.9", "matches-torch", P, Kind.NUMERIC, zh="与 torch 在 `meta` 设备上分配的 (2, L, B, H, T, d) 张量字节数一致",
       en="equals the bytes of a (2, L, B, H, T, d) tensor torch allocates on the meta device", weight=2,
       statement=("`kv_cache_memory(batch, num_layers, num_heads, seq_len, head_dim, bytes_per_element=4)`", KV_FORMULA))
def _kv_torch(ctx: Context) -> Iterator[None]:
    started = []
    for nbytes in (4, 2, 8):
        b, L, h, t, d = ctx.sizes(5, low=2, high=40)
        started.append(((b, L, h, t, d, nbytes), ctx.start(b, L, h, t, d, nbytes)))
    yield      # the next check begins here, while the worker runs these calls
    for (b, L, h, t, d, nbytes), pending in started:
        expect_int(ctx, pending.value(), meta_cache_bytes(b, L, h, t, d, nbytes),
                   f"kv_cache_memory({b}, {L}, {h}, {t}, {d}, {nbytes})")
