"""The code as tokens: a parsed function read as a flat list of tokens (:class:`Writer`), the names it binds
(:func:`local_names`), its nodes in one list (:func:`all_nodes`).

A token is a node's type, a field's value, a local name as ``\\0name``, a name the function does not bind as
``N:name`` (a module path in one spelling: ``torch.nn.functional.softmax`` is ``F.softmax``), a constant as
``C:value``; a chain of ``+`` (or ``*``) is one node of n operands. Read with every local name as ``_``
(:func:`anonymous`), the tokens are the key that puts operands and statements in one order
(:mod:`autograder.similarity.normalize`, :mod:`autograder.similarity.order`); recorded node by node, they are what
:mod:`autograder.similarity.fragments` hashes. Trusted: nothing is executed; a tree too deep for this recursion
raises RecursionError, which the caller turns into "not compared".
"""
from __future__ import annotations

import ast

#: Module paths spelled several ways, each with one spelling (the longest prefix first).
MODULE_ALIASES: tuple[tuple[str, str], ...] = (
    ("torch.nn.functional.", "F."), ("nn.functional.", "F."), ("functional.", "F."), ("numpy.", "np."))
#: What an exercise defines: a function (most), or a class (an ``nn.Module``: 4.4's ``MultiHeadAttention``).
Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node under ``tree``, itself first, breadth first (what :func:`ast.walk` yields, at half its cost)."""
    out = [tree]
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, ast.AST))
    return out


def local_names(fn: Definition, nodes: list[ast.AST] | None = None) -> frozenset[str]:
    """The names the function binds: its parameters and every name it assigns, at any depth (nested functions,
    comprehensions, ``except ... as``, imports inside it), less those it declares ``global``; a class's methods
    keep their names (``forward`` is the task's). ``nodes``: its :func:`all_nodes`, when the caller has them."""
    found: set[str] = set()
    declared: set[str] = set()
    methods = {id(s) for s in fn.body} if isinstance(fn, ast.ClassDef) else set()
    for node in nodes if nodes is not None else all_nodes(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, DEFINITIONS) and node is not fn and id(node) not in methods:
            found.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global):
            declared.update(node.names)
    return frozenset(found - declared)


def dotted(node: ast.AST, local: frozenset[str]) -> str | None:
    """``torch.nn.functional.softmax`` as one name, its module path in one spelling (``F.softmax``); None for
    anything but a chain of attributes on a name the function does not bind."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id in local:
        return None
    name = ".".join([node.id, *reversed(parts)])
    for long, short in MODULE_ALIASES:
        if name.startswith(long):
            return short + name[len(long):]
    return name


def anonymous(node: ast.AST, local: frozenset[str]) -> str:
    """The node's normalized text with every local name as ``_``: the key that orders operands and statements."""
    writer = Writer(local, anonymous=True)
    writer.emit(node)
    return "\x1f".join(writer.out)


class Writer:
    """A node as a flat list of tokens (:attr:`out`): its type, its fields in order, a local name as ``\\0name``
    (``_`` when ``anonymous``), a name the function does not bind as ``N:name`` (a module path in one spelling).

    With ``record``, each node :func:`counted` gets an entry in :attr:`spans`: its token range, its first line and
    the number of counted nodes in its subtree (itself included), in preorder, so that a subtree (and a run of
    statements of one block) is one range of tokens and one range of node numbers.
    """

    def __init__(self, local: frozenset[str], *, anonymous: bool = False, record: bool = False):
        self.local, self.anonymous, self.record = local, anonymous, record
        self.out: list[str] = []
        self.spans: list[list[int]] = []          # [token start, token end, line, subtree size]
        self.nodes: list[ast.AST] = []

    def emit(self, node: ast.AST) -> None:
        if not (self.record and isinstance(node, COUNTED)):
            self._emit(node)
            return
        index = len(self.spans)
        span = [len(self.out), 0, getattr(node, "lineno", 0), 0]
        self.spans.append(span)
        self.nodes.append(node)
        self._emit(node)
        span[1], span[3] = len(self.out), len(self.spans) - index

    def _emit(self, node: ast.AST) -> None:
        leaf = self._leaf(node)
        if leaf is not None:
            self.out.append(leaf)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            # A chain of + (or *) is one node of n operands: an operand added to it changes that node only,
            # not every nested pair of the sorted chain after it.
            self.out += ["Chain", type(node.op).__name__, "["]
            for operand in chain(node):
                self.emit(operand)
            self.out.append("]")
            return
        self.out.append(type(node).__name__)
        for field, value in ast.iter_fields(node):
            if field in SKIPPED_FIELDS:
                continue
            if isinstance(value, list):
                self.out.append("[")
                for item in value:
                    self.emit(item) if isinstance(item, ast.AST) else self.out.append(repr(item)[:200])
                self.out.append("]")
            elif isinstance(value, ast.AST):
                self.emit(value)
            elif field == "name" and isinstance(node, _NAMED) and isinstance(value, str) and value in self.local:
                self.out.append(self._local(value))     # a nested def's name, an ``except ... as`` name
            else:
                self.out.append(repr(value)[:200])

    def _local(self, name: str) -> str:
        return "_" if self.anonymous else "\0" + name

    def _leaf(self, node: ast.AST) -> str | None:
        """The one token of a name, a module path, a parameter or a constant; None for any other node."""
        if isinstance(node, ast.Name):
            return self._local(node.id) if node.id in self.local else "N:" + node.id
        if isinstance(node, ast.arg):
            return self._local(node.arg)
        if isinstance(node, ast.Constant):
            return "C:" + repr(node.value)[:200]
        if isinstance(node, ast.Attribute):
            name = dotted(node, self.local)
            return None if name is None else "N:" + name
        return None


def chain(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a left-nested chain of one operator (``a + b + c``: a, b, c), in order."""
    operands: list[ast.expr] = []
    current: ast.expr = node
    while isinstance(current, ast.BinOp) and type(current.op) is type(node.op):
        operands.append(current.right)
        current = current.left
    operands.append(current)
    return operands[::-1]


#: The nodes a fragment's size counts (and :class:`Writer` records): statements, expressions, parameters,
#: keyword arguments; not the contexts, operators and lists around them.
COUNTED = (ast.stmt, ast.expr, ast.arg, ast.keyword, ast.comprehension, ast.excepthandler)
#: Nodes whose ``name`` field binds a name.
_NAMED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)
#: Fields that say nothing of what the code computes.
SKIPPED_FIELDS = frozenset({"ctx", "type_comment", "kind", "type_params", "returns", "annotation"})
