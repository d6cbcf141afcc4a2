"""Helpers shared by test modules (pytest puts tests/ on sys.path: ``from support import ...``)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from autograder import catalog as C
from autograder.course.config import Course
from autograder.authoring.validate import solution_for

#: The repository: the course and the engine, side by side.
ROOT = Path(__file__).resolve().parent.parent

BOTH = (C.Audience.PUBLIC, C.Audience.HIDDEN)


def grade(course: Course, exercise_id: str, fn, audiences=BOTH, seed: int = 0) -> C.ExerciseResult:
    """Score ``fn`` as a student's answer to one exercise, in-process, with diagnosis (the reference given, as
    grading gives it: a diagnosis weighs the known mistakes against it, public checks' failures too)."""
    _, ex = course.exercise(exercise_id)
    reference = solution_for(course, exercise_id)
    return C.run_exercise(ex, C.in_process_runner({ex.function: fn}),
                          audiences=audiences, tolerances=course.tolerances, seed_parts=("test", seed),
                          reference=reference, diagnoser=C.LiveDiagnoser(course.tolerances))


def failed(result: C.ExerciseResult) -> dict[str, C.CheckResult]:
    return {r.check: r for r in result.checks if not r.passed}


def load_script(path: Path) -> ModuleType:
    """Import a script that is not part of a package (samples/make_samples.py)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The sample-submission generator, shared by the grading and export tests.
make_samples = load_script(ROOT / "samples" / "make_samples.py")


def running(pid: int) -> bool:
    """A process that runs (a zombie waiting for its parent to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_job(engine, job: int, state: str = "running", seconds: float = 120, poll: float = 0.05) -> str:
    """Poll the service's database until ``job`` is in ``state`` or ``seconds`` have passed; its last state."""
    import time

    from sqlalchemy import select

    from autograder.service import tables

    deadline = time.monotonic() + seconds
    while True:
        with engine.connect() as conn:
            now = conn.execute(select(tables.Job.state).where(tables.Job.id == job)).scalar_one()
        if now == state or time.monotonic() >= deadline:
            return now
        time.sleep(poll)
