"""Where the time goes, measured without being woven through the work: one small object.

Code that wants its time accounted for takes a :class:`Stopwatch` and wraps a section in
``with timer.section("compare"):``; the default, :data:`OFF`, measures nothing. Grading passes one per
submission and turns its sections into the result's flat profile (:mod:`autograder.grading.timing`);
bench/ reports it. Nothing ever decides a score from a stopwatch.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """Seconds per named section, accumulated over many entries."""

    __slots__ = ("seconds", "enabled")

    def __init__(self, enabled: bool = True):
        self.seconds: dict[str, float] = {}
        self.enabled = enabled

    def add(self, section: str, seconds: float) -> None:
        if self.enabled:
            self.seconds[section] = self.seconds.get(section, 0.0) + seconds

    def since(self, section: str, start: float) -> None:
        """Add the time from ``start`` (a ``time.perf_counter()`` reading) to now."""
        if self.enabled:
            self.add(section, time.perf_counter() - start)

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)


#: The stopwatch of code nobody times: measures nothing.
OFF = Stopwatch(enabled=False)
