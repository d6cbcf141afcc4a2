"""Times and time zones, read one way everywhere: IANA zone names, ISO 8601 text, durations, and the one rule
for a wall-clock time that a daylight-saving change skips or repeats.

A foundation module: it imports nothing of the kit but its errors and its text cleaning, so that course.yml's
reader (and the student bundle with it) can use it. Nothing here reads the clock.

* :func:`zone`: an IANA name (``Asia/Shanghai``) to its time zone; UTC when there is no name.
* :func:`read_time`: ISO 8601 text to a datetime, aware when the text names an offset (``+08:00``, ``Z``,
  ``UTC``, ``GMT``), naive when it names none; :class:`BadTime` (one line quoting the text) otherwise.
* :func:`place`: a naive wall-clock time read in a zone. A reading the clocks skip (02:30 on the night
  daylight saving begins) or show twice (01:30 on the night it ends) is refused, with the offset(s) to write:
  a deadline or a submission time is never guessed.
* :func:`parse_time`: both, for course.yml, an extensions file, ``--as-of`` or a times CSV: an aware
  datetime, or a :class:`~autograder.core.errors.ConfigError` naming where the text came from.
* :func:`parse_duration`: ``3d``, ``36h``, ``2d12h``, ``P2DT12H``: elapsed time (a day is 24 hours).
* :func:`as_utc`: any datetime in UTC, a naive one taken as UTC already (what SQLite and nbgrader store).
* :func:`readable`: a moment as people read it, the one format of every page, feedback, report and message:
  ``2026-12-10 23:59 +08:00``, the wall-clock time in the course's zone with its UTC offset.

Time is compared and subtracted as real elapsed time, in UTC: Python compares and subtracts two datetimes
that share one ``tzinfo`` by their wall-clock readings, which is wrong across a daylight-saving change (01:30
to 03:30 in New York on 2026-03-08 is one hour, not two).
"""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.core.errors import ConfigError
from autograder.core.text import line

__all__ = ["UTC", "BadTime", "as_utc", "offset_text", "parse_duration", "parse_time", "place", "read_time", "readable",
           "zone"]

UTC = timezone.utc

#: How much of a bad value a message quotes.
_QUOTE_CHARS = 60
#: No zone on Earth is further than +14:00 from UTC; ISO 8601 parsers commonly allow up to 18 hours.
_MAX_OFFSET = timedelta(hours=18)
#: Zone names that mean UTC unambiguously. Other abbreviations (CST: China, Cuba or US Central) are refused.
_UTC_NAMES = frozenset({"UTC", "GMT", "Z"})
#: ``YYYY-MM-DD``, then ``T`` or a space, ``HH:MM[:SS[.fraction]]`` (a fraction of up to nine digits, cut to
#: microseconds), then an optional zone: ``Z``, a numeric offset (``+08:00``, ``+0800``, ``+08``) or a name
#: (checked apart). ASCII digits only: ``\d`` would take any Unicode digit, which nobody writes in a time.
_TIME = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[Tt ]"
    r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]{1,9}))?)?"
    r"(?:\s*(?P<zone>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?|[A-Za-z][A-Za-z0-9_/+:-]{0,40}))?",
    re.ASCII,
)
_OFFSET = re.compile(r"(?P<sign>[+-])(?P<h>[0-9]{2})(?::?(?P<m>[0-9]{2}))?", re.ASCII)
_DATE_ONLY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_DATE_ONLY_HINT = "a date alone is ambiguous: is it the start or the end of the day?"
#: '3d', '36h', '90m', '2d12h', '1w', '45s', '1.5d' (each unit at most once, largest first; spaces allowed).
_SHORT_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)\s*w)?\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*"
                             r"(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)\s*s)?$", re.IGNORECASE)
_ISO_DURATION = re.compile(r"^P(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T"
                           r"(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$", re.IGNORECASE)
_DURATION_HELP = "write 3d, 36h, 90m, 2d12h or P2DT12H"


class BadTime(ValueError):
    """Text that is not a usable time: the message is one line that quotes the text and says why; ``hint``
    (or None) says more."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def _quote(value: str) -> str:
    """A value, quoted for a one-line message (cleaned of control characters and cut)."""
    return "'" + line(value, _QUOTE_CHARS) + "'"


# --- zones ---------------------------------------------------------------------------------------------------


def zone(name: str | None, *, where: str | None = None) -> tzinfo:
    """The time zone an IANA name (``Asia/Shanghai``, ``UTC``) names; UTC when ``name`` is None. Any other
    name is a ConfigError (prefixed with ``where`` when given): never a guess, never a path on this machine."""
    if name is None:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}time zone {_quote(str(name))} is not an IANA time zone name (e.g. Asia/Shanghai, "
                          f"Europe/Berlin, America/New_York)",
                          hint="the names of the tz database, Area/City, are case-sensitive; UTC for none") from None


def _zone_name(where: tzinfo) -> str:
    return str(getattr(where, "key", None) or where)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC, the one form in which comparing and subtracting datetimes is real elapsed time. A naive
    value is taken as UTC already: what SQLite gives back of a stored time, what nbgrader writes."""
    return value.replace(tzinfo=UTC) if value.utcoffset() is None else value.astimezone(UTC)


def offset_text(delta: timedelta) -> str:
    """A UTC offset as ISO 8601 writes it: ``+08:00``, ``-04:00``."""
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def readable(value: datetime, where: tzinfo | None = None) -> str:
    """A moment as people read it, one format everywhere (pages, feedback, the class report, late rules):
    ``2026-12-10 23:59 +08:00``, the wall-clock time in the zone ``where`` (the course's; the value's own when
    None), to the minute (its seconds too when it has some), and the zone's UTC offset then: never an
    abbreviation (``CST``: China, Cuba or US Central), never the reader's own zone. A naive value is taken as UTC
    (:func:`as_utc`). Files for machines keep ISO 8601 (``isoformat``)."""
    shown = as_utc(value).astimezone(where) if where is not None else \
        (value if value.utcoffset() is not None else as_utc(value))
    stamp = shown.strftime("%Y-%m-%d %H:%M" + (":%S" if shown.second else ""))
    return f"{stamp} {offset_text(shown.utcoffset() or timedelta(0))}"


# --- ISO 8601 text -------------------------------------------------------------------------------------------


def read_time(text: str) -> datetime:
    """ISO 8601 text (or RFC 3339: ``T`` or a space between date and time) to a datetime: aware, with the
    offset as written, when the text names one (``+08:00``, ``+0800``, ``+08``, ``Z``, ``UTC``, ``GMT``); naive
    when it names none (:func:`place` reads it in a zone). Surrounding spaces are ignored. :class:`BadTime`
    for anything else: a date alone, an offset beyond 18 hours, a zone abbreviation other than UTC / GMT
    (``CST``: China, Cuba or US Central), a day or an hour that does not exist, a moment before year 1 in UTC.
    """
    shown = text.strip()
    quoted = _quote(shown)
    if _DATE_ONLY.fullmatch(shown):
        raise BadTime(f"{quoted} has no time of day (write {shown}T23:59+08:00)", hint=_DATE_ONLY_HINT)
    m = _TIME.fullmatch(shown)
    if m is None:
        raise BadTime(f"{quoted} is not an ISO 8601 date and time (write 2026-12-01T10:00+08:00)")
    named = m["zone"]
    tz: tzinfo | None = None
    if named is not None:
        off = _OFFSET.fullmatch(named)
        if off is not None:
            hours, minutes = int(off["h"]), int(off["m"] or 0)
            if minutes > 59:
                raise BadTime(f"{quoted} has an invalid UTC offset {_quote(named)}")
            delta = timedelta(hours=hours, minutes=minutes)
            if delta > _MAX_OFFSET:
                raise BadTime(f"{quoted} has a UTC offset {_quote(named)} beyond 18 hours")
            tz = timezone(-delta if off["sign"] == "-" else delta)
        elif named.upper() in _UTC_NAMES:
            tz = UTC
        else:
            raise BadTime(f"{quoted} names the zone {_quote(named)}, which is not UTC or GMT and may be ambiguous; "
                          f"write a numeric offset such as +08:00")
    fraction = (m["f"] or "")[:6].ljust(6, "0")
    try:
        value = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"] or 0),
                         int(fraction), tzinfo=tz)
        if tz is not None:
            value.astimezone(UTC)       # its moment must exist (0001-01-01T00:00+05:00 is before year 1 in UTC)
    except (ValueError, OverflowError) as exc:
        raise BadTime(f"{quoted} is not a valid date and time ({line(str(exc), _QUOTE_CHARS)})") from None
    return value


def place(naive: datetime, where: tzinfo, *, shown: str | None = None) -> datetime:
    """``naive`` read as a wall-clock time in the zone ``where``: aware, in that zone.

    The one daylight-saving rule: a reading the clocks skip (they jump from 02:00 to 03:00) does not exist,
    and one they show twice (they go back from 02:00 to 01:00) is ambiguous; either is a :class:`BadTime`
    that says which and gives the offset(s) to write, so that a deadline or a submission time is never a
    guess. ``shown`` is the text quoted (the value's own ISO form when None)."""
    quoted = _quote(shown if shown is not None else naive.isoformat())
    name = _zone_name(where)
    first, second = naive.replace(tzinfo=where, fold=0), naive.replace(tzinfo=where, fold=1)
    try:
        off1, off2 = first.utcoffset(), second.utcoffset()
        real = first.astimezone(UTC).astimezone(where)
    except (ValueError, OverflowError) as exc:
        raise BadTime(f"{quoted} cannot be placed in {name} ({line(str(exc), _QUOTE_CHARS)})") from None
    if off1 is None or off2 is None or off1 == off2:
        return first
    if real.replace(tzinfo=None) != naive:      # in the gap: the clocks jumped over this reading
        suggestion = real.replace(tzinfo=None).isoformat(timespec="minutes") + offset_text(real.utcoffset() or off2)
        raise BadTime(f"{quoted} does not exist in {name} (the clocks skip it at the daylight-saving change); "
                      f"write the time with its offset, e.g. {suggestion}")
    stamp = naive.isoformat(timespec="seconds" if naive.second or naive.microsecond else "minutes")
    raise BadTime(f"{quoted} is ambiguous in {name} (the clocks show it twice at the daylight-saving change); "
                  f"write the offset: {stamp}{offset_text(off1)} (the first) or {stamp}{offset_text(off2)} "
                  f"(the second)")


def parse_time(text: str | datetime, *, where: str, default_tz: str | None = None) -> datetime:
    """ISO 8601 (also 'YYYY-MM-DD HH:MM[:SS]') to an aware datetime (:func:`read_time`). Text without an
    offset is read in ``default_tz`` (an IANA name such as 'Asia/Shanghai') by :func:`place` when given, else is
    a ConfigError naming ``where``; so is every other problem (a time the DST change skips or repeats: which,
    and the offset to write).

    A datetime (YAML reads unquoted timestamps as one) is taken as it is when aware, like text without an offset
    when naive. A date alone is an error: a deadline needs a time of day (is "2026-12-01" its start or its end?).
    """
    if isinstance(text, datetime):
        naive, shown = text, str(text)
        if text.utcoffset() is not None:
            return text
    elif isinstance(text, date):
        raise ConfigError(f"{where}: {text.isoformat()!r} has no time of day (write {text.isoformat()}T23:59+08:00)",
                          hint=_DATE_ONLY_HINT)
    elif isinstance(text, str):
        shown = text.strip()
        try:
            naive = read_time(shown)
        except BadTime as exc:
            raise ConfigError(f"{where}: {exc}", hint=exc.hint) from None
        if naive.utcoffset() is not None:
            return naive
    else:
        raise ConfigError(f"{where}: expected a date and time such as 2026-12-01T10:00+08:00, "
                          f"got {type(text).__name__} {line(repr(text), _QUOTE_CHARS)}")
    if default_tz is None:
        example = naive.isoformat(timespec="seconds" if naive.second or naive.microsecond else "minutes")
        raise ConfigError(f"{where}: {_quote(shown)} has no time zone (write {example}+08:00)",
                          hint="+08:00 is China's offset: write the one of your time zone (e.g. -05:00 for "
                               "New York in winter), or give the course a default time zone")
    try:
        return place(naive, zone(default_tz, where=where), shown=shown)
    except BadTime as exc:
        raise ConfigError(f"{where}: {exc}", hint=exc.hint) from None


# --- durations -----------------------------------------------------------------------------------------------


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


def time_or_after(text: str, base: datetime, *, where: str, default_tz: str | None = None) -> datetime:
    """A moment given as a time (:func:`parse_time`) or as a duration after ``base`` ('3d', 'P2DT12H':
    :func:`parse_duration`): an extension of three days past the due date, a token for thirty days from now."""
    shown = str(text).strip()
    if re.fullmatch(r"[+]?\s*(P.+|[\d.,]+\s*[wdhms].*)", shown, flags=re.IGNORECASE) and not re.match(r"\d{4}-", shown):
        return as_utc(base) + parse_duration(shown.lstrip("+").strip(), where=where)
    try:
        return parse_time(shown, where=where, default_tz=default_tz)
    except ConfigError:
        raise ConfigError(f"{where}: {shown[:60]!r} is neither a time (2026-12-01T10:00+08:00, or 2026-12-01 10:00 "
                          f"in the course's zone) nor a duration ({_DURATION_HELP})") from None
