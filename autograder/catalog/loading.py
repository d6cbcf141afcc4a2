"""Loading a course's catalog: each assignment's checks.py, hidden.py and mistakes.py, imported from the
course's folders as ``autograder_course.<module>.checks`` and so on.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from autograder.catalog.declarations import (ALTERNATIVES, CHECKS, MISTAKES, NEAR_ANSWERS, NOT_GRADED, PRECISIONS,
                                             SPECS)
from autograder.course.config import Course, load_course
from autograder.course.files import ALTERNATIVES_FILE, HIDDEN_FILE, MISTAKES_FILE, PUBLIC_FILE
from autograder.core.errors import ConfigError


#: The package the course's own modules are imported under: ``autograder_course.<module>.checks``,
#: ``.hidden``, ``.mistakes`` (one subpackage per assignment, its folder the assignment's
#: :meth:`~autograder.course.config.Course.content_dir`), so that a course's files import each other
#: relatively (``from .checks import ...``, ``from ..padding_masks.checks import ...``).
COURSE_PACKAGE = "autograder_course"


#: (course root, hidden, mistakes) of what is loaded now.
_LOADED: dict[str, Any] = {}


def _course_package(course: Course) -> None:
    """Make ``autograder_course`` and one subpackage per assignment importable from the course's folders."""
    root = types.ModuleType(COURSE_PACKAGE, "The course being graded (loaded by autograder.catalog).")
    root.__path__ = []
    root.__file__ = str(course.root / "course.yml")
    sys.modules[COURSE_PACKAGE] = root
    for a in course.assignments:
        folder = course.content_dir(a)
        package = types.ModuleType(f"{COURSE_PACKAGE}.{a.module}", f"Checks of assignment {a.id}.")
        package.__path__ = [str(folder)]
        package.__package__ = package.__name__
        sys.modules[package.__name__] = package
        setattr(root, a.module, package)


def _forget_course() -> None:
    # The references too (autograder.grading.references imports them as autograder_course.solutions.*).
    for name in [n for n in sys.modules if n == COURSE_PACKAGE or n.startswith(COURSE_PACKAGE + ".")]:
        del sys.modules[name]
    CHECKS.clear()
    MISTAKES.clear()
    ALTERNATIVES.clear()
    SPECS.clear()
    NEAR_ANSWERS.clear()
    NOT_GRADED.clear()
    PRECISIONS.clear()
    _LOADED.clear()


def load_catalog(course: Course | None = None, *, hidden: bool, mistakes: bool, alternatives: bool = False) -> None:
    """Import the course's check modules: each assignment's public checks, and where asked (and present:
    the instructor's course has them, a student's never) its hidden checks, known mistakes and correct
    alternatives.

    ``course``: a :class:`~autograder.course.config.Course` (default: :func:`~autograder.course.config.load_course`).
    Loading another course's catalog first forgets the one loaded before.
    """
    course = course if course is not None else load_course()
    root = str(course.root)
    if _LOADED.get("root") not in (None, root):
        _forget_course()
    if _LOADED.get("root") is None:
        _course_package(course)
        _LOADED.update(root=root, hidden=False, mistakes=False, alternatives=False)
    wanted = [PUBLIC_FILE] + ([HIDDEN_FILE] if hidden else []) + ([MISTAKES_FILE] if mistakes else []) \
        + ([ALTERNATIVES_FILE] if alternatives else [])
    for a in course.assignments:
        folder = course.content_dir(a)
        for file in wanted:
            if file != PUBLIC_FILE and not (folder / file).is_file():
                continue      # a student's course: no hidden checks, no mistakes
            if not (folder / file).is_file():
                raise ConfigError(f"{folder / file}: missing: assignment {a.id} declares its public checks there",
                                  hint="every assignment folder has a checks.py "
                                       "(see docs/instructor/exercises.md: adding an exercise)")
            importlib.import_module(f"{COURSE_PACKAGE}.{a.module}.{file.removesuffix('.py')}")
    _LOADED["hidden"] = _LOADED["hidden"] or hidden
    _LOADED["mistakes"] = _LOADED["mistakes"] or mistakes
    _LOADED["alternatives"] = _LOADED["alternatives"] or alternatives


def hidden_available(course: Course | None = None) -> bool:
    """Whether the course has hidden checks here (the instructor's course; never a student's)."""
    course = course if course is not None else load_course()
    return any((course.content_dir(a) / HIDDEN_FILE).is_file() for a in course.assignments)
