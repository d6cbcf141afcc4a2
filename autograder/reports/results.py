"""Results read back from an output folder: every result file, and the newest of each student's
assignment (what the gradebook and the LMS files report).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def is_graded(result: dict[str, Any]) -> bool:
    return str(result.get("status", "")).startswith("graded")


def newest_results(results: Iterable[dict[str, Any]]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """One result per (student, assignment): a graded one before a failure, then the latest."""
    chosen: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        key = (str(r.get("student") or ""), str(r.get("assignment") or ""))
        old = chosen.get(key)
        rank = (is_graded(r), str(r.get("graded_at") or ""))
        if old is None or rank > (is_graded(old), str(old.get("graded_at") or "")):
            chosen[key] = r
    return {r["key"]: (student, assignment, r) for (student, assignment), r in chosen.items()}


def load_results(out_dir: Path) -> list[dict[str, Any]]:
    """Every result file in ``OUT/results/``."""
    from autograder.reports.files import load_result  # noqa: PLC0415 - loads pydantic

    found = []
    for path in sorted((Path(out_dir) / "results").glob("*.json")):
        result = load_result(path)
        if result is not None:
            found.append(result)
    return found
