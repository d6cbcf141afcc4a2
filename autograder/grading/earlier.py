"""An exercise's earlier answers: a mistake costs its points once.

An exercise ``builds_on`` earlier ones whose functions (or classes) it calls: exercises of its own assignment
(2.4 calls 2.3), or of an earlier assignment whose answers the student pastes into this notebook (5.4's cell
holds 4.1-4.4). Where one of them lost points, and the course chose ``earlier_mistakes: substitute``, the
exercise is graded with the reference answering those calls (:func:`stand_ins_for`): on the trusted side for
a sandbox worker (:mod:`autograder.sandbox.stand_ins`), directly in this process. The dependencies are
followed through (4.4 calls 4.3, which calls 4.1: a mistake in 4.1 is answered for 4.4 too).

A pasted answer is judged in the notebook it was pasted into, by its own exercise's checks, public and hidden,
for no points (:func:`judge_pasted`), when an exercise that calls it lost points (:func:`grade_exercise`): one
that fails joins the lost ones, the exercise is graded again, and its result says so.

The batch's static scan (:mod:`autograder.grading.source_scan`) follows the same rule: it reads, for an
exercise, only the code that ran for it, never the student's function a stand-in answered (a 4.3 that calls
SDPA costs 4.3 its points, not 4.4 as well), and it is one of a pasted answer's own checks.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from autograder.catalog import Audience, Diagnoser, Runner, run_exercise
from autograder.course.config import Course, EarlierMistakes
from autograder.grading.references import reference, reference_module
from autograder.core.messages import Msg, say
from autograder.core.stopwatch import OFF, Stopwatch


@dataclass(frozen=True)
class StandIn:
    """An earlier exercise (a course.yml Exercise) whose calls ``reference`` answers."""

    exercise: Any
    reference: Callable[..., Any]


def _order(course: Course) -> dict[str, int]:
    return {e.id: i for i, e in enumerate(course.exercises)}


def dependencies(course: Course, exercise: Any) -> list[Any]:
    """Every exercise ``exercise`` builds on, directly or through another, earliest first."""
    found: dict[str, Any] = {}
    todo = list(exercise.builds_on)
    while todo:
        dep = todo.pop()
        if dep not in found:
            found[dep] = course.exercise(dep)[1]
            todo.extend(found[dep].builds_on)
    order = _order(course)
    return sorted(found.values(), key=lambda e: order[e.id])


def pasted(course: Course, assignment: Any) -> list[Any]:
    """The exercises of earlier assignments that ``assignment``'s exercises build on (the student pastes their
    answers into this notebook), with what those build on, earliest first."""
    own = {e.id for e in assignment.exercises}
    found = {d.id: d for e in assignment.exercises for d in dependencies(course, e) if d.id not in own}
    order = _order(course)
    return sorted(found.values(), key=lambda e: order[e.id])


def answering(course: Course, assignment: Any, dep: Any) -> Callable[..., Any]:
    """What answers ``dep``'s calls in ``assignment``'s notebook: that assignment's own reference of the same
    name where it has one (a pasted function may have grown a parameter: 05's multi_head_attention takes an
    attn_mask), else ``dep``'s reference."""
    own = getattr(reference_module(course, assignment), dep.function, None)
    return own if own is not None else reference(course, dep.id)


def stand_ins_for(course: Course, assignment: Any, exercise: Any, lost: Iterable[str]) -> dict[str, StandIn]:
    """function name -> the stand-in that answers its calls while ``exercise`` (of ``assignment``, the notebook
    being graded) is graded: each exercise it depends on that lost points (``lost``: their IDs), unless the
    course chose ``earlier_mistakes: cascade``."""
    if course.earlier_mistakes is not EarlierMistakes.SUBSTITUTE:
        return {}
    lost = set(lost)
    return {d.function: StandIn(d, answering(course, assignment, d))
            for d in dependencies(course, exercise) if d.id in lost}


def with_stand_ins(runner: Runner, stand_ins: dict[str, StandIn]) -> Runner:
    """``runner``, every request of which has ``stand_ins``' functions (or classes) answered by their
    references: in a sandbox worker through the trusted side, in this process directly
    (:func:`autograder.inside.probes.execute`)."""
    if not stand_ins:
        return runner
    by_name = {name: s.reference for name, s in stand_ins.items()}

    def run(request: Any) -> Any:
        request.stand_ins = by_name
        return runner(request)

    return run


def stood_in_json(stand_ins: dict[str, StandIn]) -> list[dict[str, str]]:
    """What an exercise's result says of its stand-ins."""
    return [{"exercise": s.exercise.id, "function": s.exercise.function} for s in stand_ins.values()]


def stand_in_message(assignment: Any, exercise: Any, stand: StandIn) -> Msg:
    """What an exercise graded with ``stand`` says of it: an earlier exercise of its notebook, or a pasted one."""
    dep = stand.exercise
    own = any(e.id == dep.id for e in assignment.exercises)
    return say("submission.stand_in" if own else "submission.stand_in_pasted", exercise=exercise.id,
               function=dep.function, earlier=dep.id)


def pasted_message(judged: dict[str, Any], most: int = 3) -> Msg:
    """What a submission says of a pasted answer that failed its checks: which, by their titles."""
    failed = judged["failed"]
    zh = "；".join(str(c["title"]["zh"]) for c in failed[:most])
    en = "; ".join(str(c["title"]["en"]) for c in failed[:most])
    if len(failed) > most:
        zh, en = f"{zh}，共 {len(failed)} 项", f"{en}; {len(failed)} in all"
    return say("submission.pasted_failed", function=judged["function"], earlier=judged["exercise"],
               checks=Msg(zh, en))


def grade_exercise(course: Course, assignment: Any, exercise: Any, lost: set[str], judged: dict[str, dict[str, Any]],
                   run: Callable[[dict[str, StandIn]], Any], judge: Callable[[list[str]], list[dict[str, Any]]]
                   ) -> tuple[Any, dict[str, StandIn]]:
    """``exercise``'s result (``run(stand_ins)``: an ExerciseResult, or anything with its ``points``: the batch
    adds the static scan's findings) and the stand-ins it was graded with.

    The earlier exercises that lost points (``lost``) are answered by their references. The answers pasted from
    an earlier assignment that it calls are judged (``judge(ids)``, see :func:`judge_pasted`: into ``lost``, and
    ``judged`` by ID) only when it lost points with the student's own: an honest notebook costs no second
    grading, and where one of them fails its own checks, ``exercise`` is graded again with it answered by the
    reference (the same seeded inputs), and the better of the two gradings stands: a block that is right together
    with its own pasted code is right."""
    stand_ins = stand_ins_for(course, assignment, exercise, lost)
    outcome = run(stand_ins)
    own = {e.id for e in assignment.exercises}
    waiting = [d.id for d in dependencies(course, exercise) if d.id not in own and d.id not in judged]
    if outcome.points < exercise.points - 1e-9 and waiting and course.earlier_mistakes is EarlierMistakes.SUBSTITUTE:
        for verdict in judge(waiting):
            judged[verdict["exercise"]] = verdict
        again = stand_ins_for(course, assignment, exercise, lost)
        if set(again) != set(stand_ins):
            regraded = run(again)
            if regraded.points > outcome.points:
                stand_ins, outcome = again, regraded
    return outcome, stand_ins


def judge_pasted(course: Course, assignment: Any, runner: Runner, lost: set[str], *, seed_parts: tuple[Any, ...],
                 tolerances: Any, device: str = "cpu", diagnoser: Diagnoser | None = None,
                 timer: Stopwatch = OFF, among: Iterable[str] | None = None,
                 scan: Callable[[Any, dict[str, StandIn]], list[dict[str, Any]]] | None = None
                 ) -> list[dict[str, Any]]:
    """Judge each answer pasted into ``assignment``'s notebook from an earlier assignment (those of ``among``
    only, when given) by its own exercise's checks (public and hidden, this notebook's seeds), for no points:
    one that does not pass them all joins ``lost``. One summary per pasted exercise (its failed checks as a
    result's checks read them). ``scan(exercise, stand_ins)``: the failed check rows of what the static scan
    finds in the code that ran for it (the batch's; none where nothing is found): one fails it too, as it
    would in its own notebook."""
    wanted = None if among is None else set(among)
    judged = []
    for dep in pasted(course, assignment):
        if wanted is not None and dep.id not in wanted:
            continue
        stand_ins = stand_ins_for(course, assignment, dep, lost)
        outcome = run_exercise(dep, with_stand_ins(runner, stand_ins), audiences=(Audience.PUBLIC, Audience.HIDDEN),
                               tolerances=tolerances, seed_parts=seed_parts, device=device,
                               reference=reference(course, dep.id), diagnoser=diagnoser, timer=timer)
        found = scan(dep, stand_ins) if scan is not None else []
        passed = outcome.points >= dep.points - 1e-9 and not found
        if not passed:
            lost.add(dep.id)
        failed = [c.to_json() for c in outcome.checks if not c.passed] + found   # (their points count nowhere)
        judged.append({"exercise": dep.id, "function": dep.function, "passed": passed,
                       "status": "forbidden" if found else outcome.status.value, "failed": failed,
                       **({"stand_ins": stood_in_json(stand_ins)} if stand_ins else {})})
    return judged
