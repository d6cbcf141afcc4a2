"""The kit inside nbgrader: hidden test cells, the gradebook, nbgrader's own autograde; LMS exports.

The slow test is the whole story on a copy of the course: a submitted/ tree of
students, ``autograder grade``, the scores recorded in gradebook.db,
``nbgrader export`` listing them, and ``nbgrader autograde`` giving the same
per-exercise points for honest notebooks (and full marks to one that patches the
grader in its own kernel, which the sandbox does not give).
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import build as B
from autograder.authoring import bundle as BUNDLE
from autograder.exports import nbgrader as NB
from autograder.authoring import notebooks as NOTEBOOKS
from autograder.course.config import grade_id
from autograder.reports import lms as LMS
from autograder.reports import results as RES
from autograder.core import points as P
from autograder.course.config import load_course
from autograder.core.errors import AutograderError
from autograder.exports.nbgrader_cells import autograde_identity, grade_exercise
from autograder.course.written import maximum
from support import ROOT

COURSE = load_course()
VENV_BIN = Path(sys.executable).parent
QKV = COURSE.assignment("02_qkv_attention")
SOLUTION_MARKERS = (B.BEGIN, B.END)


# -- test cells ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_changed_point_value_is_one_build_away(course_root: Path) -> None:
    """Points live in course.yml alone: `build --check` names the source notebook whose test cell
    disagrees, and `autograder build` rewrites it (no hidden step)."""
    import yaml

    from autograder.core.errors import StaleError

    config = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    config["assignments"][1]["exercises"][1]["points"] = 3          # 2.2: 2 -> 3
    (course_root / "course.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    rel = f"source/{QKV.id}/{QKV.notebook}"
    with pytest.raises(StaleError) as caught:
        B.check_current(course_root)
    assert f"{rel} (test cells differ from course.yml's points)" in caught.value.message
    assert "source/" in caught.value.hint
    lines = B.build(course_root)
    assert f"updated the test cells of {rel} from course.yml" in lines
    B.check_current(course_root)
    nb = nbformat.read(course_root / rel, as_version=4)
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == NOTEBOOKS.tests_grade_id("2.2"))
    assert cell.metadata.nbgrader.points == 3


def test_source_notebooks_hold_one_test_cell_per_exercise_with_course_points() -> None:
    assert NOTEBOOKS.sync_test_cells(ROOT, COURSE, write=False) == [], "run autograder build"
    for a in COURSE.assignments:
        nb = nbformat.read(ROOT / "source" / a.id / a.notebook, as_version=4)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
        for ex in a.exercises:
            at = ids.index(NOTEBOOKS.tests_grade_id(ex.id))
            assert ids[at - 1] == grade_id(ex.id) + "_check"       # right after the check cell
            cell = nb.cells[at]
            meta = cell.metadata.nbgrader
            assert (meta.grade, meta.solution, meta.locked, meta.points) == (True, False, True, ex.points)
            assert cell.id == NOTEBOOKS.tests_cell_id(ex.id)
            assert cell.source == NOTEBOOKS.test_cell_source(ex, COURSE.language)
            assert f'check("{ex.id}", score=True)' in cell.source and "HIDDEN TESTS" not in cell.source


def test_release_keeps_the_graded_cells_as_in_the_source_and_the_bundle_no_grader() -> None:
    """The test cell is the same text in source and release: nbgrader's checksum then matches (no
    "checksum has changed" on every honest submission), and nothing hidden is in it."""
    for a in COURSE.assignments:
        nb = nbformat.read(ROOT / "release" / a.id / a.notebook, as_version=4)
        source = nbformat.read(ROOT / "source" / a.id / a.notebook, as_version=4)
        by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
        in_source = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
        for ex in a.exercises:
            cell = by_id[NOTEBOOKS.tests_grade_id(ex.id)]
            assert cell.metadata.nbgrader.points == ex.points and cell.metadata.nbgrader.grade
            assert cell.source == in_source[NOTEBOOKS.tests_grade_id(ex.id)].source
        text = (ROOT / "release" / a.id / a.notebook).read_text(encoding="utf-8")
        for secret in ("HIDDEN TESTS", "grade_exercise", "nbgrader_tests", *SOLUTION_MARKERS):
            assert secret not in text, f"{a.id}: {secret!r} reached the release"
    shipped, _missing = BUNDLE.student_package()
    assert not [p for p in shipped if "nbgrader" in p], "the instructor's nbgrader modules must not ship"


# -- grade_exercise -------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _pinned_course(monkeypatch):
    """What the course's nbgrader_config.py sets for the kernels nbgrader starts (grade_exercise needs it)."""
    monkeypatch.setenv("AUTOGRADER_COURSE", str(ROOT / "course.yml"))


def _reference_namespace(module: str) -> dict:
    from autograder.grading.references import reference_module

    return dict(vars(reference_module(COURSE, next(a for a in COURSE.assignments if a.module == module))))


def test_grade_exercise_never_uses_a_course_found_from_the_kernels_folder(monkeypatch, tmp_path) -> None:
    """Under nbgrader autograde the kernel runs in the submission's folder: a course.yml there (the student's)
    must not be the one that grades. Without the course nbgrader_config.py pins, grading refuses."""
    monkeypatch.delenv("AUTOGRADER_COURSE")
    monkeypatch.chdir(ROOT)                    # a course.yml right here, and still refused
    with pytest.raises(RuntimeError, match="AUTOGRADER_COURSE is not set"):
        grade_exercise("2.2", namespace={}, student="ada")


def test_grade_exercise_gives_the_references_full_points_as_a_bare_number() -> None:
    for a in COURSE.assignments:
        ns = _reference_namespace(a.module)
        for ex in a.exercises:
            graded = grade_exercise(ex.id, namespace=ns, student="ada")
            assert graded.points == ex.points, (ex.id, graded.points)
            assert repr(graded) == repr(float(ex.points))          # nbgrader parses text/plain as the score
            assert f"{ex.points:g} / {ex.points:g}" in graded._repr_html_()


def test_grade_exercise_partial_credit_quiet_and_seeded_like_the_sandbox(capsys) -> None:
    ns = _reference_namespace(QKV.module)

    def softmax(x, dim=-1):  # the known mistake: no max subtraction, and noisy
        import warnings

        import torch

        print("debug", file=sys.stderr)
        warnings.warn("student warning", stacklevel=1)
        e = torch.exp(x)
        return e / e.sum(dim=dim, keepdim=True)

    ns["softmax"] = softmax
    first = grade_exercise("2.2", namespace=ns, student="ada")
    assert 0 < first.points < 2 and first.result.status.value == "failed"
    assert "no-max-subtraction" in first._repr_html_()
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""                          # stderr output would score 0 in nbgrader
    again = grade_exercise("2.2", namespace=ns, student="ada")
    assert [c.status for c in again.result.checks] == [c.status for c in first.result.checks]


def test_grade_exercise_judges_pasted_answers_once_and_answers_a_wrong_one_with_the_reference() -> None:
    """In nbgrader's kernel too: 5.4 lost points, so its test cell judges the 04 answers pasted into 5.4's cell
    by 04's own checks (for no points), and a wrong one is answered by the reference for 5.4 and after it."""
    from autograder.exports import nbgrader_cells

    block = next(a for a in COURSE.assignments if a.id == "05_transformer_block")
    ns: dict = {}              # as a kernel holds them: every function looks its helpers up in this namespace
    exec(compile((ROOT / "solutions" / f"{block.module}.py").read_text(encoding="utf-8"), "solution", "exec"), ns)
    right = ns["split_heads"]

    def split_heads(x, num_heads):             # E split as (d, H): each head takes every H-th channel
        B, T, E = x.shape
        return x.reshape(B, T, E // num_heads, num_heads).permute(0, 3, 1, 2)

    ns["split_heads"] = split_heads
    nbgrader_cells._LOST.clear()
    nbgrader_cells._JUDGED.clear()
    graded = grade_exercise("5.4", namespace=ns, student="ada")
    assert graded.points == 3
    html = graded._repr_html_()
    assert "split_heads" in html and "4.1" in html
    assert set(nbgrader_cells._JUDGED[(str(COURSE.root), "ada", block.id)]) == {"4.1", "4.2", "4.3", "4.4"}
    assert grade_exercise("5.8", namespace=ns, student="ada").points == 2      # 4.1 judged once, answered again
    ns["split_heads"] = right
    nbgrader_cells._LOST.clear()
    nbgrader_cells._JUDGED.clear()
    assert "split_heads" not in grade_exercise("5.4", namespace=ns, student="bea")._repr_html_()


def test_autograde_identity_is_the_student_folder_only_under_nbgrader(monkeypatch, tmp_path) -> None:
    folder = tmp_path / "autograded" / "ada" / "02_qkv_attention"
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert autograde_identity("02_qkv_attention", folder) is None
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert autograde_identity("02_qkv_attention", folder) == "ada"
    assert autograde_identity("01_rnn_decay", folder) is None


# -- LMS exports ----------------------------------------------------------------------------
def _result(student, assignment, points, *, graded=True, at="2026-11-20T10:00:00+00:00", key=None):
    """A result as autograder.grading writes it, the points spread over the exercises by their weight."""
    exercises = [e for a in COURSE.assignments if a.id == assignment for e in a.exercises]
    total = sum(e.points for e in exercises)
    return {"key": key or f"{student}__{assignment}", "student": student, "assignment": assignment,
            "points": points, "status": "graded" if graded else "unreadable: not JSON", "graded_at": at,
            "exercises": [{"exercise": e.id, "points": points * e.points / total} for e in exercises]
            if graded else []}


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_lms_csv_canvas_and_moodle(tmp_path) -> None:
    results = [
        _result("ada", "01_rnn_decay", 10.5), _result("ada", "02_qkv_attention", QKV.points),
        _result("ben", "02_qkv_attention", 3.25),
        _result("chen", "02_qkv_attention", 0, graded=False),                   # not a grade: blank, listed
        _result("ben", "02_qkv_attention", 1, graded=False, key="ben__dup"),     # a graded result wins
        _result(None, "02_qkv_attention", 5, key="unknown"),                     # nobody to credit: listed
    ]
    paths = LMS.write_lms_csv(results, COURSE, tmp_path)
    assert [p.name for p in paths] == ["canvas.csv", "moodle.csv", "moodle-grades.csv", "lms-skipped.csv"]

    canvas = _rows((tmp_path / "canvas.csv").read_text(encoding="utf-8"))
    # The gradebook's names of the assignments (course.yml lms_title, else title), not their ids.
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                         COURSE.assignment("01_rnn_decay").gradebook_title,
                         COURSE.assignment("02_qkv_attention").gradebook_title, "Final Points"]
    full = P.fmt(QKV.points)                                                  # ada's 02: full automatic marks
    # Points possible: each assignment's maximum, its written question's points included (autograder.course.written).
    most = {a: P.fmt(maximum(COURSE.assignment(a)).points) for a in ("01_rnn_decay", "02_qkv_attention")}
    assert canvas[1] == ["Points Possible", "", "", "", "", most["01_rnn_decay"], most["02_qkv_attention"],
                         P.fmt(maximum(COURSE.assignment("01_rnn_decay")).points + maximum(QKV).points)]
    assert canvas[2:] == [["ada", "", "", "ada", "", "10.5", full, P.fmt(10.5 + QKV.points)],
                          ["ben", "", "", "ben", "", "", "3.25", "3.25"],     # no 01 submission: blank, not 0
                          ["chen", "", "", "chen", "", "", "", "0"]]          # not graded: blank, not 0

    moodle = _rows((tmp_path / "moodle.csv").read_text(encoding="utf-8"))
    at = "2026-11-20T10:00:00+00:00"
    assert moodle == [["Identifier", "Full name", "Assignment", "Grade", "Maximum Grade", "Last modified (grade)"],
                      ["", "ada", "01_rnn_decay", "10.5", most["01_rnn_decay"], at],
                      ["", "ada", "02_qkv_attention", full, most["02_qkv_attention"], at],
                      ["", "ben", "02_qkv_attention", "3.25", most["02_qkv_attention"], at],
                      ["", "chen", "02_qkv_attention", "", most["02_qkv_attention"], ""]]
    skipped = _rows((tmp_path / "lms-skipped.csv").read_text(encoding="utf-8"))
    assert skipped == [["student", "assignment", "status", "source"],
                       ["", "02_qkv_attention", "graded", ""],
                       ["chen", "02_qkv_attention", "unreadable: not JSON", ""]]


# -- the nbgrader course ----------------------------------------------------------------------
@pytest.fixture
def nbgrader_course(tmp_path: Path) -> Path:
    """A copy of the course as an nbgrader course folder."""
    course = tmp_path / "course"
    course.mkdir()
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy2(ROOT / name, course / name)
    for name in ("source", "release", "solutions"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return course


def test_reading_a_courses_nbgrader_config_leaves_this_process_alone(nbgrader_course: Path) -> None:
    """nbgrader_config.py pins AUTOGRADER_COURSE for nbgrader's kernels; reading it here (grade --nbgrader)
    must not pin this process, nor later commands started from it, to that course."""
    before = dict(os.environ)
    coursedir = NB.course_directory(nbgrader_course)
    assert coursedir.root == str(nbgrader_course.resolve())
    assert dict(os.environ) == before and os.environ.get("AUTOGRADER_COURSE") != str(nbgrader_course / "course.yml")


def _env(course: Path) -> dict[str, str]:
    # nbgrader spawns alembic; the kernels must import this environment's autograder.
    return dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                AUTOGRADER_COURSE=str(course / "course.yml"), MPLBACKEND="Agg")


def _solution(source: nbformat.NotebookNode, gid: str) -> str:
    cell = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
    return B.strip_markers(cell.source)


#: What each student wrote in the 02 stubs: "ok" (the reference) or a known mistake.
WRONG = {
    "ex2_2": ("import torch\n\ndef softmax(x, dim=-1):\n"
              "    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)\n"),
    "ex2_3": "def attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n",
    "ex2_4": ("def scaled_dot_product_attention(Q, K, V):\n"
              "    weights = softmax(attention_scores(Q, K), dim=-2)\n    return weights @ V, weights\n"),
}
HONEST = {
    "ada": {"ex2_1": "ok", "ex2_2": "ok", "ex2_3": "ok", "ex2_4": "ok", "ex2_5": "ok"},
    "ben": {},
    "chen": {"ex2_1": "ok", "ex2_2": "ok", "ex2_3": "wrong"},
    "dana": {"ex2_1": "ok", "ex2_2": "wrong", "ex2_3": "ok", "ex2_4": "wrong", "ex2_5": "ok"},   # two mistakes
}
#: Patches the grader in its own kernel: nbgrader's path believes it, the sandbox never runs it.
TAMPER = ("import autograder.exports.nbgrader_cells as _t\n"
          f"_t.grade_exercise = lambda ex, **kw: {({e.id: e.points for e in QKV.exercises})!r}[ex]\n")


def _submit(course: Path) -> None:
    release = nbformat.read(course / "release" / QKV.id / QKV.notebook, as_version=4)
    source = nbformat.read(course / "source" / QKV.id / QKV.notebook, as_version=4)
    students = {**HONEST, "mallory": {}}
    for student, fills in students.items():
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        for c in nb.cells:
            gid = c.metadata.get("nbgrader", {}).get("grade_id")
            if gid in fills:
                c.source = _solution(source, gid) if fills[gid] == "ok" else WRONG[gid]
        if student == "mallory":
            nb.cells.insert(3, nbformat.v4.new_code_cell(TAMPER, id="mallory"))
        folder = course / "submitted" / student / QKV.id
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / QKV.notebook)
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")


def _gid(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _formgrader_submissions(course: Path) -> dict[str, dict]:
    """What the formgrader's "Manage Submissions" page lists (its own API, as its handlers call it)."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    coursedir = NB.course_directory(course)
    assert isinstance(coursedir, CourseDirectory)
    api = NbGraderAPI(coursedir=coursedir)
    return {s["student"]: s for s in api.get_submissions(QKV.id)}


def _gradebook_points(course: Path, students) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            out[student] = {ex.id: gb.find_grade(NOTEBOOKS.tests_grade_id(ex.id), QKV.id, QKV.id, student).score
                            for ex in QKV.exercises}
    return out


@pytest.mark.slow
def test_grade_record_export_and_nbgrader_autograde_agree(nbgrader_course: Path, tmp_path: Path) -> None:
    course, out, env = nbgrader_course, tmp_path / "out", _env(nbgrader_course)
    _submit(course)
    timings = {}

    t = time.perf_counter()
    submitted = NB.discover_nbgrader_course(course)
    assert submitted == (course / "submitted").resolve()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted), "-o", str(out), "-j", "2"],
                          cwd=course, env=env, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    timings["autograder grade"] = time.perf_counter() - t
    kit = {r["student"]: r for r in RES.load_results(out)}
    assert sorted(kit) == sorted([*HONEST, "mallory"])
    assert kit["ada"]["points"] == QKV.points and kit["ben"]["points"] == 0 and kit["mallory"]["points"] == 0
    assert 0 < kit["dana"]["points"] < QKV.points

    t = time.perf_counter()
    record = NB.after_batch(out, course, course=COURSE)
    timings["record in gradebook"] = time.perf_counter() - t
    assert sorted(s for s, _, _ in record.recorded) == sorted(kit) and record.skipped == []

    t = time.perf_counter()
    export = tmp_path / "export.csv"
    done = subprocess.run([str(VENV_BIN / "nbgrader"), "export", "--to", str(export)], cwd=course, env=env,
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    timings["nbgrader export"] = time.perf_counter() - t
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(export.read_text(encoding="utf-8")))}
    assert sorted(rows) == sorted(kit)
    for student, result in kit.items():
        assert rows[student]["assignment"] == QKV.id
        assert rows[student]["score"] == P.fmt(result["points"]), student     # hundredths, as grades.csv
        assert float(rows[student]["max_score"]) == QKV.points + QKV.manual_points     # the written answer too
        assert rows[student]["timestamp"].startswith("2026-11-20 10:00:00")

    # The formgrader counts every kit-graded submission as autograded, with the kit's score ...
    t = time.perf_counter()
    shown = _formgrader_submissions(course)
    timings["formgrader view"] = time.perf_counter() - t
    assert sorted(shown) == sorted(kit)
    for student, result in kit.items():
        # (the written answer waits for a person in the formgrader, as in the service: never scored 0)
        assert shown[student]["autograded"] is True and shown[student]["needs_manual_grade"] is True, student
        assert shown[student]["score"] == pytest.approx(result["points"], abs=1e-6), student
    mallory = nbformat.read(course / "autograded" / "mallory" / QKV.id / QKV.notebook, as_version=4)
    assert all(not c.get("outputs") for c in mallory.cells if _gid(c) is None), "student outputs are not kept"
    assert "grade_exercise = lambda" in "".join(c.source for c in mallory.cells)   # the student's code, as sent
    # ... and nbgrader's own generate_feedback writes every student's feedback from it.
    done = subprocess.run([str(VENV_BIN / "nbgrader"), "generate_feedback", QKV.id], cwd=course, env=env,
                          check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for student, result in kit.items():
        page = (course / "feedback" / student / QKV.id / QKV.notebook.replace(".ipynb", ".html")).read_text(
            encoding="utf-8")
        assert f"(Score: {float(result['points'])} / {float(QKV.points + QKV.manual_points)})" in page, student
        ours = {e["exercise"]: e for e in result["exercises"]}
        for ex in QKV.exercises:   # each test cell shows the kit's points for it
            shown = f"{ex.id} {ex.title_in(COURSE.language)}: {P.fmt(ours[ex.id]['points'])} / {P.fmt(ex.points)}"
            assert shown in page, (student, ex.id)

    t = time.perf_counter()
    # --force: nbgrader skips what it counts as autograded, and the kit's submissions now are.
    done = subprocess.run([str(VENV_BIN / "nbgrader"), "autograde", QKV.id, "--force"], cwd=course, env=env,
                          check=False, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has changed" not in done.stdout + done.stderr, "an honest submission reads as tampered with"
    timings["nbgrader autograde"] = time.perf_counter() - t
    theirs = _gradebook_points(course, kit)
    for student in HONEST:
        ours = {e["exercise"]: e["points"] for e in kit[student]["exercises"]}
        assert theirs[student] == pytest.approx(ours, abs=1e-5), student
    # nbgrader's path runs the tests in the student's kernel: a patched grader gets full marks there.
    assert sum(theirs["mallory"].values()) == QKV.points and kit["mallory"]["points"] == 0
    print("timings:", {k: round(v, 1) for k, v in timings.items()})


@pytest.mark.slow
def test_nbgrader_validate_fails_untouched_stubs_and_passes_a_solved_notebook(nbgrader_course: Path,
                                                                              tmp_path: Path) -> None:
    """What a student sees from nbgrader's Validate button: stubs fail, the public checks' share counts."""
    course, env = nbgrader_course, _env(nbgrader_course)
    release = nbformat.read(course / "release" / QKV.id / QKV.notebook, as_version=4)
    source = nbformat.read(course / "source" / QKV.id / QKV.notebook, as_version=4)
    solved = nbformat.from_dict(json.loads(json.dumps(release)))
    for c in solved.cells:
        gid = _gid(c)
        if gid in HONEST["ada"]:
            c.source = _solution(source, gid)
        elif gid == "q2_Q1":            # the written answer: nbgrader's validate asks for one too
            c.source = _solution(source, gid)
    outcome = {}
    for name, nb in (("stubs", release), ("solved", solved)):
        path = tmp_path / name / QKV.notebook
        path.parent.mkdir()
        nbformat.write(nb, path)
        done = subprocess.run([str(VENV_BIN / "nbgrader"), "validate", str(path)], cwd=course, env=env,
                              check=False, capture_output=True, text=True, timeout=300)
        outcome[name] = done.stdout + done.stderr
    assert "Success" not in outcome["stubs"] and "VALIDATION FAILED" in outcome["stubs"], outcome["stubs"][-2000:]
    assert "Success! Your notebook passes all the tests." in outcome["solved"], outcome["solved"][-2000:]


@pytest.mark.slow
def test_record_in_gradebook_rules(nbgrader_course: Path) -> None:
    from nbgrader.api import Gradebook

    results = [_result("ada", QKV.id, QKV.points), _result("ben", QKV.id, 0, graded=False),
               _result("ben", QKV.id, 4, key="ben__late", at="2026-11-21T00:00:00+00:00"),
               _result("ada", QKV.id, 2, key="ada__old", at="2026-11-19T00:00:00+00:00"),
               _result("cat", "99_unknown", 1, graded=False)]
    record = NB.record_in_gradebook(results, COURSE, nbgrader_course)
    assert sorted(record.recorded) == [("ada", QKV.id, float(QKV.points)), ("ben", QKV.id, 4.0)]
    assert sorted(key for key, _ in record.skipped) == ["ada__old", "ben__02_qkv_attention", "cat__99_unknown"]
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        grade = gb.find_grade("ex2_4_tests", QKV.id, QKV.id, "ada")
        assert (grade.auto_score, grade.max_score, grade.needs_manual_grade) == (3.0, 3.0, False)
        grade.manual_score = 1.5                       # the instructor's override in the formgrader
        gb.db.commit()
    NB.record_in_gradebook(results, COURSE, nbgrader_course)  # idempotent; the override stays
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        assert gb.find_submission(QKV.id, "ada").score == pytest.approx(QKV.points - 3 + 1.5)  # 2.4: 3 -> 1.5

    # course.yml and the gradebook disagree on points: a clear error, nothing written
    import yaml

    from autograder.course.config import parse_course

    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    data["assignments"][1]["exercises"][3]["points"] = 5
    with pytest.raises(AutograderError, match="ex2_4_tests is worth 3 points, course.yml says 5"):
        NB.record_in_gradebook([_result("zoe", QKV.id, QKV.points)], parse_course(data), nbgrader_course)
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == ["ada", "ben"]


@pytest.mark.slow
def test_written_answers_go_to_nbgraders_manual_fields(nbgrader_course: Path) -> None:
    """A written answer graded in the service becomes the manual score of nbgrader's manually graded cell (the
    formgrader shows it); one no one graded yet waits there as "needs manual grade", never 0."""
    from nbgrader.api import Gradebook

    graded, waiting = _result("ada", QKV.id, 8), _result("ben", QKV.id, 6)
    graded["questions"] = [{"question": "2.Q1", "max_points": 2.0, "points": 1.5, "status": "graded"}]
    waiting["questions"] = [{"question": "2.Q1", "max_points": 2.0, "points": None, "status": "ungraded"}]
    NB.record_in_gradebook([graded, waiting], COURSE, nbgrader_course)
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        ada = gb.find_grade("q2_Q1", QKV.id, QKV.id, "ada")
        ben = gb.find_grade("q2_Q1", QKV.id, QKV.id, "ben")
        assert (ada.manual_score, ada.max_score, ada.needs_manual_grade) == (1.5, 2.0, False)
        assert (ben.manual_score, ben.needs_manual_grade) == (None, True)
        assert gb.find_submission(QKV.id, "ada").score == pytest.approx(8 + 1.5)


@pytest.mark.slow
def test_an_unreadable_submission_shows_its_reason_not_the_release_stubs(nbgrader_course: Path) -> None:
    """nbgrader's generate_feedback shows autograded/ as the student's answers: for a notebook that could not
    be read, every answer cell says so (in the course's language) instead of holding the release's stub."""
    failed = {**_result("finn", QKV.id, 0, graded=False), "message": {"zh": "无法读取笔记本：不是 JSON",
                                                                     "en": "the notebook could not be read: not JSON"}}
    NB.record_in_gradebook([failed], COURSE, nbgrader_course)
    nb = nbformat.read(nbgrader_course / "autograded" / "finn" / QKV.id / QKV.notebook, as_version=4)
    answers = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers and all("这里不是你的答案" in a and "不是 JSON" in a for a in answers)
    assert not any("NotImplementedError" in a for a in answers)
    assert "这里不是你的答案" in nb.cells[0].source


@pytest.mark.slow
def test_nbgrader_export_writes_hundredths(nbgrader_course: Path, tmp_path: Path) -> None:
    """nbgrader sums the gradebook's per-cell points in floating point; the course's exporter writes the
    totals grades.csv shows (4.39, never 4.390000000000001)."""
    from nbgrader.api import Gradebook

    from autograder.exports.nbgrader_export import HundredthsCsvExport

    parts = [0.99, 1.1, 0.1, 2.2, 0.0]                 # a float sum of these is not 4.39
    result = _result("gus", QKV.id, 4.39)
    result["exercises"] = [{"exercise": e.id, "points": p} for e, p in zip(QKV.exercises, parts, strict=True)]
    NB.record_in_gradebook([result], COURSE, nbgrader_course)
    dest = tmp_path / "export.csv"
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        assert sum(parts) != 4.39
        HundredthsCsvExport(to=str(dest)).export(gb)
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(dest.read_text(encoding="utf-8")))}
    # (max: the exercises' points and the written answer's 2)
    assert (rows["gus"]["score"], rows["gus"]["raw_score"], rows["gus"]["max_score"]) == \
        ("4.39", "4.39", P.fmt(QKV.points + QKV.manual_points))
    assert "HundredthsCsvExport" in (nbgrader_course / "nbgrader_config.py").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_late_penalty_reaches_nbgraders_own_field_and_export(nbgrader_course: Path, tmp_path: Path) -> None:
    """Issue 27: the kit's penalty is nbgrader's late_submission_penalty, so the formgrader and nbgrader export
    show the final score grades.csv shows (raw: full marks, penalty 2.4, final: full marks - 2.4)."""
    from nbgrader.api import Gradebook

    from autograder.exports.nbgrader_export import HundredthsCsvExport

    raw = float(QKV.points)
    late = {**_result("hal", QKV.id, raw - 2.4), "raw_points": raw,
            "late": {"due": "2026-12-08T23:59:00+08:00", "late": True, "seconds_late": 9000.0, "penalty": 2.4,
                     "accepted": True, "policy": "per_hour", "rule": {"zh": "", "en": ""}}}
    late["exercises"] = [{"exercise": e.id, "points": e.points} for e in QKV.exercises]
    NB.record_in_gradebook([late, _result("ivy", QKV.id, QKV.points)], COURSE, nbgrader_course)
    dest = tmp_path / "export.csv"
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        assert gb.find_submission(QKV.id, "hal").late_submission_penalty == pytest.approx(2.4)
        assert gb.find_submission(QKV.id, "ivy").late_submission_penalty == 0.0
        HundredthsCsvExport(to=str(dest)).export(gb)
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(dest.read_text(encoding="utf-8")))}
    assert (rows["hal"]["raw_score"], rows["hal"]["late_submission_penalty"], rows["hal"]["score"]) == \
        (P.fmt(raw), "2.4", P.fmt(raw - 2.4))


@pytest.mark.slow
def test_the_gradebook_says_when_each_submission_came_and_who_has_an_extension(nbgrader_course: Path) -> None:
    """Issue 27: nbgrader's SubmittedAssignment.timestamp (UTC, without a zone) and its extension are a time
    source and an extension for `grade --nbgrader`."""
    import datetime as dt

    from nbgrader.api import Gradebook

    NB.record_in_gradebook([_result("ada", QKV.id, 8), _result("ben", QKV.id, 8)], COURSE, nbgrader_course)
    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        ada = gb.find_submission(QKV.id, "ada")
        ada.timestamp = dt.datetime(2026, 12, 8, 16, 30)
        ada.extension = dt.timedelta(days=1)
        gb.find_submission(QKV.id, "ben").timestamp = None
        gb.db.commit()
    times, extensions = NB.gradebook_times(nbgrader_course, COURSE)
    assert times[("ada", QKV.id)].when == dt.datetime(2026, 12, 8, 16, 30, tzinfo=dt.timezone.utc)
    assert times[("ada", QKV.id)].source == "nbgrader gradebook" and ("ben", QKV.id) not in times
    assert [(e.student, e.assignment, e.extra) for e in extensions] == [("ada", QKV.id, dt.timedelta(days=1))]
    assert NB.gradebook_times(nbgrader_course.parent / "elsewhere", COURSE) == ({}, [])    # no gradebook yet


def test_discover_nbgrader_course_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(AutograderError, match="submitted/"):
        NB.discover_nbgrader_course(tmp_path)


@pytest.mark.slow
def test_the_nbgrader_exchange_flow_end_to_end(nbgrader_course: Path, tmp_path: Path) -> None:
    """An instructor's week with nbgrader's own commands: generate, release to an exchange, a student
    fetches, solves and submits, the instructor collects, then `autograder grade --nbgrader`: no
    surprise on the way (no "not a notebook" line for nbgrader's own files, the formgrader shows it)."""
    course, env = nbgrader_course, _env(nbgrader_course)
    exchange, home = tmp_path / "exchange", tmp_path / "home"
    exchange.mkdir(mode=0o777)
    home.mkdir()
    flag = f"--Exchange.root={exchange}"

    def nbgrader(*args: str, cwd: Path) -> str:
        done = subprocess.run([str(VENV_BIN / "nbgrader"), *args, flag], cwd=cwd, env=env, check=False,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    nbgrader("generate_assignment", QKV.id, "--force", cwd=course)
    nbgrader("release_assignment", QKV.id, cwd=course)
    nbgrader("fetch_assignment", QKV.id, "--course", "attention-from-scratch", cwd=home)
    fetched = home / QKV.id / QKV.notebook
    # What nbgrader handed out is the notebook alone: the course's checks beside it stay the grader's.
    assert [p.name for p in (home / QKV.id).iterdir()] == [QKV.notebook]
    nb = nbformat.read(fetched, as_version=4)
    source = nbformat.read(course / "source" / QKV.id / QKV.notebook, as_version=4)
    for c in nb.cells:
        if _gid(c) in HONEST["ada"]:
            c.source = _solution(source, _gid(c))
    nbformat.write(nb, fetched)
    nbgrader("submit", QKV.id, "--course", "attention-from-scratch", cwd=home)
    nbgrader("collect", QKV.id, cwd=course)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", ".", "--nbgrader", "-o", str(tmp_path / "out")],
                          cwd=course, env=env, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not a notebook" not in done.stdout + done.stderr, done.stdout
    shown = _formgrader_submissions(course)
    assert len(shown) == 1
    (student, row), = shown.items()
    assert row["autograded"] is True and row["score"] == pytest.approx(QKV.points)
