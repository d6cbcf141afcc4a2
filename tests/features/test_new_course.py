"""A course is data: a second course (tests/courses/tiny) builds, validates and grades with the same
engine, and a new exercise added to the real course the way docs/instructor/exercises.md tells instructors works
end to end (build, validate, self-check, grade). Every command runs as the instructor runs it: the
``autograder`` console script, in the course's folder, which it finds as git finds its repository.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml

#: The repository: the engine and the attention course, side by side.
ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TINY = ROOT / "tests" / "courses" / "tiny"
#: Generous: a command imports torch and may share two cores with another test run.
COMMAND_SECONDS = 300


# -- helpers ---------------------------------------------------------------------------
def autograder(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``autograder ARGS`` in ``cwd``: the course it finds is the nearest course.yml upward."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("AUTOGRADER_COURSE", "AUTOGRADER_FINGERPRINTS"):   # nothing may point elsewhere
        env.pop(name, None)
    return subprocess.run([str(VENV_BIN / "autograder"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=COMMAND_SECONDS)


def ok(done: subprocess.CompletedProcess) -> str:
    """The output of a command that must have exited 0 (else fail with all it said)."""
    assert done.returncode == 0, f"{done.args[1:]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def gid(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def cell_of(nb, grade_id: str):
    return next(c for c in nb.cells if gid(c) == grade_id)


def nbgrader_cell(kind: str, grade_id: str, cell_id: str, text: str, *, solution: bool = False):
    """A cell as the source notebooks have them: nbgrader metadata, locked unless a solution, a stable id."""
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(text, id=cell_id)
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id, "locked": not solution,
                                 "schema_version": 3, "solution": solution}
    return cell


def strip_markers(code: str) -> str:
    return "\n".join(line for line in code.split("\n") if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line)


def submission(course: Path, assignment: str, code: dict[str, str]) -> nbformat.NotebookNode:
    """The release notebook (what students receive) with solution cells (grade_id -> code) filled in."""
    nb = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    for grade_id, text in code.items():
        cell_of(nb, grade_id).source = text
    return nb


def reference_code(course: Path, assignment: str) -> dict[str, str]:
    """grade_id -> the source notebook's solution cell without its markers (a perfect student)."""
    nb = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    return {gid(c): strip_markers(c.source) for c in nb.cells
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def write_submissions(folder: Path, assignment: str, notebooks: dict[str, nbformat.NotebookNode]) -> Path:
    for student, nb in notebooks.items():
        path = folder / student / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return folder


def grades(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def exercise_result(out: Path, student: str, assignment: str, exercise: str) -> dict:
    result = json.loads((out / "results" / f"{student}__{assignment}.json").read_text(encoding="utf-8"))
    return next(e for e in result["exercises"] if e["exercise"] == exercise)


def bundle_names(course: Path) -> set[str]:
    with zipfile.ZipFile(course / "dist" / "student-bundle.zip") as zf:
        return {name.split("/", 1)[1] for name in zf.namelist()}


# -- a second course ---------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_course_builds_validates_and_grades(tmp_path: Path) -> None:
    course = tmp_path / "tiny"
    shutil.copytree(TINY, course, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert not (course / "release").exists() and not (course / "solutions").exists()   # built here, never committed

    built = ok(autograder(course, "build"))
    assert "wrote release/01_scaling/01_scaling.ipynb" in built and "wrote solutions/scaling.py" in built
    assert (course / "solutions" / "scaling.py").read_text(encoding="utf-8").count("def double(x):") == 1
    # The source notebook already carries its test cell with course.yml's points: build leaves it alone.
    assert "updated the test cells" not in built
    release = nbformat.read(course / "release" / "01_scaling" / "01_scaling.ipynb", as_version=4)
    assert "raise NotImplementedError" in cell_of(release, "ex1_1").source           # the stub, in English
    assert "exercise 1.1" in cell_of(release, "ex1_1").source
    assert "2 * x" not in cell_of(release, "ex1_1").source
    assert cell_of(release, "ex1_1_tests").metadata.nbgrader.points == 2
    # release/ holds the notebook alone: the course's code stays with the instructor.
    assert sorted(p.relative_to(course / "release").as_posix() for p in (course / "release").rglob("*")
                  if p.is_file()) == ["01_scaling/01_scaling.ipynb"]
    shipped = bundle_names(course)
    assert {"autograder/data/01_scaling/checks.py", "autograder/data/course.yml", "01_scaling/01_scaling.ipynb"} \
        <= shipped
    assert not [n for n in shipped if n.rsplit("/", 1)[-1] in ("hidden.py", "mistakes.py") or "solutions" in n]

    validated = ok(autograder(course, "validate"))
    assert "catalog fair and sound" in validated and "adds-one" in validated and "triples" in validated
    assert "3 correct alternatives; full marks on every seed: 3" in validated

    for where in (course, course / "source" / "01_scaling"):               # found from a subfolder too, as git does
        shown = ok(autograder(where, "course"))
        assert f"course file: {(course / 'course.yml').resolve()}" in shown
        assert "Tiny course: 1 assignments, 1 exercises, language en" in shown

    subs = write_submissions(tmp_path / "subs", "01_scaling", {
        "ada": submission(course, "01_scaling", {"ex1_1": "def double(x):\n    return 2 * x\n"}),
        "ben": submission(course, "01_scaling", {"ex1_1": "def double(x):\n    return x + x + 1\n"}),
    })
    out = tmp_path / "out"
    ok(autograder(course, "grade", str(subs), "-o", str(out), "-j", "1"))
    table = grades(out)
    assert set(table) == {"ada", "ben"}
    assert (table["ada"]["1.1"], table["ada"]["total"], table["ada"]["max"]) == ("2", "2", "2")
    assert table["ada"]["status"] == "graded" and table["ben"]["status"] == "graded"
    assert float(table["ben"]["1.1"]) < 2
    ben = exercise_result(out, "ben", "01_scaling", "1.1")
    assert ben["points"] < 2 and ben["max_points"] == 2
    assert {c["mistake"] for c in ben["checks"] if c["mistake"]} == {"adds-one"}
    assert exercise_result(out, "ada", "01_scaling", "1.1")["status"] == "passed"
    feedback = (out / "feedback" / "ben__01_scaling.md").read_text(encoding="utf-8")
    assert "Diagnosis" in feedback and "x + x + 1" in feedback

    # Ben's self-check names his mistake from this course's own self-check data (dist/fingerprints.json),
    # never from another course's under the same exercise ID.
    checked = autograder(course, "check", str(subs / "ben" / "01_scaling.ipynb"))
    assert checked.returncode == 1 and "adds 1: it is 2 * x, not x +" in checked.stdout, \
        checked.stdout + checked.stderr


# -- adding an exercise to the real course -------------------------------------------------------
STATEMENT_2_6 = ("## 练习 2.6　权重的行和\n"
                 "\n"
                 "注意力权重的每一行都应当加和为 1：这是检查一个注意力实现最简单的办法。\n"
                 "\n"
                 "**任务**：写 `row_sums(weights)`：`weights` 形状 (..., Tq, Tk)；"
                 "返回形状 (..., Tq) 的张量，第 i 个元素是第 i 行（沿最后一维）的和，dtype 不变。")

SOLUTION_2_6 = '''\
def row_sums(weights):
    """Exercise 2.6: the sum of every row of weights.

    weights: (..., Tq, Tk). Returns (..., Tq), in weights' dtype.
    """
    ### BEGIN SOLUTION
    return weights.sum(dim=-1)   # each row is one query's weights over the keys
    ### END SOLUTION'''

PUBLIC_2_6 = '''

# -- 2.6 row_sums ------------------------------------------------------------------
precision(("2.6",), Precision.ONE_FLOAT32, statement=PRECISION_RULE)    # (the notebook's conventions say it)


@check("2.6", "shape", P, Kind.SHAPE, zh="输出形状 (..., Tq)，dtype 不变",
       en="output shape (..., Tq) in the input's dtype")
def _row_sums_shape(ctx: Context) -> None:
    B, Tq, Tk = ctx.sizes(3)
    for dtype, batch in ((torch.float32, (B,)), (torch.float64, ())):
        ctx.expect_tensor(ctx.call(ctx.randn(*batch, Tq, Tk, dtype=dtype)), (*batch, Tq), dtype,
                          what="row_sums(weights)")


@check("2.6", "shape-values", P, Kind.NUMERIC, zh="输出形状 (..., Tq)、dtype 不变，每个元素是一行的和",
       en="output of shape (..., Tq) in the input's dtype, each element the sum of one row")
def _row_sums_values(ctx: Context) -> None:
    B, Tq, Tk = ctx.sizes(3)
    for dtype, batch in ((torch.float32, ()), (torch.float64, (B,))):
        weights = ctx.randn(*batch, Tq, Tk, dtype=dtype)
        rows = weights.double().reshape(-1, Tk).tolist()
        want = torch.tensor([sum(row) for row in rows], dtype=torch.float64).reshape(*batch, Tq)
        got = ctx.expect_tensor(ctx.call(weights), (*batch, Tq), dtype, what="row_sums(weights)")
        ctx.expect_close(got, want, dtype, what="row_sums(weights)")
'''

HIDDEN_2_6 = '''

# -- 2.6 row_sums ------------------------------------------------------------------
@check("2.6", "reference-random", H, Kind.NUMERIC, zh="随机尺寸、批量维、dtype：与参考答案一致",
       en="random sizes, batch dims, dtypes: agrees with the reference", same_as="shape-values")
def _row_sums_reference(ctx: Context) -> None:
    for batch, dtype in zip(BATCHES, (torch.float64, torch.float32, torch.float64)):
        Tq, Tk = ctx.sizes(2)
        with ctx.case(zh=f"批量维 {batch}", en=f"batch dims {batch}"):
            weights = ctx.randn(*batch, Tq, Tk, dtype=dtype, scale=2.0)
            want = ctx.reference(weights)
            _expect_like(ctx, ctx.call(weights), want, dtype, f"row_sums (Tq={Tq}, Tk={Tk}, {dtype})")


@check("2.6", "edge-one-key", H, Kind.EDGE, zh="Tk = 1：每行只有一个元素", en="Tk = 1: one element per row",
       statement="第 i 个元素是第 i 行（沿最后一维）的和")
def _row_sums_edge(ctx: Context) -> None:
    weights = ctx.randn(3, 4, 1)
    _expect_like(ctx, ctx.call(weights), ctx.reference(weights), torch.float64, "row_sums (Tk = 1)")


@check("2.6", "gradients", H, Kind.GRADIENT, zh="梯度能传回输入", en="gradients reach the input",
       statement="梯度要能从输出传回每个输入")
def _row_sums_gradients(ctx: Context) -> Iterator[None]:
    yield from input_gradients(ctx, ("weights",), (0,), ctx.randn(2, 3, 4))


near_answer("2.6", r"return\\w+\\.sum\\(dim=-1\\)")
'''

ALTERNATIVES_2_6 = '''

# -- 2.6 row_sums ------------------------------------------------------------------
@alternative("2.6", "einsum", zh="einsum 沿最后一维求和", en="einsum over the last dim")
def _row_sums_einsum(weights):
    return torch.einsum("...k->...", weights)


@alternative("2.6", "times-ones", zh="乘以全 1 向量", en="a matmul with a vector of ones")
def _row_sums_ones(weights):
    return weights @ weights.new_ones(weights.shape[-1])


@alternative("2.6", "loop-over-keys", zh="对键逐个相加", en="adds the keys one by one")
def _row_sums_loop(weights):
    total = torch.zeros_like(weights[..., 0])
    for k in range(weights.shape[-1]):
        total = total + weights[..., k]
    return total
'''

MISTAKES_2_6 = '''

# -- 2.6 row_sums ------------------------------------------------------------------
@mistake("2.6", "sums-over-queries", zh="沿查询（倒数第二维）求了和：应沿最后一维（键）求和",
         en="sums over the queries (dim -2): sum along the last dim, the keys")
def _row_sums_queries(weights):
    return weights.sum(dim=-2)


@mistake("2.6", "mean-not-sum", zh="算的是每行的平均值，不是和", en="computes each row's mean, not its sum")
def _row_sums_mean(weights):
    return weights.mean(dim=-1)
'''

MEAN_2_6 = "def row_sums(weights):\n    return weights.mean(dim=-1)\n"
QKV = "02_qkv_attention"


def add_exercise_2_6(course: Path) -> None:
    """What docs/instructor/exercises.md tells an instructor: the notebook's cells, course.yml's entry, the checks."""
    # (1) statement, solution and check cells after 2.5's test cell (the test cell comes from build).
    path = course / "source" / QKV / f"{QKV}.ipynb"
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if gid(c) == "ex2_5_tests") + 1
    nb.cells[at:at] = [
        nbgrader_cell("markdown", "ex2_6_statement", "ex2-6-statement", STATEMENT_2_6),
        nbgrader_cell("code", "ex2_6", "ex2-6-solution", SOLUTION_2_6, solution=True),
        nbgrader_cell("code", "ex2_6_check", "ex2-6-check", 'check("2.6")'),
    ]
    ids = [c.id for c in nb.cells]
    assert len(ids) == len(set(ids))
    nbformat.validate(nb)
    nbformat.write(nb, path)
    # (2) course.yml: one entry, edited as text so every comment stays.
    yml = course / "course.yml"
    text = yml.read_text(encoding="utf-8")
    anchor = '      - {id: "2.5", function: softmax_jacobian'
    line = next(row for row in text.splitlines() if row.startswith(anchor))
    entry = '      - {id: "2.6", function: row_sums, points: 1, title: "row sums", title_zh: "权重的行和"}'
    yml.write_text(text.replace(line + "\n", f"{line}\n{entry}\n", 1), encoding="utf-8")
    # (3) a public check, a hidden check, known mistakes.
    for name, code in (("checks.py", PUBLIC_2_6), ("hidden.py", HIDDEN_2_6), ("mistakes.py", MISTAKES_2_6),
                       ("alternatives.py", ALTERNATIVES_2_6)):
        with open(course / "source" / QKV / name, "a", encoding="utf-8") as f:
            f.write(code)


@pytest.mark.slow
def test_adding_an_exercise_end_to_end(course_root: Path, tmp_path: Path) -> None:
    add_exercise_2_6(course_root)
    exercises = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))["assignments"][1]
    assert [e["id"] for e in exercises["exercises"]][-1] == "2.6"
    full = sum(e["points"] for e in exercises["exercises"])     # 02's points, 2.6's one among them

    # (4) build: it writes 2.6's test cell from course.yml into the source, then derives the rest.
    built = ok(autograder(course_root, "build"))
    assert f"updated the test cells of source/{QKV}/{QKV}.ipynb from course.yml" in built
    source = nbformat.read(course_root / "source" / QKV / f"{QKV}.ipynb", as_version=4)
    order = [gid(c) for c in source.cells]
    assert order[order.index("ex2_5_tests") + 1:order.index("ex2_5_tests") + 5] == \
        ["ex2_6_statement", "ex2_6", "ex2_6_check", "ex2_6_tests"]
    tests_cell = cell_of(source, "ex2_6_tests")
    assert tests_cell.metadata.nbgrader.points == 1 and tests_cell.metadata.nbgrader.grade
    assert 'check("2.6", score=True)' in tests_cell.source
    release = nbformat.read(course_root / "release" / QKV / f"{QKV}.ipynb", as_version=4)
    assert 'raise NotImplementedError("请完成练习 2.6")' in cell_of(release, "ex2_6").source
    assert "weights.sum(dim=-1)" not in cell_of(release, "ex2_6").source
    assert cell_of(release, "ex2_6_tests").metadata.nbgrader.points == 1
    assert "def row_sums(weights):" in (course_root / "solutions" / "qkv_attention.py").read_text(encoding="utf-8")
    fingerprints = json.loads((course_root / "dist" / "fingerprints.json").read_text(encoding="utf-8"))
    assert set(fingerprints["exercises"]["2.6"]["mistakes"]) == {"sums-over-queries", "mean-not-sum"}
    assert "autograder/data/02_qkv_attention/checks.py" in bundle_names(course_root)
    ok(autograder(course_root, "build", "--check"))                      # what the instructor commits is current

    # (5) validate: the reference passes every check of 2.6, both mistakes lose points and are named.
    validated = ok(autograder(course_root, "validate", "2.6"))
    assert "catalog fair and sound" in validated and "sums-over-queries" in validated and "mean-not-sum" in validated
    assert "3 correct alternatives; full marks on every seed: 3" in validated

    # (6) self-check on a student's notebook with 2.6 solved (and nothing else): its public checks pass.
    solved = submission(course_root, QKV, {"ex2_6": reference_code(course_root, QKV)["ex2_6"]})
    mine = tmp_path / "mine" / f"{QKV}.ipynb"
    mine.parent.mkdir()
    nbformat.write(solved, mine)
    checked = autograder(course_root, "check", str(mine), "--exercise", "2.6", "--language", "en")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Its check named by its title (the student's words): "output of shape (..., Tq) in the input's dtype..."
    assert "output of shape (..., Tq)" in checked.stdout and "all passed" in checked.stdout

    # (7) grade: a full submission gets 2.6's point, one with a known mistake less, the mistake named.
    everything = reference_code(course_root, QKV)
    subs = write_submissions(tmp_path / "subs", QKV, {
        "ada": submission(course_root, QKV, everything),
        "ben": submission(course_root, QKV, {**everything, "ex2_6": MEAN_2_6}),
    })
    out = tmp_path / "out"
    ok(autograder(course_root, "grade", str(subs), "-o", str(out), "-j", "1", "--language", "en"))
    table = grades(out)
    # (max: the assignment's maximum, its written question's points included: autograder.course.written.maximum)
    written = sum(q["points"] for q in exercises.get("questions") or ())
    assert table["ada"]["2.6"] == "1" and table["ada"]["total"] == f"{full:g}" and \
        table["ada"]["max"] == f"{full + written:g}"
    assert float(table["ben"]["2.6"]) < 1 and table["ben"]["2.4"] == "3"
    ada, ben = (exercise_result(out, s, QKV, "2.6") for s in ("ada", "ben"))
    assert (ada["points"], ada["max_points"], ada["status"]) == (1, 1, "passed")
    assert ben["points"] < 1 and {c["mistake"] for c in ben["checks"] if c["mistake"]} == {"mean-not-sum"}
    feedback = (out / "feedback" / f"ben__{QKV}.md").read_text(encoding="utf-8")
    assert "each row's mean, not its sum" in feedback

    # (8) "the tests pick the exercise up from course.yml": the suite's course-derived tests, run on the copy.
    env = {**os.environ, "AUTOGRADER_COURSE": str(course_root / "course.yml")}
    env.pop("AUTOGRADER_FINGERPRINTS", None)
    suite = subprocess.run([sys.executable, "-m", "pytest", "-v", "-x", "-p", "no:cacheprovider", "-m", "not slow",
                            "tests/curriculum/test_catalog_01_02.py", "tests/curriculum/test_alternatives.py"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-2000:]
    assert "[2.6] PASSED" in suite.stdout, suite.stdout[-3000:]      # 2.6 among the parametrized exercises
