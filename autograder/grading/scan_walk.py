"""The walk of one definition, statement or value of a notebook with Python's scoping: the static scan's
(:mod:`autograder.grading.source_scan`) way from a name in code to the qualified names it may be.

A :class:`Walker` reads each name of one node in the scopes it sits in
(:mod:`autograder.grading.scan_scopes`): a local name is what its scope binds, a module-level one what the
notebook's bindings say (:meth:`NotebookState.module_qualified`, the resolver's), through attributes,
``getattr(x, "name")``, ``__import__``/``importlib.import_module`` of a constant and ``sys.modules[...]``.
It sums up what it met (:class:`Summary`): the qualified names and method names it reaches, the module-level
names it uses (and which of them it reads at once), and what it does that cannot be read (code built at run
time, a name computed at run time, reflection). With ``tamper`` it also records, on the scan, tampering and
the statements that monkeypatch a module. What a qualified name *is* stays
:mod:`autograder.grading.scan_vocabulary`'s.

What it walks is a student's code, parsed and never run: a walk keeps its own stack rather than recursing
through the tree, and a name is followed through aliases :data:`MAX_ALIAS_DEPTH` deep at most.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Protocol

from autograder.grading.scan_scopes import SCOPES, Scope, entered
from autograder.grading.scan_vocabulary import (
    ALLOWED_AUTOGRADER,
    ATTRIBUTE_FUNCTIONS,
    COMPUTED_NAME_REASON,
    DYNAMIC_CODE,
    DYNAMIC_CODE_REASON,
    METHODS,
    QUALIFIED_DYNAMIC_CODE,
    REFLECTION_BUILTINS,
    REFLECTION_CALLS,
    REFLECTION_REASON,
    TAMPER_NAMES,
    TAMPERING,
    is_autograder,
)

#: How many module-level aliases deep a name is followed (``a = F.softmax; b = a; ...``).
MAX_ALIAS_DEPTH = 16
#: Nodes that name nothing: not worth a visit.
_INERT = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Pass)


# -- a binding, and what a walk finds ------------------------------------------------------------
@dataclass
class Binding:
    """One module-level binding of a name: an import, a def/class, or an assigned value."""

    order: int                      # position among module-level statements, across cells
    conditional: bool               # inside if/for/try/with...: it does not hide earlier bindings
    target: str = ""                # an import: the qualified name bound
    node: ast.AST | None = None     # a def/class node, or the assigned value (walked when reached)
    shadows: bool = True            # False for ``x = f(x)``: the earlier x is still used


@dataclass
class Summary:
    """What walking one definition or value found."""

    hits: set[str] = field(default_factory=set)        # qualified names, and "method:<name>"
    refs: set[str] = field(default_factory=set)        # module-level names it uses
    # Of refs, those read when the definition or statement itself runs (a decorator, a default, a class body, a
    # module-level value), not when a function defined in it is called: the value they hold then is kept.
    early: set[str] = field(default_factory=set)
    hidden: set[str] = field(default_factory=set)      # what it does that the scan cannot read


class NotebookState(Protocol):
    """What a walk reads of the notebook's module-level bindings and records on its scan:
    :class:`autograder.grading.source_scan.NotebookScan`, named here, not imported (it walks with this module)."""

    order: int      # the module-level statement a binding made now counts as

    def bind(self, name: str, binding: Binding) -> None: ...

    def active(self, name: str) -> list[Binding]: ...

    def module_qualified(self, name: str, depth: int) -> set[str]: ...

    def note(self, finding: str) -> None: ...

    def note_root(self, statement: ast.AST) -> None: ...


def is_call_to(node: ast.AST, name: str) -> bool:
    """Whether ``node`` calls the plain name ``name`` (``globals()``, ``getattr(...)``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def constant_str(node: ast.AST | None) -> str | None:
    """The text of a string constant, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


# -- walking code -------------------------------------------------------------------------------
class Walker:
    """Walks one statement, definition or expression with Python's scoping, without recursion.

    With ``tamper``, it also records tampering and module monkeypatching on the scan.
    """

    def __init__(self, scan: NotebookState, tamper: bool = False):
        self.scan = scan
        self.tamper = tamper
        self._called: set[int] = set()       # the func nodes of calls met so far (they are visited first)

    def walk(self, root: ast.AST) -> Summary:
        summary = Summary()
        stack: list[tuple[ast.AST, tuple[Scope, ...]]] = [(root, ())]
        while stack:
            node, scopes = stack.pop()
            if isinstance(node, SCOPES):
                stack.extend(entered(node, scopes))
                continue
            self._visit(node, scopes, summary, root)
            stack.extend((child, scopes) for child in ast.iter_child_nodes(node) if not isinstance(child, _INERT))
        return summary

    # names --------------------------------------------------------------------------------
    @staticmethod
    def _local(name: str, scopes: tuple[Scope, ...]) -> Scope | None:
        """The scope that binds ``name`` here, or None for a module-level (global) name."""
        for depth, scope in enumerate(reversed(scopes)):
            if scope.is_class and depth > 0:
                continue  # a class body's names are not visible in its methods
            if name in scope.declared_global:
                return None
            if name in scope.bound:
                return scope
        return None

    def qualify(self, node: ast.AST, scopes: tuple[Scope, ...], depth: int = 0) -> set[str]:
        """The qualified names an expression may be (``Fn.softmax`` -> torch.nn.functional.softmax)."""
        attrs: list[str] = []
        while True:
            if depth > MAX_ALIAS_DEPTH:
                return set()
            if isinstance(node, ast.Attribute):
                attrs.append(node.attr)
                node = node.value
                continue
            if isinstance(node, ast.Call) and is_call_to(node, "getattr") and len(node.args) >= 2 \
                    and (looked_up := constant_str(node.args[1])) is not None:
                attrs.append(looked_up)
                node, depth = node.args[0], depth + 1
                continue
            break
        suffix = "".join(f".{a}" for a in reversed(attrs))
        if isinstance(node, ast.Name):
            scope = self._local(node.id, scopes)
            if scope is not None:
                bases = {scope.imports[node.id]} if node.id in scope.imports else set()
            else:
                bases = self.scan.module_qualified(node.id, depth)
        elif isinstance(node, ast.Call) and node.args and (module := constant_str(node.args[0])) is not None:
            bases = self._imported(node, module, scopes, depth)
        elif isinstance(node, ast.Subscript) and (key := constant_str(node.slice)) is not None \
                and "sys.modules" in self.qualify(node.value, scopes, depth + 1):
            bases = {key}
        else:
            bases = set()
        return {base + suffix for base in bases}

    def _imported(self, node: ast.Call, module: str, scopes: tuple[Scope, ...], depth: int) -> set[str]:
        """The module a call imports by the constant name ``module`` (``__import__``, ``import_module``); or none."""
        if is_call_to(node, "__import__") and self._local("__import__", scopes) is None:
            # __import__("a.b") is a; with a fromlist it is a.b
            fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
            return {module if fromlist else module.split(".")[0]}
        if "importlib.import_module" in self.qualify(node.func, scopes, depth + 1):
            return {module}
        return set()

    # one node -----------------------------------------------------------------------------------
    def _visit(self, node: ast.AST, scopes: tuple[Scope, ...], summary: Summary, root: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self._visit_name(node, scopes, summary)
        elif isinstance(node, ast.Attribute):
            self._visit_attribute(node, scopes, summary, root)
        elif isinstance(node, ast.Call):
            self._visit_call(node, scopes, summary, root)
        elif self.tamper and isinstance(node, (ast.Import, ast.ImportFrom)):
            self._tampering_import(node)
        elif self.tamper and isinstance(node, ast.NamedExpr) and all(s.is_comprehension for s in scopes):
            self.scan.bind(node.target.id, Binding(self.scan.order, True, node=node.value))  # module level
        elif self.tamper and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and is_autograder(node.value):
            self.scan.note(f"{TAMPERING}names the grader's module {node.value[:60]!r}")
        if self.tamper and isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            self._tampering_assignment(node, scopes, root)

    def _visit_name(self, node: ast.Name, scopes: tuple[Scope, ...], summary: Summary) -> None:
        if isinstance(node.ctx, ast.Load) and self._local(node.id, scopes) is None:
            summary.refs.add(node.id)
            if not any(not s.is_class and not s.is_comprehension for s in scopes):
                summary.early.add(node.id)      # outside any function body: read when the code runs, not later
            if node.id in REFLECTION_BUILTINS and id(node) not in self._called \
                    and not self.scan.active(node.id):
                summary.hidden.add(REFLECTION_REASON)       # getattr as a value: reduce(getattr, ...)
        if self.tamper and node.id in TAMPER_NAMES:
            self.scan.note(f"{TAMPERING}uses {node.id}")

    def _visit_attribute(self, node: ast.Attribute, scopes: tuple[Scope, ...], summary: Summary,
                         root: ast.AST) -> None:
        """An attribute: what it may be (or a method of a value it cannot name), reflection, tampering."""
        qualified = self.qualify(node, scopes)
        summary.hits |= qualified
        if not qualified and node.attr in METHODS:
            summary.hits.add(f"method:{node.attr}")
        if node.attr == "__dict__" and any(q.startswith("torch") for q in qualified):
            summary.hidden.add(COMPUTED_NAME_REASON)   # torch.nn.functional.__dict__["soft" + "max"]
        if node.attr == "__getattribute__":
            summary.hidden.add(REFLECTION_REASON)      # object.__getattribute__(torch._C, name)
        if self.tamper:
            self._tampering_attribute(node, qualified, scopes, root)

    def _tampering_assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete,
                              scopes: tuple[Scope, ...], root: ast.AST) -> None:
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)) and self.qualify(target.value, scopes):
                self.scan.note_root(root)  # monkeypatches a module: runs for every exercise
            elif isinstance(target, ast.Name) and scopes and target.id in scopes[-1].declared_global \
                    and (value := getattr(node, "value", None)) is not None:
                # ``global x; x = ...`` inside a function rebinds the module-level x
                self.scan.bind(target.id, Binding(self.scan.order, True, node=value))

    def _visit_call(self, node: ast.Call, scopes: tuple[Scope, ...], summary: Summary, root: ast.AST) -> None:
        self._called.add(id(node.func))
        qualified = self.qualify(node, scopes)      # getattr(F, "softmax"), importlib.import_module("x")
        summary.hits |= qualified
        builtin = node.func.id if isinstance(node.func, ast.Name) and self._local(node.func.id, scopes) is None \
            and not self.scan.active(node.func.id) else None
        called = self.qualify(node.func, scopes)
        if builtin in DYNAMIC_CODE or called & QUALIFIED_DYNAMIC_CODE:
            summary.hidden.add(DYNAMIC_CODE_REASON)
        if builtin == "vars" or called & REFLECTION_CALLS:
            summary.hidden.add(REFLECTION_REASON)       # pickle.loads(b"...GLOBAL torch._C ..."), vars(torch._C)
        if builtin not in ATTRIBUTE_FUNCTIONS or len(node.args) < 2:
            return
        attr = constant_str(node.args[1])
        base = self.qualify(node.args[0], scopes)
        if attr is None and any(b == "torch" or b.startswith("torch.") for b in base):
            summary.hidden.add(COMPUTED_NAME_REASON)   # getattr(torch._C, "Disable" + "TorchFunction")
        if attr in METHODS and not base and builtin == "getattr":
            summary.hits.add(f"method:{attr}")
        if not self.tamper:
            return
        if attr in TAMPER_NAMES:
            self.scan.note(f"{TAMPERING}uses {attr}")
        reads_check = builtin in ("getattr", "hasattr") and base == {"autograder"} and attr == "check"
        if any(is_autograder(b) for b in base) and not reads_check:
            self.scan.note(f"{TAMPERING}{builtin} on the grader's module")
        if builtin in ("setattr", "delattr") and base:
            self.scan.note_root(root)  # monkeypatches a module: runs for every exercise

    def _tampering_attribute(self, node: ast.Attribute, qualified: set[str], scopes: tuple[Scope, ...],
                             root: ast.AST) -> None:
        if node.attr in TAMPER_NAMES:
            self.scan.note(f"{TAMPERING}uses {node.attr}")
        for name in qualified:
            if name == "sys.modules":
                self.scan.note(f"{TAMPERING}uses sys.modules")
            if is_autograder(name) and (name not in ALLOWED_AUTOGRADER or not isinstance(node.ctx, ast.Load)):
                self.scan.note(f"{TAMPERING}touches {'.'.join(name.split('.')[:3])[:80]}")

    def _tampering_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            for module in modules:
                if is_autograder(module) and module != "autograder":
                    self.scan.note(f"{TAMPERING}imports {module[:80]}")
        else:
            module = "." * node.level + (node.module or "")
            modules = [module]
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if is_autograder(module) and full not in ALLOWED_AUTOGRADER:
                    self.scan.note(f"{TAMPERING}imports {full[:80]}")
                if alias.name in TAMPER_NAMES:
                    self.scan.note(f"{TAMPERING}uses {alias.name}")
        for module in modules:
            for part in module.split("."):
                if part in TAMPER_NAMES:
                    self.scan.note(f"{TAMPERING}uses {part}")
