"""Running one call into student code and describing what came back.

This module (with :mod:`autograder.inside.guards`, the guards each call runs under)
is the only code of the kit that runs *next to* student code: in the sandbox
worker, in the student's own kernel (self-check) and in-process for validate. It
holds no reference solution and no hidden check. A call is plain data in (decoded
args), plain data out (an encoded value or an error), with the forbidden library
calls it saw: the guards see them, at the torch function and at the aten operator,
while the student's function runs.

Everything :func:`execute` needs is bound when this module is imported (the
worker imports it before any cell runs): a cell that later replaces this
module's attributes or the guards' (the tables, the guards, ``execute`` itself, ``plain.encode``)
changes nothing the worker calls. This is a deterrent, not a proof: a cell runs
in the same process and can reach anything; the trusted side therefore also
scans the submission's source (:mod:`autograder.grading.source_scan`) and treats every
byte the worker sends as hostile (:mod:`autograder.sandbox`).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from autograder.inside import plain
from autograder.inside.guards import bind_guards

if TYPE_CHECKING:
    from autograder.inside.guards import SeenNames


@dataclass
class Request:
    """One call: which function, through which probe, with which (plain) arguments."""

    function: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    probe: str = "call"
    forbidden: tuple[str, ...] = ()
    device: str = "cpu"
    #: Where a check made the call ("scaled-scores#2": its 2nd call). Trusted side only, never
    #: sent; it names the call on any machine, whatever bits the arguments' floats have there.
    site: str = ""
    #: Functions of earlier exercises to answer in place of the student's own while this call runs
    #: (name -> callable, see :func:`autograder.inside.proxies.stand_in`): on the trusted side the references
    #: (only their names are sent to a worker), in a worker the proxies that ask the trusted side.
    stand_ins: dict = field(default_factory=dict)


@dataclass
class Reply:
    """What came back: status ok/error/missing/not_attempted/too_large/forbidden-free value."""

    status: str
    blob: bytes = b""
    error_type: str = ""
    error: str = ""
    forbidden: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: The sandbox's own words in both languages (a messages.Msg), when it, not the student's code,
    #: ended the call (a timeout, a crash); never set from what the worker sends.
    message: Any = field(default=None, compare=False)

    def value(self) -> plain.Value:
        return plain.decode(self.blob)


def to_device(value: Any, device: str) -> Any:
    if type(value) is torch.Tensor:
        # ``.to("cpu")`` of a CPU tensor is the tensor itself: the call (a dispatch each) is left out.
        return value if device == "cpu" and value.is_cpu else value.to(device)
    if isinstance(value, tuple):
        return tuple(to_device(v, device) for v in value)
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


# -- probes: how a function is exercised ---------------------------------------
def probe_call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def probe_module(cls: Callable, init_args: tuple, init_kwargs: dict, state: dict, args: tuple, kwargs: dict,
                 grad_out: Any, wrt: tuple = ()) -> dict:
    """Build a student's ``nn.Module`` class, load named weights, run forward and backward.

    ``cls(*init_args, **init_kwargs)`` is moved to the device of the first tensor of ``args`` (then
    ``kwargs``) and to the dtype of their first floating-point tensor (of ``state``'s where they have none:
    a language model's input is integer tokens), and loaded with ``state`` (``strict=False``: a parameter
    the class names otherwise is reported in ``missing``, not raised). The positional arguments at the
    positions ``wrt`` become fresh leaves that require grad; ``module(*args, **kwargs)`` runs, and ``grad_out`` is
    backpropagated as :func:`probe_grad` does. Returns ``{"out": the module's output, "grads":
    {name in state: its gradient or None}, "input_grads": [one per wrt position], "missing":
    "name,name", "unexpected": "name,name"}``: ``missing``, names of ``state`` the module lacks;
    ``unexpected``, entries of the module's state_dict that ``state`` lacks (with either,
    ``load_state_dict(state, strict=True)`` would refuse).
    """
    module = cls(*init_args, **init_kwargs)
    first = next((a for a in (*args, *kwargs.values()) if type(a) is torch.Tensor), None)
    floating = next((t for t in (*args, *kwargs.values(), *state.values())
                     if type(t) is torch.Tensor and t.is_floating_point()), None)
    if first is not None or floating is not None:     # one pass over the module's tensors, not one each
        device = None if first is None else first.device
        dtype = None if floating is None else floating.dtype
        if not _placed(module, device, dtype):
            module = module.to(device=device, dtype=dtype)
    named = dict(module.named_parameters())
    missing = [k for k in state if k not in named]
    unexpected = [k for k in module.state_dict() if k not in state]
    module.load_state_dict(state, strict=False)
    call_args = list(args)
    leaves = []
    for i in wrt:
        call_args[i] = call_args[i].detach().clone().requires_grad_(True)
        leaves.append(call_args[i])
    out = module(*call_args, **kwargs)
    _backpropagate(out, grad_out)
    grads = {name: p.grad for name, p in module.named_parameters() if name in state}
    return {"out": out, "grads": grads, "input_grads": [leaf.grad for leaf in leaves], "missing": ",".join(missing),
            "unexpected": ",".join(unexpected)}


def _placed(module: Any, device: Any, dtype: Any) -> bool:
    """Whether ``module.to(device=device, dtype=dtype)`` would leave every tensor of it as it is: each parameter
    and buffer a plain real tensor already on ``device`` (None: any) and, where floating, of ``dtype`` (None:
    any). Then the probe skips the call (a walk over every submodule, and through the guards a torch function
    per tensor); anything else (a complex or an unusual tensor, a module whose tensors cannot be listed) is
    moved as before."""
    try:
        for t in itertools.chain(module.parameters(), module.buffers()):
            if t.is_complex() or (device is not None and t.device != device) or \
                    (dtype is not None and t.is_floating_point() and t.dtype != dtype):
                return False
    except Exception:  # noqa: BLE001 - a student's module whose tensors cannot be listed: .to() decides
        return False
    return True


def _backpropagate(out: Any, grad_out: Any) -> None:
    """Backpropagate ``sum((output_i * grad_out_i).sum())`` over the outputs that are tensors of
    ``grad_out_i``'s shape and require grad (see :func:`probe_grad`); nothing when none does."""
    outs = out if type(out) in (tuple, list) else (out,)
    gouts = grad_out if type(grad_out) in (tuple, list) else (grad_out,)
    loss = None
    for o, g in zip(outs, gouts):
        if g is None or type(o) is not torch.Tensor or not o.requires_grad or tuple(o.shape) != tuple(g.shape):
            continue
        term = (o * g.to(dtype=o.dtype, device=o.device)).sum()
        loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()


def _argument(value: Any) -> Any:
    """An argument as :func:`probe_inputs` returns it: a tensor or an array itself, anything else None."""
    return value if type(value) is torch.Tensor or type(value) is np.ndarray else None


def probe_inputs(fn: Callable, *args: Any, **kwargs: Any) -> dict:
    """Call ``fn``; return its result and its tensor and array arguments *as they are after the call*.

    ``{"out": result, "args": [each positional argument, None where not a tensor or array],
    "kwargs": {name: the same}}``. The trusted side compares them with what it sent: a function
    that edits an argument in place (``x.sub_``, ``masked_fill_``) changed its caller's data, which
    a plain call cannot show (every call gets fresh copies). No verdict is made here: the worker
    only reports what it holds, and the trusted side judges the bytes.
    """
    out = fn(*args, **kwargs)
    return {"out": out, "args": [_argument(a) for a in args],
            "kwargs": {k: _argument(v) for k, v in kwargs.items()}}


def probe_random(fn: Callable, *args: Any, **kwargs: Any) -> dict:
    """Call ``fn``; return its result and whether torch's global random state changed across the call.

    ``{"out": result, "global_random_changed": bool}``, for a statement that says a function leaves the global
    random numbers alone (it draws from a generator of its own). The states' bytes are compared with NumPy's
    (torch's functions are the student's to shadow); a function that restores the state it changed has left it
    alone, which is what is asked. One draw is made first, so that a function that reseeds the global numbers
    to the state an identical call left them in (the same call twice) is still seen changing them."""
    torch.rand(1)
    before = torch.get_rng_state().numpy().tobytes()
    out = fn(*args, **kwargs)
    return {"out": out, "global_random_changed": torch.get_rng_state().numpy().tobytes() != before}


def probe_grad(fn: Callable, wrt: Any, grad_out: Any, *args: Any, **kwargs: Any) -> dict:
    """Call ``fn`` with the arguments named in ``wrt`` requiring grad; backpropagate; return the gradients.

    ``wrt``: positions (int) of ``args`` or names (str) of ``kwargs``; each is replaced by a fresh leaf
    copy that requires grad. ``grad_out``: a tensor (one output) or a tuple/list with one tensor or None
    per output. ``sum((output_i * grad_out_i).sum())`` over the outputs that are tensors of
    ``grad_out_i``'s shape and require grad is backpropagated (an output that does not require grad,
    such as a detached one, adds nothing: its gradient is missing). Returns ``{"out": result,
    "grads": [the gradient of each ``wrt`` input, None where none arrived]}``.
    """
    call_args = list(args)
    leaves = []
    for w in wrt:
        source = kwargs if isinstance(w, str) else call_args
        leaf = source[w].detach().clone().requires_grad_(True)
        source[w] = leaf
        leaves.append(leaf)
    out = fn(*call_args, **kwargs)
    _backpropagate(out, grad_out)
    return {"out": out, "grads": [leaf.grad for leaf in leaves]}


PROBES: dict[str, Callable[..., Any]] = {"call": probe_call, "module": probe_module, "inputs": probe_inputs,
                                         "grad": probe_grad, "random": probe_random}


def _short(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__
        text = "(unprintable)"
    return text[:500]


def _bind_run(seen_class: Callable[[tuple[str, ...]], SeenNames], watch: Callable[[Any], bool],
              guarded: Callable[..., Any]) -> Callable[[Any, Request, float], Reply]:
    """``run(fn, request, max_bytes)``: the call of ``fn`` itself, guarded where the exercise forbids something, and
    its reply: the value's bytes, or the error, each with the forbidden names seen and the seconds it took."""
    probes = dict(PROBES)
    encode, plain_error, clock = plain.encode, plain.PlainDataError, time.perf_counter
    reply, move, short = Reply, to_device, _short

    def run(fn: Any, request: Request, max_bytes: float) -> Reply:
        """The call of ``fn`` as ``request`` asks, and what came back."""
        probe = probes[request.probe]
        args = move(request.args, request.device)
        kwargs = move(request.kwargs, request.device)
        seen = seen_class(tuple(request.forbidden))
        start = clock()
        try:
            if not seen.lookup:
                result = probe(fn, *args, **kwargs)
            else:
                result = guarded(seen, watch(fn), probe, fn, args, kwargs)
        except NotImplementedError as exc:
            return reply("not_attempted", error_type="NotImplementedError", error=str(exc)[:500],
                         forbidden=seen.used, seconds=clock() - start)
        except Exception as exc:  # noqa: BLE001 - student code may raise anything
            return reply("error", error_type=type(exc).__name__, error=short(exc), forbidden=seen.used,
                         seconds=clock() - start)
        seconds = clock() - start
        try:
            blob = encode(result, max_bytes=max_bytes)
        except plain_error as exc:
            return reply("too_large", error=str(exc), forbidden=seen.used, seconds=seconds)
        except Exception as exc:  # noqa: BLE001 - e.g. a tensor whose .cpu() raises
            return reply("error", error_type=type(exc).__name__, error=short(exc), forbidden=seen.used,
                         seconds=seconds)
        return reply("ok", blob=blob, forbidden=seen.used, seconds=seconds)

    return run


def _bind_stand_ins(run: Callable[[Any, Request, float], Reply]) -> Callable[..., Reply]:
    """:func:`execute` itself: the function the request names, with its stand-ins in the namespace, through ``run``."""
    reply = Reply
    absent = object()

    def execute(namespace: dict, request: Request, max_bytes: float = float("inf")) -> Reply:
        """Run ``request`` against the functions in ``namespace``; never raises for student errors.

        The guards run only while the student's function does, and only for an exercise that
        forbids something; the operator level only for the first calls of each function
        (:data:`autograder.inside.guards.OPERATOR_WATCHED_CALLS`). ``request.stand_ins`` take the
        place of the namespace's functions of those names while the call runs, and the namespace is
        as it was afterwards.
        """
        fn = namespace.get(request.function)
        if fn is None or not callable(fn):
            return reply("missing", error=f"{request.function} is not defined")
        swapped = {}
        for name, stand in request.stand_ins.items():
            if name != request.function:
                swapped[name] = namespace.get(name, absent)
                namespace[name] = stand
        try:
            return run(fn, request, max_bytes)
        finally:
            for name, old in swapped.items():
                if old is absent:
                    namespace.pop(name, None)
                else:
                    namespace[name] = old

    return execute


def _bind_execute() -> Callable[..., Reply]:
    """:func:`execute`, with everything it calls bound now rather than looked up at each call.

    The guard classes exist only in closures; the tables are resolved to object ids once. Its steps,
    each bound once here: the guards (:func:`autograder.inside.guards.bind_guards`: the forbidden names'
    objects, the guards of the two levels, how many calls the operator level watches), the call and its reply
    (:func:`_bind_run`), the stand-ins around it (:func:`_bind_stand_ins`).
    """
    seen_class, watch, guarded = bind_guards()
    return _bind_stand_ins(_bind_run(seen_class, watch, guarded))


execute = _bind_execute()
