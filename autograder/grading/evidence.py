"""Reading evidence: what a name or a notebook says about its student and assignment.

:mod:`autograder.grading.submissions` weighs the evidence; this module only reads it, from text
that is all student-controlled:

* names: :func:`assignments_named` finds the assignment IDs and modules a folder or file name
  names (``01_rnn_decay``, ``alice-rnn-decay``: case, separators and Unicode forms do not
  matter); a folder or file name gives its student as an LMS format names it
  (:mod:`autograder.reports.lms`: Canvas' ``alicesmith_12345_67890_...``, Moodle's
  ``Ada Lovelace_12345_assignsubmission_file_``, with their ids), else as what is left once the
  assignment and copy noise (``-Copy1``, ``(2)``, ``final``) are taken out;
* a notebook: :func:`notebook_evidence` reads ``metadata.autograder.assignment``, the nbgrader
  ``grade_id`` of its cells and the exercise functions its code cells define, and
  :func:`notebook_says` tells whether that names one assignment.

A notebook is never executed nor imported: its JSON is parsed, its code cells only parsed as
Python (a cell over ``limits.cell_kb`` is scanned for ``def``/``class`` lines instead). Reading
never raises: a notebook that cannot be read (bad JSON, bad UTF-8, nesting past the recursion
limit) says nothing, and that is evidence too.
"""
from __future__ import annotations

import ast
import re
import unicodedata
from dataclasses import dataclass, field

from autograder.course.config import Course
from autograder.core.errors import NotebookError
from autograder.course.notebook import Bounds, all_cells, assignments_of_cells, load_notebook, notebook_claims, said_in
from autograder.core.pyast import parse as parse_python
from autograder.reports.lms import formats
from autograder.core.text import line

_COPY_NOISE = re.compile(r"(?:[-_ ]*copy\d*|[-_ ]*\(\d+\)|[-_ ]+v\d+|[-_ ]*final)+$", re.I)
_SEPARATORS = re.compile(r"[\s\-.]+")


def normalized_name(text: str) -> str:
    return _SEPARATORS.sub("_", unicodedata.normalize("NFC", text).lower())


def _assignment_tokens(course: Course) -> list[tuple[re.Pattern[str], str]]:
    out = []
    for a in course.assignments:
        for token in (a.id, a.module):
            out.append((re.compile(rf"(?<![0-9a-z]){re.escape(token)}(?![0-9a-z])"), a.id))
    return out


def assignments_named(text: str, course: Course) -> set[str]:
    """Assignment IDs named in a folder or file name (``01_rnn_decay``, ``alice-rnn-decay``)."""
    norm = normalized_name(text)
    return {aid for pattern, aid in _assignment_tokens(course) if pattern.search(norm)}


def _strip_assignment(stem: str, course: Course) -> str:
    norm = normalized_name(stem)
    for pattern, _ in sorted(_assignment_tokens(course), key=lambda p: -len(p[0].pattern)):
        norm = pattern.sub(" ", norm)
    residue = _COPY_NOISE.sub("", norm.strip(" _"))
    return re.sub(r"[\s_]+", "_", residue).strip(" _")


def student_from_dir(name: str) -> tuple[str, dict[str, str]]:
    """(student, LMS ids) of a folder, as an LMS format names it (Moodle's ``Ada Lovelace_12345_
    assignsubmission_file_``: ``Ada Lovelace``, ``{"moodle_id": "12345"}``), else the folder's name."""
    for lms in formats():
        found = lms.from_folder(name) if lms.from_folder is not None else None
        if found is not None:
            return found
    return name, {}


def student_from_stem(stem: str, course: Course) -> tuple[str | None, dict[str, str]]:
    """(student, LMS ids) of a file name, as an LMS format names it (Canvas' ``alicesmith_12345_67890_...``:
    ``alicesmith``, ``{"canvas_id": "12345"}``), else what is left of the name without the assignment."""
    for lms in formats():
        found = lms.from_file(stem) if lms.from_file is not None else None
        if found is not None:
            return found
    return _plain_student_from_stem(stem, course), {}


def _plain_student_from_stem(stem: str, course: Course) -> str | None:
    residue = _strip_assignment(stem, course)
    if not residue:
        return None
    if residue == normalized_name(stem).strip(" _"):
        return _COPY_NOISE.sub("", stem).strip() or None  # keep the student's own spelling
    return residue


@dataclass
class NotebookEvidence:
    """What a notebook says about itself (read leniently; None fields when unreadable)."""

    readable: bool
    declared: str | None = None          # metadata.autograder.assignment
    by_grade_id: set[str] = field(default_factory=set)
    by_function: dict[str, int] = field(default_factory=dict)   # left empty where the two above say enough


def notebook_evidence(data: bytes, course: Course) -> NotebookEvidence:
    """Assignment evidence inside a notebook, without executing anything; never raises.

    Cells over ``limits.cell_kb`` are not parsed (their function definitions are
    looked for on their first lines only).
    """
    try:
        return _notebook_evidence(data, course, int(course.limits.cell_kb * 1024))
    except Exception:  # noqa: BLE001 - RecursionError, MemoryError...: this notebook says nothing
        return NotebookEvidence(False)


def _notebook_evidence(data: bytes, course: Course, cell_bytes: int) -> NotebookEvidence:
    try:
        nb = load_notebook(data, Bounds.of(course.limits))
    except NotebookError:
        return NotebookEvidence(False)
    if not isinstance(nb, dict):
        return NotebookEvidence(False)
    ev = NotebookEvidence(True)
    declared, grade_ids = said_in(nb)
    ev.declared = line(declared, 80) if declared is not None else None
    functions = {e.function: a.id for a in course.assignments for e in a.exercises}
    texts: list[str] = []
    for cell in all_cells(nb):
        if cell.get("cell_type") == "code":
            src = cell.get("source", cell.get("input", ""))
            text = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else \
                src if isinstance(src, str) else ""
            texts.append(text)
    ev.by_grade_id = assignments_of_cells(grade_ids, course)
    if ev.declared is not None or len(ev.by_grade_id) == 1:
        return ev       # what the notebook says already (see notebook_says): its definitions are not read
    defined: set[str] = set()
    for text in texts:
        defined |= _defined_names(text) if len(text) <= cell_bytes else _defined_by_scan(text[:cell_bytes])
    for name in defined & functions.keys():
        ev.by_function[functions[name]] = ev.by_function.get(functions[name], 0) + 1
    return ev


#: A line that may start a definition: ``def``/``class`` first on it (after spaces, or ``async``).
_DEFINITION_LINE = re.compile(r"^[ \t\f]*(?:async[ \t\f]+)?(?:def|class)\b", re.M)


def _defined_names(code: str) -> set[str]:
    if _DEFINITION_LINE.search(code) is None:
        # No line starts with def or class (a top-level definition's does; so does every line the fallback
        # scan counts): nothing to parse. Most cells are such, and plan() reads every notebook before the
        # first is graded, in one process, whatever -j.
        return set()
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Magics, a half-written cell, one absurdly nested expression: a plain scan of def/class lines.
        return _defined_by_scan(code)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _defined_by_scan(code: str) -> set[str]:
    return set(re.findall(r"^[ \t]*(?:def|class)[ \t]+([A-Za-z_]\w*)", code, flags=re.M))


def notebook_says(ev: NotebookEvidence) -> tuple[str | None, str]:
    """(assignment, how) from the notebook alone; (None, why) when it says nothing clear."""
    said, how = notebook_claims(ev.declared, ev.by_grade_id)
    if said is not None:
        return said, how
    if ev.by_function:
        best = max(ev.by_function.values())
        top = sorted(a for a, n in ev.by_function.items() if n == best)
        if len(top) == 1 and len(ev.by_grade_id) <= 1:
            return top[0], "functions defined"
    return None, ""
