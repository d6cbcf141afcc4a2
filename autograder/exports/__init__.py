"""The kit where courses already live: Gradescope (:mod:`~autograder.exports.gradescope`), Otter
(:mod:`~autograder.exports.otter`, its plugin :mod:`~autograder.exports.otter_plugin`) and nbgrader
(:mod:`~autograder.exports.nbgrader`; the test cells' runtime :mod:`~autograder.exports.nbgrader_cells`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers; each loads its module on first use (autograder.lazy)
    from autograder.exports.gradescope import (CHECK_VISIBILITY, EXECUTABLES, GRADING_DEPENDENCIES, KIT_PATTERNS,
                                               MAX_SUBMISSION_FILES, PlannedCheck, TEMPLATES, TORCH_PIN,
                                               find_submission, grade_one, gradescope_files, gradescope_results,
                                               hundredths, planned_checks, requirements_txt, run_gradescope, say_in,
                                               submission_student, write_json_atomic, zip_bytes)
    from autograder.exports.otter import OTTER_KIT, otter_files, otter_test_file, otter_test_name

__getattr__ = lazy_exports(__name__, __file__)
