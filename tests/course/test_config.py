"""course.yml: the real file validates; every kind of bad file gets one clear line and exit 2."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder.course.config import load_course, parse_course
from autograder.core.errors import ConfigError
from support import ROOT

COURSE_FILE = ROOT / "course.yml"
CONTRACT = COURSE_FILE


def test_course_declares_every_exercise_of_the_contract():
    course = load_course()
    ids = [e.id for e in course.exercises]
    assert ids == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1", "2.2", "2.3", "2.4", "2.5",
                   "3.1", "3.2", "3.3", "3.4", "3.5", "4.1", "4.2", "4.3", "4.4", "4.5",
                   "5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7", "5.8", "5.9"]
    assert [a.module for a in course.assignments] == [
        "rnn_decay", "qkv_attention", "padding_masks", "multi_head_attention", "transformer_block"]
    assert course.exercise("2.4")[1].function == "scaled_dot_product_attention"
    assert course.tolerances.for_dtype("torch.float32").rtol > course.tolerances.for_dtype("torch.float64").rtol


def _bad(mutate) -> str:
    data = yaml.safe_load(COURSE_FILE.read_text())
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_course(data)
    return info.value.message


def test_wrong_type_names_the_field():
    msg = _bad(lambda d: d["assignments"][1]["exercises"][0].__setitem__("points", "many"))
    # Named as the reader knows it (exercise 2.1), with where it is in the file.
    assert msg.startswith("course.yml: exercise 2.1 (assignments[1].exercises[0]): points:")
    assert "many" in msg


def test_missing_field_names_the_field():
    msg = _bad(lambda d: d["tolerances"].pop("float64"))
    assert msg == "course.yml: tolerances.float64: missing (required field)"


def test_typo_gets_did_you_mean():
    msg = _bad(lambda d: d["limits"].__setitem__("memory_mbb", d["limits"].pop("memory_mb")))
    assert "limits.memory_mbb: unknown key" in msg and "did you mean 'memory_mb'?" in msg


def test_exercise_id_must_be_quoted():
    msg = _bad(lambda d: d["assignments"][0]["exercises"][0].__setitem__("id", 1.1))
    assert "assignment 01_rnn_decay (assignments[0]): exercises[0].id" in msg and "quoted" in msg


def test_duplicate_exercise_id_is_refused():
    msg = _bad(lambda d: d["assignments"][0]["exercises"][1].__setitem__("id", "1.1"))
    assert "'1.1' appears twice" in msg


def test_unknown_exercise_lookup_suggests():
    course = load_course()
    with pytest.raises(ConfigError.__mro__[1]) as info:  # AutograderError
        course.exercise("2.6")
    assert "2.6" in info.value.message and info.value.hint


@pytest.mark.parametrize("text, field", [
    ("name: x\nseed: oops\n", "seed"),
    ("[1, 2]\n", "top level"),
    ("name: [unclosed\n", "not valid YAML"),
    (CONTRACT.read_text().replace("assignments:", "assignmnts:"), "did you mean 'assignments'"),
])
def test_cli_reports_each_problem_on_a_line_exit_2_no_traceback(tmp_path, text, field):
    bad = tmp_path / "course.yml"
    bad.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "autograder", "--course", str(bad), "course"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("ERROR ") and field in lines[0], proc.stderr
    assert all(line.startswith("  course.yml: ") for line in lines[1:]), proc.stderr   # every problem, none hidden
    assert "Traceback" not in proc.stderr


def test_cli_shows_the_course():
    proc = subprocess.run([sys.executable, "-m", "autograder", "course"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "30 exercises" in proc.stdout


def test_an_unknown_assignment_lists_the_known_ones() -> None:
    from autograder.course.config import load_course
    from autograder.core.errors import UnknownExercise

    course = load_course()
    with pytest.raises(UnknownExercise) as caught:
        course.assignment("02_qkv")
    assert caught.value.hint.startswith("did you mean '02_qkv_attention'? the assignments are 01_rnn_decay, ")
    with pytest.raises(UnknownExercise) as caught:
        course.assignment("zzz")
    assert caught.value.hint == "the assignments are " + ", ".join(a.id for a in course.assignments)


def test_every_problem_is_listed_and_exercises_are_named():
    def edit(d):
        ex = d["assignments"][1]["exercises"][1]
        ex["point"] = ex.pop("points")
        d["limits"]["memory_mbb"] = 1
    msg = _bad(edit)
    assert msg.splitlines() == [
        "course.yml: limits.memory_mbb: unknown key (did you mean 'memory_mb'?)",
        "  course.yml: exercise 2.2 (assignments[1].exercises[1]): point: unknown key (did you mean 'points'?)",
        "  course.yml: exercise 2.2 (assignments[1].exercises[1]): points: missing (required field)"]


def test_course_names_a_function_the_source_does_not_define(course_root):
    import yaml

    config = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    config["assignments"][1]["exercises"][1]["function"] = "softmx"
    (course_root / "course.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "autograder", "--course", str(course_root / "course.yml"), "course"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("ERROR course.yml: exercise 2.2: function 'softmx' is not defined in "
            "source/02_qkv_attention/02_qkv_attention.ipynb (cell 'ex2_2')") in proc.stderr
    assert "did you mean 'softmax'?" in proc.stderr and "Traceback" not in proc.stderr


# -- which course: found from the current folder, as git finds its repository ------------------------
def _autograder(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_COURSE"}
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, env={**environ, **env},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_command_uses_the_nearest_course_from_the_current_folder_upward(course_root):
    """In a copy of the course (and in any folder below it) `autograder` acts on the copy, not on the
    repository it was installed from; `autograder course` says which course.yml it uses."""
    import yaml

    config = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    config["name"] = "The copy"
    (course_root / "course.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    below = course_root / "source" / "02_qkv_attention"
    for cwd in (course_root, below):
        done = _autograder("course", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == f"course file: {course_root.resolve() / 'course.yml'}"
        assert "The copy: 5 assignments" in done.stdout
    # `autograder build --check` checks the copy: an edit there is named, the repository is not touched.
    release = course_root / "release" / "02_qkv_attention" / "02_qkv_attention.ipynb"
    release.write_bytes(release.read_bytes().replace(b"\n", b"\r\n", 1))
    done = _autograder("build", "--check", cwd=below)
    assert done.returncode == 1 and "release/02_qkv_attention/02_qkv_attention.ipynb (stale)" in done.stderr, \
        done.stdout + done.stderr


def test_course_option_takes_a_file_or_its_folder_and_outside_a_course_is_a_clear_error(tmp_path, course_root):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for named in (course_root, course_root / "course.yml"):
        done = _autograder("--course", str(named), "course", cwd=outside)
        assert done.returncode == 0 and f"course file: {course_root.resolve() / 'course.yml'}" in done.stdout, \
            done.stderr
    done = _autograder("course", cwd=outside)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == f"ERROR no course.yml in {outside.resolve()} or any folder above it"
    assert "--course" in done.stderr


def test_a_course_copy_loads_its_own_checks(course_root):
    """The catalog comes from the course's folder: a check added in the copy exists there only."""
    from autograder import catalog as C

    checks = course_root / "source" / "02_qkv_attention" / "checks.py"
    checks.write_text(checks.read_text(encoding="utf-8") + (
        "\n\n@check(\"2.1\", \"only-in-the-copy\", Audience.PUBLIC, Kind.PROPERTY, zh=\"副本\", en=\"the copy\")\n"
        "def _only_in_the_copy(ctx: Context) -> None:\n    pass\n"), encoding="utf-8")
    try:
        C.load_catalog(load_course(course_root / "course.yml"), hidden=False, mistakes=False)
        assert "only-in-the-copy" in [c.name for c in C.CHECKS["2.1"]]
        assert C.CHECKS["2.1"][0].run.__module__ == "autograder_course.qkv_attention.checks"
    finally:
        C.load_catalog(load_course(ROOT / "course.yml"), hidden=True, mistakes=True)
    assert "only-in-the-copy" not in [c.name for c in C.CHECKS["2.1"]]
