"""Stopping student code that runs too long, in the student's own process (a JupyterLab kernel, or the
child of ``autograder check``), without killing it: the self-check names what looped and goes on.

:func:`time_limit` raises :class:`TimeLimitExceeded` in the thread that runs the code once ``seconds`` have
passed: with ``SIGALRM`` (an interval timer) where the code runs in the main thread of a POSIX process, as
a kernel's cells do; elsewhere with a timer thread that interrupts the main thread
(``_thread.interrupt_main``, turned into the same exception). It is a ``BaseException``, so the student's
``except Exception:`` cannot swallow it. Code stuck inside one C call (a huge matmul) ends that call first;
``autograder check``'s parent process still holds a clock of its own for that case.
"""
from __future__ import annotations

import _thread
import contextlib
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any


class TimeLimitExceeded(BaseException):
    """The code under :func:`time_limit` ran past its seconds (``where``: the student's function it was in)."""

    def __init__(self, seconds: float):
        super().__init__(f"still running after {seconds:g} s")
        self.seconds = seconds


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` inside the block after ``seconds`` (None or <= 0: no limit)."""
    if not seconds or seconds <= 0:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        with _alarm(seconds):
            yield
    else:
        with _interrupt(seconds):
            yield


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def ring(_signum: int, _frame: Any) -> None:
        raise TimeLimitExceeded(seconds)

    previous = signal.signal(signal.SIGALRM, ring)
    start = time.monotonic()
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)[0]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:      # a limit around this one keeps running, less the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


@contextlib.contextmanager
def _interrupt(seconds: float) -> Iterator[None]:
    fired = threading.Event()
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            fired.set()
            _thread.interrupt_main()

    if threading.current_thread() is not threading.main_thread():
        yield          # only the main thread can be interrupted: no limit here
        return
    watcher = threading.Thread(target=watch, name="autograder-time-limit", daemon=True)
    watcher.start()
    try:
        yield
    except KeyboardInterrupt:
        if fired.is_set():
            raise TimeLimitExceeded(seconds) from None
        raise
    finally:
        done.set()
        watcher.join(1)


def stopped_in(exc: BaseException, functions: set[str], namespace: dict[str, Any] | None = None) -> str | None:
    """The innermost of ``functions`` (the student's exercise functions) that was running when ``exc`` was
    raised, by its traceback: a frame of that name whose globals are the notebook's ``namespace`` (or, without
    one, whose code comes from a cell); None when none was (the loop was in the cell itself)."""
    found = None
    try:
        for frame, _line in traceback.walk_tb(exc.__traceback__):
            name = frame.f_code.co_name
            ours = frame.f_globals is namespace if namespace is not None else \
                frame.f_code.co_filename.startswith("<cell")
            if name in functions and ours:
                found = name
    except Exception:  # noqa: BLE001 - a traceback is best effort
        return found
    return found

