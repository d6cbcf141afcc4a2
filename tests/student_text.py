"""Everything a student of the course reads, collected for tests/curriculum/test_course_language.py: the notebooks'
markdown, the comments and docstrings of every code cell they get (stubs and demonstrations), and the
Chinese half of every check title, check message and mistake diagnosis the catalog produces (run here on
the references, the known mistakes and the correct alternatives, public and hidden checks, so that the
messages of failures are among them), the self-check table and the feedback built from those results.
"""
from __future__ import annotations

import ast
import html
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.course.config import Course

#: Words of ASCII letters a Chinese sentence of this course may hold: names of the things it computes
#: with, as the field writes them (Chinese technical prose keeps them), and units.
ALLOWED_WORDS = {
    # libraries, formats, hardware
    "torch", "pytorch", "numpy", "np", "python", "jupyterlab", "jupyter", "nbgrader", "gpu", "cpu", "cuda",
    "autograd", "matplotlib",
    "json", "csv", "html", "api", "ieee", "utf", "id", "ids", "io",
    # what the course computes
    "softmax", "logsumexp", "tanh", "sigmoid", "relu", "exp", "log", "max", "min", "sum", "mean", "argmax",
    "rnn", "rnns", "lstm", "gru", "mha", "sdpa", "qkv", "nan", "inf", "dtype", "float", "int", "bool", "str",
    "tensor", "tensors", "ndarray", "ndarrays", "module", "parameter", "buffer", "float16", "float32",
    "float64", "int64", "int32", "bfloat16", "uint8", "dropout", "transformer", "attention", "bert", "gpt",
    "dim", "keepdim", "strict", "true", "false", "none", "mit", "byte", "bytes", "kib", "mib", "gib", "kb", "mb",
    "gb", "ms", "s", "vs", "ok", "x", "y", "z", "hz", "sech", "cosh", "sinh", "e", "pi", "eps", "ulp",
    "one-hot", "onehot", "wall", "seq", "len", "bias",
}
#: A word of two or more ASCII letters (with hyphens), not part of an identifier or a number.
WORD = re.compile(r"(?<![\w.\-])[A-Za-z][A-Za-z\-]*[A-Za-z](?![\w(\-])")
#: What is code, not prose: code spans, math, identifiers (with _ . or a call), paths, numbers with units.
CODE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|\b[\w.]*[_.][\w.]*\b|\b\w+\(|\w+\[|<[^>\n]*>"
                  r"|[A-Za-z]+=|--?[a-z][\w-]*", re.S)


@dataclass(frozen=True)
class Text:
    where: str       # "02_qkv_attention cell 9 (comment)", "2.4/reference-random message", ...
    text: str


def english_words(text: str, also: set[str] = frozenset()) -> list[str]:
    """The English words of a Chinese text: what is left once code, math and the allowed terms are gone."""
    text = re.sub(r"\\([_*`\[\]()#|\\<>])", r"\1", text)      # Markdown's escapes (feedback: manual\_seed)
    text = html.unescape(text)                                     # and HTML's (&gt;)
    bare = CODE.sub(" ", text)
    return [w for w in WORD.findall(bare) if w.lower() not in ALLOWED_WORDS and w not in also
            and not (w.isupper() and len(w) <= 3)]          # shape letters and short acronyms: B, Tq, QK


def notebook_texts(course: Course, folder: str = "release") -> Iterator[Text]:
    """Markdown cells; comments and docstrings of every code cell the student gets."""
    for a in course.assignments:
        nb = nbformat.read(course.root / folder / a.id / a.notebook, as_version=4)
        for number, cell in enumerate(nb.cells, 1):
            where = f"{a.id} cell {number}"
            if cell.cell_type == "markdown":
                yield Text(f"{where} (markdown)", cell.source)
                continue
            if cell.cell_type != "code":
                continue
            yield from _code_texts(cell.source, where)


def _code_texts(source: str, where: str) -> Iterator[Text]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield Text(f"{where} (comment, line {token.start[0]})", token.string.lstrip("#").strip())
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
            doc = ast.get_docstring(node)
            if doc:
                yield Text(f"{where} (docstring of {getattr(node, 'name', 'the cell')})", doc)


def catalog_texts(course: Course) -> Iterator[Text]:
    """The Chinese half of every title, message and diagnosis the checks produce on the references, the
    known mistakes and the correct alternatives, and of the self-check tables and feedback built from them."""
    from autograder import catalog as C
    from autograder.authoring.alternatives import alternative_source
    from autograder.authoring.mutants import mutant_namespace
    from autograder.authoring.validate import solution_for
    from autograder.reports.feedback import feedback_markdown
    from autograder.selfcheck.results import SelfCheckResult

    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    diagnoser = C.LiveDiagnoser(course.tolerances)
    for a in course.assignments:
        exercises = []
        for ex in a.exercises:
            reference = solution_for(course, ex.id)
            for check in C.checks_for(ex.id, (C.Audience.PUBLIC, C.Audience.HIDDEN)):
                yield Text(f"{ex.id}/{check.name} title", check.title.zh)
            for m in C.MISTAKES.get(ex.id, []):
                yield Text(f"{ex.id} mistake {m.name}", m.message.zh)
            for alt in C.ALTERNATIVES.get(ex.id, []):
                yield Text(f"{ex.id} alternative {alt.name}", alt.description.zh)
            candidates = [("reference", {ex.function: reference})]
            candidates += [(f"mistake {m.name}", {ex.function: m.fn}) for m in C.MISTAKES.get(ex.id, [])]
            for alt in C.ALTERNATIVES.get(ex.id, [])[:1]:
                candidates.append((f"alternative {alt.name}", mutant_namespace(
                    a.module, ex.function, alternative_source(alt, ex.function), course.root)))
            for label, namespace in candidates:
                result = C.run_exercise(ex, C.in_process_runner(namespace),
                                        audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                                        tolerances=course.tolerances, seed_parts=("language", label),
                                        reference=reference, diagnoser=diagnoser)
                for r in result.checks:
                    if r.message is not None:
                        yield Text(f"{ex.id}/{r.check} message ({label})", r.message.zh)
                exercises.append(result)
        table = SelfCheckResult([e for e in exercises if e], "zh", title=a.id).text()
        yield Text(f"{a.id} self-check table", table)
        result = {"student": "小明", "assignment": a.id, "status": "graded", "points": 0.0,
                  "max_points": a.points, "exercises": [e.to_json() for e in exercises[:len(a.exercises)]],
                  "cells": [], "notes_msg": []}
        yield Text(f"{a.id} feedback", feedback_markdown(result, course, "zh"))


def source_texts(course: Course) -> Iterator[Text]:
    """Every zh= / Msg(zh, ...) literal of the course's check files (what the runs above may not reach)."""
    for a in course.assignments:
        for name in ("checks.py", "hidden.py", "mistakes.py"):
            path = Path(course.content_dir(a)) / name
            if not path.is_file():
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    for kw in node.keywords:
                        if kw.arg == "zh":
                            yield from _literal(kw.value, f"{a.id}/{name} line {node.lineno} (zh=)")
                    if getattr(node.func, "id", getattr(node.func, "attr", "")) == "Msg" and node.args:
                        yield from _literal(node.args[0], f"{a.id}/{name} line {node.lineno} (Msg zh)")


def _literal(node: ast.AST, where: str) -> Iterator[Text]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield Text(where, node.value)
    elif isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        yield Text(where, " ".join(parts))
