"""``autograder export``: the Gradescope zip run in a fake /autograder, the Otter zip under the real ``otter run``."""
from __future__ import annotations

import json
import math
import os
import shutil
import stat
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import nbformat
import pytest

from support import ROOT, make_samples
from autograder.core import messages as M
from autograder import exports as E
from autograder.exports import otter_plugin as OT
from autograder.cli import main
from autograder.course.config import load_course

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
VENV_BIN = Path(sys.executable).parent
PYTHON = sys.executable


MS = make_samples


# -- Gradescope's results.json specification, as a checker -----------------------------------
# https://gradescope-autograders.readthedocs.io/en/latest/specs/ ("Output format").
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
             "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def spec_problems(data) -> list[str]:
    """Every way ``data`` departs from the results.json format (empty: it conforms)."""
    bad = []
    if not isinstance(data, dict):
        return ["top level is not an object"]
    bad += [f"unknown top-level key {k!r}" for k in set(data) - TOP_KEYS]
    if "score" in data and not _number(data["score"]):
        bad.append("score is not a number")
    if "execution_time" in data and not _number(data["execution_time"]):
        bad.append("execution_time is not a number")
    for key in ("output",):
        if key in data and not isinstance(data[key], str):
            bad.append(f"{key} is not a string")
    for key in ("output_format", "test_output_format", "test_name_format"):
        if key in data and data[key] not in FORMATS:
            bad.append(f"{key} {data[key]!r}")
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBILITY:
            bad.append(f"{key} {data[key]!r}")
    if "extra_data" in data and not isinstance(data["extra_data"], dict):
        bad.append("extra_data is not an object")
    tests = data.get("tests")
    if tests is None and "score" not in data:
        bad.append("neither a top-level score nor tests")
    if tests is not None and not isinstance(tests, list):
        return bad + ["tests is not a list"]
    for i, t in enumerate(tests or []):
        bad += _test_problems(f"tests[{i}]", t, top_score="score" in data)
    return bad


def _test_problems(where: str, t, top_score: bool) -> list[str]:
    """Every way one entry of ``tests`` departs from the format (``top_score``: the results give one)."""
    if not isinstance(t, dict):
        return [f"{where} is not an object"]
    bad = [f"{where}: unknown key {k!r}" for k in set(t) - TEST_KEYS]
    if not top_score and "score" not in t and "status" not in t:
        # A test without a score is an informational check: it carries a status instead.
        bad.append(f"{where}: no score, no status, and no top-level score")
    for key in ("score", "max_score"):
        if key in t and not _number(t[key]):
            bad.append(f"{where}.{key} is not a number")
    if _number(t.get("score")) and _number(t.get("max_score")) and not 0 <= t["score"] <= t["max_score"] + 1e-9:
        bad.append(f"{where}: score {t['score']} outside [0, {t['max_score']}]")
    if "status" in t and t["status"] not in ("passed", "failed"):
        bad.append(f"{where}.status {t['status']!r}")
    for key in ("name", "number", "output"):
        if key in t and not isinstance(t[key], str):
            bad.append(f"{where}.{key} is not a string")
    for key in ("name_format", "output_format"):
        if key in t and t[key] not in FORMATS:
            bad.append(f"{where}.{key} {t[key]!r}")
    if "visibility" in t and t["visibility"] not in VISIBILITY:
        bad.append(f"{where}.visibility {t['visibility']!r}")
    if "tags" in t and not (isinstance(t["tags"], list) and all(isinstance(x, str) for x in t["tags"])):
        bad.append(f"{where}.tags is not a list of strings")
    if "extra_data" in t and not isinstance(t["extra_data"], dict):
        bad.append(f"{where}.extra_data is not an object")
    return bad


def read_results(path: Path) -> dict:
    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constants)


def assert_kit_results(data: dict, *, assignment=QKV) -> None:
    """Valid per the spec, and shaped as the kit promises: one test per check, numbered by exercise."""
    assert spec_problems(data) == []
    plan = E.planned_checks(assignment)
    tests = data["tests"]
    assert [(t["number"], t["extra_data"]["check"]) for t in tests] == [(p.exercise, p.check) for p in plan]
    for t, p in zip(tests, plan):
        assert set(t) >= {"score", "max_score", "status", "name", "number", "output", "visibility"}
        assert t["visibility"] == ("visible" if p.audience == "public" else "after_published")
        assert t["max_score"] == pytest.approx(p.points, abs=1e-6)
        assert t["status"] == ("passed" if t["score"] > 0 else "failed")
        assert t["output"]
    assert sum(t["max_score"] for t in tests) == pytest.approx(assignment.points, abs=1e-4)
    assert sum(t["score"] for t in tests) == pytest.approx(data["score"], abs=1e-4)
    assert data["stdout_visibility"] == "hidden" and data["visibility"] == "visible"


# -- notebooks --------------------------------------------------------------------------------
HOSTILE_CELL = '''import json, os
fake = {{"score": 100.0, "output": "FAKE-RESULT", "tests": []}}
for path in ("/autograder/results/results.json", "{root}/results/results.json"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(fake, f)
    except OSError:
        pass
try:
    with open("{root}/pwned-by-cell", "w") as f:
        f.write("x")
except OSError:
    pass
print(json.dumps(fake))
os._exit(0)
'''

HOSTILE_24 = '''def scaled_dot_product_attention(Q, K, V):
    """Writes full marks where Gradescope reads them, prints fake JSON, then leaves the process."""
    import os

    try:
        with open("{root}/results/results.json", "w") as f:
            f.write('{{"score": 100.0, "output": "FAKE-RESULT"}}')
        with open("{root}/pwned-by-call", "w") as f:
            f.write("x")
    except OSError:
        pass
    print('{{"score": 100.0, "output": "FAKE-RESULT"}}')
    os._exit(0)
'''


def partial_nb() -> nbformat.NotebookNode:
    """2.1-2.3 right, 2.4 without the 1/sqrt(d) scale (a known mistake): partial credit inside 2.4."""
    return MS.submission(QKV, solved=("2.1", "2.2", "2.3"), code={"2.4": MS.NO_SCALE})


def correct_nb() -> nbformat.NotebookNode:
    return MS.submission(QKV, solved="all")


def hostile_nb(root: Path) -> nbformat.NotebookNode:
    return MS.submission(QKV, solved=("2.1", "2.2", "2.3"), code={"2.4": HOSTILE_24.format(root=root)},
                         extra_cells={"imports": HOSTILE_CELL.format(root=root)})


def write_nb(path: Path, nb: nbformat.NotebookNode) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


# -- the zips -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zips(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    assert main(["export", "gradescope", QKV.id, "-o", str(out)]) == 0
    assert main(["export", "otter", QKV.id, "-o", str(out)]) == 0
    return {"gradescope": out / f"{QKV.id}-gradescope.zip", "otter": out / f"{QKV.id}-otter.zip"}


def test_gradescope_zip_layout(zips, tmp_path):
    with zipfile.ZipFile(zips["gradescope"]) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        zf.extractall(tmp_path)
    # At the zip's root, where Gradescope looks; the kit, this assignment's solution only.
    assert {"setup.sh", "run_autograder", "requirements.txt", "course.yml", "autograder/__init__.py",
            "autograder/exports/gradescope.py", "autograder/sandbox/host.py", "autograder/inside/worker.py",
            f"source/{QKV.id}/hidden.py",
            f"source/{QKV.id}/checks.py", f"source/{QKV.id}/mistakes.py",
            "solutions/__init__.py", "solutions/qkv_attention.py"} <= names
    assert not any(n.startswith("solutions/") and n.endswith(("rnn_decay.py", "padding_masks.py")) for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    for script in ("setup.sh", "run_autograder"):
        assert modes[script] & stat.S_IXUSR, f"{script} is not executable in the zip"
        assert subprocess.run(["bash", "-n", str(tmp_path / script)], check=False, capture_output=True).returncode == 0
    setup = (tmp_path / "setup.sh").read_text()
    assert setup.startswith("#!/usr/bin/env bash")
    torch_line = setup.index("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert torch_line < setup.index("-r \"$SOURCE/requirements.txt\""), "torch must be installed before the rest"
    requirements = (tmp_path / "requirements.txt").read_text()
    pins = [line.split("#")[0].strip() for line in requirements.splitlines() if line.split("#")[0].strip()]
    assert not any(p.startswith("torch") for p in pins), "torch comes from setup.sh's CPU index only"
    assert [p.split(">")[0].split("=")[0] for p in pins] == list(E.GRADING_DEPENDENCIES)
    runner = (tmp_path / "run_autograder").read_text()
    assert f'--assignment "{QKV.id}"' in runner and "AUTOGRADER_ROOT" in runner
    # The same inputs give the same bytes (an instructor can tell whether the grader changed).
    files = E.gradescope_files(COURSE, QKV)
    assert E.zip_bytes(files) == zips["gradescope"].read_bytes()


@pytest.mark.slow
def test_otter_zip_layout(zips, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # otter's own imports (ipylab, traitlets)
        from otter.nbmeta_config import NBMetadataConfig
        from otter.test_files import OKTestFile, create_test_file

    with zipfile.ZipFile(zips["otter"]) as zf:
        zf.extractall(tmp_path)
    config = json.loads((tmp_path / "otter_config.json").read_text())
    assert config["plugins"] == [{"autograder.exports.otter_plugin.KitPlugin": {"kit": "kit", "assignment": QKV.id}}]
    assert (tmp_path / "kit" / "run_autograder").is_file()
    assert (tmp_path / "kit" / "solutions" / "qkv_attention.py").is_file()
    plan = E.planned_checks(QKV)
    for ex in QKV.exercises:
        # How Otter's kernel reads a test file (it needs OK_FORMAT = True to take it as OK format).
        tf = create_test_file(str(tmp_path / "tests" / f"ex{ex.id.replace('.', '_')}.py"), NBMetadataConfig())
        assert isinstance(tf, OKTestFile)
        mine = [p for p in plan if p.exercise == ex.id]
        assert [c.name for c in tf.test_cases] == [f"{ex.id} {p.check}" for p in mine]
        assert [c.hidden for c in tf.test_cases] == [p.audience == "hidden" for p in mine]
        assert tf.possible == pytest.approx(ex.points)
        assert not tf.all_or_nothing


def test_cli_refuses_an_unknown_assignment(tmp_path, capsys):
    assert main(["export", "gradescope", "02_qkv_atention", "-o", str(tmp_path)]) == 2
    assert "did you mean '02_qkv_attention'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# -- choosing the notebook, naming the student ------------------------------------------------
def test_find_submission(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    assert E.find_submission(folder, COURSE, QKV, "7").problem.startswith("no notebook")
    write_nb(folder / "mine.ipynb", correct_nb())
    sub = E.find_submission(folder, COURSE, QKV, "7")
    assert (sub.problem, sub.student, sub.assignment, sub.path.name) == (None, "7", QKV.id, "mine.ipynb")
    write_nb(folder / "scratch" / "other.ipynb", correct_nb())
    assert "several notebooks" in E.find_submission(folder, COURSE, QKV, "7").problem
    write_nb(folder / QKV.notebook, correct_nb())
    assert E.find_submission(folder, COURSE, QKV, "7").path.name == QKV.notebook
    other = MS.student_notebook(COURSE.assignment("01_rnn_decay"))
    for p in folder.rglob("*.ipynb"):
        p.unlink()
    write_nb(folder / "x.ipynb", other)
    assert E.find_submission(folder, COURSE, QKV, None).problem.startswith("wrong assignment")


def test_submission_student(tmp_path):
    assert E.submission_student(tmp_path) is None
    (tmp_path / "submission_metadata.json").write_text(json.dumps(
        {"users": [{"email": "b@x.edu", "id": 22, "name": "B"}, {"email": "a@x.edu", "id": 11, "name": "A"}]}))
    assert E.submission_student(tmp_path) == "11+22"


def test_no_notebook_still_gets_a_valid_results_json(tmp_path, capsys):
    for d in ("submission", "results"):
        (tmp_path / d).mkdir()
    (tmp_path / "results" / "results.json").write_text('{"score": 100}')  # stale or planted
    assert E.run_gradescope(tmp_path, QKV.id) == 0
    data = read_results(tmp_path / "results" / "results.json")
    assert_kit_results(data)
    assert data["score"] == 0 and all(t["status"] == "failed" for t in data["tests"])
    said = M.text("submission.no_notebook", COURSE.language)
    assert said in data["output"] and said in data["tests"][0]["output"]


def test_a_grader_fault_still_writes_a_valid_results_json(tmp_path, capsys):
    """Gradescope must always find a results.json: a fault of the grader itself scores 0 and says so."""
    (tmp_path / "submission").mkdir()
    write_nb(tmp_path / "submission" / QKV.notebook, correct_nb())
    assert E.run_gradescope(tmp_path, "99_not_an_assignment") == 1
    data = read_results(tmp_path / "results" / "results.json")
    assert spec_problems(data) == []
    assert data["score"] == 0 and data["tests"][0]["visibility"] == "hidden"   # the traceback is for staff
    assert "99_not_an_assignment" in data["tests"][0]["output"]
    assert "Traceback" in capsys.readouterr().err


# -- the local try, with relative paths ----------------------------------------------------------
@pytest.mark.slow
def test_run_autograder_takes_a_relative_root_and_python(zips, tmp_path):
    """The docs' local try (instructor/exports.md):
    `AUTOGRADER_ROOT=A AUTOGRADER_PYTHON=.venv/bin/python bash A/source/run_autograder`."""
    root = gradescope_dir(tmp_path, zips["gradescope"], 1001)
    write_nb(root / "submission" / QKV.notebook, partial_nb())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOGRADER_COURSE")}
    relative_python = os.path.relpath(PYTHON, tmp_path)        # a venv's python, reached from here
    done = subprocess.run(["bash", "autograder/source/run_autograder"], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "AUTOGRADER_ROOT": "autograder", "AUTOGRADER_PYTHON": relative_python},
                          timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    data = read_results(root / "results" / "results.json")
    assert_kit_results(data)
    assert 5 < data["score"] < 8                               # graded: 2.1-2.3 right, 2.4 without the scale
    # A root that is not there: one line naming it, before anything runs.
    missing = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=tmp_path, capture_output=True,
                             text=True, env={**env, "AUTOGRADER_ROOT": "nowhere", "AUTOGRADER_PYTHON": PYTHON})
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("ERROR AUTOGRADER_ROOT=nowhere: no folder nowhere/source")
    assert len(missing.stderr.strip().splitlines()) == 1


# -- the real runs ----------------------------------------------------------------------------
def gradescope_dir(base: Path, zip_path: Path, user_id: int) -> Path:
    """A folder laid out as Gradescope's /autograder: source/ (the zip), submission/, results/."""
    root = base / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    for d in ("results", "submission"):
        (root / d).mkdir()
    (root / "submission_metadata.json").write_text(json.dumps(
        {"users": [{"email": f"{user_id}@example.edu", "id": user_id, "name": f"Student {user_id}"}]}))
    return root


class Runs:
    """Every slow run, started at once: independent processes, so the machine's cores overlap them."""

    def __init__(self, zips: dict[str, Path], base: Path):
        self.base = base
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, str] = {}
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOGRADER_COURSE")}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        # The same students everywhere (folder, Gradescope id, Otter's notebook name): the same hidden inputs.
        self.gradescope = {s: gradescope_dir(base / f"gs{s}", zips["gradescope"], int(s)) for s in ("1001", "1003")}
        hostile = hostile_nb(self.gradescope["1003"])
        write_nb(self.gradescope["1001"] / "submission" / QKV.notebook, partial_nb())
        write_nb(self.gradescope["1003"] / "submission" / QKV.notebook, hostile)
        # autograder grade: the reference scores. Its copy of the hostile notebook aims at a decoy folder,
        # so that it cannot touch the Gradescope run's files even where the sandbox runs uncaged.
        write_nb(base / "subs" / "1001" / QKV.notebook, partial_nb())
        write_nb(base / "subs" / "1002" / QKV.notebook, correct_nb())
        write_nb(base / "subs" / "1003" / QKV.notebook, hostile_nb(base / "decoy"))
        self._start("grade", [str(VENV_BIN / "autograder"), "--course", str(ROOT), "grade", str(base / "subs"),
                              "-o", str(base / "out"), "--assignment", QKV.id, "-j", "2"], base, env)
        for s, root in self.gradescope.items():
            # bash, as Gradescope runs it: the script is its own entry point.
            self._start(f"gradescope-{s}", ["bash", str(root / "source" / "run_autograder")], root,
                        {**env, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": PYTHON})
        for s, nb in (("1001", partial_nb()), ("1002", correct_nb())):
            # With no Gradescope metadata the kit seeds by the notebook's name: name it for the student.
            folder = base / f"otter{s}"
            path = write_nb(folder / f"{s}.ipynb", nb)
            (folder / "out").mkdir()  # otter run needs its -o folder to exist
            self._start(f"otter-{s}", [str(VENV_BIN / "otter"), "run", "-a", str(zips["otter"]), "-o",
                                       str(folder / "out"), "--no-logo", str(path)], folder, env)

    def _start(self, name: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.procs[name] = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def log(self, name: str) -> str:
        """Wait for a run; its output. It must have succeeded."""
        if name not in self.logs:
            self.logs[name] = self.procs[name].communicate(timeout=600)[0]
        assert self.procs[name].returncode == 0, self.logs[name][-5000:]
        return self.logs[name]

    def kit_scores(self) -> dict[str, float]:
        self.log("grade")
        return {p.stem.split("__")[0]: json.loads(p.read_text())["points"]
                for p in (self.base / "out" / "results").glob("*.json")}

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def runs(zips, tmp_path_factory):
    started = Runs(zips, tmp_path_factory.mktemp("runs"))
    yield started
    started.stop()


@pytest.mark.slow
def test_run_autograder_grades_like_autograder_grade(runs):
    kit_scores = runs.kit_scores()
    runs.log("gradescope-1001")
    partial = read_results(runs.gradescope["1001"] / "results" / "results.json")
    assert_kit_results(partial)
    assert partial["score"] == pytest.approx(kit_scores["1001"], abs=1e-6)
    assert 5 < partial["score"] < 8
    by_check = {(t["number"], t["extra_data"]["check"]): t for t in partial["tests"]}
    wrong = by_check[("2.4", "matches-torch")]
    assert wrong["status"] == "failed" and wrong["score"] == 0 and wrong["visibility"] == "visible"
    assert "1/√d" in wrong["output"]                          # the known mistake, named in the course language
    assert by_check[("2.4", "reference-random")]["visibility"] == "after_published"
    assert all(t["status"] == "passed" for t in partial["tests"] if t["number"] in ("2.1", "2.2", "2.3"))


@pytest.mark.slow
def test_a_hostile_notebook_cannot_change_results_json(runs):
    kit_scores = runs.kit_scores()
    log = runs.log("gradescope-1003")
    root = runs.gradescope["1003"]
    hostile = read_results(root / "results" / "results.json")
    assert_kit_results(hostile)
    assert "FAKE-RESULT" not in json.dumps(hostile) and "FAKE-RESULT" not in log
    assert hostile["score"] == pytest.approx(kit_scores["1003"], abs=1e-6)
    assert hostile["score"] == pytest.approx(5.0, abs=1e-6)   # 2.1-2.3 honest, 2.4 nothing
    assert all(t["score"] == 0 for t in hostile["tests"] if t["number"] == "2.4")
    # The cell and every call of 2.4 stopped their worker: named, graded as zero, the run went on.
    assert M.text("sandbox.exit_status", COURSE.language, status=0) in hostile["output"]
    assert all("中断" in t["output"] for t in hostile["tests"] if t["number"] == "2.4")
    if os.geteuid() == 0:
        # Caged: the worker's uid and chroot never let it reach the grader's folders at all.
        assert not (root / "pwned-by-cell").exists() and not (root / "pwned-by-call").exists()


@pytest.mark.slow
def test_otter_run_reports_the_kit_score(runs):
    kit_scores = runs.kit_scores()
    assert kit_scores["1002"] == pytest.approx(QKV.points)
    for student in ("1001", "1002"):
        log = runs.log(f"otter-{student}")
        data = read_results(runs.base / f"otter{student}" / "out" / "results.json")
        assert spec_problems(data) == []
        scored = [t for t in data["tests"] if "score" in t]
        assert [t["name"] for t in scored] == [f"ex{e.id.replace('.', '_')}" for e in QKV.exercises]
        assert sum(t["score"] for t in scored) == pytest.approx(kit_scores[student], abs=1e-4), log
        assert sum(t["max_score"] for t in scored) == pytest.approx(QKV.points, abs=1e-4)
        assert data["score"] == pytest.approx(kit_scores[student], abs=1e-4)
        assert "graded by the course kit's sandbox" in log
        # Otter's kernel ran the OK tests (no student code there) and reached the kit's verdict too.
        assert f"Otter's kernel agreed with the kit on all {len(E.planned_checks(QKV))} cases" in log


def test_check_passed_without_the_plugin_grades_the_notebook_here(tmp_path, monkeypatch):
    """An Otter config without the plugin: the tests still ask the kit, which grades the kernel's notebook."""
    (tmp_path / "source" / "kit").mkdir(parents=True)
    write_nb(tmp_path / "submission" / "1001.ipynb", partial_nb())
    calls = []

    def grade_notebook(notebook, kit, **kwargs):  # the real one runs in the otter tests above
        calls.append((Path(notebook).name, Path(kit)))
        return {"tests": [{"status": "passed", "extra_data": {"exercise": "2.1", "check": "shapes"}},
                          {"status": "failed", "extra_data": {"exercise": "2.4", "check": "matches-torch"}}]}

    monkeypatch.setattr(OT, "grade_notebook", grade_notebook)
    monkeypatch.chdir(tmp_path / "submission")
    monkeypatch.setenv(OT.RESULTS_ENV, "")
    assert OT.check_passed("2.1", "shapes") is True
    assert OT.check_passed("2.4", "matches-torch") is False
    assert calls == [("1001.ipynb", tmp_path / "source" / "kit")]  # graded once, with the bundled kit
    with pytest.raises(KeyError):
        OT.check_passed("2.4", "no-such-check")
    Path(os.environ[OT.RESULTS_ENV]).unlink()


def test_plugin_without_a_verdict_gives_zero_and_runs_nothing(zips, tmp_path, monkeypatch):
    """The kit cannot grade (no kit/ here): every case fails, the report says why, no student code is kept."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # otter's own imports (ipylab, traitlets)
        from otter.test_files import GradingResults
    with zipfile.ZipFile(zips["otter"]) as zf:
        zf.extractall(tmp_path / "source")
    shutil.copytree(tmp_path / "source" / "tests", tmp_path / "submission" / "tests")
    nb_path = write_nb(tmp_path / "submission" / "1001.ipynb", partial_nb())
    monkeypatch.chdir(tmp_path / "submission")
    monkeypatch.setenv(OT.RESULTS_ENV, "")
    plugin = OT.KitPlugin(str(nb_path), {}, {"kit": "no-such-kit", "assignment": QKV.id})
    executed = plugin.before_execution(nbformat.read(nb_path, as_version=4))
    assert not [c for c in executed.cells if c.cell_type == "code"]    # nothing of the student's for Otter to run
    assert os.environ[OT.RESULTS_ENV]
    results = GradingResults([])
    plugin.after_grading(results)
    assert results.total == 0 and results.possible == pytest.approx(QKV.points)
    assert "could not grade" in results.output and "no-such-kit" in plugin.generate_report()
    assert not os.environ.get(OT.RESULTS_ENV)


def test_export_targets_come_from_one_registry(capsys):
    """Issue 26: each target is one module's TARGET; the command lists and runs whatever the registry holds."""
    from autograder.cli import main
    from autograder.exports.targets import TARGET_MODULES, ExportTarget, targets

    found = targets()
    assert list(found) == ["gradescope", "otter"] and len(TARGET_MODULES) == len(found)
    assert all(isinstance(t, ExportTarget) and t.zip_name("02_x") == f"02_x-{t.name}.zip" for t in found.values())
    try:
        main(["export", "--help"])
    except SystemExit:
        pass
    shown = capsys.readouterr().out
    assert all(name in shown for name in found)
