"""What crosses between the grader and its sandbox: the frames of a worker's channel, the configuration of
a fork, the environment a template starts with. Both sides import this module; it holds no code of either.

A frame is a fixed head (magic, JSON header length, blob length), a small JSON header and a blob that is
:func:`autograder.inside.plain.encode` output or JSON. No pickle in either direction.
"""
from __future__ import annotations

import json
import math
import os
import select
import socket
import struct
import time
from dataclasses import asdict, dataclass
from typing import Any

from autograder.core.compact_json import compact_encoder

MAGIC = b"AGW1"
FRAME = struct.Struct("<4sIQ")  # magic, header length, blob length
MAX_HEADER = 1 << 20
MiB = 1 << 20

#: Set before torch/numpy load, in the template's environment: one thread everywhere,
#: so the template holds no thread pool a fork could copy half-way.
TEMPLATE_ENV = {
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# -- frames ----------------------------------------------------------------------
class FrameError(Exception):
    """A frame that is not one: wrong magic, absurd lengths, header not a JSON object."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, limit: int):
        super().__init__(f"{size} bytes announced, at most {limit} accepted")
        self.size = size
        self.limit = limit


#: The frames' header encoder, made once (json.dumps with options makes one per call).
_HEADER = compact_encoder(allow_nan=False)
#: A frame whose blob is at most this large goes out in one write (see send_frame).
MERGED_FRAME_BYTES = 1 << 20


def send_frame(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    head = _HEADER(header).encode()
    prefix = FRAME.pack(MAGIC, len(head), len(blob)) + head
    if len(blob) <= MERGED_FRAME_BYTES:
        # One write: the reader wakes once per frame instead of once for the head and again for the blob
        # (a call is two frames; the second wake-up cost as much as the rest of a small call's transport).
        sock.sendall(prefix + blob)
    else:
        sock.sendall(prefix)
        sock.sendall(blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None, spin: float = 0.0) -> bytes:
    """``n`` bytes from ``sock``; TimeoutError past ``deadline`` (None: wait as long as it takes).

    Bytes already there are read at once: a socket with a timeout polls before every ``recv`` (a frame is
    three reads), so the descriptor is read directly and polled only when it has nothing yet. ``spin``:
    seconds to keep reading a descriptor that has nothing yet before sleeping on it (a lane with a CPU for
    each side, see :mod:`autograder.sandbox.affinity`; a deadline is kept to within that).
    """
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    if deadline is not None and sock.gettimeout() is None:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))     # a non-blocking descriptor
    fd = sock.fileno()
    sleeps = sock.gettimeout() is None          # a blocking descriptor: os.readv sleeps in the kernel
    poller: select.poll | None = None
    spin_until = 0.0
    while got < n:
        size = min(n - got, 4 * MiB)
        try:
            if sleeps and spin:
                k = sock.recv_into(view[got:], size, socket.MSG_DONTWAIT)
            else:
                k = os.readv(fd, [view[got:got + size]])
        except BlockingIOError:
            if spin:
                now = time.monotonic()
                spin_until = spin_until or now + spin
                if now < spin_until:
                    continue
                spin = 0.0                      # nothing came: sleep on it from now on
                if sleeps:
                    continue
            poller = _wait_readable(fd, poller, deadline)
            continue
        if k == 0:
            raise EOFError("the other side closed the channel")
        got += k
    return bytes(buf)


def _wait_readable(fd: int, poller: select.poll | None, deadline: float | None) -> select.poll:
    """Sleep until ``fd`` has bytes (``poller``, made on first use, is returned); TimeoutError past ``deadline``."""
    if poller is None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
    if deadline is None:
        poller.poll()
        return poller
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(max(1, math.ceil(left * 1000))):
        raise TimeoutError("no answer in time") from None
    return poller


def recv_frame(sock: socket.socket, deadline: float | None, max_blob: int,
               max_header: int = MAX_HEADER, spin: float = 0.0) -> tuple[dict[str, Any], bytes]:
    """One frame; TimeoutError past ``deadline``, EOFError if closed, FrameError if malformed. ``spin``:
    seconds to wait for its first byte awake before sleeping (see :func:`_recv_exact`)."""
    magic, n_head, n_blob = FRAME.unpack(_recv_exact(sock, FRAME.size, deadline, spin))
    if magic != MAGIC:
        raise FrameError("not a frame (bad magic)")
    if n_head > max_header:
        raise FrameError(f"header of {n_head} bytes")
    if n_blob > max_blob:
        raise FrameTooLarge(n_blob, max_blob)
    raw = _recv_exact(sock, n_head, deadline)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise FrameError("header is not JSON") from None
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    blob = _recv_exact(sock, n_blob, deadline) if n_blob else b""
    return header, blob


# -- configuration the grader sends with each fork --------------------------------
@dataclass(frozen=True)
class WorkerConfig:
    label: str
    workdir: str
    uid: int | None            # a uid of the worker's own (the grader is root), else None
    gid: int | None
    device: str                # "cpu" or "cuda"
    cpu_seconds: int
    memory_mb: int
    file_mb: float
    processes: int
    output_bytes: int
    mode: str = "none"         # the cage: see autograder.inside.cage
    disk_mb: float = 256.0     # the worker's tmpfs
    outer_uid: int = 0         # the grader's uid and gid: what a userns worker maps itself to
    outer_gid: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerConfig:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})
