"""Gradescope: ``autograder export gradescope ASSIGNMENT`` writes an autograder zip for Gradescope's
fleet: ``setup.sh`` (torch's CPU build first, then what the grader imports), ``run_autograder``,
``requirements.txt``, the engine, the course's checks, this assignment's reference and ``course.yml``,
laid out as the course is on the instructor's machine. On each submission ``run_autograder`` runs
``python -m autograder.exports gradescope-run``, which grades the notebook in ``/autograder/submission``
exactly as ``autograder grade`` does (a fresh sandbox worker, public and hidden checks, known mistakes
named) and writes ``/autograder/results/results.json`` per Gradescope's specification: one test per
check (``number`` is the exercise ID; hidden checks ``after_published``, public ones ``visible``). The
worker is gone, and could never see ``/autograder`` (an empty chroot under its own uid), when that file
is written.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from autograder.core.version import __version__
from autograder import catalog as C
from autograder import grading as G
from autograder.authoring.bundle import pyproject_project, requirement_specs
from autograder import reports as R
from autograder.core.atomic import atomic_write_text
from autograder.catalog import ALTERNATIVES_FILE, COURSE_FILES
from autograder.course.config import Assignment, Course, load_course
from autograder.course.files import PACKAGE
from autograder.core.errors import AutograderError
from autograder.exports.targets import ExportTarget
from autograder.grading.deadlines import Deadlines, submitted_json
from autograder.grading.evidence import notebook_evidence
from autograder.grading.submissions import Submission, find_notebooks
from autograder.grading.times import read_gradescope_metadata
from autograder.core.messages import say, text
from autograder.core.points import hundredths, shares
from autograder.reports.feedback import cell_message, cell_number, message_text
from autograder.sandbox.launch import take_early_launch
from autograder.course.written import maximum
from autograder.core.zips import deterministic_zip

#: Where each audience's checks show, and when (Gradescope's visibility values:
#: https://gradescope-autograders.readthedocs.io/en/latest/specs/).
CHECK_VISIBILITY = {"public": "visible", "hidden": "after_published"}


#: The torch the course is checked against; setup.sh installs its CPU build.
TORCH_PIN = "torch==2.13.0"


#: What the grading path imports besides torch (build, nbgrader and notebooks are not needed there).
GRADING_DEPENDENCIES = ("numpy", "nbformat", "pydantic", "pyyaml", "rich", "matplotlib")


#: The kit's files that travel (the rest of autograder/ is caches and the student's course.yml).
KIT_PATTERNS = ("autograder/*.py", "autograder/*/*.py", "autograder/data/*.json", "autograder/templates/*")


TEMPLATES = PACKAGE / "templates"


#: Fixed entry time: the same kit gives the same zip bytes.
EXECUTABLES = ("setup.sh", "run_autograder")


#: A submission folder holding more than this is not read for notebooks.
MAX_SUBMISSION_FILES = 1000


# -- the bundle ------------------------------------------------------------------------------
def requirements_txt(root: Path | None = None) -> str:
    """What the grader imports besides torch: the course's version ranges, and the versions exported with.

    Ranges, not pins: Gradescope builds its image once per upload, so every submission
    already sees the same versions, and a range installs on whichever Python the chosen
    Ubuntu image has (an exact numpy pin may have no wheel for it).
    """
    ranges = requirement_specs(pyproject_project(root if root is not None else PACKAGE.parent))
    lines = [f"# What the course kit's grader imports besides torch (setup.sh installs {TORCH_PIN}, CPU build, first).",
             "# Version ranges from the course's pyproject.toml; "
             "the versions `autograder export` ran with in comments."]
    for name in GRADING_DEPENDENCIES:
        spec = ranges.get(name, name)
        try:
            lines.append(f"{spec}  # exported with {importlib_metadata.version(name)}")
        except importlib_metadata.PackageNotFoundError:
            lines.append(spec)
    return "\n".join(lines) + "\n"


def _template(name: str, assignment: Assignment, language: str) -> bytes:
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    return text.replace("@ASSIGNMENT@", assignment.id).replace("@LANGUAGE@", language).encode("utf-8")


def gradescope_files(course: Course, assignment: Assignment, *, language: str | None = None) -> dict[str, bytes]:
    """Path inside the Gradescope zip -> bytes: scripts, requirements, the engine, the course's checks,
    course.yml and this assignment's solution (the course laid out as on the instructor's machine)."""
    CHECK_FILES = COURSE_FILES - {ALTERNATIVES_FILE}     # what grading loads (the alternatives are validate's)

    language = language or course.language.value
    root = course.root
    engine = PACKAGE.parent
    files: dict[str, bytes] = {}
    for pattern in KIT_PATTERNS:
        for path in sorted(engine.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(engine).as_posix()] = path.read_bytes()
    # Every assignment's checks: one assignment's may import another's (``from ..padding_masks.checks``).
    for a in course.assignments:
        for name in sorted(CHECK_FILES):
            path = course.content_dir(a) / name
            if path.is_file():
                files[f"source/{a.id}/{name}"] = path.read_bytes()
    for name in ("__init__.py", f"{assignment.module}.py"):
        path = root / "solutions" / name
        if not path.is_file():
            raise AutograderError(f"solutions/{name} is missing", hint="run autograder build")
        files[f"solutions/{name}"] = path.read_bytes()
    files["course.yml"] = (root / "course.yml").read_bytes()
    # The release notebook: grading skips its demo cells left unchanged, as `autograder grade` does.
    release = root / "release" / assignment.id / assignment.notebook
    if release.is_file():
        files[f"release/{assignment.id}/{assignment.notebook}"] = release.read_bytes()
    files["requirements.txt"] = requirements_txt(engine if (engine / "pyproject.toml").is_file() else root
                                                 ).encode("utf-8")
    files["setup.sh"] = _template("gradescope_setup.sh", assignment, language)
    files["run_autograder"] = _template("gradescope_run_autograder", assignment, language)
    return files


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """A deterministic zip, files at its root (Gradescope looks for setup.sh there), scripts executable."""
    return deterministic_zip(files, executables=EXECUTABLES)


# -- the checks, planned ------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedCheck:
    """One check as the grader will run it: its share of the exercise's points."""

    exercise: str
    check: str
    audience: str                 # "public" or "hidden"
    title: dict[str, str]
    points: float


def planned_checks(assignment: Assignment) -> list[PlannedCheck]:
    """Every check of the assignment, in grading order, with the points :func:`run_exercise` gives it."""
    C.load_catalog(hidden=True, mistakes=False)
    out = []
    for ex in assignment.exercises:
        found = C.checks_for(ex.id, (C.Audience.PUBLIC, C.Audience.HIDDEN))
        if not found:
            raise AutograderError(f"exercise {ex.id} has no checks", hint="run autograder validate")
        points = shares(ex.points, [c.weight for c in found])
        out += [PlannedCheck(ex.id, c.name, c.audience.value, c.title._asdict(), share)
                for c, share in zip(found, points)]
    return out


# -- results.json ------------------------------------------------------------------------------
#: results.json's words -> the message catalogue's keys.
_KEYS = {"hidden": "label.hidden", "diagnosis": "label.diagnosis", "not_graded": "label.not_graded",
         "forbidden_note": "label.forbidden_note", "public": "label.public_summary", "note": "label.note",
         "cell": "label.cell", "cells": "label.cells", "what_now": "label.what_now", "late": "label.late",
         "due": "label.due"}


def say_in(language: str, key: str, **kw: Any) -> str:
    return text(_KEYS.get(key, f"status.{key}"), language, **kw)




def _check_test(ex_title: str, check: dict[str, Any], *, passed: bool, output: str, language: str,
                score: float, max_score: float) -> dict[str, Any]:
    hidden = check["audience"] == "hidden"
    name = f"{ex_title}: {message_text(check['title'], language)}"
    if hidden:
        name += f" ({say_in(language, 'hidden')})"
    return {
        "score": hundredths(score), "max_score": hundredths(max_score), "status": "passed" if passed else "failed",
        "name": name, "number": check["exercise"], "output": output,
        "visibility": CHECK_VISIBILITY[check["audience"]],
        "extra_data": {"exercise": check["exercise"], "check": check["check"], "audience": check["audience"]},
    }


def gradescope_results(result: dict[str, Any], course: Course, assignment: Assignment, language: str, *,
                       seconds: float, plan: list[PlannedCheck]) -> dict[str, Any]:
    """The kit's result of one submission as Gradescope's results.json: one test per check."""
    titles = {ex.id: ex.title_in(language) for ex in assignment.exercises}
    graded = bool(result.get("exercises"))
    tests = _graded_tests(result, titles, language) if graded else _planned_tests(result, plan, titles, language)
    public = [t for t in tests if t["extra_data"]["audience"] == "public"]
    most = maximum(assignment, result)
    lines = [f"{assignment.id} · {assignment.title_in(language)}"]
    if graded:
        lines.append(say_in(language, "public", passed=sum(t["status"] == "passed" for t in public), total=len(public)))
        lines += _graded_notes(result, language)
    else:
        lines += [f"{say_in(language, 'not_graded')}: {message_text(result.get('message'), language)}",
                  say_in(language, "what_now")]

    return {
        "score": hundredths(result.get("points") or 0.0),
        "execution_time": max(0, round(seconds)),
        "output": "\n".join(lines),
        # Student-controlled text (cell errors, names) must not render as HTML.
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        # stdout carries the instructor's full feedback, hidden checks included.
        "stdout_visibility": "hidden",
        "extra_data": {"kit": __version__, "assignment": assignment.id, "grader": result.get("grader"),
                       "status": result.get("status"),
                       # The assignment's maximum (autograder.course.written.maximum): the autograder's part, and the
                       # written answers', which are Gradescope's manually graded questions, not this score's.
                       "max_points": hundredths(most.automatic), "written_points": hundredths(most.written)},
        "tests": tests,
    }


def _graded_tests(result: dict[str, Any], titles: dict[str, str], language: str) -> list[dict[str, Any]]:
    """One test per check of a graded submission, with what it said where it did not pass."""
    tests: list[dict[str, Any]] = []
    for ex in result["exercises"]:
        forbidden = ex["status"] == "forbidden"
        names = sorted({f for c in ex["checks"] for f in c.get("forbidden") or []})
        for c in ex["checks"]:
            passed = bool(c["passed"]) and not forbidden and not c.get("withheld")
            output = say_in(language, "passed") if passed else _failed_output(c, forbidden, names, language)
            tests.append(_check_test(titles.get(ex["exercise"], ex["exercise"]), c, passed=passed,
                                     output=output, language=language, score=c["points"],
                                     max_score=c["max_points"]))
    return tests


def _failed_output(c: dict[str, Any], forbidden: bool, names: list[str], language: str) -> str:
    """A check's test output where it did not pass: its status and message, diagnosis, forbidden calls."""
    detail = message_text(c.get("message"), language)
    lines = [f"{say_in(language, c['status'])}: {detail}" if detail else say_in(language, c["status"])]
    if c.get("mistake_message"):
        lines.append(f"{say_in(language, 'diagnosis')}: {message_text(c['mistake_message'], language)}")
    if forbidden:
        lines.append(say_in(language, "forbidden_note", names=", ".join(names) or "?"))
    return "\n".join(lines)


def _planned_tests(result: dict[str, Any], plan: list[PlannedCheck], titles: dict[str, str],
                   language: str) -> list[dict[str, Any]]:
    """One failed test per planned check of a submission not graded, each saying why."""
    why = f"{say_in(language, 'not_graded')}: {message_text(result.get('message'), language)}"
    tests: list[dict[str, Any]] = []
    for p in plan:
        check = {"exercise": p.exercise, "check": p.check, "audience": p.audience, "title": p.title}
        tests.append(_check_test(titles.get(p.exercise, p.exercise), check, passed=False, output=why,
                                 language=language, score=0.0, max_score=p.points))
    return tests


def _graded_notes(result: dict[str, Any], language: str) -> list[str]:
    """The summary's lines after the public count: lateness, notes, and the cells that did not run."""
    lines: list[str] = []
    late = result.get("late")
    if isinstance(late, dict):       # (one on time or of unknown time: its due date, not "late")
        label = say_in(language, "late" if late.get("late") is True else "due")
        lines.append(f"{label}: {message_text(late.get('rule'), language)}")
    for note in result.get("notes_msg") or []:
        lines.append(f"{say_in(language, 'note')}: {message_text(note, language)}")
    bad = [c for c in result.get("cells") or [] if c.get("status") not in ("ok", "skipped", None)]
    if bad:
        lines.append(say_in(language, "cells"))
        for c in bad:
            parts = (c.get("error_type") or c.get("status"), cell_message(c, language))
            detail = " ".join(str(x) for x in parts if x)
            lines.append(f"  {say_in(language, 'cell')} {cell_number(c)}: {detail}")
    return lines


# -- one Gradescope submission ------------------------------------------------------------------
def submission_student(root: Path) -> str | None:
    """The submitter(s) named by Gradescope's submission_metadata.json: seeds the hidden inputs."""
    try:
        data = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, list):
        return None
    ids = sorted(str(u.get("id") or u.get("email") or "") for u in users if isinstance(u, dict))
    ids = [i for i in ids if i]
    return "+".join(ids) or None


def find_submission(folder: Path, course: Course, assignment: Assignment, student: str | None) -> Any:
    """The notebook to grade in ``folder``, as a :class:`~autograder.grading.submissions.Submission`.

    One notebook: that one. Several: the one named for the assignment, else the only
    one that is this assignment's by its content. None, or no way to choose: a
    Submission with a ``problem`` (graded as a named failure, no sandbox needed).
    """
    notebooks, _others = find_notebooks(folder) if folder.is_dir() else ([], [])
    notebooks = notebooks[:MAX_SUBMISSION_FILES]
    chosen: Path | None = None
    problem: str | None = None
    said = None
    if not notebooks:
        problem = "no notebook: the submission holds no .ipynb file"
        said = say("submission.no_notebook")
    elif len(notebooks) == 1:
        chosen = notebooks[0]
    else:
        named = [p for p in notebooks if p.name == assignment.notebook]
        mine = [p for p in notebooks if notebook_evidence(p.read_bytes(), course).by_grade_id == {assignment.id}]
        if len(named) == 1:
            chosen = named[0]
        elif len(mine) == 1:
            chosen = mine[0]
        else:
            listed = ", ".join(p.relative_to(folder).as_posix() for p in notebooks[:10])
            problem = f"several notebooks ({listed}): submit only {assignment.notebook}"
            said = say("submission.several_notebooks", names=listed, notebook=assignment.notebook)
    if chosen is None:
        sub = Submission(path=folder / "(none)", source="(none)", student=student or "submission",
                         assignment=assignment.id)
        sub.fail(problem or "no notebook", said)
        return sub
    data = chosen.read_bytes()
    source = chosen.relative_to(folder).as_posix()
    sub = Submission(path=chosen, source=source, sha256=hashlib.sha256(data).hexdigest(),
                     student=student or chosen.stem, assignment=assignment.id)
    evidence = notebook_evidence(data, course)
    # What the notebook says of itself: its metadata, else the nbgrader ids of its cells.
    declared = evidence.declared or (next(iter(evidence.by_grade_id)) if len(evidence.by_grade_id) == 1 else None)
    if declared is not None and declared != assignment.id:
        sub.fail(f"wrong assignment: the notebook is {declared}, this autograder grades {assignment.id}",
                 say("submission.wrong_assignment", said=declared, wanted=assignment.id))
    return sub


@contextlib.contextmanager
def _sandbox_starting(limits: Any, device: str, wanted: bool) -> Iterator[Future | None]:
    """Start the sandbox (its template imports torch: seconds) in a thread while this one prepares.

    Yields a future of the :class:`~autograder.sandbox.Sandbox` (None when not ``wanted``);
    whatever happens, the sandbox is closed when the block ends.
    """
    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    if not wanted:
        yield None
        return

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-start") as pool:
        future = pool.submit(Sandbox, limits, device, launch=take_early_launch())
        try:
            yield future
        finally:
            # Closing twice is harmless; a start that failed was reported to whoever asked for it.
            with contextlib.suppress(Exception):
                future.result().close()


def grade_one(root: Path, assignment_id: str, *, device: str = "cpu",
              language: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Grade ``root/submission`` in the sandbox: (the kit's result, Gradescope's results.json dict)."""
    start = time.monotonic()
    course = load_course()
    assignment = course.assignment(assignment_id)
    language = language or course.language.value
    sub = find_submission(root / "submission", course, assignment, submission_student(root))
    with _sandbox_starting(course.limits, device, wanted=not sub.problem) as starting:
        import torch

        torch.set_num_threads(1)  # the references run here, one thread, as in `autograder grade`
        references = G.check_catalog(course, {assignment.id})
        plan = planned_checks(assignment)
        ctx = G.GradingContext(course=course, sandbox=None, device=device,
                               fingerprint=G.grader_fingerprint(device, course), references=references,
                               diagnoser=C.LiveDiagnoser(course.tolerances), demos=G.demo_cells(course),
                               origin="gradescope")
        if starting is not None:
            ctx.sandbox = starting.result()
        # A submission with a problem (no notebook, the wrong one) is a named failure: nothing runs.
        result = G.grade_or_fail(sub, ctx)
    # The sandbox is closed: every worker of this submission has been killed and reaped.
    if result is None:
        raise AutograderError("grading was interrupted")
    settle_gradescope(result, course, root)
    results = gradescope_results(result, course, assignment, language, seconds=time.monotonic() - start, plan=plan)
    return result, results


def settle_gradescope(result: dict[str, Any], course: Course, root: Path) -> dict[str, Any]:
    """The late policy on a Gradescope submission: its time is submission_metadata.json's ``created_at`` (never
    the clock), its due dates the student's own there (they carry an extension), else course.yml's."""
    submitted = submitted_json(read_gradescope_metadata(root / "submission_metadata.json"))
    return Deadlines.load(course).settle(result, submitted)


def _error_results(exc: BaseException, language: str) -> dict[str, Any]:
    text = {"zh": "自动评分程序出错，未能评分；请联系助教。", "en": "The autograder failed on this submission; "
            "please tell the teaching staff."}
    return {"score": 0.0, "output": text.get(language, text["en"]), "output_format": "text",
            "visibility": "visible", "stdout_visibility": "hidden",
            "tests": [{"name": "autograder", "score": 0.0, "max_score": 0.0, "status": "failed",
                       "output": f"{type(exc).__name__}: {exc}"[:2000], "visibility": "hidden"}]}


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Gradescope's results.json: atomic and on disk before it counts (the container may stop any time)."""
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False) + "\n", durable=True)


def run_gradescope(root: Path, assignment_id: str, *, device: str = "cpu", language: str | None = None) -> int:
    """What ``run_autograder`` runs: grade, then write ``root/results/results.json`` (always, even on a fault)."""
    root = Path(root).resolve()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    target = results_dir / "results.json"
    # A file already there (a previous run, anything planted) never stands in for this run's result.
    target.unlink(missing_ok=True)
    lang = language or "zh"
    try:
        course = load_course()
        lang = language or course.language.value
        result, results = grade_one(root, assignment_id, device=device, language=lang)
    except Exception as exc:  # noqa: BLE001 - Gradescope must get a results.json whatever happened
        traceback.print_exc()
        write_json_atomic(target, _error_results(exc, lang))
        return 1
    write_json_atomic(target, results)
    # For the instructor (Gradescope shows stdout to staff only): the kit's full feedback.
    print(R.feedback_markdown(result, course, lang))
    print(f"score {results['score']:g} / {course.assignment(assignment_id).points:g} "
          f"({result.get('status')}); {len(results['tests'])} tests; wrote {target}")
    return 0


def _next_steps(path: Path, assignment: Assignment) -> str:
    return (f"  Gradescope: a Programming Assignment worth {assignment.points:g} points; Configure Autograder -> "
            "Zip file upload -> this zip (base image: Ubuntu 24.04, or any with Python >= 3.10).\n"
            f"  Try it locally first: unzip into A/source, put a notebook in A/submission, then\n"
            f"  AUTOGRADER_ROOT=A AUTOGRADER_PYTHON={sys.executable} bash A/source/run_autograder")


#: ``autograder export gradescope ASSIGNMENT`` (autograder.exports.targets).
TARGET = ExportTarget("gradescope", "an autograder zip for Gradescope (setup.sh, run_autograder, the kit)",
                      gradescope_files, _next_steps)
