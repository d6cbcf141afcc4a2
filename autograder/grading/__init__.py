"""Grading: from a folder or zip of submissions to results, feedback, grades.csv and the LMS files.

For each submission found (:mod:`~autograder.grading.submissions`): read the notebook, open a fresh sandbox
worker with its code cells (:mod:`~autograder.grading.cells`), run every exercise of its assignment, public
and hidden checks, against the course's references (:mod:`~autograder.grading.submission`, the grader of
:mod:`~autograder.grading.grader`), and write ``results/<key>.json`` and ``feedback/<key>.{md,html}``
atomically, then rebuild ``grades.csv`` (:mod:`~autograder.grading.outputs`). Every submission found yields
a row: graded, or a named failure.

Resuming: a result whose notebook hash and grader fingerprint match the current ones is kept (``--force``
regrades). Hidden inputs are seeded per (course seed, student, assignment, file), so a regrade gives
identical scores.

Lanes (:mod:`~autograder.grading.batch`): ``-j N`` grades N submissions at a time. A small batch stays in
this process (threads, one sandbox template); a larger one also runs lanes in trusted grader processes,
forked from this one while it has no other thread (:mod:`~autograder.grading.forked_lanes`), or spawned where
forking is refused (:mod:`~autograder.grading.lanes`), each grading as :mod:`~autograder.grading.lane_grading`
says, or on a Dask cluster (:mod:`~autograder.grading.distributed`). Only JSON crosses a process boundary, and
this process stays the one writer. Student code never runs in any of these processes; the references do, on one
torch thread.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.grading.cells import (DEMO_SKIPPED as DEMO_SKIPPED, SETUP_CELLS as SETUP_CELLS,
                                          demo_cells as demo_cells, submission_cells as submission_cells)
    from autograder.grading.timing import PROFILE_SECTIONS as PROFILE_SECTIONS, flat_profile as flat_profile
    from autograder.grading.grader import (COURSE_FILES as COURSE_FILES, ENGINE_FILES as ENGINE_FILES,
                                           GradingContext as GradingContext, check_catalog as check_catalog,
                                           grader_fingerprint as grader_fingerprint, resolve_device as resolve_device)
    from autograder.grading.submission import (RESULT_MAX_BYTES as RESULT_MAX_BYTES,
                                               RESULT_MAX_CELLS as RESULT_MAX_CELLS, failure as failure,
                                               finalize as finalize, grade_or_fail as grade_or_fail,
                                               grade_submission as grade_submission, grader_fault as grader_fault,
                                               hidden_seed_parts as hidden_seed_parts)
    from autograder.grading.outputs import (Outputs as Outputs, keep_earlier as keep_earlier,
                                            record_or_fail as record_or_fail, render_feedback as render_feedback)
    from autograder.grading.lane_grading import (LaneSetupError as LaneSetupError, lane_config as lane_config,
                                                 lane_grade as lane_grade, lane_warm as lane_warm,
                                                 submission_json as submission_json)
    from autograder.grading.lanes import ProcessLanes as ProcessLanes
    from autograder.grading.batch import (BatchOutcome as BatchOutcome,
                                          PROCESS_MIN_SUBMISSIONS as PROCESS_MIN_SUBMISSIONS, Plan as Plan,
                                          grade_batch as grade_batch, lane_processes as lane_processes, plan as plan)

__getattr__ = lazy_exports(__name__, __file__)
