"""What lateness does to a score: the late policy applied to one submission, and the sentence saying so.

Pure and deterministic: nothing here reads the clock. Every function is given the times it needs (the due
date from course.yml, a submission time from an LMS export, ``--as-of`` for a report), so the same inputs
always give the same score and the same sentence explaining it. The deadline itself (due time, late window,
policy, extension) is :mod:`autograder.course.late_policy`'s; every time is compared as elapsed time, in UTC
(:func:`autograder.course.clock.as_utc`).

Scores come out in hundredths of a point, rounded half up (2.675 -> 2.68).
"""
from __future__ import annotations

import importlib.util
import math
import numbers
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from autograder.course.clock import as_utc, readable
# (re-exported for the callers that read --as-of and the dashboard's due dates from here: the parser is clock's)
from autograder.core.errors import ConfigError
from autograder.course.late_policy import UNITS, Deadline, LatePolicy, close_hint, require_aware

_HUNDREDTH = Decimal("0.01")


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
    """'2026-12-01 10:00 +08:00': the wall-clock time in its own zone (a batch's and the service's deadlines are in
    the course's), in the one format people read (:func:`autograder.course.clock.readable`)."""
    return readable(value)


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
                          hint=close_hint(func_name, [n for n in dir(module) if not n.startswith("_")]))
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
    unit_seconds, singular, plural, unit_zh = UNITS[policy.kind]
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
    _check_arguments(unknown_late, submitted=submitted, raw=raw, max_points=max_points)
    raw_q = max(_q(_dec(raw)), Decimal(0))
    if deadline is None:
        return _result(False, None, Decimal(0), raw_q, "no due date: no late penalty", "无截止时间：不扣分")
    policy = deadline.policy
    extended_en, extended_zh = (" (extended)", "（已延期）") if deadline.extension is not None else ("", "")
    head_en = f"due {_when(deadline.due)}{extended_en}"
    head_zh = f"截止时间 {_when(deadline.due)}{extended_zh}"

    if submitted is None:
        return _time_unknown(deadline, (head_en, head_zh), late_marker=late_marker, unknown_late=unknown_late,
                             raw=raw, raw_q=raw_q, max_points=max_points, course_root=course_root)

    late_by = as_utc(submitted) - as_utc(deadline.due)
    if late_by <= timedelta(0):
        return _result(False, 0.0, Decimal(0), raw_q, f"{head_en}; on time", f"{head_zh}；按时提交")
    seconds = late_by.total_seconds()
    span_en, span_zh = _span(seconds)
    if deadline.last is not None and as_utc(submitted) > as_utc(deadline.last):
        return _result(True, seconds, raw_q, Decimal(0),
                       f"{head_en}; {span_en} late; after the late window closed ({_when(deadline.last)}): "
                       f"not accepted, score 0",
                       f"{head_zh}；迟交 {span_zh}；晚于迟交截止时间 {_when(deadline.last)}：不予接收，记 0 分",
                       accepted=False)
    taken = _nominal(policy, seconds_late=seconds, late_by=late_by, raw=raw, max_points=max_points,
                     due=deadline.due, submitted=submitted, course_root=course_root)
    penalty, final, more_en, more_zh = _limit(taken, policy, raw)
    return _result(True, seconds, penalty, final, f"{head_en}; {span_en} late; {taken.en}{more_en}",
                   f"{head_zh}；迟交 {span_zh}；{taken.zh}{more_zh}")


def _check_arguments(unknown_late: str, *, submitted: datetime | None, raw: float, max_points: float) -> None:
    """:func:`apply`'s arguments: a known ``unknown_late``, finite scores, ``max_points`` >= 0, an aware time."""
    if unknown_late not in ("on_time", "late_unknown"):
        raise ValueError(f"unknown_late must be 'on_time' or 'late_unknown', got {unknown_late!r}")
    for name, number in (("raw", raw), ("max_points", max_points)):
        if not math.isfinite(number):
            raise ValueError(f"{name} must be a finite number, got {number!r}")
    if max_points < 0:
        raise ValueError(f"max_points must be 0 or more, got {max_points!r}")
    if submitted is not None:
        require_aware(submitted, "submitted")


def _result(late: bool | None, seconds: float | None, penalty: Decimal, final: Decimal, en: str, zh: str,
            accepted: bool = True) -> Lateness:
    """:func:`apply`'s answer: its penalty and final score as floats, its rule in both languages."""
    return Lateness(late=late, seconds_late=seconds, penalty=float(penalty), final=float(final), rule=en,
                    rule_zh=zh, accepted=accepted)


def _time_unknown(deadline: Deadline, head: tuple[str, str], *, late_marker: bool,
                  unknown_late: Literal["on_time", "late_unknown"], raw: float, raw_q: Decimal, max_points: float,
                  course_root: Path | None) -> Lateness:
    """:func:`apply` without a submission time: lateness unknown, or the LMS's late marker (see ``unknown_late``)."""
    head_en, head_zh = head
    policy = deadline.policy
    if not late_marker:
        return _result(None, None, Decimal(0), raw_q, f"{head_en}; no trustworthy submission time: lateness "
                       f"unknown, no late penalty", f"{head_zh}；没有可信的提交时间，无法判断是否迟交，不扣分")
    marked_en, marked_zh = "marked late by the LMS, submission time unknown", "学习平台标记为迟交，提交时间未知"
    if unknown_late == "on_time" or policy.kind == "none":
        why_en = "no late penalty" if policy.kind == "none" else "no penalty (unknown_late: on_time)"
        why_zh = "无迟交扣分" if policy.kind == "none" else "按时处理，不扣分"
        return _result(True, None, Decimal(0), raw_q, f"{head_en}; {marked_en}: {why_en}",
                       f"{head_zh}；{marked_zh}：{why_zh}")
    unit = UNITS.get(policy.kind)
    counted_en = f"counted as 1 started {unit[1]} late" if unit else "counted as 1 second late"
    counted_zh = f"按迟交 1 {unit[3]}计" if unit else "按迟交 1 秒计"
    taken = _nominal(policy, seconds_late=1.0, late_by=timedelta(seconds=1), raw=raw, max_points=max_points,
                     due=deadline.due, submitted=None, course_root=course_root)
    penalty, final, more_en, more_zh = _limit(taken, policy, raw)
    return _result(True, None, penalty, final, f"{head_en}; {marked_en}, {counted_en}; {taken.en}{more_en}",
                   f"{head_zh}；{marked_zh}，{counted_zh}；{taken.zh}{more_zh}")


def as_of_accepts(deadline: Deadline | None, as_of: datetime) -> bool:
    """Whether the window is still open at ``as_of`` (for --as-of reports): no deadline or no late window end
    means always; otherwise until ``last`` inclusive (a submission exactly at ``last`` is accepted)."""
    require_aware(as_of, "as_of")
    if deadline is None or deadline.last is None:
        return True
    return as_utc(as_of) <= as_utc(deadline.last)
