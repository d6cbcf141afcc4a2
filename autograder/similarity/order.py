"""Independent statements in one order: two students who wrote the same statements in another order (those
that do not depend on each other) get one order (:func:`reorder`).

A statement depends on an earlier one of its block when it reads what that one writes, writes what it reads or
writes, or when either is a barrier: a ``return``, ``raise``, ``break``, ``continue``, a bare call (which may
change anything), a ``try`` or a ``with``. A ``def`` (a class's method) reads only its decorators, defaults and
bases and binds its name: methods swap freely. Among the statements free to go next, the one with the smallest
anonymous text (:func:`autograder.similarity.tokens.anonymous`) goes first. Trusted: the tree is only read and its
lists of statements reordered in place.
"""
from __future__ import annotations

import ast

from autograder.similarity.tokens import DEFINITIONS, all_nodes, anonymous

#: Statements in a block past this many are left in their order (the sort is quadratic).
MAX_REORDERED = 200


def reorder(nodes: list[ast.AST], local: frozenset[str]) -> None:
    """Every block of statements of ``nodes`` (a tree's :func:`~autograder.similarity.tokens.all_nodes`) in its
    canonical order (see :func:`canonical_order`); ``local``: the names its sorting keys read as ``_``."""
    for node in nodes:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and len(block) > 1 and all(isinstance(s, ast.stmt) for s in block):
                setattr(node, field, canonical_order(block, local))


def canonical_order(block: list[ast.stmt], local: frozenset[str]) -> list[ast.stmt]:
    """The statements of one block in a topological order of their dependencies, the smallest anonymous text
    first among those free to go: two orders of independent statements give one order."""
    if len(block) > MAX_REORDERED:
        return block
    effects = [_effects(s, local) for s in block]
    keys = [anonymous(s, local) for s in block]
    after: list[set[int]] = [set() for _ in block]      # i -> the statements that must come before it
    for j in range(len(block)):
        for i in range(j):
            if _depends(effects[i], effects[j]):
                after[j].add(i)
    placed: list[int] = []
    left = set(range(len(block)))
    while left:
        free = [j for j in left if not after[j] - set(placed)]
        chosen = min(free, key=lambda j: (keys[j], j))
        placed.append(chosen)
        left.discard(chosen)
    return [block[i] for i in placed]


#: What a statement touches: (names read, names written, is a barrier).
Effects = tuple[frozenset[str], frozenset[str], bool]
#: Statements nothing moves across: they leave the block, or act on the world.
_BARRIERS = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Expr, ast.Delete,
             ast.Yield, ast.YieldFrom, ast.Await, ast.Try, ast.With, ast.AsyncWith)


def _effects(statement: ast.stmt, local: frozenset[str]) -> Effects:
    if isinstance(statement, DEFINITIONS):
        # A def (a class's method) runs nothing where it stands: it reads its decorators, defaults and bases and
        # binds its name, so two methods of a class are free to swap.
        around = [*statement.decorator_list, *(statement.bases if isinstance(statement, ast.ClassDef) else
                                               [*statement.args.defaults, *statement.args.kw_defaults])]
        used = {n.id for a in around if a is not None for n in all_nodes(a) if isinstance(n, ast.Name)}
        return frozenset(used), frozenset({statement.name}), False
    reads: set[str] = set()
    writes: set[str] = set()
    barrier = False
    for node in all_nodes(statement):
        if isinstance(node, _BARRIERS):
            barrier = True
        elif isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            writes.update(_base_names(node))         # x[i] = ..., x.a = ...: x changes
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            writes.update(_base_names(node.func))    # x.add_(1), x.masked_fill_(...): in place
    return frozenset(reads), frozenset(writes), barrier


def _base_names(node: ast.AST) -> set[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return {node.id} if isinstance(node, ast.Name) else set()


def _depends(first: Effects, second: Effects) -> bool:
    """Whether ``second`` must stay after ``first``."""
    reads1, writes1, barrier1 = first
    reads2, writes2, barrier2 = second
    return barrier1 or barrier2 or bool(writes1 & (reads2 | writes2)) or bool(reads1 & writes2)
