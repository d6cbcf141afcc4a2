"""Fairness, proven as validate proves it: every correct alternative of every exercise (each assignment's
alternatives.py) keeps full marks when graded in the sandbox as a student's notebook, on several seeds;
and the machinery that makes an alternative into a notebook, and finds a hidden check's requirement.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograder import catalog as C
from autograder.authoring.alternatives import alternative_source, grade_alternatives, grade_mistakes
from autograder.authoring.requirements import requirement_gaps, statement_texts
from autograder.course.config import load_course

COURSE = load_course()
#: Seeds per alternative: AUTOGRADER_ALTERNATIVE_SEEDS to change (validate's own default is 3).
SEEDS = int(os.environ.get("AUTOGRADER_ALTERNATIVE_SEEDS", "2"))


@pytest.fixture(scope="module")
def catalog():
    C.load_catalog(COURSE, hidden=True, mistakes=True, alternatives=True)
    return C.ALTERNATIVES


def test_every_exercise_has_three_correct_alternatives(catalog):
    few = {e.id: len(catalog.get(e.id, [])) for e in COURSE.exercises if len(catalog.get(e.id, [])) < 3}
    assert few == {}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", [a.id for a in COURSE.assignments])
def test_every_correct_alternative_keeps_full_marks_in_the_sandbox(catalog, assignment, tmp_path):
    ids = {e.id for e in COURSE.assignment(assignment).exercises}
    todo = [a for e in COURSE.exercises if e.id in ids for a in catalog.get(e.id, [])]
    verdicts = grade_alternatives(COURSE, todo, seeds=SEEDS, jobs=2, workdir=tmp_path)
    assert len(verdicts) == len(todo) and all(v.seeds == SEEDS for v in verdicts)
    unfair = {f"{v.exercise}/{v.name}": v.error or v.lost[:3] for v in verdicts if not v.fair}
    assert unfair == {}


#: Seeds per known mistake graded as a notebook: AUTOGRADER_MISTAKE_SEEDS to change (validate's own default is 3).
MISTAKE_SEEDS = int(os.environ.get("AUTOGRADER_MISTAKE_SEEDS", "1"))


@pytest.mark.slow
@pytest.mark.parametrize("assignment", [a.id for a in COURSE.assignments])
def test_every_known_mistake_loses_points_only_on_its_own_exercise(catalog, assignment, tmp_path):
    """Issue 55, only-loses: each known mistake inside an otherwise correct notebook, graded in the sandbox."""
    ids = {e.id for e in COURSE.assignment(assignment).exercises}
    todo = [m for e in COURSE.exercises if e.id in ids for m in C.MISTAKES.get(e.id, [])]
    verdicts = grade_mistakes(COURSE, todo, seeds=MISTAKE_SEEDS, jobs=2, workdir=tmp_path)
    assert len(verdicts) == len(todo) and all(v.seeds == MISTAKE_SEEDS for v in verdicts)
    assert {f"{v.exercise}/{v.name}": v.said for v in verdicts if not v.ok} == {}


@pytest.mark.slow
def test_the_only_loses_rule_sees_a_mistake_that_costs_a_later_exercise(tmp_path, course_root):
    """With `earlier_mistakes: cascade` a wrong 2.3 costs 2.4 its points too: the rule names it."""
    import yaml

    data = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    data["earlier_mistakes"] = "cascade"
    (course_root / "course.yml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
                                            encoding="utf-8")
    course = load_course(course_root / "course.yml")
    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    try:
        unscaled = next(m for m in C.MISTAKES["2.3"] if m.name == "no-scale")
        (verdict,) = grade_mistakes(course, [unscaled], seeds=1, jobs=1, workdir=tmp_path / "work")
        assert not verdict.ok and verdict.own_lost and verdict.elsewhere
        assert all(loss.startswith("2.4/") for loss in verdict.elsewhere), verdict.elsewhere
    finally:
        C.load_catalog(COURSE, hidden=True, mistakes=True, alternatives=True)


def test_an_alternative_becomes_the_exercise_function_with_its_imports_and_helpers(catalog, tmp_path):
    """What goes into the solution cell: imports, the module-level helpers it uses, the renamed definition."""
    module = tmp_path / "alternatives_example.py"
    module.write_text(
        "import math\nimport torch\nfrom autograder.catalog import alternative\n\n"
        "SCALE = 2.0\n\n\ndef _unused():\n    return 1\n\n\ndef _helper(x):\n    return x * SCALE\n\n\n"
        '@alternative("9.9", "doubled", zh="加倍", en="doubled")\n'
        "def _doubled(x):\n    return _helper(x) + math.pi * 0\n", encoding="utf-8")
    import importlib.util

    spec = importlib.util.spec_from_file_location("alternatives_example", module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    try:
        alt = next(a for a in C.ALTERNATIVES["9.9"] if a.name == "doubled")
        source = alternative_source(alt, "double_it")
    finally:
        C.ALTERNATIVES.pop("9.9", None)
    assert "def double_it(x):" in source and "_doubled" not in source
    assert "import math" in source and "import torch" in source and "autograder" not in source
    assert "SCALE = 2.0" in source and "def _helper" in source and "_unused" not in source
    namespace: dict = {}
    exec(compile(source, "<cell>", "exec"), namespace)
    assert namespace["double_it"](3.0) == 6.0


def test_requirements_are_found_in_what_the_student_reads(catalog):
    texts = statement_texts(COURSE)
    assert set(texts) == {e.id for e in COURSE.exercises}
    # The statement cell and the stub of 2.2, the notebook's own introduction; never the solution.
    assert "softmax(x, dim=-1)" in texts["2.2"] and "约定" in texts["2.2"]
    assert "x.amax(dim=dim, keepdim=True)         #" not in texts["2.2"]
    assert requirement_gaps(COURSE) == []


def test_a_hidden_check_naming_no_requirement_or_a_wrong_one_is_a_gap(catalog):
    from autograder.catalog.declarations import CHECKS, Check

    original = list(CHECKS["2.2"])
    first = next(c for c in original if c.audience is C.Audience.HIDDEN)
    try:
        for statement, same_as, expected in ((None, None, "names no requirement"),
                                             ("在月球上也能运行", None, "is not in what the student reads"),
                                             (None, "no-such-check", "is not a public check of 2.2")):
            CHECKS["2.2"] = [Check(**{**first.__dict__, "statement": statement, "same_as": same_as})
                             if c is first else c for c in original]
            gaps = requirement_gaps(COURSE, ["2.2"])
            assert len(gaps) == 1 and gaps[0].startswith(f"2.2/{first.name}: ") and expected in gaps[0], gaps
    finally:
        CHECKS["2.2"] = original


def test_validate_writes_its_page(tmp_path, monkeypatch, capsys):
    from autograder.cli import main

    monkeypatch.chdir(Path(COURSE.root))
    page = tmp_path / "validate.html"
    code = main(["validate", "2.1", "--no-alternatives", "--html", str(page)])
    text = page.read_text(encoding="utf-8")
    assert code == 0, capsys.readouterr().out
    assert "Known mistakes" in text and "Correct alternatives" in text and "Catalog fair and sound" in text


def test_validates_progress_in_a_log_is_a_line_now_and_then():
    """Issue 66, item 12: rich's bar is transient and draws nothing where stdout is no terminal (a CI log): there
    validate says its progress in a line at the start, every N items, after a while without one, and at the end;
    on a terminal the bar stays as it was (no such line)."""
    import io

    from rich.console import Console

    from autograder.authoring.validate import LogProgress, shown_progress

    out, now = io.StringIO(), [0.0]
    lines = LogProgress("validate", "notebooks graded", every=3, seconds=60.0, stream=out, clock=lambda: now[0])
    lines.plan(7)
    for _ in range(7):
        lines.advance(object())
    assert out.getvalue().splitlines() == [f"validate: {n}/7 notebooks graded" for n in (0, 3, 6, 7)]
    out = io.StringIO()
    slow = LogProgress("validate", "notebooks graded", every=100, seconds=60.0, stream=out, clock=lambda: now[0])
    slow.advance()                                  # (no total planned: the count alone)
    now[0] += 61.0
    slow.advance()
    slow.advance()
    assert out.getvalue().splitlines() == ["validate: 2 notebooks graded"]
    terminal = io.StringIO()
    with shown_progress(Console(file=terminal, force_terminal=True), "in the sandbox", "validate", "graded") \
            as (advance, plan):
        plan(2)
        advance(object())
    assert "validate:" not in terminal.getvalue()


@pytest.mark.slow
def test_validate_without_a_terminal_prints_its_progress(catalog, tmp_path, monkeypatch, capsys):
    """One real run where stdout is no terminal (pytest's capture): 5.2, the exercise with the fewest notebooks to
    grade in the sandbox, on one seed."""
    from autograder.cli import main

    monkeypatch.chdir(Path(COURSE.root))
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):          # (either can make rich call the capture a terminal)
        monkeypatch.delenv(name, raising=False)
    total = len(catalog["5.2"]) + len(C.MISTAKES["5.2"])
    code = main(["validate", "5.2", "--seeds", "1", "-j", "2", "--html", str(tmp_path / "validate.html")])
    out = capsys.readouterr().out
    assert code == 0, out
    said = [line for line in out.splitlines() if line.startswith("validate: ")]
    assert said[0] == f"validate: 0/{total} notebooks graded in the sandbox (correct alternatives, known mistakes)"
    assert said[-1].startswith(f"validate: {total}/{total} "), said
