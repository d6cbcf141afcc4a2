"""Python's binding rules, read off an :mod:`ast` tree: which names a scope binds.

The static scan (:mod:`autograder.grading.source_scan`) never flags honest code
because it resolves a name the way Python does: a function's parameter ``weights``
is not the demo cell's global ``weights``. This module answers, for one scope node
(a function, lambda, class body or comprehension), which names it binds
(:func:`scope_of`: assignments, parameters, imports, ``def``/``class``, ``except
... as``, ``match`` captures, less what it declares ``global``), and for the
module level, what a compound statement binds (:func:`compound_targets`) and
which bodies it holds (:func:`compound_bodies`).

Only the rules that decide *which* binding a name refers to are kept: a class
body's names are not visible in its methods, a comprehension has a scope of its
own (its walrus targets belong to the enclosing one), a nested ``def`` binds its
name in the enclosing scope and keeps its insides. Nothing here recurses: a
notebook's nesting is bounded by what the parser accepts, not by Python's stack.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

#: The nodes that open a scope of their own.
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)
#: Statements whose bodies run in the enclosing scope (their bindings there are conditional).
COMPOUND: tuple[type[ast.stmt], ...] = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With,
                                        ast.AsyncWith, ast.Match)
if hasattr(ast, "TryStar"):  # Python 3.11+
    COMPOUND += (ast.TryStar,)


@dataclass
class Scope:
    """The names one function, lambda, comprehension or class body binds (Python's rules)."""

    bound: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)    # local name -> qualified module/object
    declared_global: set[str] = field(default_factory=set)
    is_class: bool = False
    is_comprehension: bool = False    # its walrus targets belong to the enclosing scope


def target_names(target: ast.AST) -> list[str]:
    """The names an assignment target binds (``a, (b, *c) = ...``: a, b, c)."""
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(bound name, qualified name) for each alias; star imports are left to the caller."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out.append((alias.asname, alias.name))
            else:
                top = alias.name.split(".")[0]
                out.append((top, top))
    else:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                out.append((alias.asname or alias.name, f"{module}.{alias.name}"))
    return out


def children_in_scope(node: ast.AST) -> Iterable[ast.AST]:
    """The nodes whose names belong to ``node``'s own scope: nested scopes contribute only their name."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        stack: list[ast.AST] = list(node.body)
    elif isinstance(node, ast.Lambda):
        stack = [node.body]
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        stack = [node.elt, *node.generators]
    elif isinstance(node, ast.DictComp):
        stack = [node.key, node.value, *node.generators]
    else:
        stack = [node]
    while stack:
        child = stack.pop()
        yield child
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # its name is bound here (see scope_of); its insides are its own scope
        if isinstance(child, SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(child))


def scope_of(node: ast.AST) -> Scope:
    """The names a scope node binds (``global`` declarations excluded: those are the module's). Worked out
    once per node (a definition is walked for the notebook and again for each exercise that reaches it);
    the Scope is never changed afterwards."""
    found: Scope | None = node.__dict__.get("_scope")
    if found is not None:
        return found
    found = node._scope = _scope_of(node)  # type: ignore[attr-defined]  # noqa: SLF001 - a memo on the ast node
    return found


def _scope_of(node: ast.AST) -> Scope:
    scope = Scope(is_class=isinstance(node, ast.ClassDef),
                  is_comprehension=isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))
    scope.bound.update(_parameters(node))
    for child in children_in_scope(node):
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            scope.bound.add(child.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child is not node:
            scope.bound.add(child.name)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            bindings = import_bindings(child)
            scope.bound.update(name for name, _qualified in bindings)
            scope.imports.update(bindings)
        elif isinstance(child, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and child.name:
            scope.bound.add(child.name)    # except ... as NAME; a match capture
        elif isinstance(child, ast.Global):
            scope.declared_global.update(child.names)
        elif isinstance(child, ast.Nonlocal):
            scope.bound.update(child.names)
        elif isinstance(child, ast.MatchMapping) and child.rest:
            scope.bound.add(child.rest)
    scope.bound -= scope.declared_global
    return scope


def _parameters(node: ast.AST) -> list[str]:
    """The names a function's or lambda's parameters bind (none for another scope node)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return []
    args = node.args
    return [arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
            if arg is not None]


def entered(node: ast.AST, scopes: tuple[Scope, ...]) -> list[tuple[ast.AST, tuple[Scope, ...]]]:
    """The children of a scope node (one of :data:`SCOPES`), each with the scopes it is evaluated in:
    defaults, decorators, bases and a comprehension's first iterable outside it, the rest inside."""
    inner = (*scopes, scope_of(node))
    outer_parts: list[ast.AST] = []
    inner_parts: list[ast.AST] = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        outer_parts = [*node.decorator_list, *node.args.defaults,
                       *(d for d in node.args.kw_defaults if d is not None)]
        inner_parts = list(node.body)
    elif isinstance(node, ast.ClassDef):
        outer_parts = [*node.decorator_list, *node.bases, *node.keywords]
        inner_parts = list(node.body)
    elif isinstance(node, ast.Lambda):
        outer_parts = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        inner_parts = [node.body]
    else:  # a comprehension (the rest of SCOPES): its first iterable is evaluated outside it
        assert isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))
        first, *rest = node.generators
        outer_parts = [first.iter]
        inner_parts = [first.target, *first.ifs, *rest]
        inner_parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    return [(p, scopes) for p in outer_parts] + [(p, inner) for p in inner_parts]


def compound_targets(statement: ast.stmt) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs a compound statement binds at its own level: for, with ... as."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [(statement.target, statement.iter)]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [(item.optional_vars, item.context_expr) for item in statement.items if item.optional_vars]
    return []


def compound_bodies(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists a compound statement holds: body, else, finally, handlers, cases."""
    bodies = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody")]
    out = [b for b in bodies if isinstance(b, list)]
    out += [h.body for h in getattr(statement, "handlers", [])]
    out += [c.body for c in getattr(statement, "cases", [])]
    return out


__all__ = ["COMPOUND", "SCOPES", "Scope", "children_in_scope", "compound_bodies", "compound_targets",
           "import_bindings", "scope_of", "target_names"]
