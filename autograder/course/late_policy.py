"""A deadline and its late policy: what course.yml and an extension say, checked when they are read.

:class:`LatePolicy` is course.yml's ``late:`` (config reads it, so the student bundle ships this module);
:class:`Extension` one student's extension (from an extensions file, :mod:`autograder.course.extensions`, the
dashboard or nbgrader's gradebook); :class:`Deadline` the due time, late window and policy of one assignment
for one student, which :func:`deadline_for` resolves. What lateness then does to a score is
:mod:`autograder.course.lateness`'s; times and durations are read by :mod:`autograder.course.clock`.

A shift (an extension's ``extra``, a late window moved with its due date) is elapsed time: ``1d`` is 24 hours,
and a late window of 48 hours stays 48 hours across a daylight-saving change.
"""
from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from autograder.course.clock import as_utc

#: What a penalty unit is, in seconds, and its names (singular, plural, Chinese).
UNITS: dict[str, tuple[int, str, str, str]] = {
    "per_hour": (3600, "hour", "hours", "小时"),
    "per_day": (86400, "day", "days", "天"),
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def close_hint(word: str, known: Iterable[str]) -> str | None:
    """"did you mean ...?" with the names of ``known`` closest to ``word``; None when none is close."""
    near = difflib.get_close_matches(word, list(known), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(near)}?" if near else None


def require_aware(value: datetime, name: str) -> None:
    """A ValueError unless ``value`` is aware: a naive time means "some zone", and lateness needs the moment."""
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a time zone), got {value.isoformat()}")


class _Strict(BaseModel):
    """Unknown keys are errors (a typo is never silently ignored) and a parsed value is never changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _finite(value: float | None, name: str) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


class LatePolicy(_Strict):
    """course.yml `late:` of an assignment (or course-wide default).

    ``none``: no penalty. ``zero``: a late submission scores 0. ``per_hour`` / ``per_day``: ``percent`` of the
    maximum points, or ``points``, off for each started hour / day after the due time. ``custom``: a function of
    the course (``function: "late_policy:penalty"`` is ``penalty`` in the course folder's ``late_policy.py``)
    returns the points to take off. ``floor`` (per_hour, per_day, custom) is the score the penalty never takes a
    submission below.
    """

    kind: Literal["none", "zero", "per_hour", "per_day", "custom"] = "none"
    percent: float | None = None
    points: float | None = None
    floor: float | None = None
    function: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> LatePolicy:
        for name in ("percent", "points", "floor"):
            _finite(getattr(self, name), name)
        _check_amount(self)
        if self.floor is not None:
            if self.kind in ("none", "zero"):
                raise ValueError(f"late policy {self.kind}: floor is only for per_hour, per_day and custom"
                                 + (" (zero scores every late submission 0)" if self.kind == "zero" else ""))
            if self.floor < 0:
                raise ValueError(f"late policy {self.kind}: floor must be 0 or more (points), got {self.floor:g}")
        _check_function(self)
        return self


def _check_amount(policy: LatePolicy) -> None:
    """per_hour and per_day take percent or points off per started unit, one of them; no other kind has either."""
    if policy.kind not in UNITS:
        for name in ("percent", "points"):
            if getattr(policy, name) is not None:
                raise ValueError(f"late policy {policy.kind}: {name} is only for per_hour and per_day")
        return
    unit = UNITS[policy.kind][1]
    if policy.percent is None and policy.points is None:
        raise ValueError(f"late policy {policy.kind} needs percent (of the maximum points) or points "
                         f"(per started {unit}), e.g. percent: 10")
    if policy.percent is not None and policy.points is not None:
        raise ValueError(f"late policy {policy.kind}: give percent or points, not both "
                         f"(percent={policy.percent:g}, points={policy.points:g})")
    if policy.percent is not None and not 0 < policy.percent <= 100:
        raise ValueError(f"late policy {policy.kind}: percent must be more than 0 and at most 100 "
                         f"(a percentage of the maximum points per started unit), got {policy.percent:g}")
    if policy.points is not None and not policy.points > 0:
        raise ValueError(f"late policy {policy.kind}: points must be more than 0 (points taken off per "
                         f"started {unit}), got {policy.points:g}")


def _check_function(policy: LatePolicy) -> None:
    """custom names its function as "module:function"; no other kind has one."""
    if policy.kind == "custom":
        if not policy.function:
            raise ValueError('late policy custom needs function: "module:function", a function in a .py '
                             'file of the course folder, e.g. "late_policy:penalty"')
        module, sep, func = policy.function.partition(":")
        if not sep or not _IDENTIFIER.match(module) or not _IDENTIFIER.match(func):
            raise ValueError(f'late policy custom: function must look like "late_policy:penalty" (a file '
                             f'late_policy.py in the course folder, a function penalty in it), '
                             f'got {policy.function!r}')
    elif policy.function is not None:
        raise ValueError(f"late policy {policy.kind}: function is only for kind custom")


def _aware(value: datetime | None, name: str) -> None:
    if value is not None and value.utcoffset() is None:
        raise ValueError(f"{name} must have a time zone (e.g. 2026-12-01T10:00+08:00), got {value.isoformat()}")


class Extension(_Strict):
    """One student's extension for one assignment: a new due date, or a duration added to the due date."""

    student: str
    assignment: str
    due: datetime | None = None
    extra: timedelta | None = None
    reason: str = ""

    @field_validator("student", "assignment")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _one_change(self) -> Extension:
        if (self.due is None) == (self.extra is None):
            raise ValueError(f"extension for ({self.student}, {self.assignment}): give due (a new due date) or "
                             f"extra (a duration), exactly one of them")
        _aware(self.due, "due")
        if self.extra is not None and self.extra <= timedelta(0):
            raise ValueError(f"extension for ({self.student}, {self.assignment}): extra must be a positive "
                             f"duration")
        return self


class Deadline(_Strict):
    """The resolved deadline of one assignment for one student (an extension already applied)."""

    due: datetime
    last: datetime | None
    policy: LatePolicy
    extension: Extension | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Deadline:
        _aware(self.due, "due")
        _aware(self.last, "last")
        if self.last is not None and as_utc(self.last) < as_utc(self.due):
            raise ValueError(f"the late window ends ({self.last.isoformat()}) before the due time "
                             f"({self.due.isoformat()})")
        return self


def deadline_for(student: str | None, assignment: str, *, due: datetime | None, last: datetime | None,
                 policy: LatePolicy, extensions: list[Extension]) -> Deadline | None:
    """None when the assignment has no due date. An extension for (student, assignment) moves `due` (to its due,
    or by its extra; `last` moves by the same amount, and never ends before the new due).

    The shift is elapsed time, so a late window of 48 hours stays 48 hours across a daylight-saving change.
    Two extensions for the same student and assignment are a ValueError (load_extensions never makes them).
    """
    if due is None:
        return None
    require_aware(due, "due")
    if last is not None:
        require_aware(last, "last")
    found = [e for e in extensions if student is not None and e.student == student and e.assignment == assignment]
    if len(found) > 1:
        raise ValueError(f"{len(found)} extensions for ({student}, {assignment}): keep one")
    if not found:
        return Deadline(due=due, last=last, policy=policy)
    ext = found[0]
    new_due = ext.due if ext.due is not None else _shift(due, ext.extra or timedelta(0))
    shift = as_utc(new_due) - as_utc(due)
    new_last = None
    if last is not None:
        new_last = _shift(last, shift)
        if as_utc(new_last) < as_utc(new_due):
            new_last = new_due
    return Deadline(due=new_due, last=new_last, policy=policy, extension=ext)


def _shift(value: datetime, by: timedelta) -> datetime:
    """``value`` moved by ``by`` of elapsed time, shown in its own time zone."""
    return (as_utc(value) + by).astimezone(value.tzinfo)
