"""What a lane grades with, in whichever process it runs: the batch's configuration and each submission as
plain JSON (:func:`lane_config`, :func:`submission_json`), and the lane's side, this process's sandbox and
grading context made once (:func:`lane_warm`) and one submission graded into JSON text (:func:`lane_grade`).

A lane process is a trusted grader process (forked or spawned by :mod:`autograder.grading.lanes` and
:mod:`autograder.grading.forked_lanes`, or a Dask worker of :mod:`autograder.grading.distributed`). It
trusts the configuration it is sent, which comes from the batch's process, but not that this machine
grades alike: the course read here and the grader fingerprint computed here must be the batch's
(:class:`LaneSetupError` otherwise). Only JSON text leaves it.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Mapping
from multiprocessing import util
from pathlib import Path
from typing import Any, Protocol, cast

from autograder import catalog as C
from autograder.course.config import Course, Limits, load_course
from autograder.core.errors import AutograderError
from autograder.grading.grader import GradingContext, check_catalog, grader_fingerprint
from autograder.grading.outputs import Outputs, render_feedback
from autograder.grading.submission import grade_or_fail
from autograder.grading.submissions import Submission


# -- what a lane is sent --------------------------------------------------------------------
class PlanFacts(Protocol):
    """What a lane's configuration reads of a batch's plan: :class:`autograder.grading.batch.Plan`, named here,
    not imported (batch.py starts the lanes)."""

    @property
    def outputs(self) -> Outputs: ...

    @property
    def device(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def origin(self) -> str: ...

    @property
    def demos(self) -> dict[str, dict[str, str]]: ...

    @property
    def references(self) -> Mapping[str, Any]: ...


def lane_config(batch: PlanFacts, sandbox: Any, language: str, isolation: str | None = None) -> dict[str, Any]:
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


# -- the lane's side -------------------------------------------------------------------------
#: This process's lane state: its sandbox (one per process) and a GradingContext per batch configuration.
_LANE: dict[str, Any] = {}


_LANE_LOCK = threading.Lock()


def _lane_sandbox(limits: Any, device: str, isolation: str | None, max_restarts: int = 2) -> Any:
    """This process's sandbox, started on first use (one warm template per lane process)."""
    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    key = json.dumps([limits.model_dump(mode="json"), device, max_restarts], sort_keys=True)
    box = _LANE.get("sandbox")
    if box is not None and _LANE.get("sandbox_key") == key and not box.closed \
            and isolation in (None, box.isolation.mode):
        return box
    if box is not None:
        box.close()
    modes = None if isolation in (None, "none") else (isolation,)
    box = Sandbox(limits, device, isolation=isolation != "none", modes=modes, max_restarts=max_restarts)
    _LANE.update(sandbox=box, sandbox_key=key)
    # A lane process ends without atexit (multiprocessing, Dask's nanny): close the sandbox either way.
    util.Finalize(None, box.close, exitpriority=10)
    atexit.register(box.close)
    return box


def lane_warm(config: dict[str, Any]) -> int:
    """Import what grading needs (torch, the batch's catalog) and start this process's sandbox."""
    import torch


    torch.set_num_threads(1)
    with _LANE_LOCK:
        C.load_catalog(load_course(config["course_root"]), hidden=True, mistakes=True)
        _lane_context(config)
    return os.getpid()


def adopt_sandbox(box: Any, key: str) -> None:
    """This process's lane state anew, with ``box`` as its sandbox (``key``: its limits, device and restarts, as
    :func:`_lane_sandbox` keys one): a forked lane's copy of its parent's state holds the parent's sandbox."""
    _LANE.clear()
    _LANE.update(sandbox=box, sandbox_key=key)


def _lane_context(config: dict[str, Any]) -> GradingContext:
    """The grading context of ``config`` in this process (made once; the caller holds _LANE_LOCK)."""
    # ("spare" is how the batch runs, not what grades: the lane warmed without it is the same lane.)
    same = {k: v for k, v in config.items() if k != "spare"}
    key = hashlib.sha256(json.dumps(same, sort_keys=True, default=str).encode()).hexdigest()
    contexts = _LANE.setdefault("contexts", {})
    if key in contexts:
        return cast(GradingContext, contexts[key])
    import torch


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
    ctx = GradingContext(course, sandbox, device, fingerprint, references, C.LiveDiagnoser(course.tolerances),
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
        if ctx.sandbox is not None and config.get("spare"):
            # a lane grades one submission after another (see _local_results)
            ctx.sandbox.keep_spare(when_closed=bool(config.get("spare_when_closed")))
    fields = dict(sub)
    fields["path"] = Path(fields["path"])
    submission = Submission(**fields)
    scratch = None
    try:
        if notebook is not None:
            # In the sandbox's folder, which goes with the sandbox (or, if this process is killed, at the
            # next start of a sandbox here): no copy of a submission is left behind in /tmp.
            fd, scratch = tempfile.mkstemp(prefix="autograder-lane-", suffix=".ipynb",
                                           dir=getattr(ctx.sandbox, "folder", None))
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


def lane_process_init() -> None:
    """A lane process: Ctrl-C is the parent's to handle (it stops the lanes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)
