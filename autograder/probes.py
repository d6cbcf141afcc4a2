"""Running one call into student code and describing what came back.

This module is the only code of the kit that runs *next to* student code: in the
sandbox worker, in the student's own kernel (self-check) and in-process for
validate. It holds no reference solution and no hidden check. A call is plain
data in (decoded args), plain data out (an encoded value or an error), with the
forbidden library calls it saw recorded by :class:`ForbiddenGuard`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import plain

#: Forbidden names as exercises.md spells them -> the objects torch dispatches.
FORBIDDEN_OBJECTS: dict[str, Callable[[], list[Any]]] = {
    "torch.softmax": lambda: [torch.softmax, torch._C._VariableFunctions.softmax],
    "F.softmax": lambda: [F.softmax],
    "Tensor.softmax": lambda: [torch.Tensor.softmax],
    "F.log_softmax": lambda: [F.log_softmax],
    "torch.log_softmax": lambda: [torch.log_softmax, torch.Tensor.log_softmax],
    "F.scaled_dot_product_attention": lambda: [F.scaled_dot_product_attention],
    "nn.MultiheadAttention": lambda: [F.multi_head_attention_forward],
    "F.multi_head_attention_forward": lambda: [F.multi_head_attention_forward],
    "F.cross_entropy": lambda: [F.cross_entropy],
    "nn.CrossEntropyLoss": lambda: [F.cross_entropy],
    "F.nll_loss": lambda: [F.nll_loss],
    "nn.NLLLoss": lambda: [F.nll_loss],
}


class ForbiddenGuard(TorchFunctionMode):
    """Records every forbidden torch call made while active, however it was reached.

    A TorchFunctionMode sees the function object itself, so an alias
    (``from torch.nn.functional import softmax as s``) or a module that calls it
    (``nn.CrossEntropyLoss``) is caught as well as the direct call.
    """

    def __init__(self, names: list[str]):
        super().__init__()
        self.lookup: dict[int, str] = {}
        for name in names:
            for obj in FORBIDDEN_OBJECTS[name]():
                self.lookup.setdefault(id(obj), name)
        self.used: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.lookup.get(id(func))
        if name is not None and name not in self.used:
            self.used.append(name)
        return func(*args, **(kwargs or {}))


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


@dataclass
class Reply:
    """What came back: status ok/error/missing/not_attempted/too_large/forbidden-free value."""

    status: str
    blob: bytes = b""
    error_type: str = ""
    error: str = ""
    forbidden: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def value(self) -> plain.Value:
        return plain.decode(self.blob)


def to_device(value: Any, device: str) -> Any:
    if type(value) is torch.Tensor:
        return value.to(device)
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


def probe_module(cls: Callable, embed_dim: int, num_heads: int, state: dict, query: torch.Tensor,
                 key: torch.Tensor, value: torch.Tensor, key_padding_mask: Any, grad_out: torch.Tensor,
                 bias: bool = True) -> dict:
    """Build the student's module, load torch-named weights, run forward and backward.

    Returns the outputs and the gradients of every named parameter and of the query.
    """
    module = cls(embed_dim, num_heads, bias=bias)
    module = module.to(device=query.device, dtype=query.dtype)
    missing = [k for k in state if k not in dict(module.named_parameters())]
    module.load_state_dict(state, strict=False)
    query = query.clone().requires_grad_(True)
    out, weights = module(query, key, value, key_padding_mask=key_padding_mask)
    (out * grad_out).sum().backward()
    grads = {}
    for name, p in module.named_parameters():
        if name in state:
            grads[name] = p.grad if p.grad is not None else None
    return {"out": out, "weights": weights, "grads": grads, "grad_query": query.grad,
            "missing": ",".join(missing)}


PROBES: dict[str, Callable[..., Any]] = {"call": probe_call, "module": probe_module}


def execute(namespace: dict, request: Request, max_bytes: float = float("inf")) -> Reply:
    """Run ``request`` against the functions in ``namespace``; never raises for student errors."""
    fn = namespace.get(request.function)
    if fn is None or not callable(fn):
        return Reply("missing", error=f"{request.function} is not defined")
    probe = PROBES[request.probe]
    args = to_device(request.args, request.device)
    kwargs = to_device(request.kwargs, request.device)
    guard = ForbiddenGuard(list(request.forbidden))
    start = time.perf_counter()
    try:
        with guard:
            result = probe(fn, *args, **kwargs)
    except NotImplementedError as exc:
        return Reply("not_attempted", error_type="NotImplementedError", error=str(exc)[:500],
                     forbidden=guard.used, seconds=time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - student code may raise anything
        return Reply("error", error_type=type(exc).__name__, error=_short(exc),
                     forbidden=guard.used, seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    try:
        blob = plain.encode(result, max_bytes=max_bytes)
    except plain.PlainDataError as exc:
        return Reply("too_large", error=str(exc), forbidden=guard.used, seconds=seconds)
    except Exception as exc:  # noqa: BLE001 - e.g. a tensor whose .cpu() raises
        return Reply("error", error_type=type(exc).__name__, error=_short(exc), forbidden=guard.used,
                     seconds=seconds)
    return Reply("ok", blob=blob, forbidden=guard.used, seconds=seconds)


def _short(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__
        text = "(unprintable)"
    return text[:500]
