"""What a course declares: checks (``@check``), known mistakes (``@mistake``), per-exercise facts
(``exercise(..., forbidden=...)``) and near-answers (``near_answer``), in the registries the engine reads.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autograder.forbidden import NAMES, unknown
from autograder.messages import Msg

if TYPE_CHECKING:   # a check runs in a Context; context.py builds on these declarations
    from autograder.catalog.context import Context


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
#: and before it takes their values (the next check begins there: see scoring.run_exercise).
CheckFn = Callable[["Context"], "Generator[None, None, None] | None"]


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


@dataclass(frozen=True)
class ExerciseSpec:
    """Per-exercise facts the catalog owns (the rest is in course.yml)."""

    exercise: str
    forbidden: tuple[str, ...] = ()


CHECKS: dict[str, list[Check]] = {}


MISTAKES: dict[str, list[Mistake]] = {}


SPECS: dict[str, ExerciseSpec] = {}


ALTERNATIVES: dict[str, list[Alternative]] = {}


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


def mistake(exercise: str, name: str, zh: str, en: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare a known mistake of ``exercise`` (same signature as the student's function)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = MISTAKES.setdefault(exercise, [])
        if any(m.name == name for m in existing):
            raise ValueError(f"mistake {exercise}/{name} declared twice")
        existing.append(Mistake(exercise, name, Msg(zh, en), fn))
        return fn

    return register


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
    :mod:`autograder.forbidden`, which both guards and the static scan read)."""
    names = tuple(forbidden)
    wrong = unknown(names)
    if wrong:
        raise ValueError(f"exercise {exercise_id}: forbidden calls {', '.join(map(repr, wrong))} are not in "
                         f"autograder/forbidden.py (known: {', '.join(NAMES)})")
    SPECS[exercise_id] = ExerciseSpec(exercise_id, names)


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
