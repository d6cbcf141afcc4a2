"""Notebooks made by the kit itself, graded exactly as ``autograder grade`` grades a student's: the
course's solved notebooks with one definition replaced (a mutant, a correct alternative), each in a
fresh sandbox worker with the whole catalog, public and hidden, seeded by the name it is graded under.

``validate`` (the alternatives) and ``validate --mutants`` both grade through one :class:`GradingSession`.
"""
from __future__ import annotations

import ast
import copy
import hashlib
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder import grading as G
from autograder.course.config import Course, grade_id
from autograder.core.errors import AutograderError
from autograder.grading.submissions import Submission
from autograder.core.pyast import parse as parse_python


class Notebooks:
    """Student notebooks of each assignment: the release notebook with every solution cell filled from the
    source notebook (markers removed), and one exercise's definition replaced where asked."""

    def __init__(self, course: Course):
        import nbformat

        from autograder.authoring.notebooks import strip_markers  # noqa: PLC0415 - loads nbformat and nbgrader

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

    def notebook(self, assignment: str, exercise: str | None = None, function: str = "", source: str = "",
                 also: tuple[tuple[str, str, str], ...] = (), unanswered: tuple[str, ...] = ()) -> bytes:
        """The solved notebook of ``assignment``; with ``exercise``, its definition of ``function`` replaced
        by ``source`` in that exercise's solution cell (and so for each (exercise, function, source) of ``also``).
        Each function or class named in ``unanswered`` is left as a student who has not answered it leaves it:
        every top-level definition of it in the notebook (its own exercise's, a pasted copy) raises
        NotImplementedError, so it loses its points and the grader's stand-in answers for it."""
        from autograder.authoring.operators import replace_definition  # noqa: PLC0415 - loads libcst

        nb = copy.deepcopy(self.solved[assignment])
        for name in unanswered:             # (first: what replaces a definition below keeps its own helpers)
            found = False
            for cell in nb.cells:
                if cell.cell_type != "code" or name not in cell.source:
                    continue
                try:
                    body = parse_python(cell.source).body
                except SyntaxError:
                    continue
                kinds = {type(n).__name__ for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                         and n.name == name}
                if kinds:
                    cell.source = replace_definition(cell.source, name, _unanswered(name, "ClassDef" in kinds))
                    found = True
            if not found:
                raise KeyError(f"{assignment}: no definition of {name} in its solved notebook")
        for ex, name, code in ((exercise, function, source), *also):
            if ex is not None:
                gid = self.grade_id(ex)
                cell = next(c for c in nb.cells if self._gid(c) == gid)
                cell.source = replace_definition(cell.source, name, code)
        return (self.nbformat.writes(nb) + "\n").encode("utf-8")


def _unanswered(name: str, is_class: bool) -> str:
    """A definition as the release leaves it unanswered: calling it raises NotImplementedError."""
    if is_class:
        return (f"class {name}:\n    def __init__(self, *args, **kwargs):\n"
                f"        raise NotImplementedError({name!r})\n")
    return f"def {name}(*args, **kwargs):\n    raise NotImplementedError({name!r})\n"


class GradingSession:
    """One sandbox and one grader context for many kit-made notebooks (a context manager).

    :meth:`grade` writes a notebook under ``workdir`` and grades it as the submission of ``student`` (whose
    name seeds the hidden inputs, as a real student's does), returning its result dict.
    """

    def __init__(self, course: Course, workdir: Path):
        self.course, self.workdir = course, workdir
        self._sandbox: Any = None

    def __enter__(self) -> GradingSession:
        import torch

        from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

        torch.set_num_threads(1)
        self.notebooks = Notebooks(self.course)
        references = G.check_catalog(self.course, {a.id for a in self.course.assignments})
        self._sandbox = Sandbox(self.course.limits, "cpu").__enter__()
        self.ctx = G.GradingContext(self.course, self._sandbox, "cpu", G.grader_fingerprint("cpu", self.course),
                                    references, C.LiveDiagnoser(self.course.tolerances), G.demo_cells(self.course))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sandbox is not None:
            self._sandbox.__exit__(*exc)
            self._sandbox = None

    def grade(self, assignment: str, student: str, data: bytes) -> dict[str, Any]:
        path = self.workdir / student / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        sub = Submission(path, f"{student}/{assignment}.ipynb", hashlib.sha256(data).hexdigest(), student, assignment)
        return G.grade_or_fail(sub, self.ctx) or {}

    def require_full_marks(self, assignments: list[str]) -> None:
        """Each assignment's solved notebook scores full marks here, else nothing else graded means anything."""
        for a in assignments:
            result = self.grade(a, "reference", self.notebooks.notebook(a))
            if result.get("points") != result.get("max_points") or not result.get("exercises"):
                raise AutograderError(f"the reference notebook of {a} does not score full marks in the sandbox "
                                      f"({result.get('points')}/{result.get('max_points')}: {result.get('status')})",
                                      hint="run autograder validate and autograder build")
