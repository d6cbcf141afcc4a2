"""Shared hidden checks: a function leaves its inputs alone, and gradients flow through it to its inputs.

A plain call cannot show either: the sandbox returns values only and passes every call
fresh copies of its inputs. Two probes (:mod:`autograder.probes`) bring back what the
trusted side needs to judge, and it judges from those bytes alone (nothing the worker
says about itself is believed):

* ``inputs``: the tensor and array arguments *as they are after the call*, compared bit
  for bit (NaN included) with what was sent. ``x.sub_(...)`` or ``scores.masked_fill_(...)``
  returns the right values but changes the caller's tensor.
* ``grad``: the output(s) and the gradients that reached the inputs, after backpropagating
  a seeded ``grad_out``; the reference's are computed here, in float64, through the same
  probe function in-process. A ``.detach()`` or ``torch.no_grad()`` gives the right values
  but stops training, and these functions are the building blocks of the module 4.4 trains.

Messages name an argument by its parameter name and say what went wrong, never a value.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from autograder import plain
from autograder.catalog import CheckFailed, Context, Msg, as_float64, compare
from autograder.probes import probe_grad

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


def _no_gradient(name: str) -> Msg:
    return Msg(f"梯度没有传回输入 {name}：路径上是否有 .detach()、torch.no_grad()、转成 NumPy/Python 数，"
               f"或新建的张量？这个函数是要训练的模型的一部分，梯度必须能流回它的输入",
               f"no gradient reached the input {name}: is there a .detach(), torch.no_grad(), a conversion to "
               f"NumPy or Python numbers, or a newly built tensor on the way? This function is part of a model "
               f"that is trained: gradients must flow back to its inputs")


def _wrong_gradient(name: str) -> Msg:
    return Msg(f"对输入 {name} 的梯度与参考答案不符（前向的值是对的）：是否有一部分计算被 .detach() 或 torch.no_grad() "
               f"挡住了，或者某个输出没有连到计算图上？",
               f"the gradient with respect to the input {name} differs from the reference's (the forward values "
               f"are right): is part of the computation cut off by .detach() or torch.no_grad(), or is one of the "
               f"outputs not connected to the graph?")


def expect_input_gradients(ctx: Context, names: Sequence[str], wrt: Sequence[int | str], *args: Any,
                     outputs: Sequence[str] | None = None, **kwargs: Any) -> None:
    """Gradients reach the inputs ``wrt`` (named ``names``) and agree with the reference's.

    The inputs should be float64 (the comparison uses float64's tolerance). A seeded
    ``grad_out`` of each floating output's shape (``outputs`` names them when there are
    several; None: a single output) is backpropagated through every output at once.
    """
    for _ in input_gradients(ctx, names, wrt, *args, outputs=outputs, **kwargs):
        pass


def input_gradients(ctx: Context, names: Sequence[str], wrt: Sequence[int | str], *args: Any,
                    outputs: Sequence[str] | None = None, **kwargs: Any) -> Iterator[None]:
    """:func:`expect_input_gradients` as a check's steps, ``yield from`` it: the call begun, one yield (the
    next check begins there: see scoring.run_exercise), then the expected gradients and the comparison."""
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
    dtype = torch.float64
    # The forward values first: a wrong output explains wrong gradients better than their own message.
    got_outs = ctx.expect_tuple(parts["out"], len(outputs)) if outputs is not None else [parts["out"]]
    out_names = list(outputs) if outputs is not None else [None]
    want_values = want["out"] if outputs is not None else (want["out"],)
    for name, g, w in zip(out_names, got_outs, want_values):
        if isinstance(w, torch.Tensor):
            what = Msg(f"{name if name else '输出'}（梯度检查）", f"{name if name else 'the output'} (gradient check)")
            got = ctx.expect_tensor(g, tuple(w.shape), w.dtype if not w.is_floating_point() else dtype, what=what)
            ctx.expect_close(got, w.detach(), dtype, what=what, diagnose=False)
    grads = parts["grads"]
    if grads.kind != "list" or len(grads.spec["items"]) != len(wrt):
        raise CheckFailed(UNREADABLE, hidden=UNREADABLE)
    for name, g, w, position in zip(names, grads.items(), want["grads"], wrt):
        sent = kwargs[position] if isinstance(position, str) else args[position]
        if w is None:
            if g.kind == "none":
                continue          # the reference gets none either (an input the output does not use)
            w = torch.zeros(sent.shape, dtype=dtype)
        if g.kind == "none":
            message = _no_gradient(name)
            raise CheckFailed(message, hidden=message)
        if g.kind != "tensor" or tuple(g.spec["shape"]) != tuple(sent.shape):
            message = Msg(f"对输入 {name} 的梯度形状不对",
                          f"the gradient with respect to the input {name} has the wrong shape")
            raise CheckFailed(message, hidden=message)
        rtol, atol = ctx.tol(dtype)
        problem = compare(g.tensor(), w, rtol, atol)
        if problem is not None:
            message = _wrong_gradient(name)
            raise CheckFailed(Msg(f"{message.zh}（{problem[0]}）", f"{message.en} ({problem[1]})"), hidden=message)
