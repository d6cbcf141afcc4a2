"""``autograder validate``'s proof that a diagnosis names only its own mistake: each known mistake's diagnosis must
not fire on the outputs of the exercise's other known mistakes, nor of its correct alternatives.

Grading names a mistake only on a failing call that asks for a diagnosis, and only where the mistake's signature
matches (see :func:`autograder.catalog.runners.signature`): the mistake departs from the reference there, the
student's output matches it, and none of the student's other outputs contradicts it. Here each other answer runs
through all the exercise's checks (public and hidden, in this process, on one seed) as a student's would:

* a known mistake: on each failing call that asks for a diagnosis, *every* other mistake's signature is tried (the
  diagnoser names the first that matches; a second that matches too is a diagnosis that could have been named);
* a correct alternative fails nowhere, so nothing is asked in grading: *every* call it makes is tried instead. A
  signature that matches a correct answer's output is one that could name a mistake nobody made.

Each with all the answer's other calls as evidence, as grading weighs a failure.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from autograder import catalog as C
from autograder.inside import plain
from autograder.authoring.alternatives import alternative_source
from autograder.catalog.declarations import Alternative, Mistake
from autograder.catalog.runners import LiveDiagnoser, Outputs
from autograder.course.config import Course
from autograder.grading.references import reference as solution_for
from autograder.inside.probes import Reply, Request


@dataclass(frozen=True)
class Misdiagnosis:
    """A mistake's diagnosis that fired on another answer: where first, and on how many calls in all."""

    exercise: str
    mistake: str                 # the diagnosis that fired
    answer: str                  # "mistake NAME" or "alternative NAME": what it fired on
    where: str                   # the first call: "CHECK#N"
    calls: int

    def __str__(self) -> str:
        more = f" (and {self.calls - 1} more calls)" if self.calls > 1 else ""
        return f"{self.exercise}: the diagnosis {self.mistake} fires on the {self.answer} at {self.where}{more}"


def misdiagnoses(course: Course, exercises: Iterable[str] | None = None,
                 seed_parts: tuple[Any, ...] = ("validate", 0)) -> list[Misdiagnosis]:
    """Every known mistake's diagnosis that fires on another known mistake or a correct alternative of its exercise
    (none: each names only its own mistake). The catalog must be loaded with its mistakes and alternatives."""
    wanted = set(exercises) if exercises is not None else None
    live = LiveDiagnoser(course.tolerances)
    found: list[Misdiagnosis] = []
    for ex in course.exercises:
        mistakes = C.MISTAKES.get(ex.id, [])
        if (wanted is not None and ex.id not in wanted) or not mistakes:
            continue
        reference = solution_for(course, ex.id)
        # One output per mistake and call: the answers mostly make the same calls (the same seeded inputs).
        outputs = Outputs(by_content=True)
        for m in mistakes:
            fired: dict[str, list[str]] = {}

            def asked(exercise_id: str, request: Request, got: plain.Value, *, m: Mistake = m,
                      fired: dict[str, list[str]] = fired, outputs: Outputs = outputs,
                      reference: Callable[..., Any] | None = None,
                      evidence: Sequence[tuple[Request, plain.Value]] = ()) -> Mistake | None:
                _try(live, exercise_id, m, request, got, reference, evidence, outputs, fired)
                return None

            C.run_exercise(ex, C.in_process_runner({ex.function: m.fn}), audiences=(C.Audience.PUBLIC,
                           C.Audience.HIDDEN), tolerances=course.tolerances, seed_parts=seed_parts,
                           reference=reference, diagnoser=asked)
            found += _found(ex.id, f"mistake {m.name}", fired)
        for alt in C.ALTERNATIVES.get(ex.id, []):
            fired = {}
            calls = _calls(ex, _alternative_namespace(course, ex.id, alt), course, reference, seed_parts)
            for request, value in calls:
                evidence = [call for call in calls if call[0] is not request]
                _try(live, ex.id, alt, request, value, reference, evidence, outputs, fired)
            found += _found(ex.id, f"alternative {alt.name}", fired)
    return found


def _try(live: LiveDiagnoser, exercise_id: str, answer: Mistake | Alternative, request: Request, got: plain.Value,
         reference: Callable[..., Any] | None, evidence: Sequence[tuple[Request, plain.Value]], outputs: Outputs,
         fired: dict[str, list[str]]) -> None:
    """Every known mistake but ``answer`` whose signature matches ``got`` joins ``fired`` (name -> calls)."""
    if reference is None:
        return
    for m in C.MISTAKES.get(exercise_id, []):
        if m is not answer and live.signature(m, request, got, reference, evidence, outputs) is not None:
            fired.setdefault(m.name, []).append(request.site)


def _found(exercise_id: str, answer: str, fired: dict[str, list[str]]) -> list[Misdiagnosis]:
    return [Misdiagnosis(exercise_id, name, answer, sites[0], len(sites)) for name, sites in fired.items()]


def _alternative_namespace(course: Course, exercise_id: str, alt: Alternative) -> dict[str, Any]:
    """The solved module with the alternative in place of the reference (it may call the module's other functions)."""
    from autograder.authoring.mutants import mutant_namespace  # noqa: PLC0415 - loads libcst

    assignment, ex = course.exercise(exercise_id)
    return mutant_namespace(assignment.module, ex.function, alternative_source(alt, ex.function), course.root)


def _calls(ex: Any, namespace: dict[str, Any], course: Course, reference: Callable[..., Any],
           seed_parts: tuple[Any, ...]) -> list[tuple[Request, plain.Value]]:
    """Every call the exercise's checks make into ``namespace``'s answer that returned a value, in order."""
    inner = C.in_process_runner(namespace)
    calls: list[tuple[Request, plain.Value]] = []

    def run(request: Request) -> Reply:
        reply = inner(request)
        if reply.status == "ok":
            try:
                calls.append((request, reply.value()))
            except plain.PlainDataError:
                pass
        return reply

    C.run_exercise(ex, run, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN), tolerances=course.tolerances,
                   seed_parts=seed_parts, reference=reference)
    return calls
