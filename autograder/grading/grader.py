"""What grades: the course's catalog and references, the device, the sandbox, and a fingerprint of
all that decides a score (a change to any of them regrades on the next run).
"""
from __future__ import annotations

import gc
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.course.config import Course
from autograder.course.files import ALTERNATIVES_FILE, PACKAGE
from autograder.core.errors import AutograderError
from autograder.grading.references import reference_module

if TYPE_CHECKING:
    from autograder.catalog import Diagnoser
    from autograder.sandbox import Sandbox


#: What the grader fingerprint covers: a change to any of these regrades on the next run. The engine's
#: modules that decide a score (relative to the engine's folder), and the course's: course.yml, every
#: assignment folder's checks, hidden checks and mistakes, and the references.
ENGINE_FILES = ("catalog", "inside/probes.py", "inside/guards.py", "inside/proxies.py", "inside/plain.py",
                "inside/forbidden.py", "course/notebook.py", "core/points.py",
                "grading/source_scan.py", "grading/scan_walk.py", "grading/scan_vocabulary.py",
                "grading/scan_scopes.py", "grading/cells.py", "grading/submission.py", "grading/earlier.py",
                "sandbox/stand_ins.py",
                # What the student's code may do decides its outcome too: the cage and its limits.
                "inside/cage.py", "inside/memcg.py", "inside/template.py", "inside/warm_up.py",
                "inside/worker_memory.py", "inside/worker.py")


COURSE_FILES = ("course.yml", "source/*/*.py", "solutions/*.py")


def grader_fingerprint(device: str, course: Course) -> str:
    """A hash of everything that decides a score (the engine's checks machinery, the course's checks,
    references and course.yml) and the device."""
    digest = hashlib.sha256(f"device={device}\n".encode())
    for base, patterns, label in ((PACKAGE, ENGINE_FILES, "engine"), (course.root, COURSE_FILES, "course")):
        for pattern in patterns:
            path = base / pattern
            files = sorted(path.rglob("*.py")) if path.is_dir() else sorted(base.glob(pattern))
            for f in files:
                if f.is_file() and f.name != ALTERNATIVES_FILE:   # validate's, never a score's
                    name = f"{label}/{f.relative_to(base).as_posix()}"
                    digest.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise AutograderError("--device cuda: torch sees no CUDA device here",
                              hint="use --device auto (CUDA when present, else CPU) or --device cpu")
    return requested


@dataclass
class GradingContext:
    """What every grading thread shares (read-only once the batch starts). Not the catalog's
    :class:`autograder.catalog.Context`, which is what one check runs in."""

    course: Course
    sandbox: Sandbox | None                        # None only where nothing is graded (Gradescope's set-up)
    device: str
    fingerprint: str
    references: dict[str, Callable[..., Any]]      # exercise ID -> reference solution
    diagnoser: Diagnoser
    demos: dict[str, dict[str, str]] = field(default_factory=dict)   # see demo_cells()
    origin: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.sandbox is not None:
            settle_heap()


#: Whether this process's heap was settled (see settle_heap); a forked lane inherits the answer.
_SETTLED = threading.Event()


def settle_heap() -> None:
    """Once per process, where grading begins (a GradingContext with a sandbox: torch, the catalog and the
    references are loaded): what is loaded lives as long as the process, so the garbage collector stops
    walking it (``gc.freeze``). A full collection walked those 450,000 objects, some 100 ms, once every
    ten submissions; and a lane forked from here no longer copies the pages a collection would write to.
    Later objects are collected as always; what was garbage before the first context stays (a test run
    makes many contexts: only its first one freezes)."""
    if not _SETTLED.is_set():
        _SETTLED.set()
        gc.freeze()


def check_catalog(course: Course, assignments: set[str]) -> dict[str, Callable[..., Any]]:
    """Load the full catalog; every exercise to grade needs checks and a reference, else a clear error."""
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
                continue
            references[ex.id] = fn
    if gaps:
        raise AutograderError("the grader is incomplete: " + "; ".join(gaps),
                              hint="run autograder build and autograder validate")
    return references
