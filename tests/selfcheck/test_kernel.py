"""Self-check: check("2.4") in a notebook's namespace, named mistakes from fingerprints, and
``autograder check NOTEBOOK.ipynb``. The fingerprints are built here, never read from a committed file."""
from __future__ import annotations

import json
import shutil
import re
import time
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.course.config import load_course
from autograder.authoring.fingerprints import build_fingerprints, pack_value, verify_fingerprints, write_fingerprints
from autograder.catalog.fingerprints import FingerprintDiagnoser, dumps, load_fingerprints
from autograder.selfcheck import SelfCheckResult, self_check

ROOT = Path(__file__).resolve().parents[2]
COURSE = load_course()

CORRECT = """
import math
import torch

def scaled_dot_product_attention(Q, K, V):
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)   # (..., Tq, Tk)
    return weights @ V, weights
"""
NO_SCALE = CORRECT.replace(" / math.sqrt(Q.shape[-1])", "")
WRONG_DIM = CORRECT.replace("dim=-1)", "dim=-2)")
STUB = """
def scaled_dot_product_attention(Q, K, V):
    raise NotImplementedError("Exercise 2.4")
"""
FORBIDDEN = """
import torch.nn.functional as F

def scaled_dot_product_attention(Q, K, V):
    out = F.scaled_dot_product_attention(Q, K, V)
    weights = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).softmax(dim=-1)
    return out, weights
"""
# Edits its inputs in place: the sandbox hands copies, so self-check must too.
IN_PLACE = """
import math
import torch

def scaled_dot_product_attention(Q, K, V):
    Q /= math.sqrt(Q.shape[-1])
    weights = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)
    return weights @ V, weights
"""
NOISY = CORRECT + """
import sys, warnings
_correct = scaled_dot_product_attention

def scaled_dot_product_attention(Q, K, V):
    print("debugging", file=sys.stderr)
    warnings.warn("a student warning")
    return _correct(Q, K, V)
"""


@pytest.fixture(scope="module")
def fingerprints_file(tmp_path_factory) -> Path:
    data = build_fingerprints(COURSE, exercises=["2.4"])
    return write_fingerprints(data, tmp_path_factory.mktemp("fp") / "fingerprints.json")


@pytest.fixture(autouse=True)
def _use_fingerprints(fingerprints_file, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_FINGERPRINTS", str(fingerprints_file))


def student(code: str, call: str = 'check("2.4")') -> tuple[SelfCheckResult, dict]:
    """Run ``code`` and then ``call`` in a fresh namespace, as a notebook would: check finds the functions itself."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(code + "\nfrom autograder import check\nresult = " + call + "\n", "<notebook>", "exec"), namespace)
    return namespace["result"], namespace


def statuses(result: SelfCheckResult) -> dict[str, str]:
    return {e.exercise: e.status.value for e in result.exercises}


def mistakes_named(result: SelfCheckResult) -> set[str]:
    return {c.mistake for e in result.exercises for c in e.checks if c.mistake}


# -- check() in a namespace ---------------------------------------------------------
def test_correct_answer_passes_and_writes_nothing_to_stderr(capsys):
    result, _ = student(CORRECT)
    assert bool(result) and result.passed
    assert statuses(result) == {"2.4": "passed"}
    assert all(c.passed for c in result.exercises[0].checks) and len(result.exercises[0].checks) >= 3
    out, err = capsys.readouterr()
    assert err == ""
    assert "全部通过" in out                     # a script prints the text once (zh by default)
    assert "全部通过" in repr(result)
    assert 'data-status="passed"' in result._repr_html_()


@pytest.mark.parametrize(("code", "mistake", "words"), [
    (NO_SCALE, "no-scale", "1/√d"),
    (WRONG_DIM, "softmax-wrong-dim", "softmax"),
])
def test_known_mistake_is_named_from_the_fingerprints(code, mistake, words, capsys):
    result, _ = student(code)
    assert not result
    assert statuses(result) == {"2.4": "failed"}
    assert mistake in mistakes_named(result)
    text = result.text()
    assert words in text and "→" in text
    html = result._repr_html_()
    assert f'data-mistake="{mistake}"' in html
    assert "expected" in result.exercises[0].checks[-1].message.en or any(
        c.message and "expected" in c.message.en for c in result.exercises[0].checks)
    assert capsys.readouterr().err == ""


def test_without_fingerprints_the_failure_is_still_shown(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_FINGERPRINTS", str(tmp_path / "absent.json"))
    result, _ = student(NO_SCALE)
    assert statuses(result) == {"2.4": "failed"}
    assert mistakes_named(result) == set()
    assert any("`autograder build` makes it" in note.message.en for note in result.notes)


def test_stub_is_not_attempted_calmly(capsys):
    result, _ = student(STUB)
    assert not result
    assert statuses(result) == {"2.4": "not_attempted"}
    out, err = capsys.readouterr()
    assert err == ""
    assert "尚未作答" in out and "Traceback" not in out and "✗" not in out
    assert "not attempted" in student(STUB, 'check("2.4", language="en")')[0].text()


def test_forbidden_call_is_named():
    result, _ = student(FORBIDDEN)
    assert statuses(result) == {"2.4": "forbidden"}
    assert "F.scaled_dot_product_attention" in result.text()


def test_inputs_edited_in_place_do_not_fool_or_break_the_checks():
    result, _ = student(IN_PLACE)
    assert result.passed, result.text()


def test_student_prints_and_warnings_never_reach_stderr(capsys):
    result, _ = student(NOISY)
    assert result.passed
    captured = capsys.readouterr()
    assert captured.err == "" and "debugging" not in captured.out


@pytest.mark.parametrize("body", [
    "raise ValueError('<b>bad</b> input')",
    "import sys; sys.exit(3)",
    "return 'not a tuple'",
    "return (1, 2, 3)",
])
def test_student_errors_never_raise(body, capsys):
    result, _ = student(f"def scaled_dot_product_attention(Q, K, V):\n    {body}\n")
    assert not result
    assert statuses(result)["2.4"] in ("error", "failed")
    assert "<b>bad" not in result._repr_html_()        # escaped
    assert capsys.readouterr().err == ""


def test_unknown_exercise_gives_did_you_mean(capsys):
    result, _ = student(CORRECT, 'check("2.44")')
    assert not result and result.exercises == []
    assert 'check("2.4")' in result.text()
    en, _ = student(CORRECT, 'check("scaled_dot_product_atention", language="en")')
    assert "Did you mean" in en.text() and "scaled_dot_product_attention" in en.text()
    assert capsys.readouterr().err == ""


def test_ids_as_numbers_and_function_names_work():
    assert student(CORRECT, "check(2.4)")[0].passed
    assert student(CORRECT, 'check("scaled_dot_product_attention")')[0].passed


def test_language_follows_course_and_is_overridable():
    zh, _ = student(CORRECT)
    assert zh.language == COURSE.language.value == "zh"
    en, _ = student(CORRECT, 'check("2.4", language="en")')
    assert en.language == "en" and "all passed" in en.text() and "全部通过" not in en.text()
    odd, _ = student(CORRECT, 'check("2.4", language="fr")')
    assert odd.passed and odd.language == "zh" and "fr" in odd.text()


def test_missing_function_is_named():
    result, _ = student("x = 1")
    assert statuses(result) == {"2.4": "missing"}
    assert "scaled_dot_product_attention" in result.text()


def test_no_argument_runs_every_exercise_of_the_notebook():
    result, _ = student(STUB + "\ndef softmax(x, dim=-1):\n    raise NotImplementedError('2.2')\n", "check()")
    assert set(statuses(result)) == {e.id for e in COURSE.assignment("02_qkv_attention").exercises}
    assert statuses(result)["2.4"] == "not_attempted"
    nothing, _ = student("x = 1", "check()")
    assert not nothing and nothing.exercises == [] and 'check("2.4")' in nothing.text()


def test_notebook_name_picks_the_assignment():
    result = self_check({"__session__": "/home/s/03_padding_masks.ipynb"}, None, course=COURSE)
    assert set(statuses(result)) == {e.id for e in COURSE.assignment("03_padding_masks").exercises}
    assert set(statuses(result).values()) == {"missing"}


def test_a_warm_call_gives_the_same_verdict():
    """A second check of the same answer (caches warm) says the same; its speed is bench/'s business."""
    first, _ = student(CORRECT)
    result, _ = student(CORRECT)
    assert result.passed and first.passed


# -- fingerprints -------------------------------------------------------------------------
def test_fingerprints_are_deterministic_and_small(fingerprints_file):
    again = dumps(build_fingerprints(COURSE, exercises=["2.4"]))
    assert again == fingerprints_file.read_text(encoding="utf-8")
    data = json.loads(again)
    entry = data["exercises"]["2.4"]
    assert set(entry["mistakes"]) >= {"no-scale", "softmax-wrong-dim"}
    assert entry["requests"] and len(again) < 200_000
    assert "def " not in again and "torch.softmax" not in again     # outputs, never code


def test_fingerprints_name_what_the_live_diagnoser_names(fingerprints_file):
    assert verify_fingerprints(load_fingerprints(fingerprints_file), COURSE, exercises=["2.4"]) == []


def test_damaged_or_foreign_fingerprints_are_ignored(tmp_path):
    bad = tmp_path / "fp.json"
    bad.write_text("{not json", encoding="utf-8")
    assert load_fingerprints(bad)["exercises"] == {}
    bad.write_text(json.dumps({"format": 99, "exercises": {"2.4": {}}}), encoding="utf-8")
    assert load_fingerprints(bad)["exercises"] == {}
    diagnoser = FingerprintDiagnoser(COURSE.tolerances, {"format": 1, "exercises": {"2.4": {"requests": 5}}})
    result = self_check(_namespace(NO_SCALE), "2.4", course=COURSE, fingerprints=diagnoser.data)
    assert statuses(result) == {"2.4": "failed"}


def test_sampled_outputs_match_only_the_same_output():
    import torch

    from autograder.inside import plain
    from autograder.catalog.fingerprints import stored_matches, unpack_value

    gen = torch.Generator().manual_seed(0)
    ref = {"weights": torch.rand(4, 5, 6, generator=gen, dtype=torch.float64), "out": torch.rand(4, 3, generator=gen)}
    wrong = {"weights": ref["weights"].clone(), "out": ref["out"].clone()}
    wrong["weights"][2, 3, 4] += 0.5                    # the one place this mistake departs
    # The file's JSON sorts keys; the student's dict keeps its own order.
    packed = json.loads(dumps(pack_value(plain.roundtrip(wrong), plain.roundtrip(ref))))
    assert "idx" in packed["arrays"]["a0"]              # 120 elements: sampled
    stored = unpack_value(packed)
    tol = COURSE.tolerances
    assert stored_matches(plain.roundtrip(wrong), stored, tol)
    assert not stored_matches(plain.roundtrip(ref), stored, tol)
    assert not stored_matches(plain.roundtrip({"out": wrong["out"], "weights": wrong["weights"][:3]}), stored, tol)


@pytest.mark.slow
def test_every_exercise_fingerprints_agree_with_live_diagnosis():
    data = build_fingerprints(COURSE)
    size = len(dumps(data))
    print(f"fingerprints.json: {size / 1000:.0f} kB for {len(data['exercises'])} exercises")
    # 224 known mistakes over 29 exercises, each stored where it departs from the reference (sampled past 32
    # elements): under 1.25 MB (1.06 MB with 05's module probes, whose every parameter has a gradient), which
    # the student bundle compresses to under a third.
    assert size < 1_250_000
    # Through JSON, as self-check reads the file (dict keys come back sorted).
    assert verify_fingerprints(json.loads(dumps(data)), COURSE) == []


@pytest.mark.slow
def test_fingerprints_built_here_name_every_mistake_under_other_cpu_kernels(tmp_path):
    """A student's laptop computes other float bits than the instructor's build: torch's plainest
    kernels (ATEN_CPU_CAPABILITY=default) stand in for it. The self-check there must name each known
    mistake exactly as the live diagnoser does, from the fingerprints built here."""
    import os
    import subprocess
    import sys

    file = write_fingerprints(build_fingerprints(COURSE), tmp_path / "fingerprints.json")
    script = ("import json, sys, torch\n"
              "from autograder.authoring.fingerprints import verify_fingerprints\n"
              "from autograder.catalog.fingerprints import load_fingerprints\n"
              "print(torch.backends.cpu.get_cpu_capability())\n"
              "print(json.dumps(verify_fingerprints(load_fingerprints(sys.argv[1]))))\n")
    done = subprocess.run([sys.executable, "-c", script, str(file)], capture_output=True, text=True,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    assert done.returncode == 0, done.stderr[-3000:]
    capability, problems = done.stdout.splitlines()[-2:]
    assert capability == "DEFAULT"
    assert json.loads(problems) == []


def _namespace(code: str) -> dict:
    namespace: dict = {}
    exec(code, namespace)
    return namespace


# -- autograder check NOTEBOOK.ipynb ------------------------------------------------------
def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 02 查询、键与值")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)
    return path


SOLUTIONS_02 = (ROOT / "solutions" / "qkv_attention.py").read_text(encoding="utf-8")


def test_cli_all_correct_exits_0(tmp_path, capsys):
    path = notebook(tmp_path / "02_qkv_attention.ipynb", "from autograder import check\n%matplotlib inline",
                    SOLUTIONS_02, 'check("2.4")')
    assert cli.main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "全部通过" in out and "F.scaled_dot_product_attention" in out


def test_cli_wrong_answer_exits_1_and_names_the_mistake(tmp_path, capsys):
    path = notebook(tmp_path / "02_qkv_attention.ipynb", SOLUTIONS_02, NO_SCALE, "1 / 0")
    assert cli.main(["check", str(path), "--language", "en", "--exercise", "2.4"]) == 1
    out = capsys.readouterr().out
    assert "1/sqrt(d)" in out
    assert "ZeroDivisionError" in out          # the cell that raised is reported, the rest still ran


def test_cli_stub_exits_1(tmp_path, capsys):
    path = notebook(tmp_path / "mine.ipynb", STUB)
    assert cli.main(["check", str(path), "--exercise", "2.4", "--language", "en"]) == 1
    assert "not attempted" in capsys.readouterr().out


def test_cli_unreadable_notebook_exits_2(tmp_path, capsys):
    bad = tmp_path / "02_qkv_attention.ipynb"
    bad.write_text("{", encoding="utf-8")
    assert cli.main(["check", str(bad)]) == 2
    assert "ERROR" in capsys.readouterr().err


def test_cli_unknown_exercise_exits_2(tmp_path, capsys):
    path = notebook(tmp_path / "02_qkv_attention.ipynb", CORRECT)
    assert cli.main(["check", str(path), "--exercise", "2.44"]) == 2
    err = capsys.readouterr().err
    # The course's language, and a terminal's terms: --exercise, not check("...") (issue 24, item 10).
    assert "没有编号为 '2.44' 的练习" in err and "--exercise 2.4" in err and "check(" not in err


def short_limits(tmp_path: Path, monkeypatch, call_seconds: float = 2, submission_seconds: float = 60,
                 demo_seconds: float = 3) -> None:
    """This course, with short time limits, for the checks below (set as `autograder --course` would)."""
    text = (ROOT / "course.yml").read_text(encoding="utf-8")
    text = text.replace("call_seconds: 10 ", f"call_seconds: {call_seconds} ")
    text = text.replace("demo_seconds: 120 ", f"demo_seconds: {demo_seconds} ")
    text = text.replace("submission_seconds: 120 ", f"submission_seconds: {submission_seconds} ")
    folder = tmp_path / "course"
    shutil.copytree(ROOT / "source", folder / "source", ignore=shutil.ignore_patterns("__pycache__"))
    course = folder / "course.yml"
    course.write_text(text, encoding="utf-8")
    assert load_course(course).limits.call_seconds == call_seconds
    monkeypatch.setenv("AUTOGRADER_COURSE", str(course))


# A call stuck in C: sum() over a long range never returns to the interpreter loop, where a signal could
# stop it (the regex engine, by contrast, checks for signals and is stopped like a Python loop).
C_LOOP = CORRECT.replace("def scaled_dot_product_attention(Q, K, V):\n",
                         "def scaled_dot_product_attention(Q, K, V):\n    sum(range(10 ** 12))\n")


@pytest.mark.slow
def test_cli_stops_an_endless_cell_and_names_it(tmp_path, monkeypatch, capsys):
    short_limits(tmp_path, monkeypatch)
    path = notebook(tmp_path / "02_qkv_attention.ipynb", CORRECT, "x = 0\nwhile True:\n    x += 1")
    start = time.perf_counter()
    assert cli.main(["check", str(path), "--language", "en"]) == 1
    seconds = time.perf_counter() - start
    out = capsys.readouterr().out
    assert "cell 3 (x = 0) was still running after 2 s and was stopped; the cells after it ran as usual" in out, out
    print(f"endless cell stopped after {seconds:.1f} s")
    assert seconds < 30


@pytest.mark.slow
def test_cli_checks_every_exercise_past_a_looping_function(tmp_path, monkeypatch, capsys):
    """2.1 does not compile, 2.2 calls F.softmax, 2.3 loops: a demonstration cell that calls 2.3 is stopped and
    named as what it is (and where it was stuck), and every exercise is still checked and reported."""
    short_limits(tmp_path, monkeypatch)
    from autograder.authoring.session import Notebooks
    from autograder.course.config import load_course

    nb = nbformat.reads(Notebooks(load_course(ROOT / "course.yml")).notebook("02_qkv_attention").decode(),
                        as_version=4)
    broken = {"ex2_1": "def project_qkv(x, W_q, W_k, W_v):\n    return x @ W_q,, x\n",
              "ex2_2": "import torch.nn.functional as F\n\ndef softmax(x, dim=-1):\n    return F.softmax(x, dim=dim)\n",
              "ex2_3": "def attention_scores(Q, K):\n    while True:\n        pass\n"}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        cell.source = broken.get(gid, cell.source)
    path = tmp_path / "B.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["check", str(path), "--language", "en"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    flat = " ".join(out.replace("│", " ").split())          # the table's wrapped cells as running text
    # The chapter's demonstration cell has a budget of its own, and its message names where it was without
    # guessing a loop there (issue 48).
    assert "a demonstration cell of the chapter) was still running after 3 s (course.yml limits.demo_seconds) and " \
           "was stopped, while it was calling your attention_scores; the cells after it ran as usual" in out, out
    # One row per exercise at least, each check named by its title (the student's words, not its id).
    for row in ("2.1 │ project_qkv │ ? function missing", "2.2 │ softmax │ ✗ forbidden call", "✗ timed out"):
        assert row in out, (row, out)
    assert "2.3 │ output shape (..., Tq, Tk)" in out and "2.4 │ output shapes and dtype" in out, out
    assert "scaled_dot_product_attention was still running after 2 s (course.yml limits.call_seconds) and was " \
           "stopped inside your function attention_scores" in flat, flat


def test_in_kernel_check_stops_a_looping_call_and_the_kernel_goes_on(tmp_path, monkeypatch):
    """check("2.3") in a kernel: the call stops after limits.call_seconds, names the function, every later call
    of it is answered at once, and the notebook's namespace works as before (no alarm left behind)."""
    import signal

    from autograder.selfcheck.kernel import self_check

    short_limits(tmp_path, monkeypatch, call_seconds=1)
    namespace = {"__name__": "__main__"}
    exec(compile("import math, torch\ndef attention_scores(Q, K):\n    while True:\n        pass\n", "<cell 1>",
                 "exec"), namespace)
    before = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    result = self_check(namespace, "2.3", language="en")
    seconds = time.perf_counter() - start
    (exercise,) = result.exercises
    messages = [c.message.en for c in exercise.checks]
    assert exercise.status.value == "timeout" and not result.passed
    assert "attention_scores was still running after 1 s" in messages[0], messages
    assert all("not run again" in m or "still running" in m for m in messages), messages
    assert seconds < 10, seconds                     # one call's second, not one per check
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    exec(compile("def attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])\n",
                 "<cell 2>", "exec"), namespace)
    assert self_check(namespace, "2.3").passed


def test_in_kernel_check_interrupted_is_a_note_not_a_traceback(monkeypatch, capsys):
    from autograder.selfcheck import kernel

    def attention_scores(Q, K):
        raise KeyboardInterrupt

    monkeypatch.setitem(globals(), "attention_scores", attention_scores)
    result = kernel.check("2.3", language="en")
    assert not result.passed and "interrupted" in result.notes[0].message.en
    assert "Traceback" not in capsys.readouterr().out


@pytest.mark.slow
def test_cli_stops_a_call_stuck_in_c_and_names_the_exercise(tmp_path, monkeypatch, capsys):
    short_limits(tmp_path, monkeypatch)
    path = notebook(tmp_path / "02_qkv_attention.ipynb", C_LOOP)
    assert cli.main(["check", str(path), "--exercise", "2.4"]) == 1
    out = capsys.readouterr().out
    assert "练习 2.4（调用 scaled_dot_product_attention）运行超过 2 秒" in out, out


@pytest.mark.slow
def test_cli_whole_run_bound(tmp_path, monkeypatch, capsys):
    """Many short cells, none over call_seconds, still stop within submission_seconds: the notebook's share of it
    (what the checks' own time leaves) is spent, the cell running then is stopped, the cells left are skipped and
    named, and the checks still run."""
    short_limits(tmp_path, monkeypatch, call_seconds=3, submission_seconds=4)
    path = notebook(tmp_path / "02_qkv_attention.ipynb", CORRECT, *["import time\ntime.sleep(1)"] * 30)
    assert cli.main(["check", str(path), "--language", "en"]) == 1
    out = capsys.readouterr().out
    flat = " ".join(out.replace("│", " ").split())
    assert re.search(r"cell \d+ \(import time\) was stopped after [\d.]+ s: the notebook's share of the time ran "
                     r"out \(2 s: course.yml limits.submission_seconds less the 2 s kept for the checks\)", flat), out
    assert re.search(r"cells [\d, ]+, 32 were not run: the notebook's share of the time, 2 s, was spent", flat), out
    assert "2.4 output shapes and dtype ✓ passed" in flat, out          # checked in the checks' own time


def table_rows(out: str) -> dict[str, list[tuple[str, str]]]:
    """The self-check table's rows per exercise: (result, message), a message wrapped over lines joined again."""
    rows: dict[str, list[tuple[str, str]]] = {}
    last: list[tuple[str, str]] = []
    for line in out.splitlines():
        cols = [c.strip() for c in line.split("│")]
        if len(cols) != 7:
            continue
        if cols[1]:
            last = rows.setdefault(cols[1], [])
            last.append((cols[3], cols[4]))
        elif last and cols[4]:
            last[-1] = (last[-1][0], f"{last[-1][1]} {cols[4]}")
    return rows


def solved_02(edits: dict[str, str]) -> nbformat.NotebookNode:
    """02's notebook with the solutions filled in, each cell whose nbgrader id ``edits`` names given its source."""
    from autograder.authoring.session import Notebooks

    nb = nbformat.reads(Notebooks(load_course(ROOT / "course.yml")).notebook("02_qkv_attention").decode(),
                        as_version=4)
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in edits:
            cell.source = edits[gid].replace("{first}", cell.source.splitlines()[0])
    return nb


EXERCISES_02 = [e.id for e in COURSE.assignment("02_qkv_attention").exercises]
#: 2.3 as a student who loops forever writes it.
LOOPING_2_3 = "def attention_scores(Q, K):\n    while True:\n        pass\n"
#: 2.4 stuck in one long C call (see C_LOOP) when it is given batch dimensions, as the checks do and the chapter's
#: demonstration cells (one sequence each) do not: only the parent's clock can stop it, during the checks.
C_LOOP_2_4 = CORRECT.replace("def scaled_dot_product_attention(Q, K, V):\n",
                             "def scaled_dot_product_attention(Q, K, V):\n    if Q.dim() > 2:\n"
                             "        sum(range(10 ** 12))\n")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["example cell", "demo calls a loop", "exercise stuck in C"])
def test_cli_a_loop_anywhere_leaves_every_exercise_listed_and_the_others_checked(case, tmp_path, monkeypatch, capsys):
    """Issue 66, item 3: a demonstration cell's own time (demo_seconds) as long as the whole run's
    (submission_seconds), as course.yml has them. A loop in the chapter's example cell, in a demonstration cell that
    calls the student's looping 2.3, or in one long C call of 2.4 that only the parent can stop: the table lists
    every exercise of 02, the loop named, every other exercise checked, and those not checked said so and why."""
    short_limits(tmp_path, monkeypatch, call_seconds=1, submission_seconds=20, demo_seconds=20)
    edits = {"example cell": {"facts_attention": "{first}\nwhile True:\n    pass\n"},
             "demo calls a loop": {"ex2_3": LOOPING_2_3},
             "exercise stuck in C": {"ex2_4": C_LOOP_2_4}}[case]
    path = tmp_path / "02_qkv_attention.ipynb"
    nbformat.write(solved_02(edits), path)
    assert cli.main(["check", str(path), "--language", "en"]) == 1
    out = capsys.readouterr().out
    flat = " ".join(out.replace("│", " ").split())
    rows = table_rows(out)
    assert sorted(rows) == EXERCISES_02, out
    passed = {ex for ex, results in rows.items() if all(r == "✓ passed" for r, _ in results)}
    if case == "example cell":
        # The example cell is stopped when the notebook's share runs out (never the checks' time): the cells
        # after it that need its variables raise, and every exercise is checked.
        assert re.search(r"cell 21 \(# 本章的例子[^)]*\) was stopped after [\d.]+ s: the notebook's share of the "
                         r"time ran out \(10 s: course.yml limits.submission_seconds less the 10 s kept for the "
                         r"checks\)", flat), out
        assert passed == set(EXERCISES_02), out
    elif case == "demo calls a loop":
        assert re.search(r"cell 21 \(# 本章的例子[^)]*\) was stopped after [\d.]+ s, while it was calling your "
                         r"attention_scores: the notebook's share of the time ran out", flat), out
        assert passed == {"2.1", "2.2", "2.5"}, out
        assert "attention_scores was still running after 1 s (course.yml limits.call_seconds)" in rows["2.3"][0][1]
        assert "scaled_dot_product_attention was still running after 1 s (course.yml limits.call_seconds) and was " \
               "stopped inside your function attention_scores" in rows["2.4"][0][1], out
    else:
        # The parent had to kill the child: what the child had checked comes with it, the rest is said not checked.
        assert "✗ exercise 2.4 (a call to scaled_dot_product_attention) was still running after 1 s" in out, out
        assert passed == {"2.1", "2.2", "2.3"}, out
        assert rows["2.4"] == rows["2.5"] == [("✗ timed out", "not checked: the self-check was stopped in exercise "
                                                             "2.4 (a call to scaled_dot_product_attention)")], out


def test_checks_past_their_own_time_list_every_exercise_as_not_checked():
    """The checks' own time spent (a deadline already past): every exercise is listed, not checked, and why."""
    from autograder.selfcheck.public_checks import ChecksTime, run_public

    namespace = _namespace(SOLUTIONS_02)
    exercises = COURSE.assignment("02_qkv_attention").exercises
    got = []
    results = run_public(namespace, list(exercises), COURSE, notes=[], on_result=got.append,
                         time_left=ChecksTime(time.monotonic(), 12))
    assert [r.exercise for r in results] == [r.exercise for r in got] == EXERCISES_02
    assert {r.status.value for r in results} == {"timeout"}
    assert {c.message.en for r in results for c in r.checks} == {"not checked: the 12 s kept for the checks were spent"}


def test_in_kernel_check_stopped_part_way_lists_every_exercise(monkeypatch):
    """check() of the whole notebook, stopped (the stop button) during 2.3: 2.1 and 2.2 with their results, 2.3 to
    2.5 listed as not checked, and why."""
    from autograder.selfcheck import kernel

    namespace = _namespace(SOLUTIONS_02)

    def attention_scores(Q, K):
        raise KeyboardInterrupt

    namespace.update(attention_scores=attention_scores, __session__="02_qkv_attention.ipynb")
    monkeypatch.setattr(kernel, "caller_namespace", lambda depth: namespace)
    monkeypatch.setattr(kernel, "_show", lambda result: None)
    result = kernel.check(language="en")
    assert not result.passed and "interrupted" in result.notes[0].message.en
    assert statuses(result) == {"2.1": "passed", "2.2": "passed", "2.3": "timeout", "2.4": "timeout",
                                "2.5": "timeout"}
    for exercise in result.exercises[2:]:
        assert [c.message.en for c in exercise.checks] == ["not checked: the self-check was interrupted"]


# -- a real kernel ------------------------------------------------------------------------
@pytest.mark.slow
def test_in_a_real_kernel(tmp_path, fingerprints_file, monkeypatch):
    from nbclient import NotebookClient

    # The kernel runs in tmp_path, outside any course: it uses this one, as a student's kernel uses the
    # course their installed bundle carries.
    monkeypatch.setenv("AUTOGRADER_COURSE", str(ROOT / "course.yml"))

    warm = "import time\n_t = time.perf_counter()\ncheck('2.4')\nprint(f'WARM {time.perf_counter() - _t:.3f}')"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "from autograder import check", CORRECT, 'check("2.4")', warm,
        NO_SCALE, 'check("2.4")', STUB, 'check("2.4")', FORBIDDEN, 'check("2.4"); x = 1')]
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    executed = client.execute()
    html, streams = [], []
    for cell in executed.cells:
        html.append("".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", [])))
        streams += [o for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
    assert not [s for s in streams if s["name"] == "stderr"], streams
    correct, warm_html, mistake, stub, forbidden = html[2], html[3], html[5], html[7], html[9]
    assert 'data-status="passed"' in correct and "全部通过" in correct
    assert correct.count('class="autograder-selfcheck"') == 1        # shown once, not twice
    assert 'data-status="passed"' in warm_html        # the warm call's time: bench/bench_peers.py reports it
    assert 'data-mistake="no-scale"' in mistake and "1/√d" in mistake
    assert 'data-status="not_attempted"' in stub and "尚未作答" in stub
    assert 'data-status="forbidden"' in forbidden and "F.scaled_dot_product_attention" in forbidden


def test_fingerprints_weigh_the_students_other_calls_as_the_live_diagnoser_does(fingerprints_file):
    """A stored mistake whose output the student's other calls contradict (the mistake departs from the reference
    there, the student's output does not) is not named; the same calls showing the mistake leave it named."""
    from autograder import catalog as C
    from autograder.catalog.fingerprints import copying_runner
    from autograder.grading.references import reference
    from autograder.inside.probes import execute

    data = load_fingerprints(fingerprints_file)
    stored = FingerprintDiagnoser(COURSE.tolerances, data)
    C.load_catalog(COURSE, hidden=False, mistakes=True)
    no_scale = next(m for m in C.MISTAKES["2.4"] if m.name == "no-scale")
    calls = []

    def recording(request):
        reply = copying_runner({"scaled_dot_product_attention": no_scale.fn})(request)
        if reply.status == "ok":
            calls.append((request, reply.value()))
        return reply

    _, ex = COURSE.exercise("2.4")
    C.run_exercise(ex, recording, audiences=[C.Audience.PUBLIC], tolerances=COURSE.tolerances,
                   seed_parts=(C.PUBLIC_SEED,))
    named = [(request, value) for request, value in calls if stored("2.4", request, value) is not None]
    assert len(named) >= 2
    (first, value), (other, shown) = named[0], named[-1]
    right = execute({"scaled_dot_product_attention": reference(COURSE, "2.4")}, C.copied(other)).value()
    assert stored("2.4", first, value, evidence=[(other, shown)]).name == "no-scale"
    assert stored("2.4", first, value, evidence=[(other, right)]) is None
