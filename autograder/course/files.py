"""Where a course's files are: which course.yml is read, its folder, and the names of an assignment's files.

course.yml is ``--course``'s, else the nearest one upward (as git finds its repository), else the one an installed
student bundle carries; an assignment's folder holds its public checks, hidden checks, known mistakes and
alternatives, each in a file of its own.

It reads nothing but ``$AUTOGRADER_COURSE`` and whether a file is there: what course.yml says is
:mod:`autograder.course.config`'s.
"""
from __future__ import annotations

import os
from pathlib import Path

from autograder.core.errors import ConfigError

#: The engine's own folder (the ``autograder`` package). The course it grades is found, never assumed:
#: see :func:`course_file`.
PACKAGE = Path(__file__).resolve().parent.parent     # the autograder package (this module is in course/)
#: The file that marks a course's top folder (with source/, release/, solutions/ beside it).
COURSE_NAME = "course.yml"
#: The files of an assignment's folder (``source/<id>/``), by what they declare: public checks, hidden
#: checks, known mistakes. Only PUBLIC_FILE ever ships to students (autograder.authoring.bundle.course_files).
PUBLIC_FILE, HIDDEN_FILE, MISTAKES_FILE = "checks.py", "hidden.py", "mistakes.py"
#: Correct alternative implementations (``autograder validate`` grades each: every one must score full
#: marks); the instructor's only, like hidden.py and mistakes.py.
ALTERNATIVES_FILE = "alternatives.py"
COURSE_FILES = frozenset({PUBLIC_FILE, HIDDEN_FILE, MISTAKES_FILE, ALTERNATIVES_FILE})
#: Where an installed student bundle carries its course (course.yml and each assignment's public checks).
PACKAGED_COURSE = PACKAGE / "data" / COURSE_NAME


def find_course(start: str | Path | None = None) -> Path | None:
    """The nearest course.yml in ``start`` (default: the current folder) or a folder above it, as git
    finds its repository; None when there is none."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / COURSE_NAME
        if candidate.is_file():
            return candidate
    return None


def course_file(start: str | Path | None = None) -> Path:
    """The course.yml to read, the first of:

    1. ``$AUTOGRADER_COURSE`` (set by ``autograder --course PATH``: a course.yml or its folder);
    2. the nearest course.yml from the current folder (or ``start``) upward;
    3. the course an installed student bundle carries inside the package.

    Raises :class:`ConfigError` when there is none.
    """
    override = os.environ.get("AUTOGRADER_COURSE")
    if override:
        path = Path(override)
        return path / COURSE_NAME if path.is_dir() else path
    found = find_course(start)
    if found is not None:
        return found
    if PACKAGED_COURSE.is_file():
        return PACKAGED_COURSE
    here = Path(start if start is not None else os.getcwd()).resolve()
    raise ConfigError(f"no {COURSE_NAME} in {here} or any folder above it",
                      hint="run autograder inside a course's folder, or name one: autograder --course PATH")


def course_root(start: str | Path | None = None) -> Path:
    """The folder of :func:`course_file`: where source/, release/ and solutions/ are."""
    return course_file(start).resolve().parent
