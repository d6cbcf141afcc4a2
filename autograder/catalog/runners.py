"""Runners and diagnosers in this process: the student's functions called directly (self-check,
validate), copies of the inputs, and the live diagnoser that runs each known mistake on the same inputs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from autograder.inside import plain
from autograder.catalog.comparison import departures, same_kinds, values_match
from autograder.catalog.calls import copied
from autograder.catalog.context import Runner
from autograder.catalog.declarations import MISTAKES, Mistake
from autograder.inside.probes import Reply, Request, execute


# -- diagnosis ------------------------------------------------------------------
def in_process_runner(namespace: dict[str, Any]) -> Runner:
    """A runner for trusted code or the student's own kernel (no sandbox)."""
    def run(request: Request) -> Reply:
        # Copies, as the sandbox would: a function that edits its arguments in place must not
        # change the check's own inputs.
        return execute(namespace, copied(request))

    return run


#: How a known mistake's signature matches a student's output: with the same kinds and dtypes all the way down
#: ("exact"), or in its values alone ("loose": a float for a 0-d tensor).
EXACT, LOOSE = "exact", "loose"


def signature(got: plain.Value, mine: plain.Value, reference: plain.Value | None, tolerances: Any) -> str | None:
    """Whether a known mistake's output ``mine`` explains the student's ``got`` on the same inputs, given the
    reference's output there (None: the reference raised): :data:`EXACT`, :data:`LOOSE` or None.

    A mistake's signature is where it departs from the reference. It explains the student's output only where
    that is visible and the student's output shows it:

    * the mistake departs from the reference on these inputs (a softmax without the max shift is the right
      softmax on ordinary scores: matching the student there says nothing about the student);
    * the student's output matches the mistake's;
    * every element where the student departs from the reference is one where the mistake does too (a
      student failing where the mistake agrees with the reference has another fault than this mistake);
    * the student departs somewhere, or the mistake is one of kinds (an ndarray, float64 for float32) whose
      kinds the student's output has.
    """
    if not values_match(got, mine, tolerances):
        return None
    kinds = same_kinds(got.spec, mine.spec)
    if reference is None:          # the mistake returns where the reference raises: returning at all is its sign
        return EXACT if kinds else LOOSE
    if same_kinds(mine.spec, reference.spec) and values_match(mine, reference, tolerances):
        return None                # indistinguishable from the reference here
    student, mistake = departures(got, reference, tolerances), departures(mine, reference, tolerances)
    if len(student) != len(mistake) or any(s.shape != m.shape or bool((s & ~m).any())
                                           for s, m in zip(student, mistake)):
        return None
    if any(bool(s.any()) for s in student):
        return EXACT if kinds else LOOSE
    return EXACT if kinds and not same_kinds(mine.spec, reference.spec) else None


class Outputs:
    """Outputs of trusted functions (known mistakes, the reference) on requests, each computed once: every run from
    the same state of torch's global generator, which is as it was afterwards (a diagnosis draws nothing the
    student's next call would miss).

    A request is known by its identity, or with ``by_content`` by its function, probe and arguments' data (one
    output for the same call made by several answers: validate puts many answers to the same mistakes)."""

    def __init__(self, by_content: bool = False) -> None:
        self._by_content = by_content
        self._done: dict[tuple[int, int | str], tuple[plain.Value | None, bool]] = {}
        self._keep: list[Any] = []          # what the keys' ids name, alive while they are keys

    def value(self, fn: Callable[..., Any], request: Request) -> plain.Value | None:
        """``fn``'s output on the request (None where it raised or returned nothing readable)."""
        return self._run(fn, request)[0]

    def random(self, fn: Callable[..., Any], request: Request) -> bool:
        """Whether ``fn``'s output on the request depends on the state of torch's global generator it found (an
        unseeded draw): another run's, the student's, need not be the same, so it is no evidence either way."""
        return self._run(fn, request)[1]

    def _run(self, fn: Callable[..., Any], request: Request) -> tuple[plain.Value | None, bool]:
        call: int | str = id(request)
        if self._by_content:
            try:
                call = plain.fingerprint((request.function, request.probe, request.args, request.kwargs))
            except Exception:  # noqa: BLE001 - arguments plain data cannot hold (meta tensors): known by identity
                call = id(request)
        key = (id(fn), call)
        found = self._done.get(key)
        if found is None:
            self._keep += [fn, request]
            cpu_request = Request(request.function, request.args, request.kwargs, probe=request.probe)
            state = torch.random.get_rng_state()
            try:
                value, random = _output(fn, cpu_request), False
                if not torch.equal(torch.random.get_rng_state(), state):
                    # It used the global generator: from another state, does it return the same?
                    torch.default_generator.manual_seed(0x5EED)
                    random = not _same_bits(value, _output(fn, cpu_request))
            finally:
                torch.random.set_rng_state(state)
            found = self._done[key] = (value, random)
        return found


def _output(fn: Callable[..., Any], request: Request) -> plain.Value | None:
    # A copy each run: a mistake that edits its inputs in place must not change the next one's.
    reply = execute({request.function: fn}, copied(request))
    if reply.status != "ok":
        return None
    try:
        return reply.value()
    except plain.PlainDataError:
        return None


def _same_bits(a: plain.Value | None, b: plain.Value | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.spec == b.spec and a.arrays.keys() == b.arrays.keys() and all(
        x.dtype == b.arrays[k].dtype and x.shape == b.arrays[k].shape and x.tobytes() == b.arrays[k].tobytes()
        for k, x in a.arrays.items())


class LiveDiagnoser:
    """Instructor side: runs each known mistake on the same inputs (needs the course's mistakes.py)."""

    def __init__(self, tolerances: Any):
        self.tolerances = tolerances

    def __call__(self, exercise_id: str, request: Request, got: plain.Value, *,
                 reference: Callable[..., Any] | None = None,
                 evidence: Sequence[tuple[Request, plain.Value]] = ()) -> Mistake | None:
        """The first known mistake whose :func:`signature` matches the student's output with the same kinds and
        dtypes, else the first that matches in values alone (a float for a 0-d tensor): so "computed in float64"
        and "returned an ndarray" can both be named though their values agree. None without the reference:
        without it no signature can be told.

        ``evidence``: the student's outputs on the exercise's other calls (every call its checks took a value of).
        A mistake is not named where one of them contradicts it: the mistake departs from the reference there and
        the student's output does not show it (a 2.5 answer that overwrote the diagonal equals "diagonal only" on
        a 1 x 1 Jacobian, and on no larger one).
        """
        if reference is None:
            return None
        outputs = Outputs()
        loose = None
        for m in MISTAKES.get(exercise_id, []):
            how = self.signature(m, request, got, reference, evidence, outputs)
            if how == EXACT:
                return m
            if how == LOOSE:
                loose = loose or m
        return loose

    def signature(self, m: Mistake, request: Request, got: plain.Value, reference: Callable[..., Any], evidence:
                  Sequence[tuple[Request, plain.Value]] = (), outputs: Outputs | None = None) -> str | None:
        """How known mistake ``m`` matches the student's output ``got`` on ``request`` (:func:`signature`), the
        evidence not contradicting it: :data:`EXACT`, :data:`LOOSE` or None."""
        outputs = outputs or Outputs()
        mine = outputs.value(m.fn, request)
        if mine is None or outputs.random(m.fn, request) or not values_match(got, mine, self.tolerances):
            return None           # (the reference is run only for a mistake the student's output matches)
        how = signature(got, mine, outputs.value(reference, request), self.tolerances)
        if how is None or not self._consistent(m, reference, evidence, outputs):
            return None
        return how

    def _consistent(self, m: Mistake, reference: Callable[..., Any],
                    evidence: Sequence[tuple[Request, plain.Value]], outputs: Outputs) -> bool:
        """No call of ``evidence`` contradicts ``m``: wherever the mistake's output departs from the reference's (in
        its values or in its kinds), the student's output shows the same departure. A call the mistake raises on,
        or whose output depends on the global generator's state (:meth:`Outputs.random`), says nothing."""
        for request, seen in evidence:
            mine = outputs.value(m.fn, request)
            if mine is None or outputs.random(m.fn, request):
                continue
            values, kinds = values_match(seen, mine, self.tolerances), same_kinds(seen.spec, mine.spec)
            if values and kinds:
                continue          # the student's output is the mistake's here (the reference is not needed)
            ref = outputs.value(reference, request)
            if (not values and (ref is None or not values_match(mine, ref, self.tolerances))) or \
                    (not kinds and ref is not None and not same_kinds(mine.spec, ref.spec)):
                return False
        return True
