"""nbgrader's own path: each exercise's test cell, ``check("2.4", score=True)``, calls :func:`grade_exercise`.

Each source notebook has, after an exercise's ``check`` cell, an autograded test
cell (grade_id ``ex2_4_tests``, points from course.yml), the same text in the release::

    # 评分单元格（请勿修改）：...
    check("2.4", score=True)

Under ``nbgrader autograde`` where the instructor's kit is installed,
:func:`autograder.check` hands that call to :func:`grade_exercise` (through :func:`autograder.selfcheck.score`);
elsewhere it scores the public checks only.

``nbgrader autograde`` runs that cell in the
student's kernel. :func:`grade_exercise` runs the exercise's public and hidden
checks (the kit's catalog, the reference from ``solutions/``) against the
function in the kernel's namespace, seeded exactly as ``autograder grade`` seeds
them (course seed, student, assignment), and its value is the points: nbgrader
reads a test cell whose only result is one number as partial credit
(``nbgrader.utils.determine_grade`` -> ``get_partial_grade``), so the gradebook
holds the kit's per-exercise points. It never writes to stderr, which nbgrader
would score 0.

Instructor side only: it needs each assignment's ``hidden.py`` and ``mistakes.py`` and
``solutions/``, present where nbgrader autograde runs and never in the student
bundle. A kit fault (hidden checks missing) raises, so it shows in the autograded
notebook instead of passing for a student's 0.

Not tamper-proof: the checks run in the student's kernel, after the student's
cells, which can patch torch, the checks or this module. ``autograder grade``
(the sandbox) is the trusted path; this one serves courses that live in nbgrader.
"""
from __future__ import annotations

import contextlib
import html
import io
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder.core.messages import say
from autograder.core.points import hundredths
from autograder.selfcheck import SelfCheckResult, render_html
from autograder.selfcheck.kernel import caller_namespace, one_thread
from autograder.selfcheck.results import Note, language_of

#: nbgrader sets this in the environment of the kernels it starts for ``nbgrader autograde``.
NBGRADER_EXECUTION = "NBGRADER_EXECUTION"
#: Seed part used when the student is unknown (the instructor running the source notebook).
NO_STUDENT = "nbgrader-source"
#: (course, student, assignment) -> the exercises that lost points so far in this kernel.
_LOST: dict[tuple[str, str | None, str], set[str]] = {}
#: (course, student, assignment) -> the answers pasted from earlier assignments judged so far in this kernel.
_JUDGED: dict[tuple[str, str | None, str], dict[str, dict[str, Any]]] = {}


@dataclass
class ExerciseGrade:
    """What a hidden test cell returns: the points as text/plain, the checks as HTML.

    nbgrader parses text/plain of the cell's result as the partial credit, so
    ``repr`` is exactly the number (``2.5``) and nothing else.
    """

    result: Any                     # checks.ExerciseResult
    student: str | None
    language: str = "zh"
    seconds: float = 0.0
    notes: list[Any] = field(default_factory=list)   # selfcheck.Note

    @property
    def points(self) -> float:
        # Hundredths, as the kit's result files (autograder.core.points).
        return hundredths(self.result.points)

    @property
    def max_points(self) -> float:
        return float(self.result.max_points)

    def __float__(self) -> float:
        return self.points

    def __repr__(self) -> str:
        return repr(self.points)

    def _repr_html_(self) -> str:
        head = (f'<div class="autograder-nbgrader" data-exercise="{html.escape(self.result.exercise)}" '
                f'data-points="{self.points!r}" style="font-weight:600">'
                f'{html.escape(self.result.exercise)}: {self.points:g} / {self.max_points:g}'
                f'{" 分" if self.language == "zh" else " points"}</div>')
        body = render_html(SelfCheckResult([self.result], self.language, list(self.notes), seconds=self.seconds))
        return head + "\n" + body


def autograde_identity(assignment_id: str, cwd: Path | None = None) -> str | None:
    """The student being autograded, or None outside ``nbgrader autograde``.

    nbgrader runs each notebook with its folder as the working directory:
    ``autograded/<student>/<assignment>/``. ``autograder grade`` reads the same
    student from ``submitted/<student>/<assignment>/``, so both seed alike.
    """
    if os.environ.get(NBGRADER_EXECUTION) != "autograde":
        return None
    here = Path.cwd() if cwd is None else cwd
    if here.name != assignment_id or not here.parent.name:
        return None
    return here.parent.name


def pinned_course() -> str:
    """The course nbgrader's kernels grade with: ``$AUTOGRADER_COURSE``, which the course's
    nbgrader_config.py sets. Never one found from the kernel's folder, which is the submission's."""
    pinned = os.environ.get("AUTOGRADER_COURSE")
    if not pinned:
        raise RuntimeError("nbgrader autograde: AUTOGRADER_COURSE is not set (the course's nbgrader_config.py "
                           "sets it; run nbgrader from the course's folder)")
    return pinned


def grade_exercise(exercise_id: str, *, namespace: dict[str, Any] | None = None, student: str | None = None,
                   language: str | None = None) -> ExerciseGrade:
    """Grade one exercise in this kernel: public and hidden checks, the course's seed and points.

    ``namespace`` defaults to the notebook's (IPython's user namespace, else the
    caller's globals); ``student`` defaults to the one nbgrader is autograding.
    The value shows as the points (text/plain) and the checks (HTML).
    """
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.grading import earlier as E  # noqa: PLC0415 - loads torch

    start = time.perf_counter()
    course = load_course(pinned_course())
    assignment, exercise = course.exercise(exercise_id)
    if not C.hidden_available(course):
        raise RuntimeError(f"grade_exercise needs the instructor's course (hidden.py beside each source notebook); "
                           f"{course.root} has none")
    C.load_catalog(course, hidden=True, mistakes=True)
    from autograder.grading.references import reference as reference_of  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    reference = reference_of(course, exercise.id)
    ns = namespace if namespace is not None else caller_namespace(2)
    who = student if student is not None else autograde_identity(assignment.id)
    # The test cells run in order in one kernel: an earlier exercise that lost points here is answered by
    # its reference in the exercises built on it, as ``autograder grade`` does (a mistake costs once).
    key = (str(course.root), who, assignment.id)
    lost, judged = _LOST.setdefault(key, set()), _JUDGED.setdefault(key, {})
    seed_parts = (course.seed, who if who is not None else NO_STUDENT, assignment.id)
    runner, diagnoser = C.in_process_runner(ns), C.LiveDiagnoser(course.tolerances)
    lang = language_of(language, course)
    notes: list[Any] = []
    stand_ins: dict[str, Any] = {}
    sink = io.StringIO()

    def run(stand_ins: dict[str, Any]) -> Any:
        return C.run_exercise(exercise, E.with_stand_ins(runner, stand_ins), audiences=(C.Audience.PUBLIC,
                              C.Audience.HIDDEN), tolerances=course.tolerances, seed_parts=seed_parts, device="cpu",
                              reference=reference, diagnoser=diagnoser)

    def judge(ids: list[str]) -> list[dict[str, Any]]:
        # Answers pasted from an earlier assignment that this exercise calls: their cells have run by now (a
        # test cell follows the solution cells before it).
        return E.judge_pasted(course, assignment, runner, lost, among=ids, seed_parts=seed_parts,
                              tolerances=course.tolerances, diagnoser=diagnoser)

    # The student's code may print or warn: nbgrader scores a test cell with stderr output 0.
    with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), warnings.catch_warnings(), \
            one_thread():
        warnings.simplefilter("ignore")
        seen = len(judged)
        try:
            result, stand_ins = E.grade_exercise(course, assignment, exercise, lost, judged, run, judge)
        except SystemExit:
            # The sandbox scores a worker that exits as crashed: no points for the exercise.
            result = _zero(C, exercise, C.Status.CRASHED, C.Msg(
                "你的代码调用了 exit()/sys.exit()：本题计 0 分",
                "your code called exit()/sys.exit(): this exercise scores 0"))
    if result.points < exercise.points - 1e-9:
        lost.add(exercise.id)
    else:
        lost.discard(exercise.id)
    notes.extend(Note("info", E.pasted_message(j)) for j in list(judged.values())[seen:] if not j["passed"])
    for stand in stand_ins.values():
        notes.append(Note("info", E.stand_in_message(assignment, exercise, stand)))
    if who is None:
        notes.append(Note("info", say("selfcheck.fixed_seed")))
    return ExerciseGrade(result, who, lang, time.perf_counter() - start, notes)


def _zero(C: Any, exercise: Any, status: Any, message: Any) -> Any:
    row = C.CheckResult(exercise.id, "(all)", C.Audience.HIDDEN.value, "", C.Msg("全部检查", "all checks"),
                        status, 0.0, exercise.points, message=message)
    return C.ExerciseResult(exercise.id, exercise.function, 0.0, exercise.points, status, [row])
