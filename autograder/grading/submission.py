"""One submission, graded: its cells in a fresh sandbox worker, every exercise of its assignment
(public and hidden checks, seeded per student), the source scan, and one result dict. Every failure
of a submission is caught in one place (:func:`grade_or_fail`) and becomes its row.
"""
from __future__ import annotations

import datetime as dt
import functools
import time
import traceback
from dataclasses import dataclass
from typing import Any

from autograder import catalog as C
from autograder import reports as R
from autograder.reports.model import checked
from autograder.course.config import Course
from autograder.core.errors import AutograderError, NotebookError
from autograder.grading.cells import submission_cells
from autograder.grading.grader import GradingContext
from autograder.grading.source_scan import NotebookScan, scan_notebook
from autograder.grading.submissions import Submission
from autograder.grading.timing import flat_profile
from autograder.core.messages import as_dict, say
from autograder.course.notebook import Bounds, read_notebook
from autograder.core.points import total as points_total
from autograder.course.written import answers
from autograder.core.stopwatch import Stopwatch
from autograder.core.text import line, scrub


# -- one submission -----------------------------------------------------------------
def _said(key: str, **params: Any) -> dict[str, str]:
    """A message of the catalogue (autograder.core.messages) as a result holds it: {"zh", "en"}."""
    return as_dict(say(key, **params))


def _base(sub: Submission, ctx: GradingContext) -> dict[str, Any]:
    return {"schema": R.RESULT_SCHEMA, "key": sub.key, "student": sub.student, "assignment": sub.assignment,
            "origin": ctx.origin, "source": sub.source, "sha256": sub.sha256, "grader": ctx.fingerprint,
            "device": ctx.device, "isolation": _isolation(ctx),
            "points": 0.0, "max_points": 0.0, "exercises": [], "cells": [], "notes": [], "notes_msg": [],
            "evidence": {k: v for k, v in sub.evidence.items() if isinstance(v, str)}}


def _isolation(ctx: GradingContext) -> dict[str, Any] | None:
    """The cage the batch's workers ran in (autograder.inside.cage), as every result records it."""
    isolation = getattr(ctx.sandbox, "isolation", None)
    return isolation.to_json() if isolation is not None else None


def failure(sub: Submission, ctx: GradingContext, status: str, message: dict[str, str], **extra: Any) -> dict[str, Any]:
    """A named failure row: no points; max_points from the assignment when it is known."""
    result = _base(sub, ctx)
    if sub.assignment:
        try:
            result["max_points"] = ctx.course.assignment(sub.assignment).points
        except AutograderError:
            pass
    result.update(status=status, message=message, **extra)
    return result


def _cell_json(cell: Any) -> dict[str, Any]:
    return {"index": getattr(cell, "index", None), "status": getattr(cell, "status", None),
            "error_type": getattr(cell, "error_type", None) or None,
            "message": (str(getattr(cell, "message", "") or "")[:500]) or None,
            "said": getattr(cell, "said", None) or None,      # the sandbox's words, {"zh", "en"}
            "seconds": round(float(getattr(cell, "seconds", 0.0) or 0.0), 4)}


#: Errors of a cell that Python's compiler can raise before any of it runs.
_COMPILE_ERRORS = frozenset({"SyntaxError", "RecursionError", "MemoryError"})


def _scan(cells: list[Any], outcomes: list[Any], early: Any = None) -> Any:
    """The static scan of the code the worker ran; cells the worker's compiler rejected are marked as such.
    ``early``: the scan made while the worker ran the cells, as if every cell compiled (None: not made):
    the scan itself where that is so."""
    ran = [c for c in cells if not c.skipped]
    failed = {o.index for o in outcomes if getattr(o, "status", None) == "error"
              and getattr(o, "error_type", "") in _COMPILE_ERRORS}
    unparsed = [i for i, c in enumerate(ran) if c.index in failed]
    if early is not None and not unparsed:
        return early
    return scan_notebook([c.code for c in ran], unparsed)


@dataclass(frozen=True)
class _Scanned:
    """An exercise's checks' result (an ExerciseResult) and what the static scan found for it, the functions its
    stand-ins answered not walked into: any finding scores the exercise 0. Its ``points`` are what
    :func:`autograder.grading.earlier.grade_exercise` weighs: what the code that ran reaches counts there, so that
    a finding reached only through an earlier answer that fails its own checks (a pasted 4.3 calling SDPA, read
    for 5.4) is graded again with the reference in that answer's place, as a failed check is; the notebook-wide
    tampering does not (no stand-in changes it, and it zeroes every exercise anyway)."""

    outcome: Any
    findings: list[str]     # everything found: zeroes the exercise
    reached: list[str]      # of which, what the code that ran for it reaches

    @property
    def points(self) -> float:
        return 0.0 if self.reached else float(self.outcome.points)


def _source_scan_check(exercise: str, findings: list[str]) -> dict[str, Any]:
    """The check row that says what the static scan found in an exercise's code (it is worth no points: the
    exercise's own rows are zeroed)."""
    found = line(", ".join(findings), 300)
    return {
        "exercise": exercise, "check": "source-scan", "audience": "public", "kind": "forbidden",
        "title": {"zh": "代码中没有禁止的调用", "en": "no forbidden call in the code"}, "status": "forbidden",
        "passed": False, "points": 0.0, "max_points": 0.0,
        "message": {"zh": f"评分程序读代码时发现：{found}（整道题记 0 分）",
                    "en": f"reading the code, the grader found: {found} (the exercise scores 0)"},
        "mistake": None, "mistake_message": None, "forbidden": [f for f in findings if ":" not in f],
        "seconds": 0.0, "withheld": False}


def _scan_for(scanned: NotebookScan, outcome: Any, ex: Any, stand_ins: dict[str, Any]) -> _Scanned:
    """``outcome`` with what the static scan (``scanned``: the submission's
    :class:`~autograder.grading.source_scan.NotebookScan`) finds for ``ex``: a function a stand-in answered is not
    the student's code there."""
    findings = scanned.exercise(ex.function, C.SPECS[ex.id].forbidden if ex.id in C.SPECS else (),
                                answered=stand_ins)
    return _Scanned(outcome, findings, [f for f in findings if f not in scanned.findings])


def _scan_rows(scanned: NotebookScan, ex: Any, stand_ins: dict[str, Any]) -> list[dict[str, Any]]:
    """What the code that ran for a pasted answer (``ex``) reaches, as the failed check rows of its judgement
    (none where nothing is found)."""
    reached = _scan_for(scanned, None, ex, stand_ins).reached
    return [_source_scan_check(ex.id, reached)] if reached else []


def _forbidden_in_source(ex_json: dict[str, Any], findings: list[str]) -> None:
    """Zero an exercise whose code, read on the trusted side, reaches a forbidden call or tampers with
    the grader; one more check row says what was found."""
    for check in ex_json["checks"]:
        check["points"] = 0.0
    ex_json["points"], ex_json["status"] = 0.0, "forbidden"
    ex_json["checks"].append(_source_scan_check(ex_json["exercise"], findings))


#: What a memory limit raises in the student's code (RLIMIT_AS: Python's MemoryError, torch's allocator error).
_OUT_OF_MEMORY = ("MemoryError", "OutOfMemoryError")
_ALLOCATOR = "DefaultCPUAllocator: can't allocate memory"


def _out_of_memory(status: str, en: str) -> bool:
    """Whether a failed check's message is a memory limit firing, by what the sandbox reports, never by a word in
    a message ("kv_cache_memory", a wrong answer's): the worker killed for its memory cgroup (the sandbox's own
    sentence, in a crash: only the sandbox words those), or the student's code stopped by an allocation the
    limit refused (the class of what it raised, as the check names it: MemoryError, torch's allocator error)."""
    if status == "crashed":
        return say("sandbox.killed_memory").en in en
    if status in ("error", "failed"):
        raised = say("check.raised", kind="\0", detail="").en.split("\0")[0]        # "your code raised "
        if en.startswith(raised):
            kind = en[len(raised):].split(":", 1)[0]
            return kind in _OUT_OF_MEMORY or (kind == "RuntimeError" and _ALLOCATOR in en)
    return False


def _exercise_notes(ex_json: dict[str, Any], function: str) -> tuple[str, dict[str, str]] | None:
    """A short note for the gradebook (and the student) when an exercise could not run normally."""
    status = ex_json["status"]
    first = next((c for c in ex_json["checks"] if not c["passed"]), None)
    message = (first or {}).get("message") or {}
    zh, en = message.get("zh", "") or "", message.get("en", "") or ""
    ex = ex_json["exercise"]
    if status == "missing":
        return f"missing: {function} ({ex})", {"zh": f"找不到函数 {function}（{ex}）",
                                                "en": f"{function} is missing ({ex})"}
    if _out_of_memory(status, en):
        return f"memory: {ex}", {"zh": f"{ex} 超出内存限制：{zh}", "en": f"{ex} ran out of memory: {en}"}
    if status == "timeout":
        return f"timeout: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    if status == "crashed":
        return f"crash: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    if status == "forbidden":
        return f"forbidden: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    return None


def _unreadable(sub: Submission, ctx: GradingContext, exc: NotebookError) -> dict[str, Any]:
    """The result of a notebook that cannot be read, its reason said without the grader's path."""
    text = exc.message.replace(str(sub.path), sub.source)
    detail = text.split(": ", 1)[1] if text.startswith(sub.source + ": ") else text
    said = exc.said if exc.said is not None else detail      # the reason in both languages, when known
    return failure(sub, ctx, f"unreadable: {detail}", _said("submission.unreadable", detail=said))


def _notebook_notes(sub: Submission, nb: Any) -> tuple[list[str], list[dict[str, str]]]:
    """The result's notes on the notebook itself (other copies found, an nbformat 3 file): for the instructor,
    and as messages for the feedback."""
    notes: list[str] = []
    notes_msg: list[dict[str, str]] = []
    if sub.evidence.get("also_found"):
        notes.append(f"also found: {sub.evidence['also_found']}")
        notes_msg.append(_said("submission.also_found", others=sub.evidence["also_found"]))
    metadata = nb.get("metadata")
    if isinstance(metadata, dict) and metadata.get("autograder_converted_from") == 3:
        notes.append("converted from nbformat 3")
        notes_msg.append(_said("submission.old_format"))
    return notes, notes_msg


def _written(result: dict[str, Any], nb: Any, assignment: Any, notes_msg: list[dict[str, str]]) -> None:
    """The written answers, each listed as waiting for a person (never scored 0 here), and a note saying so."""
    if assignment.questions:
        result["questions"] = answers(nb, assignment.questions)
        waiting = ", ".join(q.id for q in assignment.questions)
        notes_msg.append(_said("submission.written_pending", questions=waiting,
                               points=f"{assignment.manual_points:g}"))


def grade_submission(sub: Submission, ctx: GradingContext) -> dict[str, Any] | None:
    """The result dict of one submission; None only when the batch is being stopped."""
    if sub.problem:
        return failure(sub, ctx, sub.problem, sub.said or _said("submission.problem", detail=sub.problem))
    if sub.assignment is None:      # (discovery gives every notebook without a problem its assignment)
        return failure(sub, ctx, "unknown assignment", _said("submission.unknown_assignment"))
    start = time.perf_counter()
    # Where the seconds go (see PROFILE_SECTIONS), kept in the result's timing section.
    timer = Stopwatch()    # the grader's sections; the worker handle keeps its own (see grading/timing.py)
    limits = ctx.course.limits
    try:
        nb = read_notebook(sub.path, bounds=Bounds.of(limits))
    except NotebookError as exc:
        return _unreadable(sub, ctx, exc)
    assignment = ctx.course.assignment(sub.assignment)
    demos = ctx.demos.get(assignment.id, {})
    cells = submission_cells(nb, demos, int(limits.cell_kb * 1024))
    timer.since("read", start)
    result = _base(sub, ctx)
    result["max_points"] = assignment.points
    notes, notes_msg = _notebook_notes(sub, nb)
    timing: dict[str, Any] = {}
    t0 = time.perf_counter()
    if ctx.sandbox is None:     # only a submission with a problem is handed over without one
        raise AutograderError(f"{sub.key}: no sandbox to grade in")
    # The trusted side's own look at the code (the worker's guards run where a cell could turn them off), made
    # while the worker runs the cells, as if every cell compiled: made again below where one did not.
    early: list[Any] = []
    worker = ctx.sandbox.open(cells, label=sub.key, meanwhile=lambda: early.append(_scan(cells, [])))
    try:
        scan_start = time.perf_counter()
        scanned = _scan(cells, getattr(worker, "cells", []), early[0] if early else None)
        timer.since("scan", scan_start)
        timing["open_seconds"] = round(time.perf_counter() - t0, 4)
        exercises, judged = _grade_exercises(ctx, sub, assignment, worker, scanned, timer, notes, notes_msg)
        # After the calls: a worker forked again after a crash reports its cells afresh.
        result["cells"] = [_cell_json(c) for c in getattr(worker, "cells", [])]
    finally:
        with timer.section("close"):
            worker.close()
    if ctx.stopping.is_set():
        # The sandbox may have been torn down under this submission: its outcome is not trustworthy.
        return None
    failed_cells = [c for c in result["cells"] if c["status"] not in ("ok", "skipped", None)]
    if failed_cells:
        notes.append(f"cells failed: {', '.join(R.cell_number(c) for c in failed_cells)}")
    result["exercises"] = exercises
    if judged:
        result["pasted"] = list(judged.values())
    result["points"] = points_total(e["points"] for e in exercises)
    _written(result, nb, assignment, notes_msg)
    result["notes"], result["notes_msg"] = notes, notes_msg
    result["status"] = "; ".join([R.GRADED, *notes])
    result["message"] = None
    timing["seconds"] = round(time.perf_counter() - start, 4)
    timing["profile"] = flat_profile(timer.seconds, worker.timer.seconds, timing["seconds"])
    result["timing"] = timing
    return result


def _grade_exercises(ctx: GradingContext, sub: Submission, assignment: Any, worker: Any, scanned: NotebookScan,
                     timer: Stopwatch, notes: list[str],
                     notes_msg: list[dict[str, str]]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Grade the exercises in order on ``worker``: their rows and the pasted answers judged; notes added."""
    from autograder.grading import earlier as E  # noqa: PLC0415 - loads torch

    exercises = []
    lost: set[str] = set()          # exercises that lost points so far: those built on them get stand-ins
    seed_parts = hidden_seed_parts(ctx.course, sub, assignment.id)
    judged: dict[str, dict[str, Any]] = {}   # answers pasted from earlier assignments (5.4 holds 4.1-4.4)

    def judge(ids: list[str]) -> list[dict[str, Any]]:
        return E.judge_pasted(ctx.course, assignment, worker, lost, among=ids, seed_parts=seed_parts,
                              tolerances=ctx.course.tolerances, device=ctx.device, diagnoser=ctx.diagnoser,
                              timer=timer, scan=functools.partial(_scan_rows, scanned))

    for ex in assignment.exercises:
        t1 = time.perf_counter()

        def run(stand_ins: dict[str, Any], ex: Any = ex) -> _Scanned:
            outcome = C.run_exercise(
                ex, E.with_stand_ins(worker, stand_ins), audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                tolerances=ctx.course.tolerances, seed_parts=seed_parts,
                device=ctx.device, reference=ctx.references[ex.id], diagnoser=ctx.diagnoser, timer=timer)
            return _scan_for(scanned, outcome, ex, stand_ins)

        seen = len(judged)
        with timer.section("checks"):
            graded, stand_ins = E.grade_exercise(ctx.course, assignment, ex, lost, judged, run, judge)
        notes_msg.extend(as_dict(E.pasted_message(j)) for j in list(judged.values())[seen:] if not j["passed"])
        t2 = time.perf_counter()
        ex_json = graded.outcome.to_json()
        if graded.findings:
            _forbidden_in_source(ex_json, graded.findings)
        if ex_json["points"] < ex.points - 1e-9:
            lost.add(ex.id)
        if stand_ins:
            ex_json["stand_ins"] = E.stood_in_json(stand_ins)
            # the feedback says so; the status stays "graded"
            notes_msg.extend(as_dict(E.stand_in_message(assignment, ex, stand)) for stand in stand_ins.values())
        timer.since("results", t2)
        ex_json["seconds"] = round(time.perf_counter() - t1, 4)
        exercises.append(ex_json)
        note = _exercise_notes(ex_json, ex.function)
        if note:
            notes.append(note[0])
            notes_msg.append(note[1])
    return exercises, judged


def hidden_seed_parts(course: Course, sub: Submission, assignment_id: str) -> tuple[Any, ...]:
    """What seeds a submission's hidden inputs: the course seed, who, which assignment and the file's
    content. Regrading the same file gives the same inputs and score; a changed file gets new inputs,
    so inputs harvested from one round's feedback are no use in the next."""
    return (course.seed, sub.student, assignment_id, sub.sha256)


def grade_or_fail(sub: Submission, ctx: GradingContext) -> dict[str, Any] | None:
    """:func:`grade_submission`, with every fault turned into this submission's row (the batch goes on).

    The one place where a submission's failure is caught, and the one place its result
    leaves: every string passes the text gate and the whole is capped (:func:`finalize`).
    """
    try:
        result = grade_submission(sub, ctx)
        if result is not None:
            result = finalize(result)
    except Exception as exc:  # noqa: BLE001 - one broken submission must not stop the batch
        if ctx.stopping.is_set():
            return None
        result = finalize(grader_fault(sub, ctx, exc))
    if result is not None:
        result["graded_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return result


def grader_fault(sub: Submission, ctx: GradingContext, exc: BaseException, step: str = "") -> dict[str, Any]:
    """The row of a submission whose grading (or ``step``) failed on the trusted side: retried next run."""
    where = f" {step}" if step else ""
    return failure(sub, ctx, f"crash: grader error{where} ({type(exc).__name__}: {line(str(exc), 300)})",
                   _said("submission.grader_fault", kind=type(exc).__name__),
                   traceback="".join(traceback.format_exception(exc, limit=20)), retry=True)


#: The most a result JSON may hold; past it, messages and cell records are cut, with a marker.
RESULT_MAX_BYTES = 1 << 20


#: Cell records kept in a result (a notebook of a hundred thousand empty cells is possible).
RESULT_MAX_CELLS = 500


def finalize(result: dict[str, Any], max_bytes: int = RESULT_MAX_BYTES) -> dict[str, Any]:
    """The result as it may be written: clean text everywhere (see autograder.core.text), at most ``max_bytes``.

    Cutting is visible: ``truncated`` is set and a note says so in both languages.
    """
    result = scrub(result)
    cut = False
    if len(result.get("cells") or []) > RESULT_MAX_CELLS:
        result["cells"], cut = result["cells"][:RESULT_MAX_CELLS], True
    size = len(R.dump_result(result).encode("utf-8"))
    for limit in (500, 120):
        if size <= max_bytes:
            break
        result, cut = scrub(result, limit), True
        size = len(R.dump_result(result).encode("utf-8"))
    if size > max_bytes:
        result["cells"], result["traceback"] = [], None
        for ex in result.get("exercises") or []:
            for check in ex.get("checks") or []:
                check["message"] = None
    if cut or size > max_bytes:
        result["truncated"] = True
        result.setdefault("notes", []).append("truncated")
        result.setdefault("notes_msg", []).append(_said("submission.too_large", kib=max_bytes // 1024))
    # The one result model (autograder.reports.model): a result that is not one is the kit's fault, loudly.
    return checked(result)
