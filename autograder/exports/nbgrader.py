"""The kit inside an nbgrader course.

* **Test cells.** Every exercise of a source notebook has, after its ``check`` cell, an autograded test
  cell (grade_id ``ex<id>_tests``, points from course.yml), ``check("<id>", score=True)``: the same text in
  source and release (see :data:`TEST_CELL_SOURCES`). :func:`sync_test_cells` writes them.
* **The gradebook.** :func:`record_in_gradebook` writes the per-exercise points of ``autograder grade``
  results into nbgrader's own ``gradebook.db`` through nbgrader's API, and :func:`write_autograded` the
  autograded notebooks, so ``nbgrader export``, the formgrader and ``generate_feedback`` show them.
  :func:`discover_nbgrader_course` and :func:`after_batch` are what ``autograder grade --nbgrader`` calls.
"""
from __future__ import annotations

import html
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.course.clock import as_utc
from autograder.course.config import Assignment, Course, Exercise, load_course
from autograder.core.errors import AutograderError
from autograder.grading.times import SubmittedAt
from autograder.course.late_policy import Extension
from autograder.core.messages import text
from autograder.course.notebook import Bounds, cell_grade_id, load_notebook
from autograder.core.points import fmt as fmt_points
from autograder.core.points import hundredths
from autograder.core.points import total as points_total
from autograder.reports.feedback import check_lines, message_text
from autograder.course.written import answer_grade_id
from autograder.reports.files import atomic_write_text
from autograder.reports.results import is_graded, load_results, newest_results
from autograder.core.text import line


# -- the nbgrader course ------------------------------------------------------------------
def course_directory(course_root: Path, db_url: str | None = None) -> Any:
    """nbgrader's CourseDirectory as ``nbgrader`` run in ``course_root`` would configure it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(course_root).resolve()
    config = Config()
    if (root / "nbgrader_config.py").is_file():
        # The course's config may put its folder on sys.path and pin the course its kernels use
        # (AUTOGRADER_COURSE): for nbgrader's processes, not for ours.
        saved, environ = list(sys.path), dict(os.environ)
        try:
            config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
        finally:
            sys.path[:] = saved
            os.environ.clear()
            os.environ.update(environ)
    config.CourseDirectory.root = str(root)
    if db_url is not None:
        config.CourseDirectory.db_url = db_url
    return CourseDirectory(config=config)


def discover_nbgrader_course(root: Path) -> Path:
    """The ``submitted/`` folder of the nbgrader course at ``root`` (or ``root`` if it is that folder)."""
    root = Path(root)
    if not root.is_dir():
        raise AutograderError(f"{root}: no such folder", hint="pass the nbgrader course folder (it holds "
                              "nbgrader_config.py and submitted/)")
    coursedir = course_directory(root)
    if root.resolve().name == coursedir.submitted_directory and not (root / "nbgrader_config.py").exists():
        return root.resolve()
    submitted = Path(coursedir.root) / coursedir.submitted_directory
    if not submitted.is_dir():
        raise AutograderError(f"{root}: no {coursedir.submitted_directory}/ folder in this nbgrader course",
                              hint="collect the submissions first (nbgrader collect or nbgrader zip_collect)")
    return submitted.resolve()


@dataclass
class GradebookRecord:
    """What :func:`record_in_gradebook` did."""

    db_url: str
    recorded: list[tuple[str, str, float]] = field(default_factory=list)   # (student, assignment, points)
    skipped: list[tuple[str, str]] = field(default_factory=list)           # (result key, why)

    def lines(self) -> list[str]:
        out = [f"nbgrader: recorded {len(self.recorded)} submissions in {self.db_url}"]
        out += [f"nbgrader: skipped {key}: {why}" for key, why in self.skipped]
        return out


def _timestamp(result: dict[str, Any]) -> str | None:
    """nbgrader collect's ``timestamp.txt`` next to the submitted notebook, when there is one."""
    origin, source = result.get("origin"), result.get("source")
    if not origin or not source:
        return None
    stamp = Path(origin) / Path(source).parent / "timestamp.txt"
    try:
        text = stamp.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def gradebook_times(course_root: Path, course: Course, db_url: str | None = None) -> tuple[dict[Any, Any], list[Any]]:
    """What nbgrader's gradebook says of when each submission came and who has more time: a time table
    ((student, assignment) -> SubmittedAt, from ``SubmittedAssignment.timestamp``) and extensions (its
    ``extension``, a duration added to the due date). Nothing when there is no gradebook yet."""
    coursedir = course_directory(course_root, db_url)
    if coursedir.db_url.startswith("sqlite:///") and not Path(coursedir.db_url[len("sqlite:///"):]).exists():
        return {}, []
    from nbgrader.api import Gradebook, MissingEntry

    times: dict[Any, Any] = {}
    extensions: list[Any] = []
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for a in course.assignments:
            try:
                submissions = gb.find_assignment(a.id).submissions
            except MissingEntry:
                continue
            for sub in submissions:
                if sub.timestamp is not None:        # nbgrader keeps UTC, without a zone
                    when = as_utc(sub.timestamp)
                    times[(sub.student_id, a.id)] = SubmittedAt(when, "nbgrader gradebook")
                if sub.extension:
                    extensions.append(Extension(student=sub.student_id, assignment=a.id, extra=sub.extension,
                                                reason="nbgrader gradebook"))
    return times, extensions


def ensure_assignment(coursedir: Any, course: Course, assignment_id: str) -> None:
    """Record the assignment and its notebook's cells in the gradebook, as generate_assignment does.

    The source notebook goes through nbgrader's own pipeline up to SaveCells
    (:data:`autograder.authoring.build.NBGRADER_PREPROCESSORS`), in memory: release/ is not touched.
    """
    from nbconvert.exporters import NotebookExporter
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveCells
    from traitlets.config import Config

    from autograder.authoring.notebooks import NBGRADER_PREPROCESSORS, read_source  # noqa: PLC0415 - loads nbformat and nbgrader

    assignment = course.assignment(assignment_id)
    root = Path(coursedir.root)
    source = read_source(root, assignment.id, [(e.id, e.function) for e in assignment.exercises],
                         tuple(q.id for q in assignment.questions))
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        gb.update_or_create_assignment(assignment.id)
    exporter = NotebookExporter(config=Config({"Exporter": {"default_preprocessors": []}}))
    for preprocessor in NBGRADER_PREPROCESSORS[:NBGRADER_PREPROCESSORS.index(SaveCells) + 1]:
        exporter.register_preprocessor(preprocessor)
    name = Path(assignment.notebook).stem
    resources = {"unique_key": name, "nbgrader": {"notebook": name, "assignment": assignment.id,
                                                  "db_url": coursedir.db_url}}
    try:
        exporter.from_notebook_node(source.notebook, resources=resources)
    except RuntimeError as exc:  # SaveCells: cells added or removed while submissions exist
        raise AutograderError(f"gradebook: {assignment.id}: {exc}",
                              hint=f"the source notebook's graded cells changed (an exercise added?) after "
                                   f"students were recorded. Keep the old cells, or remove the assignment from "
                                   f"the gradebook and record everyone again: nbgrader db assignment remove "
                                   f"{assignment.id} --force, then autograder grade . --nbgrader -o OUT --force "
                                   f"(docs/instructor/exports.md, nbgrader)") from None


def record_in_gradebook(results: Iterable[dict[str, Any]], course: Course, course_root: Path,
                        db_url: str | None = None) -> GradebookRecord:
    """Write every exercise's points of these ``autograder grade`` results into nbgrader's gradebook.

    Per (student, assignment) one result counts: a graded one before a named
    failure (which records 0 everywhere), then the latest. Each exercise's points
    become the ``auto_score`` of its test cell's Grade; a score the instructor
    set by hand in the formgrader (``manual_score``) is left alone and still wins.
    """
    from autograder.authoring.notebooks import tests_grade_id  # noqa: PLC0415 - loads nbformat and nbgrader
    from nbgrader.api import Gradebook
    coursedir = course_directory(course_root, db_url)
    record = GradebookRecord(coursedir.db_url)
    usable = _usable_results(results, {a.id for a in course.assignments}, record)
    chosen = newest_results(usable)
    for key in {r["key"] for r in usable} - set(chosen):
        record.skipped.append((key, "another result of the same student and assignment counts"))
    present = sorted({assignment for _, assignment, _ in chosen.values()})
    for assignment_id in present:
        ensure_assignment(coursedir, course, assignment_id)
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for assignment_id in present:  # before writing anything: a mismatch leaves the gradebook as it was
            _check_grade_cells(gb, course, assignment_id)
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb, warnings.catch_warnings():
        # nbgrader's add_submission builds its rows with autoflush on; SQLAlchemy warns about the
        # half-built objects, which nbgrader adds right after (nbgrader autograde makes the same call).
        warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session")
        for key, (student, assignment_id, r) in sorted(chosen.items()):
            assignment = course.assignment(assignment_id)
            notebook = Path(assignment.notebook).stem
            points = {e.get("exercise"): float(e.get("points", 0.0)) for e in r.get("exercises", [])} \
                if is_graded(r) else {}
            gb.update_or_create_student(student)
            stamp = _timestamp(r)
            try:
                gb.update_or_create_submission(assignment_id, student, **({"timestamp": stamp} if stamp else {}))
            except (ValueError, TypeError):  # an unreadable timestamp.txt: the submission still counts
                gb.update_or_create_submission(assignment_id, student)
            for ex in assignment.exercises:
                grade = gb.find_grade(tests_grade_id(ex.id), notebook, assignment_id, student)
                grade.auto_score = min(points.get(ex.id, 0.0), float(ex.points))
                grade.needs_manual_grade = False
            _record_written(gb, assignment, notebook, assignment_id, student, r)
            # The kit's late penalty in nbgrader's own field: the formgrader and nbgrader export then show the
            # final score grades.csv shows (nbgrader subtracts it from the sum of the grades).
            late = r.get("late")
            penalty = late.get("penalty") if is_graded(r) and isinstance(late, dict) else None
            gb.find_submission_notebook(notebook, assignment_id, student).late_submission_penalty = \
                float(penalty or 0.0)
            gb.db.commit()
            record.recorded.append((student, assignment_id, points_total(points.values())))
            try:
                write_autograded(coursedir, course, student, assignment_id, r)
            except Exception as exc:  # noqa: BLE001 - the grade is recorded; only the formgrader's copy is missing
                record.skipped.append((key, f"autograded/ copy not written ({type(exc).__name__}: {line(str(exc))})"))
    return record


def _usable_results(results: Iterable[dict[str, Any]], known: set[str],
                    record: GradebookRecord) -> list[dict[str, Any]]:
    """The results naming a student and a known assignment; each other one skipped in ``record``, saying why."""
    usable = []
    for r in results:
        key = str(r.get("key", "?"))
        if not r.get("student"):
            record.skipped.append((key, "no student"))
        elif r.get("assignment") not in known:
            record.skipped.append((key, f"unknown assignment {r.get('assignment')!r}"))
        else:
            usable.append(r)
    return usable


def _record_written(gb: Any, assignment: Assignment, notebook: str, assignment_id: str, student: str,
                    r: dict[str, Any]) -> None:
    """The written answers' marks of one result into their manually graded cells' grades (not committed)."""
    # The written answers are nbgrader's manually graded cells: a score given in the service goes into
    # nbgrader's own manual field (the formgrader shows it); one not given yet waits there too.
    marks = {q.get("question"): q.get("points") for q in r.get("questions") or () if isinstance(q, dict)}
    for q in assignment.questions:
        grade = gb.find_grade(answer_grade_id(q.id), notebook, assignment_id, student)
        given = marks.get(q.id)
        if isinstance(given, (int, float)):
            grade.manual_score = min(max(float(given), 0.0), float(q.points))
            grade.needs_manual_grade = False
        elif grade.manual_score is None:
            grade.needs_manual_grade = True


def _one_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def write_autograded(coursedir: Any, course: Course, student: str, assignment_id: str,
                     result: dict[str, Any]) -> Path:
    """``autograded/<student>/<assignment>/<notebook>.ipynb``, as ``nbgrader autograde`` would leave it.

    nbgrader counts a submission graded (the formgrader shows its score, ``nbgrader
    generate_feedback`` makes its feedback) only when this folder exists and its
    ``timestamp.txt`` matches the gradebook's. The notebook is the student's, with every
    output cleared (the kit ran the code in its sandbox: outputs saved by the student prove
    nothing and may carry HTML), each exercise's test cell restored as the gradebook holds it
    and showing the kit's points and checks as its output. A submission that could not be
    read gets the release notebook with the reason in its first test cell.
    """
    from autograder.authoring.notebooks import test_cell  # noqa: PLC0415 - loads nbformat and nbgrader
    import nbformat

    if not _one_component(student) or not _one_component(assignment_id):
        raise AutograderError(f"{line(student)}/{assignment_id}: not a single folder name")
    root = Path(coursedir.root).resolve()
    folder = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment_id)).resolve()
    if not folder.is_relative_to(root):
        raise AutograderError(f"{folder}: outside the course folder {root}")
    assignment = course.assignment(assignment_id)
    nb = _submitted_notebook(result, course) if is_graded(result) else None

    why = None if is_graded(result) else message_text(result.get("message"), course.language.value)
    if nb is None:
        nb = nbformat.read(root / "release" / assignment.id / assignment.notebook, as_version=4)
        # Not the student's answers: the release's stubs would read as theirs in nbgrader's feedback.
        _answers_replaced(nb, why or "", course.language.value)
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None
    graded = {e.get("exercise"): e for e in result.get("exercises", [])} if is_graded(result) else {}
    cells = {cell_grade_id(c): c for c in nb.cells}
    for ex in assignment.exercises:
        want = test_cell(ex, course.language)
        cell = cells.get(want.metadata.nbgrader.grade_id)
        if cell is None or cell.get("cell_type") != "code":   # deleted or retyped: nbgrader adds it back too
            cell = want
            nb.cells.append(cell)
        cell.source, cell.metadata["nbgrader"] = want.source, want.metadata.nbgrader
        cell.outputs = [_test_output(ex, graded.get(ex.id), why, course)]
        why = None   # the reason once, under the first test cell
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{Path(assignment.notebook).stem}.ipynb"

    atomic_write_text(target, nbformat.writes(nb) + "\n")
    stamp = _timestamp(result)
    if stamp is not None:
        atomic_write_text(folder / "timestamp.txt", stamp + "\n")
    return target


def _answers_replaced(nb: Any, why: str, language: str) -> None:
    """The release notebook standing in for a submission that could not be read: every answer cell says
    why instead of showing the release's stub, and a first cell says it too."""
    import nbformat


    said = text("nbgrader.not_your_answer", language, why=why)
    for cell in nb.cells:
        if not (cell.get("metadata", {}).get("nbgrader") or {}).get("solution"):
            continue
        if cell.get("cell_type") == "code":
            cell.source = "\n".join(f"# {part}" for part in said.splitlines())
        else:                       # a written answer's cell
            cell.source = f"**{said}**"
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"**{said}**"))


def _submitted_notebook(result: dict[str, Any], course: Course) -> Any:
    """The graded notebook as the student submitted it, or None when it cannot be read again."""
    import nbformat

    origin, source = result.get("origin"), result.get("source")
    if not origin or not source:
        return None
    base = Path(str(origin)).resolve()
    path = (base / str(source)).resolve()
    try:
        if not path.is_relative_to(base):
            return None
        # (through the one gate for a notebook's bytes: bounded before it is parsed)
        data = load_notebook(path.read_bytes(), Bounds.of(course.limits), str(source))
        return nbformat.convert(nbformat.from_dict(data), 4)
    except Exception:  # noqa: BLE001 - gone or changed since grading: the release notebook stands in
        return None


def _test_output(ex: Exercise, graded: dict[str, Any] | None, why: str | None, course: Course) -> Any:
    """The test cell's output: its points as nbgrader reads them, the kit's checks as HTML."""
    import nbformat


    points = float(graded.get("points", 0.0)) if graded else 0.0
    language = course.language.value
    items = "".join(f"<li>{html.escape(text)}</li>" for text in check_lines(graded, language)) if graded else ""
    head = f"{html.escape(ex.id)} {html.escape(ex.title_in(language))}: {fmt_points(points)} / {fmt_points(ex.points)}"
    body = (f"<p><b>{head}</b></p>" + (f"<p>{html.escape(why)}</p>" if why else "")
            + (f"<ul>{items}</ul>" if items else ""))
    return nbformat.v4.new_output("execute_result", data={"text/plain": repr(hundredths(points)),
                                                          "text/html": body}, execution_count=None)


def _check_grade_cells(gb: Any, course: Course, assignment_id: str) -> None:
    """Every exercise has its test cell in the gradebook, worth course.yml's points."""
    from autograder.authoring.notebooks import tests_grade_id  # noqa: PLC0415 - loads nbformat and nbgrader
    from nbgrader.api import MissingEntry

    assignment = course.assignment(assignment_id)
    notebook = Path(assignment.notebook).stem
    for ex in assignment.exercises:
        name = tests_grade_id(ex.id)
        try:
            cell = gb.find_grade_cell(name, notebook, assignment_id)
        except MissingEntry:
            raise AutograderError(f"gradebook: {assignment_id} has no grade cell {name!r}",
                                  hint="run `autograder build`: it puts each exercise's test cell in the "
                                       "source notebook, with course.yml's points") from None
        if abs(float(cell.max_score) - float(ex.points)) > 1e-9:
            raise AutograderError(f"gradebook: {name} is worth {cell.max_score:g} points, course.yml says "
                                  f"{ex.points:g} ({assignment_id}, exercise {ex.id})",
                                  hint="run `autograder build`: it writes course.yml's points into the test "
                                       "cells (and grading then updates the gradebook)")


def after_batch(out_dir: Path, course_root: Path, *, course: Course | None = None,
                db_url: str | None = None) -> GradebookRecord:
    """``autograder grade --nbgrader``: record OUT's results of the course's submitted/ in gradebook.db.

    Only results graded from that very folder count (OUT may hold other batches).
    """
    course = course or load_course()
    submitted = str(discover_nbgrader_course(course_root))
    results = load_results(out_dir)
    ours = [r for r in results if str(r.get("origin")) == submitted]
    record = record_in_gradebook(ours, course, course_root, db_url)
    others = len(results) - len(ours)
    if others:
        record.skipped.append((f"{others} results", f"graded from elsewhere than {submitted}"))
    return record

