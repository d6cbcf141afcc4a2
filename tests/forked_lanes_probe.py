"""Run by tests/grading/test_lanes.py (``python tests/forked_lanes_probe.py SUBMISSIONS OUT``) in a process of
its own: forked lanes grade a batch like one process, a lane killed mid-batch loses nothing, and a fork
that fails leaves no child behind. It prints one line, ``REPORT`` and a JSON object the test reads."""
# ruff: noqa: E402 (the grader's environment is set before torch is imported)
import json
import os
import signal
import sys
import threading
from pathlib import Path

from autograder.grading.process import GRADER_ENV
os.environ.update(GRADER_ENV)
import torch
torch.set_num_threads(1)
from autograder import grading as G
from autograder.course.config import load_course
from autograder.grading.forked_lanes import ForkedLanes, fork_problem
from autograder.sandbox import Sandbox

course = load_course()
subs, out = Path(sys.argv[1]), Path(sys.argv[2])
report = {}
with Sandbox(course.limits, "cpu") as sandbox:
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait, name="busy-thread")
    waiter.start()
    report["with_thread"] = fork_problem()
    stop.set()
    waiter.join()
    sandbox.settle()
    report["without"] = fork_problem()
    def scores(outcome):
        return {r["key"]: [r["points"], r["status"], r.get("message"),
                           [[e["exercise"], e["points"]] for e in r["exercises"]]] for r in outcome.results}
    one = G.grade_batch(G.plan(subs, course, out / "one"), sandbox, jobs=1)
    two = G.grade_batch(G.plan(subs, course, out / "two"), sandbox, jobs=2, processes=1)
    report["lanes"] = two.lanes
    report["same"] = scores(one) == scores(two) and two.graded == one.graded
    # A lane killed before its first submission: that submission is graded here, nothing is lost.
    lanes = ForkedLanes(1, sandbox)
    os.kill(lanes.pids[0], signal.SIGKILL)
    try:
        killed = G.grade_batch(G.plan(subs, course, out / "killed"), sandbox, jobs=2, lanes=lanes)
    finally:
        lanes.close()
    report["killed_lanes"] = killed.lanes
    report["killed_same"] = scores(killed) == scores(one) and killed.graded == one.graded
    report["graded"] = one.graded
    # The second of two forks fails (EAGAIN): the first lane and both copies of the template are stopped.
    real_fork, forks = os.fork, []
    def failing_fork():
        forks.append(1)
        if len(forks) == 2:
            raise OSError(11, "Resource temporarily unavailable")
        return real_fork()
    os.fork = failing_fork
    try:
        ForkedLanes(2, sandbox)
    except OSError as exc:
        report["fork_error"] = str(exc)
    finally:
        os.fork = real_fork
    import time
    def running_children():
        found = []
        for entry in os.listdir("/proc"):
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # This process's children, zombies too (a lane must be waited for); the template's, running.
            if entry.isdigit() and (int(stat[1]) == os.getpid() or
                                    (int(stat[1]) == sandbox.template_pid and stat[0] != "Z")):
                found.append(int(entry))
        return found
    deadline = time.monotonic() + 30    # poll: the refused lane's sibling may take a moment to be reaped
    while True:
        left = [pid for pid in running_children() if pid != sandbox.template_pid]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    report["left"] = left
print("REPORT" + json.dumps(report))
