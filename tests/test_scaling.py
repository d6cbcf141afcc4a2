"""``-j N`` in N processes: the same rows and scores as threads, one writer, nothing lost when a lane fails."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import grading as G
from autograder.grading import lanes
from autograder.config import load_course
from autograder.sandbox import Sandbox
from support import ROOT

COURSE = load_course()
SAMPLES = ROOT / "samples" / "submissions"
#: Sample submissions that grade quickly (eve's crashing worker takes seconds and is graded elsewhere).
QUICK = ("ada", "ben", "chen", "dana", "finn")


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


@pytest.fixture(scope="module")
def sandbox():
    import torch

    torch.set_num_threads(1)
    with Sandbox(COURSE.limits, "cpu") as sb:
        yield sb


def test_lanes_go_to_processes_only_for_batches_worth_it():
    assert G.lane_processes(1, 10_000) == 0                       # -j 1: this process alone
    assert G.lane_processes(2, G.PROCESS_MIN_SUBMISSIONS - 1) == 0  # a short batch: threads here
    assert G.lane_processes(2, G.PROCESS_MIN_SUBMISSIONS) == 1
    assert G.lane_processes(32, 1000) == 1000 // G.PROCESS_MIN_SUBMISSIONS   # 15: each lane worth its start-up
    assert G.lane_processes(32, 10_000) == 31
    assert G.lane_processes(32, 3 * G.PROCESS_MIN_SUBMISSIONS) == 3


@pytest.mark.slow
def test_process_lanes_grade_like_threads_and_resume(tmp_path, sandbox):
    subs = quick_samples(tmp_path / "subs")
    here = G.plan(subs, COURSE, tmp_path / "threads")
    threads = G.grade_batch(here, sandbox, jobs=2, processes=0)
    far = G.plan(subs, COURSE, tmp_path / "lanes")
    lanes = G.grade_batch(far, sandbox, jobs=2, processes=1)
    assert lanes.graded == threads.graded == 8
    assert scores(lanes) == scores(threads)
    # Rows are equal but for the time of grading.
    strip = {k: v[:-1] for k, v in table(tmp_path / "lanes").items()}
    assert strip == {k: v[:-1] for k, v in table(tmp_path / "threads").items()} and len(strip) == 8
    for r in lanes.results:   # written by this process, feedback included
        assert json.loads((tmp_path / "lanes" / "results" / f"{r['key']}.json").read_text(encoding="utf-8"))
        assert (tmp_path / "lanes" / "feedback" / f"{r['key']}.html").is_file()
    again = G.grade_batch(G.plan(subs, COURSE, tmp_path / "lanes"), sandbox, jobs=2, processes=1)
    assert (again.graded, again.resumed) == (0, 8)


@pytest.mark.slow
def test_a_lane_that_cannot_grade_hands_its_submissions_back(tmp_path, sandbox, caplog):
    subs = quick_samples(tmp_path / "subs")
    batch = G.plan(subs, COURSE, tmp_path / "out")
    reference = G.grade_batch(G.plan(subs, COURSE, tmp_path / "ref"), sandbox, jobs=1, processes=0)
    # A lane whose kit differs from this one refuses to grade: this process grades everything instead.
    batch.fingerprint = "0" * 16
    outcome = G.grade_batch(batch, sandbox, jobs=2, processes=1)
    assert outcome.graded == 8 and len(table(tmp_path / "out")) == 8
    assert {k: v[:2] for k, v in scores(outcome).items()} == {k: v[:2] for k, v in scores(reference).items()}
    assert "grading lanes in other processes stopped" in caplog.text


def test_lane_grade_sends_only_json(tmp_path):
    """One lane in this process: JSON text out, the notebook given as bytes (as a Dask worker gets it)."""
    subs = quick_samples(tmp_path / "subs")
    batch = G.plan(subs, COURSE, tmp_path / "out")
    sub = next(s for s in batch.found.submissions if s.student == "ben")
    config = G.lane_config(batch, None, "en")
    json.dumps(config)
    try:
        text = G.lane_grade(config, G.submission_json(sub), sub.path.read_bytes())
    finally:
        box = lanes._LANE.pop("sandbox", None)
        lanes._LANE.clear()
        if box is not None:
            box.close()
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
