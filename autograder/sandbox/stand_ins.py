"""The grader's side of a stand-in call: an earlier exercise's reference answers a worker's call.

When an exercise builds on an earlier one whose function lost points (2.4 calls the student's 2.3),
the worker calls a proxy in that function's place (:func:`autograder.inside.proxies.stand_in`), which sends its
arguments here; the reference runs here, on the trusted side (its code never enters the worker), in
float64 on copies of the arguments, and its value (cast back to the arguments' dtype) or, for the
backward pass, the gradients of the tensor arguments go back. The arguments are the worker's bytes:
plain data only, bounded like any frame, and a reference that raises on them answers with an error the
student's code sees as an exception.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autograder.inside.proxies import fill_leaves, split_leaves

#: The most tensor elements one stand-in call may send (the arguments of a course's exercises are small).
MAX_ELEMENTS = 1 << 24


class StandInRefused(Exception):
    """Arguments the reference cannot be asked with; the message is for the student's exception."""


def answer(reference: Callable[..., Any], phase: str, payload: Any) -> Any:
    """What ``reference`` answers to a worker's ``phase`` ("forward" or "backward"; for a module class also
    "init") with ``payload``."""
    if isinstance(reference, type):
        if phase == "init":
            return _init(reference, payload)
        reference = _module_call(reference)
    if phase == "forward":
        if type(payload) not in (tuple, list) or len(payload) != 2:
            raise StandInRefused("unreadable arguments")
        args, kwargs = payload
        return _forward(reference, args, kwargs)
    if phase == "backward":
        if type(payload) not in (tuple, list) or len(payload) != 2 or type(payload[1]) is not list:
            raise StandInRefused("unreadable gradients")
        (arguments, grads) = payload
        if type(arguments) not in (tuple, list) or len(arguments) != 2:
            raise StandInRefused("unreadable arguments")
        return _backward(reference, arguments[0], arguments[1], grads)
    raise StandInRefused(f"no such phase: {phase!r}")


def _prepared(args: Any, kwargs: Any) -> tuple[Any, list[torch.Tensor], torch.dtype | None]:
    if type(args) not in (tuple, list) or type(kwargs) is not dict:
        raise StandInRefused("unreadable arguments")
    template, leaves = split_leaves((tuple(args), kwargs))
    if sum(leaf.numel() for leaf in leaves) > MAX_ELEMENTS:
        raise StandInRefused("arguments too large")
    dtype = next((leaf.dtype for leaf in leaves if leaf.is_floating_point()), None)
    return template, leaves, dtype


def _narrow(value: Any, dtype: torch.dtype | None) -> Any:
    """The reference's float64 answer in the arguments' dtype."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.to(dtype) if dtype is not None and value.is_floating_point() else value
    if type(value) in (tuple, list):
        items = [_narrow(v, dtype) for v in value]
        return tuple(items) if type(value) is tuple else items
    return value


def _forward(reference: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    template, leaves, dtype = _prepared(args, kwargs)
    wide = [leaf.double() if leaf.is_floating_point() else leaf for leaf in leaves]
    a, k = fill_leaves(template, wide)
    with torch.no_grad():
        return _narrow(reference(*a, **k), dtype)


def _backward(reference: Callable[..., Any], args: Any, kwargs: Any, grads: list[Any]) -> list[Any]:
    template, leaves, _dtype = _prepared(args, kwargs)
    wide = [leaf.double().requires_grad_(True) if leaf.is_floating_point() else leaf for leaf in leaves]
    a, k = fill_leaves(template, wide)
    with torch.enable_grad():
        out = reference(*a, **k)
    outs = list(out) if type(out) in (tuple, list) else [out]
    if len(grads) != len(outs):
        raise StandInRefused("gradients for another number of outputs")
    pairs = []
    for o, g in zip(outs, grads):
        if g is None or not isinstance(o, torch.Tensor) or not o.requires_grad:
            continue
        if type(g) is not torch.Tensor or tuple(g.shape) != tuple(o.shape):
            raise StandInRefused("a gradient of another shape than its output")
        pairs.append((o, g.to(torch.float64)))
    inputs = [w for w in wide if w.is_floating_point()]
    got = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True) \
        if pairs and inputs else [None] * len(inputs)
    by_input = iter(got)
    out_grads: list[Any] = []
    for leaf in leaves:
        if not leaf.is_floating_point():
            out_grads.append(None)
            continue
        g = next(by_input)
        out_grads.append(None if g is None else g.detach().to(leaf.dtype))
    return out_grads


# -- a module class (4.4's MultiHeadAttention in 5.4): see autograder.inside.proxies.stand_in_module ---------------
#: Constructor arguments are a few small plain values (sizes, flags): nothing else is passed to a reference.
_PLAIN_ARGUMENT = (int, float, bool, str, type(None))
MAX_ARGUMENTS = 16


def _constructed(cls: type, arguments: Any) -> torch.nn.Module:
    """``cls(*args, **kwargs)`` for a worker's ``arguments``: plain values only, a size counted on the meta
    device before anything is allocated, and the reference's random initialization under a fixed seed (its
    values then do not depend on what the grader ran before)."""
    if type(arguments) not in (tuple, list) or len(arguments) != 2:
        raise StandInRefused("unreadable constructor arguments")
    args, kwargs = arguments
    if type(args) not in (tuple, list) or type(kwargs) is not dict or len(args) + len(kwargs) > MAX_ARGUMENTS \
            or not all(type(v) in _PLAIN_ARGUMENT for v in (*args, *kwargs.values())) \
            or not all(type(k) is str and k.isidentifier() for k in kwargs):
        raise StandInRefused(f"{cls.__name__} is built here from a few numbers and flags only")
    if any(type(v) is str and len(v) > 100 for v in (*args, *kwargs.values())):
        raise StandInRefused("a constructor argument too long")
    with torch.device("meta"):
        shape = cls(*args, **kwargs)
    if sum(t.numel() for t in (*shape.parameters(), *shape.buffers())) > MAX_ELEMENTS:
        raise StandInRefused(f"{cls.__name__} too large")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return cls(*args, **kwargs)


def _init(cls: type, arguments: Any) -> dict[str, Any]:
    """What a worker's stand-in module holds: the reference's parameters, buffers and plain attributes."""
    module = _constructed(cls, arguments)
    attributes = {k: v for k, v in vars(module).items()
                  if not k.startswith("_") and k != "training" and type(v) in (int, float, bool, str)}
    return {"parameters": {k: v.detach() for k, v in module.named_parameters()},
            "buffers": {k: v.detach() for k, v in module.named_buffers()}, "attributes": attributes}


def _module_call(cls: type) -> Callable[..., Any]:
    """A function of (constructor arguments, parameters and buffers, inputs) that runs the reference module
    holding those tensors (differentiable in them: a stand-in's backward pass goes through it too)."""

    def call(arguments: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        if type(state) is not dict or not all(type(k) is str and type(v) is torch.Tensor for k, v in state.items()):
            raise StandInRefused(f"unreadable parameters of {cls.__name__}")
        module = _constructed(cls, arguments)
        return torch.func.functional_call(module, state, tuple(args), kwargs, strict=True)

    return call
