"""What a worker's bytes may become on the grader's side: call replies (:func:`check_reply`) and cell
outcomes, every field checked, anything else a ``crashed``/``timeout``/``too_large`` reply in the sandbox's
own words; how a worker's exit is described; and the requests sent to it (plain data only).
"""
from __future__ import annotations

import math
import os
import signal
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from autograder.inside import plain
from autograder.inside.forbidden import GUARD_OFF
from autograder.core.messages import Msg, as_dict, say
from autograder.inside.probes import Reply, Request


#: Statuses a worker may report for a call; the sandbox adds timeout and crashed itself.
WORKER_STATUSES = frozenset({"ok", "error", "missing", "not_attempted", "too_large"})


SMALL_HEADER = 64 * 1024


#: Signals whose cause the message names (messages.CATALOGUE["sandbox.hint.<NAME>"]).
_SIGNAL_HINTS = frozenset({signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV, signal.SIGBUS,
                           signal.SIGABRT, signal.SIGFPE})


@dataclass
class CheckedReply(Reply):
    """A reply whose blob the sandbox already decoded and validated: :meth:`value` reuses that."""

    decoded: plain.Value | None = field(default=None, repr=False, compare=False)

    def value(self) -> plain.Value:
        return self.decoded if self.decoded is not None else super().value()


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one code cell: ok, error, skipped, timeout or crashed.

    ``message`` is the student's exception text or, when the sandbox stopped the cell, its
    words in English; ``said`` then holds them in both languages ({"zh", "en"}).
    """

    index: int
    status: str
    error_type: str = ""
    message: str = ""
    seconds: float = 0.0
    said: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cell_said(index: int, status: str, msg: Msg, seconds: float = 0.0) -> CellOutcome:
    return CellOutcome(index, status, "", msg.en, seconds, as_dict(msg))


def exit_message(status: int | None, memory_killed: bool = False) -> Msg:
    """A wait status in words, both languages: ``killed by SIGXCPU (CPU time limit)``, ``exited with status 0 ...``.

    ``memory_killed``: the kernel killed the worker for its memory cgroup (the template read it there).
    """
    if memory_killed:
        return say("sandbox.killed_memory")
    if status is None:
        return say("sandbox.stopped_unknown")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            sig = signal.Signals(number)
            name = sig.name
        except ValueError:
            sig, name = None, f"signal {number}"
        hint = f"sandbox.hint.{sig.name}" if sig is not None and sig in _SIGNAL_HINTS else None
        if hint is None:
            return say("sandbox.killed_signal", signal=name)
        return say("sandbox.killed_signal_hint", signal=name, hint=say(hint))
    if os.WIFEXITED(status):
        return say("sandbox.exit_status", status=os.WEXITSTATUS(status))
    return say("sandbox.stopped_status", status=status)


def describe_exit(status: int | None) -> str:
    """:func:`exit_message` in English (the instructor's logs)."""
    return exit_message(status).en


def said_reply(status: str, msg: Msg, **extra: Any) -> Reply:
    """A reply in the sandbox's own words: English in ``error`` (logs), both languages in ``message``."""
    return Reply(status, error=msg.en, message=msg, **extra)


#: What a student is told when the worker's reply is not what an honest worker sends (a forged frame,
#: a patched encoder): the student's outcome, like a crash, never "the check itself failed".
UNREADABLE_REPLY = say("sandbox.unreadable").en


#: The array an honest worker sends for each tensor dtype (bfloat16 travels as float32, see plain.encode).
_TENSOR_ARRAYS = {"torch.float16": "float16", "torch.bfloat16": "float32", "torch.float32": "float32",
                  "torch.float64": "float64", "torch.int8": "int8", "torch.int16": "int16", "torch.int32": "int32",
                  "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool"}


def readable(value: plain.Value) -> None:
    """PlainDataError unless every array is as :func:`plain.encode` writes it.

    :func:`plain.decode` checks what it needs to build the arrays, and cleans the texts; a
    check then reads more: a tensor's numpy array (a big-endian or 16-byte one makes
    ``torch.from_numpy`` raise), an array's dtype name (``np.dtype`` of a forged one raises).
    Either would fail inside a check, where it reads as a fault of the kit: so the arrays
    are checked here, once, on the trusted side.
    """
    stack = [value.spec]
    while stack:
        spec = stack.pop()
        kind = spec["t"]
        if kind == "tensor":
            arr = value.arrays[spec["k"]]
            if arr.dtype != np.dtype(_TENSOR_ARRAYS[spec["dtype"]]) or not arr.dtype.isnative:
                raise plain.PlainDataError("a tensor's data does not match its dtype")
        elif kind == "ndarray":
            if spec.get("dtype") != str(value.arrays[spec["k"]].dtype):
                raise plain.PlainDataError("an array's dtype does not match its data")
        elif kind in ("tuple", "list"):
            stack.extend(spec["items"])
        elif kind == "dict":
            stack.extend(spec["items"].values())


def encode_request(request: Request) -> bytes:
    """The call's arguments as a plain blob; PlainDataError if any of them is not plain data."""
    payload = (tuple(request.args), dict(request.kwargs))
    enc = plain.Encoder()
    spec = enc.spec(payload)        # once: the same description is checked and sent
    bad = _undescribed(spec)
    if bad:
        raise plain.PlainDataError(f"cannot send {bad} to the sandbox worker (arguments must be tensors, "
                                   "arrays, numbers, strings, None, and tuples/lists/dicts of them)")
    return plain.pack(enc, spec)


def _undescribed(spec: dict[str, Any]) -> str | None:
    kind = spec.get("t")
    if kind == "other":
        return f"an object of type {spec.get('type')}"
    items = spec.get("items")
    children = items.values() if isinstance(items, dict) else items if isinstance(items, list) else ()
    for child in children:
        found = _undescribed(child)
        if found:
            return found
    return None


@dataclass(frozen=True)
class Failed:
    """A reply no honest worker sends: its caller stops the worker, trusting its channel no further, and answers
    the call with ``status`` and ``message`` in the sandbox's own words (``extra``: the Reply's other fields);
    see :meth:`autograder.sandbox.calls.Calls._failed`."""

    status: str
    message: Msg
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def check_reply(header: dict[str, Any], blob: bytes, forbidden: Collection[str], elapsed: float,
                seq: int) -> tuple[Reply | Failed, float | None]:
    """Believe nothing but plain data: the header's fields are checked one by one.

    ``header`` and ``blob``: the frame the worker sent for call number ``seq``, which asked it to watch for
    ``forbidden`` (the request's names) and came back ``elapsed`` seconds after it was sent. Returns the
    call's Reply (a :class:`CheckedReply`, its blob decoded, when ``ok``) or :class:`Failed`; and the seconds
    the worker says it was busy, capped at ``elapsed``, for the profile's ``worker`` section only (never a
    score; None where the header is not a reply to this call or says nothing of them).
    """
    status = header.get("status")
    if header.get("t") != "reply" or header.get("seq") != seq or type(status) is not str \
            or status not in WORKER_STATUSES:
        return Failed("crashed", say("sandbox.unexpected"), elapsed), None
    said = header.get("forbidden")
    names = [f for f in said if type(f) is str and (f in forbidden or f == GUARD_OFF)] \
        if type(said) is list else []
    seconds = header_number(header.get("seconds"))
    if seconds is None or seconds < 0:
        seconds = elapsed
    busy = header_number(header.get("busy"))
    worker = min(busy, elapsed) if busy is not None and busy >= 0 else None
    reply = Reply(status, error_type=header_text(header.get("error_type"), 100),
                  error=header_text(header.get("error"), 500), forbidden=list(dict.fromkeys(names)),
                  seconds=min(seconds, elapsed))
    if status == "ok":
        try:
            decoded = plain.decode(blob)
            readable(decoded)
        except Exception:  # noqa: BLE001 - PlainDataError, or whatever else a forged blob provokes
            # Only a tampered worker sends such a frame: do not trust its channel any further.
            return Failed("error", say("sandbox.unreadable"), reply.seconds,
                          {"error_type": "PlainDataError", "forbidden": reply.forbidden}), worker
        return CheckedReply(status, blob, reply.error_type, reply.error, reply.forbidden, reply.seconds,
                            decoded=decoded), worker
    return reply, worker


def cell_outcome(header: dict[str, Any], index: int) -> CellOutcome | None:
    if header.get("t") != "cell" or header.get("index") != index or header.get("status") not in ("ok", "error"):
        return None
    seconds = header_number(header.get("seconds"))
    if seconds is None or seconds < 0:
        seconds = 0.0
    return CellOutcome(index, header["status"], header_text(header.get("error_type"), 100),
                       header_text(header.get("message"), 300), seconds)


def header_number(value: Any) -> float | None:
    """A header's number as a float where it is a finite int or float (by type: a bool is neither), else None."""
    if (type(value) is int or type(value) is float) and math.isfinite(value):
        return float(value)
    return None


def header_text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""
