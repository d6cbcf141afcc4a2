"""Runners and diagnosers in this process: the student's functions called directly (self-check,
validate), copies of the inputs, and the live diagnoser that runs each known mistake on the same inputs.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder import plain
from autograder.probes import Reply, Request
from autograder.catalog.compare import same_kinds, values_match
from autograder.catalog.context import Runner
from autograder.catalog.declarations import MISTAKES, Mistake


# -- diagnosis ------------------------------------------------------------------
def in_process_runner(namespace: dict[str, Any]) -> Runner:
    """A runner for trusted code or the student's own kernel (no sandbox)."""
    from autograder.probes import execute

    def run(request: Request) -> Reply:
        # Copies, as the sandbox would: a function that edits its arguments in place must not
        # change the check's own inputs.
        return execute(namespace, copied(request))

    return run


def copied(request: Request) -> Request:
    """The request with fresh copies of its tensors and arrays, as a sandbox would see them.

    A function that edits its arguments in place then cannot change the check's
    inputs, nor the fingerprint the diagnoser computes afterwards.
    """
    return Request(request.function, _copy(request.args), _copy(request.kwargs), probe=request.probe,
                   forbidden=request.forbidden, device=request.device, site=request.site,
                   stand_ins=dict(request.stand_ins))


def _copy(value: Any) -> Any:
    if type(value) is torch.Tensor:
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad else copy
    if type(value) is np.ndarray:
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


class LiveDiagnoser:
    """Instructor side: runs each known mistake on the same inputs (needs the course's mistakes.py)."""

    def __init__(self, tolerances: Any):
        self.tolerances = tolerances

    def __call__(self, exercise_id: str, request: Request, got: plain.Value) -> Mistake | None:
        """The first known mistake whose output has the student's kinds and dtypes and values; else the first
        whose values alone match (a float for a 0-d tensor): so "computed in float64" and "returned an
        ndarray" can both be named though their values agree."""
        from autograder.probes import execute

        loose = None
        for m in MISTAKES.get(exercise_id, []):
            cpu_request = Request(request.function, request.args, request.kwargs, probe=request.probe)
            reply = execute({request.function: m.fn}, cpu_request)
            if reply.status == "ok":
                value = reply.value()
                if values_match(got, value, self.tolerances):
                    if same_kinds(got.spec, value.spec):
                        return m
                    loose = loose or m
        return loose
