"""Several calls in flight to one worker (WorkerHandle.start): each runs as if it had been sent after the
reply before it, whatever happens to the calls around it, and a dropped reply leaves no trace."""
from __future__ import annotations

import socket
import time

import pytest
import torch

from autograder.course.config import Limits
from autograder.course.notebook import Cell
from autograder.inside.probes import Reply, Request
from autograder.sandbox import Sandbox, encode_request
from autograder.sandbox.calls import CHANNEL_SEND_BUFFER

LIMITS = Limits(call_seconds=1.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)

STATEFUL = ("import os, time, torch\n"
            "count = [0]\n"
            "def tick():\n    count[0] += 1\n    return count[0]\n"
            "def hard():\n    os._exit(0)\n"
            "def nap(s):\n    time.sleep(s)\n    return s\n"
            "def spin():\n    while True:\n        pass\n"
            "def echo(t):\n    return t\n"
            "def big(n):\n    return torch.ones(n)\n")


def cells(source: str) -> list[Cell]:
    return [Cell(0, None, source, source, None)]


def start(worker, function: str, *args):
    return worker.start(Request(function, args, {}))


def py(reply: Reply):
    assert reply.status == "ok", reply
    return reply.value().to_python()


def test_calls_in_flight_run_in_order_and_each_reply_reaches_its_caller(sandbox):
    with sandbox.open(cells(STATEFUL), label="order") as worker:
        pending = [start(worker, "tick") for _ in range(5)]
        assert len(worker.calls._inflight) == 5             # sent together, none waited for
        assert py(pending[2]()) == 3                  # the two before it are read first and kept
        assert [py(p()) for p in pending] == [1, 2, 3, 4, 5]
        assert py(start(worker, "tick")()) == 6


def test_a_crash_in_the_middle_sends_the_calls_behind_it_to_the_next_worker_as_one_after_another_would(sandbox):
    with sandbox.open(cells(STATEFUL), label="crash") as worker:
        first, crash, again, more = (start(worker, f) for f in ("tick", "hard", "tick", "tick"))
        assert py(first()) == 1
        assert crash().status == "crashed" and "exited with status 0" in crash().error
        # Sent to the worker that died, they never ran there: the next worker (its cells run again) runs them.
        assert [py(again()), py(more())] == [1, 2]
        assert worker.restarts == 1


def test_each_call_in_flight_gets_its_whole_time_limit_from_the_reply_before_it(sandbox):
    with sandbox.open(cells(STATEFUL), label="slow") as worker:
        begin = time.monotonic()
        naps = [start(worker, "nap", 0.6) for _ in range(3)]        # 1.8 s in all against a 1 s limit each
        assert [py(n()) for n in naps] == [0.6, 0.6, 0.6]
        assert time.monotonic() - begin >= 1.8
        spin, spin_again, after = start(worker, "spin"), start(worker, "spin"), start(worker, "tick")
        assert spin().status == "timeout"
        # The function that timed out is not run again, in flight or not; the next call runs in a fresh worker.
        quick = time.monotonic()
        assert spin_again().status == "timeout" and "not run again" in spin_again().error
        assert time.monotonic() - quick < 0.9
        assert py(after()) == 1 and worker.restarts == 1


def test_a_dropped_reply_is_read_and_a_dropped_failure_leaves_no_trace(sandbox):
    with sandbox.open(cells(STATEFUL), label="drop") as worker:
        kept, dropped = start(worker, "tick"), start(worker, "tick")
        assert py(kept()) == 1
        dropped.drop()
        assert not worker.calls._inflight and py(start(worker, "tick")()) == 3   # it ran: the channel stays in step
        for _ in range(3):       # far past max_restarts, and twice a crash of the same function
            start(worker, "tick")
            start(worker, "hard").drop()
        assert worker.restarts == 0
        crash = start(worker, "hard")()
        # Counted as the first crash of hard (not poisoned as a second one) and restarted once.
        assert crash.status == "crashed" and "twice" not in crash.error
        assert py(start(worker, "tick")()) == 1 and worker.restarts == 1


def test_a_call_behind_a_failure_that_nobody_wants_is_not_sent_again(sandbox):
    with sandbox.open(cells(STATEFUL), label="stale") as worker:
        spawns = worker.spawns
        crash, behind = start(worker, "hard"), start(worker, "tick")
        assert crash().status == "crashed"
        behind.drop()
        assert worker.pid is None and worker.spawns == spawns      # no worker forked for it
        assert py(start(worker, "tick")()) == 1


@pytest.mark.parametrize("send_buffer", [64 << 10, CHANNEL_SEND_BUFFER])
def test_large_requests_and_large_replies_in_flight_never_wait_on_each_other(send_buffer, monkeypatch):
    """A request joins those in flight only where the channel's send buffer has room for it: sending never
    waits for the worker, so a worker whose replies wait to be read cannot hold this side up."""
    from autograder.sandbox import host

    monkeypatch.setattr(host, "CHANNEL_SEND_BUFFER", send_buffer)
    with Sandbox(LIMITS) as sandbox, sandbox.open(cells(STATEFUL), label="sizes") as worker:
        granted = worker._proc.chan.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        assert granted >= send_buffer or granted >= 200_000       # the kernel grants at least its default
        xs = [torch.full((granted // 8 // 12,), float(i), dtype=torch.float64) for i in range(8)]
        nap = start(worker, "nap", 0.5)        # the worker reads nothing meanwhile
        echoes, behind = [], 0
        for x in xs:
            echoes.append(start(worker, "echo", x))
            behind += nap.reply is None             # sent while the nap's reply was not read yet
        # What waits to be read stays within a quarter of the send buffer; the next waited for the nap.
        size = len(encode_request(Request("echo", (xs[0],), {})))
        assert 0 < behind < len(xs) and behind * size <= granted // 4
        assert py(nap()) == 0.5 and all(torch.equal(py(e()), x) for e, x in zip(echoes, xs))
        # Replies of 4 MiB each, far past a socket's buffer, while more requests are sent behind them.
        bigs = [start(worker, "big", 1 << 20) for _ in range(12)]
        assert len(worker.calls._inflight) == 12
        assert all(py(b()).shape == (1 << 20,) for b in bigs)


def test_closing_with_calls_in_flight_reads_them_and_stops(sandbox):
    worker = sandbox.open(cells(STATEFUL), label="close")
    with worker:
        pending = [start(worker, "tick") for _ in range(3)]
        start(worker, "hard")
    assert not worker.calls._inflight
    assert py(pending[0]()) == 1        # read before the worker stopped


@pytest.mark.slow
def test_calls_in_flight_past_the_submissions_budget_time_out_as_one_after_another_would():
    budget = Limits(call_seconds=1.0, submission_seconds=3.2, cpu_seconds=30, memory_mb=512, output_mb=16,
                    file_mb=1, processes=0)
    with Sandbox(budget) as sandbox, sandbox.open(cells(STATEFUL), label="budget") as worker:
        begin = time.monotonic()
        naps = [start(worker, "nap", 0.8) for _ in range(6)]   # 3 fit, with 0.8 s for the worker to start
        replies = [n() for n in naps]
        statuses = [r.status for r in replies]
        # Three fit; the fourth runs into the budget (not its own second), the rest are not run at all.
        assert statuses[:3] == ["ok"] * 3 and set(statuses[3:]) == {"timeout"}, replies
        assert all(r.error == replies[-1].error and "3.2 s" in r.error for r in replies[3:]), replies
        assert time.monotonic() - begin < 4.2


def test_a_call_sent_behind_one_that_already_stopped_the_worker_runs_in_the_next_worker():
    """The worker died of the first call before the second was sent (a busy machine): the send fails, and
    the failure is the first call's, not the second's (no crash counted for it, it is not lost)."""
    with Sandbox(LIMITS) as sandbox, sandbox.open(cells(STATEFUL), label="gone") as worker:
        crash = start(worker, "hard")
        deadline = time.monotonic() + 20
        while not worker._proc.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker._proc.exited()
        behind = start(worker, "tick")           # sent to a worker already gone
        assert crash().status == "crashed" and py(behind()) == 1
        assert worker.restarts == 1 and dict(worker.calls._crashes) == {"hard": 1}
