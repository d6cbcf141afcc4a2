"""Which exercises a self-check runs: those an ID, an assignment or a function name names, else the notebook's.

A typo is answered with the closest name. The notebook's assignment is what the notebook says of itself (the
assignment the release wrote into its metadata, its cells' nbgrader ids), else its file name, else the exercise
functions it defines.

It trusts course.yml (already validated) and reads a notebook's file only through a bounded look
(:func:`autograder.course.notebook.scan_notebook`), never a parse; an unreadable one decides nothing.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.core.messages import say
from autograder.course.notebook import Bounds, assignments_of_cells, notebook_claims, said_in, scan_notebook
from autograder.selfcheck.results import Note

if TYPE_CHECKING:
    from autograder.course.config import Course


def resolve(course: Course, exercise: Any, namespace: dict[str, Any],
            notebook: str | None = None) -> tuple[list[Any], str, list[Note]]:
    """(exercises to run, a title, notes). Accepts an ID ("2.4"), an assignment or a function name."""
    if exercise is None:
        assignment = guess_assignment(course, namespace, notebook)
        if assignment is None:
            known = ", ".join(e.id for e in course.exercises)
            return [], "", [Note("error", say("selfcheck.no_functions", known=known))]
        return list(assignment.exercises), assignment.id, []
    key = str(exercise).strip()
    for a in course.assignments:
        if key in (a.id, a.module):
            return list(a.exercises), a.id, []
        for e in a.exercises:
            if key in (e.id, e.function):
                return [e], e.id, []
    options = [e.id for e in course.exercises] + [e.function for e in course.exercises]
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    ids = ", ".join(e.id for e in course.exercises)
    if close:
        return [], key, [Note("error", say("selfcheck.unknown_exercise_guess", key=repr(key), guess=close[0], ids=ids))]
    return [], key, [Note("error", say("selfcheck.unknown_exercise", key=repr(key), ids=ids))]


def guess_assignment(course: Course, namespace: dict[str, Any], notebook: str | None = None, nb: Any = None) -> Any:
    """The notebook's assignment: what it says of itself (the assignment the release wrote into its metadata,
    else its cells' nbgrader ids), read from ``nb`` or the notebook's file; else by its file name; else by
    the exercise functions it defines."""
    claimed = claimed_assignment(course, notebook, nb)
    if claimed is not None:
        return claimed
    if notebook:
        stem = Path(str(notebook)).stem
        for a in course.assignments:
            if stem == a.id or stem.startswith(a.id) or a.id in stem:
                return a
    best, best_share = None, 0.0
    for a in course.assignments:
        share = sum(callable(namespace.get(e.function)) for e in a.exercises) / len(a.exercises)
        if share > best_share:
            best, best_share = a, share
    return best


def claimed_assignment(course: Course, notebook: str | None, nb: Any) -> Any:
    """The assignment a notebook says it is (autograder.course.notebook.notebook_claims), or None: from the parsed
    ``nb``, else from the file at ``notebook`` (a bounded look at it, never a parse)."""
    declared: str | None = None
    grade_ids: set[str] = set()
    if isinstance(nb, dict):
        declared, grade_ids = said_in(nb)
    elif notebook:
        try:
            path = Path(str(notebook))
            if not path.is_file():
                return None
            shape = scan_notebook(path.read_bytes(), Bounds.of(course.limits), path.name)
        except Exception:  # noqa: BLE001 - unreadable or unsaved: the file name and the functions decide
            return None
        declared, grade_ids = shape.declared, set(shape.grade_ids)
    claimed, _how = notebook_claims(declared, assignments_of_cells(grade_ids, course))
    return next((a for a in course.assignments if a.id == claimed), None)
