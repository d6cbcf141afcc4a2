"""Otter: ``autograder export otter ASSIGNMENT`` writes ``<assignment>-otter.zip`` for ``otter run -a ZIP
-o OUT NOTEBOOK``: ``otter_config.json`` naming the :class:`autograder.exports.otter_plugin.KitPlugin`
plugin, one OK-format test per exercise (one case per check, worth the check's points) and ``kit/``,
the Gradescope bundle. The plugin grades the submission with ``kit/run_autograder`` (the kit's sandbox)
before Otter executes anything, gives Otter's kernel a notebook without the student's code, and makes
Otter's results the kit's.
"""
from __future__ import annotations

import json
import pprint
from pathlib import Path

from autograder.course.config import Assignment, Course, grade_id
from autograder.exports.gradescope import PlannedCheck, gradescope_files, planned_checks
from autograder.exports.targets import ExportTarget
from autograder.reports.feedback import message_text
from autograder.course.written import maximum


OTTER_KIT = "kit"


# -- Otter ----------------------------------------------------------------------------------------
def otter_test_file(exercise_id: str, checks: list[PlannedCheck], language: str) -> str:
    """One exercise as an OK-format test: one doctest case per check, worth that check's points."""
    cases = []
    for p in checks:
        code = (">>> from autograder.exports.otter_plugin import check_passed\n"
                f">>> check_passed({exercise_id!r}, {p.check!r})\nTrue")
        cases.append({"name": f"{exercise_id} {p.check}", "code": code, "hidden": p.audience == "hidden",
                      "points": p.points, "locked": False,
                      "failure_message": message_text(p.title, language)})
    spec = {"name": otter_test_name(exercise_id), "all_or_nothing": False,
            "suites": [{"type": "doctest", "scored": True, "setup": "", "teardown": "", "cases": cases}]}
    return (f'"""Exercise {exercise_id}, written by `autograder export otter`: the course kit grades it.\n\n'
            "Each case asks the kit whether one check passed; the kit graded the submission in its\n"
            'sandbox (see autograder/otter_tests.py). Points: the check\'s share of the exercise."""\n'
            "OK_FORMAT = True  # Otter's marker of an OK-format test file\n\n"
            f"test = {pprint.pformat(spec, width=110, sort_dicts=False)}\n")


def otter_test_name(exercise_id: str) -> str:
    return grade_id(exercise_id)


def otter_files(course: Course, assignment: Assignment, *, language: str | None = None) -> dict[str, bytes]:
    """Path inside the Otter autograder zip -> bytes."""
    language = language or course.language.value
    plan = planned_checks(assignment)
    files = {f"{OTTER_KIT}/{path}": data
             for path, data in gradescope_files(course, assignment, language=language).items()}
    for ex in assignment.exercises:
        mine = [p for p in plan if p.exercise == ex.id]
        files[f"tests/{otter_test_name(ex.id)}.py"] = otter_test_file(ex.id, mine, language).encode("utf-8")
    config = {
        "lang": "python",
        "plugins": [{"autograder.exports.otter_plugin.KitPlugin": {"kit": OTTER_KIT, "assignment": assignment.id}}],
        # A hidden check's result shows once grades are published, as in the Gradescope export.
        "show_hidden": True,
        "force_public_test_summary": True,
        "show_stdout": False,
        # A top-level score: Otter's total over the assignment's points, i.e. the kit's score. Otter scales its total
        # to this: the autograder's part of the assignment's maximum (autograder.course.written.maximum), its written
        # answers being graded by hand apart.
        "points_possible": maximum(assignment).automatic,
    }
    files["otter_config.json"] = (json.dumps(config, indent=2) + "\n").encode("utf-8")
    return files


def _next_steps(path: Path, assignment: Assignment) -> str:
    return (f"  otter run -a {path} -o OUT {assignment.notebook}   (OUT must exist; run it where the kit is "
            "installed, e.g. this course's .venv)")


#: ``autograder export otter ASSIGNMENT`` (autograder.exports.targets).
TARGET = ExportTarget("otter", "an Otter autograder zip for `otter run` (tests that delegate to the kit)",
                      otter_files, _next_steps)
