"""What the static scan counts as what: the words of :mod:`autograder.grading.source_scan`.

The scan resolves a name in a notebook to a qualified name (``Fn.softmax`` ->
``torch.nn.functional.softmax``); this module says what that qualified name *is*,
and nothing here reads code. Three vocabularies:

* forbidden calls, derived from :mod:`autograder.inside.forbidden` (one table with the
  run-time guard, so a forbidden call is added there and nowhere else): a qualified
  name is first rewritten to the spelling the table uses (:func:`canonical`: torch's
  private homes of a public function, an operator's overloads, ``torch.nn.modules``),
  then looked up (:func:`candidates`). A call is answered with its whole family, most
  specific first, so an exercise that forbids ``F.softmax`` but not ``torch.softmax``
  still hears of ``torch.softmax`` by the name it forbids (:func:`forbidden_names`).
  A method on a value the scan cannot name (``x.softmax(-1)``) is looked up by its
  method name (:data:`METHODS`);
* tampering: the names no exercise needs and a dodge does (:data:`TAMPER_NAMES`),
  the grader's own package (:func:`is_autograder`, all but ``autograder.check``);
* code the scan cannot read: ``exec``/``eval``/``compile`` and the builtins that look
  an attribute up by a name computed at run time.

Findings are strings: a forbidden name as exercises.md spells it, or a sentence
that starts with :data:`TAMPERING` or :data:`UNINSPECTABLE`.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable

from autograder.inside import forbidden

#: Findings that are not forbidden names start with one of these.
TAMPERING = "tampering: "
UNINSPECTABLE = "uninspectable: "

# -- what counts as which forbidden call (autograder.inside.forbidden: one table with the run-time guard) ---------
#: Canonical qualified name (see :func:`canonical`) -> candidates, most specific first: a finding is the
#: first candidate the exercise forbids.
QUALIFIED: dict[str, tuple[str, ...]] = {spelling: forbidden.candidates(f.name)
                                         for f in forbidden.TABLE for spelling in f.spellings}
#: Qualified-name prefixes: the fused attention kernels behind F.scaled_dot_product_attention.
QUALIFIED_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (prefix, forbidden.candidates(f.name)) for f in forbidden.TABLE for prefix in f.prefixes)
#: Methods of a value the scan cannot name (a tensor, in practice): ``x.softmax(-1)``.
METHODS: dict[str, tuple[str, ...]] = {method: forbidden.candidates(f.name)
                                       for f in forbidden.TABLE for method in f.methods}
#: Rewritten to the public spelling before the tables above are consulted.
_SPELLINGS = (("torch._ops.ops.", "torch.ops."), ("torch._C._VariableFunctions.", "torch."), ("torch._VF.", "torch."),
              ("torch._C._special.special_", "torch.special."), ("torch._C.TensorBase.", "torch.Tensor."),
              ("torch._C._TensorBase.", "torch.Tensor."))

# -- tampering ----------------------------------------------------------------------------------
#: Attribute and imported names no exercise needs and a dodge does: torch's switches for its
#: function and dispatch modes, and the ways into another frame's or function's variables.
TAMPER_NAMES = frozenset({
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "_python_dispatch",
    "_pop_mode", "_pop_mode_temporarily", "_disable_current_modes", "_pop_torch_function_stack",
    "_pop_torch_dispatch_stack", "_set_torch_function_mode", "_set_dispatch_mode", "_unset_dispatch_mode",
    "_push_on_torch_function_stack", "_push_on_torch_dispatch_stack", "_len_torch_function_stack",
    "_len_torch_dispatch_stack", "_get_function_stack_at", "_get_dispatch_stack_at", "_ExcludeDispatchKeyGuard",
    "_IncludeDispatchKeyGuard", "_ForceDispatchKeyGuard", "_dispatch_tls_set_dispatch_key_excluded",
    "_dispatch_tls_set_dispatch_key_included", "TorchFunctionMode",
    "TorchDispatchMode", "_getframe", "currentframe", "f_back", "f_locals", "f_globals", "f_builtins",
    "tb_frame", "gi_frame", "cr_frame", "__closure__", "cell_contents", "__globals__", "__code__",
    "get_referrers", "get_referents", "get_objects",
})
#: The names of the autograder package a notebook may use (``from autograder import check, submit``): the
#: self-check and the hand-in, which do nothing inside the grader.
ALLOWED_AUTOGRADER = frozenset({"autograder.check", "autograder.submit"})

# -- code the scan cannot read --------------------------------------------------------------------
#: Builtins that run code built from strings, by bare name and qualified.
DYNAMIC_CODE = frozenset({"exec", "eval", "compile"})
QUALIFIED_DYNAMIC_CODE = frozenset(f"builtins.{name}" for name in DYNAMIC_CODE)
DYNAMIC_CODE_REASON = "exec/eval/compile"
COMPUTED_NAME_REASON = "a torch attribute looked up by a computed name"
#: Builtins that reach an attribute by a name given as a value: ``getattr(F, "softmax")``.
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
#: Reflection: ways to fetch an object by a name held as data, which no scan can follow. A pickle's
#: GLOBAL opcode names any module attribute; attrgetter and methodcaller take dotted names; vars() and
#: __getattribute__ are a module's or an object's namespace; getattr, vars and __import__ passed as
#: values (``reduce(getattr, names, torch)``) are lookups by computed name.
REFLECTION_CALLS = frozenset({
    "pickle.loads", "pickle.load", "pickle.Unpickler", "pickle._loads", "pickle._load", "pickle._Unpickler",
    "_pickle.loads", "_pickle.load", "_pickle.Unpickler", "marshal.loads", "marshal.load", "copyreg.__newobj__",
    "operator.attrgetter", "operator.methodcaller", "builtins.vars", "builtins.getattr", "builtins.__import__",
    "shelve.open", "dill.loads", "cloudpickle.loads", "joblib.load",
})
REFLECTION_BUILTINS = frozenset({"vars", "getattr", "__import__"})
REFLECTION_REASON = "a name fetched by reflection (pickle, attrgetter, vars, getattr as a value)"


def canonical(qualified: str) -> str:
    """A qualified name in the spelling the tables use.

    ``torch._C._VariableFunctions.softmax`` -> ``torch.softmax``,
    ``torch.ops.aten._softmax.default`` -> ``torch.ops.aten._softmax``,
    ``torch.nn.modules.activation.MultiheadAttention`` -> ``torch.nn.MultiheadAttention``.
    """
    for old, new in _SPELLINGS:
        if qualified.startswith(old):
            qualified = new + qualified[len(old):]
    parts = qualified.split(".")
    if parts[:3] == ["torch", "ops", "aten"] and len(parts) > 4:
        return ".".join(parts[:4])          # an overload (.default, .int) is the same operator
    if parts[:3] == ["torch", "nn", "modules"] and len(parts) > 3:
        return "torch.nn." + parts[-1]
    return qualified


def candidates(qualified: str) -> tuple[str, ...]:
    """The forbidden names a qualified name is, most specific first; () if none."""
    name = canonical(qualified)
    found = QUALIFIED.get(name)
    if found is not None:
        return found
    return next((names for prefix, names in QUALIFIED_PREFIXES if name.startswith(prefix)), ())


def forbidden_names(hits: Iterable[str], wanted: list[str], defined_methods: Collection[str]) -> list[str]:
    """The forbidden names, as ``wanted`` spells them and in its order, that the scan's hits are.

    A hit is a qualified name, or ``method:NAME`` for a method called on a value the scan cannot name
    (:data:`METHODS`); a method the notebook defines in a class of its own (``defined_methods``) is not one.
    """
    names: list[str] = []
    for hit in hits:
        if hit.startswith("method:"):
            method = hit.removeprefix("method:")
            options = () if method in defined_methods else METHODS.get(method, ())
        else:
            options = candidates(hit)
        chosen = next((n for n in options if n in wanted), None)
        if chosen is not None and chosen not in names:
            names.append(chosen)
    names.sort(key=wanted.index)
    return names


def is_autograder(qualified: str) -> bool:
    """Whether a qualified name is the grader's package or inside it."""
    return qualified == "autograder" or qualified.startswith("autograder.")


__all__ = ["ALLOWED_AUTOGRADER", "ATTRIBUTE_FUNCTIONS", "COMPUTED_NAME_REASON", "DYNAMIC_CODE", "DYNAMIC_CODE_REASON",
           "METHODS", "QUALIFIED", "QUALIFIED_DYNAMIC_CODE", "QUALIFIED_PREFIXES", "TAMPERING", "TAMPER_NAMES",
           "UNINSPECTABLE", "candidates", "canonical", "forbidden_names", "is_autograder"]
