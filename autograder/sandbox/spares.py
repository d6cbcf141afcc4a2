"""The sandbox's spare worker: one worker forked ahead, by a thread of its own, for the next submission.

:class:`~autograder.sandbox.host.Sandbox` holds one :class:`Spares` and says when to keep a spare
(``Sandbox.keep_spare``); each spawn takes the spare and orders the next. A spare is a worker like any other,
forked from the same template with the same configuration by the sandbox's own fork, never given cells
before it is taken; this module only decides when one is forked and whether the one kept fits: made for the
same limits, after the template imported everything where a complete worker is asked for, by the template
still running, and alive. It trusts nothing a worker sent (it reads none).
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from autograder.course.config import Limits
from autograder.sandbox.processes import WorkerProcess

log = logging.getLogger(__name__)

#: How long a spawn waits for the spare being forked before forking a worker itself.
SPARE_WAIT_SECONDS = 10.0


class Spares:
    """The spare worker of one sandbox, and the thread that forks it.

    ``fork(label, limits, complete)``: the sandbox's fork of a worker from its template; ``retire(proc)``: how it
    kills one; ``template_pid()``: its template's pid now; ``closed()``: whether it is closed.
    """

    def __init__(self, fork: Callable[[str, Limits, bool], WorkerProcess], retire: Callable[[WorkerProcess], None],
                 template_pid: Callable[[], int], closed: Callable[[], bool]):
        self._fork, self._retire, self._template_pid, self._closed = fork, retire, template_pid, closed
        self.on = False
        self.lock = threading.Condition()
        self.spare: tuple[Limits, WorkerProcess] | None = None   # and the limits it was made for
        self.busy = False           # a spare is being forked
        self._orders: queue.Queue[tuple[Limits, bool] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.when_closed = False    # the next spare ordered when a worker closes (see Sandbox.keep_spare)
        self.used = 0               # spares taken

    def keep(self, when_closed: bool = False) -> None:
        """From now on keep one worker forked ahead (see ``Sandbox.keep_spare``)."""
        with self.lock:
            if self.on or self._closed():
                return
            self.on = True
            self.when_closed = when_closed
            self._thread = threading.Thread(target=self._make, name="sandbox-spare", daemon=True)
            self._thread.start()

    def drop(self) -> None:
        """Keep no spare any more: the thread ends and the spare is killed (see ``Sandbox.drop_spare``)."""
        with self.lock:
            thread, self._thread = self._thread, None
            self.on = False
        if thread is not None:
            self._orders.put(None)
            thread.join(timeout=70)
        with self.lock:
            spare, self.spare = self.spare, None
            self.busy = False
        if spare is not None:
            self._retire(spare[1])

    def _make(self) -> None:
        while True:
            order = self._orders.get()
            if order is None:
                return
            limits, complete = order
            proc = None
            try:
                if not self._closed():
                    proc = self._fork("spare", limits, complete)
                    proc.spare = self._template_pid()
            except Exception as exc:  # noqa: BLE001 - no spare: the next spawn forks its worker itself
                log.debug("sandbox: no spare worker (%s)", exc)
            with self.lock:
                self.busy = False
                if proc is not None:
                    if self._closed() or not self.on or self.spare is not None:
                        self._retire(proc)
                    else:
                        self.spare = (limits, proc)
                self.lock.notify_all()

    def take(self, limits: Limits, complete: bool) -> WorkerProcess | None:
        """The spare, where it was made for these limits (waiting for one being forked) and, for a ``complete``
        worker, after the template imported everything; else None (a spare that does not fit is retired)."""
        with self.lock:
            self.lock.wait_for(lambda: not self.busy, timeout=SPARE_WAIT_SECONDS)
            spare, self.spare = self.spare, None
        if spare is None:
            return None
        proc = spare[1]
        if spare[0] != limits or (proc.partial and complete) or proc.spare != self._template_pid() or proc.exited():
            self._retire(proc)      # made for other limits, before the template was complete or restarted; dead
            return None
        self.used += 1
        return proc

    def order(self, limits: Limits, complete: bool) -> None:
        """Fork the next spare, for these limits, unless one is kept or being forked already."""
        with self.lock:
            if not self.on or self._closed() or self.busy or self.spare is not None:
                return
            self.busy = True
        self._orders.put((limits, complete))
