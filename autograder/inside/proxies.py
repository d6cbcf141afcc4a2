"""Stand-in proxies: an earlier exercise's function (or ``nn.Module`` class) answered by the trusted side.

Where an exercise builds on an earlier one whose function lost points, the worker calls a proxy in that
function's place (:func:`stand_in`, :func:`stand_in_module`): each call sends its arguments to the trusted
side (``ask(name, phase, payload)``), whose reference answers it, the value forward and the gradients backward
(:mod:`autograder.sandbox.stand_ins` is that side). The reference never enters the worker. Both sides walk a
call's arguments the same way (:func:`split_leaves`, :func:`fill_leaves`), so the n-th gradient belongs to the
n-th tensor. Like :mod:`autograder.inside.probes`, this module runs next to student code: the sandbox template imports
it before any cell runs, and the worker binds what it calls.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class _Leaf:
    """Where a tensor was in a call's arguments (see :func:`split_leaves`)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def split_leaves(value: Any) -> tuple[Any, list[torch.Tensor]]:
    """(``value`` with each tensor replaced by a place marker, the tensors in order). Both sides of a
    stand-in call walk the arguments this way, so the n-th gradient belongs to the n-th tensor."""
    leaves: list[torch.Tensor] = []

    def walk(v: Any, depth: int = 0) -> Any:
        if isinstance(v, torch.Tensor):
            leaves.append(v)
            return _Leaf(len(leaves) - 1)
        if depth < 8 and type(v) in (tuple, list):
            items = [walk(x, depth + 1) for x in v]
            return tuple(items) if type(v) is tuple else items
        if depth < 8 and type(v) is dict:
            return {k: walk(x, depth + 1) for k, x in v.items()}
        return v

    return walk(value), leaves


def fill_leaves(template: Any, leaves: list[Any]) -> Any:
    """The inverse of :func:`split_leaves`: each place marker replaced by its tensor."""
    if isinstance(template, _Leaf):
        return leaves[template.index]
    if type(template) in (tuple, list):
        items = [fill_leaves(x, leaves) for x in template]
        return tuple(items) if type(template) is tuple else items
    if type(template) is dict:
        return {k: fill_leaves(x, leaves) for k, x in template.items()}
    return template


def _on_device(value: Any, device: Any) -> Any:
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if type(value) in (tuple, list):
        items = [_on_device(x, device) for x in value]
        return tuple(items) if type(value) is tuple else items
    return value


class _Answered(torch.autograd.Function):
    """A stand-in call that gradients flow through: the forward and the backward are the trusted side's."""

    @staticmethod
    def forward(ctx: Any, call: Any, *leaves: torch.Tensor) -> Any:
        ctx.call = call
        ctx.save_for_backward(*leaves)
        value = call.ask("forward", fill_leaves(call.template, [leaf.detach() for leaf in leaves]))
        return tuple(value) if type(value) is list else value

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        call, leaves = ctx.call, ctx.saved_tensors
        args = fill_leaves(call.template, [leaf.detach() for leaf in leaves])
        got = call.ask("backward", (args, list(grads)))
        if type(got) is not list or len(got) != len(leaves):
            raise RuntimeError(f"the grader's answer for the gradients of {call.name} does not fit")
        return (None, *(g if g is None else g.to(leaf.device) for g, leaf in zip(got, leaves)))


class _StandInCall:
    def __init__(self, name: str, ask: Callable[[str, str, Any], Any], template: Any, device: Any):
        self.name, self._ask, self.template, self.device = name, ask, template, device

    def ask(self, phase: str, payload: Any) -> Any:
        return _on_device(self._ask(self.name, phase, payload), self.device)


def stand_in(name: str, ask: Callable[[str, str, Any], Any]) -> Callable[..., Any]:
    """A function that answers calls of ``name`` by asking the trusted side: ``ask(name, phase, payload)``
    sends ``payload`` (``(args, kwargs)`` for "forward"; ``((args, kwargs), grads of the outputs)`` for
    "backward") and returns the answer (the value; the gradients of the tensor arguments, in the order of
    :func:`split_leaves`). Gradients flow through it when an argument requires grad."""

    def answered(*args: Any, **kwargs: Any) -> Any:
        template, leaves = split_leaves((args, kwargs))
        device = leaves[0].device if leaves else None
        call = _StandInCall(name, ask, template, device)
        if torch.is_grad_enabled() and any(leaf.requires_grad for leaf in leaves):
            value = _Answered.apply(call, *leaves)
            return value
        return call.ask("forward", fill_leaves(template, [leaf.detach() for leaf in leaves]))

    answered.__name__ = answered.__qualname__ = name
    return answered


def stand_in_module(name: str, ask: Callable[[str, str, Any], Any]) -> type:
    """An ``nn.Module`` class that answers for the class ``name`` (an earlier exercise's module, 4.4's
    MultiHeadAttention in 5.4) by asking the trusted side, whose reference class never enters the worker.

    ``name(*args, **kwargs)`` asks for the reference's parameters, buffers and plain attributes under those
    constructor arguments ("init") and holds them under the reference's names (``out_proj.weight`` in a
    submodule ``out_proj``), so the student's code may read them, move the module and load a state dict
    into it; each forward is a stand-in call of ``(constructor arguments, parameters and buffers, inputs)``,
    which the trusted side answers with the reference module holding those tensors, gradients included."""
    forward_call = stand_in(name, ask)

    class StandIn(torch.nn.Module):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__()
            self._stand_in_arguments = (list(args), dict(kwargs))
            got = ask(name, "init", (list(args), dict(kwargs)))
            if type(got) is not dict:
                raise RuntimeError(f"the grader's answer for {name}(...) does not fit")
            for key, tensor in (got.get("parameters") or {}).items():
                _hold(self, str(key), torch.nn.Parameter(tensor), parameter=True)
            for key, tensor in (got.get("buffers") or {}).items():
                _hold(self, str(key), tensor, parameter=False)
            for key, value in (got.get("attributes") or {}).items():
                if str(key).isidentifier() and not hasattr(self, str(key)):
                    setattr(self, str(key), value)

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            state: dict[str, torch.Tensor] = dict(self.named_parameters())
            state.update(self.named_buffers())
            return forward_call(self._stand_in_arguments, state, *args, **kwargs)

    StandIn.__name__ = StandIn.__qualname__ = name
    return StandIn


def _hold(module: torch.nn.Module, dotted: str, tensor: Any, parameter: bool) -> None:
    """Register ``tensor`` under ``dotted`` ("out_proj.weight"), making the submodules on the way."""
    *path, leaf = dotted.split(".")
    for part in path:
        inner = module._modules.get(part)  # noqa: SLF001 - torch's submodule table, without its __getattr__
        if inner is None:
            inner = torch.nn.Module()
            module.add_module(part, inner)
        module = inner
    if parameter:
        module.register_parameter(leaf, tensor)
    else:
        module.register_buffer(leaf, tensor)
