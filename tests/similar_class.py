"""A generated class of 02_qkv_attention for the similarity report's tests: honest students who vary as students
vary (several correct methods, the reference's among them, names, comments and quirks of their own, written
answers in their own words), and copies disguised the ways issue 69 names (renamed, reordered, reformatted and
recommented, equivalent operations swapped, part of the exercises copied).

:func:`honest` writes one student's code, exercise by exercise (``methods`` picks each exercise's way, default a
random one; ``quirks`` adds the student's own comments, an odd name, a dead statement and an error message);
:func:`disguise` copies a student's functions and disguises them; :func:`notebook` makes the release's notebook
with those functions and a written answer; :func:`write_class` writes a batch folder (``<student>/<notebook>``,
with nbgrader's ``timestamp.txt`` where a time is given) as ``autograder grade`` reads it; :func:`cohort` reads such
a class into the comparison's :class:`~autograder.similarity.scoring.Cohort`. :data:`EVE` is a correct answer
written the way one student would (none of the course's alternatives): what a copy of it keeps is rare.
"""
from __future__ import annotations

import ast
import datetime as dt
import json
import random
from pathlib import Path

from autograder.course.config import load_course

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
RELEASE = COURSE.root / "release" / QKV.id / QKV.notebook

#: Each exercise's ways, as code with the student's names to fill in ({a}, {b}, {c}: intermediate values).
METHODS: dict[str, dict[str, str]] = {
    "project_qkv": {
        "reference": "def project_qkv(x, W_q, W_k, W_v):\n    return x @ W_q, x @ W_k, x @ W_v\n",
        "named": "def project_qkv(x, W_q, W_k, W_v):\n    {a} = x @ W_q\n    {b} = x @ W_k\n    {c} = x @ W_v\n"
                 "    return {a}, {b}, {c}\n",
        "einsum": "def project_qkv(x, W_q, W_k, W_v):\n"
                  "    return tuple(torch.einsum('...td,de->...te', x, W) for W in (W_q, W_k, W_v))\n",
        "loop": "def project_qkv(x, W_q, W_k, W_v):\n    {a} = []\n    for W in (W_q, W_k, W_v):\n"
                "        {a}.append(torch.matmul(x, W))\n    return tuple({a})\n",
    },
    "softmax": {
        "reference": "def softmax(x, dim=-1):\n    shifted = x - x.amax(dim=dim, keepdim=True)\n"
                     "    e = torch.exp(shifted)\n    return e / e.sum(dim=dim, keepdim=True)\n",
        "max-values": "def softmax(x, dim=-1):\n    {a} = x.max(dim=dim, keepdim=True).values\n"
                      "    {b} = torch.exp(x - {a})\n    return {b} / torch.sum({b}, dim=dim, keepdim=True)\n",
        "logsumexp": "def softmax(x, dim=-1):\n    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))\n",
        "double": "def softmax(x, dim=-1):\n    {a} = x.double()\n    {a} = {a} - {a}.max(dim, keepdim=True)[0]\n"
                  "    {b} = {a}.exp()\n    return ({b} / {b}.sum(dim, keepdim=True)).to(x.dtype)\n",
    },
    "attention_scores": {
        "reference": "def attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])\n",
        "named": "def attention_scores(Q, K):\n    {a} = Q.shape[-1]\n"
                 "    {b} = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt({a})\n    return {b}\n",
        "pow": "def attention_scores(Q, K):\n    {a} = Q.size(-1) ** -0.5\n    return (Q @ K.mT) * {a}\n",
        "einsum": "def attention_scores(Q, K):\n"
                  "    return torch.einsum('...qd,...kd->...qk', Q, K) / Q.shape[-1] ** 0.5\n",
    },
    "scaled_dot_product_attention": {
        "reference": "def scaled_dot_product_attention(Q, K, V):\n"
                     "    weights = softmax(attention_scores(Q, K), dim=-1)\n    return weights @ V, weights\n",
        "named": "def scaled_dot_product_attention(Q, K, V):\n    {a} = attention_scores(Q, K)\n"
                 "    {b} = softmax({a}, dim=-1)\n    {c} = {b} @ V\n    return {c}, {b}\n",
        "inline": "def scaled_dot_product_attention(Q, K, V):\n    {a} = Q.shape[-1]\n"
                  "    {b} = Q @ K.transpose(-2, -1) / math.sqrt({a})\n    {c} = softmax({b}, dim=-1)\n"
                  "    return torch.matmul({c}, V), {c}\n",
    },
    "softmax_jacobian": {
        "reference": "def softmax_jacobian(weights):\n    outer = weights.unsqueeze(-1) * weights.unsqueeze(-2)\n"
                     "    return torch.diag_embed(weights) - outer\n",
        "matmul": "def softmax_jacobian(weights):\n    {a} = torch.diag_embed(weights)\n"
                  "    {b} = weights.unsqueeze(-1) @ weights.unsqueeze(-2)\n    return {a} - {b}\n",
        "einsum": "def softmax_jacobian(weights):\n    {a} = torch.einsum('...i,...j->...ij', weights, weights)\n"
                  "    return torch.diag_embed(weights) - {a}\n",
    },
}
NAMES = [["out", "res", "r"], ["tmp", "t", "val"], ["y", "z", "u"], ["scores", "s", "att"], ["probs", "p", "w"],
         ["result", "output", "o"], ["q", "k", "v"], ["a", "b", "c"], ["m", "e", "n"], ["first", "second", "third"]]
COMMON_COMMENTS = ["# matrix multiply", "# scale the scores", "# softmax over the last dim", "# subtract the max",
                   "# return the result"]
WORDS = ["purple", "glacier", "marmot", "saffron", "quartz", "tundra", "lantern", "walnut", "falcon", "cobalt",
         "meadow", "ember", "harbor", "juniper", "pebble", "thistle", "velvet", "willow", "zephyr", "orchid"]
#: Sentences of honest written answers: what the question leads every student to say, in a few wordings.
COMMON_SENTENCES = ["q·k 是 d_k 个独立项之和，每项方差为 1，所以方差是 d_k。", "点积的方差等于 d_k。",
                    "除以 √d_k 后方差回到 1。", "不缩放时 softmax 会接近独热，梯度变小。",
                    "d_k 大时分数的尺度变大，softmax 饱和，训练变慢。", "缩放让分数的标准差保持为 1。"]


def honest(rng: random.Random, methods: dict[str, str] | None = None, quirks: bool = True) -> dict[str, str]:
    """One honest student's functions: function name -> source."""
    out = {}
    for function, ways in METHODS.items():
        way = (methods or {}).get(function) or rng.choice(sorted(ways))
        names = dict(zip("abc", rng.choice(NAMES)))
        code = ways[way].format(**names)
        if quirks:
            for _ in range(rng.choice((0, 1, 1, 2))):
                code = hoisted(code, rng)
            code = _quirk(rng, code)
        out[function] = code
    return out


def hoisted(code: str, rng: random.Random) -> str:
    """``code`` with one of its sub-expressions (a call or an operation) given a name of its own on the line
    before, as students write intermediate values: the same method, another shape."""
    tree = ast.parse(code)
    fn = tree.body[0]
    spots = [(i, node) for i, statement in enumerate(fn.body) for node in ast.walk(statement)
             if isinstance(node, (ast.Call, ast.BinOp)) and node is not getattr(statement, "value", None)
             and not isinstance(statement, (ast.For, ast.If))]
    if not spots:
        return code
    index, node = rng.choice(spots)
    name = rng.choice(["tmp", "mid", "part", "step", "val", "h", "inter", "piece", "calc", "sub"])
    name += rng.choice(["", "1", "2", "_a", "_b", "_x"])
    replaced = _Replace(node, name).visit(fn.body[index])
    fn.body[index:index + 1] = [ast.Assign([ast.Name(name, ast.Store())], node), replaced]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _Replace(ast.NodeTransformer):
    def __init__(self, node: ast.AST, name: str):
        self.node, self.name = node, name

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.node:
            return ast.Name(self.name, ast.Load())
        return super().visit(node)


def _quirk(rng: random.Random, code: str) -> str:
    """A comment (common or the student's own), now and then an odd name, a dead statement, an error message."""
    lines = code.rstrip("\n").split("\n")
    roll = rng.random()
    if roll < 0.3:
        lines.insert(1, "    " + rng.choice(COMMON_COMMENTS))
    elif roll < 0.5:
        lines.insert(1, f"    # {' '.join(rng.sample(WORDS, 4))} trick from my notes")
    if rng.random() < 0.15:
        word = "_".join(rng.sample(WORDS, 2)) + str(rng.randint(10, 99))
        lines.insert(1, f"    if {lines[0].split('(')[1].split(',')[0].rstrip('):')}.dim() < 1:\n"
                        f"        raise ValueError('need a tensor, {word}')")
    if rng.random() < 0.1:
        lines.insert(1, f"    {rng.choice(WORDS)}_{rng.choice(WORDS)}_{rng.randint(0, 99)} = len(str(type(None)))")
    return "\n".join(lines) + "\n"


def answer(rng: random.Random) -> str:
    """An honest written answer: two or three of the common sentences and one of the student's own."""
    own = "我觉得" + "".join(rng.sample("天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳", 12)) + "。"
    return "".join(rng.sample(COMMON_SENTENCES, rng.randint(2, 3))) + own


# -- copies ------------------------------------------------------------------------------------------------------
def disguise(functions: dict[str, str], rng: random.Random, *, rename: bool = True, reorder: bool = True,
             swap: bool = True, recomment: bool = True, only: tuple[str, ...] | None = None) -> dict[str, str]:
    """``functions`` copied (those in ``only``, when given) and disguised: locals renamed, independent statements
    swapped, equivalent operations exchanged (``@`` <-> ``torch.matmul``, ``.transpose(-2, -1)`` <-> ``.mT``),
    reformatted by ast.unparse (its comments dropped) with a new comment."""
    out = {}
    for name, code in functions.items():
        if only is not None and name not in only:
            continue
        tree = ast.parse(code)
        fn = tree.body[0]
        if rename:
            _Rename(rng).visit(fn)
        if reorder:
            fn.body = _swapped(fn.body)
        if swap:
            tree = ast.fix_missing_locations(_Swap().visit(tree))
        text = ast.unparse(tree) + "\n"
        if recomment:
            head, _, rest = text.partition("\n")
            text = f"{head}\n    # {rng.choice(['done in class', 'see lecture 3', 'my version'])}\n{rest}"
        out[name] = text
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, rng: random.Random):
        self.rng, self.names = rng, {}

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if isinstance(node.ctx, ast.Store) and node.id not in self.names:
            self.names[node.id] = f"{node.id}_{self.rng.choice(['x', 'tmp', 'val'])}{self.rng.randint(1, 9)}"
        node.id = self.names.get(node.id, node.id)
        return node


class _Swap(ast.NodeTransformer):
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            matmul = ast.Attribute(ast.Name("torch", ast.Load()), "matmul", ast.Load())
            return ast.Call(matmul, [node.left, node.right], [])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "transpose" and {ast.unparse(a) for a in node.args} == {
                "-2", "-1"} and len(node.args) == 2:
            return ast.Attribute(func.value, "mT", ast.Load())
        return node


def _swapped(body: list[ast.stmt]) -> list[ast.stmt]:
    """The first two adjacent assignments that neither reads the other's target, swapped."""
    for i in range(len(body) - 1):
        first, second = body[i], body[i + 1]
        if isinstance(first, ast.Assign) and isinstance(second, ast.Assign):
            written = {n.id for t in first.targets + second.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            read = {n.id for s in (first, second) for n in ast.walk(s.value) if isinstance(n, ast.Name)}
            if not written & read:
                return body[:i] + [second, first] + body[i + 2:]
    return body


# -- notebooks and a batch folder ----------------------------------------------------------------------------------
def notebook(functions: dict[str, str], written: str = "") -> dict:
    """The release's notebook with ``functions`` in their exercises' cells and ``written`` in 2.Q1's answer cell."""
    nb = json.loads(RELEASE.read_text(encoding="utf-8"))
    by_id = {f"ex{e.id.replace('.', '_')}": e.function for e in QKV.exercises}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in by_id and by_id[gid] in functions:
            cell["source"] = functions[by_id[gid]]
        elif gid == "q2_Q1" and written:
            cell["source"] = written
    return nb


def write_class(root: Path, students: dict[str, dict], when: dict[str, dt.datetime] | None = None) -> Path:
    """A batch folder: ``root/<student>/02_qkv_attention.ipynb`` for each of ``students`` (name -> notebook),
    with a timestamp.txt where ``when`` gives a time."""
    for student, nb in students.items():
        folder = root / student
        folder.mkdir(parents=True, exist_ok=True)
        (folder / QKV.notebook).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        if when and student in when:
            stamp = when[student].astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
            (folder / "timestamp.txt").write_text(stamp + "\n", encoding="utf-8")
    return root


def cohort(root: Path, students: dict[str, dict], when: dict[str, dt.datetime] | None = None):
    """``students`` written under ``root`` (:func:`write_class`) and read: (the Cohort, student -> its number)."""
    from autograder.similarity.corpus import read_baseline, read_work
    from autograder.similarity.scoring import Cohort

    write_class(root, students, when)
    works = []
    for student in sorted(students):
        stamp = {"when": when[student].isoformat()} if when and student in when else None
        works.append(read_work(root / student / QKV.notebook, f"{student}/{QKV.notebook}", student, QKV, COURSE,
                               stamp))
    return Cohort(works, read_baseline(COURSE, QKV)), {w.student: i for i, w in enumerate(works)}


def pair_score(found, index: dict[str, int], first: str, second: str):
    """The Scored of two students of a cohort (None: they share nothing that counts)."""
    a, b = sorted((index[first], index[second]))
    keys = found.candidates().get((a, b))
    return None if keys is None else found.score(a, b, keys)


#: One student's own correct answers (not the course's alternatives; 2.1 is the reference's).
EVE = {
    "project_qkv": METHODS["project_qkv"]["reference"],
    "softmax": "def softmax(x, dim=-1):\n    moved = x.transpose(dim, -1)\n"
               "    peak = moved.max(dim=-1, keepdim=True).values.detach()\n    powered = torch.exp(moved - peak)\n"
               "    normed = powered / powered.sum(dim=-1, keepdim=True).clamp_min(1e-30)\n"
               "    return normed.transpose(dim, -1)\n",
    "attention_scores": "def attention_scores(Q, K):\n    width = Q.shape[-1]\n"
                        "    raw = torch.matmul(Q, K.transpose(-2, -1))\n    scaled = raw * (1.0 / math.sqrt(width))\n"
                        "    return scaled.contiguous()\n",
    "scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V):\n"
                                    "    logits = attention_scores(Q, K)\n"
                                    "    attn = softmax(logits.double(), dim=-1).to(logits.dtype)\n"
                                    "    mixed = attn @ V\n    return mixed.contiguous(), attn\n",
    "softmax_jacobian": "def softmax_jacobian(weights):\n    n = weights.shape[-1]\n"
                        "    eye = torch.eye(n, dtype=weights.dtype, device=weights.device)\n"
                        "    col = weights.unsqueeze(-1)\n    return eye * col - col * weights.unsqueeze(-2)\n",
}
REFERENCE = {function: ways["reference"] for function, ways in METHODS.items()}


def generated(n: int, copies: int, seed: int = 0) -> tuple[dict[str, dict], set[tuple[str, str]]]:
    """A class of ``n`` honest students and ``copies`` disguised copies of some of them: the notebooks and the
    copied pairs (sorted names)."""
    rng = random.Random(seed)
    code = {f"s{i:03d}": honest(rng) for i in range(n)}
    written = {s: answer(rng) for s in code}
    pairs = set()
    for j in range(copies):
        source = rng.choice(sorted(code))
        name = f"c{j:03d}"
        kind = j % 5
        only = tuple(rng.sample(sorted(METHODS), 2)) if kind == 4 else None
        fake = disguise(code[source], rng, rename=kind != 1, reorder=kind != 2, swap=kind != 3, only=only)
        code[name] = {**honest(rng), **fake} if only else fake
        written[name] = written[source] if kind in (0, 2) else answer(rng)
        pairs.add(tuple(sorted((source, name))))
    return {s: notebook(code[s], written[s]) for s in code}, pairs
