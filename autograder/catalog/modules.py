"""torch's own modules that checks compare against (``nn.RNN``, ``nn.MultiheadAttention``), built once per
grading thread: building one (its own initialization, under a forked RNG) cost more than the forward it was
built for, a dozen times a submission.

:func:`torch_module` hands back the same module for the same key: the caller sets every parameter the
module reads before each use (``load_state_dict`` strict, or ``copy_`` of each) and never holds two uses
of one key at once (a stack of layers used together takes one key per layer). Gradients of an earlier use
are dropped.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch

M = TypeVar("M", bound=torch.nn.Module)

#: Modules kept per thread before the oldest are dropped (a course's checks use a handful of sizes).
KEPT = 64
_BUILT = threading.local()


def torch_module(key: Hashable, build: Callable[[], M]) -> M:
    """The module ``build()`` made for ``key`` in this thread (made now, the caller's RNG untouched, if none
    was), without gradients."""
    built: dict[Hashable, torch.nn.Module] = _BUILT.__dict__.setdefault("built", {})
    module = built.get(key)
    if module is None:
        with torch.random.fork_rng(devices=[]):     # its own init must not move the caller's RNG
            module = build()
        if len(built) >= KEPT:
            built.clear()
        built[key] = module
    module.zero_grad(set_to_none=True)
    return module  # type: ignore[return-value]
