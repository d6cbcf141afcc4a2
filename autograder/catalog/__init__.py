"""The check catalog: declarations, the context a check runs in, and scoring.

The engine names no exercise: each assignment's folder of the course (``source/<id>/``) declares
its *public* checks in ``checks.py`` (shipped to students), its hidden checks in ``hidden.py``
and its known mistakes in ``mistakes.py`` (neither is ever shipped); :func:`load_catalog`
imports them.

The package's modules: :mod:`~autograder.catalog.declarations` (what a course declares),
:mod:`~autograder.catalog.context` (what a check sees), :mod:`~autograder.catalog.tolerance` (how far an
answer may be off), :mod:`~autograder.catalog.calls` (a call's request and reply),
:mod:`~autograder.catalog.comparison`, :mod:`~autograder.catalog.outcomes` (statuses, results, what a hidden
check may say), :mod:`~autograder.catalog.scoring` (:func:`run_exercise`), :mod:`~autograder.catalog.runners`,
:mod:`~autograder.catalog.loading`, :mod:`~autograder.catalog.integrity` (hidden checks of inputs and
gradients) and :mod:`~autograder.catalog.fingerprints` (the self-check data).

A check is a function ``run(ctx)`` on the trusted side. It builds inputs, asks
``ctx.call(...)`` to run the student's function (in-process for self-check, in a
sandbox worker for grading), gets back a :class:`plain.Value`, and compares with
``ctx.expect_*``. A failed expectation raises :class:`CheckFailed` with a message
in zh and en; when the failure is numerical, the framework compares the
student's output with each known mistake on the same inputs and names one whose
signature matches: the mistake departs from the reference there, the student's output
matches it, and the student's other outputs do not contradict it (:mod:`~autograder.catalog.runners`).

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
from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.course.files import (ALTERNATIVES_FILE as ALTERNATIVES_FILE, COURSE_FILES as COURSE_FILES,
                                         HIDDEN_FILE as HIDDEN_FILE, MISTAKES_FILE as MISTAKES_FILE,
                                         PUBLIC_FILE as PUBLIC_FILE)
    from autograder.core.messages import Msg as Msg
    from autograder.inside.plain import Value as Value
    from autograder.inside.probes import probe_module as probe_module
    from autograder.catalog.declarations import (ALTERNATIVES as ALTERNATIVES, Alternative as Alternative,
                                                 Audience as Audience, CHECKS as CHECKS, Check as Check,
                                                 ExerciseSpec as ExerciseSpec, Kind as Kind, MISTAKES as MISTAKES,
                                                 Mistake as Mistake, NEAR_ANSWERS as NEAR_ANSWERS,
                                                 NOT_GRADED as NOT_GRADED, NotGraded as NotGraded,
                                                 OUTPUT_KINDS as OUTPUT_KINDS, PRECISIONS as PRECISIONS,
                                                 Precision as Precision, PrecisionSpec as PrecisionSpec,
                                                 SPECS as SPECS, alternative as alternative, check as check,
                                                 checks_for as checks_for, exercise as exercise, mistake as mistake,
                                                 near_answer as near_answer, not_graded as not_graded,
                                                 precision as precision, precision_of as precision_of)
    from autograder.catalog.outcomes import (BRIEF_LIMIT as BRIEF_LIMIT, CheckFailed as CheckFailed,
                                             CheckResult as CheckResult, ExerciseResult as ExerciseResult,
                                             Status as Status, brief as brief, hidden_message as hidden_message,
                                             number_free as number_free, safe_name as safe_name)
    from autograder.catalog.comparison import (all_close_normwise as all_close_normwise, as_float64 as as_float64,
                                               compare as compare, mismatch as mismatch,
                                               values_match as values_match)
    from autograder.catalog.context import (Context as Context, Diagnoser as Diagnoser, PUBLIC_SEED as PUBLIC_SEED,
                                            Pending as Pending, Runner as Runner, stable_seed as stable_seed)
    from autograder.catalog.scoring import WITHHELD as WITHHELD, run_exercise as run_exercise
    from autograder.catalog.calls import copied as copied
    from autograder.catalog.runners import LiveDiagnoser as LiveDiagnoser, in_process_runner as in_process_runner
    from autograder.catalog.loading import (COURSE_PACKAGE as COURSE_PACKAGE, hidden_available as hidden_available,
                                            load_catalog as load_catalog)

__getattr__ = lazy_exports(__name__, __file__)
