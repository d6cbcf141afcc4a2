"""The grader's handle on one submission's worker: runs its cells, then answers the checks' calls
(a checks ``Runner``). A call that fails leaves the worker in one known state through one path
(:meth:`WorkerHandle._failed`); a worker killed by a call is forked again and given the cells again.
"""
from __future__ import annotations

import fcntl
import json
import logging
import socket
import struct
import termios
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autograder import plain
from autograder.config import Limits
from autograder.forbidden import GUARD_OFF
from autograder.messages import Msg, say
from autograder.notebook import Cell
from autograder.probes import Reply, Request
from autograder.sandbox.affinity import follow, release, spin_seconds
from autograder.sandbox.processes import SETUP_SECONDS, SpawnFailed, WorkerProcess
from autograder.sandbox.protocol import FrameError, FrameTooLarge, MiB, recv_frame, send_frame
from autograder.sandbox.replies import (
    SMALL_HEADER,
    WORKER_STATUSES,
    CellOutcome,
    CheckedReply,
    cell_outcome,
    cell_said,
    describe_exit,
    encode_request,
    exit_message,
    header_number,
    header_text,
    readable,
    said_reply,
)
from autograder.sandbox.stand_ins import StandInRefused, answer
from autograder.stopwatch import Stopwatch

if TYPE_CHECKING:   # the Sandbox makes its handles
    from autograder.sandbox.host import Sandbox

log = logging.getLogger(__name__)


class _ImportMissed(Exception):
    """A worker forked from the incomplete template needed a module it did not hold (see _check_misses)."""


class _Done:
    """A call that ended before it was sent: its Reply, at once."""

    def __init__(self, reply: Reply):
        self.reply = reply

    def __call__(self) -> Reply:
        return self.reply


#: Requests in flight at once (see WorkerHandle.start).
PIPELINE_CALLS = 16
#: The send buffer the grader asks for on its end of a worker's channel (the kernel grants up to its
#: net.core.wmem_max: 208 KiB on many machines, more on others).
CHANNEL_SEND_BUFFER = 4 << 20
#: What the kernel counts for one frame beyond its bytes (its buffers' bookkeeping), at most: a request
#: joins those in flight only where the channel's send buffer has room for it and this much more (see
#: _can_queue), so that sending never waits for the worker to read, and a worker whose replies wait to be
#: read never holds up this side's send (the one way the two sides could wait on each other).
FRAME_OVERHEAD = 4096


def _unread(chan: socket.socket) -> int | None:
    """Bytes this end of ``chan`` sent that the other end has not read yet, as the kernel counts them
    against the send buffer (SIOCOUTQ); None where it does not say."""
    try:
        return struct.unpack("i", fcntl.ioctl(chan.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except OSError:
        return None


class _Call:
    """One request sent to the worker (see WorkerHandle.start): calling it waits for the reply, once;
    :meth:`drop` says its reply is not wanted."""

    def __init__(self, handle: WorkerHandle, request: Request, proc: WorkerProcess, seq: int):
        self.handle, self.request, self.proc, self.seq = handle, request, proc, seq
        self.start = time.monotonic()
        self.deadline = self.launched = self.start
        self.queued = False          # sent while an earlier request was in flight
        self.reply: Reply | None = None

    def __call__(self) -> Reply:
        if self.reply is None:
            self.handle.wait_for(self)
        assert self.reply is not None
        return self.reply

    def drop(self) -> None:
        """Its caller stopped before taking the reply: see WorkerHandle._drop."""
        if self.reply is None:
            self.handle.wait_for(self, wanted=False)


class WorkerHandle:
    """The sandboxed run of one submission: cell outcomes, then calls (a checks ``Runner``)."""

    def __init__(self, sandbox: Sandbox, cells: list[Cell], label: str, limits: Limits,
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
        self._deadline = time.monotonic() + self._limits.submission_seconds
        self._bad: dict[int, CellOutcome] = {}       # cells that time out or crash: not run again
        self._proc: WorkerProcess | None = None
        self.memory_killed = False      # the last stopped worker was killed for its memory cgroup
        self._poisoned: dict[str, Reply] = {}        # function -> the answer to any further call
        self._crashes: Counter[str] = Counter()
        self.broken: Reply | None = None            # set when no worker can be started any more
        self._last_failure: Msg = say("sandbox.stopped_unknown")
        self._seq = 0
        self._inflight: deque[_Call] = deque()        # requests sent whose replies are not read yet, in order
        self._quiet = False                           # the worker was stopped for a dropped call: not a restart
        self._closed = False
        self._ran: dict[int, CellOutcome] = {}       # outcomes of the latest run of the cells
        self._complete = False                       # the cells ran to the end at least once
        self._whole_template = False                 # fork only from a template that imported everything
        self.worker_info: dict[str, Any] = {}
        self._max_blob = int(self._limits.output_mb * MiB) + 4 * MiB
        #: Seconds each side reads the channel awake before sleeping on it: where this thread's lane has a
        #: CPU for each side (see autograder.sandbox.affinity); the worker is told with every frame.
        self._spin = spin_seconds()
        #: Seconds per section of this submission's sandbox side: ``fork`` (fork and worker set-up),
        #: ``cells`` (running the notebook's cells), ``encode`` / ``roundtrip`` / ``decode`` of calls
        #: (``roundtrip`` includes ``worker``: the worker's own decoding, the student's code and its
        #: encoding, as the worker reports it).
        self.timer = Stopwatch()     # fork, cage, cells, encode, roundtrip, decode, worker: seconds

    # context manager -------------------------------------------------------------
    def __enter__(self) -> WorkerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        while self._inflight:       # replies nobody took: read (the worker's own), not sent again
            self._inflight[0].drop()
        self._closed = True
        self._stop(wait=False)
        self._sandbox.forget(self)

    @property
    def pid(self) -> int | None:
        """The live worker's pid (None between a crash and the next call)."""
        return self._proc.pid if self._proc is not None else None

    # lifecycle -------------------------------------------------------------------
    def _time_left(self) -> float:
        return self._deadline - time.monotonic()

    def _budget_message(self) -> Msg:
        return say("sandbox.budget", seconds=f"{self._limits.submission_seconds:g}")

    def _stop(self, wait: bool = True) -> int | None:
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
            if self._time_left() <= 0:
                self._give_up(said_reply("timeout", self._budget_message()), "timeout")
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
                self._stop()
                spare = False
                continue
            if problem is not None:
                self._stop()
                self._give_up(said_reply("crashed", say("sandbox.not_started", detail=problem)), "crashed")
                return False
            start = time.perf_counter()
            before = self.timer.seconds.get("meanwhile", 0.0)
            try:
                failed = self._run_cells(proc)
            except _ImportMissed:
                self._stop(wait=False)    # the cells again, in a worker of the complete template
                continue
            except SpawnFailed as exc:
                self._stop(wait=False)
                self._give_up(said_reply("crashed", say("sandbox.not_started", detail=str(exc))), "crashed")
                return False
            finally:
                meanwhile = self.timer.seconds.get("meanwhile", 0.0) - before
                self.timer.add("cells", time.perf_counter() - start - meanwhile)
            if failed is None:
                return True
            self._bad[failed.index] = failed
            self._stop(wait=False)
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
            return f"the sandbox worker did not start: {describe_exit(self._stop())}"
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
            status = self._stop()
            if not runnable:
                raise SpawnFailed(f"the sandbox worker stopped: {describe_exit(status)}") from None
            return cell_said(runnable[0].index, "crashed", exit_message(status, self.memory_killed))
        for cell in runnable:
            start = time.monotonic()
            deadline = min(start + self._limits.call_seconds, self._deadline)
            try:
                header, _ = recv_frame(proc.chan, deadline, max_blob=0, max_header=SMALL_HEADER, spin=self._spin)
            except TimeoutError:
                message = (self._budget_message() if self._time_left() <= 0 else
                           say("sandbox.cell_timeout", seconds=f"{self._limits.call_seconds:g}"))
                return cell_said(cell.index, "timeout", message, time.monotonic() - start)
            except FrameError:
                return cell_said(cell.index, "crashed", say("sandbox.malformed"))
            except (EOFError, OSError):
                status = self._stop()
                return cell_said(cell.index, "crashed", exit_message(status, self.memory_killed),
                                  time.monotonic() - start)
            outcome = cell_outcome(header, cell.index)
            if outcome is None:
                return cell_said(cell.index, "crashed", say("sandbox.unexpected"))
            self._ran[cell.index] = outcome
        try:
            header, _ = recv_frame(proc.chan, time.monotonic() + 5, max_blob=0, max_header=SMALL_HEADER)
        except (TimeoutError, EOFError, OSError, FrameError):
            header = {}
        if header.get("t") != "cells_done":
            if not runnable:
                raise SpawnFailed("the sandbox worker stopped before running any cell")
            return cell_said(runnable[-1].index, "crashed", say("sandbox.stopped_after_cell"))
        self._check_misses(proc, header)
        self.cells = self._outcomes(("skipped", say("sandbox.not_run_plain")))
        self._complete = True
        return None

    # calls --------------------------------------------------------------------------
    def __call__(self, request: Request) -> Reply:
        """Run one request in the worker; every failure is a Reply, never an exception."""
        return self.start(request)()

    def start(self, request: Request) -> Callable[[], Reply]:
        """Send one request now; the callable returned waits for its reply (the first time; later calls
        give the same Reply), so the trusted side can compute its expected value while the worker runs the
        student's code. The request's bytes are made here: nothing done to its arguments afterwards reaches
        the worker.

        Several requests may be in flight: the worker reads them in order and runs each as if it had been
        sent after the reply before it (its time limit counted from there; after a failure, sent again to the
        worker started next, through the same checks as any call). Replies are read in order too. The
        callable's ``drop()`` says a reply is not wanted (see :meth:`_drop`). A request waits for those in
        flight when one of them asks for stand-ins (the worker then reads the grader's answers on the same
        channel), past PIPELINE_CALLS, or where the channel's send buffer has no room for it (see
        FRAME_OVERHEAD)."""
        blob = None
        if self._inflight:
            encoding = time.perf_counter()
            blob = encode_request(request)       # its size decides whether it can join those in flight
            self.timer.since("encode", encoding)
            if not self._can_queue(len(blob)):
                self._settle()
        queued = bool(self._inflight)
        early = self._launch_call(request, blob, queued=queued)
        if isinstance(early, Reply):
            return _Done(early)
        early.queued = queued
        self._inflight.append(early)
        return early

    def _can_queue(self, size: int) -> bool:
        proc = self._proc
        if proc is None or len(self._inflight) >= PIPELINE_CALLS \
                or any(c.request.stand_ins or c.proc is not proc for c in self._inflight):
            return False
        unread = _unread(proc.chan)
        try:
            room = proc.chan.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        except OSError:
            return False
        # A quarter: on a socket with a timeout Python waits for it to poll writable before each send, and a
        # Unix socket polls writable only while a quarter of its send buffer or less holds unread bytes.
        return unread is not None and unread + size + 2 * FRAME_OVERHEAD <= room // 4

    def _settle(self) -> None:
        """Wait for the requests in flight, if any (their Replies stay with whoever started them)."""
        while self._inflight:
            self._inflight[0]()

    def wait_for(self, call: _Call, wanted: bool = True) -> None:
        """Read replies in order up to ``call``'s: those before it are kept for whoever started them."""
        while self._inflight:
            head = self._inflight.popleft()
            last = head is call
            head.reply = self._finish(head) if wanted or not last else self._drop(head)
            if self._inflight and self._inflight[0].queued:
                # Its turn from now: its time limit counts from this reply, as if it had been sent now.
                now = time.monotonic()
                turn = self._inflight[0]
                turn.launched, turn.deadline = now, min(now + self._limits.call_seconds, self._deadline)
            if last:
                return
        if call.reply is None:      # not in flight any more (closed meanwhile)
            call.reply = said_reply("crashed", say("sandbox.closed"))

    def _drop(self, call: _Call) -> Reply:
        """A reply nobody takes (a check stopped with calls in flight): as far as this side can, the call
        leaves no trace in what later calls get. One sent to a worker that has stopped since is not sent
        again; one the live worker has is read (the channel stays in step), and if it fails, the worker is
        stopped without a word: no poisoned function, no crash counted, no restart (the next call starts a
        worker anew)."""
        dropped = said_reply("crashed", say("sandbox.closed"))
        if call.proc is not self._proc or self._closed:
            return dropped
        saved = self._crashes.copy(), dict(self._poisoned), self._last_failure
        reply = self._finish(call)
        if self._proc is not call.proc:         # it failed: as if it had never been made
            self._crashes, self._poisoned, self._last_failure = saved[0], saved[1], saved[2]
            self._quiet = True
        return reply

    def _launch_call(self, request: Request, blob: bytes | None = None, queued: bool = False) -> Reply | _Call:
        """Everything of a call up to its frame sent; a Reply where it goes no further. ``queued``: sent
        behind calls in flight, so that a worker found gone is the doing of one of them (see below)."""
        if self._closed:
            return said_reply("crashed", say("sandbox.closed"))
        known = self._poisoned.get(request.function)
        if known is not None:
            return Reply(known.status, error_type=known.error_type, error=known.error, message=known.message)
        if self._time_left() <= 0:
            self._stop(wait=False)
            return said_reply("timeout", self._budget_message())
        if request.device != self._sandbox.device and not request.device.startswith(self._sandbox.device):
            return Reply("error", error_type="SandboxError",
                         error=f"this sandbox runs on {self._sandbox.device}, the request asks for {request.device}")
        if blob is None:
            start = time.perf_counter()
            blob = encode_request(request)  # a grader bug (not plain data) raises here, loudly
            self.timer.since("encode", start)
        if self._proc is None:
            if self.broken is not None:
                return Reply(self.broken.status, error=self.broken.error, message=self.broken.message)
            if not self._quiet and self.restarts >= self._sandbox.max_restarts:
                return said_reply("crashed", say("sandbox.restarts", detail=self._last_failure,
                                                 count=self.restarts + 1))
            self.restarts += 0 if self._quiet else 1
            self._quiet = False
            if not self.launch():
                broken = self.broken or said_reply("crashed", say("sandbox.not_restarted"))
                return Reply(broken.status, error=broken.error, message=broken.message)
        proc = self._proc
        if proc is None:  # _launch said yes but holds no worker: cannot happen, answer anyway
            return said_reply("crashed", say("sandbox.gone"))
        self._seq += 1
        header = {"t": "call", "seq": self._seq, "function": request.function, "probe": request.probe,
                  "forbidden": list(request.forbidden), "device": request.device, "spin": self._spin}
        if request.stand_ins:
            header["stand_ins"] = sorted(request.stand_ins)
            modules = sorted(name for name, ref in request.stand_ins.items() if isinstance(ref, type))
            if modules:
                header["stand_in_modules"] = modules
        call = _Call(self, request, proc, self._seq)
        call.deadline = min(call.start + self._limits.call_seconds, self._deadline)
        sent = time.perf_counter()
        try:
            proc.chan.settimeout(max(call.deadline - call.start, 0.001))
            send_frame(proc.chan, header, blob)
        except (TimeoutError, FrameError, EOFError, OSError) as exc:
            if queued and not isinstance(exc, (TimeoutError, FrameError)):
                # The worker is gone while calls sent before this one are in flight: one of them stopped it,
                # or it was killed after them. This call never ran; its turn comes after theirs (sent again
                # to the next worker once they found the worker gone, see _finish, or failing as a call
                # sent to a dead worker does).
                call.launched = time.monotonic()
                return call
            return self._call_failed(exc, request.function, time.monotonic() - call.start)
        finally:
            self.timer.since("roundtrip", sent)
        call.launched = time.monotonic()
        return call

    def _finish(self, call: _Call) -> Reply:
        """The reply to the first call in flight: the stand-ins it asks for answered, the reply read and
        checked. One sent to a worker that has stopped since (an earlier call failed) never ran: it is sent
        again now, as it would have been after that failure."""
        if call.proc is not self._proc:
            return self._again(call.request)
        if call.queued and self._time_left() <= 0:     # the budget ran out before its turn came
            self._stop(wait=False)
            return said_reply("timeout", self._budget_message())
        proc, request = call.proc, call.request
        # The time this side spent elsewhere after sending (computing the expected value) is not the call's:
        # a reply that came meanwhile is read, whatever the clock says now.
        away = time.monotonic() - call.launched
        deadline = call.deadline + away
        waited = time.perf_counter()
        try:
            while True:
                got, reply_blob = recv_frame(proc.chan, deadline, max_blob=self._max_blob, max_header=SMALL_HEADER,
                                             spin=self._spin)
                if got.get("t") != "stand_in" or not request.stand_ins:
                    break
                self._answer_stand_in(proc, request, got, reply_blob)
            self.timer.since("roundtrip", waited)
        except (TimeoutError, FrameError, EOFError, OSError) as exc:   # FrameTooLarge is a FrameError
            return self._call_failed(exc, request.function, time.monotonic() - call.start)
        busy = header_number(got.get("busy"))
        if busy is not None and busy > 0 and away > 0:
            # The worker's work done while this side was away: the profile's ``overlap`` (never a score).
            self.timer.add("hidden", min(away, busy))
        try:
            self._check_misses(proc, got)
        except _ImportMissed:
            # The call again, in a worker of the complete template (its cells run first); once only.
            self._stop(wait=False)
            if not self.launch():
                broken = self.broken or said_reply("crashed", say("sandbox.not_restarted"))
                return Reply(broken.status, error=broken.error, message=broken.message)
            return self._again(request)
        elapsed = time.monotonic() - call.start
        received = time.perf_counter()
        try:
            return self._validate(got, reply_blob, request, elapsed, call.seq)
        except Exception as exc:  # noqa: BLE001 - whatever the worker sent is its outcome, never the grader's fault
            # The type only: the message could quote the worker's bytes.
            log.warning("sandbox: a worker's reply could not be read (%s)", type(exc).__name__)
            return self._failed("crashed", say("sandbox.unreadable"), elapsed)
        finally:
            self.timer.since("decode", received)

    def _again(self, request: Request) -> Reply:
        """``request`` sent anew to the live worker (started if need be) and its reply read, at once: a call
        whose first sending went to a worker that stopped before it ran (or missed an import)."""
        call = self._launch_call(request)
        return call if isinstance(call, Reply) else self._finish(call)

    def _answer_stand_in(self, proc: WorkerProcess, request: Request, header: dict[str, Any], blob: bytes) -> None:
        """Answer a worker's call of an earlier exercise's function with that exercise's reference (see
        :mod:`autograder.sandbox.stand_ins`): only for a name the request lists, during that request."""
        name, phase = header.get("name"), header.get("phase")
        reference = request.stand_ins.get(name) if type(name) is str else None
        start = time.perf_counter()
        try:
            if reference is None or phase not in ("forward", "backward", "init"):
                raise StandInRefused(f"the grader answers no call of {header_text(name, 40)} here")
            value = plain.decode(blob)
            readable(value)
            reply = plain.encode(answer(reference, phase, value.to_python()), max_bytes=self._max_blob)
            send_frame(proc.chan, {"t": "stand_in_reply", "status": "ok"}, reply)
        except Exception as exc:  # noqa: BLE001 - whatever the reference raises on the worker's arguments
            # The reference refused what the student's code passed it: the student's code sees the exception.
            send_frame(proc.chan, {"t": "stand_in_reply", "status": "error", "error_type": type(exc).__name__,
                                   "error": f"{type(exc).__name__}: {header_text(str(exc), 300)}"})
        finally:
            self.timer.since("stand_in", start)

    def _check_misses(self, proc: WorkerProcess, header: dict[str, Any]) -> None:
        """Raise _ImportMissed when ``proc``, forked before the template imported everything, says an
        import missed: what it ran may differ from what a worker of the complete template would."""
        if proc.partial and not self._whole_template and header.get("missed") is True:
            self._whole_template = True
            raise _ImportMissed()

    def _call_failed(self, exc: BaseException, function: str, seconds: float) -> Reply:
        """What a call that did not come back means, by what stopped it: the one place a failed call
        becomes the worker's state (see :meth:`_failed`) and the call's Reply."""
        if isinstance(exc, TimeoutError):
            if self._time_left() <= 0:      # the submission's budget, not this call, ran out
                return self._failed("timeout", self._budget_message(), seconds, remember=self._last_failure)
            limit = f"{self._limits.call_seconds:g}"
            return self._failed("timeout", say("sandbox.call_timeout", seconds=limit), seconds,
                                poison=(function, say("sandbox.slow_again", function=function, seconds=limit)))
        if isinstance(exc, FrameTooLarge):
            return self._failed("too_large", say("sandbox.output_too_large", size=f"{exc.size / MiB:.0f}",
                                                 limit=f"{self._limits.output_mb:g}"),
                                seconds, remember=say("check.too_large_hidden"))
        if isinstance(exc, FrameError):
            return self._failed("crashed", say("sandbox.malformed"), seconds)
        # EOF or a broken channel: the worker died. Its exit status says how; a second death of the same
        # function answers its later calls without running it again.
        status = self._stop()
        message = exit_message(status, self.memory_killed)
        self._crashes[function] += 1
        twice = self._crashes[function] >= 2
        return self._failed("crashed", message, seconds, stopped=True,
                            poison=(function, say("sandbox.stopped_twice", detail=message, function=function))
                            if twice else None)

    def _failed(self, status: str, message: Msg, seconds: float, *, remember: Msg | None = None,
                poison: tuple[str, Msg] | None = None, stopped: bool = False, **extra: Any) -> Reply:
        """A call failed in a way that leaves the worker unusable: stop it (unless ``stopped``), remember
        what went wrong (``remember``, default ``message``: a restart's message names it), answer the
        function's later calls with ``poison``'s message when given, and return the call's Reply."""
        if not stopped:
            self._stop(wait=False)
        self._last_failure = remember if remember is not None else message
        if poison is not None:
            self._poisoned[poison[0]] = said_reply(status, poison[1])
        return said_reply(status, message, seconds=seconds, **extra)

    def _validate(self, header: dict[str, Any], blob: bytes, request: Request, elapsed: float, seq: int) -> Reply:
        """Believe nothing but plain data: the header's fields are checked one by one."""
        status = header.get("status")
        if header.get("t") != "reply" or header.get("seq") != seq or type(status) is not str \
                or status not in WORKER_STATUSES:
            return self._failed("crashed", say("sandbox.unexpected"), elapsed)
        forbidden = header.get("forbidden")
        names = [f for f in forbidden if type(f) is str and (f in request.forbidden or f == GUARD_OFF)] \
            if type(forbidden) is list else []
        seconds = header_number(header.get("seconds"))
        if seconds is None or seconds < 0:
            seconds = elapsed
        busy = header_number(header.get("busy"))
        if busy is not None and busy >= 0:
            # The worker's word, used only to split the profile's round trip (never for a score).
            self.timer.add("worker", min(busy, elapsed))
        reply = Reply(status, error_type=header_text(header.get("error_type"), 100),
                      error=header_text(header.get("error"), 500), forbidden=list(dict.fromkeys(names)),
                      seconds=min(seconds, elapsed))
        if status == "ok":
            try:
                decoded = plain.decode(blob)
                readable(decoded)
            except Exception:  # noqa: BLE001 - PlainDataError, or whatever else a forged blob provokes
                # Only a tampered worker sends such a frame: do not trust its channel any further.
                return self._failed("error", say("sandbox.unreadable"), reply.seconds, error_type="PlainDataError",
                                    forbidden=reply.forbidden)
            return CheckedReply(status, blob, reply.error_type, reply.error, reply.forbidden, reply.seconds,
                                decoded=decoded)
        return reply
