"""``autograder grade SUBMISSIONS -o OUT``: grade a folder or zip of notebooks in the sandbox.

For each submission found (see :mod:`autograder.submissions`): read the notebook,
open a fresh sandbox worker with its code cells, run every exercise of its
assignment (public and hidden checks) with the reference from
``solutions/<module>.py``, and write ``results/<key>.json`` and
``feedback/<key>.{md,html}`` atomically, then rebuild ``grades.csv``. At the end,
``report.html`` and a summary table. Every submission found yields a row: graded,
or a named failure.

Resuming: a result whose notebook hash and grader fingerprint match the current
ones is kept (``--force`` regrades). Hidden inputs are seeded per (course seed,
student, assignment), so a regrade gives identical scores.

Lanes: ``-j N`` grades N submissions at a time, each lane driving one sandbox
worker at a time. A small batch stays in this process (N threads, one sandbox
template). A larger one (at least ``PROCESS_MIN_SUBMISSIONS`` per extra lane)
runs one lane here and N-1 in trusted grader processes started with
multiprocessing's ``spawn`` context (a fresh interpreter: nothing of this
process's threads or torch state is copied), each with a sandbox of its own;
their lane is :func:`lane_grade`, and only JSON text crosses the process
boundary (the submission's fields in, the result and its rendered feedback
out). This process stays the one writer of results, feedback and CSVs
(:class:`Outputs`), so results stay atomic and a run stays resumable; a lane
process that dies hands its submission back to the lanes here. ``--scheduler``
sends the same lanes to a Dask cluster instead (:mod:`autograder.distributed`).
Student code never runs in any of these processes; the references do, on one
torch thread each.
"""
from __future__ import annotations

import argparse
import collections
import datetime as dt
import functools
import hashlib
import importlib
import json
import os
import signal
import tempfile
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import report as R
from .config import Course, load_course
from .errors import AutograderError, NotebookError
from .messages import as_dict, say
from .points import total as points_total
from .references import reference_module
from .submissions import Discovery, Submission, discover, opened
from .source_scan import scan_notebook
from .text import line, scrub

#: What the grader fingerprint covers: a change to any of these regrades on the next run. The engine's
#: modules that decide a score (relative to the engine's folder), and the course's: course.yml, every
#: assignment folder's checks, hidden checks and mistakes, and the references.
ENGINE_FILES = ("catalog", "probes.py", "plain.py", "source_scan.py", "points.py")
COURSE_FILES = ("course.yml", "source/*/*.py", "solutions/*.py")


def grader_fingerprint(device: str, course: Course) -> str:
    """A hash of everything that decides a score (the engine's checks machinery, the course's checks,
    references and course.yml) and the device."""
    from .config import PACKAGE

    digest = hashlib.sha256(f"device={device}\n".encode())
    for base, patterns, label in ((PACKAGE, ENGINE_FILES, "engine"), (course.root, COURSE_FILES, "course")):
        for pattern in patterns:
            path = base / pattern
            files = sorted(path.rglob("*.py")) if path.is_dir() else sorted(base.glob(pattern))
            for f in files:
                if f.is_file():
                    name = f"{label}/{f.relative_to(base).as_posix()}"
                    digest.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


#: Locked code cells that set up what the solutions need: always run.
SETUP_CELLS = frozenset({"imports", "selfcheck_setup"})
DEMO_SKIPPED = "a demo cell of the release notebook, unchanged: not needed for grading"


def demo_cells(course: Course) -> dict[str, dict[str, str]]:
    """assignment -> {grade_id: source} of the locked demo cells (facts, plots, experiments).

    Read from release/ (what students received), else from source/ (the same
    locked cells). A submission's cell with the same grade_id and the very same
    source is instructor code that only prints and plots: grading skips it,
    which saves its run time (an ungraded training experiment takes seconds)
    and never changes a score. A cell the student edited still runs.

    Plain JSON, not nbformat: `autograder build` writes nbformat 4, and importing
    nbformat costs seconds that :func:`run` rather spends while the sandbox starts.
    """
    from .notebook import _source

    out: dict[str, dict[str, str]] = {}
    for a in course.assignments:
        for folder in ("release", "source"):
            path = course.root / folder / a.id / a.notebook
            if path.exists():
                break
        else:
            continue
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
            if nb.get("nbformat") != 4:
                continue
            cells: dict[str, str] = {}
            for cell in nb["cells"]:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                gid = meta.get("grade_id")
                if (cell.get("cell_type") == "code" and isinstance(gid, str) and gid and meta.get("locked")
                        and not meta.get("solution") and gid not in SETUP_CELLS):
                    cells[gid] = _source(cell)
        except Exception:  # noqa: BLE001 - no skipping is always correct, only slower
            continue
        out[a.id] = cells
    return out


#: Cell sources longer than this are transformed afresh each time rather than remembered.
_CACHED_SOURCE_CHARS = 64 * 1024


@functools.lru_cache(maxsize=4096)
def _plain_python(source: str) -> tuple[str, str | None]:
    from .notebook import to_python

    return to_python(source)


def submission_cells(nb: Any, demos: dict[str, str], max_cell_bytes: int = 256 * 1024) -> list[Any]:
    """:func:`autograder.notebook.code_cells`, with the unchanged demo cells skipped (see demo_cells()).

    IPython's input transformer costs milliseconds a cell, and most cells of a
    batch are the release's own text or the same correct solution: each distinct
    source is transformed once per process (a pure function of the text), and a
    skipped demo cell is never transformed at all. A cell over ``max_cell_bytes``
    (``limits.cell_kb``) is neither parsed nor run: parsing megabytes of one
    expression costs the trusted side minutes and gigabytes.
    """
    from .notebook import Cell, _grade_id, _source, to_python

    out = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source, gid = _source(cell), _grade_id(cell)
        if len(source) > max_cell_bytes or len(source.encode("utf-8", errors="replace")) > max_cell_bytes:
            out.append(Cell(index, gid, "", "", say("sandbox.cell_too_large", kib=max_cell_bytes // 1024).en))
        elif gid in demos and source == demos[gid]:
            out.append(Cell(index, gid, source, "", DEMO_SKIPPED))
        else:
            code, skipped = _plain_python(source) if len(source) <= _CACHED_SOURCE_CHARS else to_python(source)
            out.append(Cell(index, gid, source, code, skipped))
    return out


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise AutograderError("--device cuda: torch sees no CUDA device here",
                              hint="use --device auto (CUDA when present, else CPU) or --device cpu")
    return requested


# -- one submission -----------------------------------------------------------------
def _said(key: str, **params: Any) -> dict[str, str]:
    """A message of the catalogue (autograder.messages) as a result holds it: {"zh", "en"}."""
    return as_dict(say(key, **params))


@dataclass
class Context:
    """What every grading thread shares (read-only once the batch starts)."""

    course: Course
    sandbox: Any
    device: str
    fingerprint: str
    references: dict[str, Callable[..., Any]]      # exercise ID -> reference solution
    diagnoser: Any
    demos: dict[str, dict[str, str]] = field(default_factory=dict)   # see demo_cells()
    origin: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)


def _base(sub: Submission, ctx: Context) -> dict[str, Any]:
    return {"schema": R.RESULT_SCHEMA, "key": sub.key, "student": sub.student, "assignment": sub.assignment,
            "origin": ctx.origin, "source": sub.source, "sha256": sub.sha256, "grader": ctx.fingerprint,
            "device": ctx.device, "isolation": _isolation(ctx),
            "points": 0.0, "max_points": 0.0, "exercises": [], "cells": [], "notes": [], "notes_msg": [],
            "evidence": {k: v for k, v in sub.evidence.items() if isinstance(v, str)}}


def _isolation(ctx: Context) -> dict[str, Any] | None:
    """The cage the batch's workers ran in (autograder.cage), as every result records it."""
    isolation = getattr(ctx.sandbox, "isolation", None)
    return isolation.to_json() if isolation is not None else None


def failure(sub: Submission, ctx: Context, status: str, message: dict[str, str], **extra: Any) -> dict[str, Any]:
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


def _scan(cells: list[Any], outcomes: list[Any]) -> Any:
    """The static scan of the code the worker ran; cells the worker's compiler rejected are marked as such."""
    ran = [c for c in cells if not c.skipped]
    failed = {o.index for o in outcomes if getattr(o, "status", None) == "error"
              and getattr(o, "error_type", "") in _COMPILE_ERRORS}
    return scan_notebook([c.code for c in ran], [i for i, c in enumerate(ran) if c.index in failed])


def _forbidden_in_source(ex_json: dict[str, Any], findings: list[str]) -> None:
    """Zero an exercise whose code, read on the trusted side, reaches a forbidden call or tampers with
    the grader; one more check row says what was found."""
    for check in ex_json["checks"]:
        check["points"] = 0.0
    ex_json["points"], ex_json["status"] = 0.0, "forbidden"
    found = line(", ".join(findings), 300)
    ex_json["checks"].append({
        "exercise": ex_json["exercise"], "check": "source-scan", "audience": "public", "kind": "forbidden",
        "title": {"zh": "代码中没有禁止的调用", "en": "no forbidden call in the code"}, "status": "forbidden",
        "passed": False, "points": 0.0, "max_points": 0.0,
        "message": {"zh": f"评分程序读代码时发现：{found}（整道题记 0 分）",
                    "en": f"reading the code, the grader found: {found} (the exercise scores 0)"},
        "mistake": None, "mistake_message": None, "forbidden": [f for f in findings if ":" not in f],
        "seconds": 0.0, "withheld": False})


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
    if status in ("crashed", "error", "timeout", "failed") and "memory" in en.lower():
        return f"memory: {ex}", {"zh": f"{ex} 超出内存限制：{zh}", "en": f"{ex} ran out of memory: {en}"}
    if status == "timeout":
        return f"timeout: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    if status == "crashed":
        return f"crash: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    if status == "forbidden":
        return f"forbidden: {ex}", {"zh": f"{ex}：{zh}", "en": f"{ex}: {en}"}
    return None


def grade_submission(sub: Submission, ctx: Context) -> dict[str, Any] | None:
    """The result dict of one submission; None only when the batch is being stopped."""
    from . import catalog as C
    from .notebook import read_notebook

    if sub.problem:
        return failure(sub, ctx, sub.problem, sub.said or _said("submission.problem", detail=sub.problem))
    start = time.perf_counter()
    # Where the seconds go (see PROFILE_SECTIONS), kept in the result's timing section.
    profile: dict[str, float] = {}
    limits = ctx.course.limits
    try:
        nb = read_notebook(sub.path, max_bytes=int(limits.notebook_mb * 2**20))
    except NotebookError as exc:
        text = exc.message.replace(str(sub.path), sub.source)
        detail = text.split(": ", 1)[1] if text.startswith(sub.source + ": ") else text
        return failure(sub, ctx, f"unreadable: {detail}", _said("submission.unreadable", detail=detail))
    assignment = ctx.course.assignment(sub.assignment)
    demos = ctx.demos.get(assignment.id, {})
    cells = submission_cells(nb, demos, int(limits.cell_kb * 1024))
    profile["read"] = time.perf_counter() - start
    result = _base(sub, ctx)
    result["max_points"] = assignment.points
    notes: list[str] = []
    notes_msg: list[dict[str, str]] = []
    if sub.evidence.get("also_found"):
        notes.append(f"also found: {sub.evidence['also_found']}")
        notes_msg.append(_said("submission.also_found", others=sub.evidence["also_found"]))
    if nb.metadata.get("autograder_converted_from") == 3:
        notes.append("converted from nbformat 3")
        notes_msg.append(_said("submission.old_format"))
    timing: dict[str, Any] = {}
    t0 = time.perf_counter()
    worker = ctx.sandbox.open(cells, label=sub.key)
    try:
        # The trusted side's own look at the code (the worker's guards run where a cell could turn them off).
        scanned = _scan(cells, getattr(worker, "cells", []))
        timing["open_seconds"] = round(time.perf_counter() - t0, 4)
        exercises = []
        for ex in assignment.exercises:
            t1 = time.perf_counter()
            outcome = C.run_exercise(
                ex.id, ex.function, ex.points, worker, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                tolerances=ctx.course.tolerances, seed_parts=hidden_seed_parts(ctx.course, sub, assignment.id),
                device=ctx.device, reference=ctx.references[ex.id], diagnoser=ctx.diagnoser, profile=profile)
            profile["checks"] = profile.get("checks", 0.0) + time.perf_counter() - t1
            t2 = time.perf_counter()
            ex_json = outcome.to_json()
            findings = scanned.exercise(ex.function, C.SPECS[ex.id].forbidden if ex.id in C.SPECS else ())
            if findings:
                _forbidden_in_source(ex_json, findings)
            profile["results"] = profile.get("results", 0.0) + time.perf_counter() - t2
            ex_json["seconds"] = round(time.perf_counter() - t1, 4)
            exercises.append(ex_json)
            note = _exercise_notes(ex_json, ex.function)
            if note:
                notes.append(note[0])
                notes_msg.append(note[1])
        # After the calls: a worker forked again after a crash reports its cells afresh.
        result["cells"] = [_cell_json(c) for c in getattr(worker, "cells", [])]
    finally:
        t3 = time.perf_counter()
        worker.close()
        profile["close"] = time.perf_counter() - t3
    if ctx.stopping.is_set():
        # The sandbox may have been torn down under this submission: its outcome is not trustworthy.
        return None
    failed_cells = [c for c in result["cells"] if c["status"] not in ("ok", "skipped", None)]
    if failed_cells:
        notes.append(f"cells failed: {', '.join(R.cell_number(c) for c in failed_cells)}")
    result["exercises"] = exercises
    result["points"] = points_total(e["points"] for e in exercises)
    result["notes"], result["notes_msg"] = notes, notes_msg
    result["status"] = "; ".join([R.GRADED, *notes])
    result["message"] = None
    timing["seconds"] = round(time.perf_counter() - start, 4)
    timing["profile"] = _profile(profile, getattr(worker, "profile", {}), timing["seconds"])
    result["timing"] = timing
    return result


#: The sections of one submission's profile (result["timing"]["profile"], seconds), in path order.
PROFILE_SECTIONS = {
    "read": "read and parse the notebook, cells to plain Python",
    "fork": "fork a worker from the warm template (its cage excluded)",
    "cage": "the worker's cage: namespaces, tmpfs root, uid, seccomp, Landlock (see autograder.cage)",
    "cells": "run the notebook's code cells in the worker",
    "inputs": "generate seeded inputs (ctx.randn, randint)",
    "encode": "encode call arguments as plain data",
    "ipc": "round trips to the worker less its own work: sockets, scheduling, waking up",
    "worker": "the worker's side of calls less the student's code: decode, ForbiddenGuard, encode",
    "student": "the student's functions, timed inside the worker",
    "decode": "decode and validate the worker's replies",
    "reference": "reference solutions on float64 copies",
    "compare": "expectations: shapes, dtypes, float64 comparisons",
    "diagnose": "run known mistakes on the failing inputs",
    "checks_other": "the rest of the checks' own code and scoring",
    "results": "build the result JSON",
    "close": "stop the worker (reaped in the background)",
    "other": "everything else in grade_submission",
}


def _profile(grader: dict[str, float], sandbox: dict[str, float], total: float) -> dict[str, float]:
    """One flat breakdown whose sections add up to ``total`` (``other`` is what no section covers)."""
    cage = min(sandbox.get("cage", 0.0), sandbox.get("fork", 0.0))
    out = {"read": grader.get("read", 0.0), "fork": sandbox.get("fork", 0.0) - cage, "cage": cage,
           "cells": sandbox.get("cells", 0.0),
           "inputs": grader.get("inputs", 0.0), "encode": sandbox.get("encode", 0.0),
           "student": grader.get("student", 0.0), "decode": sandbox.get("decode", 0.0),
           "reference": grader.get("reference", 0.0), "compare": grader.get("compare", 0.0),
           "diagnose": grader.get("diagnose", 0.0), "results": grader.get("results", 0.0),
           "close": grader.get("close", 0.0)}
    # The worker's figure comes from the worker (plain data, profile only); without it, all is "ipc".
    busy = min(max(sandbox.get("worker", 0.0), out["student"]), sandbox.get("roundtrip", 0.0))
    out["worker"] = max(busy - out["student"], 0.0)
    out["ipc"] = max(sandbox.get("roundtrip", 0.0) - busy, 0.0)
    # A worker re-forked inside a call counts as fork/cells inside that call: not the checks' own time.
    within_checks = grader.get("call", 0.0) + sum(grader.get(k, 0.0) for k in ("inputs", "reference", "compare",
                                                                              "diagnose"))
    out["checks_other"] = max(grader.get("checks", 0.0) - within_checks, 0.0)
    out["other"] = max(total - sum(out.values()), 0.0)
    return {k: round(out[k], 4) for k in PROFILE_SECTIONS}


def hidden_seed_parts(course: Course, sub: Submission, assignment_id: str) -> tuple[Any, ...]:
    """What seeds a submission's hidden inputs: the course seed, who, which assignment and the file's
    content. Regrading the same file gives the same inputs and score; a changed file gets new inputs,
    so inputs harvested from one round's feedback are no use in the next."""
    return (course.seed, sub.student, assignment_id, sub.sha256)


def grade_or_fail(sub: Submission, ctx: Context) -> dict[str, Any] | None:
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


def grader_fault(sub: Submission, ctx: Context, exc: BaseException, step: str = "") -> dict[str, Any]:
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
    """The result as it may be written: clean text everywhere (see autograder.text), at most ``max_bytes``.

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
    return result


# -- the batch --------------------------------------------------------------------------
class Outputs:
    """OUT: results/ (the record), feedback/, grades.csv and report.html (views of results/).

    grades.csv holds a row for every result in results/, this batch's and earlier
    ones' (another assignment graded into the same OUT keeps its rows), and is
    rewritten atomically as each submission finishes.
    """

    def __init__(self, out: Path, course: Course, language: str):
        self.out = Path(out)
        self.course = course
        self.language = language
        self.results_dir = self.out / "results"
        self.feedback_dir = self.out / "feedback"
        self.lock = threading.Lock()
        for d in (self.results_dir, self.feedback_dir):
            d.mkdir(parents=True, exist_ok=True)
            R.remove_stale_temporaries(d)
        R.remove_stale_temporaries(self.out)
        self.rows: dict[str, dict[str, Any]] = {}
        for path in sorted(self.results_dir.glob("*.json")):
            old = R.load_result(path)
            if old is not None and old.get("key") == path.stem:
                self.rows[path.stem] = _row(old)
        self._csv_seconds = 0.0
        self._csv_written = 0.0

    def result_path(self, key: str) -> Path:
        return self.results_dir / f"{key}.json"

    def existing(self, sub: Submission, fingerprint: str) -> dict[str, Any] | None:
        """The stored result of this very notebook by this very grader, if there is one."""
        old = R.load_result(self.result_path(sub.key))
        if old and old.get("sha256") == sub.sha256 and old.get("grader") == fingerprint \
                and old.get("source") == sub.source and not old.get("retry"):
            return old
        return None  # a grader fault (retry) is never taken as done: the next run tries again

    def retire(self, origin: str, found: Discovery) -> list[str]:
        """Move aside results of this SUBMISSIONS that no longer describe a file in it.

        A file now known under another key (a duplicate resolved, a student renamed)
        or gone from the folder keeps its old files in OUT/superseded/, not in grades.csv.
        """
        current = {s.source: s.key for s in found.submissions}
        scoped = set(found.out_of_scope)
        moved = []
        for key, row in list(self.rows.items()):
            if row.get("origin") != origin or row.get("source") in scoped:
                continue
            if current.get(row.get("source")) == key:
                continue
            target = self.out / "superseded"
            target.mkdir(exist_ok=True)
            for path in (self.result_path(key), self.feedback_dir / f"{key}.md", self.feedback_dir / f"{key}.html"):
                if path.exists():
                    os.replace(path, target / path.name)
            del self.rows[key]
            moved.append(key)
        return moved

    def feedback(self, result: dict[str, Any], rendered: tuple[str, str] | None = None) -> None:
        """Write the feedback files; ``rendered`` is (markdown, html) a grading lane already made."""
        key = result["key"]
        md, html = rendered if rendered is not None else render_feedback(result, self.course, self.language)
        R.write_if_changed(self.feedback_dir / f"{key}.md", md)
        R.write_if_changed(self.feedback_dir / f"{key}.html", html)

    def keep(self, result: dict[str, Any]) -> None:
        """A result from an earlier run: its feedback (in this run's language) and its row."""
        self.feedback(result)
        with self.lock:
            self.rows[result["key"]] = _row(result)

    def record(self, result: dict[str, Any], rendered: tuple[str, str] | None = None) -> None:
        """Write one fresh result, its feedback, then the gradebook; safe from any thread."""
        R.atomic_write_text(self.result_path(result["key"]), R.dump_result(result))
        self.feedback(result, rendered)
        with self.lock:
            self.rows[result["key"]] = _row(result)
            # Rebuilding is O(rows): past a few thousand rows, at most once a second (and at the end).
            if self._csv_seconds < 0.02 or time.monotonic() - self._csv_written > 1.0:
                self._write_csv()

    def write_csv(self) -> None:
        with self.lock:
            self._write_csv()

    def _write_csv(self) -> None:
        start = time.monotonic()
        R.atomic_write_text(self.out / "grades.csv", R.grades_csv(list(self.rows.values()), self.course),
                            encoding="utf-8-sig")
        self._csv_written = time.monotonic()
        self._csv_seconds = self._csv_written - start

    def all_results(self) -> list[dict[str, Any]]:
        """Every result grades.csv shows, read back from results/."""
        out = []
        for key in sorted(self.rows):
            result = R.load_result(self.result_path(key))
            if result is not None:
                out.append(result)
        return out

    def report(self, results: list[dict[str, Any]] | None = None) -> None:
        results = self.all_results() if results is None else results
        R.atomic_write_text(self.out / "report.html", R.class_report_html(results, self.course, self.language))


def render_feedback(result: dict[str, Any], course: Course, language: str) -> tuple[str, str]:
    """A result's feedback files: (markdown, html)."""
    return R.feedback_markdown(result, course, language), R.feedback_html(result, course, language)


def _row(result: dict[str, Any]) -> dict[str, Any]:
    """What grades.csv needs of a result (kept in memory instead of whole results)."""
    keep = ("key", "student", "assignment", "points", "max_points", "status", "source", "origin")
    return {**{k: result.get(k) for k in keep},
            "exercises": [{"exercise": e["exercise"], "points": e["points"]} for e in result.get("exercises", [])]}


@dataclass
class BatchOutcome:
    results: list[dict[str, Any]]
    graded: int                   # graded (or failed) in this run
    resumed: int                  # kept from an earlier run
    seconds: float                # wall time of the grading loop (template start excluded)
    interrupted: bool = False
    write_seconds: float = 0.0    # of which writing results, feedback and grades.csv
    unwritten: list[str] = field(default_factory=list)   # submissions whose row could not be written


def check_catalog(course: Course, assignments: set[str]) -> dict[str, Callable[..., Any]]:
    """Load the full catalog; every exercise to grade needs checks and a reference, else a clear error."""
    from . import catalog as C

    C.load_catalog(course, hidden=True, mistakes=True)
    references: dict[str, Callable[..., Any]] = {}
    gaps: list[str] = []
    for a in course.assignments:
        if a.id not in assignments:
            continue
        module = reference_module(course, a)
        for ex in a.exercises:
            if not C.checks_for(ex.id, (C.Audience.PUBLIC, C.Audience.HIDDEN)):
                gaps.append(f"{ex.id} has no checks")
            fn = getattr(module, ex.function, None)
            if fn is None:
                gaps.append(f"solutions/{a.module}.py defines no {ex.function} ({ex.id})")
            references[ex.id] = fn
    if gaps:
        raise AutograderError("the grader is incomplete: " + "; ".join(gaps),
                              hint="run autograder build and autograder validate")
    return references


@dataclass
class Plan:
    """A batch ready to grade: what was found, where it goes, and what grades it."""

    found: Discovery
    outputs: Outputs
    references: dict[str, Callable[..., Any]]
    fingerprint: str
    device: str
    origin: str                    # SUBMISSIONS as given (a folder or a zip), resolved
    demos: dict[str, dict[str, str]] = field(default_factory=dict)


def plan(root: Path, course: Course, out: Path, *, refused: dict[str, str] | None = None,
         assignment: str | None = None, language: str | None = None, device: str = "cpu",
         origin: Path | None = None) -> Plan:
    """Discover the submissions under ``root`` and check the grader can grade them (before any sandbox)."""
    out = Path(out).resolve()
    if out.is_relative_to(Path(root).resolve()):
        raise AutograderError(f"{out}: the output folder is inside SUBMISSIONS",
                              hint="write results elsewhere, or they would be graded next time")
    found = discover(root, course, assignment=assignment, refused=refused)
    present = {s.assignment for s in found.submissions if s.assignment and not s.problem}
    references = check_catalog(course, present)
    outputs = Outputs(out, course, language or course.language.value)
    return Plan(found, outputs, references, grader_fingerprint(device, course), device,
                str(Path(origin if origin is not None else root).resolve()), demo_cells(course))


#: Submissions to grade per extra lane process: fewer, and the lanes stay threads of this process
#: (a lane process imports torch and starts a sandbox template: seconds that a short batch never recovers).
#: Measured on 2 cores (bench/bench_peers.py): at 40 submissions a second lane process gives 0.91x the
#: throughput of -j 1 (threads: 1.2x), at 160 it gives 1.54x.
PROCESS_MIN_SUBMISSIONS = 64


def lane_processes(jobs: int, todo: int) -> int:
    """How many of ``jobs`` lanes run in grader processes of their own for ``todo`` submissions."""
    return max(0, min(jobs - 1, todo // PROCESS_MIN_SUBMISSIONS))


def grade_batch(batch: Plan, sandbox: Any, *, jobs: int, force: bool = False, progress: Any = None,
                on_result: Callable[[dict[str, Any]], None] | None = None, processes: int | None = None,
                lanes: ProcessLanes | None = None, scheduler: Any = None,
                isolation: str | None = None) -> BatchOutcome:
    """Grade every submission not already done; each result is written as soon as it exists.

    ``jobs`` lanes in all: ``processes`` of them (default: :func:`lane_processes`) in grader processes of
    their own (``lanes``, when the caller started them early), the rest as threads here. ``scheduler`` (a
    Dask scheduler address or Client) grades on a Dask cluster instead (``sandbox`` may be None then).
    Whatever grades, this process writes every result, feedback file and grades.csv.
    """
    from . import catalog as C

    course, outputs = batch.outputs.course, batch.outputs
    ctx = Context(course, sandbox, batch.device, batch.fingerprint, batch.references,
                  C.LiveDiagnoser(course.tolerances), batch.demos, batch.origin)
    results: dict[str, dict[str, Any]] = {}
    todo: list[Submission] = []
    unwritten: list[str] = []
    outputs.retire(batch.origin, batch.found)
    for sub in batch.found.submissions:
        old = None if force else outputs.existing(sub, batch.fingerprint)
        if old is not None and old.get("origin") == batch.origin and _kept(outputs, old):
            results[sub.key] = old
        else:
            todo.append(sub)
    outputs.write_csv()
    resumed = len(results)
    task = progress.add_task("grading", total=len(batch.found.submissions), completed=resumed) if progress else None
    start = time.perf_counter()
    write_seconds = 0.0
    # A submission that cannot be graded (no student, unknown assignment) fails here at once: no sandbox.
    local = [s for s in todo if s.problem]
    rest = [s for s in todo if not s.problem]
    config = lane_config(batch, sandbox, outputs.language, isolation)
    if scheduler is not None:
        from .distributed import cluster_results

        stream = cluster_results(scheduler, config, rest, ctx, local=local)
        owned = None
    else:
        if lanes is None and sandbox is not None:
            wanted = lane_processes(jobs, len(rest)) if processes is None else max(0, min(processes, jobs - 1))
            lanes = ProcessLanes(wanted, config) if wanted and len(rest) > 1 else None
            owned = lanes
        else:
            owned = None
        stream = _local_results(ctx, local + rest, jobs, lanes, config)
    try:
        for sub, result, rendered in stream:
            t0 = time.perf_counter()
            result = _record(outputs, result, sub, ctx, unwritten, rendered)
            write_seconds += time.perf_counter() - t0
            if result is None:
                continue
            results[result["key"]] = result
            if on_result:
                on_result(result)
            if progress:
                progress.advance(task)
    except BaseException:
        ctx.stopping.set()  # before the sandbox goes: no half-graded submission gets written
        raise
    finally:
        stream.close()
        if owned is not None:
            owned.close()
        outputs.write_csv()
    seconds = time.perf_counter() - start
    ordered = [results[s.key] for s in batch.found.submissions if s.key in results]
    return BatchOutcome(ordered, len(ordered) - resumed, resumed, seconds, write_seconds=write_seconds,
                        unwritten=unwritten)


def _local_results(ctx: Context, todo: list[Submission], jobs: int, lanes: ProcessLanes | None,
                   config: dict[str, Any]) -> Any:
    """Grade ``todo`` with threads here and the ``lanes`` processes; yield each result as it is ready.

    Each lane process holds one submission at a time, so a lane that is still starting takes none from the
    threads; a lane process that fails or dies gives its submission back to the threads (nothing is lost).
    """
    queue = collections.deque(todo)
    remote = lanes.count if lanes is not None and lanes.alive else 0
    threads = max(1, jobs - remote)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade")
    pending: dict[Future, tuple[Submission, bool]] = {}
    interrupted = False

    def feed() -> None:
        here = sum(1 for _s, far in pending.values() if not far)
        away = len(pending) - here
        while queue and lanes is not None and lanes.alive and away < lanes.count:
            sub = queue.popleft()
            pending[lanes.submit(config, sub)] = (sub, True)
            away += 1
        # Lanes here: the threads left to this process, or all of them once the lane processes have stopped.
        while queue and here < (threads if lanes is not None and lanes.alive else max(1, jobs)):
            sub = queue.popleft()
            pending[pool.submit(grade_or_fail, sub, ctx)] = (sub, False)
            here += 1

    try:
        feed()
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                sub, far = pending.pop(fut)
                if far:
                    try:
                        payload = json.loads(fut.result())
                    except Exception as exc:  # noqa: BLE001 - the lane process died or could not start
                        lanes.failed(exc)
                        queue.appendleft(sub)      # graded again, here
                        continue
                    if payload is None:
                        continue
                    feedback = payload.get("feedback")
                    yield sub, payload["result"], tuple(feedback) if feedback else None
                else:
                    result = fut.result()
                    if result is not None:
                        yield sub, result, None
            feed()
    except BaseException:
        interrupted = True
        ctx.stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if lanes is not None:
            lanes.close(kill=True)
        raise
    finally:
        if not interrupted:
            pool.shutdown(wait=True)


# -- lanes in other processes -------------------------------------------------------------
def lane_config(batch: Plan, sandbox: Any, language: str, isolation: str | None = None) -> dict[str, Any]:
    """Everything a lane in another process (or on another machine) needs to grade like this one: plain JSON.

    The lanes cage their workers as ``sandbox`` does (its mode), else as ``isolation`` says ("none" for
    --no-isolation; None: the best the lane's machine offers).
    """
    course = batch.outputs.course
    limits = getattr(sandbox, "limits", None) or course.limits
    chosen = getattr(sandbox, "isolation", None)
    return {"course": course.model_dump(mode="json"), "course_root": str(course.root),
            "device": batch.device, "fingerprint": batch.fingerprint,
            "origin": batch.origin, "demos": batch.demos, "language": language,
            "assignments": sorted({a.id for a in course.assignments
                                   if any(e.id in batch.references for e in a.exercises)}),
            "limits": limits.model_dump(mode="json"),
            "isolation": chosen.mode if chosen is not None else isolation,
            "max_restarts": getattr(sandbox, "max_restarts", 2)}


def submission_json(sub: Submission) -> dict[str, Any]:
    """A submission as plain JSON (its path is where *this* machine has it)."""
    return {"path": str(sub.path), "source": sub.source, "sha256": sub.sha256, "student": sub.student,
            "assignment": sub.assignment, "problem": sub.problem,
            "evidence": json.loads(json.dumps(sub.evidence, default=str))}


class LaneSetupError(AutograderError):
    """A lane cannot grade as the batch asks (another kit version, no sandbox): the batch's fault, not a row's."""


#: This process's lane state: its sandbox (one per process) and a Context per batch configuration.
_LANE: dict[str, Any] = {}
_LANE_LOCK = threading.Lock()


def _lane_sandbox(limits: Any, device: str, isolation: str | None, max_restarts: int = 2) -> Any:
    """This process's sandbox, started on first use (one warm template per lane process)."""
    from .sandbox import Sandbox

    key = json.dumps([limits.model_dump(mode="json"), device, max_restarts], sort_keys=True)
    box = _LANE.get("sandbox")
    if box is not None and _LANE.get("sandbox_key") == key and not box._closed \
            and isolation in (None, box.isolation.mode):
        return box
    if box is not None:
        box.close()
    modes = None if isolation in (None, "none") else (isolation,)
    box = Sandbox(limits, device, isolation=isolation != "none", modes=modes, max_restarts=max_restarts)
    _LANE.update(sandbox=box, sandbox_key=key)
    # A lane process ends without atexit (multiprocessing, Dask's nanny): close the sandbox either way.
    import atexit
    from multiprocessing import util

    util.Finalize(None, box.close, exitpriority=10)
    atexit.register(box.close)
    return box


def lane_warm(config: dict[str, Any] | None = None,
              sandbox: tuple[dict[str, Any], str, str | None] | None = None, course_root: str | None = None) -> int:
    """Import what grading needs (torch, the catalog) and start this process's sandbox: the batch's
    (``config``), or one of ``sandbox`` = (limits, device, cage mode or None) before the batch is known.
    ``course_root``: the course whose catalog to load (default: the batch's, else the one found here)."""
    import torch

    from . import catalog as C
    from .config import Limits

    torch.set_num_threads(1)
    with _LANE_LOCK:
        if sandbox is not None:
            _lane_sandbox(Limits.model_validate(sandbox[0]), sandbox[1], sandbox[2])
        root = config["course_root"] if config is not None else course_root
        C.load_catalog(load_course(root) if root else None, hidden=True, mistakes=True)
        if config is not None:
            _lane_context(config)
    return os.getpid()


def _lane_context(config: dict[str, Any]) -> Context:
    """The grading context of ``config`` in this process (made once; the caller holds _LANE_LOCK)."""
    key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    contexts = _LANE.setdefault("contexts", {})
    if key in contexts:
        return contexts[key]
    import torch

    from . import catalog as C
    from .config import Limits

    torch.set_num_threads(1)
    device = config["device"]
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    course = _lane_course(config)
    fingerprint = grader_fingerprint(device, course)
    if fingerprint != config["fingerprint"]:
        raise LaneSetupError(f"this grader's checks, references or course.yml differ from the batch's "
                             f"(fingerprint {fingerprint}, the batch's {config['fingerprint']})",
                             hint="install the same version of the kit on every grading machine")
    references = check_catalog(course, set(config["assignments"]))
    sandbox = _lane_sandbox(Limits.model_validate(config["limits"]), device, config["isolation"],
                            int(config.get("max_restarts", 2)))
    ctx = Context(course, sandbox, device, fingerprint, references, C.LiveDiagnoser(course.tolerances),
                  config["demos"], config["origin"])
    contexts[key] = ctx
    return ctx


def _lane_course(config: dict[str, Any]) -> Course:
    """The batch's course, read from the same folder on this machine (a lane grades with the course's
    checks and references, which are files): it must say what the batch's says."""
    try:
        course = load_course(config["course_root"])
    except AutograderError as exc:
        raise LaneSetupError(f"this grader cannot read the batch's course at {config['course_root']} ({exc.message})",
                             hint="every grading machine needs the course at the same path") from None
    if course.model_dump(mode="json") != config["course"]:
        raise LaneSetupError(f"{course.root / 'course.yml'} on this machine differs from the batch's",
                             hint="every grading machine needs the same course")
    return course


def lane_grade(config: dict[str, Any], sub: dict[str, Any], notebook: bytes | None = None) -> str:
    """Grade one submission in this process's lane: JSON text of {"result", "feedback"} (or null).

    ``sub`` is :func:`submission_json`; ``notebook``, when given, is the file's bytes (a lane on another
    machine cannot read the client's path). The result is :func:`grade_or_fail`'s, so a submission's
    failure is caught and finalized where it always is; only plain JSON text leaves.
    """
    with _LANE_LOCK:
        ctx = _lane_context(config)
    fields = dict(sub)
    fields["path"] = Path(fields["path"])
    submission = Submission(**fields)
    scratch = None
    try:
        if notebook is not None:
            fd, scratch = tempfile.mkstemp(prefix="autograder-lane-", suffix=".ipynb")
            with os.fdopen(fd, "wb") as f:
                f.write(notebook)
            submission.path = Path(scratch)
        result = grade_or_fail(submission, ctx)
    finally:
        if scratch is not None:
            os.unlink(scratch)
    if result is None:
        return "null"
    try:
        feedback: Any = list(render_feedback(result, ctx.course, config["language"]))
    except Exception:  # noqa: BLE001 - the writer renders it again, and names a failure there
        feedback = None
    return json.dumps({"result": result, "feedback": feedback}, ensure_ascii=False, allow_nan=False)


def _lane_process_init() -> None:
    """A lane process: Ctrl-C is the parent's to handle (it stops the lanes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)


class ProcessLanes:
    """``count`` trusted grader processes (multiprocessing, ``spawn``), each with a sandbox of its own.

    ``spawn`` starts a fresh interpreter: nothing of the parent's threads, torch state or CUDA context
    is forked, and each process starts its own sandbox template (which forks workers before it computes
    anything). Started early (:meth:`warm`), they import torch and start their sandbox while this process
    starts its own.
    """

    def __init__(self, count: int, config: dict[str, Any] | None = None, *,
                 sandbox: tuple[dict[str, Any], str, str | None] | None = None, course_root: str | None = None):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.count = count
        self.alive = count > 0
        self.problem: BaseException | None = None
        self.pids: list[int] = []
        self._pool = ProcessPoolExecutor(max_workers=max(count, 1), mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_lane_process_init)
        self._warming = [self._pool.submit(lane_warm, config, sandbox, course_root) for _ in range(count)]

    def submit(self, config: dict[str, Any], sub: Submission) -> Future:
        return self._pool.submit(lane_grade, config, submission_json(sub))

    def failed(self, exc: BaseException) -> None:
        """A lane process could not grade (its start failed, or it died): the threads here take over."""
        import logging

        if self.alive:
            logging.getLogger(__name__).warning("grading lanes in other processes stopped (%s: %s); "
                                                "this process grades the rest", type(exc).__name__, exc)
        self.alive = False
        self.problem = exc

    def ready(self, timeout: float | None = None) -> list[int]:
        """Wait until every lane process has warmed up; their pids."""
        pids = []
        for fut in self._warming:
            try:
                pids.append(fut.result(timeout=timeout))
            except Exception as exc:  # noqa: BLE001
                self.failed(exc)
        self.pids = pids
        return pids

    def close(self, kill: bool = False) -> None:
        """Stop the lane processes: at once with ``kill`` or while one still starts (nothing left to grade)."""
        if kill or not all(fut.done() for fut in self._warming):
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                try:
                    proc.terminate()
                except Exception:  # noqa: BLE001, S110 - already gone
                    pass
        self._pool.shutdown(wait=not kill and all(fut.done() for fut in self._warming), cancel_futures=True)
        self.alive = False


def _kept(outputs: Outputs, old: dict[str, Any]) -> bool:
    """Keep an earlier run's result; False (grade it again) when even its feedback cannot be written."""
    try:
        outputs.keep(old)
        return True
    except Exception:  # noqa: BLE001 - a damaged old result is simply regraded
        return False


def _record(outputs: Outputs, result: dict[str, Any], sub: Submission, ctx: Context,
            unwritten: list[str], rendered: tuple[str, str] | None = None) -> dict[str, Any] | None:
    """Write one result; if that fails, write this submission's failure row instead.

    Returns what was written, or None (named in ``unwritten``) when not even the failure row
    could be: the batch goes on either way.
    """
    try:
        outputs.record(result, rendered)
        return result
    except Exception as exc:  # noqa: BLE001 - a submission's row can fail, never the batch
        try:
            fallback = finalize(grader_fault(sub, ctx, exc, step="writing the result"))
            outputs.record(fallback)
            return fallback
        except Exception as again:  # noqa: BLE001
            unwritten.append(f"{sub.source}: {type(again).__name__}")
            return None


# -- the command ---------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                        help="a folder of notebooks (any nesting) or a .zip exported from an LMS")
    parser.add_argument("-o", "--out", type=Path, required=True, metavar="OUT",
                        help="output folder: results/, feedback/, grades.csv, report.html")
    parser.add_argument("--assignment", metavar="A", help="grade only this assignment (and use it where the "
                        "path and the notebook name none)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                        help="where student code runs: cpu, cuda, or auto (cuda when available)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="submissions graded in parallel (default: the CPU count); a batch of at least "
                             f"{PROCESS_MIN_SUBMISSIONS} per extra lane grades in N processes")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="grade on a Dask distributed cluster (tcp://HOST:8786; needs pip install '.[dask]'): "
                             "each Dask worker holds its own sandbox, this process writes every output")
    parser.add_argument("--force", action="store_true", help="regrade submissions that already have a result")
    parser.add_argument("--language", choices=("zh", "en"), default=None,
                        help="language of the feedback (default: course.yml's)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="run student code without the cage (for trusted code only: a machine where "
                             "`autograder doctor` finds no cage); every result records it")
    parser.add_argument("--nbgrader", action="store_true",
                        help="SUBMISSIONS is an nbgrader course folder: grade its submitted/ and record the "
                             "scores in its gradebook.db")


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise AutograderError(f"-j {args.jobs}: need at least one worker")
    launch = None
    if not args.scheduler:
        from .worker import launch_template

        # First thing: the sandbox template imports torch while this process does (a cold start waits for
        # both; one after the other they took twice as long). The sandbox adopts it below.
        launch = launch_template()
    try:
        return _run(args, launch)
    finally:
        if launch is not None:
            launch.close()   # a template no sandbox adopted (the command stopped before grading)


def _run(args: argparse.Namespace, launch: Any) -> int:
    import torch
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from .sandbox import Sandbox

    console = Console()
    course = load_course()
    language = args.language or course.language.value
    device = resolve_device(args.device)
    # The trusted side runs references in several threads: one torch thread each, no oversubscription.
    torch.set_num_threads(1)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    _sigterm_interrupts()
    course_root = None
    if args.nbgrader:
        from .nbgrader_bridge import discover_nbgrader_course

        course_root = args.submissions
        args.submissions = discover_nbgrader_course(course_root)
    with opened(args.submissions) as (root, refused):
        batch = plan(root, course, args.out, refused=refused, assignment=args.assignment,
                     language=language, device=device, origin=args.submissions)
        found = batch.found
        if not found.submissions:
            raise AutograderError(f"{args.submissions}: no notebook (.ipynb) found",
                                  hint="pass the folder or zip that holds the submitted notebooks")
        for name in found.ignored[:10]:
            console.print(f"[dim]ignored (not a notebook): {escape(name)}[/]")
        if len(found.ignored) > 10:
            console.print(f"[dim]... and {len(found.ignored) - 10} more files that are not notebooks[/]")
        for extra, chosen in list(found.superseded.items())[:10]:
            console.print(f"[dim]not graded: {escape(extra)} (a second copy; {escape(chosen)} is graded)[/]")
        if found.out_of_scope:
            console.print(f"[dim]{len(found.out_of_scope)} notebooks of other assignments skipped (--assignment "
                          f"{args.assignment})[/]")
        t0 = time.perf_counter()
        importing = _import_lazy_modules()
        columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn())
        lanes = None
        try:
            if args.scheduler:
                from .distributed import cluster_description

                console.print(f"{len(found.submissions)} submissions under {escape(str(args.submissions))}; "
                              f"device {device}, on {escape(cluster_description(args.scheduler))}")
                warm = time.perf_counter() - t0
                if args.no_isolation:
                    console.print("[bold red]--no-isolation: student code runs uncaged on the cluster[/]")
                importing.join()
                with Progress(*columns, console=console) as progress:
                    outcome = grade_batch(batch, None, jobs=args.jobs, force=args.force, progress=progress,
                                          scheduler=args.scheduler,
                                          isolation="none" if args.no_isolation else None)
            else:
                # Lane processes start now, alongside this process's sandbox: they import torch and start
                # their own sandbox while this one does.
                todo = len(found.submissions) if args.force else \
                    sum(1 for s in found.submissions if s.key not in batch.outputs.rows)
                extra = lane_processes(args.jobs, todo)
                if extra:
                    lanes = ProcessLanes(extra, None, sandbox=(course.limits.model_dump(mode="json"), device,
                                                               "none" if args.no_isolation else None),
                                         course_root=str(course.root))
                lanes_note = f" ({extra + 1} processes)" if extra else ""
                console.print(f"{len(found.submissions)} submissions under {escape(str(args.submissions))}; "
                              f"device {device}, {args.jobs} workers{lanes_note}")
                with Sandbox(course.limits, device, isolation=not args.no_isolation, launch=launch) as sandbox:
                    warm = time.perf_counter() - t0
                    iso = sandbox.isolation
                    if iso.mode == "none":
                        console.print("[bold red]--no-isolation: student code runs uncaged, with the grader's "
                                      "rights[/]")
                    else:
                        console.print(f"isolation: {iso.mode} ({', '.join(iso.layers)})")
                    importing.join()
                    with Progress(*columns, console=console) as progress:
                        outcome = grade_batch(batch, sandbox, jobs=args.jobs, force=args.force, progress=progress,
                                              processes=extra, lanes=lanes)
        except KeyboardInterrupt:
            done = len(list(batch.outputs.results_dir.glob("*.json")))
            console.print(f"[yellow]interrupted: {done} results are saved in {batch.outputs.results_dir}; "
                          "run the same command again to finish[/]")
            raise
        finally:
            if lanes is not None:
                lanes.close()
    out = batch.outputs.out
    everything = batch.outputs.all_results()
    from .nbgrader_bridge import after_batch, write_lms_csv

    # Batch-level steps: one that fails is named and the command exits 1, but every result stays on disk
    # and the other steps still run.
    failed = [f"no row could be written for {where}" for where in outcome.unwritten]

    def step(what: str, work: Callable[[], Any]) -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001
            failed.append(f"{what} failed ({type(exc).__name__}: {line(str(exc), 300)})")

    def gradebook() -> None:
        for text in after_batch(out, course_root, course=course).lines():
            console.print(escape(line(text, 1000)))

    step("report.html", lambda: batch.outputs.report(everything))
    step("canvas.csv and moodle.csv", lambda: write_lms_csv(everything, course, out))
    if course_root is not None:
        step("recording in gradebook.db", gradebook)
    step("the summary table", lambda: R.print_summary(console, everything, course))
    earlier = len(everything) - len(outcome.results)
    if earlier:
        console.print(f"{earlier} rows of grades.csv come from earlier runs into {out} (other submissions)")
    per = outcome.seconds / outcome.graded if outcome.graded else 0.0
    writing = outcome.write_seconds / outcome.graded if outcome.graded else 0.0
    console.print(f"graded {outcome.graded} in {outcome.seconds:.2f} s ({per:.3f} s each, of which writing "
                  f"{writing * 1000:.1f} ms; sandbox warm-up {warm:.1f} s), {outcome.resumed} kept from an earlier "
                  f"run; wrote {out}/grades.csv, canvas.csv, moodle.csv, lms-skipped.csv, report.html, results/, "
                  "feedback/")
    if args.no_isolation:
        console.print("[bold red]graded with --no-isolation: student code ran uncaged (recorded in every result)[/]")
    for problem in failed:
        console.print(f"[red]ERROR[/] {escape(problem)}; every result written is in {escape(str(out))}/results/")
    return 1 if failed else 0


#: Modules the trusted side needs later, each worth a second or more to import: nbformat (reading the
#: first notebook), matplotlib (report.html), and sympy, which the first nn.MultiheadAttention call
#: with a key_padding_mask (a public check of 4.3) pulls in through torch._check_with.
LAZY_IMPORTS = ("nbformat", "matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.ticker",
                "torch.fx.experimental.symbolic_shapes")


def _import_lazy_modules() -> threading.Thread:
    """Import LAZY_IMPORTS in a thread while the sandbox template starts: this process would only wait
    for the template then, and the template's imports take one core of two."""
    def work() -> None:
        for name in LAZY_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S110 - torch internals move; this only saves time
                pass

    thread = threading.Thread(target=work, name="lazy-imports", daemon=True)
    thread.start()
    return thread


def _sigterm_interrupts() -> None:
    """SIGTERM (a scheduler's kill) stops like Ctrl-C: finished results are already on disk."""
    if threading.current_thread() is threading.main_thread():
        def handler(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt()

        signal.signal(signal.SIGTERM, handler)
