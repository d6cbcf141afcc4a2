"""What one call into a sandbox worker costs, by what it carries and by how long the grader worked before it.

A notebook's grading makes about a hundred calls, each a round trip to its worker between two pieces of the
grader's own work (an expected value, a comparison). This measures, in one run, a call whose student code
does nothing (``f(*a) -> a[0]``): back to back, and after the grader has been busy for 1, 3 and 10 ms, with
an int, one tensor and eight tensors as arguments, on a lane of two CPUs (grader and worker each on one,
both reading their channel awake for a while) and on one CPU. Each line is the mean microseconds a call
and its ratio to the same call back to back, with the handle's own split (encode, round trip, the worker's
part, decode) per call.

    .venv/bin/python bench/bench_roundtrip.py            # about a minute; prints a markdown table
    .venv/bin/python bench/bench_roundtrip.py -n 100     # calls per line (default 300)

A call that costs more after a gap than back to back costs it in waking and in cold caches, not in work:
that is what sending several calls at once (fewer round trips) would save, and what faster encoding cannot.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GAPS_MS = (0, 1, 3, 10)
SECTIONS = ("encode", "roundtrip", "worker", "decode")


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def lane(mode: str, n: int) -> list[dict]:
    """Every (arguments, gap) line for one lane layout, in this process (``mode``: ``split`` or ``one``)."""
    import torch

    from autograder.course.config import Limits
    from autograder.course.notebook import Cell
    from autograder.inside.probes import Request
    from autograder.sandbox import Sandbox, affinity

    cpus = sorted(os.sched_getaffinity(0))
    if mode == "split":
        if len(cpus) < 2:
            return []
        affinity.pin_lane(affinity.LaneCpus(cpus[-2], cpus[-1]))
    else:
        affinity.pin_lane(affinity.LaneCpus(cpus[-1], cpus[-1]))
    limits = Limits(call_seconds=10.0, submission_seconds=3600, cpu_seconds=3600, memory_mb=2048, output_mb=16,
                    file_mb=1, processes=0)
    source = "def f(*a):\n    return a[0]\n"
    x = torch.randn(3, 7, 16)
    rows = []
    with Sandbox(limits) as sandbox, sandbox.open([Cell(0, None, source, source, None)], label="roundtrip") as worker:
        for name, args in (("an int", (1,)), ("1 tensor", (x,)), ("8 tensors", (x,) * 8)):
            request = Request("f", args, {})
            for _ in range(30):
                worker(request)
            for gap in GAPS_MS:
                worker.timer.seconds.clear()
                total = 0.0
                for _ in range(n):
                    _busy(gap / 1000)
                    start = time.perf_counter()
                    reply = worker(request)
                    total += time.perf_counter() - start
                    if reply.status != "ok":
                        raise SystemExit(f"call failed: {reply.status} {reply.error}")
                split = {k: worker.timer.seconds.get(k, 0.0) / n * 1e6 for k in SECTIONS}
                rows.append({"lane": mode, "args": name, "gap": gap, "us": total / n * 1e6, **split})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="calls per line (default 300)")
    parser.add_argument("--lane", choices=("split", "one"), help=argparse.SUPPRESS)   # one layout, in a child
    args = parser.parse_args(argv)
    if args.lane:
        print(json.dumps(lane(args.lane, args.n)))
        return 0
    rows: list[dict] = []
    for mode in ("split", "one"):      # each in a process of its own: a pinned thread stays pinned
        out = subprocess.run([sys.executable, __file__, "--lane", mode, "-n", str(args.n)], check=True,
                             capture_output=True, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    print("| lane | arguments | grader busy before | µs a call | × back to back | encode | round trip | "
          "worker | decode |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    base = {(r["lane"], r["args"]): r["us"] for r in rows if r["gap"] == 0}
    for r in rows:
        print(f"| {'two CPUs' if r['lane'] == 'split' else 'one CPU'} | {r['args']} | {r['gap']} ms | {r['us']:.0f} | "
              f"{r['us'] / base[(r['lane'], r['args'])]:.2f} | " + " | ".join(f"{r[k]:.0f}" for k in SECTIONS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
