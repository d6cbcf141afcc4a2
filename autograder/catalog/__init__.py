"""The check catalog: declarations, the context a check runs in, and scoring.

The engine names no exercise: each assignment's folder of the course (``source/<id>/``) declares
its *public* checks in ``checks.py`` (shipped to students), its hidden checks in ``hidden.py``
and its known mistakes in ``mistakes.py`` (neither is ever shipped); :func:`load_catalog`
imports them.

The package's modules: :mod:`~autograder.catalog.declarations` (what a course declares),
:mod:`~autograder.catalog.context` (what a check sees), :mod:`~autograder.catalog.compare`,
:mod:`~autograder.catalog.outcomes` (statuses, results, what a hidden check may say),
:mod:`~autograder.catalog.scoring` (:func:`run_exercise`), :mod:`~autograder.catalog.runners`,
:mod:`~autograder.catalog.loading`, :mod:`~autograder.catalog.integrity` (hidden checks of inputs and
gradients) and :mod:`~autograder.catalog.fingerprints` (the self-check data).

A check is a function ``run(ctx)`` on the trusted side. It builds inputs, asks
``ctx.call(...)`` to run the student's function (in-process for self-check, in a
sandbox worker for grading), gets back a :class:`plain.Value`, and compares with
``ctx.expect_*``. A failed expectation raises :class:`CheckFailed` with a message
in zh and en; when the failure is numerical, the framework compares the
student's output with each known mistake on the same inputs and names a match.

Points: an exercise's points come from course.yml and are shared among its
checks by ``weight``; a forbidden call anywhere in an exercise scores it 0.

Two rules of the engine (:func:`run_exercise`) keep grading honest:

* *Hidden stays hidden.* A failed expectation carries two messages: the full one
  (values, positions, what came back) and a ``hidden`` one that states what was
  wrong (a shape, a property, which output) with no input, no reference value and
  nothing the student's objects spelled beyond :func:`brief`. A hidden check's
  result only ever holds the hidden one, or a generic sentence naming the check
  when the raiser gave none, so a message nobody wrote for hidden checks cannot
  leak. The ``ctx.expect_*`` helpers write both; ``ctx.expect`` shows its text to
  hidden checks only when declared ``safe``.
* *No points without output.* A check that a submission passes without any
  correct output (a forbidden-call scan passes a function that returns None; a
  "raises ValueError" check passes one that always raises) is declared
  ``needs_output`` (every ``Kind.FORBIDDEN`` check is) and earns its points only
  when an output check of the same exercise (``OUTPUT_KINDS``: it compares values)
  passed. Its status stays; its points are 0 and ``withheld`` says why.
"""
from __future__ import annotations

# What a course's checks import: `from autograder.catalog import Audience, Context, Kind, check, ...`.
from autograder.config import ALTERNATIVES_FILE, COURSE_FILES, HIDDEN_FILE, MISTAKES_FILE, PUBLIC_FILE  # noqa: F401
from autograder.messages import Msg  # noqa: F401
from autograder.catalog.declarations import (ALTERNATIVES, CHECKS, MISTAKES, NEAR_ANSWERS, NOT_GRADED, OUTPUT_KINDS,
                                             SPECS, Alternative, alternative, Audience, Check, check, checks_for,
                                             exercise, ExerciseSpec, Kind, Mistake, mistake, near_answer, not_graded,
                                             NotGraded)  # noqa: F401
from autograder.catalog.outcomes import (BRIEF_LIMIT, brief, CheckFailed, CheckResult, ExerciseResult, hidden_message,
                                         number_free, safe_name, Status)  # noqa: F401
from autograder.catalog.compare import as_float64, compare, mismatch, values_match  # noqa: F401
from autograder.catalog.context import PUBLIC_SEED, Context, Diagnoser, Pending, Runner, stable_seed  # noqa: F401
from autograder.catalog.scoring import WITHHELD, run_exercise  # noqa: F401
from autograder.catalog.runners import copied, in_process_runner, LiveDiagnoser  # noqa: F401
from autograder.catalog.loading import COURSE_PACKAGE, hidden_available, load_catalog  # noqa: F401
