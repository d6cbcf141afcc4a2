"""A submission's code cells as the grader runs them: plain Python, the release's unchanged demo cells
skipped (they only print and plot), oversized cells recorded as not run.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from autograder.course.config import Course
from autograder.core.messages import say
from autograder.course.notebook import (
    IPYTHON_SUBMISSION_LIMIT,
    IPYTHON_WORK_LIMIT,
    Cell,
    cell_grade_id,
    cell_source,
    ipython_lines,
    ipython_work,
    needs_ipython,
    to_python,
)


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
                    cells[gid] = cell_source(cell)
        except Exception:  # noqa: BLE001 - no skipping is always correct, only slower
            continue
        out[a.id] = cells
    return out


#: Cell sources longer than this are transformed afresh each time rather than remembered.
_CACHED_SOURCE_CHARS = 64 * 1024


@functools.lru_cache(maxsize=4096)
def _plain_python(source: str) -> tuple[str, str | None]:
    return to_python(source)


def submission_cells(nb: Any, demos: dict[str, str], max_cell_bytes: int = 256 * 1024) -> list[Any]:
    """:func:`autograder.course.notebook.code_cells`, with the unchanged demo cells skipped (see demo_cells()).

    IPython's input transformer costs milliseconds a cell, and most cells of a
    batch are the release's own text or the same correct solution: each distinct
    source is transformed once per process (a pure function of the text), and a
    skipped demo cell is never transformed at all. A cell over ``max_cell_bytes``
    (``limits.cell_kb``) is neither parsed nor run: parsing megabytes of one
    expression costs the trusted side minutes and gigabytes. Nor is a cell whose
    IPython rewriting would cost more than what is left of the submission's budget
    (:data:`autograder.course.notebook.IPYTHON_SUBMISSION_LIMIT`; the cell's own is
    :data:`~autograder.course.notebook.IPYTHON_WORK_LIMIT`).
    """
    out = []
    work_left = IPYTHON_SUBMISSION_LIMIT      # IPython's transform, bounded over the whole submission too
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source, gid = cell_source(cell), cell_grade_id(cell)
        if len(source) > max_cell_bytes or len(source.encode("utf-8", errors="replace")) > max_cell_bytes:
            said = say("sandbox.cell_too_large", kib=max_cell_bytes // 1024)
            out.append(Cell(index, gid, "", "", said.en, said))
        elif gid in demos and source == demos[gid]:
            out.append(Cell(index, gid, source, "", DEMO_SKIPPED))
        else:
            work = ipython_work(source)
            if work > min(work_left, IPYTHON_WORK_LIMIT) and needs_ipython(source):
                said = say("notebook.ipython_too_costly", lines=ipython_lines(source))
                out.append(Cell(index, gid, source, "", said.en, said))
                continue
            work_left -= work
            code, skipped = _plain_python(source) if len(source) <= _CACHED_SOURCE_CHARS else to_python(source)
            out.append(Cell(index, gid, source, code, skipped))
    return out
