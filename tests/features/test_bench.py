"""bench/bench_peers.py: the side-by-side benchmark runs end to end and writes its table and chart.

The smoke test grades 4 generated submissions (one per assignment) with the kit,
and 2 of them with nbgrader and 1 with Otter (seconds per submission each);
the real benchmark is the command in docs/project/benchmarks.md.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from autograder.course.config import load_course
from support import ROOT

COURSE = load_course()


def _bench():
    if "bench_peers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "bench" / "bench_peers.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_peers"] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["bench_peers"]


def test_generated_submissions_cover_every_assignment_and_kind(tmp_path: Path) -> None:
    bench = _bench()
    total = 10 * len(COURSE.assignments)          # ten submissions of each assignment
    subs = bench.generate(tmp_path, total, COURSE)
    assert len(subs) == total and len({s.student for s in subs}) == total
    for a in COURSE.assignments:
        mine = [s for s in subs if s.assignment == a.id]
        assert len(mine) == 10
        assert {s.kind for s in mine} == {"correct", "mistake", "partial", "stub"}
        assert sum(s.kind == "correct" for s in mine) == 6
        for s in mine:  # nbgrader's layout: submitted/<student>/<assignment>/<notebook>
            assert (tmp_path / s.student / a.id / a.notebook).is_file()
    # The known mistake is in the notebook, and nothing else of the solution changed.
    mistaken = next(s for s in subs if s.assignment == "03_padding_masks" and s.kind == "mistake")
    text = (tmp_path / mistaken.rel).read_text(encoding="utf-8")
    assert "masked_fill(mask, -1e9)" in text
    # three rounds of every assignment for nbgrader, one submission of each for otter (12 and 4 with four
    # assignments, the benchmark's defaults: they predate the fifth)
    n = len(COURSE.assignments)
    nb_subset, otter_subset = bench.peer_subsets(subs, n, 3 * n, n)
    assert len(nb_subset) == 3 * n and {s.kind for s in nb_subset} == {"correct", "mistake", "stub"}
    assert {s.assignment for s in nb_subset} == {a.id for a in COURSE.assignments}
    assert len(otter_subset) == n and all(s in nb_subset for s in otter_subset)
    assert {s.assignment for s in otter_subset} == {a.id for a in COURSE.assignments}
    assert {s.kind for s in otter_subset} == {"correct", "mistake", "stub"}


def test_agreement_reports_every_disagreement() -> None:
    bench = _bench()
    sub = bench.Sub(0, "s000", "02_qkv_attention", "mistake", "02_qkv_attention.ipynb")
    full = {e.id: float(e.points) for e in COURSE.assignment("02_qkv_attention").exercises}
    tools = {"kit": {"s000": {**full, "2.4": 1.090909}}, "nbgrader": {"s000": full}, "otter": {}}
    compared, disagreements = bench.agreement([sub], COURSE, tools)
    assert compared == len(full) and len(disagreements) == 1
    d = disagreements[0]
    assert d.exercise == "2.4" and d.verdicts == {"kit": "fail (1.09091/3)", "nbgrader": "pass"}


@pytest.mark.slow
def test_the_run_writes_the_table_and_the_chart_and_its_peers_agree(tmp_path: Path) -> None:
    """Issue 54, 1: the benchmark behind the kit's headline figure writes its table, chart and data, and runs its
    peers too (nbgrader autograde and `otter run`, installed by the set-up) on a few submissions, finding no
    disagreement in verdicts. One run for both: the kit's measurements are the same with or without the peers."""
    bench = _bench()
    out = tmp_path / "bench-out"
    code = bench.main(["-n", "4", "--repeats", "1", "--kernel-calls", "2", "--nbgrader", "2", "--nbgrader-repeats",
                       "1", "--otter", "1", "-o", str(out)])
    assert code == 0
    text = (out / "results.md").read_text(encoding="utf-8")
    assert "| kit: autograder grade -j 1 | 4 | 1 |" in text and "| kit: autograder grade -j 2 | 4 | 1 |" in text
    assert 'kit: warm check("2.4") in a kernel' in text and "kit: cold start, one submission" in text
    assert "## Where the kit's time goes" in text and "| ipc |" in text and "| write |" in text
    png = (out / "results.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = {r["tool"]: r for r in data["rows"]}
    kit = rows["kit: autograder grade -j 1"]
    assert 0 < kit["per_submission"] < kit["wall_per_submission"]
    assert 'nbgrader autograde "*"' in rows and "otter run (one process each)" in rows
    assert data["disagreements"] == [] and sorted(data["verdicts"]["kit"]) == ["s000", "s001", "s002", "s003"]
    # Every generated submission is correct here: full points on every exercise.
    for student, points in data["verdicts"]["kit"].items():
        assignment = COURSE.assignments[int(student[1:]) % 4]
        assert points == {e.id: float(e.points) for e in assignment.exercises}, student
    assert sorted(data["verdicts"]["nbgrader"]) == ["s000", "s001"] and len(data["verdicts"]["otter"]) == 1
    for tool in ("nbgrader", "otter"):
        for student, points in data["verdicts"][tool].items():
            assert points == data["verdicts"]["kit"][student], (tool, student)


@pytest.mark.slow
def test_the_service_benchmark_runs_and_checks_one_result_per_upload(tmp_path: Path) -> None:
    """bench/bench_service.py end to end, small: SQLite only, 4 notebooks, 2 clients (the real run: docs/)."""
    spec = importlib.util.spec_from_file_location("bench_service", ROOT / "bench" / "bench_service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "service.md"
    assert module.main(["-n", "4", "--clients", "2", "--lone", "1", "--no-postgres", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| SQLite |" in text and "(expected 7)" in text and "7 / 7" in text


@pytest.mark.slow
def test_the_roundtrip_benchmark_times_every_line_against_its_back_to_back_call(capsys) -> None:
    """bench/bench_roundtrip.py end to end with a few calls a line: both lane layouts, every argument kind
    and gap, each line's ratio to the same call back to back (1.00 for the back-to-back line itself)."""
    spec = importlib.util.spec_from_file_location("bench_roundtrip", ROOT / "bench" / "bench_roundtrip.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["-n", "3"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| two CPUs") or
            line.startswith("| one CPU")]
    layouts = 2 if len(os.sched_getaffinity(0)) >= 2 else 1        # two CPUs for a lane only where there are
    assert len(rows) == layouts * 3 * len(module.GAPS_MS)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[3]) > 0 and float(cells[4]) > 0
        if cells[2] == "0 ms":
            assert cells[4] == "1.00"


@pytest.mark.slow
def test_the_lti_benchmark_times_launches_and_drains_every_changed_score_once_in_order(tmp_path: Path) -> None:
    """bench/bench_lti.py end to end, small (issue 52): 3 students launched twice, 20 score changes of 5 LMS members
    drained to the simulated platform, every one received once and in order (the real run: docs/)."""
    spec = importlib.util.spec_from_file_location("bench_lti", ROOT / "bench" / "bench_lti.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "lti.md"
    assert module.main(["--launches", "3", "--students", "5", "--changes", "20", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for row in ("first launch, POST to page", "launch again, the tool's part", "the plain page, signed in (baseline)"):
        assert f"| {row} |" in text, row
    # 2 tokens (line items, scores: cached after), each of the two line items looked for and made once, 20 scores.
    assert "| requests to the platform | 26: 2 token, 2 line-item GET, 2 line-item POST, 20 score POST |" in text
    assert "| token requests the platform counted | 2 |" in text
    assert "| scores received / expected (the history's changes) | 20 / 20 |" in text
    assert "| lost / duplicated / beyond the history | 0 / 0 / 0 |" in text
    assert "| cells (student x line item) received in the order of the changes | 10 / 10 (timestamps in order: yes) |" \
        in text and "| outbox rows still pending | 0 |" in text
    # The checks the exit status rests on catch a lost, a duplicated or a reordered score.
    good = {"passback": {"noted": 20, "changes": 20, "expected": 20, "received": 20, "sent": 20, "lost": 0,
                         "duplicated": 0, "extra": 0, "failed": 0, "pending_after": 0, "cells_in_order": 10,
                         "cells": 10, "timestamps_in_order": True}}
    assert module.healthy(good)
    for change in ({"lost": 1, "received": 19}, {"duplicated": 1}, {"cells_in_order": 9}):
        assert not module.healthy({"passback": {**good["passback"], **change}}), change
