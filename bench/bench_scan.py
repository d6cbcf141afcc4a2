"""Benchmark the static scan of a submission's source, and what libcst's scope analysis would cost instead.

The scan (:mod:`autograder.grading.source_scan`) runs on every submission, on the trusted side. It
resolves names with its own scope rules on :mod:`ast`; libcst's ScopeProvider and QualifiedNameProvider
answer part of the same question. This measures both on the course's notebooks: the four release
notebooks and the four of samples/submissions/ada (a complete submission), the code the worker runs
(``Cell.code`` of the cells not skipped), best of ``--repeat`` runs, in milliseconds:

* ast parse: every cell through :func:`autograder.core.pyast.parse`;
* ast scan: :func:`scan_notebook` and ``exercise()`` for each exercise of the assignment, with its
  forbidden calls: all the scan costs a submission today;
* libcst parse: every cell through ``libcst.parse_module``;
* libcst names: parse, ``MetadataWrapper`` (which copies the tree), ScopeProvider and
  QualifiedNameProvider, and the qualified names of every Name and Attribute read: the floor of a
  scan on libcst, before any of the scan's own work (reachability, aliases through values,
  ``getattr``/``__import__``/``sys.modules``, the order cells run in, tampering).

    .venv/bin/python bench/bench_scan.py               # --repeat 10
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import catalog as C  # noqa: E402
from autograder.course.config import load_course  # noqa: E402
from autograder.grading.source_scan import scan_notebook  # noqa: E402
from autograder.course.notebook import code_cells, read_notebook  # noqa: E402
from autograder.core.pyast import parse  # noqa: E402


class _Names(cst.CSTVisitor):
    """Reads the qualified names of every Name and Attribute (QualifiedNameProvider computes them lazily)."""

    METADATA_DEPENDENCIES = (ScopeProvider, QualifiedNameProvider)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Name, cst.Attribute)):
            self.get_metadata(QualifiedNameProvider, node, set())
        return True


def _best_ms(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def _row(sources: list[str], exercises: list[tuple[str, tuple[str, ...]]], repeat: int) -> list[float]:
    """ast parse, ast scan, libcst parse, libcst names: best of ``repeat``, in ms."""
    def ast_scan() -> None:
        scan = scan_notebook(sources)
        for function, forbidden in exercises:
            scan.exercise(function, forbidden)

    return [_best_ms(lambda: [parse(s) for s in sources], repeat), _best_ms(ast_scan, repeat),
            _best_ms(lambda: [cst.parse_module(s) for s in sources], repeat),
            _best_ms(lambda: [MetadataWrapper(cst.parse_module(s)).visit(_Names()) for s in sources], repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"best of {args.repeat}, ms\n")
    print("| notebook | cells | characters | ast parse | ast scan | libcst parse | libcst names "
          "| libcst names / ast scan |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0.0, 0.0, 0.0, 0.0]
    for assignment in load_course().assignments:
        for path in (ROOT / "release" / assignment.id / assignment.notebook,
                     ROOT / "samples" / "submissions" / "ada" / assignment.notebook):
            if not path.exists():
                continue
            sources = [c.code for c in code_cells(read_notebook(path)) if not c.skipped]
            exercises = [(ex.function, tuple(C.SPECS[ex.id].forbidden) if ex.id in C.SPECS else ())
                         for ex in assignment.exercises]
            row = _row(sources, exercises, args.repeat)
            totals = [t + r for t, r in zip(totals, row)]
            print(f"| {path.relative_to(ROOT).as_posix()} | {len(sources)} | {sum(map(len, sources))} | "
                  + " | ".join(f"{ms:.1f}" for ms in row) + f" | {row[3] / row[1]:.0f}× |")
    print("| all | | | " + " | ".join(f"{ms:.1f}" for ms in totals) + f" | {totals[3] / totals[1]:.0f}× |")


if __name__ == "__main__":
    main()
