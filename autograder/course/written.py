"""Written answers: questions a person grades, each with a rubric, and how a notebook holds its answer.

A question is declared in course.yml beside the assignment's exercises (``questions:``), with its points and a
rubric of items (points, text) whose positive items add up to the question's points. In the notebook it is
nbgrader's "manually graded answer" cell: a Markdown cell with ``grade: true, solution: true`` and the question's
``grade_id`` (:func:`answer_grade_id`), so nbgrader's formgrader grades it as it grades any other course's, and
the service's hand-grading pages (:mod:`autograder.service.marks`) read the same cell. The automatic grader never
scores it: a result lists it as waiting for a person (:func:`pending`), never as 0.

An assignment's maximum is :func:`maximum`'s, the one place it is made: its exercises' points and its written
questions' points, graded or not, with what still waits for a person said beside it. Every view, file and export
reads it there (the feedback, grades.csv, the class report, the LMS files, the service's pages and the LTI
score), so a score is never "12 / 10" in one place and "12 / 12" in another.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from autograder.core.text import clean

#: A question's id: the assignment's number, ``.Q`` and its own number ("1.Q1").
QUESTION_ID = re.compile(r"^[1-9]\d*\.Q[1-9]\d*$")
RUBRIC_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,19}$")
#: The most characters of an answer a result keeps (a longer one is cut, and the result says so).
ANSWER_CHARS = 20_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RubricItem(_Strict):
    id: str = Field(description='a short name of the item, unique in its question ("a", "mask_math")')
    points: float = Field(description="points the item gives when ticked (negative: a deduction)")
    text: str = Field(description="what the answer shows for the item, in English")
    text_zh: str | None = Field(None, description="the same in Chinese (the graders' and students' pages in zh)")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not RUBRIC_ID.match(value):
            raise ValueError(f"a rubric item id is lower-case letters, digits, _ or - (at most 20), got {value!r}")
        return value

    def text_in(self, language: Any) -> str:
        return self.text_zh if str(getattr(language, "value", language)) == "zh" and self.text_zh else self.text


class Question(_Strict):
    id: str = Field(description='question ID such as "1.Q1": the assignment number, .Q and its own number')
    points: Annotated[float, Field(gt=0, description="points of the question")]
    title: str = Field(description="short English title")
    title_zh: str | None = Field(None, description="short Chinese title")
    rubric: list[RubricItem] = Field(min_length=1, description=(
        "the items a grader ticks; the score is their sum, held between 0 and the question's points, and the "
        "positive items add up to the points"))

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        if not isinstance(value, str) or not QUESTION_ID.match(value):
            raise ValueError(f'a question ID looks like "1.Q1" (a quoted string), got {value!r}')
        return value

    @model_validator(mode="after")
    def _rubric_adds_up(self) -> Question:
        ids = [item.id for item in self.rubric]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"question {self.id}: rubric item {twice[0]!r} appears twice")
        full = sum(item.points for item in self.rubric if item.points > 0)
        if abs(full - self.points) > 1e-9:
            raise ValueError(f"question {self.id}: its rubric's positive items add up to {full:g}, not to the "
                             f"question's {self.points:g} points")
        return self

    def title_in(self, language: Any) -> str:
        return self.title_zh if str(getattr(language, "value", language)) == "zh" and self.title_zh else self.title

    def item(self, item_id: str) -> RubricItem | None:
        return next((i for i in self.rubric if i.id == item_id), None)

    def score(self, ticked: list[str]) -> float:
        """The points of the items ticked, held between 0 and the question's points."""
        total = sum(i.points for i in self.rubric if i.id in set(ticked))
        return max(0.0, min(float(self.points), float(total)))


def answer_grade_id(question_id: str) -> str:
    """``"1.Q1"`` -> ``"q1_Q1"``: the nbgrader grade_id of the question's answer cell."""
    return "q" + question_id.replace(".", "_")


def question_of(cell_grade_id: str) -> str | None:
    """``"q1_Q1"`` -> ``"1.Q1"``; None for any other grade_id."""
    m = re.match(r"^q([1-9]\d*)_(Q[1-9]\d*)$", cell_grade_id or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def answer_sha(text: str) -> str:
    """The answer's fingerprint: a mark given to it holds for every submission with the same answer."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def answers(nb: dict[str, Any], questions: list[Question]) -> list[dict[str, Any]]:
    """Each question's entry of a result: its answer as the notebook holds it (the first Markdown or raw cell
    with its grade_id; "" where none), its fingerprint, its points to come. Nothing here is scored."""
    wanted = {answer_grade_id(q.id): q for q in questions}
    found: dict[str, str] = {}
    for cell in nb.get("cells", []) if isinstance(nb.get("cells"), list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("markdown", "raw"):
            continue
        meta = cell.get("metadata")
        nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
        gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
        if isinstance(gid, str) and gid in wanted and gid not in found:
            source = cell.get("source", "")
            found[gid] = ("".join(x for x in source if isinstance(x, str)) if isinstance(source, list)
                          else source if isinstance(source, str) else "")
    out = []
    for gid, q in wanted.items():
        raw = found.get(gid, "")
        text = clean(raw, ANSWER_CHARS)     # the one gate of student text: printable, valid UTF-8, bounded
        entry: dict[str, Any] = {"question": q.id, "max_points": float(q.points), "points": None,
                                 "status": "ungraded", "answer": text, "sha256": answer_sha(text),
                                 "answered": gid in found and bool(text.strip()) and not _stub(text)}
        if len(raw) > ANSWER_CHARS:
            entry["truncated"] = True
        out.append(entry)
    return out


#: The answer cell's text in a released notebook (nbgrader's text stub), per course language.
TEXT_STUBS = {"zh": "在这里写下你的回答。", "en": "Write your answer here."}


def _stub(text: str) -> bool:
    return text.strip() in {s.strip() for s in TEXT_STUBS.values()} or text.strip() == "YOUR ANSWER HERE"


def pending(result: dict[str, Any]) -> float:
    """The points of a result's questions that no person has graded yet."""
    return float(sum(q.get("max_points") or 0.0 for q in result.get("questions") or ()
                     if isinstance(q, dict) and q.get("points") is None))


# -- an assignment's maximum ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Maximum:
    """An assignment's maximum: the exercises' points (``automatic``, what the checks give) and the written
    questions' (``written``), graded or not; ``waiting``, of those, the points of a result's answers no person
    has graded yet (``questions``: which)."""

    automatic: float
    written: float = 0.0
    waiting: float = 0.0
    questions: tuple[str, ...] = ()

    @property
    def points(self) -> float:
        """The maximum: automatic and written points together."""
        return _total((self.automatic, self.written))

    def beside(self, language: Any) -> str:
        """What still waits, said beside a score ("" when nothing does)."""
        from autograder.core.messages import text  # noqa: PLC0415 - course.yml's reader (which imports this) needs none
        from autograder.core.points import fmt  # noqa: PLC0415 - (the same)

        if not self.waiting:
            return ""
        return text("label.max_waiting", language, points=fmt(self.waiting), questions=", ".join(self.questions))

    def fraction(self, points: float, language: Any) -> str:
        """``10 / 12``, with what still waits beside it: ``10 / 12 (2 points of written answers wait ...)``."""
        from autograder.core.points import fmt  # noqa: PLC0415 - course.yml's reader (which imports this) needs none

        said = self.beside(language)
        shown = f"{fmt(points)} / {fmt(self.points)}"
        if not said:
            return shown
        return f"{shown}（{said}）" if str(getattr(language, "value", language)) == "zh" else f"{shown} ({said})"


def _total(values: Any) -> float:
    from autograder.core.points import total  # noqa: PLC0415 - course.yml's reader (which imports this) needs none

    return total(values)


def maximum(assignment: Any, result: dict[str, Any] | None = None) -> Maximum:
    """The maximum of ``assignment`` (course.yml's Assignment): its exercises' and its questions' points, and,
    for ``result`` (one of its results), which of its written answers still wait for a person: every question a
    graded result holds no person's points for (a result that is no grade, an unreadable notebook say, has none
    waiting: nobody will grade it). Without a result every question waits. ``assignment`` None (a result of an
    assignment course.yml no longer has): the maximum its result's own parts give."""
    if assignment is not None:
        automatic = float(assignment.points)
        written = float(assignment.manual_points)
        if result is None:
            return Maximum(automatic, written, written, tuple(q.id for q in assignment.questions))
        if not str(result.get("status") or "").startswith("graded"):
            return Maximum(automatic, written)
        given = {q.get("question") for q in result.get("questions") or ()
                 if isinstance(q, dict) and isinstance(q.get("points"), (int, float))}
        left = [q for q in assignment.questions if q.id not in given]
        return Maximum(automatic, written, _total(float(q.points) for q in left), tuple(q.id for q in left))
    else:       # the result's own parts: its exercises' maxima, else its maximum less its questions'
        parts = [e for e in (result or {}).get("exercises") or () if isinstance(e, dict)]
        written = _total(float(q.get("max_points") or 0.0) for q in (result or {}).get("questions") or ()
                               if isinstance(q, dict))
        automatic = _total(float(e.get("max_points") or 0.0) for e in parts) if parts else \
            max(0.0, _total((float((result or {}).get("max_points") or 0.0), -written)))
    waiting = [q for q in (result or {}).get("questions") or () if isinstance(q, dict) and q.get("points") is None]
    return Maximum(automatic, written, _total(float(q.get("max_points") or 0.0) for q in waiting),
                   tuple(str(q.get("question")) for q in waiting))


def maximum_of(course: Any, result: dict[str, Any]) -> Maximum:
    """:func:`maximum` of a result, its assignment found in ``course`` (none where course.yml no longer has it)."""
    wanted = result.get("assignment")
    found = next((a for a in getattr(course, "assignments", ()) if a.id == wanted), None)
    return maximum(found, result)
