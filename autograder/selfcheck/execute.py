"""A saved notebook's code cells, run as a kernel started next to the notebook would run them.

In a fresh namespace, in the notebook's folder: a cell that raises is noted and skipped, one still running past
its time limit is stopped and named (the student's function it was stopped in too), and the cells after it run as
usual; once the notebook's share of the run's time is spent, the cells left are skipped and named.

It runs the student's own notebook on their machine (``autograder check``'s child): no sandbox, only time
limits (:mod:`autograder.selfcheck.timelimit`), and the cells' output and warnings swallowed.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.core.messages import Msg, say
from autograder.course.notebook import code_cells
from autograder.inside.namespace import fresh_namespace
from autograder.selfcheck.results import Note
from autograder.selfcheck.timelimit import TimeLimitExceeded, stopped_in, time_limit


#: Time kept, out of the notebook's share, for each exercise's own cell still to run (where the student's
#: function is defined; a definition takes no time): a stopped cell never leaves an exercise undefined.
ANSWER_CELL_SECONDS = 1.0


@dataclass(frozen=True)
class NotebookTime:
    """The notebook's share of ``limits.submission_seconds``: ``seconds`` in all, until ``deadline``
    (time.monotonic()); the other ``checks`` seconds are the checks' own."""

    deadline: float
    seconds: float
    checks: float


def execute_notebook(nb: Any, cwd: Path, on_cell: Any = None, seconds: float | None = None,
                     functions: set[str] | None = None, demo_seconds: float | None = None,
                     share: NotebookTime | None = None, answers: set[str] | None = None,
                     notes: list[Note] | None = None) -> tuple[dict[str, Any], list[Note]]:
    """Run the notebook's code cells in a fresh namespace, in the notebook's folder.

    A cell that raises is reported and skipped, as a student re-running cells would see; a cell still
    running after ``seconds`` (one of the chapter's demonstration cells: ``demo_seconds``, its own budget:
    a training run takes longer than any call) is stopped and named (a demonstration cell as such, and
    the student's function among ``functions`` it was stopped in), and the cells after it run as usual.
    With ``share`` (the notebook's share of the whole run's time) no cell runs past what is left of it, less
    ANSWER_CELL_SECONDS for each exercise's own cell still to come (``answers``: their nbgrader grade ids), and
    once it is spent the cells left are skipped and named. Output and warnings of the cells are swallowed: the
    table is the output. ``on_cell`` is told each cell (a label, its time limit and what set it: "call",
    "demo" or "share") before it runs, and None after. The notes go to ``notes`` as they come.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")     # plt.show() must not open windows
    namespace = fresh_namespace()
    notes = notes if notes is not None else []
    answers = answers or set()
    old_cwd = os.getcwd()
    sink = io.StringIO()
    cells = code_cells(nb)
    if on_cell is not None and any("matplotlib" in c.code for c in cells):
        with contextlib.suppress(Exception):    # its first import builds a font cache: not the cell's time
            import matplotlib.pyplot  # noqa: F401
    answers_left = sum(1 for c in cells if not c.skipped and c.code.strip() and _grade_id(c) in answers)
    spent: list[str] = []        # the cells skipped once the notebook's share was spent
    # As in a kernel started next to the notebook: its folder is the cwd and importable.
    sys.path.insert(0, str(cwd))
    try:
        os.chdir(cwd)
        for cell in cells:
            if cell.skipped:
                notes.append(Note("info", say("selfcheck.cell_not_run", cell=cell.index + 1, detail=cell.skipped)))
                continue
            if not cell.code.strip():
                continue
            if _grade_id(cell) in answers:
                answers_left -= 1
            limit = _cell_budget(cell, seconds, demo_seconds, share, answers_left)
            if limit is None:
                spent.append(str(cell.index + 1))
                continue
            budget, why = limit
            _run_cell(cell, namespace, sink, budget, why, on_cell=on_cell, functions=functions, share=share,
                      notes=notes)
            sink.seek(0)
            sink.truncate()
    finally:
        os.chdir(old_cwd)
        if str(cwd) in sys.path:
            sys.path.remove(str(cwd))
    if spent and share is not None:
        notes.append(Note("error", say("selfcheck.cells_skipped_time", cells=", ".join(spent),
                                       share=f"{share.seconds:.3g}", checks=f"{share.checks:.3g}")))
    return namespace, notes


def _cell_budget(cell: Any, seconds: float | None, demo_seconds: float | None, share: NotebookTime | None,
                 answers_left: int) -> tuple[float | None, str] | None:
    """A cell's time limit and what set it ("call", "demo" or "share"); None once the notebook's share is spent."""
    demo = _is_demo(cell)
    budget, why = (demo_seconds, "demo") if demo and demo_seconds else (seconds, "call")
    if share is not None:
        left = share.deadline - time.monotonic() - answers_left * ANSWER_CELL_SECONDS
        if left <= 0:
            return None
        if budget is None or left < budget:
            budget, why = left, "share"
    return budget, why


def _run_cell(cell: Any, namespace: dict[str, Any], sink: io.StringIO, budget: float | None, why: str, *,
              on_cell: Any, functions: set[str] | None, share: NotebookTime | None, notes: list[Note]) -> None:
    """Run one code cell in ``namespace`` within ``budget``, its output swallowed; a note where it raised or was
    stopped. ``on_cell`` is told the cell before it runs, and None after."""
    if on_cell is not None:
        on_cell(_cell_label(cell), budget, why)
    try:
        code = compile(cell.code, f"<cell {cell.index}>", "exec")
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                time_limit(budget):
            warnings.simplefilter("ignore")
            exec(code, namespace)  # the student's own notebook, on their machine
    except TimeLimitExceeded as exc:
        notes.append(Note("error", _cell_stopped(cell, exc, functions or set(), budget or 0, why, share)))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - report and go on, as a kernel would
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        notes.append(Note("info", say("selfcheck.cell_raised", cell=cell.index + 1,
                                      kind=type(exc).__name__, detail=first)))
    finally:
        if on_cell is not None:
            on_cell(None)


def _cell_stopped(cell: Any, exc: BaseException, functions: set[str], seconds: float, why: str = "call",
                  share: NotebookTime | None = None) -> Msg:
    """What a stopped cell says: its number and first line, whether it is one of the chapter's
    demonstration cells (locked, not an exercise's), and the student's function it was stopped in."""
    _kind, number, line = _cell_label(cell)
    where = stopped_in(exc, functions)        # the cells were compiled as "<cell N>"
    if why == "share" and share is not None:
        # Stopped by the notebook's share of the time, not by its own limit: no loop is guessed.
        return say("selfcheck.cell_out_of_time", cell=number, first=line, seconds=f"{seconds:.3g}",
                   where=say("selfcheck.demo_stopped_in", function=where) if where else "",
                   share=f"{share.seconds:.3g}", checks=f"{share.checks:.3g}")
    if _is_demo(cell):
        # The chapter's own experiment ran past its budget: it calls the student's functions many times, so the
        # one it was in says nothing of a loop (said so, not guessed).
        return say("selfcheck.demo_stopped", cell=number, first=line, seconds=f"{seconds:g}",
                   where=say("selfcheck.demo_stopped_in", function=where) if where else "")
    first: str | Msg = line
    if where:
        return say("selfcheck.cell_stopped_in", cell=number, first=first, seconds=f"{seconds:g}", function=where)
    return say("selfcheck.cell_stopped", cell=number, first=first, seconds=f"{seconds:g}")


def _grade_id(cell: Any) -> str:
    return getattr(cell, "grade_id", None) or ""


def _is_demo(cell: Any) -> bool:
    """One of the chapter's demonstration cells: locked by the release, of no exercise (a training run, an
    experiment), not a cell the student writes."""
    gid = _grade_id(cell)
    return bool(gid) and not gid.startswith("ex")


def _cell_label(cell: Any) -> tuple[str, str, str]:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    # Counted from 1, text cells included, as a student counts them in JupyterLab.
    return ("cell", str(cell.index + 1), first[:60] + ("…" if len(first) > 60 else ""))
