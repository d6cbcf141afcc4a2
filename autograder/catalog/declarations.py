"""What a course declares: checks (``@check``), known mistakes (``@mistake``), per-exercise facts
(``exercise(..., forbidden=...)``), the precision checks ask of float64 calls (``precision``) and near-answers
(``near_answer``), in the registries the engine reads.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from autograder.inside.forbidden import NAMES, unknown
from autograder.core.messages import Msg


# -- declarations --------------------------------------------------------------
class Audience(str, enum.Enum):
    PUBLIC = "public"    # runs in self-check and in the autograder
    HIDDEN = "hidden"    # autograder only


class Kind(str, enum.Enum):
    SHAPE = "shape"          # shape, dtype, device of every output
    PROPERTY = "property"    # rows sum to 1, exact zeros, round trips, finiteness
    FACT = "fact"            # the chapter's numbers
    NUMERIC = "numeric"      # agreement with a reference on seeded random inputs
    GRADIENT = "gradient"    # gradients against torch
    EDGE = "edge"            # T = 1, one head, fully padded rows, inputs near 1e4
    FORBIDDEN = "forbidden"  # forbidden library calls


#: Checks that compare the student's output with values: passing one is "a correct output".
OUTPUT_KINDS = frozenset({Kind.NUMERIC, Kind.FACT, Kind.GRADIENT})


#: A check: a function of the context, or a generator function that yields once, after it started its calls
#: and before it takes their values (the next check begins there: see scoring.run_exercise). The context is
#: a :class:`autograder.catalog.context.Context`, named here, not imported: context.py builds on these
#: declarations.
CheckFn = Callable[[Any], "Generator[None, None, None] | None"]


def _words(statement: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return () if statement is None else (statement,) if isinstance(statement, str) else tuple(statement)


@dataclass(frozen=True)
class Check:
    exercise: str
    name: str
    audience: Audience
    kind: Kind
    title: Msg
    run: CheckFn
    weight: float = 1.0
    #: Passes without any correct output (a forbidden-call scan, "raises ValueError"): earns its
    #: points only together with a passing check of OUTPUT_KINDS in the same exercise.
    needs_output: bool = False
    #: The requirement a hidden check enforces, so that it tests only what the student was told:
    #: ``statement``, words the exercise's statement says (its markdown cell, the stub's docstring
    #: or the notebook's conventions), and/or ``same_as``, the name of a public check of the same
    #: exercise that tests the same property on other inputs. ``autograder validate`` fails a hidden
    #: check that names neither, or names one that is not there. A public check names its requirement the
    #: same way, so that every requirement sentence has a check (a tuple where it enforces several).
    statement: str | tuple[str, ...] | None = None
    same_as: str | None = None

    @property
    def statements(self) -> tuple[str, ...]:
        return _words(self.statement)


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation with the same signature as the student's function."""

    exercise: str
    name: str
    message: Msg
    fn: Callable[..., Any]
    #: The forbidden calls (as :mod:`autograder.inside.forbidden` names them) that *are* this mistake: one whose
    #: values are right and which only calls what the exercise forbids (SDPA in 4.3). Every check of it fails
    #: as a forbidden call before any value is compared, so it is named by those calls, not by its output
    #: (see :func:`mistake_by_calls`).
    calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alternative:
    """A correct implementation written another way (a loop, einsum, logsumexp, float64 and back...):
    ``autograder validate`` grades it as a submission and fails when it loses any point."""

    exercise: str
    name: str
    description: Msg
    fn: Callable[..., Any]
    #: The words of the statement this alternative shows to be allowed ("其余 torch 函数都可以用"): a
    #: permission is a requirement sentence that no check can enforce and an alternative at full marks proves.
    statement: str | tuple[str, ...] | None = None

    @property
    def statements(self) -> tuple[str, ...]:
        return _words(self.statement)


@dataclass(frozen=True)
class NotGraded:
    """A sentence of an exercise's requirements that no check enforces, on purpose: the statement itself
    says it is not graded ("初始化不计分"), or it promises what the inputs are, or it informs. ``words``
    are words of that sentence; ``why`` says which, for the instructor reading validate."""

    exercise: str
    words: str
    why: str


class Precision(str, enum.Enum):
    """The precision an exercise's checks ask of a call on float64 inputs (float32 calls: course.yml's float32
    tolerance, whatever is declared here). What the statement and the chapter's conventions teach decides it."""

    #: Agreement within what one float32-rounded intermediate can produce: a float32 scalar or table inside a
    #: float64 call (``torch.sqrt(torch.tensor(d))``, a frequency table in the default dtype) is correct.
    ONE_FLOAT32 = "one float32 intermediate"
    #: Agreement to float64's own precision: the statement teaches float64 throughout (its hint leads there, and
    #: a known mistake names a float32 intermediate).
    FLOAT64 = "float64"


@dataclass(frozen=True)
class PrecisionSpec:
    """An exercise's declared precision, and the words of its notebook that teach it."""

    exercise: str
    precision: Precision
    statement: str


@dataclass(frozen=True)
class ExerciseSpec:
    """Per-exercise facts the catalog owns (the rest is in course.yml)."""

    exercise: str
    forbidden: tuple[str, ...] = ()


CHECKS: dict[str, list[Check]] = {}


MISTAKES: dict[str, list[Mistake]] = {}


SPECS: dict[str, ExerciseSpec] = {}


ALTERNATIVES: dict[str, list[Alternative]] = {}


#: exercise -> the precision its checks ask of float64 calls (hidden.py; see :func:`precision`).
PRECISIONS: dict[str, PrecisionSpec] = {}


#: exercise -> the requirement sentences declared not graded (hidden.py; see :class:`NotGraded`).
NOT_GRADED: dict[str, list[NotGraded]] = {}


#: exercise -> regular expressions of code that solves it in one line without being a line of its
#: reference (declared in hidden.py: they describe answers). ``autograder build`` refuses a student
#: bundle with a line that matches (matched with all whitespace removed).
NEAR_ANSWERS: dict[str, tuple[str, ...]] = {}


def check(exercise: str, name: str, audience: Audience, kind: Kind, zh: str, en: str,
          weight: float = 1.0, needs_output: bool | None = None, *, statement: str | tuple[str, ...] | None = None,
          same_as: str | None = None) -> Callable[[CheckFn], CheckFn]:
    """Decorator: declare a check of ``exercise``.

    ``needs_output`` (default: True for ``Kind.FORBIDDEN``, else False) declares a check that
    a submission can pass with no correct output; see the module docstring. ``statement`` and
    ``same_as`` name the requirement a hidden check enforces (see :class:`Check`).
    """
    if needs_output is None:
        needs_output = kind is Kind.FORBIDDEN

    def register(fn: CheckFn) -> CheckFn:
        existing = CHECKS.setdefault(exercise, [])
        if any(c.name == name for c in existing):
            raise ValueError(f"check {exercise}/{name} declared twice")
        existing.append(Check(exercise, name, audience, kind, Msg(zh, en), fn, weight, needs_output,
                              statement, same_as))
        return fn

    return register


def mistake(exercise: str, name: str, zh: str, en: str, *,
            calls: Iterable[str] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare a known mistake of ``exercise`` (same signature as the student's function).
    ``calls``: the forbidden calls that are the mistake, where it is the use of a call the exercise forbids
    (see :attr:`Mistake.calls`); each must be an entry of :mod:`autograder.inside.forbidden`."""
    named = tuple(calls)
    wrong = unknown(named)
    if wrong:
        raise ValueError(f"mistake {exercise}/{name}: calls {', '.join(map(repr, wrong))} are not in "
                         f"autograder/inside/forbidden.py (known: {', '.join(NAMES)})")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = MISTAKES.setdefault(exercise, [])
        if any(m.name == name for m in existing):
            raise ValueError(f"mistake {exercise}/{name} declared twice")
        existing.append(Mistake(exercise, name, Msg(zh, en), fn, named))
        return fn

    return register


def mistake_by_calls(exercise_id: str, used: Iterable[str]) -> Mistake | None:
    """The first known mistake of ``exercise_id`` that is the use of forbidden calls (:attr:`Mistake.calls`), all of
    which are among the calls a check saw (``used``); None where none is. A check stopped by a forbidden call
    compares no value, so the value diagnosis cannot name it."""
    seen = set(used)
    return next((m for m in MISTAKES.get(exercise_id, []) if m.calls and seen.issuperset(m.calls)), None)


def alternative(exercise: str, name: str, zh: str, en: str, *,
                statement: str | tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare a correct alternative implementation of ``exercise`` (alternatives.py).

    The function (or class) has the student's signature; its source, renamed to the exercise's
    function and with the module's imports before it, becomes the student's solution cell.
    ``statement``: words of a permission it exercises (see :class:`Alternative`).
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = ALTERNATIVES.setdefault(exercise, [])
        if any(a.name == name for a in existing):
            raise ValueError(f"alternative {exercise}/{name} declared twice")
        existing.append(Alternative(exercise, name, Msg(zh, en), fn, statement))
        return fn

    return register


def exercise(exercise_id: str, forbidden: Iterable[str] = ()) -> None:
    """Declare per-exercise facts (the forbidden calls, as exercises.md names them: each must be an entry of
    :mod:`autograder.inside.forbidden`, which both guards and the static scan read)."""
    names = tuple(forbidden)
    wrong = unknown(names)
    if wrong:
        raise ValueError(f"exercise {exercise_id}: forbidden calls {', '.join(map(repr, wrong))} are not in "
                         f"autograder/inside/forbidden.py (known: {', '.join(NAMES)})")
    SPECS[exercise_id] = ExerciseSpec(exercise_id, names)


def precision(exercises: Iterable[str], level: Precision, *, statement: str) -> None:
    """Declare the precision the checks of ``exercises`` ask of float64 calls (:class:`Precision`), with the words of
    the notebook that teach it (the chapter's conventions, or the exercise's statement): ``autograder validate``
    finds them in what the student reads, proves the declared precision fair (the reference with float32
    intermediates keeps full marks where it is :attr:`Precision.ONE_FLOAT32`) and lists it per exercise."""
    for exercise_id in exercises:
        if exercise_id in PRECISIONS:
            raise ValueError(f"exercise {exercise_id}: precision declared twice")
        PRECISIONS[exercise_id] = PrecisionSpec(exercise_id, Precision(level), statement)


def precision_of(exercise_id: str) -> Precision:
    """The precision declared for ``exercise_id`` (one float32 intermediate where nothing is declared: the fair
    default, which validate reports as undeclared)."""
    spec = PRECISIONS.get(exercise_id)
    return spec.precision if spec is not None else Precision.ONE_FLOAT32


def not_graded(exercise_id: str, words: str, why: str) -> None:
    """Declare a requirement sentence of ``exercise_id`` that no check enforces, and why (see :class:`NotGraded`)."""
    NOT_GRADED.setdefault(exercise_id, []).append(NotGraded(exercise_id, words, why))


def near_answer(exercise_id: str, *patterns: str) -> None:
    """Declare near-answers of an exercise (hidden.py; see :data:`NEAR_ANSWERS`)."""
    for pattern in patterns:
        re.compile(pattern)
    NEAR_ANSWERS[exercise_id] = NEAR_ANSWERS.get(exercise_id, ()) + tuple(patterns)


def checks_for(exercise_id: str, audiences: Iterable[Audience]) -> list[Check]:
    wanted = set(audiences)
    return [c for c in CHECKS.get(exercise_id, []) if c.audience in wanted]
