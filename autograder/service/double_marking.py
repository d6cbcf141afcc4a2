"""Double marking: a written question course.yml names in ``service.double_marking.questions`` is marked twice,
blind, by two different staff members, and the mark that counts is made from the two.

Each answer has two slots, marker 1 and marker 2 (:class:`~autograder.service.tables.DoubleMark`), filled in either
order by whoever opens the answer first; the page of the second never shows the first's mark (nor the overview its
points). A marker may change their own mark until the other's is in; then both are fixed, and:

- their totals differ by at most ``service.double_marking.threshold``: they agree, and the mark that counts (a
  :class:`~autograder.service.tables.Mark`, as every single-marked answer's) is their **mean**, with the rubric items
  both ticked and both comments; it is saved at once, by the second save, like any mark (compare-and-set, the
  score history, the audit);
- further apart: the answer waits for an instructor (the moderation page shows both marks) whose decision is the
  mark that counts.

Nothing of this changes how a mark counts: until the mark that counts is there, the answer waits, as any answer
no one graded (never 0). Each slot is compare-and-set as a mark is (``version``; 0: a new one): of two people who
open the same free slot, the second save is refused with :class:`autograder.service.marks.Conflict`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from autograder.core.points import fmt
from autograder.service import audit, history, marks
from autograder.service.db import writing
from autograder.service.tables import DoubleMark, Mark, utcnow

if TYPE_CHECKING:
    from autograder.course.config import Course
    from autograder.course.written import Question

#: Two totals this close are the same (the rubric's points are halves and quarters, summed as floats).
_EPSILON = 1e-9


class Closed(Exception):
    """Both marks of the answer are in (or its mark that counts is): a marker's mark no longer changes."""


class SameMarker(Exception):
    """The person saving gave the answer's other mark: the two marks are two people's."""


@dataclass(frozen=True)
class Pair:
    """The marks an answer has so far: ``first`` (marker 1) and ``second`` (marker 2), None where not given."""

    first: Any = None
    second: Any = None

    def slot(self, marker: int) -> Any:
        return self.first if marker == 1 else self.second

    @property
    def given(self) -> list[Any]:
        return [m for m in (self.first, self.second) if m is not None]

    @property
    def complete(self) -> bool:
        return self.first is not None and self.second is not None

    def of(self, who: str) -> int | None:
        """The slot ``who`` filled (None: neither)."""
        return next((m.marker for m in self.given if m.graded_by == who), None)

    def slot_for(self, who: str) -> int | None:
        """The slot ``who`` marks on the answer's page: their own while the other is not in, else the first free
        one; None where there is nothing for them to mark (both are in, or theirs is and the other is too)."""
        if self.complete:
            return None
        mine = self.of(who)
        if mine is not None:
            return mine
        return 1 if self.first is None else 2

    def waits_for(self, who: str) -> bool:
        """The answer needs ``who``'s mark: a slot is free and they have not given the other."""
        return not self.complete and self.of(who) is None

    def agree(self, threshold: float) -> bool:
        return self.complete and abs(float(self.first.points) - float(self.second.points)) <= threshold + _EPSILON


def is_double(course: Course, question: str) -> bool:
    """The question is double-marked (course.yml's ``service.double_marking.questions``)."""
    return question in course.service.double_marking.questions


Key = tuple[str, str, str, str]


def read(engine: Engine) -> dict[Key, Pair]:
    """Every double mark, by its answer (student, assignment, question, answer's sha256): read once per request."""
    found: dict[Key, dict[int, Any]] = {}
    with engine.connect() as conn:
        for m in conn.execute(select(DoubleMark)).all():
            found.setdefault((m.student, m.assignment, m.question, m.answer_sha), {})[m.marker] = m
    return {key: Pair(slots.get(1), slots.get(2)) for key, slots in found.items()}


def pair_of(engine: Engine, student: str, assignment: str, question: str, answer_sha: str) -> Pair:
    """The double marks of one answer."""
    with engine.connect() as conn:
        slots = {m.marker: m for m in conn.execute(select(DoubleMark).where(*_key(student, assignment, question,
                                                                                    answer_sha))).all()}
    return Pair(slots.get(1), slots.get(2))


def _key(student: str, assignment: str, question: str, answer_sha: str) -> tuple[Any, ...]:
    return (DoubleMark.student == student, DoubleMark.assignment == assignment, DoubleMark.question == question,
            DoubleMark.answer_sha == answer_sha)


def save(engine: Engine, course: Course, *, student: str, assignment: str, question: str, answer_sha: str,
         marker: int, rubric: list[str], comment: str, who: str, version: int,
         also: Callable[[Connection, Any], object] | None = None) -> tuple[Any, Any]:
    """Save ``who``'s mark in slot ``marker`` (1 or 2) from ``version`` (0: a new one): (the mark saved, the mark
    that counts where this save made it: the two agreeing, else None; ``also`` as
    :func:`autograder.service.marks.save_mark`'s, for that mark). Refused, nothing written:
    :class:`~autograder.service.marks.Conflict` (someone saved the slot first), :class:`Closed` (both marks, or the
    mark that counts, are in), :class:`SameMarker` (``who`` gave the other mark), ValueError (a rubric item or
    question the course does not have; a marker not 1 or 2)."""
    q = _double_question(course, assignment, question, marker, rubric)
    values = {"points": q.score(rubric), "rubric": list(dict.fromkeys(rubric)), "comment": comment[:marks.TEXT_CHARS],
              "graded_by": who[:200], "graded_at": utcnow()}
    key = _key(student, assignment, question, answer_sha)
    try:
        with writing(engine).begin() as conn:
            slots = {m.marker: m for m in conn.execute(select(DoubleMark).where(*key)).all()}
            counted = conn.execute(select(Mark.id).where(
                Mark.student == student, Mark.assignment == assignment, Mark.question == question,
                Mark.answer_sha == answer_sha)).first()
            mine, other = slots.get(marker), slots.get(3 - marker)
            if other is not None and other.graded_by == who[:200]:
                raise SameMarker()
            if mine is None and version == 0:
                if counted is not None:
                    raise Closed()
                conn.execute(insert(DoubleMark).values(
                    student=student, assignment=assignment, question=question, answer_sha=answer_sha, marker=marker,
                    **values, version=1))
            elif mine is None or mine.version != version:
                raise marks.Conflict(mine)
            elif other is not None or counted is not None:
                raise Closed()
            else:
                done = conn.execute(update(DoubleMark).where(*key, DoubleMark.marker == marker,
                                                         DoubleMark.version == version)
                                    .values(**values, version=version + 1))
                if done.rowcount != 1:
                    raise marks.Conflict(mine)
            saved = conn.execute(select(DoubleMark).where(*key, DoubleMark.marker == marker)).one()
    except IntegrityError:           # the same slot filled by someone else at the same moment
        with engine.connect() as conn:
            raise marks.Conflict(conn.execute(select(DoubleMark).where(*key, DoubleMark.marker == marker)).first()
                                 ) from None
    audit.note(engine, who, "mark.double", student, f"{question}: mark {marker} of 2")   # (no points: still blind)
    pair = pair_of(engine, student, assignment, question, answer_sha)
    return saved, settle(engine, course, pair, also)


def _double_question(course: Course, assignment: str, question: str, marker: int, rubric: list[str]) -> Question:
    """The double-marked question a mark is for; ValueError for one not double-marked, a marker not 1 or 2, or a
    rubric item the question does not have."""
    q = course.assignment(assignment).question(question)
    if q is None or not is_double(course, question):
        raise ValueError(f"question {question!r} of assignment {assignment} is not double-marked")
    if marker not in (1, 2):
        raise ValueError(f"a marker is 1 or 2, got {marker}")
    unknown = [r for r in rubric if q.item(r) is None]
    if unknown:
        raise ValueError(f"question {question} has no rubric item {unknown[0]!r}")
    return q


def agreed_values(pair: Pair) -> dict[str, Any]:
    """The mark that counts, made from two marks that agree: their mean, the items both ticked (in the first's
    order), both comments (once where they are the same), both markers' names."""
    a, b = pair.first, pair.second
    comments = list(dict.fromkeys(c.strip() for c in (a.comment, b.comment) if c and c.strip()))
    return {"points": (float(a.points) + float(b.points)) / 2,
            "rubric": [r for r in a.rubric or () if r in set(b.rubric or ())],
            "comment": " · ".join(comments)[:marks.TEXT_CHARS],
            "who": f"{a.graded_by} + {b.graded_by}"[:200]}


def settle(engine: Engine, course: Course, pair: Pair, also: Callable[[Connection, Any], object] | None = None
           ) -> Any:
    """Where the two marks are in and agree, the mark that counts (:func:`agreed_values`) saved as a new mark (the
    score history and the audit as for any mark): that mark. None where they do not agree, are not both in, or a
    mark that counts is there already (an instructor's, say: it stands)."""
    threshold = course.service.double_marking.threshold
    if not pair.agree(threshold):
        return None
    a = pair.first
    made = agreed_values(pair)
    try:
        saved = marks.save_mark(engine, course, student=a.student, assignment=a.assignment, question=a.question,
                                answer_sha=a.answer_sha, rubric=made["rubric"], comment=made["comment"],
                                who=made["who"], version=0, points=made["points"], also=also)
    except marks.Conflict:
        return None
    audit.note(engine, made["who"], "mark.save", a.student,
               f"{a.question}: {fmt(saved.points)}, the mean of two marks that agree "
               f"({fmt(pair.first.points)}, {fmt(pair.second.points)})")
    history.note(engine, course, [(a.student, a.assignment)], why="manual", who=made["who"],
                 detail=f"{a.question}: {fmt(saved.points)} (two markers agree)")
    return saved


def disagreeing(pair: Pair, threshold: float) -> bool:
    """Both marks are in and differ by more than the threshold: the answer is an instructor's to decide."""
    return pair.complete and not pair.agree(threshold)
