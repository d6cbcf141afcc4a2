"""The calls of one :class:`~autograder.sandbox.handle.WorkerHandle`, each from its frame sent to its reply
read and checked: several requests in flight at once (:meth:`Calls.start`), the stand-ins a call asks for
answered while it runs, a call sent again where the worker it went to stopped before running it, and the
reply checked (:func:`~autograder.sandbox.replies.check_reply`). A call that fails leaves the worker in one
known state through one path (:meth:`Calls._failed`).

The worker's life (forking it, its cells, stopping it, the submission's budget) is the handle's job; this
module reaches it through the handle's public side only. The handle makes one :class:`Calls` (composition:
the calls' own state, the requests in flight and what failed calls leave behind, stays here).
"""
from __future__ import annotations

import fcntl
import logging
import socket
import struct
import termios
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from autograder.inside import plain
from autograder.course.config import Limits
from autograder.core.messages import Msg, say
from autograder.inside.probes import Reply, Request
from autograder.sandbox.processes import WorkerProcess
from autograder.inside.protocol import FrameError, FrameTooLarge, MiB, recv_frame, send_frame
from autograder.sandbox.replies import (
    SMALL_HEADER,
    Failed,
    check_reply,
    encode_request,
    exit_message,
    header_number,
    header_text,
    readable,
    said_reply,
)
from autograder.sandbox.roles import HandleSide, SandboxSide
from autograder.sandbox.stand_ins import StandInRefused, answer

log = logging.getLogger(__name__)


#: Requests in flight at once (see Calls.start).
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


def _stand_ins_header(header: dict[str, Any], request: Request) -> None:
    """The header's words for a call that asks for stand-ins: their names, and those that are modules."""
    header["stand_ins"] = sorted(request.stand_ins)
    modules = sorted(name for name, ref in request.stand_ins.items() if isinstance(ref, type))
    if modules:
        header["stand_in_modules"] = modules


class _Done:
    """A call that ended before it was sent: its Reply, at once."""

    def __init__(self, reply: Reply):
        self.reply = reply

    def __call__(self) -> Reply:
        return self.reply


class _Call:
    """One request sent to the worker (see Calls.start): calling it waits for the reply, once;
    :meth:`drop` says its reply is not wanted."""

    def __init__(self, calls: Calls, request: Request, proc: WorkerProcess, seq: int):
        self.calls, self.request, self.proc, self.seq = calls, request, proc, seq
        self.start = time.monotonic()
        self.deadline = self.launched = self.start
        self.queued = False          # sent while an earlier request was in flight
        self.reply: Reply | None = None

    def __call__(self) -> Reply:
        if self.reply is None:
            self.calls.wait_for(self)
        assert self.reply is not None
        return self.reply

    def drop(self) -> None:
        """Its caller stopped before taking the reply: see Calls._drop."""
        if self.reply is None:
            self.calls.wait_for(self, wanted=False)


class Calls:
    """The calls of ``handle``'s worker, in the sandbox ``sandbox`` under ``limits``; ``spin``: the seconds
    each side reads the channel awake before sleeping on it (see WorkerHandle)."""

    def __init__(self, handle: HandleSide, sandbox: SandboxSide, limits: Limits, spin: float):
        self._handle = handle
        self._sandbox = sandbox
        self._limits = limits
        self._spin = spin
        self._max_blob = int(limits.output_mb * MiB) + 4 * MiB
        self._seq = 0
        self._inflight: deque[_Call] = deque()        # requests sent whose replies are not read yet, in order
        self._poisoned: dict[str, Reply] = {}        # function -> the answer to any further call
        self._crashes: Counter[str] = Counter()
        self._last_failure: Msg = say("sandbox.stopped_unknown")
        self._quiet = False                           # the worker was stopped for a dropped call: not a restart

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
            self._handle.timer.since("encode", encoding)
            if not self._can_queue(len(blob)):
                self._settle()
        queued = bool(self._inflight)
        early = self._launch_call(request, blob, queued=queued)
        if isinstance(early, Reply):
            return _Done(early)
        early.queued = queued
        self._inflight.append(early)
        return early

    def drop_all(self) -> None:
        """The replies nobody took (the handle closes): read (the worker's own), not sent again."""
        while self._inflight:
            self._inflight[0].drop()

    def _can_queue(self, size: int) -> bool:
        proc = self._handle.process
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
                turn.launched, turn.deadline = now, min(now + self._limits.call_seconds, self._handle.deadline)
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
        if call.proc is not self._handle.process or self._handle.closed:
            return dropped
        saved = self._crashes.copy(), dict(self._poisoned), self._last_failure
        reply = self._finish(call)
        if self._handle.process is not call.proc:         # it failed: as if it had never been made
            self._crashes, self._poisoned, self._last_failure = saved[0], saved[1], saved[2]
            self._quiet = True
        return reply

    def _launch_call(self, request: Request, blob: bytes | None = None, queued: bool = False) -> Reply | _Call:
        """Everything of a call up to its frame sent; a Reply where it goes no further. ``queued``: sent
        behind calls in flight, so that a worker found gone is the doing of one of them (see below)."""
        handle = self._handle
        if handle.closed:
            return said_reply("crashed", say("sandbox.closed"))
        known = self._poisoned.get(request.function)
        if known is not None:
            return Reply(known.status, error_type=known.error_type, error=known.error, message=known.message)
        if handle.time_left() <= 0:
            handle.stop(wait=False)
            return said_reply("timeout", handle.budget_message())
        if request.device != self._sandbox.device and not request.device.startswith(self._sandbox.device):
            return Reply("error", error_type="SandboxError",
                         error=f"this sandbox runs on {self._sandbox.device}, the request asks for {request.device}")
        if blob is None:
            start = time.perf_counter()
            blob = encode_request(request)  # a grader bug (not plain data) raises here, loudly
            handle.timer.since("encode", start)
        proc = handle.process
        if proc is None:
            restarted = self._restart()
            if isinstance(restarted, Reply):
                return restarted
            proc = restarted
        self._seq += 1
        header = {"t": "call", "seq": self._seq, "function": request.function, "probe": request.probe,
                  "forbidden": list(request.forbidden), "device": request.device, "spin": self._spin}
        if request.stand_ins:
            _stand_ins_header(header, request)
        call = _Call(self, request, proc, self._seq)
        call.deadline = min(call.start + self._limits.call_seconds, handle.deadline)
        sent = time.perf_counter()
        try:
            proc.chan.settimeout(max(call.deadline - call.start, 0.001))
            send_frame(proc.chan, header, blob)
        except (TimeoutError, FrameError, EOFError, OSError) as exc:
            return self._send_failed(exc, call, queued)
        finally:
            handle.timer.since("roundtrip", sent)
        call.launched = time.monotonic()
        return call

    def _restart(self) -> WorkerProcess | Reply:
        """A worker for a call where none runs (the one before stopped): started anew, within the sandbox's
        restarts; the Reply where there is none."""
        handle = self._handle
        if handle.broken is not None:
            return Reply(handle.broken.status, error=handle.broken.error, message=handle.broken.message)
        if not self._quiet and handle.restarts >= self._sandbox.max_restarts:
            return said_reply("crashed", say("sandbox.restarts", detail=self._last_failure,
                                             count=handle.restarts + 1))
        handle.restarts += 0 if self._quiet else 1
        self._quiet = False
        if not handle.launch():
            return self._not_restarted()
        proc = handle.process
        if proc is None:  # launch said yes but holds no worker: cannot happen, answer anyway
            return said_reply("crashed", say("sandbox.gone"))
        return proc

    def _send_failed(self, exc: BaseException, call: _Call, queued: bool) -> Reply | _Call:
        """A call whose frame could not be sent: failed, or (``queued``, the worker found gone) left to its turn."""
        if queued and not isinstance(exc, (TimeoutError, FrameError)):
            # The worker is gone while calls sent before this one are in flight: one of them stopped it,
            # or it was killed after them. This call never ran; its turn comes after theirs (sent again
            # to the next worker once they found the worker gone, see _finish, or failing as a call
            # sent to a dead worker does).
            call.launched = time.monotonic()
            return call
        return self._call_failed(exc, call.request.function, time.monotonic() - call.start)

    def _not_restarted(self) -> Reply:
        """The answer to a call for which no worker could be started (see WorkerHandle.launch)."""
        broken = self._handle.broken or said_reply("crashed", say("sandbox.not_restarted"))
        return Reply(broken.status, error=broken.error, message=broken.message)

    def _finish(self, call: _Call) -> Reply:
        """The reply to the first call in flight: the stand-ins it asks for answered, the reply read and
        checked. One sent to a worker that has stopped since (an earlier call failed) never ran: it is sent
        again now, as it would have been after that failure."""
        handle = self._handle
        if call.proc is not handle.process:
            return self._again(call.request)
        if call.queued and handle.time_left() <= 0:     # the budget ran out before its turn came
            handle.stop(wait=False)
            return said_reply("timeout", handle.budget_message())
        proc, request = call.proc, call.request
        # The time this side spent elsewhere after sending (computing the expected value) is not the call's:
        # a reply that came meanwhile is read, whatever the clock says now.
        away = time.monotonic() - call.launched
        deadline = call.deadline + away
        waited = time.perf_counter()
        try:
            got, reply_blob = recv_frame(proc.chan, deadline, max_blob=self._max_blob, max_header=SMALL_HEADER,
                                         spin=self._spin)
            if got.get("t") == "stand_in" and request.stand_ins:
                got, reply_blob = self._stand_ins(proc, request, got, reply_blob, deadline)
            handle.timer.since("roundtrip", waited)
        except (TimeoutError, FrameError, EOFError, OSError) as exc:   # FrameTooLarge is a FrameError
            return self._call_failed(exc, request.function, time.monotonic() - call.start)
        busy = header_number(got.get("busy"))
        if busy is not None and busy > 0 and away > 0:
            # The worker's work done while this side was away: the profile's ``overlap`` (never a score).
            handle.timer.add("hidden", min(away, busy))
        if handle.missed_import(proc, got):
            return self._relaunch(request)
        elapsed = time.monotonic() - call.start
        received = time.perf_counter()
        try:
            verdict, worker = check_reply(got, reply_blob, request.forbidden, elapsed, call.seq)
            if worker is not None:
                # The worker's word, used only to split the profile's round trip (never for a score).
                handle.timer.add("worker", worker)
            if isinstance(verdict, Failed):
                return self._failed(verdict.status, verdict.message, verdict.seconds, **verdict.extra)
            return verdict
        except Exception as exc:  # noqa: BLE001 - whatever the worker sent is its outcome, never the grader's fault
            # The type only: the message could quote the worker's bytes.
            log.warning("sandbox: a worker's reply could not be read (%s)", type(exc).__name__)
            return self._failed("crashed", say("sandbox.unreadable"), elapsed)
        finally:
            handle.timer.since("decode", received)

    def _stand_ins(self, proc: WorkerProcess, request: Request, got: dict[str, Any], blob: bytes,
                   deadline: float) -> tuple[dict[str, Any], bytes]:
        """Answer the stand-ins a call asks for, one frame after another: the first frame that is not one."""
        while got.get("t") == "stand_in":
            self._answer_stand_in(proc, request, got, blob)
            got, blob = recv_frame(proc.chan, deadline, max_blob=self._max_blob, max_header=SMALL_HEADER,
                                   spin=self._spin)
        return got, blob

    def _relaunch(self, request: Request) -> Reply:
        """The call again, in a worker of the complete template (its cells run first); once only."""
        self._handle.stop(wait=False)
        if not self._handle.launch():
            return self._not_restarted()
        return self._again(request)

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
            self._handle.timer.since("stand_in", start)

    def _call_failed(self, exc: BaseException, function: str, seconds: float) -> Reply:
        """What a call that did not come back means, by what stopped it: the one place a failed call
        becomes the worker's state (see :meth:`_failed`) and the call's Reply."""
        if isinstance(exc, TimeoutError):
            if self._handle.time_left() <= 0:      # the submission's budget, not this call, ran out
                return self._failed("timeout", self._handle.budget_message(), seconds, remember=self._last_failure)
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
        status = self._handle.stop()
        message = exit_message(status, self._handle.memory_killed)
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
            self._handle.stop(wait=False)
        self._last_failure = remember if remember is not None else message
        if poison is not None:
            self._poisoned[poison[0]] = said_reply(status, poison[1])
        return said_reply(status, message, seconds=seconds, **extra)
