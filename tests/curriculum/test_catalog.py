"""The check catalog of every assignment, one test each (a new assignment joins by itself): validate finds it
sound, and each reference solution passes the public checks alone. What is particular to one assignment (its
strictness, its statements' claims about torch) is in tests/curriculum/test_catalog_<assignments>.py."""
from __future__ import annotations

import pytest

from autograder import catalog as C
from autograder.authoring.validate import solution_for, validate
from autograder.course.config import load_course
from support import failed, grade

ASSIGNMENTS = {a.id: [e.id for e in a.exercises] for a in load_course().assignments}
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_validate_is_sound(assignment):
    """Every reference passes, every exercise has checks and at least two known mistakes, every hidden check's
    requirement is stated, and each known mistake is caught and named. (The correct alternatives are graded in
    the sandbox by tests/curriculum/test_alternatives.py.)"""
    exercises = ASSIGNMENTS[assignment]
    v = validate(exercises=exercises, alternatives=False)
    assert v.reference_failures == []
    assert v.missing == []
    assert v.requirements == []
    assert {m.exercise for m in v.verdicts} == set(exercises)
    gaps = [(m.exercise, m.mistake, m.named_as) for m in v.verdicts if not (m.caught and m.diagnosed)]
    assert gaps == []
    assert v.ok


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_reference_solutions_score_full_marks_on_the_public_checks_alone(course, assignment):
    for e in ASSIGNMENTS[assignment]:
        result = grade(course, e, solution_for(course, e), audiences=(C.Audience.PUBLIC,), seed=7)
        assert result.status is C.Status.PASSED, (e, failed(result))
