"""autograder.course.clock: the one reader of times, zones and durations, and the one daylight-saving rule; and the
service's time columns (UTCDateTime), which store UTC and give back aware UTC times on SQLite and PostgreSQL."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from autograder.course import clock
from autograder.course.clock import BadTime, as_utc, offset_text, parse_duration, parse_time, place, read_time, zone
from autograder.course.config import load_course
from autograder.core.errors import ConfigError

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
PLUS_8 = timezone(timedelta(hours=8))


# --- zones -------------------------------------------------------------------------------------------------------


def test_zone_names_an_iana_zone_and_none_is_utc() -> None:
    assert zone(None) is UTC
    assert zone("Europe/Berlin") == BERLIN
    assert zone("UTC").utcoffset(datetime(2026, 1, 1)) == timedelta(0)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "/etc/localtime", "Europe", "utc",
                                  "Asia/Shanghai\x1b[2J"])
def test_a_bad_zone_name_is_one_line_naming_where(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        zone(name, where="course.yml, timezone")
    message = info.value.message
    assert message.startswith("course.yml, timezone: time zone '") and "is not an IANA time zone name" in message
    assert "\n" not in message and "\x1b" not in message


def test_the_course_zone_is_its_timezone_or_utc() -> None:
    course = load_course()
    assert course.model_copy(update={"timezone": None}).zone is UTC
    assert course.model_copy(update={"timezone": "Europe/Berlin"}).zone == BERLIN


# --- ISO 8601 text -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-01T10:00+08:00", datetime(2026, 12, 1, 10, 0, tzinfo=PLUS_8)),
    ("2026-12-01 10:00:05+0800", datetime(2026, 12, 1, 10, 0, 5, tzinfo=PLUS_8)),
    ("2026-12-01T10:00+08", datetime(2026, 12, 1, 10, 0, tzinfo=PLUS_8)),
    ("2026-12-01T02:00Z", datetime(2026, 12, 1, 2, 0, tzinfo=UTC)),
    ("2026-12-01 09:15:02.123456789 UTC", datetime(2026, 12, 1, 9, 15, 2, 123456, tzinfo=UTC)),   # cut to µs
    ("  2026-12-01 09:15:02,5 GMT\n", datetime(2026, 12, 1, 9, 15, 2, 500000, tzinfo=UTC)),
    ("2026-12-01T09:15:02-05:00", datetime(2026, 12, 1, 9, 15, 2, tzinfo=timezone(timedelta(hours=-5)))),
])
def test_read_time_with_an_offset_is_aware_with_that_offset(text: str, expected: datetime) -> None:
    got = read_time(text)
    assert got == expected and got.utcoffset() == expected.utcoffset()


def test_read_time_without_an_offset_is_naive() -> None:
    got = read_time("2026-12-01 10:00")
    assert got == datetime(2026, 12, 1, 10, 0) and got.tzinfo is None


@pytest.mark.parametrize(("text", "words"), [
    ("2026-12-01", "has no time of day"),
    ("tomorrow", "is not an ISO 8601 date and time"),
    ("1733044502", "is not an ISO 8601 date and time"),
    ("٢٠٢٦-12-01 09:15:02 UTC", "is not an ISO 8601 date and time"),
    ("2026-12-01 09:15:02 CST", "names the zone 'CST'"),
    ("2026-12-01T09:15:02+08:75", "invalid UTC offset"),
    ("2026-12-01T09:15:02+19:00", "beyond 18 hours"),
    ("2026-02-30T09:15Z", "is not a valid date and time"),
    ("2026-12-01T25:00Z", "is not a valid date and time"),
    ("0001-01-01T00:00:00+05:00", "is not a valid date and time"),       # before year 1 in UTC
    ("\x1b[2J2026-12-01T10:00Z", "is not an ISO 8601"),
])
def test_read_time_refuses_what_is_no_moment(text: str, words: str) -> None:
    with pytest.raises(BadTime) as info:
        read_time(text)
    message = str(info.value)
    assert words in message, message
    assert "\n" not in message and "\x1b" not in message


# --- the daylight-saving rule ------------------------------------------------------------------------------------


def test_a_wall_clock_time_outside_a_change_is_placed_in_its_zone() -> None:
    winter, summer = place(datetime(2026, 12, 1, 9, 0), BERLIN), place(datetime(2026, 7, 1, 9, 0), BERLIN)
    assert (winter.utcoffset(), summer.utcoffset()) == (timedelta(hours=1), timedelta(hours=2))
    assert as_utc(winter) == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_a_time_the_clocks_skip_is_refused_with_the_real_time_to_write() -> None:
    # Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 is never shown.
    with pytest.raises(BadTime) as info:
        place(datetime(2026, 3, 29, 2, 30), BERLIN, shown="2026-03-29 02:30")
    message = str(info.value)
    assert message.startswith("'2026-03-29 02:30' does not exist in Europe/Berlin")
    assert "2026-03-29T03:30+02:00" in message


def test_a_time_the_clocks_show_twice_is_refused_with_both_offsets() -> None:
    # Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 is shown twice.
    with pytest.raises(BadTime) as info:
        place(datetime(2026, 10, 25, 2, 30), BERLIN)
    message = str(info.value)
    assert "is ambiguous in Europe/Berlin" in message and "twice" in message
    assert "2026-10-25T02:30+02:00 (the first)" in message and "2026-10-25T02:30+01:00 (the second)" in message


def test_a_time_past_the_calendar_in_utc_cannot_be_placed() -> None:
    with pytest.raises(BadTime, match="cannot be placed in America/New_York"):
        place(datetime(9999, 12, 31, 23, 30), NEW_YORK)


def test_parse_time_applies_the_one_rule_and_names_where() -> None:
    where = "course.yml, assignment 01: due"
    with pytest.raises(ConfigError) as info:
        parse_time("2026-03-08T02:30", where=where, default_tz="America/New_York")
    assert info.value.message.startswith(f"{where}: '2026-03-08T02:30' does not exist in America/New_York")
    with pytest.raises(ConfigError, match="ambiguous in America/New_York"):
        parse_time("2026-11-01 01:30", where=where, default_tz="America/New_York")
    with pytest.raises(ConfigError, match=r"^w: time zone 'Mars/Olympus' is not an IANA time zone"):
        parse_time("2026-12-01 10:00", where="w", default_tz="Mars/Olympus")
    # an offset in the text wins, even over the change's hour
    assert parse_time("2026-03-08T02:30-05:00", where=where, default_tz="America/New_York") == datetime(
        2026, 3, 8, 7, 30, tzinfo=UTC)


def test_parse_time_reads_yaml_values_and_refuses_a_date_alone() -> None:
    assert parse_time(datetime(2026, 12, 1, 10, 0), where="w", default_tz="Asia/Shanghai") == datetime(
        2026, 12, 1, 2, 0, tzinfo=UTC)
    with pytest.raises(ConfigError, match="has no time of day") as info:
        parse_time(date(2026, 12, 1), where="w")
    assert info.value.hint is not None and "start or the end" in info.value.hint
    with pytest.raises(ConfigError, match="^w: '2026-12-01' has no time of day"):
        parse_time("2026-12-01", where="w", default_tz="UTC")
    with pytest.raises(ConfigError, match="expected a date and time"):
        parse_time(20261201, where="w")  # type: ignore[arg-type]


# --- naive means UTC, offsets, durations -------------------------------------------------------------------------


def test_as_utc_takes_naive_as_utc_and_moves_aware_to_utc() -> None:
    naive = datetime(2026, 12, 1, 10, 0)
    assert as_utc(naive) == datetime(2026, 12, 1, 10, 0, tzinfo=UTC) and as_utc(naive).tzinfo is UTC
    shanghai = datetime(2026, 12, 1, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    moved = as_utc(shanghai)
    assert moved == shanghai and moved.tzinfo is UTC and moved.hour == 2


def test_offset_text() -> None:
    assert [offset_text(timedelta(hours=h, minutes=m)) for h, m in ((8, 0), (-4, 0), (5, 30), (0, 0))] == [
        "+08:00", "-04:00", "+05:30", "+00:00"]


def test_durations_are_elapsed_time_and_months_are_refused() -> None:
    assert parse_duration("1w 2d", where="w") == timedelta(days=9)
    assert parse_duration("P1DT1H30M", where="w") == timedelta(hours=25, minutes=30)
    with pytest.raises(ConfigError, match="months and years have no fixed length"):
        parse_duration("P1M", where="w")


def test_the_kit_has_one_time_parser() -> None:
    """clock holds the one parser; lateness, times and deadlines keep none of their own, nor a re-export."""
    from autograder.course import lateness
    from autograder.grading import times, times_csv

    assert not hasattr(lateness, "parse_time") and times.clock is clock and times_csv.clock is clock
    for module in (times, times_csv, lateness):
        assert not hasattr(module, "_TIME") and not hasattr(module, "_localize") and not hasattr(module, "_in_zone")


# --- the service's time columns ----------------------------------------------------------------------------------


@pytest.fixture
def engine(service_engine):
    return service_engine


def test_utc_datetime_stores_the_moment_and_gives_back_aware_utc(engine) -> None:
    from sqlalchemy import select

    from autograder.service import repository, tables

    due = datetime(2026, 12, 1, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai"))       # 02:00 UTC
    repository.grant_extension(engine, student="ada", assignment="02", due=due, reason="ill", granted_by="tim")
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":     # the server's session zone must not matter
            conn.exec_driver_sql("SET TIME ZONE 'America/New_York'")
        got, granted = conn.execute(select(tables.ExtensionGrant.due, tables.ExtensionGrant.granted_at)).one()
        assert got == due and got.tzinfo is UTC and got.hour == 2
        assert granted.tzinfo is UTC and abs(datetime.now(UTC) - granted) < timedelta(minutes=5)
        # compared as moments: 02:00 UTC is after 09:30 +08:00 (01:30 UTC), before 10:30 +08:00
        earlier, later = datetime(2026, 12, 1, 9, 30, tzinfo=PLUS_8), datetime(2026, 12, 1, 10, 30, tzinfo=PLUS_8)
        assert conn.execute(select(tables.ExtensionGrant.id).where(tables.ExtensionGrant.due > earlier)).all() != []
        assert conn.execute(select(tables.ExtensionGrant.id).where(tables.ExtensionGrant.due > later)).all() == []
        if engine.dialect.name == "sqlite":          # the text SQLite keeps is UTC's wall clock
            assert conn.exec_driver_sql("SELECT due FROM extensions").scalar() == "2026-12-01 02:00:00.000000"
    [extension] = tables.granted_extensions(engine)
    assert extension.due == due and extension.due.utcoffset() == timedelta(0)


def test_utc_datetime_takes_a_naive_time_as_utc(engine) -> None:
    from sqlalchemy import insert, select

    from autograder.service import db, tables

    with db.writing(engine).begin() as conn:
        conn.execute(insert(tables.WebSession).values(digest="d", role="student", who="ada", csrf="c",
                                                  expires_at=datetime(2026, 12, 1, 10, 0)))
    with engine.connect() as conn:
        expires, created = conn.execute(select(tables.WebSession.expires_at, tables.WebSession.created_at)).one()
    assert expires == datetime(2026, 12, 1, 10, 0, tzinfo=UTC) and expires.tzinfo is UTC
    assert created.tzinfo is UTC
