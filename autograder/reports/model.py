"""The result of grading one submission, typed: what ``autograder grade`` writes to ``OUT/results/*.json``,
what every report reads back (feedback, grades.csv, the class report, the LMS files, Gradescope, nbgrader),
and what a grading service stores. One model, its JSON schema derived from it (:func:`json_schema`,
``schemas/result.schema.json``, kept current by a test).

The model is the boundary: a result is validated when it is finalized (before it is written, see
:func:`autograder.grading.submission.finalize`) and when it is read back (:func:`autograder.reports.files.
load_result`: a file that does not validate is not one of ours). Readers may then use the dict, which is the
model's dump, or the typed object (:func:`parse`). Unknown keys are kept (``extra="allow"``): a newer kit's
result read by an older report loses nothing.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The version of the result format (``schema`` in every file).
RESULT_SCHEMA = 1


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Text(_Open):
    """A message in both languages."""

    zh: str = ""
    en: str = ""


class CheckRecord(_Open):
    exercise: str
    check: str
    audience: str = Field(description="public or hidden")
    kind: str = Field(description="shape, property, fact, numeric, gradient, edge, forbidden")
    title: Text
    status: str
    passed: bool
    points: float
    max_points: float
    message: Text | None = None
    mistake: str | None = Field(None, description="the known mistake the submission behaves like, by name")
    mistake_message: Text | None = None
    forbidden: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    withheld: bool = Field(False, description="passed, but no output check passed: no points")


class StandIn(_Open):
    exercise: str = Field(description="the earlier exercise whose reference answered its function's calls")
    function: str


class ExerciseRecord(_Open):
    exercise: str
    function: str
    points: float
    max_points: float
    status: str
    checks: list[CheckRecord] = Field(default_factory=list)
    seconds: float | None = None
    stand_ins: list[StandIn] | None = None


class PastedRecord(_Open):
    """An answer pasted from an earlier assignment (5.4's cell holds 4.1-4.4), judged by its own checks for no
    points: where it failed them, the exercises that call it were graded with the reference in its place."""

    exercise: str
    function: str
    passed: bool
    status: str
    failed: list[CheckRecord] = Field(default_factory=list)
    stand_ins: list[StandIn] | None = None


class QuestionRecord(_Open):
    """A written answer (autograder.course.written): graded by a person, never by the checks. ``points`` is null until
    someone grades it (the score then leaves it out, the maximum keeps its points, and both say it waits)."""

    question: str
    max_points: float
    points: float | None = Field(None, description="null: waiting for a person")
    status: str = Field("ungraded", description="ungraded or graded")
    answer: str = Field("", description="the answer cell's text, cleaned and at most 20,000 characters")
    sha256: str = Field("", description="the answer's fingerprint: a mark holds for every submission with it")
    answered: bool = False
    rubric: list[str] | None = Field(None, description="the rubric items ticked, by id")
    comment: str | None = None
    graded_by: str | None = None


class CellRecord(_Open):
    index: int | None = None
    status: str | None = None
    error_type: str | None = None
    message: str | None = None
    said: Text | None = None
    seconds: float = 0.0


class Isolation(_Open):
    mode: str
    layers: list[str] = Field(default_factory=list)
    missing: dict[str, str] = Field(default_factory=dict)


class Submitted(_Open):
    """When the submission came, by whose word (autograder.grading.times)."""

    when: str | None = Field(None, description="ISO 8601 with an offset; null when no source can vouch for one")
    source: str = Field("none", description="nbgrader timestamp.txt, Gradescope submission_metadata.json, ...")
    late_marker: bool = Field(False, description="an LMS said late without a time (Canvas' _late)")
    due: str | None = Field(None, description="a due date the source holds for this student (Gradescope)")
    last: str | None = None
    problem: str | None = Field(None, description="the source was there but unreadable: why")


class Late(_Open):
    """The late policy as applied (autograder.grading.deadlines): raw_points - penalty = points."""

    due: str
    last: str | None = None
    late: bool | None = Field(description="null: unknown (no trustworthy time)")
    seconds_late: float | None = None
    penalty: float = 0.0
    accepted: bool = True
    extended: bool = False
    policy: str = "none"
    as_of: str | None = Field(None, description="--as-of, where it stood in for an unknown submission time")
    rule: Text


class Result(_Open):
    """One submission's result file."""

    schema_: int = Field(RESULT_SCHEMA, alias="schema", description="the result format's version")
    key: str = Field(description="the file-name stem of its outputs: <student>__<assignment>")
    student: str | None = None
    assignment: str | None = None
    origin: str = Field("", description="SUBMISSIONS as given to autograder grade, resolved")
    source: str = Field("", description="the notebook's path relative to SUBMISSIONS")
    sha256: str = ""
    grader: str = Field("", description="the grader fingerprint: a change regrades")
    device: str = ""
    isolation: Isolation | None = None
    points: float = Field(0.0, description="the final score (after a late penalty)")
    raw_points: float | None = Field(None, description="what the notebook scored, before a late penalty")
    max_points: float = Field(0.0, description=(
        "the assignment's maximum (autograder.course.written.maximum): its exercises' points and its written answers', "
        "graded or not"))
    submitted: Submitted | None = None
    late: Late | None = None
    exercises: list[ExerciseRecord] = Field(default_factory=list)
    questions: list[QuestionRecord] | None = Field(None, description=(
        "the written answers, graded by a person (the service's hand-grading, nbgrader's formgrader)"))
    pasted: list[PastedRecord] | None = Field(None, description=(
        "answers pasted from earlier assignments, judged for no points (where an exercise builds on one)"))
    cells: list[CellRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    notes_msg: list[Text] = Field(default_factory=list)
    evidence: dict[str, str] = Field(default_factory=dict)
    status: str = Field(description="graded, or the named failure")
    message: Text | None = None
    timing: dict[str, Any] = Field(default_factory=dict)
    graded_at: str | None = None
    truncated: bool | None = None
    traceback: str | None = None
    retry: bool | None = None

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def parse(data: Any) -> Result:
    """A result dict as the typed model; ``pydantic.ValidationError`` when it is not one."""
    return Result.model_validate(data)


def checked(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` validated against the model and returned as it was (its key order and extras kept)."""
    parse(data)
    return data


def json_schema() -> dict[str, Any]:
    """The JSON schema of a result file, derived from :class:`Result`."""
    return Result.model_json_schema(by_alias=True)


def schema_text() -> str:
    return json.dumps(json_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
