"""What the comparison reads: each notebook's exercise functions, written answers and submission time
(:func:`read_work`), and what the course itself holds, which never counts as shared (:func:`read_baseline`).

A notebook is found and named as ``autograder grade`` finds and names it
(:func:`autograder.grading.submissions.discover`: its student, its assignment, its time from the trusted
sources), then read through the grader's one gate for a notebook's bytes
(:func:`autograder.course.notebook.load_notebook`, bounded by course.yml's limits). An exercise's function is the
last top-level ``def`` (or ``class``: 4.4's ``MultiHeadAttention``) of its name in the code cells, in their order
(the one that runs); a cell larger than ``limits.cell_kb``, or that does not parse, is skipped; cells are turned
into plain Python as the grader turns them (:func:`autograder.course.notebook.to_python`), never run.

The baseline of an assignment is what the course hands out or holds: the release's notebook (its stubs, its code
and its text), the instructor's notebook (its model answers), ``solutions/<module>.py`` and the known correct
alternatives and known mistakes of ``source/<assignment>/`` (read with :mod:`ast`, not imported: the comparison
needs their code, not torch). A missing file leaves its part of the baseline empty.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder.core.errors import NotebookError
from autograder.core.pyast import parse as parse_python
from autograder.course.config import Assignment, Course
from autograder.course.files import ALTERNATIVES_FILE, MISTAKES_FILE
from autograder.course.notebook import Bounds, cell_source, load_notebook, parse_notebook, to_python
from autograder.course.written import answers as written_answers
from autograder.similarity import oddities, prose
from autograder.similarity.fragments import FunctionCode, TooLarge, function_code
from autograder.similarity.tokens import DEFINITIONS, Definition

#: The decorators that declare an exercise's function in the course's own modules.
DECLARATIONS = ("alternative", "mistake")


@dataclass
class Work:
    """One student's notebook for one assignment, as the comparison reads it."""

    student: str
    assignment: str
    source: str                                   # where it was found (relative to SUBMISSIONS)
    functions: dict[str, FunctionCode] = field(default_factory=dict)   # exercise id -> its function
    answers: dict[str, prose.Prose] = field(default_factory=dict)      # question id -> its answer
    when: datetime | None = None                  # when it was handed in, where a trusted source says
    notes: list[str] = field(default_factory=list)   # what was left out of it, for the instructor


@dataclass
class Baseline:
    """What an assignment's own files hold: none of it is evidence."""

    fragments: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    texts: set[tuple[str, str]] = field(default_factory=set)
    shingles: set[int] = field(default_factory=set)
    dead: set[int] = field(default_factory=set)
    spelled: set[int] = field(default_factory=set)


# -- a student's notebook ---------------------------------------------------------------------------------------
def read_work(path: Path, source: str, student: str, assignment: Assignment, course: Course,
              submitted: dict[str, Any] | None = None, *, passed: str | None = None) -> Work:
    """The notebook at ``path`` as :class:`Work`; NotebookError (naming ``source``) when it cannot be read.

    ``passed``: the sha256 of bytes that went through the notebook gate already (discovery read this file:
    :func:`autograder.grading.evidence.notebook_evidence`); the same bytes are parsed without being scanned again.
    """
    bounds = Bounds.of(course.limits)
    try:
        with open(path, "rb") as f:
            data = f.read(bounds.max_bytes + 1)
    except OSError as exc:
        raise NotebookError(f"{source}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if len(data) > bounds.max_bytes:
        raise NotebookError(f"{source}: larger than limits.notebook_mb")
    if passed is not None and hashlib.sha256(data).hexdigest() == passed:
        parsed = json.loads(data.decode("utf-8-sig"))    # the very bytes the gate scanned and parsed
    else:
        parsed = load_notebook(data, bounds, source)
    nb = parse_notebook(parsed, source)
    work = Work(student, assignment.id, source, when=_when(submitted))
    wanted = {e.function: e.id for e in assignment.exercises}
    for name, (fn, lines) in definitions(nb, wanted, int(course.limits.cell_kb * 1024)).items():
        try:
            work.functions[wanted[name]] = function_code(wanted[name], fn, lines)
        except (TooLarge, RecursionError) as exc:
            work.notes.append(f"{wanted[name]}: not compared ({exc if isinstance(exc, TooLarge) else 'too deep'})")
    for entry in written_answers(nb, assignment.questions) if assignment.questions else ():
        if entry["answered"]:
            work.answers[entry["question"]] = prose.prose(entry["answer"])
    return work


def _when(submitted: dict[str, Any] | None) -> datetime | None:
    text = (submitted or {}).get("when")
    if not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else None


def definitions(nb: dict[str, Any], wanted: dict[str, str], max_cell: int
                ) -> dict[str, tuple[Definition, list[str]]]:
    """function (or class) name -> (its last top-level definition in the code cells, the lines of its cell)."""
    if not wanted:
        return {}
    pattern = re.compile(r"\b(?:def|class)\s+(?:" + "|".join(map(re.escape, wanted)) + r")\b")
    found: dict[str, tuple[Definition, list[str]]] = {}
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = cell_source(cell)
        if len(text.encode("utf-8", "surrogatepass")) > max_cell or not pattern.search(text):
            continue
        tree, lines = _parsed(text)
        for node in tree.body if tree is not None else ():
            if isinstance(node, DEFINITIONS) and node.name in wanted:
                found[node.name] = (node, lines)      # the last one wins, as when the cells run
    return found


def _parsed(text: str) -> tuple[ast.Module | None, list[str]]:
    """A cell's code as the grader turns it into Python, parsed; (None, []) where it is skipped or does not parse."""
    code, skipped = to_python(text)
    if skipped is not None:
        return None, []
    try:
        return parse_python(code), code.split("\n")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, []


# -- the course's own -------------------------------------------------------------------------------------------
def read_baseline(course: Course, assignment: Assignment) -> Baseline:
    """The baseline of ``assignment`` (see the module's docstring); read once per process while its files are
    unchanged (the same course compared again, as by the tests, reads nothing again)."""
    root = course.root
    files = [root / folder / assignment.id / assignment.notebook for folder in ("release", "source")]
    files += [root / "solutions" / f"{assignment.module}.py"]
    files += [root / "source" / assignment.id / name for name in (ALTERNATIVES_FILE, MISTAKES_FILE)]
    key = (tuple(_stamp(p) for p in files), tuple((e.id, e.function) for e in assignment.exercises))
    if key not in _BASELINES:
        if len(_BASELINES) > 16:
            _BASELINES.clear()
        _BASELINES[key] = _baseline(assignment, files)
    return _BASELINES[key]


_BASELINES: dict[tuple[Any, ...], Baseline] = {}


def _stamp(path: Path) -> tuple[str, int, int]:
    try:
        info = path.stat()
    except OSError:
        return str(path), -1, -1
    return str(path), info.st_mtime_ns, info.st_size


def _baseline(assignment: Assignment, files: list[Path]) -> Baseline:
    base = Baseline()
    wanted = {e.function: e.id for e in assignment.exercises}
    for path in files[:2]:                     # the release's notebook, the instructor's
        nb = _course_notebook(path)
        if nb is None:
            continue
        for cell in nb.get("cells", []):
            if not isinstance(cell, dict):
                continue
            text = cell_source(cell)
            if cell.get("cell_type") == "code":
                _add_code(base, text, wanted, {})
            else:
                base.shingles |= prose.shingles(text)
    _add_file(base, files[2], wanted, {})     # solutions/<module>.py
    exercises = {e.id: e.function for e in assignment.exercises}
    for path in files[3:]:                     # alternatives.py, mistakes.py
        _add_file(base, path, wanted, exercises)
    return base


def _course_notebook(path: Path) -> dict[str, Any] | None:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return nb if isinstance(nb, dict) and isinstance(nb.get("cells"), list) else None


def _add_file(base: Baseline, path: Path, wanted: dict[str, str], declared: dict[str, str]) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    _add_code(base, text, wanted, declared)


def _add_code(base: Baseline, text: str, wanted: dict[str, str], declared: dict[str, str]) -> None:
    """The fragments, names and texts of one piece of the course's code. ``wanted``: function name -> exercise;
    ``declared``: exercise -> function name, for the functions a decorator declares (``@alternative("2.4", ...)``)."""
    code, skipped = to_python(text)
    try:
        tree = parse_python(code if skipped is None else text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    names, texts = oddities.of_source(tree, text)
    base.names |= names
    base.texts |= texts
    lines = text.split("\n")
    for node in tree.body:
        if not isinstance(node, DEFINITIONS):
            continue
        exercise = wanted.get(node.name) or _declared(node, declared)
        if exercise is None:
            continue
        try:
            found = function_code(exercise, node, lines)
        except (TooLarge, RecursionError):
            continue
        base.fragments |= set(found.fragments) | set(found.small)
        base.dead |= set(found.dead)
        base.spelled |= set(found.spelled) | {found.whole_spelled}


def _declared(node: Definition, declared: dict[str, str]) -> str | None:
    """The exercise an ``@alternative("2.4", ...)`` or ``@mistake("2.4", ...)`` decorator declares ``node`` for."""
    for deco in node.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "id", getattr(deco.func, "attr", "")) in DECLARATIONS \
                and deco.args and isinstance(deco.args[0], ast.Constant) and deco.args[0].value in declared:
            return str(deco.args[0].value)
    return None
