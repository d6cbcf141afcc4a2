"""Which forbidden calls an exercise's code can reach, read from the submission's source.

The worker's guards (:mod:`autograder.inside.probes`) see what the student's function
*does*, but they run in the student's process, where a cell can switch them off
(``torch._C.DisableTorchFunction()``, a patched ``autograder.inside.probes``). This scan
runs on the trusted side, on the text of the code cells only, and nothing in a
notebook can switch it off. For one exercise it reports:

* the forbidden calls the exercise's function can reach: its own body, the
  notebook's functions and classes it names (transitively), the values of the
  module-level names it uses (``sm = F.softmax``), through import aliases
  (``import torch.nn.functional as Fn``, ``from torch import softmax as s``),
  ``getattr(F, "softmax")``, ``torch.ops.aten._softmax``, aliases such as
  ``torch.special.softmax`` and method calls (``x.softmax(-1)`` is
  ``Tensor.softmax``); code that monkeypatches a module (``torch.exp = ...``)
  counts as reachable from every exercise. An earlier exercise's function that the
  grader's stand-in answers while this one runs is not the student's code here and
  is not walked into (:meth:`NotebookScan.exercise`'s ``answered``);
* tampering anywhere in the notebook, the same entries for every exercise:
  touching the grader (``import autograder.inside.probes``, ``sys.modules``), turning
  torch's function or dispatch modes off (``DisableTorchFunction``,
  ``torch.utils._python_dispatch``), reaching into frames or closures
  (``sys._getframe``, ``__closure__``);
* code it cannot read: a notebook too large or too deeply nested to parse
  (``uninspectable: ...``); in code the exercise runs, ``exec``/``eval``/``compile``
  and torch attributes looked up by a computed name (``tampering: ...``: code
  built from strings at run time is how a dodge would hide from this scan).

The runtime guards cannot see past a cell that disabled them, this scan cannot
see code built at run time: each covers the other's gap.
The scan is built to never flag honest code: names are resolved with Python's
own scoping (a local ``weights`` is not the demo cell's global ``weights``), and
a later ``def softmax`` shadows an earlier ``from torch.nn.functional import softmax``.

This module is the resolver: module-level bindings across cells, in the order the
cells run (:class:`NotebookScan`), and what an exercise's function reaches through
them. The walk of one definition with its scopes, which turns a name into the
qualified names it may be, is :mod:`autograder.grading.scan_walk`'s. What a
qualified name *is* (a forbidden call, tampering, code it cannot read) is
:mod:`autograder.grading.scan_vocabulary`'s; which names a scope binds is
:mod:`autograder.grading.scan_scopes`'s. It reads :mod:`ast`, not libcst's
ScopeProvider and QualifiedNameProvider: those are some 30 times slower per
notebook (``bench/bench_scan.py``), blind to the order cells run in, and on a
long ``a.b.b...`` line libcst's parser takes seconds or crashes the process.

Public API: :func:`scan_exercise`, or :func:`scan_notebook` once per submission
and :meth:`NotebookScan.exercise` per exercise (parsing is the expensive part).
Pass exactly the code the worker runs (``Cell.code`` of the cells not skipped):
a cell that does not parse is then a cell that never ran, and is ignored.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from autograder.grading.scan_scopes import (
    COMPOUND,
    SCOPES,
    compound_bodies,
    compound_targets,
    import_bindings,
    target_names,
)
from autograder.grading.scan_vocabulary import (
    DYNAMIC_CODE_REASON,
    TAMPERING,
    UNINSPECTABLE,
    forbidden_names,
)
from autograder.grading.scan_walk import MAX_ALIAS_DEPTH, Binding, Summary, Walker, is_call_to
from autograder.core.pyast import parse as parse_python

#: Sources larger than this (UTF-8 bytes, all cells together) are not parsed at all.
MAX_SOURCE_BYTES = 1 << 20


# -- module-level bindings ----------------------------------------------------------------------
class NotebookScan:
    """One submission's code cells, parsed once; :meth:`exercise` answers per exercise."""

    def __init__(self, sources: Sequence[str], unparsed: Iterable[int] = ()):
        unparsed = frozenset(unparsed)
        self.findings: list[str] = []                  # tampering and uninspectable: notebook-wide
        self._bindings: dict[str, list[Binding]] = {}
        self._stars: list[tuple[Binding, str]] = []   # (binding, module) of each ``from M import *``
        self._roots: list[ast.AST] = []                # statements that monkeypatch a module
        self._methods: set[str] = set()                # method names the notebook defines in classes
        self._summaries: dict[int, Summary] = {}
        self._keep: list[ast.AST] = []                 # summaries are keyed by id(): keep their nodes
        self._aliases: dict[str, set[str]] = {}       # module_qualified's memo
        self._active: dict[str, list[Binding]] = {}  # active's memo
        self._resolving: set[str] = set()
        self._dynamic_code = False
        self.order = 0
        size = sum(len(s.encode("utf-8", errors="replace")) for s in sources)
        if size > MAX_SOURCE_BYTES:
            self.note(f"{UNINSPECTABLE}the code is too large to inspect ({size} bytes, at most "
                       f"{MAX_SOURCE_BYTES})")
            return
        trees = []
        for index, source in enumerate(sources):
            try:
                trees.append(parse_python(source))
            except (SyntaxError, ValueError):
                continue  # the worker compiles the same text and fails the same way: this cell never ran
            except (RecursionError, MemoryError) as exc:
                if index in unparsed:
                    continue  # the worker's compiler gave up on it too: it never ran
                self.note(f"{UNINSPECTABLE}code cell {index} is too deeply nested to inspect "
                           f"({type(exc).__name__})")
        for tree in trees:
            self._collect(tree.body, conditional=False)
        for tree in trees:
            for statement in tree.body:
                if DYNAMIC_CODE_REASON in Walker(self, tamper=True).walk(statement).hidden:
                    self._dynamic_code = True

    def note(self, finding: str) -> None:
        """A notebook-wide finding (tampering, uninspectable), said once."""
        if finding not in self.findings:
            self.findings.append(finding)

    # module level ------------------------------------------------------------------------
    def bind(self, name: str, binding: Binding) -> None:
        """One more module-level binding of ``name`` (statements' ``order`` counts them across cells)."""
        self._bindings.setdefault(name, []).append(binding)
        self._active.pop(name, None)
        self._aliases.clear()  # an alias may lead through this name

    def _collect(self, body: list[ast.stmt], conditional: bool) -> None:
        """Record the module-level bindings of ``body``, in order."""
        for statement in body:
            self.order += 1
            order = self.order
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bind(statement.name, Binding(order, conditional, node=statement))
                if isinstance(statement, ast.ClassDef):
                    self._methods.update(s.name for s in statement.body
                                         if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                self._collect_import(statement, order, conditional)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._collect_assignment(statement, order, conditional)
            elif isinstance(statement, COMPOUND):
                self._collect_compound(statement, order)

    def _collect_import(self, statement: ast.Import | ast.ImportFrom, order: int, conditional: bool) -> None:
        """Record the names an import binds, and a ``from M import *`` (it may bind any name: see active)."""
        for name, qualified in import_bindings(statement):
            self.bind(name, Binding(order, conditional, target=qualified))
        if isinstance(statement, ast.ImportFrom) and any(a.name == "*" for a in statement.names):
            module = "." * statement.level + (statement.module or "")
            self._stars.append((Binding(order, True, target=module), module))

    def _collect_compound(self, statement: ast.stmt, order: int) -> None:
        """Record what a compound statement binds (for, with ... as) and what its bodies bind, all conditional."""
        for target in compound_targets(statement):
            for name in target_names(target[0]):
                self.bind(name, Binding(order, True, node=target[1]))
        for inner in compound_bodies(statement):
            self._collect(inner, conditional=True)

    def _collect_assignment(self, statement: ast.Assign | ast.AnnAssign | ast.AugAssign, order: int,
                            conditional: bool) -> None:
        value = statement.value
        if value is None:
            return
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(value.elts):
                pairs = list(zip(target.elts, value.elts))
            else:
                pairs = [(target, value)]
            for one_target, one_value in pairs:
                for name in target_names(one_target) if not isinstance(one_target, ast.Attribute) else []:
                    uses_itself = isinstance(statement, ast.AugAssign) or any(
                        isinstance(n, ast.Name) and n.id == name for n in ast.walk(one_value))
                    self.bind(name, Binding(order, conditional, node=one_value, shadows=not uses_itself))
                # globals()["name"] = value binds name as well
                if isinstance(one_target, ast.Subscript) and is_call_to(one_target.value, "globals") \
                        and isinstance(one_target.slice, ast.Constant) and isinstance(one_target.slice.value, str):
                    self.bind(one_target.slice.value, Binding(order, True, node=one_value))

    def active(self, name: str) -> list[Binding]:
        """The bindings of ``name`` that may hold when the exercise runs (cells run top to bottom)."""
        if name not in self._active:
            found = list(self._bindings.get(name, []))
            found += [Binding(b.order, True, target=f"{module}.{name}") for b, module in self._stars]
            found.sort(key=lambda b: b.order)
            last = max((i for i, b in enumerate(found) if not b.conditional and b.shadows), default=0)
            self._active[name] = found[last:]
        return self._active[name]

    def module_qualified(self, name: str, depth: int) -> set[str]:
        """What a module-level name is an alias of: ``F`` -> torch.nn.functional, ``sm`` -> ..F.softmax.

        Memoized, and a name met again while it is being resolved counts as nothing: aliases
        that refer to each other cost one pass, not one per path.
        """
        if name in self._aliases:
            return self._aliases[name]
        if depth > MAX_ALIAS_DEPTH or name in self._resolving:
            return set()
        self._resolving.add(name)
        out: set[str] = set()
        for binding in self.active(name):
            if binding.target:
                out.add(binding.target)
            elif binding.node is not None and not isinstance(binding.node, SCOPES):
                out |= Walker(self).qualify(binding.node, (), depth + 1)
        self._resolving.discard(name)
        self._aliases[name] = out
        return out

    def summary(self, node: ast.AST) -> Summary:
        key = id(node)
        if key not in self._summaries:
            self._keep.append(node)
            self._summaries[key] = Walker(self).walk(node)
        return self._summaries[key]

    def note_root(self, statement: ast.AST) -> None:
        if statement not in self._roots:
            self._roots.append(statement)

    # per exercise ---------------------------------------------------------------------------
    def exercise(self, function: str, forbidden: Iterable[str], answered: Iterable[str] = ()) -> list[str]:
        """The forbidden names ``function`` can reach, in ``forbidden``'s order, then the notebook's
        tampering and uninspectable findings. Empty: nothing found.

        ``answered``: the functions (or classes) of earlier exercises that the grader's stand-ins answer while
        this exercise runs (``earlier_mistakes: substitute``, :mod:`autograder.grading.earlier`). The worker
        puts a stand-in in the namespace in place of each for the call, so where the code looks one of these
        names up when it runs (inside a function body), the student's definition is not the code that ran
        and is not walked into, nor what only it reaches: a mistake there cost its own exercise's points,
        never this one's. Where the name is read earlier (a default argument, a decorator, a class body, a
        module-level alias ``attend = multi_head_attention``), the student's own function was captured
        before any stand-in and it is walked as usual.
        """
        wanted = list(dict.fromkeys(forbidden))
        defined = bool(self.active(function))
        hits, hidden = self._reached(function, frozenset(answered) - {function})
        out = forbidden_names(hits, wanted, self._methods) + list(self.findings)
        out += [f"{TAMPERING}{reason} in code the exercise runs (it cannot be inspected)" for reason in sorted(hidden)]
        if not defined and self._dynamic_code:
            out.append(f"{TAMPERING}{function} is not defined in plain code (exec/eval/compile)")
        return out

    def _reached(self, function: str, answered: frozenset[str]) -> tuple[set[str], set[str]]:
        """Walk ``function`` and all it reaches (the monkeypatching too): the hits, the hidden reasons met."""
        hits: set[str] = set()
        hidden: set[str] = set()
        seen_names: set[str] = set()
        queue: list[str] = [function]
        nodes: list[ast.AST] = list(self._roots)
        while queue or nodes:
            while nodes:
                summary = self.summary(nodes.pop())
                hits |= summary.hits
                hidden |= summary.hidden
                queue.extend(name for name in summary.refs - seen_names
                             if name not in answered or name in summary.early)
            if not queue:
                break
            name = queue.pop()
            if name in seen_names:
                continue
            seen_names.add(name)
            for binding in self.active(name):
                if binding.target:
                    hits.add(binding.target)
                elif binding.node is not None:
                    nodes.append(binding.node)
        return hits, hidden



def scan_notebook(sources: Sequence[str], unparsed: Iterable[int] = ()) -> NotebookScan:
    """Parse a submission's code cells once (``Cell.code`` of the cells the worker runs).

    ``unparsed``: positions in ``sources`` of cells the worker could not compile either
    (RecursionError, MemoryError): one that defeats this parser too is ignored, as a
    SyntaxError is; any other cell this parser cannot read is "uninspectable".
    """
    return NotebookScan(sources, unparsed)


def scan_exercise(sources: Sequence[str], function: str, forbidden: Iterable[str],
                  answered: Iterable[str] = ()) -> list[str]:
    """What the static scan finds for one exercise; empty when nothing.

    ``sources``: the code of the notebook's code cells, in order (``Cell.code`` of the
    cells the worker runs). ``function``: the exercise's function or class name.
    ``forbidden``: its forbidden calls as exercises.md spells them (``"F.softmax"``).
    ``answered``: the earlier exercises' functions the grader's stand-ins answer while it
    runs (see :meth:`NotebookScan.exercise`).

    Returns the forbidden names the function can reach, as spelled in ``forbidden``
    and in its order, then notebook-wide findings: ``"tampering: ..."`` (the same for
    every exercise of the notebook) and ``"uninspectable: ..."`` (too large, too deeply
    nested). Never raises for anything in ``sources``.
    """
    return scan_notebook(sources).exercise(function, forbidden, answered)


# TAMPERING and UNINSPECTABLE are scan_vocabulary's: re-exported, as they begin what the scan returns.
__all__ = ["MAX_SOURCE_BYTES", "TAMPERING", "UNINSPECTABLE", "NotebookScan", "scan_exercise", "scan_notebook"]
