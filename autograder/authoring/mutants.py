"""``autograder validate --mutants``: mutation testing of every reference solution.

Hand-listed mistakes (each assignment's ``mistakes.py``) cover what their author thought of. This
module derives the rest automatically: one-token changes to each reference in
``solutions/<module>.py`` (a *mutant*), each graded as a student's notebook would be, in
the sandbox, with the whole catalog, public and hidden. A mutant that loses points is
*killed*; one that keeps full marks is either *equivalent* (declared in ``mutants.yml``
with a one-line reason, and confirmed here on the checks' seeded random inputs) or a
*survivor*: a gap in the checks. ``validate --mutants`` exits 1 on any survivor.

Operators
---------
*Generic* operators (arithmetic and comparison swaps, numbers changed, ``True``/``False``,
``a = b`` -> ``a = None``, an argument dropped or made ``None``, strings changed) are
mutmut's own node mutators (``mutmut.mutation.mutators.mutation_operators``): plain
functions from one libcst node to its mutated replacements, so they serve as a library
without mutmut's test runner, trampolines or on-disk state. Cosmic Ray was the other
candidate; its operators also work on single sources (``cosmic_ray.mutating.mutate_code``)
but it brings a database, aiohttp, GitPython and a plugin loader for the same operators.
Two generic operators mutmut lacks are written here: *off by one* (an integer ``n`` ->
``n - 1``; mutmut makes ``n + 1``) and *dropped statement*.

*Tensor-aware* operators (this module, on libcst) match the course's real mistakes: a
reduction changed, the dim changed, ``keepdim`` dropped, another transpose or none, the
scale changed or dropped, a mask inverted or applied after the softmax, ``-inf`` <-> a
large finite value, ``.detach()`` / ``torch.no_grad()`` inserted, a dtype cast added or
removed, and an in-place op on an input.

Not mutated: docstrings, the text of a raised exception's message, annotations.

Mutants are deduplicated on their AST with docstrings removed (formatting and comments
never make two mutants); the *id* of a mutant is a hash of that normal form and its
exercise, stable for as long as the reference and the mutation are.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import html
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import libcst as cst

from autograder.config import Course, load_course

#: The course's declared equivalents, beside its course.yml.
MUTANTS_NAME = "mutants.yml"


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
        tree = ast.parse(source)
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
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == function:
            return text, _segment(text, node)
    raise KeyError(f"solutions/{module}.py defines no {function}")


def _segment(text: str, node: ast.AST) -> str:
    lines = text.splitlines(True)
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1:node.end_lineno]).rstrip("\n") + "\n"


def replace_definition(text: str, name: str, new: str) -> str:
    """``text`` (a module or a notebook cell) with the top-level def/class ``name`` replaced by ``new``."""
    for node in ast.parse(text).body:
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


def _is_sqrt(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call) and _call_name(node) == "sqrt" and len(node.args) == 1:
        return True
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power) \
        and isinstance(node.right, cst.Float) and float(node.right.value) == 0.5


def _sqrt_arg(node: cst.BaseExpression) -> cst.BaseExpression:
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
        new = fn.visit(t)
        if t.changed:
            yield new


class _Finder(cst.CSTVisitor):
    def __init__(self, kind: type) -> None:
        self.kind, self.found = kind, []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kind):
            self.found.append(node)
        return True

    def find(self, node: cst.CSTNode) -> list[Any]:
        node.visit(self)
        return self.found


def fn_detach(fn: cst.FunctionDef) -> Iterator[cst.FunctionDef]:
    """.detach() on a returned tensor; the whole body under torch.no_grad()."""
    if fn.name.value == "__init__":
        return
    yield from _on_returns(fn, "detach")
    start = _body_start(fn)
    body = list(fn.body.body)
    if len(body) > start:
        block = cst.With([cst.WithItem(_expr("torch.no_grad()"))], cst.IndentedBlock(body[start:]))
        yield fn.with_changes(body=fn.body.with_changes(body=body[:start] + [block]))


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
            def leave_SimpleStatementLine(self, original, updated):  # noqa: N802, ANN001, ANN202
                return cst.RemoveFromParent() if original is target else updated

            def leave_IndentedBlock(self, original, updated):  # noqa: N802, ANN001, ANN202
                if not updated.body or all(isinstance(s, cst.SimpleStatementLine) and _is_docstring(s)
                                           for s in updated.body):
                    return updated.with_changes(body=[*updated.body, cst.SimpleStatementLine([cst.Pass()])])
                return updated

        yield fn.visit(Drop())


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
        for kind, op in _mutmut_operators():
            if isinstance(node, kind):
                for new in op(node):
                    yield f"generic:{op.__name__.removeprefix('operator_')}", tree.deep_replace(node, new).code
        for new in op_off_by_one(node):
            yield "generic:off-by-one", tree.deep_replace(node, new).code
        for name, op in NODE_OPERATORS.items():
            for new in op(node):
                yield f"tensor:{name}", tree.deep_replace(node, new).code
        for new in op_inplace(node, inputs):
            yield "tensor:in-place-input", tree.deep_replace(node, new).code
    for fn in functions:
        for new in fn_drop_statement(fn):
            yield "generic:drop-statement", tree.deep_replace(fn, new).code
        for name, op in FUNCTION_OPERATORS.items():
            for new in op(fn):
                yield f"tensor:{name}", tree.deep_replace(fn, new).code


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


# -- mutants.yml: the declared equivalents ------------------------------------------------------
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator  # noqa: E402


class Equivalent(BaseModel):
    """One mutant that keeps full marks because it computes what the reference computes."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
    exercise: str = Field(pattern=r"^[1-9]\d*\.[1-9]\d*$", description="exercise ID, as in course.yml")
    id: str = Field(pattern=r"^[0-9a-f]{12}$", description="the mutant's id, as validate --mutants prints it")
    reason: str = Field(min_length=10, max_length=300, description="why it is equivalent, one line")

    @field_validator("reason")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("the reason is one line")
        return value


class MutantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    equivalent: list[Equivalent] = Field(default_factory=list)


def load_equivalents(course: Course, path: Path | None = None) -> dict[tuple[str, str], str]:
    """(exercise, id) -> reason, from mutants.yml; a bad file is a ConfigError naming the entry and field."""
    import yaml

    from autograder.errors import ConfigError

    path = path if path is not None else course.root / MUTANTS_NAME
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        parsed = MutantsFile.model_validate(data)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path.name}: not valid YAML ({exc})") from None
    except ValidationError as exc:
        lines = [f"{path.name}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
        raise ConfigError("\n  ".join(lines)) from None
    known = {e.id for e in course.exercises}
    out: dict[tuple[str, str], str] = {}
    for i, e in enumerate(parsed.equivalent):
        if e.exercise not in known:
            raise ConfigError(f"{path.name}: equivalent.{i}.exercise: no exercise {e.exercise} in course.yml")
        if (e.exercise, e.id) in out:
            raise ConfigError(f"{path.name}: equivalent.{i}: {e.exercise} {e.id} declared twice")
        out[(e.exercise, e.id)] = e.reason
    return out


# -- confirming an equivalent: the mutant next to the reference, on the checks' inputs ------------
def mutant_namespace(module: str, function: str, source: str, root: Path) -> dict[str, Any]:
    """solutions/<module>.py with ``function`` replaced by ``source``, executed: the mutant among the
    other references (so 2.4's mutant calls the reference softmax, and 2.2's mutant is called by nothing)."""
    text, _ = reference_source(module, function, root)
    namespace: dict[str, Any] = {"__name__": f"mutant_of_{module}"}
    exec(compile(replace_definition(text, function, source), f"<mutant of {module}>", "exec"), namespace)  # noqa: S102
    return namespace


def confirm_equivalent(course: Course, mutant: Mutant, seeds: Iterable[int] = range(3)) -> list[str]:
    """Where the mutant and the reference differ on the inputs of every check (public and hidden) of its
    exercise, on several seeds of random inputs: [] when they never do."""
    from autograder import catalog as C
    from autograder.probes import execute
    from autograder.authoring.validate import solution_for

    C.load_catalog(course, hidden=True, mistakes=True)
    assignment, ex = course.exercise(mutant.exercise)
    reference = solution_for(course, ex.id)
    ref_ns = {ex.function: reference}
    mut_ns = mutant_namespace(assignment.module, ex.function, mutant.source, course.root)
    differences: list[str] = []

    def runner(request: Any) -> Any:
        want = execute(ref_ns, C.copied(request))
        got = execute(mut_ns, C.copied(request))
        if want.status != got.status or (want.status == "error" and want.error_type != got.error_type):
            differences.append(f"{request.site or ex.function}: reference {want.status} {want.error_type}, "
                               f"mutant {got.status} {got.error_type} {got.error}".strip())
        elif want.status == "ok" and not _same(want.value(), got.value(), course):
            differences.append(f"{request.site or ex.function}: different values")
        return want

    for seed in seeds:
        C.run_exercise(ex, runner, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                       tolerances=course.tolerances, seed_parts=("mutant-equivalence", seed), reference=reference)
    return differences


def _same(a: Any, b: Any, course: Course) -> bool:
    """Equal values: the same structure and dtypes, numbers equal within the course's tolerance of their dtype
    (a float32 result may round differently from the reference's float32 result, never by more)."""
    from autograder.catalog import values_match

    if a.spec.get("dtype") != b.spec.get("dtype"):
        return False
    return values_match(a, b, course.tolerances)


# -- grading mutants as submissions ----------------------------------------------------------------
@dataclass
class Verdict:
    mutant: Mutant
    status: str                       # killed | killed (does not compile) | killed (raises) | equivalent | survived
    points: float = 0.0
    max_points: float = 0.0
    lost: list[str] = field(default_factory=list)     # exercises that lost points
    failed: list[str] = field(default_factory=list)   # checks that failed, "2.4/name"
    reason: str = ""                                  # of a declared equivalent

    @property
    def killed(self) -> bool:
        return self.status.startswith("killed")


class Notebooks:
    """Student notebooks of each assignment: the release notebook with every solution cell filled from the
    source notebook (markers removed), and one exercise's cell holding the mutant."""

    def __init__(self, course: Course):
        import nbformat

        from autograder.authoring.build import strip_markers
        from autograder.config import grade_id

        self.course, self.nbformat, self.grade_id = course, nbformat, grade_id
        self.solved: dict[str, Any] = {}
        root = course.root
        for a in course.assignments:
            source = nbformat.read(root / "source" / a.id / a.notebook, as_version=4)
            release_path = root / "release" / a.id / a.notebook
            nb = nbformat.read(release_path, as_version=4) if release_path.exists() else source
            cells = {self._gid(c): c for c in source.cells}
            for cell in nb.cells:
                gid = self._gid(cell)
                if gid and gid.startswith("ex") and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                    cell.source = strip_markers(cells[gid].source)
            self.solved[a.id] = nb

    @staticmethod
    def _gid(cell: Any) -> str | None:
        return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")

    def notebook(self, assignment: str, mutant: Mutant | None) -> bytes:
        import copy

        nb = copy.deepcopy(self.solved[assignment])
        if mutant is not None:
            gid = self.grade_id(mutant.exercise)
            cell = next(c for c in nb.cells if self._gid(c) == gid)
            cell.source = replace_definition(cell.source, mutant.function, mutant.source)
        return (self.nbformat.writes(nb) + "\n").encode("utf-8")


def grade_mutants(course: Course, mutants: list[Mutant], *, jobs: int = 2, workdir: Path,
                  progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """Grade each mutant as ``autograder grade`` grades a notebook: a sandbox worker per submission, every
    exercise of its assignment, public and hidden checks, the grader's own seeds. Killed = lost points."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from autograder import catalog as C
    from autograder import grading as G
    from autograder.sandbox import Sandbox
    from autograder.grading.submissions import Submission

    torch.set_num_threads(1)
    notebooks = Notebooks(course)
    assignments = {a.id for a in course.assignments}
    references = G.check_catalog(course, assignments)

    def submission(assignment: str, mutant: Mutant | None) -> Submission:
        data = notebooks.notebook(assignment, mutant)
        name = f"mutant-{mutant.id}" if mutant else "reference"
        path = workdir / name / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return Submission(path, f"{name}/{assignment}.ipynb", hashlib.sha256(data).hexdigest(), name, assignment)

    with Sandbox(course.limits, "cpu") as sandbox:
        ctx = G.Context(course, sandbox, "cpu", G.grader_fingerprint("cpu", course), references,
                        C.LiveDiagnoser(course.tolerances), G.demo_cells(course))
        wanted = sorted({course.exercise(m.exercise)[0].id for m in mutants})
        for a in wanted:
            result = G.grade_or_fail(submission(a, None), ctx) or {}
            if result.get("points") != result.get("max_points") or not result.get("exercises"):
                from autograder.errors import AutograderError

                raise AutograderError(f"the reference notebook of {a} does not score full marks in the sandbox "
                                      f"({result.get('points')}/{result.get('max_points')}: {result.get('status')})",
                                      hint="run autograder validate and autograder build")

        def one(mutant: Mutant) -> Verdict:
            assignment = course.exercise(mutant.exercise)[0].id
            if not mutant.compiles():
                verdict = Verdict(mutant, "killed (does not compile)")
            else:
                result = G.grade_or_fail(submission(assignment, mutant), ctx)
                verdict = _verdict(mutant, result)
            if progress:
                progress(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mutant") as pool:
            return list(pool.map(one, mutants))


def _verdict(mutant: Mutant, result: dict[str, Any] | None) -> Verdict:
    from autograder.errors import AutograderError

    if not result or not result.get("exercises"):
        raise AutograderError(f"mutant {mutant.exercise} {mutant.id} could not be graded: "
                              f"{(result or {}).get('status')}")
    points, max_points = float(result["points"]), float(result["max_points"])
    lost = [e["exercise"] for e in result["exercises"] if e["points"] < e["max_points"] - 1e-9]
    failed = [f"{c['exercise']}/{c['check']}" for e in result["exercises"] for c in e["checks"] if not c["passed"]]
    if points >= max_points - 1e-9:
        return Verdict(mutant, "survived", points, max_points)
    own = next(e for e in result["exercises"] if e["exercise"] == mutant.exercise)
    raises = bool(own["checks"]) and all(c["status"] == "error" for c in own["checks"]
                                         if c["kind"] != "forbidden")
    return Verdict(mutant, "killed (raises)" if raises else "killed", points, max_points, lost, failed)


# -- the whole run --------------------------------------------------------------------------------
@dataclass
class MutationRun:
    verdicts: list[Verdict]
    problems: list[str]                 # declared equivalents that differ, were killed, or no longer exist
    seconds: float
    subset: str = ""                    # "" for all mutants, else how the subset was drawn

    def by_exercise(self, course: Course) -> list[tuple[str, dict[str, int]]]:
        rows = []
        for ex in course.exercises:
            vs = [v for v in self.verdicts if v.mutant.exercise == ex.id]
            if not vs:
                continue
            rows.append((ex.id, {"made": len(vs), "killed": sum(v.killed for v in vs),
                                 "equivalent": sum(v.status == "equivalent" for v in vs),
                                 "survived": sum(v.status == "survived" for v in vs)}))
        return rows

    @property
    def survivors(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "survived"]

    @property
    def ok(self) -> bool:
        return not self.survivors and not self.problems


def run_mutants(course: Course | None = None, *, exercises: list[str] | None = None, per_exercise: int = 0,
                seed: int = 0, jobs: int = 2, equivalents_file: Path | None = None,
                progress: Callable[[Verdict], None] | None = None) -> MutationRun:
    """Make, grade and judge the mutants of ``exercises`` (default all); ``per_exercise`` > 0 draws a seeded
    subset of that many per exercise (every declared equivalent must still exist; those drawn are confirmed)."""
    import tempfile

    course = course or load_course()
    equivalents_file = equivalents_file if equivalents_file is not None else course.root / MUTANTS_NAME
    start = time.perf_counter()
    declared = load_equivalents(course, equivalents_file)
    chosen = [e.id for e in course.exercises if not exercises or e.id in exercises]
    everything = {ex: mutants_of(course, ex) for ex in chosen}
    pool = [m for ms in everything.values() for m in ms]
    todo = sample(pool, per_exercise, seed) if per_exercise > 0 else pool
    drawn = {(m.exercise, m.id) for m in todo}
    problems: list[str] = []
    by_id = {(m.exercise, m.id): m for ms in everything.values() for m in ms}
    for (ex, mid), reason in declared.items():
        if ex not in everything:
            continue
        if (ex, mid) not in by_id:
            problems.append(f"{ex} {mid}: declared equivalent in {equivalents_file.name}, but no such mutant "
                            f"exists any more (the reference or an operator changed): remove or update it")
            continue
        if (ex, mid) not in drawn and per_exercise > 0:
            continue          # a subset confirms the equivalents it drew; the full run confirms them all
        differences = confirm_equivalent(course, by_id[(ex, mid)])
        if differences:
            problems.append(f"{ex} {mid}: declared equivalent, but it differs from the reference on "
                            f"{len(differences)} calls, first: {differences[0]}")
    with tempfile.TemporaryDirectory(prefix="autograder-mutants-") as tmp:
        verdicts = grade_mutants(course, todo, jobs=jobs, workdir=Path(tmp), progress=progress)
    for v in verdicts:
        key = (v.mutant.exercise, v.mutant.id)
        if key in declared:
            if v.status == "survived":
                v.status, v.reason = "equivalent", declared[key]
            else:
                problems.append(f"{key[0]} {key[1]}: declared equivalent, but grading takes points from it "
                                f"({v.points:g}/{v.max_points:g}): remove it from {equivalents_file.name}")
    subset = f"{per_exercise} per exercise, seed {seed}" if per_exercise > 0 else ""
    return MutationRun(verdicts, problems, time.perf_counter() - start, subset)


# -- reports -----------------------------------------------------------------------------------------
def print_mutants_report(run: MutationRun, course: Course, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.syntax import Syntax
    from rich.table import Table

    console = console or Console()
    title = "Mutants of the reference solutions" + (f" (subset: {run.subset})" if run.subset else "")
    table = Table(title=title)
    for col in ("exercise", "made", "killed", "equivalent", "surviving"):
        table.add_column(col, justify="left" if col == "exercise" else "right")
    totals = {"made": 0, "killed": 0, "equivalent": 0, "survived": 0}
    for ex, counts in run.by_exercise(course):
        for k in totals:
            totals[k] += counts[k]
        survived = str(counts["survived"]) if not counts["survived"] else f"[red]{counts['survived']}[/]"
        table.add_row(ex, str(counts["made"]), str(counts["killed"]), str(counts["equivalent"]), survived)
    table.add_row("all", *(str(totals[k]) for k in ("made", "killed", "equivalent", "survived")), style="bold")
    console.print(table)
    uncompiled = sum(v.status == "killed (does not compile)" for v in run.verdicts)
    raising = sum(v.status == "killed (raises)" for v in run.verdicts)
    console.print(f"of the killed: {raising} raise on every call, {uncompiled} do not compile; "
                  f"{run.seconds:.0f} s")
    for v in run.survivors:
        console.print(f"[red]survivor[/] {v.mutant.exercise} {v.mutant.id} ({escape(v.mutant.operator)}, "
                      f"line {v.mutant.line}): keeps {v.points:g}/{v.max_points:g}")
        console.print(Syntax(v.mutant.diff, "diff", theme="ansi_dark"))
    for p in run.problems:
        console.print(f"[red]equivalent[/] {escape(p)}")
    console.print("[green]every mutant killed or declared equivalent[/]" if run.ok else
                  f"[red]{len(run.survivors)} surviving mutants, {len(run.problems)} problems with declared "
                  f"equivalents[/]")


def html_report(run: MutationRun, course: Course) -> str:
    """One self-contained page: counts per exercise, each survivor's diff, the declared equivalents."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(ex)}</td><td>{c['made']}</td><td>{c['killed']}</td><td>{c['equivalent']}</td>"
        f"<td class='{'bad' if c['survived'] else 'ok'}'>{c['survived']}</td></tr>"
        for ex, c in run.by_exercise(course))

    def diff_html(text: str) -> str:
        out = []
        for ln in text.splitlines():
            cls = "add" if ln.startswith("+") and not ln.startswith("+++") else \
                "del" if ln.startswith("-") and not ln.startswith("---") else ""
            out.append(f"<span class='{cls}'>{e(ln)}</span>")
        return "<pre>" + "\n".join(out) + "</pre>"

    survivors = "".join(
        f"<h3>{e(v.mutant.exercise)} <code>{e(v.mutant.id)}</code> {e(v.mutant.operator)}, line {v.mutant.line}"
        f"</h3>{diff_html(v.mutant.diff)}" for v in run.survivors) or "<p class='ok'>None.</p>"
    equivalents = "".join(
        f"<h3>{e(v.mutant.exercise)} <code>{e(v.mutant.id)}</code> {e(v.mutant.operator)}</h3>"
        f"<p>{e(v.reason)}</p>{diff_html(v.mutant.diff)}" for v in run.verdicts if v.status == "equivalent")
    problems = "".join(f"<li class='bad'>{e(p)}</li>" for p in run.problems)
    subset = f" (subset: {e(run.subset)})" if run.subset else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Mutation testing: {e(course.name)}</title>
<style>
body{{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .8em;text-align:right}}
td:first-child{{text-align:left}}.bad{{color:#b00020;font-weight:bold}}.ok{{color:#1b5e20}}
pre{{background:#f6f8fa;padding:.8em;overflow-x:auto}}.add{{color:#1b5e20}}.del{{color:#b00020}}
</style></head><body>
<h1>Mutants of the reference solutions{subset}</h1>
<p>Each mutant is a one-token change to a reference solution, graded in the sandbox like a student's notebook,
with every public and hidden check. Killed: it lost points. Equivalent: declared in mutants.yml and confirmed
on random inputs. {len(run.verdicts)} mutants in {run.seconds:.0f} s.</p>
<table><tr><th>exercise</th><th>made</th><th>killed</th><th>equivalent</th><th>surviving</th></tr>{rows}</table>
{f"<h2>Problems with declared equivalents</h2><ul>{problems}</ul>" if problems else ""}
<h2>Survivors</h2>{survivors}
<h2>Declared equivalents</h2>{equivalents or "<p>None.</p>"}
</body></html>
"""
