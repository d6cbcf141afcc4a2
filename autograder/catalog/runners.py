"""Runners and diagnosers in this process: the student's functions called directly (self-check,
validate), copies of the inputs, and the live diagnoser that runs each known mistake on the same inputs.
"""
from __future__ import annotations

from typing import Any

from autograder import plain
from autograder.catalog.comparison import same_kinds, values_match
from autograder.catalog.context import Runner, copied
from autograder.catalog.declarations import MISTAKES, Mistake
from autograder.probes import Reply, Request, execute


# -- diagnosis ------------------------------------------------------------------
def in_process_runner(namespace: dict[str, Any]) -> Runner:
    """A runner for trusted code or the student's own kernel (no sandbox)."""
    def run(request: Request) -> Reply:
        # Copies, as the sandbox would: a function that edits its arguments in place must not
        # change the check's own inputs.
        return execute(namespace, copied(request))

    return run


class LiveDiagnoser:
    """Instructor side: runs each known mistake on the same inputs (needs the course's mistakes.py)."""

    def __init__(self, tolerances: Any):
        self.tolerances = tolerances

    def __call__(self, exercise_id: str, request: Request, got: plain.Value) -> Mistake | None:
        """The first known mistake whose output has the student's kinds and dtypes and values; else the first
        whose values alone match (a float for a 0-d tensor): so "computed in float64" and "returned an
        ndarray" can both be named though their values agree."""
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
