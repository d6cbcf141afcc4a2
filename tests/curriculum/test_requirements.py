"""No unenforced requirement (issue 55, 3): every sentence of every statement's task, requirements and
forbidden calls, every display formula and every signature is enforced by a check, shown allowed by an
alternative, or declared not graded with a reason; validate fails on any other.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder import catalog as C
from autograder.authoring.requirements import (normalized, requirement_coverage, requirement_lines,
                                               split_sentences, statement_requirements)
from autograder.course.config import load_course

COURSE = load_course()


@pytest.fixture(scope="module")
def catalog():
    C.load_catalog(COURSE, hidden=True, mistakes=True, alternatives=True)
    return C.CHECKS


STATEMENT = """## 练习 9.9　示例 `double_it(x, factor=2)`

一段说明，不是要求。

$$y = 2x$$

**任务**：写 `double_it(x)`。返回 `x` 的两倍。

| 参数 | 形状 |
|---|---|
| `x` | (N,) |

**要求**
- 空张量返回空张量。
- dtype 不变；设备不变。

**提示**：用乘法。这一句不是要求。

**禁止调用**：`torch.mul`。
"""


def test_requirement_sentences_are_the_task_the_requirements_the_formulas_and_the_signature():
    sentences = split_sentences(requirement_lines(STATEMENT))
    assert sentences == ["`double_it(x, factor=2)`", "$$y = 2x$$", "写 `double_it(x)`。", "返回 `x` 的两倍。",
                         "`x` | (N,)", "空张量返回空张量。", "dtype 不变；设备不变。", "禁止调用`torch.mul`。"]


def test_every_statement_has_requirements_and_each_is_enforced(catalog):
    found = statement_requirements(COURSE)
    assert set(found) == {e.id for e in COURSE.exercises} and all(found.values())
    coverage, problems = requirement_coverage(COURSE)
    assert problems == []
    assert len(coverage) == sum(map(len, found.values())) >= 140
    # Most are enforced by checks; declarations that a sentence is not graded stay the exception.
    by_checks = sum(bool(r.checks) for r in coverage)
    assert by_checks >= 0.8 * len(coverage), by_checks


def test_the_tie_rule_of_5_7_is_enforced_by_the_checks_that_catch_ties_to_the_last(catalog):
    """The issue's case: 5.7 says ties at temperature 0 go to the lowest index, and no check fed a tie."""
    coverage, _ = requirement_coverage(COURSE, ["5.7"])
    ties = [r for r in coverage if "并列时取编号最小" in r.sentence]
    assert len(ties) == 1 and ties[0].checks, ties
    _, ex = COURSE.exercise("5.7")
    wrong = next(m for m in C.MISTAKES["5.7"] if m.name == "ties-to-the-last")
    from autograder.grading.references import reference

    result = C.run_exercise(ex, C.in_process_runner({ex.function: wrong.fn}),
                            audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN), tolerances=COURSE.tolerances,
                            seed_parts=("requirements", 0), reference=reference(COURSE, "5.7"))
    failed = {r.check for r in result.checks if not r.passed}
    assert failed & {name.split("/", 1)[1] for name in ties[0].checks}, (failed, ties[0].checks)


def test_a_sentence_that_nothing_enforces_fails_validate(catalog):
    from autograder.authoring.validate import validate
    from autograder.catalog.declarations import CHECKS, Check

    coverage, _ = requirement_coverage(COURSE, ["5.7"])
    ties = next(r for r in coverage if "并列时取编号最小" in r.sentence)
    original = list(CHECKS["5.7"])
    enforcing = {name.split("/", 1)[1] for name in ties.checks}
    try:
        CHECKS["5.7"] = [Check(**{**c.__dict__, "statement": tuple(
            w for w in c.statements if normalized(w) not in normalized(ties.sentence)) or None})
            if c.name in enforcing else c for c in original]
        _, problems = requirement_coverage(COURSE, ["5.7"])
        assert len(problems) == 1 and "5.7: no check enforces «`temperature == 0`" in problems[0], problems
        v = validate(COURSE, seeds=(0,), exercises=["5.7"], alternatives=False)
        assert not v.ok and v.unenforced == problems
    finally:
        CHECKS["5.7"] = original
        C.load_catalog(COURSE, hidden=True, mistakes=True, alternatives=True)


def test_a_not_graded_declaration_must_name_one_sentence(catalog):
    from autograder.catalog.declarations import NOT_GRADED, NotGraded

    before = list(NOT_GRADED.get("5.7", []))
    try:
        NOT_GRADED["5.7"] = before + [NotGraded("5.7", "月球上的随机数", "a test")]
        _, problems = requirement_coverage(COURSE, ["5.7"])
        assert problems == ["5.7: not_graded('月球上的随机数') is in 0 requirement sentences, not one"]
    finally:
        NOT_GRADED["5.7"] = before


def test_requirements_md_is_current(catalog):
    """The committed list (README.md and docs/instructor/validate.md name it) is what validate writes today."""
    from autograder.authoring.validate import Validation, requirements_markdown

    coverage, problems = requirement_coverage(COURSE)
    text = requirements_markdown(Validation([], [], [], coverage=coverage, unenforced=problems), COURSE)
    committed = Path(COURSE.root, "requirements.md").read_text(encoding="utf-8")
    assert committed == text, ("requirements.md is stale: run `autograder validate --no-alternatives "
                               "--requirements requirements.md`")
