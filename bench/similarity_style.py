"""How a generated student writes code, for bench/bench_similarity.py: equivalent spellings, local names,
reordered statements, comments and formatting, applied to a Python syntax tree and rendered back to a cell.

A cell is an ``ast.Module`` (an approach to one exercise: the reference, a correct alternative or a known
mistake, docstrings removed). Every change here keeps what the code computes (a spelling swapped for an
equivalent one, a local renamed, two independent statements swapped), so a copy's outputs stay its source's.
What a person adds that the syntax tree does not hold travels on the statements themselves, so that it
moves with them when they are reordered: ``stmt.comment`` (one line, above or at the end), ``stmt.before``
(extra comment lines above: a commented-out print, a personal note) and ``stmt.blank`` (a blank line above).
Whatever is random takes a ``random.Random`` from the caller: the same seed writes the same bytes.
"""
from __future__ import annotations

import ast
import builtins
import copy
import io
import keyword
import random
import tokenize
from dataclasses import dataclass, field
from typing import Any

#: Each spelling a student may prefer, its choices (the first: the reference's), and how often each is chosen.
SPELLINGS: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "matmul": (("op", "fn"), (0.8, 0.2)),                      # a @ b / torch.matmul(a, b)
    "transpose": (("t21", "t12", "mT"), (0.65, 0.15, 0.2)),    # x.transpose(-2, -1) / (-1, -2) / x.mT
    "reduce": (("method", "fn"), (0.75, 0.25)),                # x.sum(dim=-1) / torch.sum(x, dim=-1)
    "dim": (("kw", "pos"), (0.7, 0.3)),                        # x.sum(dim=-1) / x.sum(-1)
    "sqrt": (("math", "pow"), (0.7, 0.3)),                     # math.sqrt(d) / d ** 0.5
    "size": (("shape", "size"), (0.8, 0.2)),                   # x.shape[-1] / x.size(-1)
    "inf": (("float", "torch"), (0.75, 0.25)),                 # float('-inf') / -torch.inf
}
#: Methods that have a torch function of the same name taking the tensor first (x.sum(...) == torch.sum(x, ...)).
REDUCTIONS = {"sum", "amax", "amin", "mean", "exp", "log", "logsumexp", "cumsum", "prod", "tanh", "sigmoid"}
#: Methods and functions whose first argument after the tensor is ``dim``.
DIM_FIRST = {"sum", "amax", "amin", "mean", "cumsum", "prod", "logsumexp", "softmax", "log_softmax", "unsqueeze",
             "squeeze", "argmax", "var", "std"}
MODULES = {"torch", "F", "nn", "math", "np"}
#: Calls whose order matters: in-place, random or registering (never moved by a reordering).
ORDERED_CALLS = ("rand", "multinomial", "manual_seed", "register", "super", "dropout", "print")

#: Local names students choose, by what they hold: the first of each group is the reference's usual name.
NAME_GROUPS = [
    ["scores", "s", "logits", "att", "attn_scores", "sc", "score"],
    ["weights", "attn", "w", "probs", "attn_weights", "alpha", "p"],
    ["e", "exps", "ex", "numer", "exp_x", "z"],
    ["total", "denom", "sums", "norm", "sum_e", "Z"],
    ["row_max", "m", "mx", "max_val", "maxes", "rmax"],
    ["out", "output", "o", "res", "result", "y"],
    ["q", "qh", "queries", "q_heads", "Qh"], ["k", "kh", "keys", "k_heads", "Kh"], ["v", "vh", "vals", "v_heads", "Vh"],
    ["B", "bsz", "batch", "b_size", "nb"], ["T", "seq_len", "L", "n_tok", "length"],
    ["E", "embed", "d_model", "D", "emb"],
    ["H", "heads", "n_heads", "nh"], ["d", "head_dim", "dh", "hd", "d_head"], ["Tk", "n_keys", "S", "tk"],
    ["h", "hidden", "state", "h_t", "hid"], ["keep", "valid", "not_pad", "is_valid", "mask_keep"],
    ["rows", "flat", "x2d", "rows2d"], ["positions", "pos", "idx", "arange", "position"],
    ["nll", "loss", "losses", "neg_ll", "ce"], ["picked", "chosen", "target_logits", "gathered", "sel"],
    ["log_z", "lse", "logsum", "log_norm", "logz"], ["mask", "m_mask", "pad", "msk", "masked"],
    ["shifted", "x_shift", "stable", "xs", "centered_x"], ["filled", "masked_scores", "sc_masked", "scores_m"],
    ["mean", "mu", "avg", "m_x"], ["variance", "var", "sigma2", "v_x"], ["normalized", "x_hat", "xn", "normed"],
]
GROUP_OF = {name: group for group in NAME_GROUPS for name in group}
#: Suffixes and prefixes for a name no group holds.
GENERIC = ("{n}_", "{n}1", "my_{n}", "{n}_t", "{n}_val", "tmp_{n}", "{s}", "{n}2", "the_{n}", "{n}_x")
RESERVED = set(dir(builtins)) | set(keyword.kwlist) | MODULES | {"self", "cls"}

#: What a student's comments are made of; each student keeps a few of these (their voice: ``comment_voice``).
COMMENT_PARTS: dict[str, dict[str, tuple[str, ...]]] = {
    "zh": {"verbs": ("计算", "算出", "得到", "求", "先算", "这里算", "然后算", "再算", "求出"),
           "objects": ("{t}", "{t} 的值", "{t} 张量", "{t}（形状见上）", "一下 {t}", "{t} 这个量", "新的 {t}"),
           "endings": ("", "。", "："),
           "return": ("返回结果", "返回", "完成", "输出", "结束", "返回答案"),
           "if": ("特殊情况", "边界情况", "处理特例", "检查一下", "先判断"),
           "other": ("循环", "这里", "逐个处理", "遍历")},
    "en": {"verbs": ("compute", "get", "calc", "calculate", "find", "make", "build", "now", "step:", "then"),
           "objects": ("{t}", "the {t}", "{t} tensor", "{t} values", "{t} here", "{t} first", "{t} (see shape)"),
           "endings": ("", ".", ":"),
           "return": ("return", "return the result", "done", "return it", "output", "result"),
           "if": ("edge case", "special case", "corner case", "handle the edge case", "check first"),
           "other": ("loop", "here", "go through them", "iterate")},
}


@dataclass
class Format:
    """How a student lays code out (what ``ast`` does not hold)."""

    keep_doc: bool = True          # the template's docstrings stay
    quotes: str = '"'              # the quote of plain string literals
    compact_ops: bool = False      # a@b, x/y instead of a @ b
    tight_commas: bool = False     # f(a,b)
    spaced_kwargs: bool = False    # f(dim = -1)
    trailing: bool = True          # a comment at the end of its line (else above it)


@dataclass
class Habits:
    """A student's lasting habits: spellings, names, comments (the random choices are made per cell)."""

    spellings: dict[str, str] = field(default_factory=dict)   # empty: as the approach is written
    rename: float = 0.0            # the chance each local gets the student's own name
    comments: float = 0.0          # the chance each statement gets a comment
    language: str = "zh"
    blank: float = 0.0             # the chance of a blank line above a statement
    return_var: str = ""           # `return expr` written as `<name> = expr; return <name>`
    voice: dict[str, list[str]] = field(default_factory=dict)   # the comments they write (comment_voice)


# -- equivalent spellings ---------------------------------------------------------------------------
def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def _negative(node: ast.expr) -> int | None:
    """-k for a literal ``-k``, else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int):
        return -node.operand.value
    return None


def _method(node: ast.AST, names: set[str] | tuple[str, ...]) -> bool:
    """``x.name(...)`` where x is no module (not ``torch.sum(...)``)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in MODULES))


def _function(node: ast.AST, names: set[str] | tuple[str, ...], module: str = "torch") -> bool:
    """``torch.name(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
            and isinstance(node.func.value, ast.Name) and node.func.value.id == module)


def _torch(attr: str) -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=attr, ctx=ast.Load())


class Spell(ast.NodeTransformer):
    """Rewrite every spelling of ``choices`` to the chosen one (a missing key: left as written)."""

    def __init__(self, choices: dict[str, str]) -> None:
        self.c = choices

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult) and self.c.get("matmul") == "fn":
            return ast.Call(func=_torch("matmul"), args=[node.left, node.right], keywords=[])
        if isinstance(node.op, ast.Pow) and self.c.get("sqrt") == "math" and isinstance(node.right, ast.Constant) \
                and node.right.value == 0.5 and _scalar(node.left):
            return ast.Call(func=ast.Attribute(value=ast.Name(id="math", ctx=ast.Load()), attr="sqrt",
                                               ctx=ast.Load()), args=[node.left], keywords=[])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        c = self.c
        if c.get("matmul") == "op" and _function(node, {"matmul"}) and len(node.args) == 2 and not node.keywords:
            return ast.BinOp(left=node.args[0], op=ast.MatMult(), right=node.args[1])
        if _method(node, {"transpose"}) and len(node.args) == 2 and not node.keywords and c.get("transpose") and \
                sorted(_negative(a) or 0 for a in node.args) == [-2, -1]:
            return _transposed(node.func.value, c["transpose"])  # type: ignore[attr-defined]
        if _function(node, {"sqrt"}, "math") and len(node.args) == 1 and c.get("sqrt") == "pow":
            return ast.BinOp(left=node.args[0], op=ast.Pow(), right=_const(0.5))
        if _method(node, {"size"}) and len(node.args) == 1 and not node.keywords and c.get("size") == "shape":
            return ast.Subscript(value=ast.Attribute(value=node.func.value, attr="shape", ctx=ast.Load()),  # type: ignore[attr-defined]
                                 slice=node.args[0], ctx=ast.Load())
        if _inf(node) is not None:
            return self._inf(node)
        node = self._reduce(node)
        return self._dim(node)

    def _inf(self, node: ast.Call) -> ast.AST:
        sign = _inf(node)
        if self.c.get("inf") != "torch" or sign is None:
            return node
        value = _torch("inf")
        return ast.UnaryOp(op=ast.USub(), operand=value) if sign < 0 else value

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.USub) and _is_torch_inf(node.operand) and self.c.get("inf") == "float":
            return ast.Call(func=ast.Name(id="float", ctx=ast.Load()), args=[_const("-inf")], keywords=[])
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if _is_torch_inf(node) and self.c.get("inf") == "float":
            return ast.Call(func=ast.Name(id="float", ctx=ast.Load()), args=[_const("inf")], keywords=[])
        if node.attr == "mT" and isinstance(node.ctx, ast.Load) and self.c.get("transpose") in ("t21", "t12"):
            return _transposed(node.value, self.c["transpose"])
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if self.c.get("size") == "size" and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.ctx, ast.Load) and _index(node.slice):
            return ast.Call(func=ast.Attribute(value=node.value.value, attr="size", ctx=ast.Load()),
                            args=[node.slice], keywords=[])
        return node

    def _reduce(self, node: ast.Call) -> ast.Call:
        want = self.c.get("reduce")
        if want == "fn" and _method(node, REDUCTIONS) and not isinstance(node.func.value, ast.Constant):  # type: ignore[attr-defined]
            return ast.Call(func=_torch(node.func.attr), args=[node.func.value, *node.args],  # type: ignore[attr-defined]
                            keywords=node.keywords)
        if want == "method" and _function(node, REDUCTIONS) and node.args and \
                not any(k.arg == "input" for k in node.keywords) and not isinstance(node.args[0], ast.Starred):
            return ast.Call(func=ast.Attribute(value=node.args[0], attr=node.func.attr, ctx=ast.Load()),  # type: ignore[attr-defined]
                            args=node.args[1:], keywords=node.keywords)
        return node

    def _dim(self, node: ast.Call) -> ast.Call:
        want = self.c.get("dim")
        if not want or not isinstance(node.func, ast.Attribute) or node.func.attr not in DIM_FIRST:
            return node
        tensor_args = 0 if _method(node, DIM_FIRST) else 1     # torch.sum(x, ...): x comes first
        if want == "pos" and len(node.args) == tensor_args and node.keywords and node.keywords[0].arg == "dim":
            node.args.append(node.keywords.pop(0).value)
        elif want == "kw" and len(node.args) == tensor_args + 1 and not isinstance(node.args[-1], ast.Starred):
            node.keywords.insert(0, ast.keyword(arg="dim", value=node.args.pop()))
        return node


def _transposed(value: ast.expr, how: str) -> ast.expr:
    if how == "mT":
        return ast.Attribute(value=value, attr="mT", ctx=ast.Load())
    args: list[ast.expr] = [ast.UnaryOp(op=ast.USub(), operand=_const(k)) for k in (2, 1)]
    return ast.Call(func=ast.Attribute(value=value, attr="transpose", ctx=ast.Load()),
                    args=args if how == "t21" else args[::-1], keywords=[])


def _inf(node: ast.AST) -> int | None:
    """+1 for ``float('inf')``, -1 for ``float('-inf')``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and \
            len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("inf", "-inf"):
        return -1 if node.args[0].value == "-inf" else 1
    return None


def _is_torch_inf(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "inf" and isinstance(node.value, ast.Name) \
        and node.value.id in ("torch", "math")


def _index(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) or \
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)


def _scalar(node: ast.AST) -> bool:
    """An expression that is a Python number for sure: a size, or integer arithmetic on sizes."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call):
        return _method(node, {"size"}) and len(node.args) == 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        return True
    return False


def spell(tree: ast.Module, choices: dict[str, str]) -> ast.Module:
    """The cell with every spelling of ``choices`` written the chosen way."""
    return ast.fix_missing_locations(Spell(choices).visit(tree)) if choices else tree


def choose_spellings(rng: random.Random) -> dict[str, str]:
    return {key: rng.choices(options, weights)[0] for key, (options, weights) in SPELLINGS.items()}


def other_spellings(choices: dict[str, str], rng: random.Random) -> dict[str, str]:
    """A different choice for every spelling (a copier's "equivalent operations swapped")."""
    return {key: rng.choice([o for o in options if o != choices.get(key, options[0])])
            for key, (options, _) in SPELLINGS.items()}


# -- local names ------------------------------------------------------------------------------------
def functions(tree: ast.AST) -> list[ast.FunctionDef]:
    """Every function (methods and nested ones too) in source order; only statements are searched: no
    expression holds a ``def``."""
    found: list[ast.FunctionDef] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef):
            found.append(node)
        for attr in ("finalbody", "handlers", "orelse", "body"):
            children = getattr(node, attr, None)
            if isinstance(children, list):
                todo.extend(reversed(children))
    return found


def locals_of(fn: ast.FunctionDef) -> list[str]:
    """The names ``fn`` assigns that are not its parameters, in order of first assignment."""
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    params |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    seen = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return [n for n in dict.fromkeys(seen) if n not in params and n != "_"]


def all_locals(tree: ast.AST) -> list[str]:
    """Every function's locals (in order, once each)."""
    return list(dict.fromkeys(n for fn in functions(tree) for n in locals_of(fn)))


def names_in(tree: ast.AST) -> set[str]:
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    found |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    found |= {a.arg for n in functions(tree) for a in ast.walk(n.args) if isinstance(a, ast.arg)}
    return found | RESERVED


def synonyms(name: str) -> list[str]:
    """Names a student might give what ``name`` holds (``name`` itself first)."""
    group = GROUP_OF.get(name)
    if group:
        return [name] + [g for g in group if g != name]
    return [name] + [g for g in dict.fromkeys(generic(name, p) for p in GENERIC) if g != name]


def generic(name: str, pattern: str) -> str:
    """``name`` made over by one of GENERIC's patterns ({s}: its first three letters)."""
    return pattern.format(n=name, s=name[:3] if len(name) > 4 else name + "_")


def rename(tree: ast.Module, pick: dict[str, str]) -> ast.Module:
    """Each function's locals renamed by ``pick`` (old -> new); its parameters and everything else kept."""
    if not pick:
        return tree
    for fn in functions(tree):
        mine = set(locals_of(fn))
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in mine and node.id in pick:
                node.id = pick[node.id]
    return tree


def own_names(tree: ast.Module, rng: random.Random, chance: float, avoid: str = "") -> dict[str, str]:
    """A new name for each local with probability ``chance`` (never ``avoid``-equal: a copier's new names)."""
    taken = names_in(tree)
    pick: dict[str, str] = {}
    for fn in functions(tree):
        for name in locals_of(fn):
            if name in pick or rng.random() >= chance:
                continue
            options = [s for s in synonyms(name)[1:] if s not in taken and s != avoid]
            if options:
                pick[name] = rng.choice(options)
                taken.add(pick[name])
    return pick


def return_via(tree: ast.Module, name: str) -> ast.Module:
    """``return expr`` (not a bare name) as ``name = expr`` then ``return name``, in every function."""
    for fn in functions(tree):
        if name in names_in(fn) - RESERVED:
            continue
        body = fn.body
        if body and isinstance(body[-1], ast.Return) and body[-1].value is not None and \
                not isinstance(body[-1].value, (ast.Name, ast.Constant)):
            assign = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=body[-1].value, lineno=0)
            body[-1:] = [assign, ast.Return(value=ast.Name(id=name, ctx=ast.Load()))]
    return ast.fix_missing_locations(tree)


# -- reordering (a copier's disguise) ----------------------------------------------------------------
def _reads_writes(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (writes if isinstance(node.ctx, ast.Store) else reads).add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            (writes if isinstance(node.ctx, ast.Store) else reads).add(f"{node.value.id}.{node.attr}")
    if isinstance(stmt, ast.AugAssign):
        reads |= writes
    return reads, writes


def _movable(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return False
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            return False                   # self.x = ...: a module's parameters keep their order
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name.endswith("_") or any(word in name for word in ORDERED_CALLS):
                return False
    return True


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    (ra, wa), (rb, wb) = _reads_writes(a), _reads_writes(b)
    return not (wa & (rb | wb)) and not (wb & ra)


def _swappable(a: ast.stmt, b: ast.stmt) -> bool:
    both_defs = isinstance(a, ast.FunctionDef) and isinstance(b, ast.FunctionDef)
    return both_defs or _movable(a) and _movable(b) and _independent(a, b)


def reorder(tree: ast.Module, rng: random.Random, chance: float = 0.7) -> int:
    """Swap adjacent independent statements (and adjacent top-level functions), the operands of ``*`` and ``+``
    where that cannot change the result, and the order of keyword arguments: each change that can be made
    with probability ``chance``, at least one where any can; how many were made."""
    changes: list[tuple[str, Any, int]] = []
    for body in [tree.body] + [fn.body for fn in functions(tree)]:
        i = 0
        while i + 1 < len(body):          # non-overlapping pairs: each swap was checked on the order it changes
            if _swappable(body[i], body[i + 1]):
                changes.append(("swap", body, i))
                i += 1
            i += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and _commutes(node):
            changes.append(("operands", node, 0))
        elif isinstance(node, ast.Call) and len(node.keywords) >= 2 and all(k.arg for k in node.keywords):
            changes.append(("keywords", node, 0))
    chosen = [c for c in changes if rng.random() < chance] or changes[:1] and [rng.choice(changes)]
    for kind, where, i in chosen:
        if kind == "swap":
            where[i], where[i + 1] = where[i + 1], where[i]
        elif kind == "operands":
            where.left, where.right = where.right, where.left
        else:
            where.keywords.reverse()
    return len(chosen)


def _commutes(node: ast.BinOp) -> bool:
    if not isinstance(node.op, (ast.Mult, ast.Add)):
        return False
    for side in (node.left, node.right):
        if isinstance(side, (ast.Tuple, ast.List, ast.JoinedStr)) or \
                isinstance(side, ast.Constant) and isinstance(side.value, str):
            return False
        if isinstance(node.op, ast.Add) and any(isinstance(n, ast.Slice) or getattr(n, "attr", "") == "shape"
                                                for n in ast.walk(side)):
            return False                   # x.shape[:-1] + (h, d): tuples concatenate
    return True


# -- comments and blank lines -----------------------------------------------------------------------
def statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements a comment may sit on: every function's own body (methods' included)."""
    return [s for fn in functions(tree) for s in fn.body]


def comment_voice(rng: random.Random, language: str) -> dict[str, list[str]]:
    """A student's comments: a verb or two, one way to name the value, one ending, a capital or not; the
    plain forms most often, so that the comments many students write are common ones."""
    parts = COMMENT_PARTS[language]
    objects, endings = parts["objects"], parts["endings"]         # the plainest first: most students' choice
    thing = rng.choices(objects, [6] + [4 / (len(objects) - 1)] * (len(objects) - 1))[0]
    end, capital = rng.choices(endings, (7, 2, 1))[0], rng.random() < 0.5

    def shaped(text: str) -> str:
        return (text[:1].upper() + text[1:] if capital and language == "en" else text) + end

    verbs = parts["verbs"]                                          # the first is the most common
    chosen = {rng.choices(verbs, [len(verbs)] + [1] * (len(verbs) - 1))[0] for _ in range(2)}
    return {"assign": [shaped(f"{verb} {thing}") for verb in sorted(chosen)],
            **{kind: [shaped(rng.choice(parts[kind]))] for kind in ("return", "if", "other")}}


def comment_for(stmt: ast.stmt, voice: dict[str, list[str]], rng: random.Random) -> str:
    if isinstance(stmt, ast.Return):
        return rng.choice(voice["return"])
    if isinstance(stmt, ast.If):
        return rng.choice(voice["if"])
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
    if target is not None:
        return rng.choice(voice["assign"]).replace("{t}", ast.unparse(target))
    return rng.choice(voice["other"])


def annotate(tree: ast.Module, habits: Habits, rng: random.Random) -> None:
    """Comments and blank lines on the cell's statements, as ``habits`` has them."""
    voice = habits.voice or comment_voice(rng, habits.language)
    for fn in functions(tree):
        for i, stmt in enumerate(fn.body):
            if rng.random() < habits.comments:
                stmt.comment = comment_for(stmt, voice, rng)                # type: ignore[attr-defined]
            if i and rng.random() < habits.blank:
                stmt.blank = True                                           # type: ignore[attr-defined]


def strip_comments(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        for attr in ("comment", "before", "blank"):
            if attr in node.__dict__:
                delattr(node, attr)


# -- rendering --------------------------------------------------------------------------------------
@dataclass
class Template:
    """What the release's cell gives: each definition's header and docstring as written there."""

    headers: dict[str, list[str]] = field(default_factory=dict)      # qualified name -> its def/class lines
    docstrings: dict[str, list[str]] = field(default_factory=dict)   # qualified name -> its docstring's lines

    @classmethod
    def of(cls, cell: str) -> Template:
        lines = cell.splitlines()
        made = cls()

        def walk(body: list[ast.stmt], prefix: str) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    name = prefix + node.name
                    first = node.body[0]
                    made.headers[name] = lines[node.lineno - 1:first.lineno - 1]
                    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                            isinstance(first.value.value, str):
                        made.docstrings[name] = lines[first.lineno - 1:first.end_lineno]
                    if isinstance(node, ast.ClassDef):
                        walk(node.body, name + ".")

        walk(ast.parse(cell).body, "")
        return made


def restyle(code: str, fmt: Format) -> str:
    """One statement's source (as ``ast.unparse`` writes it) laid out the student's way."""
    if not (fmt.quotes == '"' or fmt.compact_ops or fmt.tight_commas or fmt.spaced_kwargs):
        return code
    starts = [0]
    for line in code.splitlines(True):
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        at, end = starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1]
        before, after = code[at - 1:at] if at else "", code[end:end + 1]
        if tok.type == tokenize.STRING and fmt.quotes == '"' and tok.string[:1] == "'" and \
                not any(ch in tok.string[1:-1] for ch in "'\"\\") and not tok.string.startswith("'''"):
            edits.append((at, end, '"' + tok.string[1:-1] + '"'))
        elif tok.type == tokenize.OP:
            depth += tok.string in "([{"
            depth -= tok.string in ")]}"
            if fmt.compact_ops and tok.string in ("@", "*", "/", "//", "**", "+", "-") and before == after == " ":
                edits.append((at - 1, end + 1, tok.string))
            elif fmt.tight_commas and tok.string == "," and after == " ":
                edits.append((at, end + 1, ","))
            elif fmt.spaced_kwargs and tok.string == "=" and depth and before != " ":
                edits.append((at, end, " = "))
    for at, end, text in sorted(edits, reverse=True):
        code = code[:at] + text + code[end:]
    return code


def _header(node: ast.FunctionDef | ast.ClassDef, name: str, template: Template, indent: str) -> list[str]:
    if name in template.headers:
        return template.headers[name]
    bare = copy.copy(node)
    bare.body = [ast.Pass()]
    return [indent + line for line in ast.unparse(bare).splitlines()[:-1]]


def _unparse(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and stmt.value.elts:
        return "return " + ", ".join(ast.unparse(e) for e in stmt.value.elts)     # as people write it: no ( )
    return ast.unparse(stmt)


def _render_stmt(stmt: ast.stmt, indent: str, fmt: Format) -> list[str]:
    lines = [indent + line for line in restyle(_unparse(stmt), fmt).splitlines()]
    out = [""] if getattr(stmt, "blank", False) else []
    out += [f"{indent}# {text}" for text in getattr(stmt, "before", [])]
    comment = getattr(stmt, "comment", "")
    if comment and fmt.trailing and len(lines) == 1:
        lines[0] += f"  # {comment}"
    elif comment:
        out.append(f"{indent}# {comment}")
    return out + lines


def _render_def(node: ast.FunctionDef | ast.ClassDef, prefix: str, indent: str, template: Template,
                fmt: Format) -> list[str]:
    name = prefix + node.name
    out = list(_header(node, name, template, indent))
    if fmt.keep_doc and name in template.docstrings:
        out += template.docstrings[name]
        if isinstance(node, ast.ClassDef):
            out.append("")
    inner = indent + "    "
    for i, stmt in enumerate(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            if i:
                out.append("")
            out += _render_def(stmt, name + ".", inner, template, fmt)
        else:
            out += _render_stmt(stmt, inner, fmt)
    return out


def render(tree: ast.Module, template: Template, fmt: Format) -> str:
    """The cell's text: the template's headers and (if kept) docstrings, the code laid out by ``fmt``."""
    out: list[str] = []
    for i, stmt in enumerate(tree.body):
        is_def = isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
        if i and (is_def or isinstance(tree.body[i - 1], (ast.FunctionDef, ast.ClassDef))):
            out += ["", ""]
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            out += _render_def(stmt, "", "", template, fmt)
        else:
            out += _render_stmt(stmt, "", fmt)
    return "\n".join(out) + "\n"
