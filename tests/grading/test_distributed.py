"""``autograder grade --scheduler``: a Dask LocalCluster of 2 worker processes grades like a local run, and a
worker killed mid-batch loses no submission. Dask is installed by scripts/setup.sh (the ``dask`` extra)."""
from __future__ import annotations

import csv
import os
import shutil
import signal

import pytest

from autograder import grading as G
from autograder.course.config import load_course
from autograder.sandbox import Sandbox
from support import ROOT

COURSE = load_course()
SAMPLES = ROOT / "samples" / "submissions"
QUICK = ("ada", "ben", "chen", "dana", "finn")   # a row per notebook, finn's unreadable one included
ROWS = sum(1 for name in QUICK for _ in (ROOT / "samples" / "submissions" / name).glob("*.ipynb"))


def quick_samples(folder):
    for name in QUICK:
        shutil.copytree(SAMPLES / name, folder / name)
    return folder


def scores(outcome):
    return {r["key"]: (r["points"], r["status"], [(e["exercise"], e["points"]) for e in r["exercises"]])
            for r in outcome.results}


def table(out):
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        return {f"{r['student']}/{r['assignment']}": (r["total"], r["status"]) for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def cluster():
    from dask.distributed import Client, LocalCluster   # not importorskip: setup.sh installs the extra

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            Client(lc) as client:
        yield lc, client


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The reference: the same submissions graded locally."""
    import torch

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("local")
    subs = quick_samples(tmp / "subs")
    with Sandbox(COURSE.limits, "cpu") as sb:
        outcome = G.grade_batch(G.plan(subs, COURSE, tmp / "out"), sb, jobs=1)
    return outcome, table(tmp / "out")


@pytest.mark.slow
def test_a_cluster_grades_like_a_local_run_and_resumes(tmp_path, cluster, local):
    lc, _client = cluster
    subs = quick_samples(tmp_path / "subs")
    outcome = G.grade_batch(G.plan(subs, COURSE, tmp_path / "out"), None, jobs=2, scheduler=lc.scheduler_address)
    assert outcome.graded == ROWS
    assert scores(outcome) == scores(local[0])
    assert table(tmp_path / "out") == local[1]
    for r in outcome.results:
        assert (tmp_path / "out" / "feedback" / f"{r['key']}.md").is_file()
        assert r["status"].startswith("unreadable") or r["isolation"]["mode"] != "none"
    again = G.grade_batch(G.plan(subs, COURSE, tmp_path / "out"), None, jobs=2, scheduler=lc.scheduler_address)
    assert (again.graded, again.resumed) == (0, ROWS)


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing(tmp_path, cluster, local):
    lc, client = cluster
    subs = quick_samples(tmp_path / "subs")
    killed = []

    def kill_a_busy_worker(result):
        if killed:
            return
        busy = [w for w, keys in client.processing().items() if keys]
        if busy:
            for address, pid in client.run(os.getpid, workers=busy[:1]).items():
                os.kill(pid, signal.SIGKILL)
                killed.append(address)

    outcome = G.grade_batch(G.plan(subs, COURSE, tmp_path / "out"), None, jobs=2, scheduler=client,
                            on_result=kill_a_busy_worker)
    assert killed, "no worker was busy after the first result"
    assert outcome.graded == ROWS and len(table(tmp_path / "out")) == ROWS
    assert scores(outcome) == scores(local[0])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_command_grades_on_a_cluster_started_apart(tmp_path):
    """As a user runs it (issue 25, item 11): a scheduler and a worker started by `dask`, then
    `autograder grade --scheduler` in a process of its own, which holds no Dask client but its own."""
    import subprocess
    import sys
    import time

    bin_dir = os.path.dirname(sys.executable)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    logs = tmp_path / "dask.log"
    with open(logs, "wb") as log:
        scheduler = subprocess.Popen([os.path.join(bin_dir, "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                                      str(port), "--no-dashboard"], stdout=log, stderr=log, env=env, cwd=ROOT)
        worker = subprocess.Popen([os.path.join(bin_dir, "dask"), "worker", address, "--nworkers", "1",
                                   "--nthreads", "1", "--no-dashboard"], stdout=log, stderr=log, env=env, cwd=ROOT)
        try:
            from dask.distributed import Client

            deadline = time.monotonic() + 120
            while True:                      # poll until the worker has joined (no fixed sleep)
                try:
                    with Client(address, timeout="5s") as probe:
                        if probe.nthreads():
                            break
                except OSError:
                    pass
                assert time.monotonic() < deadline, logs.read_text(errors="replace")
                time.sleep(0.5)
            subs = quick_samples(tmp_path / "subs")
            done = subprocess.run([os.path.join(bin_dir, "autograder"), "grade", str(subs), "-o", str(tmp_path / "out"),
                                   "--scheduler", address], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Traceback" not in done.stderr, done.stderr
            rows = table(tmp_path / "out")
            full = f"{COURSE.assignment('02_qkv_attention').points:g}"        # ada's sample solves all of 02
            assert len(rows) == ROWS and rows["ada/02_qkv_attention"][0] == full, rows
        finally:
            for proc in (worker, scheduler):
                proc.terminate()
            for proc in (worker, scheduler):
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
