"""The guards that watch one call into student code for the forbidden library calls it makes.

Like :mod:`autograder.inside.probes`, whose :func:`~autograder.inside.probes.execute` runs each call under
them, this module runs *next to* student code: in the sandbox worker, in the student's own kernel
(self-check) and in-process for validate. It holds no reference solution and no hidden check: only the
torch objects that are each forbidden call, from the one table of them (:mod:`autograder.inside.forbidden`).

Forbidden calls are seen at two levels while the student's function runs:

* the **function** level (a ``TorchFunctionMode``): the torch function object that
  was called, however it was named (``from torch.nn.functional import softmax as
  s``), and Python-level paths such as ``nn.MultiheadAttention``'s training path,
  which decomposes into ordinary operators. It names the call precisely.
* the **operator** level (a ``TorchDispatchMode``): the aten operator actually
  dispatched, which no alias, ``torch._C.DisableTorchFunction()`` or
  ``torch.ops.aten._softmax`` call avoids. It only counts operators *outside* a
  call the function level already named, so ``nn.CrossEntropyLoss`` is reported
  as ``F.cross_entropy`` and not also as the ``nll_loss`` it runs on. It costs
  every operator a Python call, so it watches the first calls of each function
  (:data:`OPERATOR_WATCHED_CALLS`), the function level every call.

:func:`bind_guards` makes the guards once, when :mod:`autograder.inside.probes` is imported (the worker
imports it before any cell runs): the guard classes exist only in its closures and the tables are resolved
to object ids then, so a cell that later replaces this module's attributes (the tables, ``TorchFunctionMode``,
``bind_guards`` itself) changes nothing the guards do. This is a deterrent, not a proof: the trusted side also scans the
submission's source (:mod:`autograder.grading.source_scan`) and treats every byte the worker sends as hostile.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.overrides import TorchFunctionMode
from torch.overrides import _get_current_function_mode_stack as function_modes
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as dispatch_modes

from autograder.inside.forbidden import GUARD_OFF
from autograder.inside.forbidden import TABLE as FORBIDDEN_TABLE

#: Forbidden names as exercises.md spells them -> the torch function objects that are that call (the
#: function level), and -> the aten operators that *are* that call (the operator level): both from the one
#: table of forbidden calls (:mod:`autograder.inside.forbidden`), which the static scan reads too.
FORBIDDEN_OBJECTS: dict[str, Callable[[], list[Any]]] = {f.name: f.objects for f in FORBIDDEN_TABLE}
FORBIDDEN_OPERATORS: dict[str, tuple[str, ...]] = {f.name: f.operators for f in FORBIDDEN_TABLE}


#: The operator level watches this many calls of each student function; the function level watches
#: every call. A TorchDispatchMode costs each dispatched operator a Python call (~10 us): watching
#: every call added about a quarter to grading a 04 submission (the module probe runs hundreds of
#: operators a call), watching four about a tenth. A dodge is the same code on every call, so its
#: first calls show it, and the static scan (:mod:`autograder.grading.source_scan`) reads its spelling.
OPERATOR_WATCHED_CALLS = 4


def _operator_objects(op_name: str) -> list[Any]:
    """The packet ``torch.ops.aten.<op_name>`` and each of its overloads; none where this torch lacks it."""
    packet = getattr(torch.ops.aten, op_name, None)
    if packet is None:
        return []
    return [packet, *(getattr(packet, overload) for overload in packet.overloads())]


def _recognized() -> dict[str, tuple[Any, ...]]:
    """Forbidden name -> every object a guard recognizes for it: functions, operator packets, overloads."""
    return {name: tuple(FORBIDDEN_OBJECTS[name]()) + tuple(obj for op in FORBIDDEN_OPERATORS[name]
                                                          for obj in _operator_objects(op))
            for name in FORBIDDEN_OBJECTS}


if TYPE_CHECKING:
    class SeenNames(Protocol):
        """What one call's guards share: the class is :func:`_bind_seen`'s, which exists only in its closure."""

        lookup: dict[int, str]
        used: list[str]
        inside: int

        def note(self, name: str) -> None: ...


def _bind_watch(watch_limit: int) -> Callable[[Any], bool]:
    """``watch(fn)``: whether this call of ``fn`` is one of its first ``watch_limit``, which the operator level sees."""
    # id(function) -> [function, calls so far]: holding the function keeps its id its own.
    calls: dict[int, list] = {}

    def watch(fn: Any) -> bool:
        """Whether this call of ``fn`` runs under the operator level too."""
        entry = calls.get(id(fn))
        if entry is None:
            if len(calls) >= 4096:  # a long-lived trusted process (validate) sees many functions
                calls.clear()
            entry = calls[id(fn)] = [fn, 0]
        entry[1] += 1
        return entry[1] <= watch_limit

    return watch


def _bind_seen(recognized: dict[str, tuple[tuple[int, Any], ...]]) -> Callable[[tuple[str, ...]], SeenNames]:
    """The class ``Seen`` of one call's forbidden names, which reads ``recognized`` (name -> (id, object)) once."""
    # forbidden names -> id(recognized object) -> the name it counts as: built once per tuple, read only.
    lookups: dict[tuple[str, ...], dict[int, str]] = {}

    class Seen:
        """The forbidden names one call used, in order of first use."""

        def __init__(self, forbidden: tuple[str, ...]):
            lookup = lookups.get(forbidden)
            if lookup is None:
                # An object recognized for several names counts as the first the exercise lists.
                lookup = {}
                for name in forbidden:
                    for key, _obj in recognized[name]:
                        lookup.setdefault(key, name)
                if len(lookups) < 64:       # an exercise's forbidden tuple: a handful per course
                    lookups[forbidden] = lookup
            self.lookup: dict[int, str] = lookup
            self.used: list[str] = []
            self.inside = 0  # > 0 while a call the function level named is running

        def note(self, name: str) -> None:
            if name not in self.used:
                self.used.append(name)

    return Seen


def _bind_guard_classes() -> tuple[Callable[[SeenNames], TorchFunctionMode], Callable[[SeenNames], TorchDispatchMode]]:
    """The classes of the two guards, the function and the operator level, which exist only in this closure."""

    class FunctionGuard(TorchFunctionMode):
        """The function level: the torch function (or ``torch.ops`` operator) that was called."""

        def __init__(self, seen: SeenNames):
            super().__init__()
            self.seen = seen

        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen = self.seen
            name = seen.lookup.get(id(func))
            if name is None:
                return func(*args, **(kwargs or {}))
            seen.note(name)
            seen.inside += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                seen.inside -= 1

    class OperatorGuard(TorchDispatchMode):
        """The operator level: each aten overload dispatched; one dict lookup per operator."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # Otherwise torch wraps __torch_dispatch__ in torch._disable_dynamo, a fifth of this
            # guard's cost per operator; torch.compile inside the student's function still works.
            return False

        def __init__(self, seen: SeenNames):
            super().__init__()
            self.seen = seen
            self.lookup = seen.lookup

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = self.lookup.get(id(func))
            if name is not None and not self.seen.inside:
                self.seen.note(name)
            return func(*args, **(kwargs or {}))

    return FunctionGuard, OperatorGuard


def _bind_guarded(function_guard_class: Callable[[SeenNames], TorchFunctionMode],
                  operator_guard_class: Callable[[SeenNames], TorchDispatchMode]) -> Callable[..., Any]:
    """``guarded(seen, operator_level, probe, fn, args, kwargs)``: the probe's call under guards of those classes."""
    # What says whether the guards are still in force, bound before any student code runs.
    function_enabled = torch._C._is_torch_function_enabled  # noqa: SLF001 - torch's C API: the guards' state
    excluded, python_key = torch._C._dispatch_tls_is_dispatch_key_excluded, torch._C.DispatchKey.Python  # noqa: SLF001

    def guards_in_force(function_guard: TorchFunctionMode, operator_guard: TorchDispatchMode | None) -> bool:
        """Whether the guards still see what the student's code calls: torch's function modes on, each
        guard still on its mode stack, the Python dispatch key not excluded."""
        if not function_enabled() or function_guard not in function_modes():
            return False
        return operator_guard is None or (operator_guard in dispatch_modes() and not excluded(python_key))

    def guarded(seen: SeenNames, operator_level: bool, probe: Callable, fn: Any, args: tuple, kwargs: dict) -> Any:
        """``probe(fn, ...)`` under the guards; a call that returns with them no longer in force, or leaves
        torch's mode stacks so that they cannot be taken off, is noted as :data:`~autograder.inside.forbidden.
        GUARD_OFF` (the trusted side zeroes the exercise)."""
        function_guard = function_guard_class(seen)
        operator_guard = operator_guard_class(seen) if operator_level else None
        returned = False
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(function_guard)
                if operator_guard is not None:
                    stack.enter_context(operator_guard)
                result = probe(fn, *args, **kwargs)
                returned = True
                if not guards_in_force(function_guard, operator_guard):
                    seen.note(GUARD_OFF)
        except Exception:
            if not returned:
                raise
            seen.note(GUARD_OFF)     # the guards could not be taken off: the mode stacks were changed
        return result

    return guarded


def bind_guards() -> tuple[Callable[[tuple[str, ...]], SeenNames], Callable[[Any], bool], Callable[..., Any]]:
    """The guards, bound now: the class of one call's forbidden names seen (:func:`_bind_seen`), which reads the
    forbidden names' objects resolved to ids once; ``watch(fn)``, how many calls the operator level watches
    (:func:`_bind_watch`); and ``guarded(...)``, a probe's call under the guards of the two levels
    (:func:`_bind_guard_classes`, :func:`_bind_guarded`). :func:`autograder.inside.probes.execute` binds them."""
    # (id, object): holding the object keeps its id from being reused by another.
    recognized = {name: tuple((id(obj), obj) for obj in objects) for name, objects in _recognized().items()}
    function_guard_class, operator_guard_class = _bind_guard_classes()
    return (_bind_seen(recognized), _bind_watch(OPERATOR_WATCHED_CALLS),
            _bind_guarded(function_guard_class, operator_guard_class))
