"""No unstated requirement: every hidden check names what the student was told.

A hidden check may test only what its exercise's statement says. Each declares the requirement it
enforces (:class:`~autograder.catalog.Check`): ``statement=``, words of the statement, or ``same_as=``,
the public check that tests the same property on other inputs (which the student can run). This module
finds what the student reads for an exercise and lists every hidden check whose requirement is not there.

What the student reads for exercise X.Y, in the source notebook as the release shows it: its statement
cell (``exX_Y_statement``), its stub (``exX_Y`` outside the solution region: the signature and docstring)
and the notebook's other markdown cells that belong to no exercise (the introduction with the notebook's
conventions, explanations, the summary). Matching
ignores whitespace and Markdown's emphasis and code marks, so a quote need not copy the line breaks.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from autograder.config import Course, grade_id

_NOISE = re.compile(r"[\s*`$_\\]+")


def normalized(text: str) -> str:
    return _NOISE.sub("", text)


def _cells(path: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return []


_SOLUTION = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.S)


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return _SOLUTION.sub("", text)      # what the student gets is the stub: the solution is not a statement


def statement_texts(course: Course) -> dict[str, str]:
    """exercise ID -> everything its student reads about it (see the module docstring)."""
    out: dict[str, str] = {}
    for a in course.assignments:
        path = course.root / "source" / a.id / a.notebook
        if not path.is_file():
            path = course.root / "release" / a.id / a.notebook
        cells = _cells(path)
        own: dict[str, list[str]] = {e.id: [] for e in a.exercises}
        ids = {grade_id(e.id): e.id for e in a.exercises}
        ids.update({grade_id(e.id) + "_statement": e.id for e in a.exercises})
        shared: list[str] = []
        for cell in cells:
            gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id", "")
            if gid in ids:
                own[ids[gid]].append(_text(cell))
            elif cell.get("cell_type") == "markdown" and not gid.endswith("_statement"):
                shared.append(_text(cell))
        for e in a.exercises:
            out[e.id] = "\n".join(own[e.id] + shared)
    return out


def requirement_gaps(course: Course, exercises: list[str] | None = None) -> list[str]:
    """One line per hidden check whose requirement is missing or not found."""
    from autograder import catalog as C

    texts = statement_texts(course)
    gaps: list[str] = []
    for ex in course.exercises:
        if exercises and ex.id not in exercises:
            continue
        public = {c.name for c in C.checks_for(ex.id, (C.Audience.PUBLIC,))}
        said = normalized(texts.get(ex.id, ""))
        for c in C.checks_for(ex.id, (C.Audience.HIDDEN,)):
            if c.statement is None and c.same_as is None:
                gaps.append(f"{ex.id}/{c.name}: names no requirement (statement= words of the statement, or "
                            f"same_as= a public check of {ex.id})")
                continue
            if c.same_as is not None and c.same_as not in public:
                gaps.append(f"{ex.id}/{c.name}: same_as={c.same_as!r} is not a public check of {ex.id} "
                            f"(they are: {', '.join(sorted(public)) or 'none'})")
            if c.statement is not None and normalized(c.statement) not in said:
                gaps.append(f"{ex.id}/{c.name}: statement={c.statement!r} is not in what the student reads for "
                            f"{ex.id} (its statement cell, its stub, the notebook's other text)")
    return gaps
