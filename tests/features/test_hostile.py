"""Issue 9: nothing a submission contains stops the batch, floods the outputs or reaches the
instructor's tools. Each hostile case is graded between honest submissions, which keep their
exact scores; every hostile one gets its own row."""
from __future__ import annotations

import copy
import csv
import io
import json
import os
import zipfile
from pathlib import Path

import nbformat
import pytest
from rich.console import Console

from support import make_samples as MS
from autograder import grading as G
from autograder import reports as R
from autograder.course.config import load_course
from autograder.reports.lms import write_lms_csv
from autograder.grading.archives import extract_zip
from autograder.grading.submissions import discover

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
FULL = QKV.points
LIMITS = COURSE.limits.model_copy(update={"call_seconds": 4.0, "submission_seconds": 60.0})
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def write_nb(path: Path | bytes, nb) -> None:
    text = nb if isinstance(nb, str) else json.dumps(nb, indent=1, ensure_ascii=False)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def correct() -> nbformat.NotebookNode:
    return MS.submission(QKV, solved="all")


def with_cell(code: str, nb: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    """A correct notebook with one more code cell of the student's."""
    nb = copy.deepcopy(nb or correct())
    nb.cells.append(nbformat.v4.new_code_cell(code))
    return nb


def replaced(gid: str, code: str) -> nbformat.NotebookNode:
    nb = correct()
    cell = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)
    cell.source = code
    return nb


def grade(subs: Path, out: Path, sandbox) -> G.BatchOutcome:
    batch = G.plan(subs, COURSE, out)
    outcome = G.grade_batch(batch, sandbox, jobs=2)
    batch.outputs.report(outcome.results)
    write_lms_csv(outcome.results, COURSE, out)
    return outcome


def csv_cells(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


def assert_safe_csv(out: Path) -> None:
    for name in ("grades.csv", "canvas.csv", "moodle.csv"):
        for row in csv_cells(out / name)[1:]:
            for cell in row:
                assert not cell.startswith(FORMULA), (name, row)


HONEST = {"ada": correct, "ben": lambda: MS.submission(QKV, solved=("2.1", "2.2", "2.3"))}


def honest_scores(results: dict[str, dict]) -> dict[str, float]:
    return {s: results[s]["points"] for s in HONEST}


@pytest.fixture(scope="module")
def reference_scores(tmp_path_factory, sandbox) -> dict[str, float]:
    subs = tmp_path_factory.mktemp("honest") / "subs"
    for student, make in HONEST.items():
        write_nb(subs / student / "02_qkv_attention.ipynb", make())
    outcome = grade(subs, subs.parent / "out", sandbox)
    return {r["student"]: r["points"] for r in outcome.results}


# -- each case from the issue, in one batch between honest submissions -------------------------------
NESTED = ("x = " + "-" * 100_000 + "1",      # MemoryError in Python's parser
          "x = 1" + "+1" * 100_000)           # RecursionError while building the tree
HUGE_CELL = "y = [" + "1, " * 2_500_000 + "]"                    # one 7.5 MB cell
LONG_TYPE = '''
import math, torch
def scaled_dot_product_attention(Q, K, V):
    name = "T" + str(Q.tolist()) * 20000                   # a class named after its (hidden) input
    cls = type(name[:4 << 20], (), {})
    return cls(), cls()
'''


@pytest.mark.slow
def test_hostile_submissions_each_get_a_row_and_stop_nothing(tmp_path, sandbox, reference_scores):
    subs = tmp_path / "subs"
    for student, make in HONEST.items():
        write_nb(subs / student / "02_qkv_attention.ipynb", make())
    cases = {
        "surrogate": with_cell('raise RuntimeError("\\ud800 in a message")'),
        "nested": with_cell(NESTED[1], with_cell(NESTED[0])),
        "huge-cell": with_cell(HUGE_CELL),
        "long-type": replaced("ex2_4", LONG_TYPE),
        "=HYPERLINK(\"http://x\")": correct(),
        "+1": correct(), "-2": correct(), "@SUM(A1)": correct(),
        "Points Possible": correct(),
        "esc\x1b[31mred\x07": correct(),
        "张" * 80: correct(),                                        # 240 bytes of UTF-8
    }
    for student, nb in cases.items():
        write_nb(subs / student / "02_qkv_attention.ipynb", nb)
    # A folder name that is not UTF-8 at all.
    write_nb(os.path.join(os.fsencode(subs), b"bad\xff\xfename", b"02_qkv_attention.ipynb"), correct())
    out = tmp_path / "out"
    outcome = grade(subs, out, sandbox)

    results = {r["source"].split("/")[0]: r for r in outcome.results}
    assert len(outcome.results) == len(HONEST) + len(cases) + 1 == len(list((out / "results").glob("*.json")))
    by_student = {r["student"]: r for r in outcome.results}
    assert honest_scores(by_student) == reference_scores
    # Every result is valid UTF-8 JSON within its cap; every name a file system takes.
    for path in (out / "results").glob("*.json"):
        data = path.read_bytes()
        assert len(data) <= G.RESULT_MAX_BYTES and len(path.name.encode()) <= 255
        json.loads(data.decode("utf-8"))
    for path in (out / "feedback").iterdir():
        assert path.stat().st_size <= 4 * G.RESULT_MAX_BYTES
    # The surrogate and the nested expression fail only their cell.
    assert results["surrogate"]["points"] == FULL and "\ufffd" in json.dumps(results["surrogate"]["cells"],
                                                                              ensure_ascii=False)
    assert results["nested"]["points"] == FULL
    # The huge cell is neither parsed nor run.
    huge = [c for c in results["huge-cell"]["cells"] if c["status"] == "skipped" and "limits.cell_kb" in
            (c["message"] or "")]
    assert huge and results["huge-cell"]["points"] == FULL
    # The 4 MiB class name reaches no output beyond a short description.
    long_type = json.dumps(results["long-type"], ensure_ascii=False)
    assert "T" * 200 not in long_type and len(long_type) < 200_000
    assert by_student["张" * 80]["points"] == FULL
    bad = next(r for r in outcome.results if r["source"].startswith("bad"))
    assert bad["points"] == FULL and bad["student"] == "bad\\xff\\xfename"     # shown, and told apart
    # No formula reaches a spreadsheet; "Points Possible" is Canvas' row once.
    assert_safe_csv(out)
    canvas = csv_cells(out / "canvas.csv")
    assert [row[0] for row in canvas].count("Points Possible") == 1
    assert "'Points Possible" in [row[0] for row in canvas]
    # No escape sequence reaches the terminal.
    buffer = io.StringIO()
    R.print_summary(Console(file=buffer, force_terminal=False, width=200), outcome.results, COURSE)
    assert "\x1b" not in buffer.getvalue() and "\x07" not in buffer.getvalue()
    assert "escred" in buffer.getvalue().replace("[31m", "")


def test_zip_members_that_cannot_be_extracted_are_refused_one_by_one(tmp_path):
    archive = tmp_path / "class.zip"
    nb = json.dumps(correct())
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ada/02_qkv_attention.ipynb", nb)
        zf.writestr("ben", "a file")                                   # ... and a folder of the same name
        zf.writestr("ben/02_qkv_attention.ipynb", nb)
        zf.writestr("x" * 300 + "/02_qkv_attention.ipynb", nb)        # a name part over 255 bytes
        zf.writestr("cy/02_qkv_attention.ipynb", nb)
    dest = tmp_path / "x"
    dest.mkdir()
    extraction = extract_zip(archive, dest)
    assert set(extraction.refused) == {"ben/02_qkv_attention.ipynb", "x" * 300 + "/02_qkv_attention.ipynb"}
    assert all("cannot be extracted" in why for why in extraction.refused.values())
    found = discover(extraction.root, COURSE, refused=extraction.refused)
    assert len(found.submissions) == 4
    assert sum(1 for s in found.submissions if s.problem is None) == 2
    assert all(len(s.key.encode()) < 200 for s in found.submissions)


def test_a_failing_batch_step_is_named_and_loses_no_result(tmp_path, monkeypatch, capsys):
    from autograder.cli import main

    subs = tmp_path / "subs"
    for student in ("ada", "ben"):
        write_nb(subs / student / "02_qkv_attention.ipynb", correct())

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(R, "class_report_html", broken)
    code = main(["grade", str(subs), "-o", str(tmp_path / "out"), "-j", "1"])
    assert code == 1
    text = capsys.readouterr().out
    assert "ERROR" in text and "report.html failed (OSError: disk full)" in text
    assert len(list((tmp_path / "out" / "results").glob("*.json"))) == 2
    assert (tmp_path / "out" / "canvas.csv").exists()      # the steps after the broken one still ran


def test_a_result_that_cannot_be_written_becomes_its_failure_row(tmp_path, sandbox, monkeypatch):
    subs = tmp_path / "subs"
    for student in ("ada", "ben"):
        write_nb(subs / student / "02_qkv_attention.ipynb", correct())
    real = R.feedback_html

    def fails_for_ada(result, course, language):
        if result["student"] == "ada" and result["status"] == R.GRADED:
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real(result, course, language)

    monkeypatch.setattr(R, "feedback_html", fails_for_ada)
    outcome = grade(subs, tmp_path / "out", sandbox)
    rows = {r["student"]: r for r in outcome.results}
    assert rows["ben"]["points"] == FULL
    assert rows["ada"]["status"].startswith("crash: grader error writing the result (UnicodeEncodeError")
    assert rows["ada"]["retry"]
    assert len(list((tmp_path / "out" / "results").glob("*.json"))) == 2


def test_finalize_cuts_visibly():
    result = {"key": "k", "status": "graded", "cells": [{"index": i, "message": "m" * 100} for i in range(2000)],
              "exercises": [{"exercise": "2.4", "function": "attention", "points": 0, "max_points": 3,
                             "status": "graded",
                             "checks": [{"exercise": "2.4", "check": "c", "audience": "hidden", "kind": "numeric",
                                         "title": {"zh": "t", "en": "t"}, "status": "failed", "passed": False,
                                         "points": 0, "max_points": 3,
                                         "message": {"en": "x" * 10_000, "zh": "y"}}] * 300}],
              "notes": [], "notes_msg": []}
    import copy

    out = G.finalize(copy.deepcopy(result), max_bytes=400_000)
    assert out["truncated"] is True and len(R.dump_result(out).encode()) <= 400_000
    assert len(out["cells"]) == G.RESULT_MAX_CELLS and out["notes"] == ["truncated"]
    assert "KiB" in out["notes_msg"][0]["en"]
    assert len(out["exercises"][0]["checks"][0]["message"]["en"]) < 600     # cut, visibly, not dropped
    tight = G.finalize(copy.deepcopy(result), max_bytes=150_000)            # the last resort: messages go
    assert tight["truncated"] is True and tight["cells"] == [] and len(R.dump_result(tight).encode()) <= 150_000
    assert {c["message"] for c in tight["exercises"][0]["checks"]} == {None}
    small = G.finalize({"key": "k", "status": "graded\ud800", "notes": [], "notes_msg": []})
    assert "truncated" not in small and small["status"] == "graded\ufffd"


# -- no unbounded work on student bytes outside the cage (issue 23, item 4) --------------------------
#: IPython rewrites one line per pass over the whole cell: 400 escapes in a 240 KiB cell took minutes.
SLOW_TO_REWRITE = "%a\n" * 400 + "x = 1\n" * 40_000
#: Each cell under the per-cell budget, together far past the submission's.
MANY_COSTLY = ["%a\n" * 100 + "y = 2\n" * 150 + f"z = {i}\n" for i in range(300)]


@pytest.mark.slow
def test_cells_slow_to_rewrite_cost_the_grader_a_bounded_moment(tmp_path, sandbox, reference_scores, monkeypatch):
    import time

    from IPython.core.inputtransformer2 import TransformerManager

    from autograder.course.notebook import IPYTHON_SUBMISSION_LIMIT, IPYTHON_WORK_LIMIT, ipython_work

    spent: list[int] = []
    real = TransformerManager.transform_cell

    def counted(self, cell):
        spent.append(ipython_work(cell))
        return real(self, cell)

    monkeypatch.setattr(TransformerManager, "transform_cell", counted)
    subs = tmp_path / "subs"
    for student, make in HONEST.items():
        write_nb(subs / student / "02_qkv_attention.ipynb", make())
    write_nb(subs / "mallory" / "02_qkv_attention.ipynb", with_cell(SLOW_TO_REWRITE))
    many = correct()
    for code in MANY_COSTLY:
        many.cells.append(nbformat.v4.new_code_cell(code))
    write_nb(subs / "trent" / "02_qkv_attention.ipynb", many)
    start = time.monotonic()
    outcome = grade(subs, tmp_path / "out", sandbox)
    took = time.monotonic() - start
    results = {r["student"]: r for r in outcome.results}
    assert honest_scores(results) == reference_scores
    # The work IPython did, whatever the notebooks held: one cell's budget at most per cell, the
    # submission's in all (the unbounded rewrite would have cost ~50 times the two budgets).
    assert all(w <= IPYTHON_WORK_LIMIT for w in spent) and sum(spent) <= 2 * IPYTHON_SUBMISSION_LIMIT
    assert took < 120, took      # the unbounded rewrite: about 6 minutes of the grader's CPU
    for student in ("mallory", "trent"):
        assert results[student]["points"] == FULL, student        # their answers still count
        skipped = [c for c in results[student]["cells"] if "IPython" in (c.get("message") or "")]
        assert skipped and all(c["status"] == "skipped" for c in skipped), student
        assert all("IPython" in c["said"]["zh"] and "不改写" in c["said"]["zh"] for c in skipped)
