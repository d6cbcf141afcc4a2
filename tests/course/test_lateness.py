"""autograder.course.lateness, late_policy and extensions: deadlines, late windows, late policies and extensions,
with real times and real values."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from autograder.course.clock import parse_duration, parse_time
from autograder.core.errors import ConfigError
from autograder.course.extensions import load_extensions
from autograder.course.late_policy import Deadline, Extension, LatePolicy, deadline_for
from autograder.course.lateness import Lateness, apply, as_of_accepts

SHANGHAI = ZoneInfo("Asia/Shanghai")
NEW_YORK = ZoneInfo("America/New_York")
DUE = datetime(2026, 12, 1, 10, 0, tzinfo=SHANGHAI)
ASSIGNMENTS = {"01_rnn_memory", "02_qkv_attention"}
PER_HOUR_10 = LatePolicy(kind="per_hour", percent=10)


def at(deadline: Deadline | None, submitted: datetime | None, *, raw: float = 10, max_points: float = 10,
       late_marker: bool = False, **kwargs: object) -> Lateness:
    return apply(deadline, submitted=submitted, late_marker=late_marker, raw=raw, max_points=max_points,
                 **kwargs)  # type: ignore[arg-type]


def deadline(policy: LatePolicy, *, due: datetime = DUE, last: datetime | None = None) -> Deadline:
    return Deadline(due=due, last=last, policy=policy)


# --- parse_time / parse_duration ---------------------------------------------------------------------------------


def test_parse_time_offsets_and_default_zone() -> None:
    assert parse_time("2026-12-01T10:00+08:00", where="w") == datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
    assert parse_time("2026-03-01T02:30Z", where="w") == datetime(2026, 3, 1, 2, 30, tzinfo=timezone.utc)
    local = parse_time("2026-12-01 10:00", where="w", default_tz="Asia/Shanghai")
    assert local.utcoffset() == timedelta(hours=8)
    assert local == datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
    # An explicit offset wins over the default zone.
    assert parse_time("2026-12-01T10:00-05:00", where="w", default_tz="Asia/Shanghai").utcoffset() == timedelta(
        hours=-5)
    # YAML hands over datetimes: aware ones as they are, naive ones like text without an offset.
    aware = datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    assert parse_time(aware, where="w") is aware
    assert parse_time(datetime(2026, 12, 1, 10, 0), where="w", default_tz="Asia/Shanghai") == aware


def test_parse_time_without_zone_names_where() -> None:
    where = "extensions.csv, row 3 (ada, 02_qkv_attention): due"
    with pytest.raises(ConfigError) as info:
        parse_time("2026-12-01 10:00", where=where)
    assert info.value.message == (f"{where}: '2026-12-01 10:00' has no time zone (write 2026-12-01T10:00+08:00)")
    assert "\n" not in info.value.message


@pytest.mark.parametrize("text", ["2026-12-01", "tomorrow", "2026-13-01T10:00+08:00", "2026-12-01T25:00Z"])
def test_parse_time_rejects_non_times(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^course\.yml, late: "):
        parse_time(text, where="course.yml, late", default_tz="Asia/Shanghai")


def test_parse_time_unknown_zone_name() -> None:
    with pytest.raises(ConfigError, match="'Mars/Olympus' is not an IANA time zone"):
        parse_time("2026-12-01 10:00", where="w", default_tz="Mars/Olympus")


def test_nonexistent_local_time_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_time("2026-03-08T02:30", where="course.yml, due", default_tz="America/New_York")
    message = info.value.message
    assert message.startswith("course.yml, due: '2026-03-08T02:30' does not exist in America/New_York")
    assert "2026-03-08T03:30-04:00" in message     # the suggested offset is the real time the reading meant


def test_ambiguous_local_time_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_time("2026-11-01T01:30", where="course.yml, due", default_tz="America/New_York")
    message = info.value.message
    assert "ambiguous in America/New_York" in message
    assert "2026-11-01T01:30-04:00" in message and "2026-11-01T01:30-05:00" in message


@pytest.mark.parametrize(("text", "expected"), [
    ("3d", timedelta(days=3)),
    ("36h", timedelta(hours=36)),
    ("90m", timedelta(minutes=90)),
    ("2d12h", timedelta(days=2, hours=12)),
    ("P2DT12H", timedelta(days=2, hours=12)),
    ("PT36H", timedelta(hours=36)),
])
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text, where="w") == expected


@pytest.mark.parametrize("text", ["", "3", "0d", "PT0S", "-3d", "3 days later", "P1M", "P", "2h3d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^extensions\.csv, row 2: extra: "):
        parse_duration(text, where="extensions.csv, row 2: extra")


# --- LatePolicy validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "needle"), [
    ({"kind": "per_hour", "percent": 10, "points": 1}, "not both"),
    ({"kind": "per_hour", "percent": -5}, "percent must be more than 0"),
    ({"kind": "per_day", "percent": 0}, "percent must be more than 0"),
    ({"kind": "per_day", "percent": 150}, "at most 100"),
    ({"kind": "per_day", "points": 0}, "points must be more than 0"),
    ({"kind": "per_day", "points": -1}, "points must be more than 0"),
    ({"kind": "per_hour"}, "needs percent"),
    ({"kind": "per_hour", "percent": 10, "floor": -1}, "floor must be 0 or more"),
    ({"kind": "per_hour", "percent": float("nan")}, "finite"),
    ({"kind": "custom"}, "needs function"),
    ({"kind": "custom", "function": "late_policy"}, "must look like"),
    ({"kind": "custom", "function": "late_policy:penalty", "percent": 5}, "only for per_hour and per_day"),
    ({"kind": "zero", "points": 1}, "only for per_hour and per_day"),
    ({"kind": "zero", "floor": 1}, "floor is only for"),
    ({"kind": "none", "function": "late_policy:penalty"}, "only for kind custom"),
    ({"kind": "weekly"}, "Input should be"),
    ({"kind": "none", "percnt": 10}, "Extra inputs are not permitted"),
])
def test_late_policy_validation(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        LatePolicy(**fields)  # type: ignore[arg-type]


def test_late_policy_valid_and_frozen() -> None:
    policy = LatePolicy(kind="per_day", points=2, floor=3)
    assert (policy.kind, policy.points, policy.percent, policy.floor) == ("per_day", 2.0, None, 3.0)
    assert LatePolicy().kind == "none"
    with pytest.raises(ValidationError):
        policy.points = 5  # type: ignore[misc]


# --- the due time and the policies ---------------------------------------------------------------------------------


def test_exactly_at_due_is_on_time() -> None:
    result = at(deadline(PER_HOUR_10), DUE)
    assert (result.late, result.seconds_late, result.penalty, result.final, result.accepted) == (
        False, 0.0, 0.0, 10.0, True)
    assert result.rule == "due 2026-12-01 10:00 +08:00; on time"
    assert result.rule_zh == "截止时间 2026-12-01 10:00 +08:00；按时提交"


def test_one_second_late_is_one_started_hour() -> None:
    result = at(deadline(PER_HOUR_10), DUE + timedelta(seconds=1))
    assert result.late is True
    assert result.seconds_late == 1.0
    assert (result.penalty, result.final) == (1.0, 9.0)
    assert "1 hour, -1.00" in result.rule


def test_exactly_one_hour_late_is_one_unit_and_a_microsecond_more_is_two() -> None:
    assert at(deadline(PER_HOUR_10), DUE + timedelta(hours=1)).penalty == 1.0
    assert at(deadline(PER_HOUR_10), DUE + timedelta(hours=1, microseconds=1)).penalty == 2.0


def test_rule_sentence() -> None:
    result = at(deadline(PER_HOUR_10), DUE + timedelta(hours=2, minutes=5))
    assert result.rule == "due 2026-12-01 10:00 +08:00; 2 h 5 min late; 10% of 10 per started hour: 3 hours, -3.00 " \
                          "(floor 0)"
    assert (result.penalty, result.final) == (3.0, 7.0)
    assert "小时" in result.rule_zh and "分钟" in result.rule_zh and "-3.00" in result.rule_zh
    assert not any(word in result.rule_zh for word in ("due", "late", "hour", "floor"))


def test_submission_in_another_time_zone() -> None:
    due = parse_time("2026-03-01T10:00+08:00", where="w")
    submitted = parse_time("2026-03-01T02:30Z", where="w")
    result = at(deadline(PER_HOUR_10, due=due), submitted)
    assert result.seconds_late == 30 * 60
    assert (result.late, result.penalty, result.final) == (True, 1.0, 9.0)
    assert "30 min late" in result.rule


def test_across_the_dst_change_real_elapsed_time() -> None:
    due = datetime(2026, 3, 8, 1, 30, tzinfo=NEW_YORK)         # EST, -05:00
    submitted = datetime(2026, 3, 8, 3, 30, tzinfo=NEW_YORK)   # EDT, -04:00: the wall clock shows 2 hours more
    assert submitted - due == timedelta(hours=2)             # Python's same-zone subtraction: wall-clock, wrong
    result = at(deadline(PER_HOUR_10, due=due), submitted)
    assert result.seconds_late == 3600.0                     # real elapsed time
    assert (result.penalty, result.final) == (1.0, 9.0)      # exactly 1 hour: 1 started hour, not 2
    assert "1 h late" in result.rule and "1 hour, -1.00" in result.rule
    result = at(deadline(PER_HOUR_10, due=due), submitted + timedelta(seconds=1))
    assert (result.seconds_late, result.penalty) == (3601.0, 2.0)


def test_dst_times_parsed_from_text() -> None:
    due = parse_time("2026-03-08 01:30", where="w", default_tz="America/New_York")
    submitted = parse_time("2026-03-08 03:30", where="w", default_tz="America/New_York")
    assert at(deadline(PER_HOUR_10, due=due), submitted).seconds_late == 3600.0


def test_policy_none() -> None:
    result = at(deadline(LatePolicy()), DUE + timedelta(days=3))
    assert (result.late, result.penalty, result.final, result.accepted) == (True, 0.0, 10.0, True)
    assert result.seconds_late == 3 * 86400
    assert "no late penalty" in result.rule


def test_policy_zero() -> None:
    result = at(deadline(LatePolicy(kind="zero")), DUE + timedelta(seconds=1), raw=7.5)
    assert (result.late, result.penalty, result.final, result.accepted) == (True, 7.5, 0.0, True)
    assert at(deadline(LatePolicy(kind="zero")), DUE, raw=7.5).final == 7.5


def test_per_hour_percent_of_max_points() -> None:
    # 5% of 20 points = 1 point per started hour; 3 h 0 min 1 s late -> 4 hours.
    result = at(deadline(LatePolicy(kind="per_hour", percent=5)), DUE + timedelta(hours=3, seconds=1), raw=18,
                max_points=20)
    assert (result.penalty, result.final) == (4.0, 14.0)


def test_per_day_points() -> None:
    policy = LatePolicy(kind="per_day", points=1.5)
    result = at(deadline(policy), DUE + timedelta(days=1, hours=1), raw=9)   # 2 started days
    assert (result.penalty, result.final) == (3.0, 6.0)
    assert "1.5 points per started day: 2 days, -3.00" in result.rule
    assert at(deadline(policy), DUE + timedelta(days=1), raw=9).penalty == 1.5   # exactly 1 day: 1 unit


def test_floor_limits_the_penalty() -> None:
    policy = LatePolicy(kind="per_day", points=2, floor=5)
    result = at(deadline(policy), DUE + timedelta(days=4), raw=8)     # wants -8, the floor allows -3
    assert (result.penalty, result.final) == (3.0, 5.0)
    assert "limited to -3.00 (floor 5)" in result.rule


def test_raw_below_floor_loses_nothing() -> None:
    policy = LatePolicy(kind="per_day", points=2, floor=5)
    result = at(deadline(policy), DUE + timedelta(days=4), raw=4)
    assert (result.late, result.penalty, result.final) == (True, 0.0, 4.0)


def test_penalty_larger_than_raw_stops_at_zero() -> None:
    result = at(deadline(LatePolicy(kind="per_hour", points=3)), DUE + timedelta(hours=5), raw=4)
    assert (result.penalty, result.final) == (4.0, 0.0)
    assert "-15.00 limited to -4.00" in result.rule


def test_rounding_half_up_to_hundredths() -> None:
    assert at(None, None, raw=2.675).final == 2.68
    assert at(None, None, raw=2.665).final == 2.67    # half up, not half even (2.66)
    assert at(None, None, raw=0.125).final == 0.13
    # 1/3 point per started hour, 1 hour: the penalty and the final score in hundredths.
    result = at(deadline(LatePolicy(kind="per_hour", points=1 / 3)), DUE + timedelta(minutes=1), raw=5)
    assert (result.penalty, result.final) == (0.33, 4.67)
    # 10% of 10 x 3 is 3.0000000000000004 in floats: the result is exact.
    assert at(deadline(PER_HOUR_10), DUE + timedelta(hours=3)).penalty == 3.0


def test_late_window() -> None:
    last = DUE + timedelta(days=2)
    dl = deadline(PER_HOUR_10, last=last)
    inside = at(dl, last)
    assert (inside.accepted, inside.penalty, inside.final) == (True, 10.0, 0.0)   # 48 hours x 1 point, limited
    mild = at(dl, DUE + timedelta(minutes=10))
    assert (mild.accepted, mild.final) == (True, 9.0)
    after = at(dl, last + timedelta(seconds=1), raw=9.5)
    assert (after.late, after.accepted, after.penalty, after.final) == (True, False, 9.5, 0.0)
    assert after.seconds_late == 2 * 86400 + 1
    assert "not accepted" in after.rule and "2026-12-03 10:00 +08:00" in after.rule
    assert "不予接收" in after.rule_zh


def test_late_window_before_due_is_rejected() -> None:
    with pytest.raises(ValidationError, match="before the due time"):
        Deadline(due=DUE, last=DUE - timedelta(seconds=1), policy=PER_HOUR_10)


def test_as_of_accepts() -> None:
    last = DUE + timedelta(days=1)
    dl = deadline(PER_HOUR_10, last=last)
    assert as_of_accepts(dl, last) is True
    assert as_of_accepts(dl, last + timedelta(seconds=1)) is False
    assert as_of_accepts(deadline(PER_HOUR_10), DUE + timedelta(days=365)) is True
    assert as_of_accepts(None, DUE) is True
    with pytest.raises(ValueError, match="aware"):
        as_of_accepts(dl, datetime(2026, 12, 1, 10, 0))


def test_no_due_date() -> None:
    assert deadline_for("ada", "01_rnn_memory", due=None, last=None, policy=PER_HOUR_10, extensions=[]) is None
    result = at(None, DUE + timedelta(days=9), raw=6)
    assert (result.late, result.penalty, result.final, result.accepted) == (False, 0.0, 6.0, True)


# --- unknown times and the LMS late marker ---------------------------------------------------------------------


def test_unknown_time_no_marker() -> None:
    result = at(deadline(LatePolicy(kind="zero")), None)
    assert (result.late, result.seconds_late, result.penalty, result.final) == (None, None, 0.0, 10.0)
    assert "no trustworthy submission time" in result.rule
    assert "没有可信的提交时间" in result.rule_zh


def test_late_marker_on_time_choice() -> None:
    result = at(deadline(PER_HOUR_10), None, late_marker=True, unknown_late="on_time")
    assert (result.late, result.seconds_late, result.penalty, result.final) == (True, None, 0.0, 10.0)
    assert "marked late by the LMS" in result.rule and "no penalty" in result.rule
    assert at(deadline(PER_HOUR_10), None, late_marker=True).final == 10.0     # on_time is the default


def test_late_marker_late_unknown_counts_one_unit() -> None:
    result = at(deadline(PER_HOUR_10), None, late_marker=True, unknown_late="late_unknown")
    assert (result.late, result.seconds_late, result.penalty, result.final) == (True, None, 1.0, 9.0)
    assert "counted as 1 started hour late" in result.rule
    per_day = at(deadline(LatePolicy(kind="per_day", points=2)), None, late_marker=True, unknown_late="late_unknown")
    assert (per_day.penalty, per_day.final) == (2.0, 8.0)
    zero = at(deadline(LatePolicy(kind="zero")), None, late_marker=True, unknown_late="late_unknown", raw=7)
    assert (zero.penalty, zero.final) == (7.0, 0.0)


def test_known_time_wins_over_the_marker() -> None:
    result = at(deadline(LatePolicy(kind="zero")), DUE, late_marker=True, unknown_late="late_unknown")
    assert (result.late, result.final) == (False, 10.0)


def test_naive_submission_time_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        at(deadline(PER_HOUR_10), datetime(2026, 12, 1, 11, 0))


# --- extensions ----------------------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_extension_new_due_moves_last() -> None:
    last = DUE + timedelta(days=2)
    ext = Extension(student="ada", assignment="02_qkv_attention", due=DUE + timedelta(days=5))
    dl = deadline_for("ada", "02_qkv_attention", due=DUE, last=last, policy=PER_HOUR_10, extensions=[ext])
    assert dl is not None
    assert (dl.due, dl.last, dl.extension) == (DUE + timedelta(days=5), DUE + timedelta(days=7), ext)
    assert at(dl, DUE + timedelta(days=5)).late is False
    assert "(extended)" in at(dl, DUE).rule
    # Somebody else, another assignment, or no student: the assignment's own deadline.
    for student, assignment in (("alan", "02_qkv_attention"), ("ada", "01_rnn_memory"), (None, "02_qkv_attention")):
        other = deadline_for(student, assignment, due=DUE, last=last, policy=PER_HOUR_10, extensions=[ext])
        assert other is not None and (other.due, other.last, other.extension) == (DUE, last, None)


def test_extension_extra_moves_due_and_last_in_elapsed_time() -> None:
    due = datetime(2026, 3, 7, 12, 0, tzinfo=NEW_YORK)       # a day before the clocks spring forward
    last = datetime(2026, 3, 7, 18, 0, tzinfo=NEW_YORK)
    ext = Extension(student="ada", assignment="01_rnn_memory", extra=timedelta(days=1))
    dl = deadline_for("ada", "01_rnn_memory", due=due, last=last, policy=PER_HOUR_10, extensions=[ext])
    assert dl is not None
    assert dl.due.astimezone(timezone.utc) - due.astimezone(timezone.utc) == timedelta(hours=24)
    assert dl.due.hour == 13                                  # 24 real hours later the wall clock shows 13:00
    assert dl.last is not None
    assert dl.last.astimezone(timezone.utc) - last.astimezone(timezone.utc) == timedelta(hours=24)


def test_extension_last_moves_by_the_same_amount() -> None:
    last = DUE + timedelta(hours=1)
    ext = Extension(student="ada", assignment="01_rnn_memory", due=DUE + timedelta(days=2))
    dl = deadline_for("ada", "01_rnn_memory", due=DUE, last=last, policy=PER_HOUR_10, extensions=[ext])
    assert dl is not None and dl.last == DUE + timedelta(days=2, hours=1)    # the 1-hour window is kept
    assert at(dl, DUE + timedelta(days=2, minutes=30)).accepted is True
    assert at(dl, DUE + timedelta(days=2, hours=1, seconds=1)).accepted is False
    # A new due date in another zone: the shift is real elapsed time.
    ext = Extension(student="ada", assignment="01_rnn_memory", due=datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc))
    dl = deadline_for("ada", "01_rnn_memory", due=DUE, last=last, policy=PER_HOUR_10, extensions=[ext])
    assert dl is not None and dl.last == DUE + timedelta(hours=9)            # due moved +8 h, so did last
    # An earlier date (an exam trip) moves the window earlier too.
    earlier = Extension(student="ada", assignment="01_rnn_memory", due=DUE - timedelta(hours=2))
    dl = deadline_for("ada", "01_rnn_memory", due=DUE, last=last, policy=PER_HOUR_10, extensions=[earlier])
    assert dl is not None and dl.last == DUE - timedelta(hours=1)


def test_extension_duplicates_in_a_list_are_refused() -> None:
    ext = Extension(student="ada", assignment="01_rnn_memory", extra=timedelta(days=1))
    with pytest.raises(ValueError, match="2 extensions"):
        deadline_for("ada", "01_rnn_memory", due=DUE, last=None, policy=PER_HOUR_10, extensions=[ext, ext])


def test_extension_model_validation() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        Extension(student="ada", assignment="01_rnn_memory")
    with pytest.raises(ValidationError, match="exactly one"):
        Extension(student="ada", assignment="01_rnn_memory", due=DUE, extra=timedelta(days=1))
    with pytest.raises(ValidationError, match="time zone"):
        Extension(student="ada", assignment="01_rnn_memory", due=datetime(2026, 12, 1, 10, 0))
    with pytest.raises(ValidationError, match="positive"):
        Extension(student="ada", assignment="01_rnn_memory", extra=timedelta(0))


def test_load_extensions_csv(tmp_path: Path) -> None:
    path = write(tmp_path / "extensions.csv", "\ufeffstudent,assignment,due,extra,reason\n"
                 "ada,02_qkv_attention,2026-12-05T10:00+08:00,,medical\n"
                 "\n"
                 "alan,02_qkv_attention,,3d,\n"
                 "grace,01_rnn_memory,2026-12-05 23:59,,\"travel, visa\"\n")
    got = load_extensions(path, assignments=ASSIGNMENTS, students={"ada", "alan", "grace"},
                          default_tz="Asia/Shanghai")
    assert [(e.student, e.assignment, e.extra, e.reason) for e in got] == [
        ("ada", "02_qkv_attention", None, "medical"),
        ("alan", "02_qkv_attention", timedelta(days=3), ""),
        ("grace", "01_rnn_memory", None, "travel, visa"),
    ]
    assert got[0].due == datetime(2026, 12, 5, 2, 0, tzinfo=timezone.utc)
    assert got[2].due == datetime(2026, 12, 5, 23, 59, tzinfo=SHANGHAI)


def test_load_extensions_yaml(tmp_path: Path) -> None:
    path = write(tmp_path / "extensions.yml", "- student: ada\n  assignment: 02_qkv_attention\n"
                 "  due: 2026-12-05T10:00:00+08:00\n  reason: medical\n"
                 "- {student: alan, assignment: 01_rnn_memory, extra: 36h}\n")
    got = load_extensions(path, assignments=ASSIGNMENTS)
    assert [(e.student, e.extra) for e in got] == [("ada", None), ("alan", timedelta(hours=36))]
    assert got[0].due == datetime(2026, 12, 5, 2, 0, tzinfo=timezone.utc)


def test_load_extensions_missing_or_empty(tmp_path: Path) -> None:
    assert load_extensions(tmp_path / "extensions.csv", assignments=ASSIGNMENTS) == []
    assert load_extensions(write(tmp_path / "extensions.yaml", ""), assignments=ASSIGNMENTS) == []
    assert load_extensions(write(tmp_path / "e.csv", "student,assignment,due,extra,reason\n"),
                           assignments=ASSIGNMENTS) == []


HEADER = "student,assignment,due,extra,reason\n"
GOOD_ROW = "ada,01_rnn_memory,,2d,\n"


@pytest.mark.parametrize(("row", "needle"), [
    ("ada,03_transformer,,2d,\n", "row 2 (ada, 03_transformer): assignment: '03_transformer' is not an assignment "
                                  "of the course (known: 01_rnn_memory, 02_qkv_attention)"),
    ("bob,02_qkv_attention,,2d,\n", "row 2 (bob, 02_qkv_attention): student: 'bob' is not on the roster "
                                    "(2 students seen: ada, alan)"),
    ("alan,02_qkv_attention,2026-12-05T10:00+08:00,2d,\n", "row 2 (alan, 02_qkv_attention): due and extra both"),
    ("alan,02_qkv_attention,,,\n", "row 2 (alan, 02_qkv_attention): neither due nor extra"),
    ("alan,02_qkv_attention,2026-12-01 10:00,,\n",
     "row 2 (alan, 02_qkv_attention): due: '2026-12-01 10:00' has no time zone (write 2026-12-01T10:00+08:00)"),
    ("alan,02_qkv_attention,,two days,\n", "row 2 (alan, 02_qkv_attention): extra: 'two days' is not a duration"),
    ("alan,02_qkv_attention,,0h,\n", "row 2 (alan, 02_qkv_attention): extra: '0h' is not a positive duration"),
    ("ada,01_rnn_memory,2026-12-09T10:00+08:00,,\n",
     "row 2 (ada, 01_rnn_memory): a second extension for ada on 01_rnn_memory (the first is row 1)"),
    (",01_rnn_memory,,2d,\n", "row 2 (?, 01_rnn_memory): student: empty"),
    ("alan,01_rnn_memory,,2d,,extra\n", "row 2: 6 values for 5 columns"),
])
def test_load_extensions_csv_errors(tmp_path: Path, row: str, needle: str) -> None:
    path = write(tmp_path / "extensions.csv", HEADER + GOOD_ROW + row)
    with pytest.raises(ConfigError) as info:
        load_extensions(path, assignments=ASSIGNMENTS, students={"ada", "alan"})
    assert info.value.message.startswith("extensions.csv, ")
    assert needle in info.value.message
    assert "\n" not in info.value.message


def test_load_extensions_bad_header(tmp_path: Path) -> None:
    path = write(tmp_path / "extensions.csv", "studnet,assignment,due\nada,01_rnn_memory,2026-12-05T10:00Z\n")
    with pytest.raises(ConfigError, match=r"^extensions\.csv, header: unknown column 'studnet'") as info:
        load_extensions(path, assignments=ASSIGNMENTS)
    assert info.value.hint == "did you mean student?"


def test_load_extensions_yaml_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "extensions.yaml", "- {student: ada, assignment: 01_rnn_memory, extra: 2d}\n"
                 "- {student: ada, assignment: 01_rnn_memory, extra: 3}\n")
    with pytest.raises(ConfigError, match=r"^extensions\.yaml, row 2 \(ada, 01_rnn_memory\): extra: '3' is not a "
                                          r"duration: give it a unit"):
        load_extensions(path, assignments=ASSIGNMENTS)
    path = write(tmp_path / "extensions.yaml", "- {student: ada, assignment: 01_rnn_memory, extra: 2d, why: ill}\n")
    with pytest.raises(ConfigError, match=r"^extensions\.yaml, row 1: unknown key 'why'"):
        load_extensions(path, assignments=ASSIGNMENTS)
    path = write(tmp_path / "extensions.yaml", "student: ada\n")
    with pytest.raises(ConfigError, match=r"^extensions\.yaml: expected a list"):
        load_extensions(path, assignments=ASSIGNMENTS)


def test_load_extensions_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^extensions\.txt: an extensions file is \.csv, \.yml or \.yaml"):
        load_extensions(write(tmp_path / "extensions.txt", HEADER), assignments=ASSIGNMENTS)


def test_loaded_extension_end_to_end(tmp_path: Path) -> None:
    path = write(tmp_path / "extensions.csv", HEADER + "ada,02_qkv_attention,,1d,\n")
    extensions = load_extensions(path, assignments=ASSIGNMENTS)
    dl = deadline_for("ada", "02_qkv_attention", due=DUE, last=DUE + timedelta(hours=12), policy=PER_HOUR_10,
                      extensions=extensions)
    assert dl is not None
    assert at(dl, DUE + timedelta(hours=20)).late is False            # before the new due: on time
    result = at(dl, DUE + timedelta(days=1, hours=10))                # 10 h late, inside the moved window
    assert (result.accepted, result.penalty, result.final) == (True, 10.0, 0.0)
    assert at(dl, DUE + timedelta(days=1, hours=12, seconds=1)).accepted is False


# --- custom policies ---------------------------------------------------------------------------------------------

CUSTOM = LatePolicy(kind="custom", function="late_policy:penalty", floor=1)


def custom_course(tmp_path: Path, body: str) -> Path:
    write(tmp_path / "late_policy.py", body)
    return tmp_path


def test_custom_policy_works(tmp_path: Path) -> None:
    root = custom_course(tmp_path, "import math\n\n"
                         "def penalty(*, raw, max_points, seconds_late, due, submitted):\n"
                         "    assert due.utcoffset() is not None\n"
                         "    return 0.5 * math.ceil(seconds_late / 60)   # half a point per started minute\n")
    result = at(deadline(CUSTOM), DUE + timedelta(minutes=3, seconds=1), raw=8, course_root=root)
    assert (result.late, result.penalty, result.final) == (True, 2.0, 6.0)
    assert "late_policy:penalty" in result.rule
    limited = at(deadline(CUSTOM), DUE + timedelta(hours=1), raw=8, course_root=root)   # -30, floor 1
    assert (limited.penalty, limited.final) == (7.0, 1.0)
    on_time = at(deadline(CUSTOM), DUE, raw=8, course_root=root)
    assert (on_time.late, on_time.final) == (False, 8.0)


def test_custom_policy_with_late_marker(tmp_path: Path) -> None:
    root = custom_course(tmp_path, "def penalty(*, raw, max_points, seconds_late, due, submitted):\n"
                         "    return 4.0 if submitted is None and seconds_late == 1.0 else 99.0\n")
    result = at(deadline(CUSTOM), None, late_marker=True, unknown_late="late_unknown", course_root=root)
    assert (result.late, result.penalty, result.final) == (True, 4.0, 6.0)


@pytest.mark.parametrize(("returns", "needle"), [
    ("raise RuntimeError('boom')", "raised RuntimeError: boom"),
    ("return 'x'", "returned str 'x', not a number"),
    ("return float('nan')", "returned NaN"),
    ("return -1", "returned -1: a penalty is the points taken off"),
    ("return True", "not a number"),
])
def test_custom_policy_problems(tmp_path: Path, returns: str, needle: str) -> None:
    root = custom_course(tmp_path, f"def penalty(**kwargs):\n    {returns}\n")
    with pytest.raises(ConfigError) as info:
        at(deadline(CUSTOM), DUE + timedelta(hours=1), course_root=root)
    message = info.value.message
    assert message.startswith("late policy 'late_policy:penalty' (late_policy.py): ")
    assert needle in message
    assert "\n" not in message


def test_custom_policy_file_problems(tmp_path: Path) -> None:
    late = DUE + timedelta(hours=1)
    with pytest.raises(ConfigError, match=r"no file late_policy\.py"):
        at(deadline(CUSTOM), late, course_root=tmp_path)
    with pytest.raises(ConfigError, match="course folder is not known"):
        at(deadline(CUSTOM), late, course_root=None)
    custom_course(tmp_path, "def penalize(**kwargs):\n    return 1\n")
    with pytest.raises(ConfigError, match="has no function 'penalty'"):
        at(deadline(CUSTOM), late, course_root=tmp_path)
    other = tmp_path / "broken"
    other.mkdir()
    custom_course(other, "def penalty(**kwargs)\n    return 1\n")
    with pytest.raises(ConfigError, match=r"importing late_policy\.py failed: SyntaxError"):
        at(deadline(CUSTOM), late, course_root=other)


def test_custom_module_name(tmp_path: Path) -> None:
    root = custom_course(tmp_path, "def penalty(**kwargs):\n    return float(__name__ == "
                                   "'autograder_course_late_late_policy')\n")
    assert at(deadline(CUSTOM), DUE + timedelta(seconds=5), course_root=root).penalty == 1.0


def test_results_are_finite_numbers() -> None:
    result = at(deadline(PER_HOUR_10), DUE + timedelta(minutes=1))
    assert all(math.isfinite(x) for x in (result.penalty, result.final))
    assert isinstance(result.penalty, float) and isinstance(result.final, float)
