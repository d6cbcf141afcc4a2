"""Code normalized for comparison: one exercise's function rewritten so that its spelling no longer tells two
students apart, only what it computes and how.

What :func:`normalize` does to a parsed ``def`` (in place; every node keeps the line it came from):

* its docstring dropped (comments and formatting are gone already: :mod:`ast` keeps neither);
* numbers by value (``1.0``, ``1.``, ``1e0`` and ``1`` are one number; ``-1`` a constant, not a negation);
* equivalent operations one form: ``torch.matmul(a, b)``, ``a.matmul(b)``, ``torch.mm``/``bmm`` and ``a @ b``
  are ``a @ b``; ``x.mT``, ``x.transpose(-1, -2)``, ``x.swapaxes(-2, -1)``, ``torch.transpose(x, -2, -1)`` are
  ``x.transpose(dim0=-2, dim1=-1)``; ``torch.softmax``, ``F.softmax``, ``torch.nn.functional.softmax``, a bare
  ``softmax(x, d)`` (the notebook's own) and ``x.softmax(d)`` are ``x.softmax(dim=d)``; ``torch.f(x, ...)`` is
  ``x.f(...)`` for the tensor methods of :data:`METHOD_PARAMETERS`, whose positional arguments become keywords
  (``x.sum(-1)`` is ``x.sum(dim=-1)``); ``math.sqrt(d)``, ``torch.sqrt(d)``, ``d.sqrt()`` and ``d ** 0.5`` are
  ``sqrt(d)``; ``x.shape[k]`` is ``x.size(dim=k)``; ``view`` is ``reshape``; ``x += y`` is ``x = x + y``;
* commutative operands in one order: the operands of a chain of ``+`` (or of ``*``) sorted, ``a > b`` written
  ``b < a``, the two sides of ``==`` sorted;
* independent consecutive statements in one order (:func:`autograder.similarity.order.reorder`): statements that
  neither read what another writes nor write what it reads are sorted by their normalized text, so moving them
  about changes nothing.

Sorting keys read the code with every local name but the parameters as ``_``
(:func:`autograder.similarity.tokens.anonymous`), so a renamed copy sorts the same.
Local names themselves are not renamed here: :mod:`autograder.similarity.fragments` numbers them inside each
fragment. Trusted: nothing is executed; a tree too deep for this recursion raises RecursionError, which the
caller turns into "not compared".
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from autograder.similarity.order import reorder
from autograder.similarity.tokens import Definition, all_nodes, anonymous, dotted, local_names
#: Calls that are a matrix product of their two arguments, as functions and as methods of the first.
MATMUL_FUNCTIONS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "np.matmul", "np.dot", "torch.linalg.matmul"})
MATMUL_METHODS = frozenset({"matmul", "mm", "bmm", "__matmul__"})
#: Square roots of their one argument.
SQRT_FUNCTIONS = frozenset({"math.sqrt", "np.sqrt", "torch.sqrt", "sqrt"})
#: Softmax of their first argument along the second.
SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "F.softmax", "torch.special.softmax", "softmax"})
#: Tensor methods (and the ``torch.`` functions that are the same with the tensor first), with the names of their
#: parameters after the tensor: positional arguments become these keywords.
METHOD_PARAMETERS: dict[str, tuple[str, ...]] = {
    "sum": ("dim", "keepdim", "dtype"), "mean": ("dim", "keepdim", "dtype"), "prod": ("dim", "keepdim"),
    "amax": ("dim", "keepdim"), "amin": ("dim", "keepdim"), "max": ("dim", "keepdim"), "min": ("dim", "keepdim"),
    "argmax": ("dim", "keepdim"), "argmin": ("dim", "keepdim"), "logsumexp": ("dim", "keepdim"),
    "softmax": ("dim", "dtype"), "log_softmax": ("dim", "dtype"), "cumsum": ("dim",), "cumprod": ("dim",),
    "transpose": ("dim0", "dim1"), "unsqueeze": ("dim",), "squeeze": ("dim",), "flatten": ("start_dim", "end_dim"),
    "norm": ("p", "dim", "keepdim"), "std": ("dim",), "var": ("dim",), "size": ("dim",),
    "masked_fill": ("mask", "value"),
    "exp": (), "log": (), "tanh": (), "sigmoid": (), "relu": (), "abs": (), "neg": (), "reciprocal": (),
    "pow": ("exponent",), "diag_embed": (), "tril": ("diagonal",), "triu": ("diagonal",), "clamp": ("min", "max"),
}
#: Method names that mean the same here.
METHOD_SYNONYMS = {"view": "reshape", "swapaxes": "transpose", "swapdims": "transpose", "amax": "amax",
                   "clip": "clamp", "multiply": "mul", "divide": "div", "subtract": "sub"}

# -- the rewrite -----------------------------------------------------------------------------------------------
def normalize(fn: Definition, nodes: list[ast.AST] | None = None) -> tuple[frozenset[str], list[ast.AST]]:
    """Rewrite ``fn`` in place into its normalized form (see the module's docstring): its local names and its nodes
    once rewritten (:func:`all_nodes`). ``nodes``: its nodes before, when the caller has them."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        fn.body = body[1:] or [ast.copy_location(ast.Pass(), body[0])]
    local = local_names(fn, nodes)
    # Sorting keys keep the parameters' names (the template's, the same for every student): two statements that
    # differ only in which parameter they read still sort apart. Other local names are "_" in a key.
    params = parameters(fn)
    _Canonical(local, local - params).visit(fn)
    after = all_nodes(fn)
    reorder(after, local - params)
    return local, after


def parameters(fn: Definition) -> frozenset[str]:
    """The names of ``fn``'s parameters (the template's: every student's are the same); none for a class."""
    if isinstance(fn, ast.ClassDef):
        return frozenset()
    arguments = fn.args
    return frozenset(a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                     arguments.vararg, arguments.kwarg) if a is not None)


def _call(value: ast.expr, method: str, args: list[ast.expr], keywords: list[ast.keyword],
          where: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Attribute(value=value, attr=method, ctx=ast.Load()), args=args, keywords=keywords)
    return ast.fix_missing_locations(ast.copy_location(call, where))


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


class _Canonical(ast.NodeTransformer):
    """The rewrite of one function, bottom up: each node's children are canonical before the node is."""

    def __init__(self, local: frozenset[str], sorting: frozenset[str]):
        self.local, self.sorting = local, sorting      # the local names; those a sorting key reads as "_"

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = _number(node)
        if value is not None and value == value and abs(value) != float("inf"):
            node.value = value
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        value = _number(node.operand)
        if isinstance(node.op, ast.USub) and value is not None:
            return ast.copy_location(ast.Constant(-value), node)
        if isinstance(node.op, ast.UAdd):
            return node.operand
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "mT" and isinstance(node.ctx, ast.Load):
            dims = [ast.keyword(arg="dim0", value=ast.Constant(-2.0)),
                    ast.keyword(arg="dim1", value=ast.Constant(-1.0))]
            return _call(node.value, "transpose", [], dims, node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        shape = node.value
        if isinstance(shape, ast.Attribute) and shape.attr == "shape" and isinstance(node.ctx, ast.Load) \
                and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return _call(shape.value, "size", [], [ast.keyword(arg="dim", value=node.slice)], node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        target = node.target
        if not isinstance(target, ast.Name):
            return node
        read = ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
        value = self.visit_BinOp(ast.copy_location(ast.BinOp(left=read, op=node.op, right=node.value), node))
        return ast.copy_location(ast.Assign(targets=[target], value=value), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow) and _number(node.right) == 0.5:
            return _sqrt(node.left, node)
        if isinstance(node.op, (ast.Add, ast.Mult)):
            return self._sorted_chain(node)
        return node

    def _sorted_chain(self, node: ast.BinOp) -> ast.expr:
        """``c + a + b`` as ``a + b + c`` (its operands sorted by their anonymous text), one level of chain."""
        operands: list[ast.expr] = []
        todo: list[ast.expr] = [node]
        while todo:
            item = todo.pop()
            if isinstance(item, ast.BinOp) and type(item.op) is type(node.op):
                todo += [item.right, item.left]
            else:
                operands.append(item)
        operands.sort(key=lambda operand: anonymous(operand, self.sorting))
        chain = operands[0]
        for operand in operands[1:]:
            chain = ast.copy_location(ast.BinOp(left=chain, op=type(node.op)(), right=operand), node)
        return chain

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1:
            return node
        op, left, right = node.ops[0], node.left, node.comparators[0]
        flipped = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}.get(type(op))
        if flipped is not None:
            node.left, node.ops, node.comparators = right, [flipped()], [left]
        elif isinstance(op, (ast.Eq, ast.NotEq)) and anonymous(right, self.sorting) < anonymous(left, self.sorting):
            node.left, node.comparators = right, [left]
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return node
        name = dotted(node.func, self.local)
        for rewrite in _CALL_REWRITES:
            done = rewrite(node, name)
            if done is not None:
                return done
        if isinstance(node.func, ast.Attribute) and dotted(node.func.value, self.local) is None:
            return _method_form(node, node.func.value, node.func.attr, node.args)   # a tensor's method, not a module's
        return node


def _sqrt(value: ast.expr, where: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(id="sqrt", ctx=ast.Load()), args=[value], keywords=[])
    return ast.fix_missing_locations(ast.copy_location(call, where))


def _matmul(node: ast.Call, name: str | None) -> ast.expr | None:
    if node.keywords:
        return None
    if name in MATMUL_FUNCTIONS and len(node.args) == 2:
        return ast.copy_location(ast.BinOp(left=node.args[0], op=ast.MatMult(), right=node.args[1]), node)
    func = node.func
    if name is None and isinstance(func, ast.Attribute) and func.attr in MATMUL_METHODS and len(node.args) == 1:
        return ast.copy_location(ast.BinOp(left=func.value, op=ast.MatMult(), right=node.args[0]), node)
    return None


def _square_root(node: ast.Call, name: str | None) -> ast.expr | None:
    if name in SQRT_FUNCTIONS and len(node.args) == 1 and not node.keywords:
        return _sqrt(node.args[0], node)
    func = node.func
    if name is None and isinstance(func, ast.Attribute) and func.attr == "sqrt" and not node.args and not node.keywords:
        return _sqrt(func.value, node)
    return None


def _function_to_method(node: ast.Call, name: str | None) -> ast.expr | None:
    """``torch.sum(x, -1)`` as ``x.sum(dim=-1)``; the softmaxes as ``x.softmax(dim=...)``."""
    if name is None or not node.args:
        return None
    if name in SOFTMAX_FUNCTIONS:
        method = "softmax"
    elif name.startswith("torch.") and name.count(".") == 1:
        method = METHOD_SYNONYMS.get(name[6:], name[6:])
        if method not in METHOD_PARAMETERS:
            return None
    else:
        return None
    return _method_form(node, node.args[0], method, node.args[1:])


_CALL_REWRITES: tuple[Callable[[ast.Call, str | None], ast.expr | None], ...] = (
    _matmul, _square_root, _function_to_method)


def _method_form(node: ast.Call, value: ast.expr, method: str, args: list[ast.expr]) -> ast.Call:
    """``value.method(*args, **node.keywords)`` with a synonym's one name, positional arguments as the keywords
    of :data:`METHOD_PARAMETERS`, keywords sorted, and ``transpose``'s two dimensions in order."""
    method = METHOD_SYNONYMS.get(method, method)
    names = METHOD_PARAMETERS.get(method)
    keywords = list(node.keywords)
    if names is not None and len(args) <= len(names):
        keywords += [ast.keyword(arg=name, value=arg) for name, arg in zip(names, args)]
        args = []
    keywords.sort(key=lambda k: k.arg or "")
    if method == "transpose":
        _order_dims(keywords)
    return _call(value, method, list(args), keywords, node)


def _order_dims(keywords: list[ast.keyword]) -> None:
    """``transpose(dim0=-1, dim1=-2)`` as ``transpose(dim0=-2, dim1=-1)``: the same swap."""
    dims = {k.arg: k for k in keywords}
    first, second = dims.get("dim0"), dims.get("dim1")
    if first is None or second is None:
        return
    a, b = _number(first.value), _number(second.value)
    if a is not None and b is not None and b < a:
        first.value, second.value = second.value, first.value
