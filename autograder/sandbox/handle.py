"""The grader's handle on one submission's worker: its life (forked, ready, given the cells, stopped, within
the submission's budget), then the checks' calls (a checks ``Runner``), which :mod:`autograder.sandbox.calls`
sends and reads. A worker killed by a call is forked again and given the cells again.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from autograder.course.config import Limits
from autograder.core.messages import Msg, say
from autograder.course.notebook import Cell
from autograder.inside.probes import Reply, Request
from autograder.sandbox.affinity import follow, release, spin_seconds

from autograder.sandbox.calls import Calls
from autograder.sandbox.processes import SETUP_SECONDS, SpawnFailed, WorkerProcess
from autograder.inside.protocol import FrameError, recv_frame, send_frame
from autograder.sandbox.roles import SandboxSide
from autograder.sandbox.replies import (
    SMALL_HEADER,
    CellOutcome,
    cell_outcome,
    cell_said,
    describe_exit,
    exit_message,
    header_text,
    said_reply,
)
from autograder.core.stopwatch import Stopwatch


class _ImportMissed(Exception):
    """A worker forked from the incomplete template needed a module it did not hold (see missed_import)."""


class WorkerHandle:
    """The sandboxed run of one submission: cell outcomes, then calls (a checks ``Runner``)."""

    def __init__(self, sandbox: SandboxSide, cells: list[Cell], label: str, limits: Limits,
                 meanwhile: Callable[[], None] | None = None):
        self.label = label
        #: Trusted work to do once while the worker runs the cells (see Sandbox.open); its seconds are the
        #: timer's ``meanwhile``, not part of ``cells``.
        self._meanwhile = meanwhile
        self.cells: list[CellOutcome] = []
        self.restarts = 0      # re-forks after a call killed the worker
        self.spawns = 0        # forks in all, cells' re-runs included
        self._sandbox = sandbox
        self._limits = limits
        self._source = list(cells)
        #: When the submission's budget ends (``time.monotonic()``): no call or cell runs past it.
        self.deadline = time.monotonic() + self._limits.submission_seconds
        self._bad: dict[int, CellOutcome] = {}       # cells that time out or crash: not run again
        self._proc: WorkerProcess | None = None
        self.memory_killed = False      # the last stopped worker was killed for its memory cgroup
        self.broken: Reply | None = None            # set when no worker can be started any more
        self._closed = False
        self._ran: dict[int, CellOutcome] = {}       # outcomes of the latest run of the cells
        self._complete = False                       # the cells ran to the end at least once
        self._whole_template = False                 # fork only from a template that imported everything
        self.worker_info: dict[str, Any] = {}
        #: Seconds each side reads the channel awake before sleeping on it: where this thread's lane has a
        #: CPU for each side (see autograder.sandbox.affinity); the worker is told with every frame.
        self._spin = spin_seconds()
        #: Seconds per section of this submission's sandbox side: ``fork`` (fork and worker set-up),
        #: ``cells`` (running the notebook's cells), ``encode`` / ``roundtrip`` / ``decode`` of calls
        #: (``roundtrip`` includes ``worker``: the worker's own decoding, the student's code and its
        #: encoding, as the worker reports it).
        self.timer = Stopwatch()     # fork, cage, cells, encode, roundtrip, decode, worker: seconds
        #: The calls sent to the worker, in flight and done (what failed ones leave: poisoned functions, crashes).
        self.calls = Calls(self, sandbox, limits, self._spin)

    # context manager -------------------------------------------------------------
    def __enter__(self) -> WorkerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self.calls.drop_all()
        self._closed = True
        self.stop(wait=False)
        self._sandbox.forget(self)
        self._sandbox.worker_closed(self._limits, self._whole_template)

    @property
    def pid(self) -> int | None:
        """The live worker's pid (None between a crash and the next call)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def process(self) -> WorkerProcess | None:
        """The live worker (None between a crash and the next call)."""
        return self._proc

    @property
    def closed(self) -> bool:
        """Closed: no call is sent any more."""
        return self._closed

    # lifecycle -------------------------------------------------------------------
    def time_left(self) -> float:
        """Seconds left of the submission's budget."""
        return self.deadline - time.monotonic()

    def budget_message(self) -> Msg:
        """What a call or cell stopped by the submission's budget is told."""
        return say("sandbox.budget", seconds=f"{self._limits.submission_seconds:g}")

    def stop(self, wait: bool = True) -> int | None:
        """Kill the live worker; with ``wait``, also its exit status (else it is reaped in the background)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        release(proc.pid)       # its teardown off the lane's CPU
        if wait:
            status = self._sandbox.finish(proc)
            self.memory_killed = proc.memory_killed
            return status
        self._sandbox.retire(proc)
        return None

    def launch(self) -> bool:
        """Fork a worker and run the cells, leaving out those that timed out or crashed before.

        A cell that times out or kills the worker is recorded and the cells run again
        in a fresh worker without it. True when a worker is ready for calls.
        """
        max_spawns = self.spawns + len(self._source) + 3
        spare = True        # the sandbox's spare worker may serve (see Sandbox.keep_spare), unless it failed
        while self.spawns < max_spawns:
            if self.time_left() <= 0:
                self._give_up(said_reply("timeout", self.budget_message()), "timeout")
                return False
            self.spawns += 1
            start = time.perf_counter()
            try:
                proc = self._sandbox.spawn(self.label, self._limits, complete=self._whole_template, spare=spare)
            except SpawnFailed as exc:
                self._give_up(said_reply("crashed", say("sandbox.not_started", detail=str(exc))), "crashed")
                return False
            self._proc = proc
            follow(proc.pid)        # the lane's CPU, where it has one
            problem = self._await_ready(proc)
            if problem is None and proc.spare is not None and proc.exited():
                problem = "the spare worker ended after it was ready"
            self.timer.since("fork", start)
            if problem is not None and proc.spare is not None:
                # A spare that died while it waited (its template restarted, a stray kill): a worker of
                # this submission's own, forked now, decides.
                self.stop()
                spare = False
                continue
            if problem is not None:
                self.stop()
                self._give_up(said_reply("crashed", say("sandbox.not_started", detail=problem)), "crashed")
                return False
            start = time.perf_counter()
            before = self.timer.seconds.get("meanwhile", 0.0)
            try:
                failed = self._run_cells(proc)
            except _ImportMissed:
                self.stop(wait=False)    # the cells again, in a worker of the complete template
                continue
            except SpawnFailed as exc:
                self.stop(wait=False)
                self._give_up(said_reply("crashed", say("sandbox.not_started", detail=str(exc))), "crashed")
                return False
            finally:
                meanwhile = self.timer.seconds.get("meanwhile", 0.0) - before
                self.timer.add("cells", time.perf_counter() - start - meanwhile)
            if failed is None:
                return True
            self._bad[failed.index] = failed
            self.stop(wait=False)
        self._give_up(said_reply("crashed", say("sandbox.keeps_stopping")), "crashed")
        return False

    def _while_cells_run(self) -> None:
        """The trusted work given to Sandbox.open, once, while the worker runs the cells just sent. Whatever it
        raises is left to its caller, who does the work again where it finds none done."""
        work, self._meanwhile = self._meanwhile, None
        if work is None:
            return
        start = time.perf_counter()
        try:
            work()
        except Exception:  # noqa: BLE001 - see the docstring: the caller's own path raises it again
            pass
        finally:
            self.timer.since("meanwhile", start)

    def _give_up(self, reply: Reply, cell_status: str) -> None:
        """No worker any more: every call answers ``reply``; cells never run get ``cell_status``."""
        self.broken = reply
        if not self._complete:
            said = reply.message if isinstance(reply.message, Msg) else Msg(reply.error, reply.error)
            self.cells = self._outcomes((cell_status, say("sandbox.not_run", detail=said)))

    def _await_ready(self, proc: WorkerProcess) -> str | None:
        deadline = time.monotonic() + SETUP_SECONDS[self._sandbox.device]
        try:
            header, _ = recv_frame(proc.chan, deadline, max_blob=0, max_header=SMALL_HEADER)
        except TimeoutError:
            return "the sandbox worker did not start in time"
        except (EOFError, OSError, FrameError):
            return f"the sandbox worker did not start: {describe_exit(self.stop())}"
        if header.get("t") == "setup_error":
            return f"the sandbox worker could not set itself up: {header_text(header.get('error'), 300)}"
        if header.get("t") != "ready":
            return "the sandbox worker sent an unexpected first message"
        self.worker_info = {k: header.get(k) for k in ("uid", "caged", "network", "nproc", "data_limit", "tasks",
                                                       "isolation")}
        cage = header.get("cage_seconds")
        if type(cage) is float and 0 <= cage < 60 and proc.spare is None:   # (a spare's was set up off this path)
            # The worker's word, for the profile only: setting up its cage, inside the "fork" section.
            self.timer.add("cage", cage)
        return None

    def _outcomes(self, not_run: tuple[str, Msg]) -> list[CellOutcome]:
        """One outcome per cell, in order, from the latest run (``not_run`` for cells it did not reach)."""
        out = []
        for cell in self._source:
            if cell.skipped:
                said = getattr(cell, "said", None)
                out.append(CellOutcome(cell.index, "skipped", "", cell.skipped,
                                       said=said._asdict() if said is not None else None))
            elif cell.index in self._bad:
                out.append(self._bad[cell.index])
            elif cell.index in self._ran:
                out.append(self._ran[cell.index])
            else:
                out.append(cell_said(cell.index, not_run[0], not_run[1]))
        return out

    def _run_cells(self, proc: WorkerProcess) -> CellOutcome | None:
        """Run the cells in ``proc``; the first cell that timed out or stopped the worker, or None."""
        runnable = [c for c in self._source if not c.skipped and c.index not in self._bad]
        self._ran = {}
        payload = json.dumps([{"index": c.index, "code": c.code} for c in runnable]).encode()
        try:
            proc.chan.settimeout(max(self._limits.call_seconds, 1.0))
            send_frame(proc.chan, {"t": "cells", "spin": self._spin}, payload)
            self._while_cells_run()
        except OSError:
            status = self.stop()
            if not runnable:
                raise SpawnFailed(f"the sandbox worker stopped: {describe_exit(status)}") from None
            return cell_said(runnable[0].index, "crashed", exit_message(status, self.memory_killed))
        for cell in runnable:
            stopped = self._read_cell(proc, cell)
            if stopped is not None:
                return stopped
        try:
            header, _ = recv_frame(proc.chan, time.monotonic() + 5, max_blob=0, max_header=SMALL_HEADER)
        except (TimeoutError, EOFError, OSError, FrameError):
            header = {}
        if header.get("t") != "cells_done":
            if not runnable:
                raise SpawnFailed("the sandbox worker stopped before running any cell")
            return cell_said(runnable[-1].index, "crashed", say("sandbox.stopped_after_cell"))
        if self.missed_import(proc, header):
            raise _ImportMissed()
        self.cells = self._outcomes(("skipped", say("sandbox.not_run_plain")))
        self._complete = True
        return None

    def _read_cell(self, proc: WorkerProcess, cell: Cell) -> CellOutcome | None:
        """Read one cell's outcome from ``proc`` into ``_ran``; the outcome instead where the cell timed out or
        stopped the worker."""
        start = time.monotonic()
        deadline = min(start + self._limits.call_seconds, self.deadline)
        try:
            header, _ = recv_frame(proc.chan, deadline, max_blob=0, max_header=SMALL_HEADER, spin=self._spin)
        except TimeoutError:
            message = (self.budget_message() if self.time_left() <= 0 else
                       say("sandbox.cell_timeout", seconds=f"{self._limits.call_seconds:g}"))
            return cell_said(cell.index, "timeout", message, time.monotonic() - start)
        except FrameError:
            return cell_said(cell.index, "crashed", say("sandbox.malformed"))
        except (EOFError, OSError):
            status = self.stop()
            return cell_said(cell.index, "crashed", exit_message(status, self.memory_killed),
                             time.monotonic() - start)
        outcome = cell_outcome(header, cell.index)
        if outcome is None:
            return cell_said(cell.index, "crashed", say("sandbox.unexpected"))
        self._ran[cell.index] = outcome
        return None

    def missed_import(self, proc: WorkerProcess, header: dict[str, Any]) -> bool:
        """True (once) when ``proc``, forked before the template imported everything, says an import missed:
        what it ran may differ from what a worker of the complete template would, and from now on workers
        are forked from the complete one only."""
        if proc.partial and not self._whole_template and header.get("missed") is True:
            self._whole_template = True
            return True
        return False

    # calls --------------------------------------------------------------------------
    def __call__(self, request: Request) -> Reply:
        """Run one request in the worker; every failure is a Reply, never an exception."""
        return self.start(request)()

    def start(self, request: Request) -> Callable[[], Reply]:
        """Send one request now; the callable returned waits for its reply, so the trusted side can compute its
        expected value while the worker runs the student's code; several may be in flight (see
        :meth:`autograder.sandbox.calls.Calls.start`)."""
        return self.calls.start(request)
