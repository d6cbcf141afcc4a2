"""The mutants of a reference solution: mutmut's node mutators (used as a library, on libcst) plus an
off-by-one and a dropped statement, and tensor-aware operators (a reduction, the dim, keepdim, a
transpose, the scale, the mask, infinities, detach/no_grad, casts, in-place ops on inputs). Mutants are
deduplicated on their syntax tree; an id is a hash of that form. :func:`mutants_of` makes one exercise's.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeGuard, TypeVar

import libcst as cst

from autograder.course.config import Course
from autograder.core.pyast import parse as parse_python


# -- mutants ------------------------------------------------------------------------
@dataclass(frozen=True)
class Mutant:
    exercise: str
    function: str
    operator: str            # "generic:<name>" (mutmut's or ours) or "tensor:<name>"
    line: int                # first changed line, counted from the function's def (1-based)
    source: str              # the whole mutated function (or class), as a student would write it
    reference: str           # the reference's source, for the diff
    id: str

    @property
    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.reference.splitlines(True), self.source.splitlines(True),
                                            f"reference/{self.function}", f"mutant/{self.function}"))

    def compiles(self) -> bool:
        try:
            compile(self.source, f"<mutant {self.id}>", "exec")
            return True
        except (SyntaxError, ValueError):
            return False


def normal_form(source: str) -> str:
    """The mutant's code as its AST sees it: docstrings, comments and formatting gone."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return "unparsable:" + source
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def mutant_id(exercise: str, source: str) -> str:
    return hashlib.sha256(f"{exercise}\0{normal_form(source)}".encode()).hexdigest()[:12]


def reference_source(module: str, function: str, root: Path) -> tuple[str, str]:
    """(the whole solutions/<module>.py text, the source of ``function`` in it)."""
    text = (root / "solutions" / f"{module}.py").read_text(encoding="utf-8")
    for node in parse_python(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == function:
            return text, _segment(text, node)
    raise KeyError(f"solutions/{module}.py defines no {function}")


def _segment(text: str, node: ast.stmt) -> str:
    lines = text.splitlines(True)
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1:node.end_lineno]).rstrip("\n") + "\n"


def replace_definition(text: str, name: str, new: str) -> str:
    """``text`` (a module or a notebook cell) with the top-level def/class ``name`` replaced by ``new``."""
    for node in parse_python(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            lines = text.splitlines(True)
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[:start - 1]) + new.rstrip("\n") + "\n" + "".join(lines[node.end_lineno:])
    raise KeyError(f"no top-level definition of {name}")


# -- walking one definition ---------------------------------------------------------------
class _Collector(cst.CSTVisitor):
    """Every node worth mutating, in source order: not docstrings, raise messages or annotations."""

    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Annotation, cst.Raise)):
            return False
        if isinstance(node, cst.SimpleStatementLine) and _is_docstring(node):
            return False
        if isinstance(node, cst.Decorator):
            return False
        self.nodes.append(node)
        return True


def _is_docstring(node: cst.SimpleStatementLine) -> bool:
    return len(node.body) == 1 and isinstance(node.body[0], cst.Expr) and \
        isinstance(node.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def _call_name(node: cst.Call) -> str | None:
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value
    if isinstance(node.func, cst.Name):
        return node.func.value
    return None


def _int_value(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
            and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def _int_node(value: int) -> cst.BaseExpression:
    return _expr(str(value))


def _with_arg(node: cst.Call, index: int, arg: cst.Arg | None) -> cst.Call:
    args = list(node.args)
    if arg is None:
        del args[index]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    else:
        args[index] = arg
    return node.with_changes(args=args)


# -- generic operators: mutmut's, plus two it lacks -----------------------------------------
def _mutmut_operators() -> list[tuple[type, Callable[[Any], Iterable[cst.CSTNode]]]]:
    from mutmut.mutation.mutators import mutation_operators

    return list(mutation_operators)


def op_off_by_one(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """An integer n -> n - 1 (mutmut's number operator makes n + 1)."""
    if isinstance(node, cst.Integer):
        yield node.with_changes(value=str(int(node.value) - 1)) if int(node.value) > 0 \
            else _expr("-1").with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# -- tensor-aware operators: node level ---------------------------------------------------------
REDUCTIONS = {
    "max": ("min", "mean", "sum", "logsumexp"), "amax": ("amin", "mean", "sum", "logsumexp"),
    "min": ("max", "mean", "sum"), "amin": ("amax", "mean", "sum"),
    "sum": ("mean", "amax", "logsumexp"), "mean": ("sum", "amax"), "logsumexp": ("amax", "sum", "mean"),
}


def op_reduction(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A reduction changed: max/amax/min/amin/mean/sum/logsumexp into one another (methods and torch.X)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in REDUCTIONS:
        for other in REDUCTIONS[node.func.attr.value]:
            yield node.with_deep_changes(node.func.attr, value=other)


#: Calls whose first positional argument is a dim.
_POSITIONAL_DIM = {"squeeze", "unsqueeze", "gather", "cumsum", "flip", "logsumexp"}


def _other_dims(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    v = _int_value(value)
    if v is None:
        return [_int_node(0), _int_node(-2)]      # dim=dim: a fixed dim instead
    return [_int_node(d) for d in (v - 1, v + 1) if d != v]


def op_dim(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The dim/axis changed (keyword dim=/axis=, or the first argument of squeeze, gather, ...)."""
    if not isinstance(node, cst.Call):
        return
    for i, arg in enumerate(node.args):
        dim_kw = arg.keyword is not None and arg.keyword.value in ("dim", "axis")
        dim_pos = i == 0 and arg.keyword is None and _call_name(node) in _POSITIONAL_DIM \
            and isinstance(node.func, cst.Attribute)
        if dim_kw or dim_pos:
            for other in _other_dims(arg.value):
                yield _with_arg(node, i, arg.with_changes(value=other))


def op_keepdim(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """keepdim dropped (and keepdim=True made False)."""
    if isinstance(node, cst.Call):
        for i, arg in enumerate(node.args):
            if arg.keyword is not None and arg.keyword.value == "keepdim":
                yield _with_arg(node, i, None)
                if isinstance(arg.value, cst.Name) and arg.value.value == "True":
                    yield _with_arg(node, i, arg.with_changes(value=cst.Name("False")))


def op_transpose(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A transpose of other dims, .T for transpose(-2, -1), or none at all (also .T/.mT dropped)."""
    if isinstance(node, cst.Call) and _call_name(node) == "transpose" and isinstance(node.func, cst.Attribute) \
            and len(node.args) == 2:
        a, b = (_int_value(x.value) for x in node.args)
        yield node.func.value                                       # no transpose
        if a is None or b is None:
            return
        if {a, b} == {-2, -1}:
            yield cst.Attribute(node.func.value, cst.Name("T"))      # reverses the batch dims too
        seen = {(a, b), (b, a)}
        for x, y in ((a - 1, b - 1), (a + 1, b + 1), (a - 1, b)):
            if x != y and (x, y) not in seen and (x < 0) == (a < 0) and (y < 0) == (b < 0):
                seen |= {(x, y), (y, x)}
                yield node.with_changes(args=[node.args[0].with_changes(value=_int_node(x)),
                                              node.args[1].with_changes(value=_int_node(y))])
    if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT"):
        yield node.value


def _is_sqrt(node: cst.BaseExpression) -> TypeGuard[cst.Call | cst.BinaryOperation]:
    if isinstance(node, cst.Call) and _call_name(node) == "sqrt" and len(node.args) == 1:
        return True
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power) \
        and isinstance(node.right, cst.Float) and float(node.right.value) == 0.5


def _sqrt_arg(node: cst.Call | cst.BinaryOperation) -> cst.BaseExpression:
    return node.args[0].value if isinstance(node, cst.Call) else node.left


def _other_sizes(size: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Another size a student could take the square root of."""
    out: list[cst.BaseExpression] = []
    if isinstance(size, cst.Subscript) and len(size.slice) == 1 and isinstance(size.slice[0].slice, cst.Index):
        index = _int_value(size.slice[0].slice.value)
        if index is not None:
            for other in (index - 1, index + 1):
                if (other < 0) == (index < 0):
                    out.append(size.with_changes(slice=[size.slice[0].with_changes(
                        slice=cst.Index(_int_node(other)))]))
    if isinstance(size, cst.BinaryOperation) and isinstance(size.operator, (cst.FloorDivide, cst.Divide)):
        out += [size.left, size.right]
    return out


def op_scale(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The scale changed: x / sqrt(d) -> x / d, x / sqrt(another size), x (no scale)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.Multiply)) \
            and _is_sqrt(node.right):
        size = _sqrt_arg(node.right)
        yield node.left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        yield node.with_changes(right=size.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        for other in _other_sizes(size):
            sq = node.right
            sq = sq.with_changes(args=[sq.args[0].with_changes(value=other)]) if isinstance(sq, cst.Call) \
                else sq.with_changes(left=other)
            yield node.with_changes(right=sq)


def op_mask_invert(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A mask inverted: masked_fill(~mask, v); torch.where(cond, b, a)."""
    if not isinstance(node, cst.Call):
        return
    name = _call_name(node)
    if name in ("masked_fill", "masked_fill_") and node.args:
        mask = node.args[0].value
        inverted = mask.expression if isinstance(mask, cst.UnaryOperation) and isinstance(
            mask.operator, cst.BitInvert) else cst.UnaryOperation(cst.BitInvert(), mask.with_changes(
                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not isinstance(
                    mask, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else mask)
        yield _with_arg(node, 0, node.args[0].with_changes(value=inverted))
    if name == "where" and len(node.args) == 3:
        a, b = node.args[1], node.args[2]
        yield node.with_changes(args=[node.args[0], a.with_changes(value=b.value), b.with_changes(value=a.value)])


_NEG_INF = re.compile(r"""^float\((['"])-inf\1\)$""")


def op_infinity(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """-inf swapped for a large finite value, and a large finite value for -inf."""
    if isinstance(node, cst.Call) and _NEG_INF.match(_code(node)):
        yield _expr("-1e9")
        yield _expr("-1e4")
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            _code(node.expression) in ("math.inf", "torch.inf", "np.inf", 'float("inf")', "float('inf')"):
        yield _expr("-1e9")
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            isinstance(node.expression, (cst.Float, cst.Integer)) and abs(float(node.expression.value)) >= 1e4:
        yield _expr('float("-inf")')


_CASTS = {"float", "double", "half", "long", "int", "bool", "to", "type"}


def op_cast_removed(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A dtype cast removed: x.float()/.double()/.long()/.to(...) -> x, float(x)/int(x) -> x, dtype= dropped."""
    if not isinstance(node, cst.Call):
        return
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in _CASTS:
        yield node.func.value
    elif isinstance(node.func, cst.Name) and node.func.value in ("float", "int") and len(node.args) == 1 \
            and not isinstance(node.args[0].value, cst.SimpleString):
        yield node.args[0].value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    for i, arg in enumerate(node.args):
        if arg.keyword is not None and arg.keyword.value == "dtype":
            yield _with_arg(node, i, None)


_INPLACE = {"masked_fill", "add", "sub", "mul", "div", "clamp", "exp", "tanh", "neg", "abs", "pow", "fill_diagonal"}


_BINARY_INPLACE = {cst.Add: "add_", cst.Subtract: "sub_", cst.Multiply: "mul_", cst.Divide: "div_"}


def op_inplace(node: cst.CSTNode, inputs: frozenset[str]) -> Iterator[cst.CSTNode]:
    """An in-place op on an input: x - y -> x.sub_(y), x.masked_fill(...) -> x.masked_fill_(...)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.left, cst.Name) and node.left.value in inputs \
            and type(node.operator) in _BINARY_INPLACE:
        yield cst.Call(cst.Attribute(node.left, cst.Name(_BINARY_INPLACE[type(node.operator)])),
                       [cst.Arg(node.right)], lpar=node.lpar, rpar=node.rpar)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
            and node.func.value.value in inputs and node.func.attr.value in _INPLACE:
        yield node.with_deep_changes(node.func.attr, value=node.func.attr.value + "_")


NODE_OPERATORS: dict[str, Callable[[cst.CSTNode], Iterable[cst.CSTNode]]] = {
    "reduction": op_reduction, "dim": op_dim, "keepdim": op_keepdim, "transpose": op_transpose,
    "scale": op_scale, "mask-inverted": op_mask_invert, "infinity": op_infinity, "cast-removed": op_cast_removed,
}


# -- tensor-aware operators: statement level ------------------------------------------------------
def _functions(tree: cst.Module) -> list[cst.FunctionDef]:
    """The definition itself, or a class's methods."""
    out: list[cst.FunctionDef] = []
    for stmt in tree.body:
        if isinstance(stmt, cst.FunctionDef):
            out.append(stmt)
        elif isinstance(stmt, cst.ClassDef):
            out += [s for s in stmt.body.body if isinstance(s, cst.FunctionDef)]
    return out


def _body_start(fn: cst.FunctionDef) -> int:
    body = fn.body.body
    return 1 if body and isinstance(body[0], cst.SimpleStatementLine) and _is_docstring(body[0]) else 0


class _Returns(cst.CSTTransformer):
    """Rewrite the value of every return of one function (not of nested ones) with ``change``."""

    def __init__(self, change: Callable[[cst.BaseExpression], cst.BaseExpression | None]):
        self.change = change
        self.depth = 0
        self.changed = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return self.depth == 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        if updated.value is None:
            return updated
        new = self.change(updated.value)
        if new is None:
            return updated
        self.changed = True
        return updated.with_changes(value=new)


def _method(expr: cst.BaseExpression, name: str) -> cst.BaseExpression:
    wrapped = expr if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else \
        expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(wrapped, cst.Name(name)), [])


def _on_returns(fn: cst.FunctionDef, method: str) -> Iterator[cst.FunctionDef]:
    """``method`` applied to the returned value, or to each element of a returned tuple in turn."""
    returns = [n for n in _Finder(cst.Return).find(fn) if n.value is not None]
    if not returns:
        return
    width = max(len(r.value.elements) if isinstance(r.value, cst.Tuple) else 1 for r in returns)
    for k in range(width):
        def change(value: cst.BaseExpression, k: int = k) -> cst.BaseExpression | None:
            if isinstance(value, cst.Tuple):
                if k >= len(value.elements):
                    return None
                elements = list(value.elements)
                elements[k] = elements[k].with_changes(value=_method(elements[k].value, method))
                return value.with_changes(elements=elements)
            return _method(value, method) if k == 0 else None

        t = _Returns(change)
        new = cst.ensure_type(fn.visit(t), cst.FunctionDef)     # (the transformer changes returns only)
        if t.changed:
            yield new


_Node = TypeVar("_Node", bound=cst.CSTNode)


class _Finder(cst.CSTVisitor, Generic[_Node]):
    def __init__(self, kind: type[_Node]) -> None:
        self.kind = kind
        self.found: list[_Node] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kind):
            self.found.append(node)
        return True

    def find(self, node: cst.CSTNode) -> list[_Node]:
        node.visit(self)
        return self.found


def fn_detach(fn: cst.FunctionDef) -> Iterator[cst.FunctionDef]:
    """.detach() on a returned tensor; the whole body under torch.no_grad()."""
    if fn.name.value == "__init__":
        return
    yield from _on_returns(fn, "detach")
    no_grad = [cst.WithItem(_expr("torch.no_grad()"))]
    if isinstance(fn.body, cst.IndentedBlock):
        start = _body_start(fn)
        body = list(fn.body.body)
        if len(body) > start:
            block = cst.With(no_grad, cst.IndentedBlock(body[start:]))
            yield fn.with_changes(body=fn.body.with_changes(body=body[:start] + [block]))
    elif isinstance(fn.body, cst.SimpleStatementSuite):
        # def f(x): return ... (its small statements on the def's line): they become the with's one line.
        block = cst.With(no_grad, cst.IndentedBlock([cst.SimpleStatementLine(fn.body.body)]))
        yield fn.with_changes(body=cst.IndentedBlock([block]))


def fn_cast_added(fn: cst.FunctionDef) -> Iterator[cst.FunctionDef]:
    """A dtype cast added to a returned tensor: .float() (float32) or .double() (float64)."""
    if fn.name.value == "__init__":
        return
    yield from _on_returns(fn, "float")
    yield from _on_returns(fn, "double")


def fn_mask_after_softmax(fn: cst.FunctionDef) -> Iterator[cst.FunctionDef]:
    """The mask applied after the softmax: masked_fill(m, -inf) on the scores dropped, masked_fill(m, 0)
    on the normalized weights instead (the next ``w = a / b`` or ``return a / b``)."""
    body = list(fn.body.body)
    for i, stmt in enumerate(body):
        guard, inner = None, stmt
        if isinstance(stmt, cst.If) and len(stmt.body.body) == 1 and stmt.orelse is None:
            guard, inner = stmt, stmt.body.body[0]
        if not (isinstance(inner, cst.SimpleStatementLine) and len(inner.body) == 1
                and isinstance(inner.body[0], cst.Assign)):
            continue
        value = inner.body[0].value
        if not (isinstance(value, cst.Call) and _call_name(value) == "masked_fill"
                and isinstance(value.func, cst.Attribute) and value.args):
            continue
        mask = _code(value.args[0].value)
        dropped = inner.with_changes(body=[inner.body[0].with_changes(value=value.func.value)])
        new_body = body[:i] + [guard.with_deep_changes(guard.body, body=[dropped]) if guard else dropped]
        rest = body[i + 1:]
        for j, later in enumerate(rest):
            line = later.body[0] if isinstance(later, cst.SimpleStatementLine) and len(later.body) == 1 else None
            if isinstance(line, cst.Assign) and len(line.targets) == 1 and isinstance(line.value, cst.BinaryOperation) \
                    and isinstance(line.value.operator, cst.Divide):
                target = _code(line.targets[0].target)
                after: cst.BaseStatement = cst.parse_statement(f"{target} = {target}.masked_fill({mask}, 0.0)\n")
                if guard:
                    after = cst.parse_statement(f"if {_code(guard.test)}:\n    {_code(after).strip()}\n")
                yield fn.with_changes(body=fn.body.with_changes(body=new_body + rest[:j + 1] + [after] + rest[j + 1:]))
                break
            if isinstance(line, cst.Return) and isinstance(line.value, cst.BinaryOperation) \
                    and isinstance(line.value.operator, cst.Divide) and not guard:
                new_ret = later.with_changes(body=[line.with_changes(value=cst.Call(cst.Attribute(
                    line.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), cst.Name("masked_fill")),
                    [cst.Arg(_expr(mask)), cst.Arg(_expr("0.0"))]))])
                yield fn.with_changes(body=fn.body.with_changes(body=new_body + rest[:j] + [new_ret] + rest[j + 1:]))
                break


def fn_drop_statement(fn: cst.FunctionDef) -> Iterator[cst.FunctionDef]:
    """A dropped statement (generic; mutmut has none): each simple statement of the body, at any depth."""
    lines = [n for n in _Finder(cst.SimpleStatementLine).find(fn) if not _is_docstring(n)]
    for target in lines:
        class Drop(cst.CSTTransformer):
            dropped = target     # bound now: the transformer runs within this iteration

            def leave_SimpleStatementLine(self, original, updated):
                return cst.RemoveFromParent() if original is self.dropped else updated

            def leave_IndentedBlock(self, original, updated):
                if not updated.body or all(isinstance(s, cst.SimpleStatementLine) and _is_docstring(s)
                                           for s in updated.body):
                    return updated.with_changes(body=[*updated.body, cst.SimpleStatementLine([cst.Pass()])])
                return updated

        yield cst.ensure_type(fn.visit(Drop()), cst.FunctionDef)     # (Drop removes statements inside it)


FUNCTION_OPERATORS: dict[str, Callable[[cst.FunctionDef], Iterable[cst.FunctionDef]]] = {
    "detach": fn_detach, "cast-added": fn_cast_added, "mask-after-softmax": fn_mask_after_softmax,
}


# -- making the mutants of one exercise -----------------------------------------------------------
def mutate(source: str) -> Iterator[tuple[str, str]]:
    """(operator, mutated source) for every mutation of one definition; duplicates included."""
    tree = cst.parse_module(source)
    collector = _Collector()
    tree.visit(collector)
    functions = _functions(tree)
    inputs = frozenset(p.name.value for fn in functions for p in fn.params.params if p.name.value != "self")
    for node in collector.nodes:
        yield from _node_mutants(tree, node, inputs)
    for fn in functions:
        yield from _function_mutants(tree, fn)


def _node_mutants(tree: cst.Module, node: cst.CSTNode, inputs: frozenset[str]) -> Iterator[tuple[str, str]]:
    """(operator, mutated source) for every node-level mutation of one node of ``tree``."""
    for kind, op in _mutmut_operators():
        if isinstance(node, kind):
            for new in op(node):
                yield f"generic:{op.__name__.removeprefix('operator_')}", _replaced(tree, node, new)
    for new in op_off_by_one(node):
        yield "generic:off-by-one", _replaced(tree, node, new)
    for name, op in NODE_OPERATORS.items():
        for new in op(node):
            yield f"tensor:{name}", _replaced(tree, node, new)
    for new in op_inplace(node, inputs):
        yield "tensor:in-place-input", _replaced(tree, node, new)


def _function_mutants(tree: cst.Module, fn: cst.FunctionDef) -> Iterator[tuple[str, str]]:
    """(operator, mutated source) for every function-level mutation of one definition of ``tree``."""
    for new_fn in fn_drop_statement(fn):
        yield "generic:drop-statement", _replaced(tree, fn, new_fn)
    for name, fn_op in FUNCTION_OPERATORS.items():
        for new_fn in fn_op(fn):
            yield f"tensor:{name}", _replaced(tree, fn, new_fn)


def _replaced(tree: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    """The module's code with ``old``, a node inside it (not the module itself), replaced by ``new``."""
    return cst.ensure_type(tree.deep_replace(old, new), cst.Module).code


def _first_changed_line(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return i
    return min(len(a.splitlines()), len(b.splitlines())) + 1


def mutants_of(course: Course, exercise_id: str) -> list[Mutant]:
    """Every distinct mutant of one exercise's reference, in a stable order."""
    assignment, ex = course.exercise(exercise_id)
    _, ref = reference_source(assignment.module, ex.function, course.root)
    reference_form = normal_form(ref)
    seen: dict[str, Mutant] = {}
    for operator, code in mutate(ref):
        form = normal_form(code)
        if form == reference_form:
            continue
        mid = mutant_id(exercise_id, code)
        if mid not in seen:
            seen[mid] = Mutant(exercise_id, ex.function, operator, _first_changed_line(ref, code), code, ref, mid)
    return list(seen.values())


def sample(mutants: list[Mutant], per_exercise: int, seed: int) -> list[Mutant]:
    """A fixed, seeded subset: ``per_exercise`` mutants of each exercise (by id, so stable)."""
    out: list[Mutant] = []
    by_ex: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_ex.setdefault(m.exercise, []).append(m)
    for ex, ms in by_ex.items():
        ms = sorted(ms, key=lambda m: m.id)
        out += random.Random(f"{seed}:{ex}").sample(ms, min(per_exercise, len(ms)))
    return out
