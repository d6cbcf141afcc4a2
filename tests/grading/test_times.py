"""autograder.grading.times and times_csv: submission times from what an LMS recorded (nbgrader, Gradescope,
Canvas, a CSV export), never from file or zip times. Hostile or malformed input gives a one-line problem and an
unknown time, never a crash and never a guess; the instructor's CSV raises ConfigError instead."""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from autograder.core.errors import ConfigError
from autograder.grading import times as T
from autograder.grading.times import NONE, SubmittedAt, best, canvas_late_marker
from autograder.grading.times_csv import load_times_csv

UTC = timezone.utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def assert_problem(result: SubmittedAt, path: Path, *words: str) -> None:
    """An unreadable source: no time, a one-line problem naming the file (and the given words)."""
    assert result.when is None and result.due is None and result.last is None
    assert result.problem is not None
    assert "\n" not in result.problem and "\r" not in result.problem
    assert str(path) in result.problem
    for word in words:
        assert word in result.problem, result.problem


class CountingOs:
    """Stands in for the module's ``os``: counts the bytes os.read is asked for and returns."""

    def __init__(self) -> None:
        self.asked = 0
        self.got = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def read(self, fd: int, n: int) -> bytes:
        self.asked += n
        data = os.read(fd, n)
        self.got += len(data)
        return data


# -- nbgrader timestamp.txt ------------------------------------------------------------------------


class TestNbgrader:
    def test_nbgrader_own_format(self, tmp_path: Path) -> None:
        # What nbgrader's exchange writes with its default timestamp_format '%Y-%m-%d %H:%M:%S.%f %Z'.
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.123456 UTC")
        got = T.read_nbgrader_timestamp(path)
        assert got == SubmittedAt(utc(2026, 12, 1, 9, 15, 2, 123456), "nbgrader timestamp.txt")
        assert got.when is not None and got.when.utcoffset() == timedelta(0)

    def test_trailing_newline_and_gmt(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.5 GMT\n")
        assert T.read_nbgrader_timestamp(path).when == utc(2026, 12, 1, 9, 15, 2, 500000)

    def test_no_zone_is_utc(self, tmp_path: Path) -> None:
        # nbgrader's parse_utc reads a time without a zone as UTC.
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.123456")
        assert T.read_nbgrader_timestamp(path).when == utc(2026, 12, 1, 9, 15, 2, 123456)

    def test_iso_with_offset(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01T09:15:02+08:00")
        got = T.read_nbgrader_timestamp(path)
        assert got.when == utc(2026, 12, 1, 1, 15, 2)
        assert got.when is not None and got.when.tzinfo is not None
        assert got.problem is None

    def test_numeric_offset_from_percent_z(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.000001 -0500")
        assert T.read_nbgrader_timestamp(path).when == utc(2026, 12, 1, 14, 15, 2, 1)

    def test_z_suffix(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01T09:15:02Z")
        assert T.read_nbgrader_timestamp(path).when == utc(2026, 12, 1, 9, 15, 2)

    def test_missing_file_is_none(self, tmp_path: Path) -> None:
        assert T.read_nbgrader_timestamp(tmp_path / "timestamp.txt") is NONE
        assert T.read_nbgrader_timestamp(tmp_path / "no-such-folder" / "timestamp.txt") is NONE

    def test_unknown_zone_is_a_problem(self, tmp_path: Path) -> None:
        # CST: China, Cuba or US Central. Not guessed.
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.123456 CST")
        assert_problem(T.read_nbgrader_timestamp(path), path, "CST")

    def test_garbage_bytes(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", b"\xff\xfe\x00\x01\x89PNG\r\n\x1a\n")
        assert_problem(T.read_nbgrader_timestamp(path), path)

    def test_garbage_text(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "submitted on time, promise")
        assert_problem(T.read_nbgrader_timestamp(path), path, "ISO 8601")

    def test_control_characters_are_not_echoed(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "\x1b[2J\x1b]0;pwned\x07 2026")
        got = T.read_nbgrader_timestamp(path)
        assert_problem(got, path)
        assert got.problem is not None and "\x1b" not in got.problem and "\x07" not in got.problem

    def test_empty(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "  \n")
        assert_problem(T.read_nbgrader_timestamp(path), path, "empty")

    def test_two_lines(self, tmp_path: Path) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02 UTC\n2020-01-01 00:00:00 UTC\n")
        assert_problem(T.read_nbgrader_timestamp(path), path)

    @pytest.mark.parametrize("text", ["2026-02-30 09:15:02 UTC", "2026-12-01 25:00:00 UTC",
                                      "2026-12-01 23:59:60 UTC", "2026-12-01T09:15:02+25:00",
                                      "2026-12-01T09:15:02+08:75", "0001-01-01T00:00:00+05:00",
                                      "٢٠٢٦-12-01 09:15:02 UTC", "1733044502"])
    def test_invalid_values(self, tmp_path: Path, text: str) -> None:
        path = write(tmp_path / "timestamp.txt", text)
        assert_problem(T.read_nbgrader_timestamp(path), path)

    def test_huge_file_reads_at_most_200_bytes(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        # A valid time, then 10 MB: a real timestamp.txt is one short line, so this is a problem, and
        # deciding so reads no more than 200 bytes.
        path = tmp_path / "timestamp.txt"
        with path.open("wb") as fh:
            fh.write(b"2026-12-01 09:15:02.123456 UTC\n")
            fh.write(b"x" * (10 * 1000 * 1000))
        spy = CountingOs()
        monkeypatch.setattr(T, "os", spy)
        got = T.read_nbgrader_timestamp(path)
        assert_problem(got, path, "over the limit of 200")
        assert spy.asked <= 200 and spy.got <= 200

    def test_reads_at_most_200_bytes_of_a_small_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = write(tmp_path / "timestamp.txt", "2026-12-01 09:15:02.123456 UTC" + " " * 170)
        assert path.stat().st_size == 200
        spy = CountingOs()
        monkeypatch.setattr(T, "os", spy)
        assert T.read_nbgrader_timestamp(path).when == utc(2026, 12, 1, 9, 15, 2, 123456)
        assert spy.asked <= 200
        write(path, "2026-12-01 09:15:02.123456 UTC" + " " * 171)
        assert_problem(T.read_nbgrader_timestamp(path), path, "201 bytes")

    def test_symlink_is_not_followed(self, tmp_path: Path) -> None:
        real = write(tmp_path / "real.txt", "2026-12-01 09:15:02.123456 UTC")
        link = tmp_path / "timestamp.txt"
        link.symlink_to(real)
        assert_problem(T.read_nbgrader_timestamp(link), link, "symbolic link")

    def test_directory(self, tmp_path: Path) -> None:
        path = tmp_path / "timestamp.txt"
        path.mkdir()
        assert_problem(T.read_nbgrader_timestamp(path), path, "not a regular file")

    def test_fifo_does_not_hang(self, tmp_path: Path) -> None:
        path = tmp_path / "timestamp.txt"
        os.mkfifo(path)
        assert_problem(T.read_nbgrader_timestamp(path), path, "not a regular file")


# -- Gradescope submission_metadata.json -----------------------------------------------------------


def gradescope_metadata() -> dict[str, Any]:
    """A submission_metadata.json as Gradescope writes it (one student with a two-day extension)."""
    return {
        "id": 123456789,
        "created_at": "2026-12-01T10:00:00.123456-08:00",
        "assignment": {
            "due_date": "2026-12-01T23:59:00.000000-08:00",
            "group_size": None,
            "group_submission": False,
            "id": 25828,
            "course_id": 1234,
            "late_due_date": "2026-12-03T23:59:00.000000-08:00",
            "release_date": "2026-11-20T00:00:00.000000-08:00",
            "title": "02 QKV attention",
            "total_points": "20.0",
            "outline": [{"id": 1, "title": "Autograder", "weight": 20.0, "type": "OutlineQuestion"}],
        },
        "submission_method": "upload",
        "users": [
            {
                "email": "ada@example.edu",
                "id": 1234,
                "name": "Ada Lovelace",
                "assignment": {
                    "due_date": "2026-12-03T23:59:00.000000-08:00",
                    "late_due_date": None,
                    "release_date": "2026-11-20T00:00:00.000000-08:00",
                },
            }
        ],
        "previous_submissions": [
            {"submission_time": "2026-11-30T08:00:00.000000-08:00", "score": "12.0",
             "results": {"score": 12.0, "tests": []}},
        ],
    }


class TestGradescope:
    def test_user_dates_override_assignment(self, tmp_path: Path) -> None:
        path = write(tmp_path / "submission_metadata.json", json.dumps(gradescope_metadata(), indent=2))
        got = T.read_gradescope_metadata(path)
        assert got.problem is None
        assert got.source == "Gradescope submission_metadata.json"
        assert got.when == utc(2026, 12, 1, 18, 0, 0, 123456)
        assert got.due == utc(2026, 12, 4, 7, 59)       # the student's own, extension included
        assert got.last is None                         # null for this student, not the assignment's
        assert got.late_marker is False

    def test_assignment_dates_when_user_has_none(self, tmp_path: Path) -> None:
        meta = gradescope_metadata()
        del meta["users"][0]["assignment"]
        meta["assignment"]["late_due_date"] = None
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        got = T.read_gradescope_metadata(path)
        assert got.problem is None
        assert got.due == utc(2026, 12, 2, 7, 59)
        assert got.last is None

    def test_absent_late_due_date(self, tmp_path: Path) -> None:
        meta = gradescope_metadata()
        meta["users"] = []
        del meta["assignment"]["late_due_date"]
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        got = T.read_gradescope_metadata(path)
        assert got.when == utc(2026, 12, 1, 18, 0, 0, 123456)
        assert got.due == utc(2026, 12, 2, 7, 59) and got.last is None

    def test_assignment_late_due_date(self, tmp_path: Path) -> None:
        meta = gradescope_metadata()
        del meta["users"][0]["assignment"]
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        assert T.read_gradescope_metadata(path).last == utc(2026, 12, 4, 7, 59)

    def test_missing_file_is_none(self, tmp_path: Path) -> None:
        assert T.read_gradescope_metadata(tmp_path / "submission_metadata.json") is NONE

    def test_created_at_without_offset(self, tmp_path: Path) -> None:
        meta = gradescope_metadata()
        meta["created_at"] = "2026-12-01T10:00:00.123456"
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        assert_problem(T.read_gradescope_metadata(path), path, "created_at", "offset")

    def test_broken_json(self, tmp_path: Path) -> None:
        text = json.dumps(gradescope_metadata())[:-40]
        path = write(tmp_path / "submission_metadata.json", text)
        assert_problem(T.read_gradescope_metadata(path), path, "JSON")

    def test_list_instead_of_object(self, tmp_path: Path) -> None:
        path = write(tmp_path / "submission_metadata.json", json.dumps([gradescope_metadata()]))
        assert_problem(T.read_gradescope_metadata(path), path, "object", "list")

    @pytest.mark.parametrize(("edit", "field"), [
        (lambda m: m.update(created_at=1733076000), "created_at"),
        (lambda m: m.pop("created_at"), "created_at"),
        (lambda m: m.update(created_at=None), "created_at"),
        (lambda m: m.update(users="ada"), "users"),
        (lambda m: m.update(users=[42]), "users[0]"),
        (lambda m: m["users"][0].update(assignment=[]), "users[0].assignment"),
        (lambda m: m["users"][0]["assignment"].update(due_date="next friday"), "users[0].assignment.due_date"),
        (lambda m: m["users"][0]["assignment"].update(late_due_date=True), "users[0].assignment.late_due_date"),
        (lambda m: m.update(assignment="02"), "assignment"),
    ])
    def test_wrong_types_name_the_field(self, tmp_path: Path, edit: Any, field: str) -> None:
        meta = gradescope_metadata()
        edit(meta)
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        assert_problem(T.read_gradescope_metadata(path), path, f"field {field}:")

    def test_bad_assignment_date_when_user_has_none(self, tmp_path: Path) -> None:
        meta = gradescope_metadata()
        del meta["users"][0]["assignment"]
        meta["assignment"]["due_date"] = "2026-12-01T23:59:00"
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        assert_problem(T.read_gradescope_metadata(path), path, "assignment.due_date")

    @pytest.mark.parametrize("content", [b"", b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000,
                                         b'{"created_at": ' + b"9" * 5000 + b"}", b"null", b'"text"'])
    def test_hostile_content(self, tmp_path: Path, content: bytes) -> None:
        path = write(tmp_path / "submission_metadata.json", content)
        assert_problem(T.read_gradescope_metadata(path), path)

    def test_over_one_mib(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        meta = gradescope_metadata()
        meta["padding"] = "x" * (1024 * 1024)
        path = write(tmp_path / "submission_metadata.json", json.dumps(meta))
        spy = CountingOs()
        monkeypatch.setattr(T, "os", spy)
        assert_problem(T.read_gradescope_metadata(path), path, "over the limit")
        assert spy.got == 0


# -- Canvas file names -----------------------------------------------------------------------------


class TestCanvas:
    @pytest.mark.parametrize("name", [
        "ada_late_12345_67890_02_qkv_attention.ipynb",
        "ada_LATE_12345_67890_x.ipynb",
        "lovelaceada_LATE_12345_67890_02_qkv_attention-1.ipynb",   # Canvas's suffix on a resubmission
        "LATE_anon_aB3xY_67890_x.ipynb",                           # anonymous grading: no name
        "o_brienada_LATE_12345_67890_x.ipynb",                     # an underscore in the name
        "ada_late_12345_67890_late_1_2_x.ipynb",
        "downloads/submissions/ada_LATE_12345_67890_x.ipynb",       # the name's last component counts
    ])
    def test_late(self, name: str) -> None:
        got = canvas_late_marker(name)
        assert got == SubmittedAt(None, "Canvas file name (_late marker)", late_marker=True)

    @pytest.mark.parametrize("name", [
        "ada_12345_67890_x.ipynb",
        "late_night_notes.ipynb",
        "chocolate_12_34_x.ipynb",
        "ada_12345_67890_my_late_1_2_notes.ipynb",     # "_late_" inside the student's own file name
        "ada_12345_67890_late_1_2_x.ipynb",
        "ada_late_x_67890_x.ipynb",                    # no user id where Canvas writes it
        "ada_late_12345_x.ipynb",                      # no attachment id
        "ada_late_12345_67890_",                       # no file name
        "ada_Late_12345_67890_x.ipynb",                # not a case Canvas writes
        "LATE_12345_67890_x.ipynb",                    # a name-less file is anonymous: anon_<id>
        "anon_aB3xY_67890_late_1_2_x.ipynb",           # anonymous, on time, "late_" in its own name
        "anon_12345_67890_late_1_2_x.ipynb",
        "007_12345_67890_late_1_2_x.ipynb",
        "ada_12345_67890_x_late_1_2_y.ipynb",
        "ada lovelace_late_12345_67890_x.ipynb",       # Canvas's names hold no space
        "x\nada_late_12345_67890_x.ipynb",             # nor a line break
        "chocolate_late.ipynb",
        "",
    ])
    def test_not_late(self, name: str) -> None:
        assert canvas_late_marker(name) is NONE

    def test_regex_is_anchored(self) -> None:
        assert T.CANVAS_LATE.match("ada_LATE_12345_67890_x.ipynb")
        assert not T.CANVAS_LATE.search("x ada_LATE_12345_67890_x.ipynb")
        assert not T.CANVAS_LATE.search("ada_12345_67890_x_ada_LATE_1_2_x.ipynb")

    def test_long_hostile_names_are_fast(self) -> None:
        import time
        start = time.perf_counter()
        for name in ("a_" * 50_000, "a_" * 50_000 + "late_1", "a_1" * 50_000, "x" * 100_000 + "_late_1_"):
            assert canvas_late_marker(name) is NONE
        assert time.perf_counter() - start < 2.0


# -- a CSV of times --------------------------------------------------------------------------------


class TestTimesCsv:
    def test_with_assignment_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     "\ufeffStudent,Assignment,Submitted_At\r\n"
                     "ada,02_qkv_attention,2026-12-01T09:15:02+08:00\r\n"
                     "ada,03_transformer,2026-12-08T23:59:59.5Z\r\n"
                     "\r\n"
                     "grace,02_qkv_attention,2026-12-01 10:00:00+00:00\r\n"
                     "linus,02_qkv_attention,\r\n")
        got = load_times_csv(path)
        assert got == {
            ("ada", "02_qkv_attention"): SubmittedAt(utc(2026, 12, 1, 1, 15, 2), "times CSV times.csv row 1"),
            ("ada", "03_transformer"): SubmittedAt(utc(2026, 12, 8, 23, 59, 59, 500000), "times CSV times.csv row 2"),
            ("grace", "02_qkv_attention"): SubmittedAt(utc(2026, 12, 1, 10), "times CSV times.csv row 3"),
            ("linus", "02_qkv_attention"): SubmittedAt(None, "times CSV times.csv row 4"),   # did not submit
        }

    def test_without_assignment_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     'student,TIMESTAMP\nada,2026-12-01T09:15:02-05:00\n"Ng, Andrew",2026-12-01T09:00Z\n')
        got = load_times_csv(path)
        assert got == {("ada", None): SubmittedAt(utc(2026, 12, 1, 14, 15, 2), "times CSV times.csv row 1"),
                       ("Ng, Andrew", None): SubmittedAt(utc(2026, 12, 1, 9), "times CSV times.csv row 2")}

    def test_submitted_column_name(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "Submitted,Student\n2026-12-01T09:15:02+00:00,ada\n")
        assert load_times_csv(path)[("ada", None)].when == utc(2026, 12, 1, 9, 15, 2)

    def test_default_tz(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     "student,submitted_at\nada,2026-12-01 09:15:02\ngrace,2026-07-01T09:15:02\n"
                     "linus,2026-12-01T09:15:02+08:00\n")
        got = load_times_csv(path, default_tz="Europe/Berlin")
        assert got[("ada", None)].when == utc(2026, 12, 1, 8, 15, 2)       # CET, +01:00
        assert got[("grace", None)].when == utc(2026, 7, 1, 7, 15, 2)      # CEST, +02:00
        assert got[("linus", None)].when == utc(2026, 12, 1, 1, 15, 2)     # its own offset wins

    @pytest.mark.parametrize(("local", "word"), [("2026-10-25 02:30:00", "twice"),
                                                 ("2026-03-29 02:30:00", "does not exist")])
    def test_default_tz_never_guesses_a_dst_change(self, tmp_path: Path, local: str, word: str) -> None:
        path = write(tmp_path / "times.csv", f"student,submitted_at\nada,{local}\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path, default_tz="Europe/Berlin")
        assert word in info.value.message and "row 1" in info.value.message

    def test_no_zone_and_no_default_tz(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     "student,assignment,submitted_at\nada,02,2026-12-01T09:15:02Z\ngrace,02,2026-12-01 09:15:02\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        message = info.value.message
        assert str(path) in message and "row 2" in message and "submitted_at" in message
        assert "\n" not in message

    def test_bad_default_tz(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,submitted_at\n")
        for zone in ("Mars/Olympus_Mons", "../../etc/passwd", "/etc/localtime", ""):
            with pytest.raises(ConfigError):
                load_times_csv(path, default_tz=zone)

    def test_missing_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,when\nada,2026-12-01T09:15:02Z\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        assert str(path) in info.value.message and "submitted_at" in info.value.message
        path = write(tmp_path / "times.csv", "login,submitted_at\nada,2026-12-01T09:15:02Z\n")
        with pytest.raises(ConfigError, match="student"):
            load_times_csv(path)

    def test_semicolons_are_a_missing_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student;submitted_at\nada;2026-12-01T09:15:02Z\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        assert info.value.hint is not None and "comma" in info.value.hint

    def test_duplicate_key(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     "student,assignment,submitted_at\nada,02,2026-12-01T09:15:02Z\n"
                     "grace,02,2026-12-01T09:15:02Z\n ada ,02,2026-12-02T09:15:02Z\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        assert str(path) in info.value.message and "rows 1 and 3" in info.value.message

    def test_same_student_other_assignment_is_not_a_duplicate(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv",
                     "student,assignment,submitted_at\nada,02,2026-12-01T09:15:02Z\nada,03,2026-12-02T09:15:02Z\n")
        assert len(load_times_csv(path)) == 2

    @pytest.mark.parametrize(("row", "field"), [
        (",02,2026-12-01T09:15:02Z", "student"),
        ("ada,02,yesterday", "submitted_at"),
        ("ada,02,2026-12-01T09:15:02 CST", "submitted_at"),
        ("ada\x1b[31m,02,2026-12-01T09:15:02Z", "student"),
        ("\"ada\u202egnp.exe\",02,2026-12-01T09:15:02Z", "student"),
        ("\"ada\nlovelace\",02,2026-12-01T09:15:02Z", "student"),
        ("ada,02,2026-12-01T09:15:02Z,surplus", "cells"),
    ])
    def test_bad_row(self, tmp_path: Path, row: str, field: str) -> None:
        path = write(tmp_path / "times.csv", f"student,assignment,submitted_at\nada0,02,2026-12-01T09:15:02Z\n{row}\n")
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        message = info.value.message
        assert str(path) in message and "row 2" in message and field in message, message
        assert "\n" not in message and "\x1b" not in message

    def test_names_keep_their_letters(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,submitted_at\nJosé\u00a0Núñez 张伟,2026-12-01T09:15:02Z\n")
        assert ("José\u00a0Núñez 张伟", None) in load_times_csv(path)

    def test_trailing_empty_cells_are_fine(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,submitted_at,,\nada,2026-12-01T09:15:02Z,,\n")
        assert load_times_csv(path)[("ada", None)].when == utc(2026, 12, 1, 9, 15, 2)

    def test_not_utf8(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,submitted_at\nJosé,2026-12-01T09:15:02Z\n".encode("latin-1"))
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        assert str(path) in info.value.message and "UTF-8" in info.value.message

    def test_over_ten_mib(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,submitted_at\n")
        with path.open("r+b") as fh:
            fh.truncate(10 * 1024 * 1024 + 1)
        with pytest.raises(ConfigError) as info:
            load_times_csv(path)
        assert str(path) in info.value.message and "over the limit" in info.value.message

    def test_missing_or_empty_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="not found"):
            load_times_csv(tmp_path / "times.csv")
        with pytest.raises(ConfigError, match="empty"):
            load_times_csv(write(tmp_path / "times.csv", ""))

    def test_duplicate_or_ambiguous_header(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", "student,Student,submitted_at\n")
        with pytest.raises(ConfigError, match="twice"):
            load_times_csv(path)
        path = write(tmp_path / "times.csv", "student,submitted_at,timestamp\n")
        with pytest.raises(ConfigError, match="several time columns"):
            load_times_csv(path)

    def test_huge_field_is_a_config_error(self, tmp_path: Path) -> None:
        path = write(tmp_path / "times.csv", 'student,submitted_at\n"' + "a" * 200_000 + '",2026-12-01T09:15:02Z\n')
        with pytest.raises(ConfigError):
            load_times_csv(path)


# -- best() ----------------------------------------------------------------------------------------


class TestBest:
    timed = SubmittedAt(utc(2026, 12, 1, 9), "nbgrader timestamp.txt")
    other = SubmittedAt(utc(2026, 12, 2, 9), "times CSV times.csv row 1")
    late = SubmittedAt(None, "Canvas file name (_late marker)", late_marker=True)
    broken = SubmittedAt(None, "Gradescope submission_metadata.json", problem="x.json: is not valid JSON")
    broken2 = SubmittedAt(None, "nbgrader timestamp.txt", problem="timestamp.txt: is empty")

    def test_first_with_a_time(self) -> None:
        assert best(self.broken, self.late, self.other, self.timed) is self.other
        assert best(self.timed, self.other) is self.timed

    def test_then_a_late_marker(self) -> None:
        assert best(NONE, self.broken, self.late) is self.late

    def test_then_a_problem(self) -> None:
        assert best(NONE, self.broken2, self.broken) is self.broken2

    def test_else_none(self) -> None:
        assert best() is NONE
        assert best(NONE, SubmittedAt(None, "times CSV times.csv row 4")) is NONE

    def test_naive_times_are_refused(self) -> None:
        with pytest.raises(ValueError):
            SubmittedAt(datetime(2026, 12, 1, 9), "test")
