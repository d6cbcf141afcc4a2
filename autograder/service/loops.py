"""The service's long-lived loops go on whatever one round of them raises.

``autograder serve`` keeps threads that loop for as long as it runs: the course watch (:mod:`.live`), the LTI
passback (:mod:`.lti.outbox`), each worker's lease heartbeat (:mod:`.worker`) and the watch over the workers
(:mod:`.command`). A loop that dies says nothing and leaves the service working from stale state (the old due dates,
no more scores to the LMS, a job's lease running out under a live worker), so each runs its rounds through
:class:`Rounds`: a round that raises is logged, and the loop goes on to the next round. The first failure of each
kind (the exception's type) is logged whole, its traceback included; the same kind again is only counted, and the
count said at 10, 100, 1000 ... (a database away for an hour is not a line every two seconds).

What it trusts: nothing of the round (any ``Exception`` is caught; ``KeyboardInterrupt`` and ``SystemExit`` are
not exceptions of a round and go through).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: The logger every loop writes to (an unhandled record still reaches stderr: logging's last resort).
LOG = logging.getLogger("autograder.service.loops")
#: The longest exception text logged (a 5000-digit number's error says it whole).
TEXT_CHARS = 500


def kind_of(exc: BaseException) -> str:
    """An exception's kind as the log names it: its type's qualified name (the module too, where not a builtin)."""
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


class Rounds:
    """The rounds of one loop, named ``name`` in the log: :meth:`run` runs one, and a round that raises is logged
    once per kind (see the module's text) and answered with ``None``. ``failures`` counts each kind seen."""

    def __init__(self, name: str, log: logging.Logger | None = None):
        self.name = name
        self.log = log or LOG
        self.failures: dict[str, int] = {}
        self._lock = threading.Lock()       # (a loop's rounds may call failed() from more than one thread)

    def run(self, round_: Callable[..., T], *args: Any) -> T | None:
        """``round_(*args)``; None when it raised (logged, the loop goes on)."""
        try:
            return round_(*args)
        except Exception as exc:  # noqa: BLE001 - the rule of this module: a loop outlives every round
            self.failed(exc)
            return None

    def failed(self, exc: BaseException) -> None:
        """A round raised ``exc``: the first of its kind logged with its traceback, the others counted."""
        kind = kind_of(exc)
        with self._lock:
            seen = self.failures[kind] = self.failures.get(kind, 0) + 1
        if seen == 1:
            text = str(exc)
            text = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " ..."
            self.log.error("%s: a round failed with %s: %s (the loop goes on; this kind is logged once, then counted)",
                           self.name, kind, text, exc_info=(type(exc), exc, exc.__traceback__))
        elif _round_number(seen):
            self.log.warning("%s: a round failed with %s again: %d times so far", self.name, kind, seen)


def _round_number(n: int) -> bool:
    """10, 100, 1000, ...: when a repeated failure's count is said."""
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1
