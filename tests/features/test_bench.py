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


def _bench_module(name: str):
    """bench/NAME.py as a module (bench/ is scripts, not a package), loaded once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def _bench():
    return _bench_module("bench_peers")


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


# -- bench/bench_similarity.py (issue 69) ----------------------------------------------------------------------
def _similarity():
    return _bench_module("bench_similarity")


@pytest.fixture(scope="module")
def small_class(tmp_path_factory):
    """40 students (the fewest 20 copy pairs need) x every assignment, generated once for the tests below."""
    bench = _similarity()
    folder = tmp_path_factory.mktemp("class")
    from similarity_class import generate

    return folder, generate(folder, 40, COURSE, 7, bench._make_samples())


def test_the_class_has_twenty_copy_pairs_four_per_disguise_over_distinct_students(small_class) -> None:
    from similarity_class import DISGUISES, PARTIAL_EXERCISES

    _, truth = small_class
    assert len(truth.pairs) == 20
    assert {d: sum(p.disguise == d for p in truth.pairs) for d in DISGUISES} == dict.fromkeys(DISGUISES, 4)
    students = [s for p in truth.pairs for s in (p.source, p.copier)]
    assert len(set(students)) == 40                                  # nobody copies twice or is copied twice
    for a in COURSE.assignments:                                     # four pairs per assignment
        assert sum(p.assignment == a.id for p in truth.pairs) == 4
    for d in DISGUISES:                                              # each disguise over four assignments
        assert len({p.assignment for p in truth.pairs if p.disguise == d}) == 4
    for p in truth.pairs:
        ids = [e.id for e in COURSE.assignment(p.assignment).exercises]
        assert p.exercises == (sorted(p.exercises) if p.disguise == "partial" else ids)
        assert len(p.exercises) == (PARTIAL_EXERCISES if p.disguise == "partial" else len(ids))
    assert truth.reference_like, "conformists who wrote the reference everywhere: some pairs of them"
    injected = {frozenset((p.source, p.copier)) for p in truth.pairs}
    assert not any(frozenset((a, b)) in injected for _, a, b in truth.reference_like)


def test_every_generated_notebook_is_json_and_defines_each_exercise(small_class) -> None:
    import ast

    from autograder.course.config import grade_id

    folder, truth = small_class
    for a in COURSE.assignments:
        for student in truth.students:
            nb = json.loads((folder / student / a.id / a.notebook).read_text(encoding="utf-8"))
            cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): c["source"] for c in nb["cells"]}
            for ex in a.exercises:
                tree = ast.parse(cells[grade_id(ex.id)])
                assert ex.function in {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}, \
                    (student, ex.id)
                assert "NotImplementedError" not in cells[grade_id(ex.id)], (student, ex.id)
            for q in a.questions:
                assert cells["q" + q.id.replace(".", "_")].strip() not in ("", "在这里写下你的回答。"), (student, q.id)


def test_copies_are_disguised_and_honest_reference_like_pairs_are_the_same_code(small_class) -> None:
    """A copy is not its source's text (the partial copy: on the exercises not copied); an honest
    reference-like pair turns in the same code once comments, layout and docstrings are set aside."""
    import ast

    from autograder.course.config import grade_id

    folder, truth = small_class

    def cells(student: str, assignment) -> dict[str, str]:
        nb = json.loads((folder / student / assignment.id / assignment.notebook).read_text(encoding="utf-8"))
        return {c["metadata"].get("nbgrader", {}).get("grade_id"): c["source"] for c in nb["cells"]}

    def normalized(code: str) -> str:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and isinstance(body[0], ast.Expr) and \
                    isinstance(body[0].value, ast.Constant) and len(body) > 1:
                node.body = body[1:]
        return ast.dump(tree)

    for p in truth.pairs:
        a = COURSE.assignment(p.assignment)
        source, copy = cells(p.source, a), cells(p.copier, a)
        ids = [grade_id(e.id) for e in a.exercises]
        if p.disguise == "partial":
            assert all(source[grade_id(e)] == copy[grade_id(e)] for e in p.exercises), p
            assert any(source[g] != copy[g] for g in ids if g not in {grade_id(e) for e in p.exercises}), p
        else:
            assert [source[g] for g in ids] != [copy[g] for g in ids], p
        if p.disguise == "reformatted":     # the code itself is the source's
            assert all(normalized(source[g]) == normalized(copy[g]) for g in ids), p
    for assignment_id, a, b in truth.reference_like[:50]:
        assignment = COURSE.assignment(assignment_id)
        first, second = cells(a, assignment), cells(b, assignment)
        for ex in assignment.exercises:
            assert normalized(first[grade_id(ex.id)]) == normalized(second[grade_id(ex.id)]), (a, b, ex.id)


def test_the_scores_share_ties_out_and_count_each_pair_once() -> None:
    bench = _similarity()
    from similarity_class import CopyPair, Truth

    disguises = ["renamed"] * 4 + ["reordered"] * 4 + ["reformatted"] * 4 + ["equivalent"] * 4 + ["partial"] * 4
    pairs = [CopyPair("02_qkv_attention", f"c{i:02d}", f"d{i:02d}", d, []) for i, d in enumerate(disguises)]
    truth = Truth(1, [], pairs, [("02_qkv_attention", "h1", "h2"), ("02_qkv_attention", "h3", "h4")])
    run = bench.ToolRun("t")
    for i, p in enumerate(pairs[:15]):                      # 15 copies ranked first
        run.scores[bench.pair(p.copier, p.source)] = 1.0 - i / 100
    run.scores[("h1", "h2")] = 0.5                          # then 10 pairs tied at 0.5: 5 slots left
    for i in range(9):
        run.scores[(f"x{i}", f"y{i}")] = 0.5
    run.reported = set(run.scores)
    score = bench.evaluate(run, truth)
    assert score.precision == 15 / 20 and score.recall == 15 / 20 and score.reported == 25
    assert score.reference_like_top == 0.5 and score.ties == 10     # one of ten tied pairs, five slots
    assert score.found_top == {"renamed": 4, "reordered": 4, "reformatted": 4, "equivalent": 3, "partial": 0}
    text = bench.markdown([score, bench.evaluate(bench.ToolRun("compare50", ran=False, note="not run: x"), truth)],
                          {"date": "d", "machine": "m", "class": "c", "per_disguise": 4})
    assert "| t | 0.750 (10 pairs tied at the 20th score) | 0.75 (25) | 0.5 |" in text and "| compare50 | — |" in text


def test_compare50_scores_are_read_from_its_index_graph() -> None:
    bench = _similarity()
    html = ('<script>\n            var GRAPH = {"data": {}, "links": [{"index": 0, "source": "/w/s001", '
            '"target": "/w/s002", "value": 10.0}], "nodes": []};\n        </script>')
    assert bench.compare50_graph(html) == [{"index": 0, "source": "/w/s001", "target": "/w/s002",
                                            "value": 10.0}]


@pytest.mark.slow
def test_the_similarity_benchmark_writes_the_table_with_every_tool(tmp_path: Path) -> None:
    """bench/bench_similarity.py end to end on 40 students: the report, copydetect and compare50 each a row of
    the table (the real run, 300 students: docs/project/benchmarks.md)."""
    bench = _similarity()
    ours = bench.has_similarity()
    out = tmp_path / "out"
    code = bench.main(["-n", "40", "-o", str(out)])
    text = (out / "similarity.md").read_text(encoding="utf-8")
    data = json.loads((out / "similarity.json").read_text(encoding="utf-8"))
    rows = {s["tool"]: s for s in data["scores"]}
    for tool in ("copydetect", "compare50"):
        assert rows[tool]["ran"], rows[tool]["note"]
        assert f"| {tool} | " in text and 0 <= rows[tool]["precision"] <= 1 and rows[tool]["wall"] > 0
    if not ours:
        assert code == 1 and not rows["autograder similarity"]["ran"]
        pytest.skip("`autograder similarity` is not a command of this checkout yet: the peers' rows were checked")
    assert code == 0, rows["autograder similarity"]["note"]
    row = rows["autograder similarity"]
    assert row["ran"] and 0 <= row["precision"] <= 1 and 0 <= row["recall"] <= 1 and row["wall"] > 0
    assert "| autograder similarity | " in text and "precision@20 of the report over copydetect's" in text
