"""Where the time goes, measured without being woven through the work: one small object.

Code that wants its time accounted for takes a :class:`Stopwatch` and wraps a section in
``with timer.section("compare"):``; the default, :data:`OFF`, measures nothing. Grading passes one per
submission and turns its sections into the result's flat profile (:mod:`autograder.grading.timing`);
bench/ reports it. Nothing ever decides a score from a stopwatch.
"""
from __future__ import annotations

import time
from types import TracebackType


class Stopwatch:
    """Seconds per named section, accumulated over many entries. A section entered again while it is open
    (an expected value that computes a truth inside it) counts once: its outer entry's seconds."""

    __slots__ = ("seconds", "enabled", "open")

    def __init__(self, enabled: bool = True):
        self.seconds: dict[str, float] = {}
        self.enabled = enabled
        self.open: set[str] = set()        # the sections entered and not left yet

    def add(self, section: str, seconds: float) -> None:
        if self.enabled:
            self.seconds[section] = self.seconds.get(section, 0.0) + seconds

    def since(self, section: str, start: float) -> None:
        """Add the time from ``start`` (a ``time.perf_counter()`` reading) to now."""
        if self.enabled:
            self.add(section, time.perf_counter() - start)

    def section(self, name: str) -> _Section:
        """``with timer.section(name):`` adds the block's seconds to ``name`` (a plain object, not a
        generator: the checks enter sections hundreds of times per submission)."""
        return _Section(self, name)


class _Section:
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: Stopwatch, name: str):
        self.timer, self.name, self.start = timer, name, -1.0

    def __enter__(self) -> None:
        if self.timer.enabled and self.name not in self.timer.open:     # else OFF, or an inner entry
            self.timer.open.add(self.name)
            self.start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.start >= 0:
            self.timer.open.discard(self.name)
            self.timer.add(self.name, time.perf_counter() - self.start)


#: The stopwatch of code nobody times: measures nothing.
OFF = Stopwatch(enabled=False)
