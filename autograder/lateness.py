"""Deadlines, late windows, late policies and per-student extensions.

Pure and deterministic: nothing here reads the clock. Every function is given the times it needs (the due
date from course.yml, a submission time from an LMS export, ``--as-of`` for a report), so the same inputs
always give the same score and the same sentence explaining it.

Time is always compared and subtracted as real elapsed time (in UTC). Python compares and subtracts two
datetimes that share one ``tzinfo`` by their wall-clock readings, which is wrong across a daylight-saving
change (01:30 to 03:30 in New York on 2026-03-08 is one hour, not two); every comparison below therefore goes
through :func:`_utc`. Durations (an extension's ``extra``) are elapsed time too: ``1d`` is 24 hours.

Scores come out in hundredths of a point, rounded half up (2.675 -> 2.68).
"""
from __future__ import annotations

import csv
import difflib
import importlib.util
import io
import math
import numbers
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from autograder.errors import ConfigError

#: The columns of an extensions file (CSV header, or the keys of each YAML mapping).
EXTENSION_FIELDS = ("student", "assignment", "due", "extra", "reason")
#: What a penalty unit is, in seconds, and its names (singular, plural, Chinese).
_UNITS: dict[str, tuple[int, str, str, str]] = {
    "per_hour": (3600, "hour", "hours", "小时"),
    "per_day": (86400, "day", "days", "天"),
}
_HUNDREDTH = Decimal("0.01")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: 'YYYY-MM-DD', then 'T' or one space, 'HH:MM[:SS[.ffffff]]', then an optional 'Z' or +HH:MM / +HHMM / +HH.
_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,6})?)?)\s*(Z|[+-]\d{2}(?::?\d{2})?)?$",
                   re.IGNORECASE)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: '3d', '36h', '90m', '2d12h', '1w', '45s', '1.5d' (each unit at most once, largest first; spaces allowed).
_SHORT_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)\s*w)?\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*"
                             r"(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)\s*s)?$", re.IGNORECASE)
_ISO_DURATION = re.compile(r"^P(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T"
                           r"(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$", re.IGNORECASE)
_DURATION_HELP = "write 3d, 36h, 90m, 2d12h or P2DT12H"


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
        per_unit = self.kind in _UNITS
        if per_unit:
            if self.percent is None and self.points is None:
                raise ValueError(f"late policy {self.kind} needs percent (of the maximum points) or points "
                                 f"(per started {_UNITS[self.kind][1]}), e.g. percent: 10")
            if self.percent is not None and self.points is not None:
                raise ValueError(f"late policy {self.kind}: give percent or points, not both "
                                 f"(percent={self.percent:g}, points={self.points:g})")
            if self.percent is not None and not 0 < self.percent <= 100:
                raise ValueError(f"late policy {self.kind}: percent must be more than 0 and at most 100 "
                                 f"(a percentage of the maximum points per started unit), got {self.percent:g}")
            if self.points is not None and not self.points > 0:
                raise ValueError(f"late policy {self.kind}: points must be more than 0 (points taken off per "
                                 f"started {_UNITS[self.kind][1]}), got {self.points:g}")
        else:
            for name in ("percent", "points"):
                if getattr(self, name) is not None:
                    raise ValueError(f"late policy {self.kind}: {name} is only for per_hour and per_day")
        if self.floor is not None:
            if self.kind in ("none", "zero"):
                raise ValueError(f"late policy {self.kind}: floor is only for per_hour, per_day and custom"
                                 + (" (zero scores every late submission 0)" if self.kind == "zero" else ""))
            if self.floor < 0:
                raise ValueError(f"late policy {self.kind}: floor must be 0 or more (points), got {self.floor:g}")
        if self.kind == "custom":
            if not self.function:
                raise ValueError('late policy custom needs function: "module:function", a function in a .py '
                                 'file of the course folder, e.g. "late_policy:penalty"')
            module, sep, func = self.function.partition(":")
            if not sep or not _IDENTIFIER.match(module) or not _IDENTIFIER.match(func):
                raise ValueError(f'late policy custom: function must look like "late_policy:penalty" (a file '
                                 f'late_policy.py in the course folder, a function penalty in it), '
                                 f'got {self.function!r}')
        elif self.function is not None:
            raise ValueError(f"late policy {self.kind}: function is only for kind custom")
        return self


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
        if self.last is not None and _utc(self.last) < _utc(self.due):
            raise ValueError(f"the late window ends ({self.last.isoformat()}) before the due time "
                             f"({self.due.isoformat()})")
        return self


@dataclass(frozen=True)
class Lateness:
    """What lateness did to one submission's score, and the sentence (in English and Chinese) that says so."""

    late: bool | None
    seconds_late: float | None
    penalty: float
    final: float
    rule: str
    rule_zh: str
    accepted: bool


# --- time and duration text ------------------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    """``value`` in UTC: the one form in which comparing and subtracting datetimes is real elapsed time."""
    return value.astimezone(timezone.utc)


def _offset(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _zone(name: str, where: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"{where}: time zone {name!r} is not an IANA time zone name (e.g. Asia/Shanghai, "
                          f"America/New_York)", hint=str(exc) or None) from None


def _in_zone(naive: datetime, zone: ZoneInfo, *, where: str, shown: str) -> datetime:
    """``naive`` read as a wall-clock time in ``zone``; a time the DST change skips or repeats is an error."""
    first, second = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    off1, off2 = first.utcoffset(), second.utcoffset()
    if off1 is None or off2 is None or off1 == off2:
        return first
    stamp = naive.isoformat(timespec="seconds" if naive.second or naive.microsecond else "minutes")
    round_trip = _utc(first).astimezone(zone).replace(tzinfo=None)
    if round_trip != naive:   # in the gap: the clocks jumped over this reading
        real = _utc(first).astimezone(zone)
        suggestion = real.replace(tzinfo=None).isoformat(timespec="minutes") + _offset(real.utcoffset() or off2)
        raise ConfigError(f"{where}: {shown!r} does not exist in {zone.key} (the clocks skip it at the "
                          f"daylight-saving change); write the time with its offset, e.g. {suggestion}")
    raise ConfigError(f"{where}: {shown!r} is ambiguous in {zone.key} (the clocks show it twice at the "
                      f"daylight-saving change); write the offset: {stamp}{_offset(off1)} (the first) or "
                      f"{stamp}{_offset(off2)} (the second)")


def parse_time(text: str | datetime, *, where: str, default_tz: str | None = None) -> datetime:
    """ISO 8601 (also 'YYYY-MM-DD HH:MM[:SS]') to an aware datetime. Text without an offset takes default_tz
    (an IANA name such as 'Asia/Shanghai') when given, else is a ConfigError naming `where`. DST: a
    nonexistent or ambiguous local time under default_tz is a ConfigError naming it (say which, suggest an offset).

    A datetime (YAML reads unquoted timestamps as one) is taken as it is when aware, like text without an offset
    when naive. A date alone is an error: a deadline needs a time of day (is "2026-12-01" its start or its end?).
    """
    if isinstance(text, datetime):
        naive, shown = text, str(text)
        if text.utcoffset() is not None:
            return text
    elif isinstance(text, date):
        raise ConfigError(f"{where}: {text.isoformat()!r} has no time of day (write {text.isoformat()}T23:59+08:00)",
                          hint="a date alone is ambiguous: is it the start or the end of the day?")
    elif isinstance(text, str):
        shown = text.strip()
        if _DATE_ONLY.match(shown):
            raise ConfigError(f"{where}: {shown!r} has no time of day (write {shown}T23:59+08:00)",
                              hint="a date alone is ambiguous: is it the start or the end of the day?")
        match = _TIME.match(shown)
        if not match:
            raise ConfigError(f"{where}: {shown!r} is not a date and time (write 2026-12-01T10:00+08:00)")
        day, clock, zone_text = match.groups()
        iso = f"{day}T{clock.replace(',', '.')}"
        if zone_text:
            zone_text = zone_text.upper()
            if zone_text != "Z" and len(zone_text) == 3:   # +08 -> +08:00
                zone_text += ":00"
            iso += zone_text
        try:
            parsed = datetime.fromisoformat(iso)
        except ValueError as exc:
            raise ConfigError(f"{where}: {shown!r} is not a valid date and time ({exc})") from None
        if parsed.utcoffset() is not None:
            return parsed
        naive = parsed
    else:
        raise ConfigError(f"{where}: expected a date and time such as 2026-12-01T10:00+08:00, "
                          f"got {type(text).__name__} {text!r}")
    if default_tz is None:
        example = naive.isoformat(timespec="seconds" if naive.second or naive.microsecond else "minutes")
        raise ConfigError(f"{where}: {shown!r} has no time zone (write {example}+08:00)",
                          hint="+08:00 is China's offset: write the one of your time zone (e.g. -05:00 for "
                               "New York in winter), or give the course a default time zone")
    return _in_zone(naive, _zone(default_tz, where), where=where, shown=shown)


def parse_duration(text: str, *, where: str) -> timedelta:
    """'3d', '36h', '90m', '2d12h', or ISO 8601 'P2DT12H'; positive only; else ConfigError naming where.

    Also '1w', '45s', '1.5d' and 'PT36H'. A day is 24 hours of elapsed time. Months and years are refused:
    their length varies.
    """
    shown = str(text).strip()
    if not isinstance(text, str):
        raise ConfigError(f"{where}: {shown!r} is not a duration: give it a unit ({_DURATION_HELP})")
    if not shown:
        raise ConfigError(f"{where}: an empty duration ({_DURATION_HELP})")
    iso = shown.upper().startswith("P")
    match = (_ISO_DURATION if iso else _SHORT_DURATION).match(shown)
    if not match or not any(match.groups()) or shown.upper().endswith("T"):
        if iso and re.search(r"\d[YM]", shown.upper().split("T")[0]):
            raise ConfigError(f"{where}: {shown!r}: months and years have no fixed length; write days, e.g. P30D")
        raise ConfigError(f"{where}: {shown!r} is not a duration ({_DURATION_HELP})")
    weeks, days, hours, minutes, seconds = (float(g.replace(",", ".")) if g else 0.0 for g in match.groups())
    try:
        value = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise ConfigError(f"{where}: {shown!r} is too long a duration") from None
    if value <= timedelta(0):
        raise ConfigError(f"{where}: {shown!r} is not a positive duration ({_DURATION_HELP})")
    return value


# --- extensions --------------------------------------------------------------------------------------------------


def _close(word: str, known: Iterable[str]) -> str | None:
    near = difflib.get_close_matches(word, list(known), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(near)}?" if near else None


def _listed(names: Iterable[str], most: int = 10) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:most])
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > most else "")


def _csv_rows(text: str, name: str) -> list[dict[str, Any]]:
    """The data rows of an extensions CSV as mappings of the known columns (blank lines skipped)."""
    try:
        records = [row for row in csv.reader(io.StringIO(text, newline="")) if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise ConfigError(f"{name}: not a readable CSV file ({exc})") from None
    if not records:
        return []
    header = [cell.strip().lower() for cell in records[0]]
    for column in header:
        if column not in EXTENSION_FIELDS:
            raise ConfigError(f"{name}, header: unknown column {column!r} (the columns are "
                              f"{', '.join(EXTENSION_FIELDS)})", hint=_close(column, EXTENSION_FIELDS))
        if header.count(column) > 1:
            raise ConfigError(f"{name}, header: column {column!r} appears twice")
    for needed in ("student", "assignment"):
        if needed not in header:
            raise ConfigError(f"{name}, header: no column {needed!r} (the header is "
                              f"{','.join(EXTENSION_FIELDS)})")
    if "due" not in header and "extra" not in header:
        raise ConfigError(f"{name}, header: no column 'due' or 'extra' (the header is {','.join(EXTENSION_FIELDS)})")
    rows: list[dict[str, Any]] = []
    for number, record in enumerate(records[1:], start=1):
        if len(record) > len(header):
            raise ConfigError(f"{name}, row {number}: {len(record)} values for {len(header)} columns "
                              f"({','.join(header)}); quote a value that holds a comma")
        rows.append({column: cell.strip() for column, cell in zip(header, record)})
    return rows


def _yaml_rows(text: str, name: str) -> list[dict[str, Any]]:
    """The entries of an extensions YAML file (a list of mappings) with their keys checked."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{name}: not valid YAML{at} ({problem})") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{name}: expected a list of extensions (lines starting with '- student: ...'), "
                          f"got a {type(data).__name__}")
    rows: list[dict[str, Any]] = []
    for number, item in enumerate(data, start=1):
        if not isinstance(item, Mapping):
            raise ConfigError(f"{name}, row {number}: expected a mapping with keys {', '.join(EXTENSION_FIELDS)}, "
                              f"got {type(item).__name__} {item!r}")
        for key in item:
            if key not in EXTENSION_FIELDS:
                raise ConfigError(f"{name}, row {number}: unknown key {str(key)!r} (the keys are "
                                  f"{', '.join(EXTENSION_FIELDS)})", hint=_close(str(key), EXTENSION_FIELDS))
        rows.append(dict(item))
    return rows


def _name_cell(value: Any, where: str, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigError(f"{where}: {field}: expected a name, got {type(value).__name__} {value!r}")
    return str(value).strip()


def load_extensions(path: Path, *, assignments: set[str], students: set[str] | None = None,
                    default_tz: str | None = None) -> list[Extension]:
    """A CSV (header: student,assignment,due,extra,reason; due XOR extra per row; UTF-8, BOM tolerated) or YAML
    list of mappings with the same keys (by suffix .csv / .yml / .yaml). Missing file -> []. Every problem is a
    ConfigError naming the file, the row (1-based data row) and the field: unknown assignment (with the known ones
    listed), unknown student when `students` is given (the roster seen), both or neither of due/extra, a due
    without a time zone and no default_tz, duplicate (student, assignment).

    The first problem found is raised (one line, as every ConfigError). Blank CSV lines are skipped and not
    counted as rows; the CSV header's column names are read case-insensitively, in any order.
    """
    path = Path(path)
    name = path.name
    if not path.exists():
        return []
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".yml", ".yaml"):
        raise ConfigError(f"{name}: an extensions file is .csv, .yml or .yaml, not {suffix or 'a file without one'}")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{name}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    rows = _csv_rows(text, name) if suffix == ".csv" else _yaml_rows(text, name)
    seen: dict[tuple[str, str], int] = {}
    extensions: list[Extension] = []
    for number, row in enumerate(rows, start=1):
        at = f"{name}, row {number}"
        student = _name_cell(row.get("student"), at, "student")
        assignment = _name_cell(row.get("assignment"), at, "assignment")
        where = f"{at} ({student or '?'}, {assignment or '?'})"
        if not student:
            raise ConfigError(f"{where}: student: empty (the student's ID, as in the roster)")
        if not assignment:
            raise ConfigError(f"{where}: assignment: empty (one of {_listed(assignments)})")
        if assignment not in assignments:
            raise ConfigError(f"{where}: assignment: {assignment!r} is not an assignment of the course (known: "
                              f"{_listed(assignments) or 'none'})", hint=_close(assignment, assignments))
        if students is not None and student not in students:
            raise ConfigError(f"{where}: student: {student!r} is not on the roster ({len(students)} students seen: "
                              f"{_listed(students) or 'none'})", hint=_close(student, students))
        due_cell: Any = row.get("due")
        extra_cell: Any = row.get("extra")
        has_due, has_extra = due_cell not in (None, ""), extra_cell not in (None, "")
        if has_due and has_extra:
            raise ConfigError(f"{where}: due and extra both given: give due (a new due date) or extra "
                              f"(a duration added to the due date), not both")
        if not has_due and not has_extra:
            raise ConfigError(f"{where}: neither due nor extra given: give due (a new due date, e.g. "
                              f"2026-12-01T10:00+08:00) or extra (a duration, e.g. 3d)")
        due = parse_time(due_cell, where=f"{where}: due", default_tz=default_tz) if has_due else None
        extra = parse_duration(extra_cell, where=f"{where}: extra") if has_extra else None
        reason = row.get("reason")
        if reason is not None and not isinstance(reason, str):
            reason = str(reason)
        key = (student, assignment)
        if key in seen:
            raise ConfigError(f"{where}: a second extension for {student} on {assignment} (the first is row "
                              f"{seen[key]}); keep one")
        seen[key] = number
        extensions.append(Extension(student=student, assignment=assignment, due=due, extra=extra,
                                    reason=(reason or "").strip()))
    return extensions


def deadline_for(student: str | None, assignment: str, *, due: datetime | None, last: datetime | None,
                 policy: LatePolicy, extensions: list[Extension]) -> Deadline | None:
    """None when the assignment has no due date. An extension for (student, assignment) moves `due` (to its due,
    or by its extra; `last` moves by the same amount, and never ends before the new due).

    The shift is elapsed time, so a late window of 48 hours stays 48 hours across a daylight-saving change.
    Two extensions for the same student and assignment are a ValueError (load_extensions never makes them).
    """
    if due is None:
        return None
    _aware_or_raise(due, "due")
    if last is not None:
        _aware_or_raise(last, "last")
    found = [e for e in extensions if student is not None and e.student == student and e.assignment == assignment]
    if len(found) > 1:
        raise ValueError(f"{len(found)} extensions for ({student}, {assignment}): keep one")
    if not found:
        return Deadline(due=due, last=last, policy=policy)
    ext = found[0]
    new_due = ext.due if ext.due is not None else _shift(due, ext.extra or timedelta(0))
    shift = _utc(new_due) - _utc(due)
    new_last = None
    if last is not None:
        new_last = _shift(last, shift)
        if _utc(new_last) < _utc(new_due):
            new_last = new_due
    return Deadline(due=new_due, last=new_last, policy=policy, extension=ext)


def _aware_or_raise(value: datetime, name: str) -> None:
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a time zone), got {value.isoformat()}")


def _shift(value: datetime, by: timedelta) -> datetime:
    """``value`` moved by ``by`` of elapsed time, shown in its own time zone."""
    return (_utc(value) + by).astimezone(value.tzinfo)


# --- the penalty -------------------------------------------------------------------------------------------------


def _dec(x: float | Decimal) -> Decimal:
    return x if isinstance(x, Decimal) else Decimal(str(x))


def _q(x: Decimal) -> Decimal:
    """Hundredths, half up (2.675 -> 2.68)."""
    return x.quantize(_HUNDREDTH, rounding=ROUND_HALF_UP) + 0   # + 0: no "-0.00"


def _num(x: float | Decimal) -> str:
    """A number as a person writes it: 10, 2.5, 0.25 (no trailing zeros, no exponent)."""
    text = f"{_dec(x).normalize():f}"
    return "0" if text in ("-0", "") else text


def _when(value: datetime) -> str:
    """'2026-12-01 10:00 +08:00': the wall-clock time in its own zone, with the offset."""
    stamp = value.strftime("%Y-%m-%d %H:%M" + (":%S" if value.second else ""))
    return f"{stamp} {_offset(value.utcoffset() or timedelta(0))}"


def _span(seconds: float) -> tuple[str, str]:
    """A lateness in days, hours, minutes and seconds (a started second counts), in English and Chinese."""
    total = int(Decimal(str(seconds)).to_integral_value(rounding=ROUND_CEILING))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d", "天"), (hours, "h", "小时"), (minutes, "min", "分钟"), (secs, "s", "秒")]
    shown = [(n, en, zh) for n, en, zh in parts if n] or [(0, "s", "秒")]
    return " ".join(f"{n} {en}" for n, en, _ in shown), " ".join(f"{n} {zh}" for n, _, zh in shown)


@dataclass(frozen=True)
class _Taken:
    """A nominal penalty and how to say it, before the floor and the raw score limit it."""

    points: Decimal
    en: str
    zh: str
    floored: bool    # whether the policy's floor applies (per_hour, per_day, custom)


#: Custom late functions already imported, by (file, modification time, size): one import per file per run.
_LOADED: dict[tuple[str, int, int], ModuleType] = {}


def _custom_function(policy: LatePolicy, course_root: Path | None) -> tuple[Callable[..., Any], str]:
    """The custom policy's function, imported from its file in the course folder; and that file's name."""
    assert policy.function is not None
    module_name, _, func_name = policy.function.partition(":")
    file_name = f"{module_name}.py"
    named = f"late policy {policy.function!r} ({file_name})"
    if course_root is None:
        raise ConfigError(f"{named}: the course folder is not known, so its file cannot be found")
    file = Path(course_root) / file_name
    if not file.is_file():
        raise ConfigError(f"{named}: no file {file_name} in the course folder {course_root}")
    stat = file.stat()
    key = (str(file.resolve()), stat.st_mtime_ns, stat.st_size)
    module = _LOADED.get(key)
    if module is None:
        qualified = f"autograder_course_late_{module_name}"
        spec = importlib.util.spec_from_file_location(qualified, file)
        if spec is None or spec.loader is None:
            raise ConfigError(f"{named}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the course's code: any failure is the course's to fix
            sys.modules.pop(qualified, None)
            line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
            raise ConfigError(f"{named}: importing {file_name} failed: {type(exc).__name__}: {exc}{line}") from None
        _LOADED[key] = module
    func = getattr(module, func_name, None)
    if func is None:
        raise ConfigError(f"{named}: {file_name} has no function {func_name!r}",
                          hint=_close(func_name, [n for n in dir(module) if not n.startswith("_")]))
    if not callable(func):
        raise ConfigError(f"{named}: {func_name} is a {type(func).__name__}, not a function")
    return func, file_name


def _custom_penalty(policy: LatePolicy, course_root: Path | None, *, raw: float, max_points: float,
                    seconds_late: float, due: datetime, submitted: datetime | None) -> Decimal:
    """The points the course's function takes off; anything but a finite number >= 0 is a ConfigError."""
    func, file_name = _custom_function(policy, course_root)
    named = f"late policy {policy.function!r} ({file_name})"
    try:
        value = func(raw=raw, max_points=max_points, seconds_late=seconds_late, due=due, submitted=submitted)
    except Exception as exc:  # noqa: BLE001 - the course's code: a failure must stop grading, not score 0
        raise ConfigError(f"{named}: raised {type(exc).__name__}: {exc}",
                          hint="it is called as fn(raw=, max_points=, seconds_late=, due=, submitted=); submitted "
                               "is None when the LMS marked a submission late without its time") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise ConfigError(f"{named}: returned {type(value).__name__} {value!r}, not a number of points")
    number = float(value)
    if math.isnan(number):
        raise ConfigError(f"{named}: returned NaN, not a number of points")
    if math.isinf(number):
        raise ConfigError(f"{named}: returned {number}, not a finite number of points")
    if number < 0:
        raise ConfigError(f"{named}: returned {value!r}: a penalty is the points taken off, 0 or more")
    return _dec(number)


def _nominal(policy: LatePolicy, *, seconds_late: float, late_by: timedelta, raw: float, max_points: float,
             due: datetime, submitted: datetime | None, course_root: Path | None) -> _Taken:
    """The policy's penalty for a submission ``late_by`` after the due time, before any limit."""
    if policy.kind == "none":
        return _Taken(Decimal(0), "no late penalty", "无迟交扣分", floored=False)
    if policy.kind == "zero":
        points = max(_q(_dec(raw)), Decimal(0))
        return _Taken(points, f"a late submission scores 0: -{points}", f"迟交记 0 分：-{points}", floored=False)
    if policy.kind == "custom":
        points = _custom_penalty(policy, course_root, raw=raw, max_points=max_points, seconds_late=seconds_late,
                                 due=due, submitted=submitted)
        return _Taken(points, f"late policy {policy.function}: -{_q(points)}",
                      f"自定义迟交规则 {policy.function}：-{_q(points)}", floored=True)
    unit_seconds, singular, plural, unit_zh = _UNITS[policy.kind]
    units = -(-late_by // timedelta(seconds=unit_seconds))     # a started unit counts: exact, no float ceil
    if policy.percent is not None:
        each = _dec(policy.percent) / 100 * _dec(max_points)
        what_en = f"{_num(policy.percent)}% of {_num(max_points)}"
        what_zh = f"扣满分 {_num(max_points)} 的 {_num(policy.percent)}%"
    else:
        assert policy.points is not None
        each = _dec(policy.points)
        what_en = f"{_num(policy.points)} points"
        what_zh = f"扣 {_num(policy.points)} 分"
    points = each * units
    return _Taken(points, f"{what_en} per started {singular}: {units} {singular if units == 1 else plural}, "
                          f"-{_q(points)}",
                  f"每迟交 1 {unit_zh}（不足 1 {unit_zh}按 1 {unit_zh}计）{what_zh}：{units} {unit_zh}，-{_q(points)}",
                  floored=True)


def _limit(taken: _Taken, policy: LatePolicy, raw: float) -> tuple[Decimal, Decimal, str, str]:
    """Penalty and final score (hundredths), limited by the floor and the raw score; the words to add.

    The floor only stops the penalty: a raw score already at or below it loses nothing, and none goes below 0.
    """
    raw_q = max(_q(_dec(raw)), Decimal(0))
    wanted = _q(taken.points)
    floor = _dec(policy.floor or 0) if taken.floored else Decimal(0)
    penalty = Decimal(0) if raw_q <= floor else min(wanted, raw_q - floor)
    penalty = _q(penalty)
    en = zh = ""
    if penalty < wanted:
        if taken.floored and raw_q <= floor and floor > 0:
            en = f" limited to -{penalty} (the score {_num(raw_q)} is already at or below the floor {_num(floor)})"
            zh = f"，但得分 {_num(raw_q)} 已不高于最低分 {_num(floor)}，不扣分"
        else:
            en, zh = f" limited to -{penalty}", f"，以 -{penalty} 为限"
    if taken.floored and not zh.endswith("不扣分"):
        en += f" (floor {_num(floor)})"
        zh += f"（最低 {_num(floor)} 分）"
    return penalty, _q(raw_q - penalty), en, zh


def apply(deadline: Deadline | None, *, submitted: datetime | None, late_marker: bool, raw: float,
          max_points: float, course_root: Path | None = None,
          unknown_late: Literal["on_time", "late_unknown"] = "on_time") -> Lateness:
    """Apply the policy. Exactly at the due time is on time; one second after is late. `submitted` None and
    late_marker False -> late None (unknown), no penalty, a rule saying no trustworthy time. `submitted` None and
    late_marker True (a Canvas `_late` marker: late, time unknown): with unknown_late="late_unknown" the policy
    is applied as for ONE started unit late (zero policy -> 0), else no penalty; either way the rule says so.
    zero -> final 0 when late. per_hour/per_day: units = ceil(seconds_late / unit) (a started unit counts);
    penalty = units * (percent/100*max_points or points), then limited so that final >= floor (if the raw score is
    already below the floor, no penalty) and final >= 0. After `last` -> accepted False, final 0.
    custom: import the function from course_root/<module>.py (a file of the course; load it with importlib from
    that exact path, module name 'autograder_course_late_<module>'), call it as
    fn(raw=raw, max_points=max_points, seconds_late=seconds_late, due=deadline.due, submitted=submitted) -> penalty
    points (a number); any exception, a non-number, NaN, a negative value raises ConfigError naming the function,
    the file and the problem (so nothing is graded wrongly). The penalty is then limited as above.

    A known submission time wins over the late marker (the LMS's due date may not know an extension). For a
    marker without a time under "late_unknown", the submission counts as one second late (one started unit),
    and a custom function is called with seconds_late=1.0 and submitted=None. Submitting exactly at `last` is
    still accepted. ``seconds_late`` is 0.0 for a submission on time.
    """
    if unknown_late not in ("on_time", "late_unknown"):
        raise ValueError(f"unknown_late must be 'on_time' or 'late_unknown', got {unknown_late!r}")
    for name, number in (("raw", raw), ("max_points", max_points)):
        if not math.isfinite(number):
            raise ValueError(f"{name} must be a finite number, got {number!r}")
    if max_points < 0:
        raise ValueError(f"max_points must be 0 or more, got {max_points!r}")
    if submitted is not None:
        _aware_or_raise(submitted, "submitted")
    raw_q = max(_q(_dec(raw)), Decimal(0))

    def result(late: bool | None, seconds: float | None, penalty: Decimal, final: Decimal, en: str, zh: str,
               accepted: bool = True) -> Lateness:
        return Lateness(late=late, seconds_late=seconds, penalty=float(penalty), final=float(final), rule=en,
                        rule_zh=zh, accepted=accepted)

    if deadline is None:
        return result(False, None, Decimal(0), raw_q, "no due date: no late penalty", "无截止时间：不扣分")
    policy = deadline.policy
    extended_en, extended_zh = (" (extended)", "（已延期）") if deadline.extension is not None else ("", "")
    head_en = f"due {_when(deadline.due)}{extended_en}"
    head_zh = f"截止时间 {_when(deadline.due)}{extended_zh}"

    if submitted is None:
        if not late_marker:
            return result(None, None, Decimal(0), raw_q, f"{head_en}; no trustworthy submission time: lateness "
                          f"unknown, no late penalty", f"{head_zh}；没有可信的提交时间，无法判断是否迟交，不扣分")
        marked_en, marked_zh = "marked late by the LMS, submission time unknown", "学习平台标记为迟交，提交时间未知"
        if unknown_late == "on_time" or policy.kind == "none":
            why_en = "no late penalty" if policy.kind == "none" else "no penalty (unknown_late: on_time)"
            why_zh = "无迟交扣分" if policy.kind == "none" else "按时处理，不扣分"
            return result(True, None, Decimal(0), raw_q, f"{head_en}; {marked_en}: {why_en}",
                          f"{head_zh}；{marked_zh}：{why_zh}")
        unit = _UNITS.get(policy.kind)
        counted_en = f"counted as 1 started {unit[1]} late" if unit else "counted as 1 second late"
        counted_zh = f"按迟交 1 {unit[3]}计" if unit else "按迟交 1 秒计"
        taken = _nominal(policy, seconds_late=1.0, late_by=timedelta(seconds=1), raw=raw, max_points=max_points,
                         due=deadline.due, submitted=None, course_root=course_root)
        penalty, final, more_en, more_zh = _limit(taken, policy, raw)
        return result(True, None, penalty, final, f"{head_en}; {marked_en}, {counted_en}; {taken.en}{more_en}",
                      f"{head_zh}；{marked_zh}，{counted_zh}；{taken.zh}{more_zh}")

    late_by = _utc(submitted) - _utc(deadline.due)
    if late_by <= timedelta(0):
        return result(False, 0.0, Decimal(0), raw_q, f"{head_en}; on time", f"{head_zh}；按时提交")
    seconds = late_by.total_seconds()
    span_en, span_zh = _span(seconds)
    if deadline.last is not None and _utc(submitted) > _utc(deadline.last):
        return result(True, seconds, raw_q, Decimal(0),
                      f"{head_en}; {span_en} late; after the late window closed ({_when(deadline.last)}): "
                      f"not accepted, score 0",
                      f"{head_zh}；迟交 {span_zh}；晚于迟交截止时间 {_when(deadline.last)}：不予接收，记 0 分",
                      accepted=False)
    taken = _nominal(policy, seconds_late=seconds, late_by=late_by, raw=raw, max_points=max_points,
                     due=deadline.due, submitted=submitted, course_root=course_root)
    penalty, final, more_en, more_zh = _limit(taken, policy, raw)
    return result(True, seconds, penalty, final, f"{head_en}; {span_en} late; {taken.en}{more_en}",
                  f"{head_zh}；迟交 {span_zh}；{taken.zh}{more_zh}")


def as_of_accepts(deadline: Deadline | None, as_of: datetime) -> bool:
    """Whether the window is still open at ``as_of`` (for --as-of reports): no deadline or no late window end
    means always; otherwise until ``last`` inclusive (a submission exactly at ``last`` is accepted)."""
    _aware_or_raise(as_of, "as_of")
    if deadline is None or deadline.last is None:
        return True
    return _utc(as_of) <= _utc(deadline.last)
