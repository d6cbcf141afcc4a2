"""Issue 27: due dates, late windows, policies and extensions, from each place a submission time comes from.

Real notebooks graded in the sandbox on a copy of the course whose course.yml has due dates; the
late policy is applied to each result as it is written (and again to kept ones), the raw score, the
penalty and the final score land in the result, grades.csv and the feedback.
"""
from __future__ import annotations

import csv
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import copy_course
from support import make_samples
from autograder import grading as G
from autograder.course.config import load_course
from autograder.core.errors import AutograderError, ConfigError
from autograder.exports.gradescope import settle_gradescope
from autograder.grading.archives import opened
from autograder.course.written import maximum

BASE = load_course()
#: The course's own limits (the sandbox fixture of tests/conftest.py opens with them).
LIMITS = BASE.limits
QKV = BASE.assignment("02_qkv_attention")
FULL = QKV.points
#: One started hour late under dated_course's default policy (10% per started hour): 10% of the assignment's
#: maximum, its written answer's points included (autograder.course.written.maximum), whether graded or not.
HOUR = round(maximum(QKV).points * 10 / 100, 2)
DUE = "2026-12-08T23:59:00+08:00"          # 15:59:00 UTC


def dated_course(root: Path, **late) -> Path:
    """A copy of the course with 02's due date, a late window and a policy (default: 10% per started hour)."""
    copy_course(root)
    data = yaml.safe_load((root / "course.yml").read_text(encoding="utf-8"))
    data["timezone"] = "Asia/Shanghai"
    data["late"] = late or {"kind": "per_hour", "percent": 10}
    qkv = next(a for a in data["assignments"] if a["id"] == QKV.id)
    qkv.update(due=DUE, late_until="2026-12-10T23:59:00+08:00")
    (root / "course.yml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return root


def put(subs: Path, student: str, stamp: str | None = None, name: str | None = None) -> Path:
    folder = subs / student
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or QKV.notebook)
    path.write_text(json.dumps(make_samples.submission(QKV, solved="all")), encoding="utf-8")
    if stamp is not None:
        (folder / "timestamp.txt").write_text(stamp + "\n", encoding="utf-8")
    return path


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def result(out: Path, student: str) -> dict:
    return json.loads((out / "results" / f"{student}__{QKV.id}.json").read_text(encoding="utf-8"))


def grade(subs: Path, course_root: Path, out: Path, sandbox, **kwargs) -> G.BatchOutcome:
    course = load_course(course_root)
    batch = G.plan(subs, course, out, **kwargs)
    outcome = G.grade_batch(batch, sandbox, jobs=1)
    batch.outputs.report(outcome.results)
    return outcome


def test_each_time_source_and_the_boundaries(tmp_path, sandbox):
    course_root = dated_course(tmp_path / "course")
    subs = tmp_path / "subs"
    put(subs, "ada", "2026-12-08 15:59:00.000000 UTC")           # exactly at the due time: on time
    put(subs, "ben", "2026-12-08 15:59:01.000000 UTC")           # one second after: one started hour
    put(subs, "cai", "2026-12-09T01:30:00+08:00")                # another zone's notation: 1 h 31 min late
    put(subs, "dan", name=f"dan_late_12345_67890_{QKV.notebook}")   # Canvas' marker: late, time unknown
    put(subs, "eve")                                             # nothing trustworthy: unknown
    put(subs, "fay", "2026-12-08 10:00:00.000000 UTC")           # the times CSV wins over timestamp.txt
    put(subs, "gus", "2026-12-11 00:00:00.000000 UTC")           # after the late window: not accepted
    times = tmp_path / "times.csv"
    times.write_text("student,assignment,submitted_at\nfay,02_qkv_attention,2026-12-09T01:00:00+08:00\n",
                     encoding="utf-8")
    out = tmp_path / "out"
    grade(subs, course_root, out, sandbox, times=times)
    got = rows(out)
    # dan's folder is named for him, the file for Canvas: the marker is read from the file name.
    expected = {"ada": ("no", 0.0), "ben": ("yes", HOUR), "cai": ("yes", 2 * HOUR), "dan": ("yes", HOUR),
                "eve": ("unknown", 0.0), "fay": ("yes", 2 * HOUR), "gus": ("not accepted", FULL)}
    for student, (late, penalty) in expected.items():
        row = got[student]
        assert (row["late"], float(row["penalty"])) == (late, penalty), (student, row)
        assert float(row["raw"]) == FULL and float(row["total"]) == pytest.approx(FULL - penalty), (student, row)
    assert result(out, "ada")["submitted"]["source"] == "nbgrader timestamp.txt"
    assert result(out, "fay")["submitted"]["source"].startswith("times CSV")
    assert result(out, "dan")["submitted"] == {**result(out, "dan")["submitted"], "late_marker": True, "when": None}
    assert result(out, "eve")["late"]["late"] is None
    # The feedback says, in the student's language, when it was due, how late and what it cost.
    ben = (out / "feedback" / f"ben__{QKV.id}.md").read_text(encoding="utf-8")
    assert "截止时间 2026-12-08 23:59 +08:00" in ben and "迟交 1 秒" in ben and f"迟交扣 {HOUR:g}" in ben
    gus = (out / "feedback" / f"gus__{QKV.id}.md").read_text(encoding="utf-8")
    assert "不予接收" in gus
    # The class report counts them per assignment.
    report = (out / "report.html").read_text(encoding="utf-8")
    assert f"5 份迟交（其中 1 份晚于迟交截止时间，不予接收），1 份提交时间未知，共扣 {6 * HOUR + FULL:g} 分" in report


def test_an_extension_takes_effect_without_regrading_and_as_of_stands_in_for_an_unknown_time(tmp_path, sandbox):
    course_root = dated_course(tmp_path / "course")
    subs = tmp_path / "subs"
    put(subs, "ben", "2026-12-09 03:00:00.000000 UTC")           # 11 h 1 min late: 12 started hours, 100%
    put(subs, "eve")
    out = tmp_path / "out"
    grade(subs, course_root, out, sandbox)
    assert rows(out)["ben"]["total"] == "0" and rows(out)["ben"]["penalty"] == str(int(FULL))
    (course_root / "extensions.csv").write_text(
        "student,assignment,extra,reason\nben,02_qkv_attention,1d,private-medical-note\n", encoding="utf-8")
    again = grade(subs, course_root, out, sandbox)
    assert again.resumed == 2 and again.graded == 0               # nothing regraded
    assert (rows(out)["ben"]["late"], float(rows(out)["ben"]["total"])) == ("no", FULL)
    assert result(out, "ben")["late"]["extended"] is True
    assert "private-medical-note" not in json.dumps(result(out, "ben"))            # the reason stays the instructor's
    late = grade(subs, course_root, out, sandbox, as_of=load_course(course_root).deadline_of(QKV.id)[1])
    assert late.resumed == 2
    eve = result(out, "eve")
    assert eve["late"]["as_of"] is not None and eve["points"] < FULL    # 48 h late at the window's end
    assert "--as-of" in eve["late"]["rule"]["en"]


def test_a_timestamp_inside_a_zip_is_the_students_and_not_trusted(tmp_path, sandbox):
    course_root = dated_course(tmp_path / "course")
    subs = tmp_path / "subs"
    put(subs, "ada", "2026-12-01 00:00:00.000000 UTC")           # "early", written by the student
    archive = tmp_path / "subs.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in subs.rglob("*"):
            z.write(path, path.relative_to(subs).as_posix())
    out = tmp_path / "out"
    with opened(archive) as (root, refused):
        course = load_course(course_root)
        batch = G.plan(root, course, out, refused=refused, origin=archive)
        G.grade_batch(batch, sandbox, jobs=1)
    assert result(out, "ada")["submitted"]["source"] == "none"
    assert rows(out)["ada"]["late"] == "unknown"


def test_a_custom_policy_that_raises_stops_the_batch_naming_it(tmp_path, sandbox):
    course_root = dated_course(tmp_path / "course", kind="custom", function="late_policy:penalty")
    (course_root / "late_policy.py").write_text(
        "def penalty(*, raw, max_points, seconds_late, due, submitted):\n"
        "    if seconds_late > 7200:\n        raise ValueError('too late to think')\n"
        "    return 0.5\n", encoding="utf-8")
    subs = tmp_path / "subs"
    put(subs, "ada", "2026-12-08 16:30:00.000000 UTC")           # 31 min late: the function says 0.5
    out = tmp_path / "out"
    grade(subs, course_root, out, sandbox)
    assert float(rows(out)["ada"]["total"]) == FULL - 0.5
    put(subs, "ben", "2026-12-09 00:00:00.000000 UTC")           # 8 h late: the function raises
    with pytest.raises(ConfigError, match=r"late_policy:penalty.*late_policy\.py.*too late to think"):
        grade(subs, course_root, out, sandbox)
    assert not (out / "results" / f"ben__{QKV.id}.json").exists()     # nothing graded wrongly
    (course_root / "late_policy.py").unlink()
    with pytest.raises(ConfigError, match="late_policy.py is not in the course folder"):
        grade(subs, course_root, out, sandbox)


def test_course_yml_errors_name_the_assignment_and_the_field(tmp_path):
    root = dated_course(tmp_path / "course")
    data = yaml.safe_load((root / "course.yml").read_text(encoding="utf-8"))
    cases = [({"timezone": None}, "02_qkv_attention: due: '2026-12-08 23:59' has no time zone",
              {"due": "2026-12-08 23:59"}),
             ({}, "late_until (2026-12-01T00:00+08:00) is before due", {"late_until": "2026-12-01T00:00+08:00"}),
             ({"timezone": "Mars/Olympus"}, "'Mars/Olympus' is not an IANA time zone", {}),
             ({"late": {"kind": "per_day", "points": -1}}, "late", {})]
    for top, message, assignment in cases:
        broken = json.loads(json.dumps(data))
        broken.update(top)
        next(a for a in broken["assignments"] if a["id"] == QKV.id).update(assignment)
        (root / "course.yml").write_text(yaml.safe_dump(broken, allow_unicode=True), encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_course(root)
        assert message in info.value.message and info.value.message.startswith("course.yml: "), info.value.message


def test_a_bad_extension_names_the_file_and_the_row(tmp_path, sandbox):
    course_root = dated_course(tmp_path / "course")
    (course_root / "extensions.csv").write_text("student,assignment,extra,reason\nada,09_nothing,1d,\n",
                                                encoding="utf-8")
    subs = tmp_path / "subs"
    put(subs, "ada")
    with pytest.raises(ConfigError, match=r"extensions\.csv, row 1.*09_nothing"):
        G.plan(subs, load_course(course_root), tmp_path / "out")
    with pytest.raises(AutograderError, match="--times .*no such file"):
        G.plan(subs, load_course(course_root), tmp_path / "out", times=tmp_path / "missing.csv")


def test_gradescope_takes_the_students_own_due_date_from_its_metadata(tmp_path):
    course = load_course(dated_course(tmp_path / "course"))
    meta = {"created_at": "2026-12-09T10:30:00.000000+08:00",          # 10 h 31 min after course.yml's due
            "assignment": {"due_date": DUE, "late_due_date": None},
            "users": [{"email": "ada@example.org",
                       "assignment": {"due_date": "2026-12-09T23:59:00+08:00", "late_due_date": None}}]}
    (tmp_path / "submission_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    raw = {"key": "ada__02", "student": "ada", "assignment": QKV.id, "status": "graded", "points": FULL,
           "max_points": FULL, "exercises": []}
    settled = settle_gradescope(dict(raw), course, tmp_path)
    assert settled["late"]["late"] is False and settled["points"] == FULL       # her extension holds
    meta["users"][0]["assignment"]["due_date"] = DUE
    (tmp_path / "submission_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    settled = settle_gradescope(dict(raw), course, tmp_path)
    assert settled["late"]["late"] is True and settled["points"] == 0.0        # 11 started hours at 10%
    assert settled["submitted"]["source"] == "Gradescope submission_metadata.json"
    shutil.rmtree(tmp_path / "course")


def test_the_lms_files_take_the_final_score(tmp_path, sandbox):
    """canvas.csv and moodle.csv are written from each result's points: after a penalty, the final score."""
    from autograder.reports.lms import lms_table, write_lms_csv

    course_root = dated_course(tmp_path / "course")
    subs = tmp_path / "subs"
    put(subs, "ben", "2026-12-08 16:30:00.000000 UTC")           # 31 min late: one started hour
    out = tmp_path / "out"
    grade(subs, course_root, out, sandbox)
    course = load_course(course_root)
    settled = [result(out, "ben")]
    table = lms_table(settled, course)
    assert table.rows == [("ben", {QKV.id: FULL - HOUR}, FULL - HOUR)]
    written = write_lms_csv(settled, course, tmp_path / "lms")
    canvas = next(p for p in written if p.name == "canvas.csv").read_text(encoding="utf-8-sig")
    ben = next(line for line in canvas.splitlines() if line.startswith("ben,"))
    assert ben.endswith(f",{FULL - HOUR:g},{FULL - HOUR:g}"), canvas
    # And the command's last lines count them.
    from rich.console import Console

    from autograder.reports.class_report import print_summary

    console = Console(record=True, width=300)
    print_summary(console, settled, course)
    assert (f"{QKV.id}: due 2026-12-08 23:59 +08:00; 1 late (0 after the late window, not accepted), 0 with no "
            f"trustworthy time, "
            f"{HOUR:g} points taken off in all") in console.export_text()


def test_nbgraders_word_comes_after_the_times_csv_and_after_the_extensions_file(tmp_path, sandbox):
    """grade --nbgrader passes the gradebook's times and extensions (exports.nbgrader.gradebook_times)."""
    from datetime import datetime, timedelta, timezone

    from autograder.grading.times import SubmittedAt
    from autograder.course.late_policy import Extension

    course_root = dated_course(tmp_path / "course")
    (course_root / "extensions.csv").write_text("student,assignment,extra,reason\nben,02_qkv_attention,2h,\n",
                                                encoding="utf-8")
    subs = tmp_path / "subs"
    put(subs, "ada", "2026-12-08 10:00:00.000000 UTC")           # timestamp.txt says on time...
    put(subs, "ben")
    late = datetime(2026, 12, 8, 17, 0, tzinfo=timezone.utc)    # ...the gradebook says 1 h 1 min late
    word = ({("ada", QKV.id): SubmittedAt(late, "nbgrader gradebook"),
             ("ben", QKV.id): SubmittedAt(late, "nbgrader gradebook")},
            [Extension(student="ben", assignment=QKV.id, extra=timedelta(minutes=30), reason="gradebook"),
             Extension(student="ada", assignment=QKV.id, extra=timedelta(minutes=30), reason="gradebook")])
    out = tmp_path / "out"
    grade(subs, course_root, out, sandbox, gradebook=word)
    ada, ben = result(out, "ada"), result(out, "ben")
    assert ada["submitted"]["source"] == "nbgrader gradebook" and ada["late"]["extended"] is True
    assert ada["late"]["penalty"] == pytest.approx(HOUR)         # 31 min after the extended due date
    assert ben["late"]["late"] is False                          # the file's 2 h, not the gradebook's 30 min


def test_gradescope_run_autograder_scores_the_final_points_and_says_why(tmp_path, monkeypatch):
    """run_autograder end to end on a course with a due date: Gradescope's score is the final one."""
    from autograder.exports.gradescope import run_gradescope

    course_root = dated_course(tmp_path / "course")
    monkeypatch.setenv("AUTOGRADER_COURSE", str(course_root / "course.yml"))
    root = tmp_path / "autograder"
    put(root, "submission")
    meta = {"created_at": "2026-12-09T00:30:00+08:00", "assignment": {"due_date": DUE, "late_due_date": None},
            "users": [{"email": "ada@example.org", "id": 7}]}
    (root / "submission_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    assert run_gradescope(root, QKV.id) == 0
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == pytest.approx(FULL - HOUR)              # 31 min late: one started hour
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(FULL)   # each check keeps its points
    assert "迟交: 截止时间 2026-12-08 23:59 +08:00；迟交 31 分钟" in results["output"]
