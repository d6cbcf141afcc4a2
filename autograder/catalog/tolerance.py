"""How far a check lets an answer be from the expected one: the tolerance floors of the precision an exercise
declares and of what it builds on (:func:`precision_floors`), the magnitude of a call's inputs that makes a
tolerance scale-aware (:func:`input_scale`), and the pieces :meth:`~autograder.catalog.context.Context.truth`
measures rounding slack with on large inputs (:func:`rounded`, :func:`tensors`).

Plain arithmetic on values the trusted side holds (the check's own inputs and expected values, course.yml's
tolerances): nothing here calls the student's code or reads what it returned.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.catalog.declarations import Precision
from autograder.inside.probes import Request

#: Units of rounding per unit of input magnitude that a comparison allows (see Context.tol).
SCALE_ULPS = 4.0


def eps(dtype: Any) -> float:
    """One rounding unit (machine epsilon) of ``dtype``, a dtype or its name: a 64-bit one's, a 16-bit one's
    (float16 or bfloat16), else float32's."""
    name = str(dtype)
    if "64" in name:
        return float(torch.finfo(torch.float64).eps)
    if "16" in name:
        return float(torch.finfo(torch.bfloat16 if "bfloat" in name else torch.float16).eps)
    return float(torch.finfo(torch.float32).eps)


#: Inputs of at least this magnitude get their expected values' rounding slack measured (Context.truth).
SENSITIVE_SCALE = 10.0
#: How many times the measured movement a comparison allows (two random roundings underestimate the worst).
SLACK_FACTOR = 16.0
#: How many times course.yml's relative tolerance an exercise that builds on others allows (Context.tol): an
#: answer of a dependency its own checks accept may be off by up to that tolerance, and what is computed from it
#: (a softmax of scores, a sum over heads) moves by a few times that.
DEPENDENCY_SHARE = 16.0
FLOAT32_EPS = float(torch.finfo(torch.float32).eps)


def tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """The tensors of a value, in order (tuples, lists and dict values walked)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth < 6 and isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v, depth + 1)]
    if depth < 6 and isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v, depth + 1)]
    return []


def rounded(value: Any, generator: torch.Generator, relative: Callable[[Any], float]) -> Any:
    """Every floating tensor and array moved by ``relative(its dtype)`` of its own magnitude, each element up or
    down (one rounding unit of its dtype, the precision of one float32 intermediate, a dependency's tolerance)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        sign = torch.randint(0, 2, value.shape, generator=generator).to(torch.float64).mul_(2).sub_(1)
        return value.detach().double().add(value.detach().double().abs() * relative(value.dtype) * sign)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        signs = torch.randint(0, 2, value.shape, generator=generator).numpy() * 2 - 1
        return value.astype(np.float64) + np.abs(value).astype(np.float64) * relative(value.dtype) * signs
    if isinstance(value, tuple):
        return tuple(rounded(v, generator, relative) for v in value)
    if isinstance(value, list):
        return [rounded(v, generator, relative) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v, generator, relative) for k, v in value.items()}
    return value


def is_float64(dtype: Any) -> bool:
    """Whether ``dtype`` (a torch or numpy dtype, or its name) is a 64-bit one."""
    return "64" in str(dtype)


def precision_floors(tolerances: Any, dtype: Any, precision: Precision, *, builds_on: bool = False
                     ) -> tuple[float, float]:
    """The least (rtol, atol) a comparison of ``dtype`` allows, whatever the inputs (see :meth:`Context.tol`): the
    floors of the precision the statement teaches (one float32 scalar or table inside a float64 call moves the
    answer this far) and of what a dependency's accepted answer moves it; relative to each element, and absolute
    for elements near 0 (a sum that cancels). Not relative to the inputs' magnitude: inputs of 1e9 are where a
    fill of -1e9 shows."""
    t = tolerances.for_dtype(dtype)
    rtol, atol = t.rtol, t.atol
    if precision is Precision.ONE_FLOAT32 and is_float64(dtype):
        rtol, atol = max(rtol, SLACK_FACTOR * FLOAT32_EPS), max(atol, SLACK_FACTOR * FLOAT32_EPS)
    if builds_on:
        share = DEPENDENCY_SHARE * t.rtol
        rtol, atol = max(rtol, share), max(atol, share)
    return rtol, atol


def magnitude(value: Any) -> float:
    """The largest finite magnitude among the floating tensors, arrays and floats in ``value`` (0 if none)."""
    best = 0.0
    stack: list[Any] = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, (tuple, list)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            top = float(value.detach().abs().max())      # nan or inf when any element is: then only the finite
            if not math.isfinite(top):
                finite = value.detach()[torch.isfinite(value.detach())]
                top = float(finite.abs().max()) if finite.numel() else 0.0
            best = max(best, top)
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
            top = float(np.abs(value).max())
            if not math.isfinite(top):
                kept = value[np.isfinite(value)]
                top = float(np.abs(kept).max()) if kept.size else 0.0
            best = max(best, top)
        elif isinstance(value, float) and math.isfinite(value):
            best = max(best, abs(value))
    return best


def input_scale(request: Request | None) -> float:
    """The largest finite magnitude among the floating tensors and arrays a request sends (0 if none)."""
    if request is None:
        return 0.0
    cached = getattr(request, "_scale", None)
    if cached is not None:
        return cached
    best = magnitude((request.args, request.kwargs))
    try:
        request._scale = best  # type: ignore[attr-defined]  # noqa: SLF001 - this module's cache on the request
    except AttributeError:
        pass
    return best
