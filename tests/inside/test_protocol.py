"""The frames of a worker's channel (autograder.inside.protocol): whole frames from pieces, a deadline
kept whatever the socket's own timeout, the end of the channel and malformed frames named."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from autograder.inside.protocol import FRAME, MAGIC, FrameError, FrameTooLarge, recv_frame, send_frame


@pytest.mark.parametrize("spin", [0.0, 0.002])
def test_a_frame_sent_in_pieces_arrives_whole_and_frames_stay_apart(spin):
    a, b = socket.socketpair()
    with a, b:
        head = b'{"t":"reply","seq":3}'
        data = FRAME.pack(MAGIC, len(head), 5) + head + b"12345"

        def trickle() -> None:
            for i in range(0, len(data), 7):
                a.sendall(data[i:i + 7])
                time.sleep(0.01)
            send_frame(a, {"t": "next"}, b"x" * (3 << 20))      # a big blob right behind it

        sender = threading.Thread(target=trickle)
        sender.start()
        try:
            assert recv_frame(b, time.monotonic() + 10, max_blob=1 << 30, spin=spin) == \
                ({"t": "reply", "seq": 3}, b"12345")
            header, blob = recv_frame(b, None, max_blob=1 << 30, spin=spin)
            assert header == {"t": "next"} and blob == b"x" * (3 << 20)
        finally:
            sender.join()


@pytest.mark.parametrize("spin", [0.0, 0.002])
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_the_deadline_holds_whatever_timeout_the_socket_has(timeout, spin):
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(timeout)
        a.sendall(FRAME.pack(MAGIC, 2, 0))          # the head of a frame whose header never comes
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            recv_frame(b, time.monotonic() + 0.3, max_blob=10, spin=spin)
        assert 0.25 < time.monotonic() - start < 5


@pytest.mark.parametrize("deadline", [None, 10.0])
def test_a_spinning_reader_sleeps_once_its_spin_is_over_and_still_reads_what_comes_later(deadline):
    """``spin`` keeps a reader awake for that long only: a frame that comes later is read after a sleep,
    and the wait costs the reading thread about its spin in CPU time, not the whole wait."""
    a, b = socket.socketpair()
    with a, b:
        def later() -> None:
            time.sleep(0.4)
            send_frame(a, {"t": "late"}, b"abc")

        sender = threading.Thread(target=later)
        sender.start()
        try:
            cpu = time.thread_time()
            got = recv_frame(b, None if deadline is None else time.monotonic() + deadline, max_blob=10, spin=0.002)
            cpu = time.thread_time() - cpu
        finally:
            sender.join()
        assert got == ({"t": "late"}, b"abc")
        assert cpu < 0.2, f"{cpu:.3f} s of CPU for a 0.4 s wait with a 2 ms spin"


def test_the_end_of_the_channel_and_malformed_frames_are_named():
    a, b = socket.socketpair()
    with b:
        with a:
            a.sendall(FRAME.pack(MAGIC, 10, 0) + b'{"t"')      # closed half way
        with pytest.raises(EOFError):
            recv_frame(b, time.monotonic() + 5, max_blob=10)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("<4sIQ", b"XXXX", 2, 0) + b"{}")
        with pytest.raises(FrameError):
            recv_frame(b, time.monotonic() + 5, max_blob=10)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(FRAME.pack(MAGIC, 2, 1 << 40))
        with pytest.raises(FrameTooLarge):
            recv_frame(b, time.monotonic() + 5, max_blob=1 << 20)
