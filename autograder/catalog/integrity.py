"""Shared hidden checks: a function leaves its inputs alone, and gradients flow through it to its inputs.

A plain call cannot show either: the sandbox returns values only and passes every call
fresh copies of its inputs. Two probes (:mod:`autograder.inside.probes`) bring back what the
trusted side needs to judge, and it judges from those bytes alone (nothing the worker
says about itself is believed):

* ``inputs``: the tensor and array arguments *as they are after the call*, compared bit
  for bit (NaN included) with what was sent. ``x.sub_(...)`` or ``scores.masked_fill_(...)``
  returns the right values but changes the caller's tensor.
* ``grad``: the output(s) and the gradients that reached the inputs, after backpropagating
  a seeded ``grad_out``; the reference's are computed here, in float64, through the same
  probe function in-process. A ``.detach()`` or ``torch.no_grad()`` gives the right values
  but stops training, and these functions are the building blocks of the module 4.4 trains.
  An input whose domain fixes something (a softmax's output sums to 1 along its last dim) is
  compared in the directions it may move only (:class:`Fixed`): two answers equal on every
  allowed input may differ in their gradients along a direction no allowed input moves.

Messages name an argument by its parameter name and say what went wrong, never a value.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.inside import plain
from autograder.catalog import CheckFailed, Context, Msg, as_float64, compare
from autograder.inside.probes import probe_grad

CHANGED = Msg("修改了传入的张量（原地操作，如 x.sub_ / masked_fill_）：调用者的数据被改变了",
              "changed a tensor it was given (an in-place op such as x.sub_ or masked_fill_): "
              "the caller's data changed")
UNREADABLE = Msg("这次调用的返回结果无法读取", "what this call returned could not be read")


def _dict_items(value: plain.Value, keys: set[str]) -> dict[str, plain.Value]:
    if value.kind != "dict" or set(value.spec["items"]) != keys:
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    return {k: plain.Value(v, value.arrays) for k, v in value.spec["items"].items()}


def _sent_bytes(x: Any) -> tuple[str, tuple[int, ...], bytes]:
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        return str(t.dtype), tuple(t.shape), t.numpy().tobytes()
    a = np.ascontiguousarray(x)
    return str(a.dtype), tuple(a.shape), a.tobytes()


def _got_bytes(value: plain.Value) -> tuple[str, tuple[int, ...], bytes] | None:
    if value.kind == "tensor":
        arr = value.arrays.get(value.spec["k"])
        if not isinstance(arr, np.ndarray):
            return None
        t = value.tensor().contiguous()
        return str(t.dtype), tuple(t.shape), t.numpy().tobytes()
    if value.kind == "ndarray":
        a = np.ascontiguousarray(value.ndarray())
        return str(a.dtype), tuple(a.shape), a.tobytes()
    return None


def _unchanged(sent: Any, got: plain.Value) -> bool:
    """The argument came back as it was sent: same kind, dtype, shape and bytes (NaN-aware by bits)."""
    if not isinstance(sent, (torch.Tensor, np.ndarray)):
        return True
    if (got.kind == "tensor") != isinstance(sent, torch.Tensor):
        return False
    back = _got_bytes(got)
    return back is not None and back == _sent_bytes(sent)


def expect_inputs_unchanged(ctx: Context, *args: Any, **kwargs: Any) -> None:
    """Call through the ``inputs`` probe; fail when a tensor or array argument came back changed.

    ``diagnose``: a known mistake that edits its input (2.2's in-place max subtraction) is named.
    """
    for _ in inputs_unchanged(ctx, *args, **kwargs):
        pass


def inputs_unchanged(ctx: Context, *args: Any, **kwargs: Any) -> Iterator[None]:
    """:func:`expect_inputs_unchanged` as a check's steps, ``yield from`` it: the call begun, one yield (the
    next check begins there: see scoring.run_exercise), then the comparison."""
    pending = ctx.start(*args, probe="inputs", **kwargs)
    yield
    parts = _dict_items(pending.value(), {"out", "args", "kwargs"})
    if parts["args"].kind != "list" or parts["kwargs"].kind != "dict":
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    got_args = parts["args"].items()
    got_kwargs = parts["kwargs"].spec["items"]
    if len(got_args) != len(args) or set(got_kwargs) != set(kwargs):
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    same = all(_unchanged(s, g) for s, g in zip(args, got_args)) and \
        all(_unchanged(kwargs[k], plain.Value(got_kwargs[k], parts["kwargs"].arrays)) for k in kwargs)
    if not same:
        raise CheckFailed(CHANGED, diagnose=True, hidden=CHANGED)


def together(*steps: Iterator[None]) -> Iterator[None]:
    """Several checks' steps (such as :func:`inputs_unchanged`'s) as one check's, ``yield from`` it: every step
    begun in order up to its yield (each its calls sent), one yield, then the rest of each in the same order."""
    for step in steps:
        next(step)
    yield
    for step in steps:
        next(step, None)


def global_random_changed(ctx: Context, *args: Any, **kwargs: Any) -> bool:
    """Call through the ``random`` probe: whether torch's global random state changed across the call (a
    statement that says a function draws from a generator of its own). An unreadable answer fails the check."""
    parts = _dict_items(ctx.call(*args, probe="random", **kwargs), {"out", "global_random_changed"})
    changed = parts["global_random_changed"]
    if changed.kind != "bool":
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    return bool(changed.spec["v"])


@dataclass(frozen=True)
class Fixed:
    """What the domain of an input holds fixed, for the gradient comparison (:func:`input_gradients`).

    ``project`` maps a gradient (float64, the input's shape) to its part in the directions the input may move;
    ``where`` says which those are, in the messages ("in the directions that keep each row's sum"). Two answers
    that agree on every allowed input may have gradients that differ in a direction no allowed input moves
    (2.5's weights divided by their sum first: the same values on rows that sum to 1, another gradient along
    the all-ones direction); that difference is nothing the student can be asked to get "right".
    """

    project: Callable[[torch.Tensor], torch.Tensor]
    where: Msg


def fixed_sum(dim: int = -1) -> Fixed:
    """An input whose slices along ``dim`` have a fixed sum (a softmax's output: each row sums to 1). Its gradient is
    compared with the slice's mean taken out: the all-ones direction along ``dim`` is the one such an input
    never moves in, and every direction orthogonal to it keeps the sum."""
    def project(grad: torch.Tensor) -> torch.Tensor:
        return grad - grad.mean(dim=dim, keepdim=True)

    if dim == -1:
        return Fixed(project, Msg("在保持每行之和不变的方向上", "in the directions that keep each row's sum"))
    return Fixed(project, Msg(f"在保持沿 dim={dim} 之和不变的方向上",
                              f"in the directions that keep the sums along dim={dim}"))


def _measured(name: str, fixed: Fixed | None) -> Msg:
    """What a gradient comparison measured, as the messages name it."""
    if fixed is None:
        return Msg(f"对输入 {name} 的梯度", f"the gradient with respect to the input {name}")
    return Msg(f"对输入 {name} 的梯度（{fixed.where.zh}）",
               f"the gradient with respect to the input {name}, {fixed.where.en},")


def _no_gradient(name: str) -> Msg:
    return Msg(f"梯度没有传回输入 {name}：路径上是否有 .detach()、torch.no_grad()、转成 NumPy/Python 数，"
               f"或新建的张量？这个函数是要训练的模型的一部分，梯度必须能流回它的输入",
               f"no gradient reached the input {name}: is there a .detach(), torch.no_grad(), a conversion to "
               f"NumPy or Python numbers, or a newly built tensor on the way? This function is part of a model "
               f"that is trained: gradients must flow back to its inputs")


def _zero_gradient(measured: Msg) -> Msg:
    """The gradient came back all zero where the reference's is not: cut off on the way."""
    return Msg(f"{measured.zh}处处为 0，而参考答案的不是（前向的值是对的）：路径上是否有 .detach()、torch.no_grad()、"
               f"转成 NumPy/Python 数或新建的张量，把梯度挡住了？",
               f"{measured.en} is zero everywhere and the reference's is not (the forward values are right): is "
               f"there a .detach(), torch.no_grad(), a conversion to NumPy or Python numbers, or a newly built "
               f"tensor on the way that stops the gradient?")


def _wrong_gradient(measured: Msg) -> Msg:
    """The gradient arrived and differs: nothing was cut off, so no .detach() is suggested."""
    return Msg(f"{measured.zh}与参考答案不符（前向的值是对的）：输入到输出之间的某一步，"
               f"算出的值对，导数却不是公式的导数",
               f"{measured.en} differs from the reference's (the forward values are right): some step between the "
               f"inputs and the outputs computes the right values with another derivative than the formula's")


def expect_input_gradients(ctx: Context, names: Sequence[str], wrt: Sequence[int | str], *args: Any,
                           outputs: Sequence[str] | None = None, fixed: Mapping[str, Fixed] | None = None,
                           **kwargs: Any) -> None:
    """Gradients reach the inputs ``wrt`` (named ``names``) and agree with the reference's.

    The inputs should be float64 (the comparison uses float64's tolerance). A seeded
    ``grad_out`` of each floating output's shape (``outputs`` names them when there are
    several; None: a single output) is backpropagated through every output at once.
    ``fixed``: by input name, what that input's domain holds fixed (:func:`fixed_sum`): its gradient
    is compared in the directions the input may move only.
    """
    for _ in input_gradients(ctx, names, wrt, *args, outputs=outputs, fixed=fixed, **kwargs):
        pass


def input_gradients(ctx: Context, names: Sequence[str], wrt: Sequence[int | str], *args: Any,
                    outputs: Sequence[str] | None = None, fixed: Mapping[str, Fixed] | None = None,
                    **kwargs: Any) -> Iterator[None]:
    """:func:`expect_input_gradients` as a check's steps, ``yield from`` it: the call begun, one yield (the
    next check begins there: see scoring.run_exercise), then the expected gradients and the comparison."""
    unknown = sorted(set(fixed or {}) - set(names))
    if unknown:
        raise ValueError(f"fixed names {unknown}, which are not among the inputs {list(names)}")
    ref_args, ref_kwargs = as_float64(args), as_float64(kwargs)
    want_plain = ctx.reference(*args, **kwargs)
    want_outs = tuple(want_plain) if outputs is not None else (want_plain,)
    grad_out = tuple(ctx.randn(*o.shape, 1)[..., 0] if isinstance(o, torch.Tensor) and o.is_floating_point() else None
                     for o in want_outs)
    sent_grad_out = grad_out if outputs is not None else grad_out[0]
    # The call starts before the reference's backward pass (a sandbox's worker runs it meanwhile).
    pending = ctx.start(tuple(wrt), sent_grad_out, *args, probe="grad", **kwargs)
    yield
    want = ctx.expected(probe_grad, ctx.reference_function(), tuple(wrt), as_float64(sent_grad_out), *ref_args,
                        **ref_kwargs)
    parts = _dict_items(pending.value(), {"out", "grads"})
    # The forward values first: a wrong output explains wrong gradients better than their own message.
    _expect_outputs(ctx, parts["out"], want["out"], outputs)
    grads = parts["grads"]
    if grads.kind != "list" or len(grads.spec["items"]) != len(wrt):
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    for name, g, w, position in zip(names, grads.items(), want["grads"], wrt):
        sent = kwargs[position] if isinstance(position, str) else args[position]
        _expect_gradient(ctx, name, g, w, sent, (fixed or {}).get(name))


def _expect_outputs(ctx: Context, got: Any, want: Any, outputs: Sequence[str] | None) -> None:
    """The forward values of a gradient check's call, each floating output within float64's tolerance."""
    dtype = torch.float64
    got_outs = ctx.expect_tuple(got, len(outputs)) if outputs is not None else [got]
    out_names = list(outputs) if outputs is not None else [None]
    want_values = want if outputs is not None else (want,)
    for name, g, w in zip(out_names, got_outs, want_values):
        if isinstance(w, torch.Tensor):
            what = Msg(f"{name if name else '输出'}（梯度检查）", f"{name if name else 'the output'} (gradient check)")
            got_t = ctx.expect_tensor(g, tuple(w.shape), w.dtype if not w.is_floating_point() else dtype, what=what)
            ctx.expect_close(got_t, w.detach(), dtype, what=what, diagnose=False)


def _expect_gradient(ctx: Context, name: str, g: Any, w: Any, sent: Any, constraint: Fixed | None) -> None:
    """One input's gradient as the call returned it (``g``) against the reference's (``w``, None: none)."""
    dtype = torch.float64
    if w is None:
        if g.kind == "none":
            return          # the reference gets none either (an input the output does not use)
        w = torch.zeros(sent.shape, dtype=dtype)
    if g.kind == "none":
        message = _no_gradient(name)
        raise CheckFailed(message, hidden=message)
    if g.kind != "tensor" or tuple(g.spec["shape"]) != tuple(sent.shape):
        message = Msg(f"对输入 {name} 的梯度形状不对",
                      f"the gradient with respect to the input {name} has the wrong shape")
        raise CheckFailed(message, hidden=message)
    rtol, atol = ctx.tol(dtype)
    got_grad, want_grad = g.tensor().double(), w.detach().double()
    if constraint is not None:
        got_grad, want_grad = constraint.project(got_grad), constraint.project(want_grad)
    problem = compare(got_grad, want_grad, rtol, atol)
    if problem is not None:
        measured = _measured(name, constraint)
        # Only a gradient that came back all zero was stopped on the way; one that differs arrived.
        zero = bool((got_grad.abs() <= atol).all())
        message = _zero_gradient(measured) if zero else _wrong_gradient(measured)
        raise CheckFailed(Msg(f"{message.zh}（{problem[0]}）", f"{message.en} ({problem[1]})"), hidden=message)
