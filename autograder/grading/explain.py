"""``autograder explain STUDENT EXERCISE -o OUT``: why a student lost points, for the instructor's eyes only.

The student's feedback never shows a hidden input or a reference value. The instructor may see them: this
command finds the graded notebook of OUT's result (the same file, checked by its hash), grades that one
exercise again in the sandbox with the very seed the batch used (the course seed, the student, the
assignment, the file's content), so every hidden input is the same, and prints each check with its full
message (values, positions, the largest difference), the arguments of the call that failed, what the
student's code returned and what the reference returns on the same arguments, and the known mistake named.
Nothing is written to OUT; nothing of this reaches a student.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.course.config import Course, load_course
from autograder.core.errors import AutograderError
from autograder.grading.cells import demo_cells, submission_cells
from autograder.grading.grader import check_catalog
from autograder.grading.submission import hidden_seed_parts
from autograder.grading.submissions import Submission, safe_name
from autograder.core.messages import status_word, text
from autograder.course.notebook import Bounds, read_notebook
from autograder.reports.results import load_results, newest_results

if TYPE_CHECKING:   # the checks' modules load when a command runs (see explain below)
    from autograder.catalog.context import Runner
    from autograder.catalog.outcomes import ExerciseResult
    from autograder.inside.probes import Reply, Request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("student", help="the student, as grades.csv names them")
    parser.add_argument("exercise", help="the exercise ID, e.g. 2.4")
    parser.add_argument("-o", "--out", type=Path, required=True, metavar="OUT",
                        help="the output folder of the autograder grade run that graded it")
    parser.add_argument("--all", action="store_true", help="show passed checks too")
    parser.add_argument("--language", choices=("zh", "en"), default=None,
                        help="the explanation's language (default: course.yml's language)")


def find_result(out: Path, student: str, assignment: str) -> dict[str, Any]:
    """The result of ``student``'s ``assignment`` in OUT/results/ (an error naming who is there otherwise)."""
    results = [r for r in load_results(out) if r.get("assignment") == assignment]
    chosen = {(s, a): r for s, a, r in newest_results(results).values()}
    found = chosen.get((student, assignment))
    if found is None:
        names = sorted({s for s, _ in chosen})
        close = difflib.get_close_matches(student, names, n=3, cutoff=0.5)
        raise AutograderError(f"{out}: no result of {student} for {assignment}",
                              hint=(f"did you mean {', '.join(close)}? " if close else "")
                              + f"{len(names)} students have one" + (f": {', '.join(names[:8])}" if names else ""))
    if found.get("origin") == "service":
        # `autograder serve export` wrote the notebook each result graded beside it, in nbgrader collect's layout.
        found = dict(found, origin=str(Path(out).resolve() / "submitted"),
                     source=f"{safe_name(student)}/{assignment}/{assignment}.ipynb")
    return found


def graded_file(result: dict[str, Any], tmp: Path) -> Path:
    """The notebook the result was graded from: under its SUBMISSIONS folder, or extracted from its zip;
    refused when its content is not what was graded (the hidden inputs would not be the same)."""
    origin, source = Path(str(result.get("origin") or "")), str(result.get("source") or "")
    if not source or PurePosixPath(source).is_absolute() or ".." in PurePosixPath(source).parts:
        raise AutograderError(f"the result names no usable source file ({source!r})")
    if origin.is_dir():
        path = origin / source
    elif origin.is_file() and zipfile.is_zipfile(origin):
        with zipfile.ZipFile(origin) as zf:
            member = next((i for i in zf.infolist() if i.filename.lstrip("./").endswith(source)), None)
            if member is None:
                raise AutograderError(f"{origin}: no member {source}")
            path = tmp / "notebook.ipynb"
            path.write_bytes(zf.read(member))
    else:
        raise AutograderError(f"{origin}: the submissions this result was graded from are not there any more",
                              hint="run it where autograder grade ran, with the same SUBMISSIONS")
    if not path.is_file():
        raise AutograderError(f"{path}: not found (it was graded from there)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != result.get("sha256"):
        raise AutograderError(f"{path}: changed since it was graded (its hidden inputs would differ)",
                              hint="grade it again, then explain")
    return path


class Recorder:
    """A runner that keeps every request and reply of the check being run."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.calls: list[tuple[Request, Reply]] = []

    def __call__(self, request: Request) -> Reply:
        reply = self.runner(request)
        self.calls.append((request, reply))
        return reply


def explain(course: Course, result: dict[str, Any],
            exercise_id: str) -> tuple[ExerciseResult, list[tuple[Request, Reply]], Callable[..., Any]]:
    """(the exercise's result with full messages, the calls made, the reference) for one graded notebook."""
    from autograder.grading import earlier as E  # noqa: PLC0415 - loads torch
    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    assignment, ex = course.exercise(exercise_id)
    references = check_catalog(course, {assignment.id})
    with tempfile.TemporaryDirectory(prefix="autograder-explain-") as tmp:
        path = graded_file(result, Path(tmp))
        nb = read_notebook(path, bounds=Bounds.of(course.limits))
        cells = submission_cells(nb, demo_cells(course).get(assignment.id, {}), int(course.limits.cell_kb * 1024))
        sub = Submission(path, str(result["source"]), str(result["sha256"]), str(result["student"]), assignment.id)
        # As the batch graded it: the earlier exercises that lost points there are answered by their references.
        lost = {e["exercise"] for e in result.get("exercises") or [] if e["points"] < e["max_points"] - 1e-9}
        lost |= {p["exercise"] for p in result.get("pasted") or [] if not p.get("passed")}
        stand_ins = E.stand_ins_for(course, assignment, ex, lost)
        with Sandbox(course.limits, "cpu") as sandbox, sandbox.open(cells, label="explain") as worker:
            recorder = Recorder(E.with_stand_ins(worker, stand_ins))
            outcome = C.run_exercise(ex, recorder, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                                     tolerances=course.tolerances,
                                     seed_parts=hidden_seed_parts(course, sub, assignment.id),
                                     reference=references[ex.id], diagnoser=C.LiveDiagnoser(course.tolerances))
    return outcome, recorder.calls, references[ex.id]


def describe(value: Any, width: int = 6) -> str:
    """A value for the instructor: kind, dtype, shape and its first elements."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().reshape(-1)[:width].tolist()
        more = ", …" if value.numel() > width else ""
        shown = ", ".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in flat)
        return f"Tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} [{shown}{more}]"
    if isinstance(value, np.ndarray):
        return f"ndarray{value.shape} {value.dtype} {np.array2string(value.reshape(-1)[:width], precision=6)}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ", ".join(describe(v, width) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {describe(v, width)}" for k, v in value.items()) + "}"
    return repr(value)[:200]


#: One line of an explanation: (its kind, its text). Kinds: head, note, score, pass, fail, said, mistake, call.
Line = tuple[str, str]


def explanation(course: Course, result: dict[str, Any], exercise_id: str, *, language: str,
                show_all: bool = False) -> list[Line]:
    """Why ``result``'s notebook lost points on one exercise, as lines in ``language`` (zh or en): each failed
    check (every check with ``show_all``) with its full message, the known mistake, the last call's arguments,
    what the student's code returned and what the reference gives. Instructor's eyes only."""
    def t(key: str, **params: Any) -> str:
        return text(key, language, **params)

    assignment, ex = course.exercise(exercise_id)
    lines: list[Line] = [("head", t("explain.head", student=str(result.get("student")), exercise=ex.id,
                                    function=ex.function, graded_at=str(result.get("graded_at") or "?"),
                                    source=str(result.get("source"))))]
    outcome, calls, reference = explain(course, result, ex.id)
    graded = next((e for e in result.get("exercises") or [] if e["exercise"] == ex.id), None)
    if graded is not None and abs(float(graded["points"]) - outcome.points) > 1e-9:
        lines.append(("note", t("explain.changed", then=f"{graded['points']:g}", now=f"{outcome.points:g}")))
    lines.append(("score", t("explain.score", points=f"{outcome.points:g}", max_points=f"{outcome.max_points:g}",
                             status=status_word(outcome.status.value, language))))
    by_check: dict[str, list[tuple[Any, Any]]] = {}
    for request, reply in calls:
        by_check.setdefault(request.site.split("#")[0], []).append((request, reply))
    for r in outcome.checks:
        if r.passed and not show_all:
            continue
        lines.append(("pass" if r.passed else "fail", f"{'✓' if r.passed else '✗'} {r.check} ({r.audience}, {r.kind}): "
                      f"{r.title.get(language)}"))
        if r.passed:
            continue
        said = r.detail or r.message
        lines.append(("said", said.get(language) if said else ""))
        if r.mistake:
            lines.append(("mistake", t("explain.mistake", mistake=r.mistake,
                                       message=r.mistake_message.get(language) if r.mistake_message else "")))
        made = by_check.get(r.check) or []
        if not made:
            continue
        lines.extend(_last_call(made, reference, t))
    return lines


def _last_call(made: list[tuple[Any, Any]], reference: Callable[..., Any], t: Callable[..., str]) -> list[Line]:
    """The lines on a failed check's last call: its arguments, what the student's code returned, the reference's."""
    request, reply = made[-1]
    lines: list[Line] = [("call", t("explain.last_call", n=len(made), probe=request.probe))]
    arguments = [*((str(i), arg) for i, arg in enumerate(request.args)), *request.kwargs.items()]
    lines.extend(("call", t("explain.argument", name=name, value=describe(arg))) for name, arg in arguments)
    if reply.status == "ok":
        lines.append(("call", t("explain.returned", value=describe(reply.value().to_python()))))
    else:
        lines.append(("call", t("explain.call_failed", status=reply.status, error_type=reply.error_type,
                                error=reply.error)))
    if request.probe == "call":
        try:
            want = reference(*C.as_float64(request.args), **C.as_float64(request.kwargs))
            lines.append(("call", t("explain.reference", value=describe(want))))
        except Exception as exc:  # noqa: BLE001 - a check that expects an error
            lines.append(("call", t("explain.reference_raises", error_type=type(exc).__name__,
                                    error=str(exc)[:200])))
    return lines


#: How the terminal shows each kind of line (rich markup; the text itself is escaped).
STYLES = {"head": "bold", "note": "yellow", "score": "", "pass": "green", "fail": "red", "said": "",
          "mistake": "magenta", "call": "dim"}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    course = load_course()
    assignment, ex = course.exercise(args.exercise)
    result = find_result(args.out, args.student, assignment.id)
    language = args.language or course.language.value
    console = Console()
    for kind, line in explanation(course, result, ex.id, language=language, show_all=args.all):
        indent = "  " if kind in ("said", "mistake") else "    " if kind == "call" else ""
        styled = f"[{STYLES[kind]}]{escape(line)}[/]" if STYLES[kind] else escape(line)
        console.print(("\n" if kind in ("pass", "fail") else "") + indent + styled)
    return 0
