"""The processes a test or a benchmark started, from /proc: who descends from whom, who is still running."""
from __future__ import annotations

from pathlib import Path


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    return {p for p, parent in _parents().items() if parent == pid}


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    parents = _parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie has ended)."""
    out = set()
    for p in pids:
        try:
            if (Path("/proc") / str(p) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.add(p)
        except OSError:
            continue
    return out
