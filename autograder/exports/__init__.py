"""The kit where courses already live: Gradescope (:mod:`~autograder.exports.gradescope`), Otter
(:mod:`~autograder.exports.otter`, its plugin :mod:`~autograder.exports.otter_plugin`) and nbgrader
(:mod:`~autograder.exports.nbgrader`; the test cells' runtime :mod:`~autograder.exports.nbgrader_cells`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.exports.gradescope import (CHECK_VISIBILITY as CHECK_VISIBILITY, EXECUTABLES as EXECUTABLES,
                                               GRADING_DEPENDENCIES as GRADING_DEPENDENCIES,
                                               KIT_PATTERNS as KIT_PATTERNS,
                                               MAX_SUBMISSION_FILES as MAX_SUBMISSION_FILES,
                                               PlannedCheck as PlannedCheck, TEMPLATES as TEMPLATES,
                                               TORCH_PIN as TORCH_PIN, find_submission as find_submission,
                                               grade_one as grade_one, gradescope_files as gradescope_files,
                                               gradescope_results as gradescope_results, hundredths as hundredths,
                                               planned_checks as planned_checks, requirements_txt as requirements_txt,
                                               run_gradescope as run_gradescope, say_in as say_in,
                                               submission_student as submission_student,
                                               write_json_atomic as write_json_atomic, zip_bytes as zip_bytes)
    from autograder.exports.otter import (OTTER_KIT as OTTER_KIT, otter_files as otter_files,
                                          otter_test_file as otter_test_file, otter_test_name as otter_test_name)

__getattr__ = lazy_exports(__name__, __file__)
