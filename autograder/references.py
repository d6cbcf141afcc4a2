"""The reference solutions: ``solutions/<module>.py``, written by ``autograder build`` from source/.

One place loads them, for grading, validation, the self-check data and nbgrader's path, and
one error names what is missing. Never shipped to students.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

from .config import Assignment, Course
from .errors import AutograderError


class MissingReference(AutograderError):
    """solutions/ lacks a module or a function the course names."""


def reference_module(assignment: Assignment) -> ModuleType:
    """``solutions.<module>`` of one assignment."""
    try:
        return importlib.import_module(f"solutions.{assignment.module}")
    except ImportError as exc:
        raise MissingReference(f"solutions/{assignment.module}.py cannot be imported ({exc})",
                               hint="run autograder build") from None


def reference(course: Course, exercise_id: str) -> Callable[..., Any]:
    """The reference solution of one exercise."""
    assignment, exercise = course.exercise(exercise_id)
    fn = getattr(reference_module(assignment), exercise.function, None)
    if fn is None:
        raise MissingReference(f"solutions/{assignment.module}.py defines no {exercise.function} "
                               f"(exercise {exercise_id})", hint="run autograder build")
    return fn
