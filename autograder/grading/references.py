"""The reference solutions: ``solutions/<module>.py`` beside course.yml, written by ``autograder build``
from source/.

One place loads them, for grading, validation, the self-check data and nbgrader's path, and
one error names what is missing. They are imported from the course's own folder (never from
wherever the engine is installed) as ``autograder_course.solutions.<module>``. Never shipped to
students.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from autograder.course.config import Assignment, Course
from autograder.core.errors import AutograderError

#: The package the references are imported under (a sibling of the course's checks' package).
SOLUTIONS_PACKAGE = "autograder_course.solutions"


class MissingReference(AutograderError):
    """solutions/ lacks a module or a function the course names."""


def module_name(assignment: Assignment) -> str:
    """``autograder_course.solutions.qkv_attention``: the name one assignment's references are imported as."""
    return f"{SOLUTIONS_PACKAGE}.{assignment.module}"


def reference_module(course: Course, assignment: Assignment) -> ModuleType:
    """``solutions/<module>.py`` of one assignment of ``course``, imported once from the course's folder."""
    name = module_name(assignment)
    path = course.root / "solutions" / f"{assignment.module}.py"
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == str(path):
        return module
    if not path.is_file():
        raise MissingReference(f"{path} is missing", hint="run autograder build")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:     # (a .py file always has a loader)
        raise MissingReference(f"{path} cannot be imported (no loader for it)", hint="run autograder build")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the course's code: whatever its import raises, it cannot be used
        del sys.modules[name]
        raise MissingReference(f"{path} cannot be imported ({type(exc).__name__}: {exc})",
                               hint="run autograder build") from None
    return module


def reference(course: Course, exercise_id: str) -> Callable[..., Any]:
    """The reference solution of one exercise."""
    assignment, exercise = course.exercise(exercise_id)
    fn = getattr(reference_module(course, assignment), exercise.function, None)
    if fn is None:
        raise MissingReference(f"solutions/{assignment.module}.py defines no {exercise.function} "
                               f"(exercise {exercise_id})", hint="run autograder build")
    return cast("Callable[..., Any]", fn)
