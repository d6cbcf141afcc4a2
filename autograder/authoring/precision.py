"""The precision a check asks for, proven fair by ``autograder validate``: answers that differ from the reference only
in what the statement does not teach keep full marks.

Two kinds of answer, each made from the reference itself and graded in this process on every seed:

* *float32 intermediates* (:func:`float32_variant`): the reference with its scalars and tables computed in
  float32, the way a careful student's code often is (``torch.sqrt(torch.tensor(d_k))``, a frequency table in the
  default dtype, d2l-zh's ``torch.arange(0, D, 2, dtype=torch.float32)``). While it runs, every torch operation is
  watched (a ``TorchFunctionMode``): a tensor is *of the inputs* when it is an argument of the call, a parameter
  of a module, or computed from one of those; every other floating result (a table built from constants and
  sizes) is rounded to float32, and every Python float an operation on the inputs takes (``math.sqrt(d)``) too.
  Where the exercise declares :attr:`~autograder.catalog.declarations.Precision.ONE_FLOAT32`, this answer must keep
  full marks on its own exercise, and (its dependencies' code runs inside it) on every exercise built on them.
* *at the edge of a dependency's tolerance* (:func:`edge_variant`): for each exercise an exercise builds on
  (course.yml's ``builds_on``), the dependency's reference with every floating output (but small whole numbers) moved
  by a fraction of course.yml's relative tolerance of its dtype, up or down by its value: the largest fraction its
  own checks accept (:data:`EDGE_FRACTIONS`); and the dependent exercise's reference,
  with this dependency inside it (a fresh copy of the solutions module whose dependency is replaced:
  :func:`solutions_copy`), must keep full marks: an exercise never loses points for what an exercise it builds on
  was allowed to return.

(The correct alternatives of a dependency, each graded in its whole notebook, make the same proof on the
substitution path and the student's: :mod:`autograder.authoring.alternatives`.)
"""
from __future__ import annotations

import importlib.util
import itertools
from functools import partial
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from autograder import catalog as C
from autograder.course.config import Course
from autograder.grading.references import reference, reference_module

#: How far an edge answer moves each output, as fractions of course.yml's relative tolerance of its dtype: the
#: largest its own checks accept is its edge (0: they accept only the exact values, a permutation's, say).
EDGE_FRACTIONS = (0.5, 0.1, 0.02, 0.0)
_copies = itertools.count()


# -- float32 intermediates ----------------------------------------------------------------------------------------
def _tensors(value: Any, depth: int = 0) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 6 and isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v, depth + 1)
    elif depth < 6 and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth + 1)


def _float32_scalar(value: Any) -> Any:
    """A Python float as float32 holds it (other values as they are), inside tuples and lists too."""
    if type(value) is float:
        return float(np.float32(value))
    if isinstance(value, (tuple, list)):
        return type(value)(_float32_scalar(v) for v in value)
    return value


class Float32Intermediates(TorchFunctionMode):
    """While active, what is not computed from the inputs is computed in float32 (the module's rule)."""

    def __init__(self, inputs: Iterable[torch.Tensor]):
        super().__init__()
        self._kept: list[torch.Tensor] = []          # (so that an id is not reused by another tensor meanwhile)
        self._ids: set[int] = set()
        for t in inputs:
            self._mark(t)

    def _mark(self, t: torch.Tensor) -> None:
        if id(t) not in self._ids:
            self._ids.add(id(t))
            self._kept.append(t)

    def _of_inputs(self, t: torch.Tensor) -> bool:
        return id(t) in self._ids or isinstance(t, torch.nn.Parameter)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        of_inputs = any(self._of_inputs(t) for t in _tensors((args, kwargs)))
        if of_inputs:
            args, kwargs = _float32_scalar(args), {k: _float32_scalar(v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        in_place = (name.endswith("_") and not name.endswith("__")) or name in ("__setitem__", "__iadd__", "__isub__",
                                                                               "__imul__", "__itruediv__")
        if of_inputs:
            for t in _tensors(out):
                self._mark(t)
            if in_place and args and isinstance(args[0], torch.Tensor):
                self._mark(args[0])
            return out
        if in_place:
            for t in _tensors(args[:1]):
                if t.dtype == torch.float64:
                    with torch.no_grad():
                        t.copy_(t.to(torch.float32))
            return out
        return _round_float64(out)


def _round_float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype == torch.float64:
        return value.to(torch.float32).to(torch.float64)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_round_float64(v) for v in value)
    if isinstance(value, list):
        return [_round_float64(v) for v in value]
    return value


def float32_variant(obj: Any) -> Any:
    """The function or module class ``obj`` computing its scalars and tables in float32 (the module's rule)."""
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            with Float32Intermediates(_tensors((args, kwargs))):
                obj.__init__(self, *args, **kwargs)

        def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            with Float32Intermediates(itertools.chain(_tensors((args, kwargs)), self.parameters(),
                                                      self.buffers())):
                return obj.forward(self, *args, **kwargs)

        return type(obj.__name__, (obj,), {"__init__": init, "forward": forward, "__module__": obj.__module__,
                                           "__qualname__": obj.__qualname__, "__doc__": obj.__doc__})

    def variant(*args: Any, **kwargs: Any) -> Any:
        with Float32Intermediates(_tensors((args, kwargs))):
            return obj(*args, **kwargs)

    variant.__name__ = getattr(obj, "__name__", "variant")
    return variant


# -- at the edge of a tolerance -----------------------------------------------------------------------------------
def _signs(value: torch.Tensor) -> torch.Tensor:
    """+1 or -1 for each element, a function of its value alone (a bit of its float32 pattern): the same value
    moves the same way in every call, as a real answer's rounding does (a check may compare two calls)."""
    bits = value.detach().to(torch.float32).cpu().view(torch.int32)
    return ((bits >> 1) & 1).to(value.dtype).mul_(2).sub_(1).to(value.device)


def _moved(value: Any, relative: Callable[[torch.dtype], float]) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        # A small whole number (cos 0 = 1, a weight of 1 for the only key) any sound method gets exactly stays.
        exact = (value == value.round()) & (value.abs() <= 16)
        return value * (1 + relative(value.dtype) * _signs(value) * ~exact)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_moved(v, relative) for v in value)
    if isinstance(value, list):
        return [_moved(v, relative) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, relative) for k, v in value.items()}
    return value


def edge_variant(obj: Any, tolerances: Any, fraction: float) -> Any:
    """The function or module class ``obj`` with every floating output moved by ``fraction`` of course.yml's
    relative tolerance of its dtype, each element up or down (by its value: :func:`_signs`)."""
    def relative(dtype: torch.dtype) -> float:
        return fraction * float(tolerances.for_dtype(dtype).rtol)

    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _moved(obj.forward(self, *args, **kwargs), relative)

        return type(obj.__name__, (obj,), {"forward": forward, "__module__": obj.__module__,
                                           "__qualname__": obj.__qualname__, "__doc__": obj.__doc__})

    def variant(*args: Any, **kwargs: Any) -> Any:
        return _moved(obj(*args, **kwargs), relative)

    variant.__name__ = getattr(obj, "__name__", "variant")
    return variant


def solutions_copy(course: Course, exercise_id: str, replace: dict[str, Callable[[Any], Any]]) -> ModuleType:
    """A fresh copy of the solutions module of ``exercise_id``'s assignment (its functions and classes look their
    helpers up in the copy), each name of ``replace`` bound to ``replace[name](the copy's own object)``."""
    assignment, _exercise = course.exercise(exercise_id)
    original = reference_module(course, assignment)
    spec = importlib.util.spec_from_file_location(f"{original.__name__}__copy{next(_copies)}", original.__file__)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"{original.__file__}: cannot be loaded again")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, make in replace.items():
        setattr(module, name, make(getattr(module, name)))
    return module


# -- the proof --------------------------------------------------------------------------------------------------
@dataclass
class PrecisionVerdict:
    """One answer of :mod:`this module's <autograder.authoring.precision>` two kinds, graded on every seed."""

    exercise: str                   # the exercise graded
    kind: str                       # "float32 intermediates", or "edge of D" (a dependency D at its tolerance's edge)
    precision: str                  # the exercise's declared precision (Precision's value; "undeclared")
    points: float = 0.0             # the lowest score over the seeds
    max_points: float = 0.0
    lost: list[str] = field(default_factory=list)       # "check (seed n): message"

    @property
    def fair(self) -> bool:
        return not self.lost


def _graded(course: Course, exercise: Any, fn: Any, seeds: Iterable[int], diagnoser: Any, kind: str,
            precision: str) -> PrecisionVerdict:
    audiences = (C.Audience.PUBLIC, C.Audience.HIDDEN)
    verdict = PrecisionVerdict(exercise.id, kind, precision, exercise.points, exercise.points)
    truth = reference(course, exercise.id)
    for seed in seeds:
        result = C.run_exercise(exercise, C.in_process_runner({exercise.function: fn}), audiences=audiences,
                                tolerances=course.tolerances, seed_parts=("validate-precision", seed),
                                reference=truth, diagnoser=diagnoser)
        verdict.points = min(verdict.points, result.points)
        for r in result.checks:
            if not r.passed:
                said = r.detail or r.message
                verdict.lost.append(f"{r.check} (seed {seed}): {r.status.value}: {said.en if said else ''}")
    return verdict


def declared(exercise_id: str) -> str:
    spec = C.PRECISIONS.get(exercise_id)
    return spec.precision.value if spec is not None else "undeclared"


def prove(course: Course, exercises: Iterable[str] | None = None, seeds: Iterable[int] = (0, 1, 2),
          diagnoser: Any = None) -> list[PrecisionVerdict]:
    """Every exercise's float32-intermediates answer (where its precision is one float32 intermediate) and every
    dependency's edge answer inside each exercise built on it, graded on ``seeds`` (the module's rule)."""
    wanted = set(exercises) if exercises else None
    seeds = tuple(seeds)
    verdicts = []
    edges: dict[str, float] = {}
    for ex in course.exercises:
        if wanted is not None and ex.id not in wanted:
            continue
        if C.precision_of(ex.id) is C.Precision.ONE_FLOAT32:
            variant = float32_variant(reference(course, ex.id))
            verdicts.append(_graded(course, ex, variant, seeds, diagnoser, "float32 intermediates", declared(ex.id)))
        for dependency in ex.builds_on or []:
            _assignment, dep = course.exercise(dependency)
            if dependency not in edges:
                edges[dependency] = _edge(course, dependency, seeds, diagnoser)
            fraction = edges[dependency]
            if not fraction:
                continue            # its checks accept only its exact values: the reference is its edge
            edge = solutions_copy(course, ex.id, {dep.function: partial(edge_variant, tolerances=course.tolerances,
                                                                        fraction=fraction)})
            verdicts.append(_graded(course, ex, getattr(edge, ex.function), seeds, diagnoser,
                                    f"{dependency} at {fraction:g} of its tolerance", declared(ex.id)))
    return verdicts


def _edge(course: Course, exercise_id: str, seeds: tuple[int, ...], diagnoser: Any) -> float:
    """The largest of :data:`EDGE_FRACTIONS` whose edge answer the exercise's own checks accept on every seed."""
    _assignment, exercise = course.exercise(exercise_id)
    for fraction in EDGE_FRACTIONS[:-1]:
        answer = edge_variant(reference(course, exercise_id), course.tolerances, fraction)
        if _graded(course, exercise, answer, seeds, diagnoser, "edge", declared(exercise_id)).fair:
            return fraction
    return EDGE_FRACTIONS[-1]
