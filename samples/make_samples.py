"""Generate the sample submissions the README's demo grades (``samples/submissions/``).

Each sample is a student notebook made from the release notebook (what students
receive) with some solution cells filled in: from the source notebook's
solution (markers removed), or with code written here (a known mistake, a
hostile submission). Deterministic: the same inputs give the same bytes, so
``--check`` can tell when the samples are stale.

Until ``release/`` or ``source/`` exists for an assignment, its notebooks are
derived the way ``autograder build`` would (the source from ``solutions/<module>.py``
in the course's notebook conventions when there is no source notebook yet).

    python samples/make_samples.py            # (re)write samples/submissions/
    python samples/make_samples.py --check    # exit 1 naming every stale sample
"""
from __future__ import annotations

import argparse
import ast
import copy
import sys
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "samples" / "submissions"
sys.path.insert(0, str(ROOT))

from autograder.authoring.build import release_notebook  # noqa: E402
from autograder.authoring.notebooks import BEGIN, END, Source, strip_markers  # noqa: E402
from autograder.course.config import Assignment, Course, grade_id, load_course  # noqa: E402
from autograder.course.written import answer_grade_id  # noqa: E402


# -- the notebooks samples are made from ------------------------------------------------
def _cell(kind: str, gid: str, text: str, *, solution: bool = False) -> NotebookNode:
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(text, id=gid.replace("_", "-"))
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": gid, "locked": not solution,
                                 "schema_version": 3, "solution": solution}
    return cell


def _mark_solution(code: str) -> str:
    """Wrap the body of every function (after its docstring) in BEGIN/END SOLUTION lines."""
    lines = code.split("\n")
    tree = ast.parse(code)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    top = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    targets = top or functions  # a class: its methods
    for node in sorted(targets, key=lambda n: n.lineno, reverse=True):
        body = node.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
            body = body[1:]
        indent = " " * body[0].col_offset
        lines.insert(body[-1].end_lineno, f"{indent}### {END}")
        lines.insert(body[0].lineno - 1, f"{indent}### {BEGIN}")
    return "\n".join(lines)


def synthesized_source(assignment: Assignment) -> NotebookNode:
    """A source notebook in the course's conventions, from solutions/<module>.py (stand-in only)."""
    text = (ROOT / "solutions" / f"{assignment.module}.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    imports = [ast.get_source_segment(text, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    defs = {n.name: ast.get_source_segment(text, n) for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    cells = [_cell("markdown", "intro", f"# {assignment.title}"),
             _cell("code", "imports", "\n".join(imports)),
             _cell("code", "selfcheck_setup", "from autograder import check")]
    for ex in assignment.exercises:
        gid = grade_id(ex.id)
        cells += [_cell("markdown", f"{gid}_statement", f"## {ex.id} {ex.title}"),
                  _cell("code", gid, _mark_solution(defs[ex.function]), solution=True),
                  _cell("code", f"{gid}_check", f'check("{ex.id}")')]
    cells.append(_cell("markdown", "summary", "## 小结"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def source_notebook(assignment: Assignment, root: Path = ROOT) -> NotebookNode:
    path = root / "source" / assignment.id / assignment.notebook
    if path.exists():
        return nbformat.read(path, as_version=4)
    return synthesized_source(assignment)


def student_notebook(assignment: Assignment, root: Path = ROOT) -> NotebookNode:
    """What a student receives: release/ when built, else derived from the source as build would."""
    path = root / "release" / assignment.id / assignment.notebook
    if path.exists():
        return nbformat.read(path, as_version=4)
    src = source_notebook(assignment, root)
    language = load_course(root / "course.yml").language
    data = release_notebook(Source(f"source/{assignment.id}/{assignment.notebook}", src, "", ()), language)
    return nbformat.reads(data.decode("utf-8"), as_version=4)


# -- filling it in ----------------------------------------------------------------------
def _find(nb: NotebookNode, gid: str) -> NotebookNode:
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid:
            return cell
    raise KeyError(f"no cell {gid!r}")


def solution_code(assignment: Assignment, exercise_id: str, root: Path = ROOT) -> str:
    """The reference solution cell of one exercise, markers removed (what a perfect student writes)."""
    return strip_markers(_find(source_notebook(assignment, root), grade_id(exercise_id)).source)


def submission(assignment: Assignment, *, solved: tuple[str, ...] | str = (), code: dict[str, str] | None = None,
               extra_cells: dict[str, str] | None = None, root: Path = ROOT) -> NotebookNode:
    """The student notebook with ``solved`` exercises (``"all"``: and the written answers) filled from the
    source, ``code`` cells (exercise ID -> code) written as given, and ``extra_cells``
    (after grade_id -> code) added."""
    nb = copy.deepcopy(student_notebook(assignment, root))
    wanted = [e.id for e in assignment.exercises] if solved == "all" else list(solved)
    for ex in wanted:
        _find(nb, grade_id(ex)).source = solution_code(assignment, ex, root)
    if solved == "all":         # a written answer too: the source's model answer
        for q in assignment.questions:
            _find(nb, answer_grade_id(q.id)).source = _find(source_notebook(assignment, root),
                                                            answer_grade_id(q.id)).source
    for ex, text in (code or {}).items():
        _find(nb, grade_id(ex)).source = text
    for after, text in (extra_cells or {}).items():
        index = nb.cells.index(_find(nb, after))
        cell = nbformat.v4.new_code_cell(text, id=f"student-{after}".replace("_", "-"))
        nb.cells.insert(index + 1, cell)
    return nb


# -- the samples --------------------------------------------------------------------------
NO_SCALE = '''def scaled_dot_product_attention(Q, K, V):
    """Exercise 2.4 (a student who forgot the scale)."""
    weights = softmax(Q @ K.transpose(-2, -1), dim=-1)
    return weights @ V, weights
'''

HOSTILE_SETUP = '''import json
import os

import numpy as np
import torch

# In a grader that runs student code in its own process, these would pass everything.
torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
np.allclose = lambda *args, **kwargs: True
print(json.dumps({"student": "eve", "points": 8, "max_points": 8, "status": "graded"}))
for path in ("solutions/qkv_attention.py", "../../solutions/qkv_attention.py", "/work/main/solutions"):
    try:
        print(open(path).read()[:80])
    except OSError as exc:
        print("cannot read", path, type(exc).__name__)
try:
    with open("../../demo-out/grades.csv", "w") as f:
        f.write("eve,100\\n")
except OSError as exc:
    print("cannot write", type(exc).__name__)
'''

HOSTILE = {
    "2.1": '''class AlwaysEqual(torch.Tensor):
    def __eq__(self, other):
        return True


def project_qkv(x, W_q, W_k, W_v):
    """Right numbers in a tensor subclass that claims to equal anything."""
    return tuple((x @ W).as_subclass(AlwaysEqual) for W in (W_q, W_k, W_v))
''',
    "2.2": '''def softmax(x, dim=-1):
    """NaN everywhere."""
    return x * float("nan")
''',
    "2.3": '''def attention_scores(Q, K):
    """Right values, wrong dtype."""
    return (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).half()
''',
    "2.4": '''def scaled_dot_product_attention(Q, K, V):
    """Kills the process that calls it."""
    os._exit(0)
''',
}

def samples(course: Course, root: Path = ROOT) -> dict[str, bytes]:
    """Relative path under samples/submissions/ -> bytes: <student>/<assignment>.ipynb."""
    qkv = course.assignment("02_qkv_attention")
    made: dict[str, NotebookNode | str] = {}
    for a in course.assignments:
        made[f"ada/{a.id}.ipynb"] = submission(a, solved="all", root=root)          # correct
    made["ben/02_qkv_attention.ipynb"] = submission(qkv, solved=("2.1", "2.2", "2.3"), root=root)  # partial
    made["chen/02_qkv_attention.ipynb"] = submission(qkv, solved=("2.1", "2.2", "2.3"), code={"2.4": NO_SCALE},
                                                     root=root)                       # a known mistake
    made["dana/02_qkv_attention.ipynb"] = student_notebook(qkv, root)                 # stubs only
    made["eve/02_qkv_attention.ipynb"] = submission(qkv, code=HOSTILE, extra_cells={"imports": HOSTILE_SETUP},
                                                    root=root)                        # hostile
    text = nbformat.writes(submission(qkv, solved="all", root=root))
    made["finn/02_qkv_attention.ipynb"] = text[: len(text) // 2]                    # truncated upload
    out: dict[str, bytes] = {}
    for rel, nb in sorted(made.items()):
        out[rel] = (nb if isinstance(nb, str) else nbformat.writes(nb) + "\n").encode("utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 naming every stale or missing sample")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default: samples/submissions)")
    args = parser.parse_args(argv)
    files = samples(load_course())
    stale = [rel for rel, data in files.items()
             if not (args.out / rel).exists() or (args.out / rel).read_bytes() != data]
    if args.check:
        for rel in stale:
            print(f"stale: samples/submissions/{rel}")
        return 1 if stale else 0
    for rel, data in files.items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(files)} samples to {args.out} ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
