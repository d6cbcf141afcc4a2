"""``-j N`` in N processes: the same rows and scores as threads, one writer, nothing lost when a lane fails."""
from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import grading as G
from autograder.grading import forked_lanes, lane_grading
from autograder.course.config import load_course
from support import ROOT, running

COURSE = load_course()
SAMPLES = ROOT / "samples" / "submissions"
#: Sample submissions that grade quickly (eve's crashing worker takes seconds and is graded elsewhere).
QUICK = ("ada", "ben", "chen", "dana", "finn")
#: Their notebooks: one row each (a notebook the course gains in samples/ joins by itself).
ROWS = sum(1 for name in QUICK for _ in (SAMPLES / name).glob("*.ipynb"))


def quick_samples(folder: Path) -> Path:
    for name in QUICK:
        shutil.copytree(SAMPLES / name, folder / name)
    return folder


def table(out: Path) -> dict[str, tuple[str, ...]]:
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        return {f"{r['student']}/{r['assignment']}": tuple(r.values()) for r in csv.DictReader(f)}


def scores(outcome: G.BatchOutcome) -> dict[str, tuple]:
    return {r["key"]: (r["points"], r["status"], [(e["exercise"], e["points"]) for e in r["exercises"]])
            for r in outcome.results}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """torch's math in one thread before the module's sandbox (tests/conftest.py) opens: autouse, it comes first."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_forked_lanes_for_any_batch_spawned_ones_only_for_batches_worth_it():
    assert G.lane_processes(1, 10_000) == 0                       # -j 1: this process alone
    assert G.lane_processes(2, 1) == 0                            # one submission: nothing to share
    assert G.lane_processes(2, 2) == 1                            # a forked lane is ready in milliseconds
    assert G.lane_processes(32, 10) == 9
    assert G.lane_processes(32, 10_000) == 31
    spawned = functools.partial(G.lane_processes, forked=False)   # where this process may not fork
    assert spawned(2, G.PROCESS_MIN_SUBMISSIONS - 1) == 0         # a short batch: threads here
    assert spawned(2, G.PROCESS_MIN_SUBMISSIONS) == 1
    assert spawned(32, 1000) == 1000 // G.PROCESS_MIN_SUBMISSIONS  # 15: each lane worth its start-up
    assert spawned(32, 10_000) == 31


@pytest.mark.slow
def test_process_lanes_grade_like_threads_and_resume(tmp_path, sandbox):
    subs = quick_samples(tmp_path / "subs")
    here = G.plan(subs, COURSE, tmp_path / "threads")
    threads = G.grade_batch(here, sandbox, jobs=2, processes=0)
    far = G.plan(subs, COURSE, tmp_path / "lanes")
    lanes = G.grade_batch(far, sandbox, jobs=2, processes=1)
    assert lanes.graded == threads.graded == ROWS
    assert scores(lanes) == scores(threads)
    # Rows are equal but for the time of grading.
    strip = {k: v[:-1] for k, v in table(tmp_path / "lanes").items()}
    assert strip == {k: v[:-1] for k, v in table(tmp_path / "threads").items()} and len(strip) == ROWS
    for r in lanes.results:   # written by this process, feedback included
        assert json.loads((tmp_path / "lanes" / "results" / f"{r['key']}.json").read_text(encoding="utf-8"))
        assert (tmp_path / "lanes" / "feedback" / f"{r['key']}.html").is_file()
    again = G.grade_batch(G.plan(subs, COURSE, tmp_path / "lanes"), sandbox, jobs=2, processes=1)
    assert (again.graded, again.resumed) == (0, ROWS)


@pytest.mark.slow
def test_a_lane_that_cannot_grade_hands_its_submissions_back(tmp_path, sandbox, caplog):
    subs = quick_samples(tmp_path / "subs")
    batch = G.plan(subs, COURSE, tmp_path / "out")
    reference = G.grade_batch(G.plan(subs, COURSE, tmp_path / "ref"), sandbox, jobs=1, processes=0)
    # A lane whose kit differs from this one refuses to grade: this process grades everything instead.
    batch.fingerprint = "0" * 16
    outcome = G.grade_batch(batch, sandbox, jobs=2, processes=1)
    assert outcome.graded == ROWS and len(table(tmp_path / "out")) == ROWS
    assert {k: v[:2] for k, v in scores(outcome).items()} == {k: v[:2] for k, v in scores(reference).items()}
    assert "grading lanes in other processes stopped" in caplog.text


def test_lane_grade_sends_only_json(tmp_path, monkeypatch):
    """One lane in this process: JSON text out, the notebook given as bytes (as a Dask worker gets it),
    its scratch copy kept in the lane's sandbox folder (gone with the sandbox, even a killed one's)."""
    subs = quick_samples(tmp_path / "subs")
    batch = G.plan(subs, COURSE, tmp_path / "out")
    sub = next(s for s in batch.found.submissions if s.student == "ben")
    config = G.lane_config(batch, None, "en")
    json.dumps(config)
    copies = []
    real_mkstemp = lane_grading.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        fd, path = real_mkstemp(*args, **kwargs)
        if Path(path).name.startswith("autograder-lane-"):   # the scratch copy, not the sandbox's own files
            copies.append((Path(path), lane_grading._LANE["sandbox"].folder))
        return fd, path

    monkeypatch.setattr(lane_grading.tempfile, "mkstemp", mkstemp)
    try:
        text = G.lane_grade(config, G.submission_json(sub), sub.path.read_bytes())
    finally:
        box = lane_grading._LANE.pop("sandbox", None)
        lane_grading._LANE.clear()
        if box is not None:
            box.close()
    ((copy, folder),) = copies
    assert copy.parent == folder and not copy.exists()
    payload = json.loads(text)
    assert isinstance(text, str) and set(payload) == {"result", "feedback"}
    result = payload["result"]
    assert result["key"] == sub.key and result["source"] == sub.source and result["sha256"] == sub.sha256
    assert result["points"] == 5.0 and result["graded_at"]
    md, html = payload["feedback"]
    assert md.startswith("#") and "<html" in html.lower()


def test_grading_never_imports_dask():
    code = ("import sys, autograder.grading, autograder.cli; "
            "sys.exit(1 if any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


#: Run in a fresh interpreter, as `autograder grade` runs: a grader process with its sandbox warm and no
#: other thread, where lanes are forked (this test process has run torch and Dask: it is not such a process).
FORKED = Path(__file__).resolve().parents[1] / "forked_lanes_probe.py"   # a script: it must own its process


@pytest.mark.slow
def test_forked_lanes_grade_like_one_process_and_a_killed_lane_loses_nothing(tmp_path):
    subs = quick_samples(tmp_path / "subs")
    # A notebook that names no assignment: its row and message (in the course's language) are this
    # process's, never a lane's (a lane once named it in English).
    (subs / "dee.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}),
                                    encoding="utf-8")
    done = subprocess.run([sys.executable, str(FORKED), str(subs), str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.split("REPORT", 1)[1])
    assert "busy-thread" in report["with_thread"] and report["without"] is None
    assert report["graded"] == ROWS + 1      # and dee's
    assert report["lanes"] == "1 forked" and report["same"]
    assert report["killed_lanes"].startswith("1 forked (stopped early") and report["killed_same"]
    assert "Resource temporarily unavailable" in report["fork_error"] and report["left"] == []
    assert "grading lanes in other processes stopped" in done.stderr


@pytest.mark.slow
def test_the_command_forks_its_lanes_and_writes_the_same_grades(tmp_path):
    subs = quick_samples(tmp_path / "subs")
    outs = {}
    for jobs in (1, 2):
        done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "-o", str(tmp_path / f"j{jobs}"),
                               "-j", str(jobs)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "COLUMNS": "200"})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        outs[jobs] = done.stdout
    assert "lanes in other processes: 1 forked" in outs[2] and "lanes in other processes" not in outs[1]
    strip = {k: v[:-1] for k, v in table(tmp_path / "j2").items()}
    assert strip == {k: v[:-1] for k, v in table(tmp_path / "j1").items()} and len(strip) == ROWS


# -- the cold start --------------------------------------------------------------------------
def test_finish_leaves_like_a_normal_exit_without_the_teardown():
    """The console scripts end with errors.finish: threads joined, atexit handlers run, streams flushed,
    the exit code kept; only the interpreter's destruction of its modules is skipped."""
    code = ("import atexit, sys, threading, time\n"
            "atexit.register(lambda: print('handler ran'))\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', flush=True))).start()\n"
            "from autograder.core.errors import finish\n"
            "sys.stdout.write('partial ')\n"
            "finish(3)\n"
            "print('never')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "partial thread done\nhandler ran\n"


def test_grade_starts_its_sandbox_template_before_importing_the_command():
    """`autograder grade` launches the template (seconds of importing torch) before its own module and
    pydantic are imported; --help launches nothing; the command takes the launch once."""
    code = ("import sys\n"
            "from autograder import cli\n"
            "import autograder.sandbox.launch as W\n"
            "seen = []\n"
            "real = W.launch_template\n"
            "def spy(*a, **k):\n"
            "    seen.append('autograder.commands.grade' in sys.modules or 'pydantic' in sys.modules)\n"
            "    return real(*a, **k)\n"
            "W.launch_template = spy\n"
            "cli.build_parser(['grade', 'subs', '-o', 'out'])\n"
            "launch = W.take_early_launch()\n"
            "print(seen, launch is not None, W.take_early_launch() is None)\n"
            "launch.close()\n"
            "cli.build_parser(['grade', '--help'])\n"
            "print(len(W._EARLY), len(seen))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["[False] True True", "0 1"]


def test_lanes_are_never_forked_from_a_process_that_initialized_cuda(monkeypatch):
    """A CUDA context does not survive a fork (--device cuda): such a grader spawns lanes or uses threads."""
    import torch

    from autograder.grading.forked_lanes import fork_problem

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "CUDA is initialized" in fork_problem()


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


@pytest.mark.slow
def test_a_stopped_batch_keeps_what_it_graded_leaves_no_process_and_resumes(tmp_path):
    """SIGTERM (a scheduler's kill, as Ctrl-C) in the middle of `autograder grade -j 2`: exit 130, every
    result written so far kept, the forked lane, the templates and every worker gone, and the same
    command finishes the rest."""
    import time

    subs = tmp_path / "subs"
    for copy in range(4):
        for name in QUICK:
            shutil.copytree(SAMPLES / name, subs / f"{name}{copy}")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "autograder", "grade", str(subs), "-o", str(out), "-j", "2"]
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 300
    family: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        family |= _children(proc.pid)
        family |= {g for c in list(family) for g in _children(c)}
        if len(list((out / "results").glob("*.json"))) >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the batch ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, said[-3000:]
    assert "interrupted" in said and "run the same command again" in " ".join(said.split())
    kept = len(list((out / "results").glob("*.json")))
    assert 3 <= kept < 4 * ROWS
    # The template and the forked lane (children), the lane's template and workers (grandchildren): all gone
    # (polled: the last of them may still be exiting when the command returns).
    deadline = time.monotonic() + 30
    while [p for p in family if running(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(family) >= 3 and not [p for p in family if running(p)], said[-2000:]
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"{kept} kept from an earlier run" in " ".join(again.stdout.split())
    assert len(list((out / "results").glob("*.json"))) == 4 * ROWS


@pytest.mark.slow
def test_where_forking_is_refused_the_lanes_are_spawned_and_grade_alike(tmp_path, sandbox, monkeypatch):
    monkeypatch.setattr(forked_lanes, "fork_problem", lambda: "refused by this test")
    subs = quick_samples(tmp_path / "subs")
    reference = G.grade_batch(G.plan(subs, COURSE, tmp_path / "ref"), sandbox, jobs=1)
    spawned = G.grade_batch(G.plan(subs, COURSE, tmp_path / "out"), sandbox, jobs=2, processes=1)
    assert spawned.lanes == "1 spawned" and spawned.graded == ROWS
    assert scores(spawned) == scores(reference)


# -- CPUs per lane -----------------------------------------------------------------------------
def test_lane_cpus_two_each_where_they_fit_else_one_each_else_none(monkeypatch):
    from autograder.sandbox import affinity
    from autograder.sandbox.affinity import LaneCpus

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    # a CPU for the grader thread and one for its workers, the last ones first
    assert affinity.lane_cpus(1) == [LaneCpus(2, 3)] and affinity.lane_cpus(2) == [LaneCpus(0, 1), LaneCpus(2, 3)]
    assert all(c.split for c in affinity.lane_cpus(2))
    # one each, shared by the grader thread and its workers
    assert affinity.lane_cpus(3) == [LaneCpus(1, 1), LaneCpus(2, 2), LaneCpus(3, 3)]
    assert affinity.lane_cpus(4) == [LaneCpus(c, c) for c in range(4)] and not affinity.lane_cpus(4)[0].split
    assert affinity.lane_cpus(5) is None            # more lanes than CPUs: the scheduler places them
    monkeypatch.setenv("AUTOGRADER_LANE_CPUS", "1")     # one each, asked for: the other CPUs left alone
    assert affinity.lane_cpus(1) == [LaneCpus(3, 3)] and affinity.lane_cpus(2) == [LaneCpus(2, 2), LaneCpus(3, 3)]
    monkeypatch.delenv("AUTOGRADER_LANE_CPUS")
    monkeypatch.setenv("AUTOGRADER_PIN", "0")
    assert affinity.lane_cpus(2) is None
    monkeypatch.delenv("AUTOGRADER_PIN")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {5})
    assert affinity.lane_cpus(1) is None            # one CPU: nothing to choose


def test_a_pinned_lane_forks_its_workers_onto_its_own_cpus_and_spins_only_where_they_are_two(sandbox):
    import threading

    from autograder.course.notebook import Cell
    from autograder.inside.probes import Request
    from autograder.sandbox import affinity

    cpus = affinity.lane_cpus(1)
    seen: dict[str, object] = {}

    def lane() -> None:
        affinity.pin_lane(cpus[0] if cpus else None)
        seen["spin"] = affinity.spin_seconds()
        with sandbox.open([Cell(0, None, "def f(x):\n    return x + 1", "def f(x):\n    return x + 1", None)],
                          label="pin") as worker:
            seen["worker"] = os.sched_getaffinity(worker.pid)
            seen["answers"] = [worker(Request("f", (i,))).value().to_python() for i in range(50)]
        seen["thread"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=lane)
    thread.start()
    thread.join(60)
    assert seen["answers"] == list(range(1, 51))     # a spinning pair answers as a sleeping one does
    if cpus:        # this machine has CPUs to spare: the lane's thread on one, its worker on its own
        assert seen["thread"] == {cpus[0].grader} and seen["worker"] == {cpus[0].worker}
        assert seen["spin"] == (affinity.SPIN_SECONDS if cpus[0].split else 0.0)
    else:
        assert seen["worker"] == os.sched_getaffinity(0)     # nothing pinned anywhere
        assert seen["spin"] == 0.0
    assert affinity.spin_seconds() == 0.0             # the test's own thread is no lane
    assert cpus is None or os.sched_getaffinity(0) != {cpus[0].grader}     # the test's own thread is not pinned
