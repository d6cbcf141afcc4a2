"""The course's source notebooks as nbgrader reads them: the stub a solution region becomes, nbgrader's
generate_assignment pipeline (the kit's own release and ``nbgrader generate_assignment`` run the same
preprocessors), reading and validating a source notebook (:func:`read_source`), and each exercise's
autograded test cell (:func:`test_cell`, kept in place by :func:`sync_test_cells`).

``autograder build`` (:mod:`autograder.authoring.build`) and the nbgrader bridge
(:mod:`autograder.exports.nbgrader`) both build on this module; it imports neither.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    LockCells,
    SaveCells,
)
from traitlets import Bool, Dict

from autograder.course.config import Course, Exercise, exercise_of, grade_id
from autograder.core.errors import AutograderError, BuildError
from autograder.course.notebook import cell_grade_id
from autograder.core.pyast import parse as parse_python
from autograder.course.written import TEXT_STUBS, answer_grade_id


#: What a solution region becomes, in course.yml's language; ``{exercise}`` is the cell's exercise ID
#: ("2.4"). The engine tells "not attempted" by the exception's type, never by this text.
STUBS: dict[str, str] = {
    "zh": 'raise NotImplementedError("请完成练习 {exercise}")',
    "en": 'raise NotImplementedError("Need to implement for exercise {exercise}")',
}


def stub_for(language: str) -> str:
    """The stub template of a course language ("zh" or "en")."""
    return STUBS[str(getattr(language, "value", language))]


def _course_language(root: Path) -> str:
    """course.yml's ``language`` read without validation (zh, the schema's default, when unreadable)."""
    try:
        data = yaml.safe_load((root / "course.yml").read_text(encoding="utf-8"))
        language = str(data.get("language", "zh"))
    except (OSError, yaml.YAMLError, AttributeError):
        return "zh"
    return language if language in STUBS else "zh"


def course_text_stub(root: Path) -> str:
    """What a written answer's cell holds in the release, in the course's language (nbgrader's text stub)."""
    return TEXT_STUBS[_course_language(Path(root))]


def course_stub(root: Path) -> str:
    """The stub template of the course in ``root`` (its course.yml's language; zh, the schema's default,
    where it cannot be read): what nbgrader_config.py hands to ``nbgrader generate_assignment``."""
    return stub_for(_course_language(Path(root)))

BEGIN = ClearSolutions.begin_solution_delimeter.default_value
END = ClearSolutions.end_solution_delimeter.default_value


class ExerciseStubs(ClearSolutions):
    """nbgrader's ClearSolutions, with a stub that names the cell's exercise."""

    code_stub = Dict(dict(python=STUBS["zh"]),
                     help="The stub replacing a solution region; {exercise} is the cell's exercise ID"
                     ).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        exercise = exercise_of(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
        language = resources["language"]
        template = self.code_stub
        # ClearSolutions reads self.code_stub[language]: give it this cell's stub, then restore.
        self.code_stub = {**template, language: template[language].format(exercise=exercise or "?")}
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        finally:
            self.code_stub = template


class AssignmentMetadata(Preprocessor):
    """Writes the notebook's assignment into its metadata (``metadata.autograder.assignment``): what the grader,
    the service and the self-check read first to know which assignment a notebook is, whatever its file is
    called or wherever it was uploaded. The assignment is nbgrader's (``resources["nbgrader"]["assignment"]``
    in ``nbgrader generate_assignment``) or build's (``resources["assignment"]``)."""

    enabled = Bool(True).tag(config=True)        # (nbconvert's preprocessors are off unless told; nbgrader's are on)

    def preprocess(self, nb, resources):
        assignment = (resources.get("nbgrader") or {}).get("assignment") or resources.get("assignment")
        if assignment:
            nb.metadata["autograder"] = {"assignment": str(assignment)}
        return nb, resources


#: nbgrader's GenerateAssignment pipeline, in its order, without the steps that need the
#: gradebook (SaveCells) or a kernel (InstantiateTests) and with our stub preprocessor; then the
#: notebook's assignment written into its metadata.
RELEASE_PREPROCESSORS = [
    LockCells,
    ExerciseStubs,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
    AssignmentMetadata,
]
#: The same pipeline for ``nbgrader generate_assignment`` (nbgrader_config.py): SaveCells
#: records the cells in the gradebook and leaves the notebook unchanged.
NBGRADER_PREPROCESSORS = [*RELEASE_PREPROCESSORS[:5], SaveCells, *RELEASE_PREPROCESSORS[5:]]


# -- reading and validating a source notebook ----------------------------------------
@dataclass(frozen=True)
class Source:
    """One validated source notebook."""

    path: str                        # relative to the root, e.g. source/02_x/02_x.ipynb
    notebook: NotebookNode
    imports: str                     # the imports cell
    solutions: tuple[tuple[str, str], ...]  # (grade_id, source) in notebook order


@dataclass(frozen=True)
class Derived:
    """What build derives from source/, in memory (:func:`autograder.authoring.build.derive`), and what the
    student bundle is made of (:mod:`autograder.authoring.bundle`): here, below both."""

    files: dict[str, bytes]          # committed files, the same bytes on every machine: path -> bytes
    sources: tuple[Source, ...]      # the validated source notebooks
    #: Outputs whose bytes depend on this machine's float kernels (the fingerprints): written, not committed.
    outputs: dict[str, bytes] = field(default_factory=dict)



def _where(cell: NotebookNode, index: int) -> str:
    gid = cell_grade_id(cell)
    return f"cell {gid!r}" if gid else f"cell {index + 1} (id {cell.get('id', '?')!r})"


def read_source(root: Path, assignment_id: str, exercises: list[tuple[str, str]],
                questions: tuple[str, ...] = ()) -> Source:
    """Read and validate source/<a>/<a>.ipynb; ``exercises`` is [(exercise ID, function)], ``questions`` the
    written questions' IDs (each a Markdown answer cell, :mod:`autograder.course.written`)."""
    rel = f"source/{assignment_id}/{assignment_id}.ipynb"
    nb = _read_notebook(root / rel, rel)
    seen = _grade_ids(rel, nb)
    answers = {answer_grade_id(q): q for q in questions}
    solutions = _solution_cells(rel, nb, {grade_id(ex): (ex, fn) for ex, fn in exercises}, answers)
    for gid, q in answers.items():
        if gid not in seen:
            raise BuildError(f"{rel}: no answer cell {gid!r} for question {q}",
                             hint="a Markdown cell, nbgrader's manually graded answer (grade and solution)")
    for ex, _function in exercises:
        if grade_id(ex) not in seen:
            raise BuildError(f"{rel}: no solution cell {grade_id(ex)!r} for exercise {ex}")
        check_id = f"{grade_id(ex)}_check"
        if check_id not in seen:
            raise BuildError(f"{rel}: no check cell {check_id!r} for exercise {ex}",
                             hint=f'a locked code cell holding check("{ex}")')
        check_cell = nb.cells[seen[check_id]]
        if check_cell.cell_type != "code" or not _calls_check(check_cell.source, ex):
            raise BuildError(f"{rel}: cell {check_id!r} must be a code cell calling check(\"{ex}\")")
    if "imports" not in seen or nb.cells[seen["imports"]].cell_type != "code":
        raise BuildError(f"{rel}: no code cell 'imports'",
                         hint="the imports cell heads solutions/<module>.py")
    imports = nb.cells[seen["imports"]].source
    _parse(rel, "cell 'imports'", imports)
    return Source(rel, nb, imports, tuple(solutions))


def _read_notebook(path: Path, rel: str) -> NotebookNode:
    """The source notebook at ``path``, a valid nbformat 4 notebook whose cells have ids and text sources."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BuildError(f"{rel}: source notebook not found",
                         hint="every assignment of course.yml needs source/<id>/<id>.ipynb") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"{rel}: cannot read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BuildError(f"{rel}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
        raise BuildError(f"{rel}: not an nbformat 4 notebook")
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or not cell.get("id"):
            # nbformat would invent a random id: the release would differ on every build.
            raise BuildError(f"{rel}: cell {index + 1} has no id",
                             hint="save the notebook as nbformat 4.5 with stable cell ids")
    nb = nbformat.from_dict(data)
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise BuildError(f"{rel}: invalid notebook ({exc.message})") from None
    for cell in nb.cells:
        if isinstance(cell.source, list):  # nbformat allows a list of lines; nbgrader expects text
            cell.source = "".join(cell.source)
    return nb


def _grade_ids(rel: str, nb: NotebookNode) -> dict[str, int]:
    """grade_id -> index of its cell; each grade_id once, of letters, digits, _ and - only."""
    seen: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        gid = cell_grade_id(cell)
        if gid is None:
            continue
        if gid in seen:
            raise BuildError(f"{rel}: grade_id {gid!r} appears twice (cells {seen[gid] + 1} and {index + 1})")
        seen[gid] = index
        if not re.match(r"^[a-zA-Z0-9_-]+$", gid):
            raise BuildError(f"{rel}: cell {index + 1}: grade_id {gid!r} may only hold letters, digits, _ and -")
    return seen


def _solution_cells(rel: str, nb: NotebookNode, wanted: dict[str, tuple[str, str]],
                    answers: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(grade_id, code without markers) of each solution cell, in notebook order; ``wanted``: grade_id ->
    (exercise ID, function), ``answers``: grade_id -> question ID of the written answers' cells. A solution cell
    of no exercise or question, or one that does not define its function, is an error, as is a solution region
    outside a solution cell."""
    solutions: list[tuple[str, str]] = []
    answers = answers or {}
    for index, cell in enumerate(nb.cells):
        where = _where(cell, index)
        meta = cell.get("metadata", {}).get("nbgrader", {})
        markers = [line for line in cell.source.split("\n") if BEGIN in line or END in line]
        if not meta.get("solution"):
            if markers:
                raise BuildError(f"{rel}: {where} holds a {BEGIN} region but is not a solution cell")
            continue
        gid = meta.get("grade_id", "")
        if gid in answers:
            if cell.cell_type != "markdown" or not meta.get("grade"):
                raise BuildError(f"{rel}: {where} must be a Markdown cell graded by hand (grade and solution: "
                                 f"nbgrader's manually graded answer) for question {answers[gid]}")
            continue
        if gid not in wanted:
            raise BuildError(f"{rel}: {where} is a solution cell of no exercise or question of this assignment",
                             hint=f"solution cells are named {', '.join(sorted([*wanted, *answers]))}")
        if cell.cell_type != "code":
            raise BuildError(f"{rel}: {where} must be a code cell")
        _check_markers(rel, where, markers)
        code = strip_markers(cell.source)
        tree = _parse(rel, where, code)
        function = wanted[gid][1]
        if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == function
                   for node in tree.body):
            raise BuildError(f"{rel}: {where} does not define {function} (course.yml: exercise {wanted[gid][0]})")
        solutions.append((gid, code))
    return solutions


def _check_markers(rel: str, where: str, markers: list[str]) -> None:
    if not markers:
        raise BuildError(f"{rel}: {where} has no ### {BEGIN} / ### {END} region",
                         hint="without one the whole cell, signature included, would become the stub")
    opened = False
    for line in markers:
        is_begin = BEGIN in line
        if is_begin == opened:
            raise BuildError(f"{rel}: {where}: unbalanced solution markers at {line.strip()!r}")
        opened = is_begin
    if opened:
        raise BuildError(f"{rel}: {where}: ### {BEGIN} without ### {END}")


def _parse(rel: str, where: str, code: str) -> ast.Module:
    try:
        return parse_python(code)
    except SyntaxError as exc:
        raise BuildError(f"{rel}: {where}: Python syntax error on line {exc.lineno}: {exc.msg}") from None


def _calls_check(code: str, exercise_id: str) -> bool:
    try:
        tree = parse_python(code)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check"
               and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == exercise_id
               for node in ast.walk(tree))


def strip_markers(code: str) -> str:
    """A solution cell without its marker lines: the reference solution as plain code."""
    return "\n".join(line for line in code.split("\n") if BEGIN not in line and END not in line)


# -- each exercise's test cell ------------------------------------------------------------------------
#: The test cell of an exercise, per course language; ``{exercise}`` is its ID ("2.4"). The same
#: text in the source and the release: nbgrader's hidden-test markers would make the release's
#: checksum differ from the gradebook's, and ``nbgrader autograde`` would then report every honest
#: submission as tampered with (jupyter/nbgrader#1961). What runs differs by where it runs
#: (``autograder.check(..., score=True)``): every check under ``nbgrader autograde`` on the
#: instructor's machine, the public ones on a student's.
TEST_CELL_SOURCES = {
    "zh": ("# 评分单元格（请勿修改）：nbgrader 评分时在这里运行本题的全部检查；在你的电脑上只运行公开检查。\n"
           'check("{exercise}", score=True)'),
    "en": ("# Grading cell (do not edit): nbgrader runs every check of this exercise here; "
           "on your computer, the public ones.\n"
           'check("{exercise}", score=True)'),
}


# -- the test cells of the source notebooks --------------------------------------------
def tests_grade_id(exercise_id: str) -> str:
    """``"2.4"`` -> ``"ex2_4_tests"``: the nbgrader grade cell that carries the exercise's points."""
    return grade_id(exercise_id) + "_tests"


def tests_cell_id(exercise_id: str) -> str:
    """``"2.4"`` -> ``"ex2-4-tests"``: the stable nbformat cell id."""
    return grade_id(exercise_id).replace("_", "-") + "-tests"


def _points(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def test_cell_source(exercise: Exercise, language: Any) -> str:
    template = TEST_CELL_SOURCES.get(str(getattr(language, "value", language)), TEST_CELL_SOURCES["en"])
    return template.format(exercise=exercise.id)


def test_cell(exercise: Exercise, language: Any = "zh") -> Any:
    """The autograded test cell of one exercise, as it belongs in the source notebook (and the release)."""
    cell = nbformat.v4.new_code_cell(test_cell_source(exercise, language))
    cell.id = tests_cell_id(exercise.id)
    cell.metadata = nbformat.from_dict({"nbgrader": {
        "grade": True, "grade_id": tests_grade_id(exercise.id), "locked": True,
        "points": _points(exercise.points), "schema_version": 3, "solution": False}})
    return cell


def sync_test_cells(root: Path, course: Course, *, write: bool) -> list[str]:
    """Put each exercise's test cell right after its check cell, with course.yml's points (and give each written
    answer's cell its question's points).

    Returns one line per notebook that differs (``write=False``: would change).
    Every other cell is left byte for byte as it was.
    """
    changed: list[str] = []
    for a in course.assignments:
        rel = f"source/{a.id}/{a.notebook}"
        path = Path(root) / rel
        try:
            before = path.read_text(encoding="utf-8")
            nb = nbformat.reads(before, as_version=4)
        except Exception:  # noqa: BLE001 - missing or unreadable: reading the sources names it (build.read_source)
            continue
        for ex in a.exercises:
            want = test_cell(ex, course.language)
            nb.cells = [c for c in nb.cells if cell_grade_id(c) != want.metadata.nbgrader.grade_id]
            check_id = grade_id(ex.id) + "_check"
            at = next((i for i, c in enumerate(nb.cells) if cell_grade_id(c) == check_id), None)
            if at is None:
                raise AutograderError(f"{rel}: no check cell {check_id!r} for exercise {ex.id}")
            nb.cells.insert(at + 1, want)
        for q in a.questions:           # a written answer's cell carries course.yml's points too
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if cell_grade_id(cell) == answer_grade_id(q.id) and meta.get("points") != _points(q.points):
                    meta["points"] = _points(q.points)
        after = nbformat.writes(nb) + "\n"
        if after != before:
            changed.append(rel)
            if write:
                path.write_text(after, encoding="utf-8")
    return changed
