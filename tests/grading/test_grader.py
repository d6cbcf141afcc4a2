"""``autograder grade``: real notebooks in tmp_path, graded in the sandbox; nothing lost, nothing unearned."""
from __future__ import annotations

import copy
import csv
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from support import ROOT, make_samples
from autograder import catalog as C
from autograder import grading as G
from autograder.core import messages as M
from autograder.cli import main
from autograder.course.config import load_course
from autograder.core.errors import AutograderError
from autograder.inside.probes import Reply, Request

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
FULL = QKV.points
#: Full marks as grades.csv writes them (no trailing ".0").
FULL_CSV = f"{FULL:g}"
#: 02's maximum (autograder.course.written.maximum): FULL and its written answer's points, graded or not.
MAX = QKV.points + QKV.manual_points


MS = make_samples




#: Course limits, but an endless loop costs seconds, not the course's call_seconds.
LIMITS = COURSE.limits.model_copy(update={"call_seconds": 4.0, "submission_seconds": 60.0})


# -- notebooks ---------------------------------------------------------------------------
def correct() -> nbformat.NotebookNode:
    return MS.submission(QKV, solved="all")


def write_nb(path: Path, nb: nbformat.NotebookNode | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Raw JSON, not nbformat.writes: a damaged notebook (duplicate cell ids...) must stay damaged.
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def cell_of(nb: nbformat.NotebookNode, gid: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)


def grade(subs: Path, out: Path, sandbox, *, jobs: int = 2, force: bool = False, **kwargs) -> G.BatchOutcome:
    batch = G.plan(subs, COURSE, out, **kwargs)
    outcome = G.grade_batch(batch, sandbox, jobs=jobs, force=force)
    batch.outputs.report(outcome.results)
    return outcome


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        return {f"{r['student']}/{r['assignment']}": r for r in csv.DictReader(f)}


def by_exercise(result: dict) -> dict[str, dict]:
    return {e["exercise"]: e for e in result["exercises"]}


# -- the everyday batch ---------------------------------------------------------------------
def test_correct_partial_mistake_and_stub(tmp_path, sandbox):
    subs = tmp_path / "subs"
    write_nb(subs / "ada" / "02_qkv_attention.ipynb", correct())
    write_nb(subs / "ben" / "02_qkv_attention.ipynb", MS.submission(QKV, solved=("2.1", "2.2", "2.3")))
    write_nb(subs / "chen" / "02_qkv_attention.ipynb",
             MS.submission(QKV, solved=("2.1", "2.2", "2.3"), code={"2.4": MS.NO_SCALE}))
    write_nb(subs / "dana" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    out = tmp_path / "out"
    outcome = grade(subs, out, sandbox, language="en")
    results = {r["student"]: r for r in outcome.results}

    assert results["ada"]["points"] == pytest.approx(FULL) and results["ada"]["status"] == "graded"
    ben = by_exercise(results["ben"])
    assert [ben[e]["points"] for e in ("2.1", "2.2", "2.3")] == [1, 2, 2]
    assert ben["2.4"]["points"] == 0 and ben["2.4"]["status"] == "not_attempted"
    chen = by_exercise(results["chen"])["2.4"]
    assert chen["points"] < 3 and "no-scale" in {c["mistake"] for c in chen["checks"]}
    assert results["dana"]["points"] == 0
    assert {e["status"] for e in results["dana"]["exercises"]} == {"not_attempted"}

    table = rows(out)
    assert set(table) == {f"{s}/02_qkv_attention" for s in ("ada", "ben", "chen", "dana")}
    assert table["ada/02_qkv_attention"]["total"] == FULL_CSV and table["ada/02_qkv_attention"]["max"] == f"{MAX:g}"
    assert table["ben/02_qkv_attention"]["2.4"] == "0" and table["ben/02_qkv_attention"]["total"] == "5"
    for key in ("ada", "ben", "chen", "dana"):
        stored = json.loads((out / "results" / f"{key}__02_qkv_attention.json").read_text(encoding="utf-8"))
        assert stored["sha256"] and stored["timing"]["seconds"] > 0 and stored["cells"]
        for name in (f"{key}__02_qkv_attention.md", f"{key}__02_qkv_attention.html"):
            assert (out / "feedback" / name).stat().st_size > 0
    chen_md = (out / "feedback" / "chen__02_qkv_attention.md").read_text(encoding="utf-8")
    assert "scale is missing" in chen_md and "Diagnosis" in chen_md
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count("data:image/svg+xml;base64,") == 3 and "no-scale" in report
    assert not list(out.rglob(".*.tmp"))


def _hidden_inputs(student: str, fn) -> list[float]:
    """Every number the hidden checks of 02 feed a student whose function behaves like ``fn``."""
    seen: list[Request] = []
    refs = G.check_catalog(COURSE, {QKV.id})
    for ex in QKV.exercises:
        def runner(request: Request, ex=ex) -> Reply:
            seen.append(request)
            return C.in_process_runner({ex.function: fn(ex)})(request)

        C.run_exercise(ex, runner, audiences=(C.Audience.HIDDEN,),
                       tolerances=COURSE.tolerances, seed_parts=(COURSE.seed, student, QKV.id),
                       reference=refs[ex.id], diagnoser=None)
    values: list[float] = []
    for request in seen:
        for arg in (*request.args, *request.kwargs.values()):
            if hasattr(arg, "flatten") and arg.is_floating_point():
                values += [float(v) for v in arg.flatten()[:20] if abs(float(v)) > 0.05]
    return values


def test_feedback_never_shows_hidden_inputs(tmp_path, sandbox):
    import solutions.qkv_attention as ref

    subs = tmp_path / "subs"
    write_nb(subs / "chen" / "02_qkv_attention.ipynb",
             MS.submission(QKV, solved=("2.1", "2.2", "2.3"), code={"2.4": MS.NO_SCALE}))
    out = tmp_path / "out"
    grade(subs, out, sandbox, language="en")
    # The same seeds give the same hidden inputs: regenerate them on the trusted side.
    no_scale = next(m.fn for m in C.MISTAKES["2.4"] if m.name == "no-scale")
    inputs = _hidden_inputs("chen", lambda ex: no_scale if ex.id == "2.4" else getattr(ref, ex.function))
    assert len(inputs) > 50
    for name in ("chen__02_qkv_attention.md", "chen__02_qkv_attention.html"):
        text = (out / "feedback" / name).read_text(encoding="utf-8")
        leaked = [v for v in inputs if f"{v:.5f}" in text or repr(v) in text]
        assert leaked == [], f"{name} shows hidden inputs {leaked[:5]}"


# -- malformed notebooks ------------------------------------------------------------------------
def malformed(subs: Path) -> dict[str, str]:
    """Write one notebook per kind of damage; return student -> what must show in its status."""
    good = correct()
    write_nb(subs / "inv" / "02_qkv_attention.ipynb", nbformat.writes(good)[:500])
    write_nb(subs / "empty" / "02_qkv_attention.ipynb", "")
    write_nb(subs / "list" / "02_qkv_attention.ipynb", "[1, 2, 3]")
    v3 = nbformat.convert(copy.deepcopy(good), 3)                            # convert() changes its input
    write_nb(subs / "old" / "02_qkv_attention.ipynb", nbformat.writes(v3, version=3))
    nb = copy.deepcopy(good)
    nb.cells.remove(cell_of(nb, "ex2_4"))                                      # deleted cell
    write_nb(subs / "deleted" / "02_qkv_attention.ipynb", nb)
    nb = copy.deepcopy(good)
    dup = copy.deepcopy(cell_of(nb, "ex2_2"))
    nb.cells.insert(nb.cells.index(cell_of(nb, "ex2_4")) + 1, dup)            # duplicated cell
    write_nb(subs / "dup" / "02_qkv_attention.ipynb", nb)
    nb = copy.deepcopy(good)
    nb.metadata = {}
    for cell in nb.cells:                                                      # stripped metadata
        cell.metadata = {}
    write_nb(subs / "stripped" / "02_qkv_attention.ipynb", nb)
    nb = copy.deepcopy(good)
    c = cell_of(nb, "ex2_4")
    c.source = c.source.replace("def scaled_dot_product_attention(", "def attention(")   # renamed
    write_nb(subs / "renamed" / "02_qkv_attention.ipynb", nb)
    nb = copy.deepcopy(good)
    cell_of(nb, "ex2_1").outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (50 * 2**20))]
    write_nb(subs / "huge" / "02_qkv_attention.ipynb", nb)                    # a 50 MB output
    return {"inv": "unreadable: invalid JSON", "empty": "unreadable: empty file", "list": "not a notebook",
            "old": "graded; converted from nbformat 3", "deleted": "missing: scaled_dot_product_attention",
            "dup": "graded", "stripped": "graded", "renamed": "missing: scaled_dot_product_attention",
            "huge": "graded"}


@pytest.mark.slow
def test_malformed_notebooks_each_get_a_row(tmp_path, sandbox):
    subs = tmp_path / "subs"
    expected = malformed(subs)
    out = tmp_path / "out"
    outcome = grade(subs, out, sandbox)
    results = {r["student"]: r for r in outcome.results}
    assert set(results) == set(expected)
    table = rows(out)
    for student, status in expected.items():
        r = results[student]
        assert status in r["status"], (student, r["status"])
        assert table[f"{student}/02_qkv_attention"]["status"] == r["status"]
        assert (out / "feedback" / f"{student}__02_qkv_attention.html").exists()
    for student in ("inv", "empty", "list"):
        assert results[student]["points"] == 0 and results[student]["max_points"] == MAX
        assert "/tmp" not in results[student]["status"]  # named by the submission, not our temp path
    for student in ("deleted", "renamed"):
        ex = by_exercise(results[student])
        assert ex["2.4"]["points"] == 0 and ex["2.4"]["status"] == "missing"
        assert results[student]["points"] == pytest.approx(FULL - 3)
    for student in ("old", "dup", "stripped", "huge"):
        assert results[student]["points"] == pytest.approx(FULL), student


LOOP = '''def scaled_dot_product_attention(Q, K, V):
    while True:
        pass
'''
HOG = '''def scaled_dot_product_attention(Q, K, V):
    return torch.ones(2**32)   # 16 GiB, far past the memory limit
'''
EXIT_TOP = "import sys\nsys.exit(0)\n"


@pytest.mark.slow
def test_hostile_submissions_get_named_rows_and_no_points(tmp_path, sandbox):
    subs = tmp_path / "subs"
    sample = MS.samples(COURSE)
    write_nb(subs / "eve" / "02_qkv_attention.ipynb", sample["eve/02_qkv_attention.ipynb"].decode())
    three = ("2.1", "2.2", "2.3")
    write_nb(subs / "loop" / "02_qkv_attention.ipynb", MS.submission(QKV, solved=three, code={"2.4": LOOP}))
    write_nb(subs / "hog" / "02_qkv_attention.ipynb", MS.submission(QKV, solved=three, code={"2.4": HOG}))
    write_nb(subs / "quit" / "02_qkv_attention.ipynb",
             MS.submission(QKV, solved="all", extra_cells={"ex2_1": EXIT_TOP}))
    out = tmp_path / "out"
    outcome = grade(subs, out, sandbox)
    results = {r["student"]: r for r in outcome.results}
    eve = by_exercise(results["eve"])
    assert "crash: 2.4" in results["eve"]["status"]
    # Wrong type, wrong dtype, a dead worker: nothing. NaN softmax keeps only its shape check.
    assert [eve[e]["points"] for e in ("2.1", "2.3", "2.4")] == [0, 0, 0] and eve["2.2"]["points"] < 0.5
    assert results["loop"]["points"] == 5 and "timeout: 2.4" in results["loop"]["status"]
    assert results["hog"]["points"] == 5 and "memory: 2.4" in results["hog"]["status"]
    assert by_exercise(results["hog"])["2.4"]["points"] == 0
    # sys.exit at top level is an error of that cell; the functions after it still count.
    assert results["quit"]["points"] == FULL and "cells failed" in results["quit"]["status"]
    assert not (tmp_path.parent / "demo-out").exists()
    table = rows(out)
    assert float(table["eve/02_qkv_attention"]["total"]) < 0.5
    assert {k: v["total"] for k, v in table.items() if not k.startswith("eve")} == {
        "loop/02_qkv_attention": "5", "hog/02_qkv_attention": "5", "quit/02_qkv_attention": FULL_CSV}


def test_discovery_problems_are_rows_too(tmp_path, sandbox):
    subs = tmp_path / "subs"
    write_nb(subs / "ann" / "drafts" / "02_qkv_attention.ipynb", correct())      # ambiguous student
    write_nb(subs / "bo" / "02_qkv_attention.ipynb", correct())
    write_nb(subs / "bo" / "02_qkv_attention-Copy1.ipynb", correct())            # duplicate
    write_nb(subs / "cy.ipynb", MS.student_notebook(QKV))   # stubs define the functions: 02 by content
    write_nb(subs / "dee.ipynb", nbformat.v4.new_notebook())                     # says nothing
    out = tmp_path / "out"
    outcome = grade(subs, out, sandbox)
    statuses = sorted(r["status"].split(":")[0] for r in outcome.results)
    # bo's two notebooks: the one named 02_qkv_attention.ipynb is graded, the copy is named in its row.
    assert statuses == ["ambiguous student", "graded", "graded; also found", "unknown assignment"]
    assert {r["student"]: r["points"] for r in outcome.results if r["points"]} == {"bo": FULL}
    bo = next(r for r in outcome.results if r["student"] == "bo")
    assert bo["evidence"]["also_found"] == "bo/02_qkv_attention-Copy1.ipynb"
    table = rows(out)
    assert len((out / "grades.csv").read_text(encoding="utf-8-sig").splitlines()) == 1 + 4
    assert table["cy/02_qkv_attention"]["status"] == "graded"
    md = (out / "feedback" / next(r["key"] for r in outcome.results if r["student"] == "dee")).with_suffix(".md")
    said = M.text("submission.unknown_assignment", COURSE.language)     # the course's language, no English clause
    assert said.replace("_", "\\_") in Path(str(md)).read_text(encoding="utf-8")


# -- resuming and regrading -----------------------------------------------------------------
def test_rerun_skips_done_work_and_force_regrades_identically(tmp_path, sandbox):
    subs = tmp_path / "subs"
    write_nb(subs / "ada" / "02_qkv_attention.ipynb", correct())
    write_nb(subs / "chen" / "02_qkv_attention.ipynb",
             MS.submission(QKV, solved=("2.1", "2.2", "2.3"), code={"2.4": MS.NO_SCALE}))
    write_nb(subs / "dana" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    out = tmp_path / "out"
    first = grade(subs, out, sandbox)
    assert (first.graded, first.resumed) == (3, 0)
    files = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}

    again = grade(subs, out, sandbox)
    assert (again.graded, again.resumed) == (0, 3)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()} == files

    write_nb(subs / "dana" / "02_qkv_attention.ipynb", MS.submission(QKV, solved=("2.1",)))  # resubmitted
    changed = grade(subs, out, sandbox)
    assert (changed.graded, changed.resumed) == (1, 2)
    assert {r["student"]: r["points"] for r in changed.results}["dana"] == 1
    assert rows(out)["dana/02_qkv_attention"]["total"] == "1"

    forced = grade(subs, out, sandbox, force=True)
    assert (forced.graded, forced.resumed) == (3, 0)

    def scores(outcome):
        return {r["student"]: [(c["exercise"], c["check"], c["points"], c["status"], c["mistake"])
                               for e in r["exercises"] for c in e["checks"]] for r in outcome.results}

    assert scores(forced) == scores(changed)


def test_gradebook_keeps_other_batches_and_retires_what_changed(tmp_path, sandbox):
    out = tmp_path / "out"
    first, second = tmp_path / "first", tmp_path / "second"
    write_nb(first / "ann" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    write_nb(second / "bo" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    write_nb(second / "bo" / "02_qkv_attention-Copy1.ipynb", MS.student_notebook(QKV))
    grade(first, out, sandbox)
    grade(second, out, sandbox)
    lines = list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8-sig").splitlines()))
    assert sorted((r["student"], r["status"].split(":")[0]) for r in lines) == [
        ("ann", "graded"), ("bo", "graded; also found")]              # ann's row stays; bo's copy is named, not graded
    (second / "bo" / "02_qkv_attention.ipynb").unlink()              # the instructor keeps the copy instead
    again = grade(second, out, sandbox)
    assert [r["key"] for r in again.results] == ["bo__02_qkv_attention"]
    assert again.results[0]["source"] == "bo/02_qkv_attention-Copy1.ipynb" and again.graded == 1
    assert set(rows(out)) == {"ann/02_qkv_attention", "bo/02_qkv_attention"}
    assert len(list((out / "superseded").glob("*.json"))) == 1       # moved aside, not deleted
    assert len(list((out / "results").glob("*.json"))) == 2


def test_the_source_scan_made_while_the_cells_run_is_the_scan_and_is_made_again_where_a_cell_did_not_compile(
        tmp_path, sandbox, monkeypatch):
    from autograder.grading import submission as S

    made: list[list[int]] = []
    real = S.scan_notebook

    def counted(sources, unparsed=()):
        made.append(list(unparsed))
        return real(sources, unparsed)

    monkeypatch.setattr(S, "scan_notebook", counted)
    subs = tmp_path / "subs"
    cheat = "import torch\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
    write_nb(subs / "ada" / "02_qkv_attention.ipynb", MS.submission(QKV, solved="all", code={"2.2": cheat}))
    result = grade(subs, tmp_path / "out", sandbox, jobs=1).results[0]
    assert made == [[]]                 # once, while the worker ran the cells: the scan the result used
    assert by_exercise(result)["2.2"]["status"] == "forbidden"     # and it found what it finds
    profile = result["timing"]["profile"]
    assert profile["scan"] > 0 and profile["cells"] >= 0

    made.clear()                        # a cell Python refuses to compile: the scan is made again without it
    broken = MS.submission(QKV, solved="all", code={"2.2": cheat})
    broken.cells.append(nbformat.v4.new_code_cell("def (:\n"))
    write_nb(subs / "ada" / "02_qkv_attention.ipynb", broken)
    result = grade(subs, tmp_path / "out", sandbox, jobs=1, force=True).results[0]
    assert len(made) == 2 and made[0] == [] and made[1] != []
    assert by_exercise(result)["2.2"]["status"] == "forbidden"


def test_grades_csv_is_rebuilt_at_most_twice_a_second_and_whole_at_the_end(tmp_path, monkeypatch):
    """Rebuilding grades.csv is O(rows): after every result, a batch of n results paid O(n^2)."""
    from autograder.grading import outputs as O

    clock = [1000.0]
    monkeypatch.setattr(O.time, "monotonic", lambda: clock[0])
    out = O.Outputs(tmp_path / "out", COURSE, "en")
    rebuilt = []
    real = out._write_csv
    monkeypatch.setattr(out, "_write_csv", lambda: (rebuilt.append(clock[0]), real()))
    from autograder.grading.submissions import Submission

    made = G.failure(Submission(tmp_path / "x.ipynb", "x.ipynb", "0" * 64, "ann", None), G.GradingContext(
        COURSE, None, "cpu", "fp", {}, None), "unknown assignment", {"zh": "未知", "en": "unknown"})
    for i in range(12):             # 12 results in 0.6 s: the first, and one after half a second
        result = dict(made, key=f"s{i:02d}__x", student=f"s{i:02d}")
        out.record(result)
        clock[0] += 0.05
    assert rebuilt == [1000.0, pytest.approx(1000.55)]
    out.write_csv()                 # what the batch does when it ends (or stops)
    assert len(rows_of(out.out)) == 12


def rows_of(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8-sig").splitlines()))


def test_unchanged_demo_cells_are_skipped_edited_ones_run(tmp_path, sandbox):
    subs = tmp_path / "subs"
    plain = MS.student_notebook(QKV)
    edited = copy.deepcopy(plain)
    cell_of(edited, "facts_attention").source += "\nprint('my own experiment')"
    write_nb(subs / "ann" / "02_qkv_attention.ipynb", plain)
    write_nb(subs / "bo" / "02_qkv_attention.ipynb", edited)
    index = plain.cells.index(cell_of(plain, "facts_attention"))
    results = {r["student"]: r for r in grade(subs, tmp_path / "out", sandbox).results}
    ann = {c["index"]: c for c in results["ann"]["cells"]}
    bo = {c["index"]: c for c in results["bo"]["cells"]}
    assert ann[index]["status"] == "skipped" and ann[index]["message"] == G.DEMO_SKIPPED
    assert bo[index]["status"] == "ok"
    imports = plain.cells.index(cell_of(plain, "imports"))
    assert ann[imports]["status"] == "ok"


def test_a_grader_fault_is_a_row_and_is_retried(tmp_path, sandbox):
    class Faulty:
        """The real sandbox, except that bo's worker cannot be started."""

        def open(self, cells, *, label, **options):
            if label.startswith("bo__"):
                raise RuntimeError("the template died")
            return sandbox.open(cells, label=label, **options)

    subs = tmp_path / "subs"
    write_nb(subs / "ann" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    write_nb(subs / "bo" / "02_qkv_attention.ipynb", MS.student_notebook(QKV))
    out = tmp_path / "out"
    first = {r["student"]: r for r in grade(subs, out, Faulty()).results}
    assert first["bo"]["status"] == "crash: grader error (RuntimeError: the template died)"
    assert first["ann"]["status"] == "graded" and "RuntimeError" in first["bo"]["traceback"]
    second = grade(subs, out, sandbox)
    assert (second.graded, second.resumed) == (1, 1)
    assert rows(out)["bo/02_qkv_attention"]["status"] == "graded"


def test_student_text_is_escaped_in_feedback(tmp_path, sandbox):
    subs = tmp_path / "subs"
    nb = MS.submission(QKV, solved="all", extra_cells={"ex2_1": 'raise ValueError("<script>alert(1)</script>")'})
    write_nb(subs / "<img src=x onerror=alert(1)>" / "02_qkv_attention.ipynb", nb)
    out = tmp_path / "out"
    (result,) = grade(subs, out, sandbox).results
    assert result["points"] == FULL and result["student"] == "<img src=x onerror=alert(1)>"
    assert result["key"].startswith("img_src_x_onerror_alert_1-")
    html_text = (out / "feedback" / f"{result['key']}.html").read_text(encoding="utf-8")
    md_text = (out / "feedback" / f"{result['key']}.md").read_text(encoding="utf-8")
    for text in (html_text, md_text, (out / "report.html").read_text(encoding="utf-8")):
        assert "<script>" not in text and "<img src=x" not in text
    assert "&lt;script&gt;" in html_text and "&lt;script&gt;" in md_text


def _batch_command(subs: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(subs), "-o", str(out), "-j", "1", *extra]


@pytest.mark.slow
def test_a_killed_batch_loses_nothing_and_resumes(tmp_path, sandbox):
    subs = tmp_path / "subs"
    good, stub = correct(), MS.student_notebook(QKV)
    n = 10
    for i in range(n):
        write_nb(subs / f"s{i:02d}" / "02_qkv_attention.ipynb", good if i % 2 else stub)
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "120"}
    proc = subprocess.Popen(_batch_command(subs, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = list((out / "results").glob("*.json")) if (out / "results").exists() else []
        if len(done) >= 3 or proc.poll() is not None:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the harshest stop: no handler runs
    proc.wait()
    before = {p.name: (p.stat().st_mtime_ns, json.loads(p.read_text(encoding="utf-8"))["graded_at"])
              for p in (out / "results").glob("*.json")}   # every file parses: writes are atomic
    assert 3 <= len(before) < n, f"kill came too late or too early ({len(before)} of {n})"

    rerun = grade(subs, out, sandbox)   # what the same command does next (its sandbox is already warm)
    assert (rerun.resumed, rerun.graded) == (len(before), n - len(before))
    after = {p.name: (p.stat().st_mtime_ns, json.loads(p.read_text(encoding="utf-8"))["graded_at"])
             for p in (out / "results").glob("*.json")}
    assert len(after) == n and all(after[name] == before[name] for name in before)
    table = rows(out)
    assert len(table) == n
    assert sorted(float(r["total"]) for r in table.values()) == [0.0] * (n // 2) + [FULL] * (n // 2)


# -- the command itself ---------------------------------------------------------------------
@pytest.fixture
def warm_cli(monkeypatch, sandbox):
    """`autograder grade` on the module's warm sandbox (the command would start its own: seconds)."""
    class Shared:
        def __init__(self, limits, device, isolation=True, launch=None):
            assert device == "cpu" and isolation   # (the command's early template launch is closed by run())

        def __enter__(self):
            return sandbox

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr("autograder.sandbox.Sandbox", Shared)


def test_cli_grades_a_zip_with_a_traversal_attempt(tmp_path, capsys, warm_cli):
    archive = tmp_path / "lms.zip"
    good = nbformat.writes(correct())
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("submissions/ada_02_qkv_attention.ipynb", good)
        zf.writestr("submissions/bob_02_qkv_attention.ipynb", "{oops")
        zf.writestr("../../escape/eve_02_qkv_attention.ipynb", good)
    out = tmp_path / "out"
    assert main(["grade", str(archive), "-o", str(out), "-j", "2", "--language", "zh"]) == 0
    assert not (tmp_path.parent / "escape").exists()
    table = rows(out)
    assert table["ada/02_qkv_attention"]["total"] == FULL_CSV
    assert table["bob/02_qkv_attention"]["status"].startswith("unreadable: invalid JSON")
    refused = [r for r in table.values() if r["status"].startswith("not extracted from the zip")]
    assert len(refused) == 1 and refused[0]["total"] == "0"
    shown = capsys.readouterr().out
    assert "3 submissions" in shown and "graded 3" in shown
    assert "总分" in (out / "feedback" / "ada__02_qkv_attention.md").read_text(encoding="utf-8")


def test_cli_regrades_one_student_by_folder_or_by_name(tmp_path, capsys, warm_cli):
    """One student's folder graded alone names its student; --student regrades one student of the whole
    folder and leaves every other row as it is; an unknown name is an error that suggests the close one."""
    subs = tmp_path / "subs"
    write_nb(subs / "s04" / "02_qkv_attention.ipynb", correct())
    write_nb(subs / "s05" / "02_qkv_attention.ipynb", MS.submission(QKV, solved="all"))
    out = tmp_path / "out"
    # A row an older kit wrote for the lone folder (no student found): retired by the next run of that folder.
    assert main(["grade", str(subs), "-o", str(out), "-j", "1"]) == 0
    bogus = json.loads((out / "results" / "s04__02_qkv_attention.json").read_text(encoding="utf-8"))
    bogus.update(key="unknown__02_qkv_attention__0badf00d", student=None, source="02_qkv_attention.ipynb",
                 origin=str((subs / "s04").resolve()), status="unknown student: nothing in 02_qkv_attention.ipynb "
                 "names one", exercises=[], points=0.0)
    (out / "results" / "unknown__02_qkv_attention__0badf00d.json").write_text(json.dumps(bogus), encoding="utf-8")
    assert main(["grade", str(subs / "s04"), "-o", str(out), "-j", "1", "--force"]) == 0
    table = rows(out)
    assert set(table) == {"s04/02_qkv_attention", "s05/02_qkv_attention"}, table
    assert table["s04/02_qkv_attention"]["total"] == FULL_CSV
    assert not (out / "results" / "unknown__02_qkv_attention__0badf00d.json").exists()
    skipped = (out / "lms-skipped.csv").read_text(encoding="utf-8-sig")
    assert "unknown student" not in skipped

    before = (out / "results" / "s05__02_qkv_attention.json").read_bytes()
    capsys.readouterr()
    assert main(["grade", str(subs), "-o", str(out), "-j", "1", "--student", "s04"]) == 0
    assert "graded 1" in capsys.readouterr().out                 # regraded, though already done
    assert (out / "results" / "s05__02_qkv_attention.json").read_bytes() == before
    assert set(rows(out)) == {"s04/02_qkv_attention", "s05/02_qkv_attention"}
    assert main(["grade", str(subs), "-o", str(out), "--student", "s4"]) == 2
    assert "--student s4: no notebook of that student" in capsys.readouterr().err


def test_explain_replays_a_students_hidden_checks_for_the_instructor(tmp_path, capsys, warm_cli):
    """The hidden inputs, the student's output and the reference's, and the mistake: the instructor's view of
    what feedback only states (issue 25, item 8); the same seed as the batch, so the same verdict."""
    subs = tmp_path / "subs"
    nb = correct()
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex2_3":
            cell.source = "def attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"
    write_nb(subs / "kim" / "02_qkv_attention.ipynb", nb)
    out = tmp_path / "out"
    assert main(["grade", str(subs), "-o", str(out), "-j", "1"]) == 0
    feedback = (out / "feedback" / "kim__02_qkv_attention.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["explain", "kim", "2.3", "-o", str(out), "--language", "en"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "instructor only" in shown and "known mistake no-scale" in shown
    assert "the student's function returned: Tensor" in shown and "the reference gives: Tensor" in shown
    assert "elements differ, largest difference" in shown          # the full message, values and all
    assert "largest difference" not in feedback                      # which the student's feedback never shows
    assert "note: it was graded" not in shown                         # the same inputs, the same score
    assert main(["explain", "kim", "2.3", "-o", str(out)]) == 0     # in the course's language by default
    shown = " ".join(capsys.readouterr().out.split())
    assert "仅限教师" in shown and "已知错误 no-scale" in shown and "参考答案给出：Tensor" in shown
    assert main(["explain", "kin", "2.3", "-o", str(out)]) == 2
    assert "did you mean kim" in capsys.readouterr().err
    (subs / "kim" / "02_qkv_attention.ipynb").write_text("{}", encoding="utf-8")
    assert main(["explain", "kim", "2.3", "-o", str(out)]) == 2
    assert "changed since it was graded" in capsys.readouterr().err


def test_cli_user_errors(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nope"), "-o", str(tmp_path / "out")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "subs").mkdir()
    assert main(["grade", str(tmp_path / "subs"), "-o", str(tmp_path / "subs" / "out")]) == 2
    assert "inside SUBMISSIONS" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "subs"), "-o", str(tmp_path / "out")]) == 2
    assert "no notebook" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "subs"), "-o", str(tmp_path / "out"), "--assignment", "02_qkv_atention"]) == 2
    assert "did you mean '02_qkv_attention'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_readme_demo_grades_every_sample(tmp_path, capsys, warm_cli):
    out = tmp_path / "demo-out"
    assert main(["grade", str(ROOT / "samples" / "submissions"), "-o", str(out), "--force"]) == 0
    table = rows(out)
    assert len(table) == len(MS.samples(COURSE))
    for a in COURSE.assignments:                                   # the correct one, everywhere
        assert float(table[f"ada/{a.id}"]["total"]) == a.points
    assert table["ben/02_qkv_attention"]["total"] == "5"
    assert 0 < float(table["chen/02_qkv_attention"]["total"]) < FULL
    assert table["dana/02_qkv_attention"]["total"] == "0"
    assert float(table["eve/02_qkv_attention"]["total"]) < 1
    assert table["finn/02_qkv_attention"]["status"].startswith("unreadable: invalid JSON")
    assert "Exercises" in capsys.readouterr().out
    assert (out / "report.html").exists()


def test_device_auto_and_unavailable_cuda():
    import torch

    assert G.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(AutograderError, match="sees no CUDA device"):
            G.resolve_device("cuda")


def test_samples_are_current():
    assert MS.main(["--check"]) == 0, "run: python samples/make_samples.py"
