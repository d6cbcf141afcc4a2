"""LMS downloads in, LMS imports out: Canvas and Moodle zips graded as a user grades them, then
canvas.csv / moodle.csv / lms-skipped.csv read back as the LMS would read them.

What must hold: the LMS ids of the download (Canvas user id, Moodle participant id) reach the
import files; a notebook that could not be graded leaves a blank cell (never a 0) and is listed
with its reason; a student with two notebooks for one assignment gets one graded row.
"""
from __future__ import annotations

import csv
import io
import os
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from support import ROOT, make_samples as MS
from autograder import grading as G
from autograder.reports import lms as LMS
from autograder.course.config import load_course
from autograder.grading.archives import opened
from autograder.grading.submissions import discover

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
FULL = QKV.points
#: The assignment's maximum (autograder.course.written.maximum): FULL and its written answer's points, graded or not.
MAX = QKV.points + QKV.manual_points
LIMITS = COURSE.limits.model_copy(update={"call_seconds": 4.0, "submission_seconds": 60.0})

OLD = (2026, 1, 10, 9, 0, 0)       # zip member times (local time, as zip stores them)
NEW = (2026, 1, 12, 9, 0, 0)


@pytest.fixture(scope="module")
def notebooks() -> dict[str, str]:
    return {"full": nbformat.writes(MS.submission(QKV, solved="all")),
            "part": nbformat.writes(MS.submission(QKV, solved=("2.1",))),
            "stub": nbformat.writes(MS.student_notebook(QKV)),
            "broken": "{oops"}


def _zip(path: Path, members: list[tuple[str, str, tuple[int, ...]]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text, when in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=when), text)
    return path


def _grade_zip(archive: Path, out: Path, sandbox) -> list[dict]:
    """What ``autograder grade ARCHIVE -o OUT`` does, in-process: discover, grade, write the LMS files."""
    with opened(archive) as (root, refused):
        batch = G.plan(root, COURSE, out, refused=refused, origin=archive)
        G.grade_batch(batch, sandbox, jobs=2)
    results = batch.outputs.all_results()
    LMS.write_lms_csv(results, COURSE, out)
    return results


def _csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def _dicts(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))   # grades.csv has a BOM


def test_canvas_download_keeps_user_ids_blanks_the_ungraded_and_grades_one_duplicate(tmp_path, sandbox, notebooks):
    archive = _zip(tmp_path / "canvas.zip", [
        ("alicesmith_12345_67890_02_qkv_attention.ipynb", notebooks["full"], OLD),
        ("bobjones_late_23456_67891_02_qkv_attention.ipynb", notebooks["part"], OLD),
        ("carolwu_34567_67892_02_qkv_attention.ipynb", notebooks["broken"], OLD),
        # Two notebooks of one student: the one named as the assignment's notebook counts, though older.
        ("danlee_45678_67894_02_qkv_attention-Copy1.ipynb", notebooks["stub"], NEW),
        ("danlee_45678_67893_02_qkv_attention.ipynb", notebooks["full"], OLD),
        # Renamed by the student after Canvas' prefix: still Canvas user 56789 (the notebook names its assignment).
        ("lina_56789_67895_my_homework.ipynb", notebooks["full"], OLD),
        # Not from the download at all: graded, and listed as a row Canvas cannot match by id.
        ("extra/02_qkv_attention.ipynb", notebooks["full"], OLD),
    ])
    out = tmp_path / "out"
    results = _grade_zip(archive, out, sandbox)
    by_student = {r["student"]: r for r in results}
    assert sorted(by_student) == ["alicesmith", "bobjones", "carolwu", "danlee", "extra", "lina"]  # one for dan
    assert {s: r["evidence"].get("canvas_id") for s, r in by_student.items()} == {
        "alicesmith": "12345", "bobjones": "23456", "carolwu": "34567", "danlee": "45678", "extra": None,
        "lina": "56789"}
    assert by_student["bobjones"]["evidence"].get("canvas_late") == "yes"
    dan = by_student["danlee"]
    assert dan["status"].startswith("graded") and dan["points"] == FULL
    assert dan["source"] == "danlee_45678_67893_02_qkv_attention.ipynb"
    assert dan["evidence"]["also_found"] == "danlee_45678_67894_02_qkv_attention-Copy1.ipynb"
    assert dan["evidence"]["chosen_by"] == f"named {QKV.notebook}"
    assert by_student["carolwu"]["status"].startswith("unreadable")
    bob = by_student["bobjones"]["points"]
    assert 0 < bob < FULL

    canvas = _csv(out / "canvas.csv")
    # The column is the assignment's name in the gradebook (course.yml lms_title, else its title).
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", QKV.gradebook_title,
                         "Final Points"]
    assert canvas[1] == ["Points Possible", "", "", "", "", f"{MAX:g}", f"{MAX:g}"]
    assert canvas[2:] == [["alicesmith", "12345", "", "", "", f"{FULL:g}", f"{FULL:g}"],
                          ["bobjones", "23456", "", "", "", f"{bob:g}", f"{bob:g}"],
                          ["carolwu", "34567", "", "", "", "", "0"],      # unreadable: blank, not 0
                          ["danlee", "45678", "", "", "", f"{FULL:g}", f"{FULL:g}"],
                          ["extra", "", "", "extra", "", f"{FULL:g}", f"{FULL:g}"],
                          ["lina", "56789", "", "", "", f"{FULL:g}", f"{FULL:g}"]]
    skipped = _dicts(out / "lms-skipped.csv")
    assert [(r["student"], r["assignment"], r["source"]) for r in skipped] == [
        ("carolwu", QKV.id, "carolwu_34567_67892_02_qkv_attention.ipynb"),
        ("extra", QKV.id, "extra/02_qkv_attention.ipynb")]
    assert skipped[0]["status"].startswith("unreadable")
    assert skipped[1]["status"].startswith("graded, but no Canvas user id")
    grades = _dicts(out / "grades.csv")
    assert sorted(r["student"] for r in grades) == ["alicesmith", "bobjones", "carolwu", "danlee", "extra", "lina"]


def test_canvas_columns_are_the_gradebook_titles_course_yml_gives():
    import yaml

    from autograder.course.config import parse_course
    from autograder.reports.lms import canvas_csv, lms_table

    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    data["assignments"][1]["lms_title"] = "Homework 2: attention"
    course = parse_course(data)
    result = {"key": "ada__02", "student": "ada", "assignment": QKV.id, "status": "graded", "points": 8.0,
              "source": "x.ipynb", "graded_at": "2026-12-01T00:00:00+00:00", "evidence": {"canvas_id": "1"}}
    header = canvas_csv(lms_table([result], course)).splitlines()[0]
    assert header.endswith(",Homework 2: attention,Final Points"), header


def test_moodle_download_matches_by_participant_id_and_grades_the_newest_copy(tmp_path, sandbox, notebooks):
    folder = "{}_{}_assignsubmission_file_/{}"
    archive = _zip(tmp_path / "moodle.zip", [
        (folder.format("Ada Lovelace", 4242, "02_qkv_attention.ipynb"), notebooks["full"], OLD),
        (folder.format("Ben Ng", 4343, "02_qkv_attention.ipynb"), notebooks["broken"], OLD),
        # Neither is named 02_qkv_attention.ipynb: the newer file counts (the zip's time, not extraction order).
        (folder.format("Cy Ho", 4444, "02_qkv_attention-Copy2.ipynb"), notebooks["full"], NEW),
        (folder.format("Cy Ho", 4444, "02_qkv_attention-Copy1.ipynb"), notebooks["stub"], OLD),
        # Two students of the same name: two people (their participant ids differ), not a duplicate.
        (folder.format("Li Wei", 4545, "02_qkv_attention.ipynb"), notebooks["full"], OLD),
        (folder.format("Li Wei", 4646, "02_qkv_attention.ipynb"), notebooks["part"], OLD),
    ])
    out = tmp_path / "out"
    results = _grade_zip(archive, out, sandbox)
    by_student = {r["student"]: r for r in results}
    assert sorted(by_student) == ["Ada Lovelace", "Ben Ng", "Cy Ho", "Li Wei_4545", "Li Wei_4646"]
    assert {s: r["evidence"].get("moodle_id") for s, r in by_student.items()} == {
        "Ada Lovelace": "4242", "Ben Ng": "4343", "Cy Ho": "4444", "Li Wei_4545": "4545", "Li Wei_4646": "4646"}
    cy = by_student["Cy Ho"]
    assert cy["points"] == FULL and cy["source"].endswith("02_qkv_attention-Copy2.ipynb")
    assert cy["evidence"]["chosen_by"] == "the newest file"
    assert cy["evidence"]["also_found"].endswith("02_qkv_attention-Copy1.ipynb")

    moodle = _dicts(out / "moodle.csv")
    assert list(moodle[0]) == ["Identifier", "Full name", "Assignment", "Grade", "Maximum Grade",
                               "Last modified (grade)"]
    part = by_student["Li Wei_4646"]["points"]
    assert [(r["Identifier"], r["Full name"], r["Assignment"], r["Grade"], r["Maximum Grade"]) for r in moodle] == [
        ("Participant 4242", "Ada Lovelace", QKV.id, f"{FULL:g}", f"{MAX:g}"),
        ("Participant 4343", "Ben Ng", QKV.id, "", f"{MAX:g}"),                      # unreadable: blank
        ("Participant 4444", "Cy Ho", QKV.id, f"{FULL:g}", f"{MAX:g}"),
        ("Participant 4545", "Li Wei_4545", QKV.id, f"{FULL:g}", f"{MAX:g}"),
        ("Participant 4646", "Li Wei_4646", QKV.id, f"{part:g}", f"{MAX:g}")]
    graded = {r["Full name"]: r["Last modified (grade)"] for r in moodle}
    assert graded["Ada Lovelace"] == by_student["Ada Lovelace"]["graded_at"] and graded["Ben Ng"] == ""
    assert [r["student"] for r in _dicts(out / "lms-skipped.csv")] == ["Ben Ng"]
    canvas = _csv(out / "canvas.csv")                      # no Canvas id: the name goes to SIS Login ID
    assert canvas[2] == ["Ada Lovelace", "", "", "Ada Lovelace", "", f"{FULL:g}", f"{FULL:g}"]
    assert canvas[3][5] == ""                              # Ben: blank, not 0


def test_duplicate_rule_newest_then_path_and_blind_marking(tmp_path):
    """The rule without grading: a canonical name wins, else the newest file, else the first path."""
    nb = nbformat.writes(MS.student_notebook(QKV))

    def put(rel: str, mtime: float) -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nb, encoding="utf-8")
        os.utime(path, (mtime, mtime))

    now = time.time()
    put("folders/ann/02_qkv_attention-Copy1.ipynb", now)
    put("folders/ann/02_qkv_attention.ipynb", now - 3600)                 # older, but the assignment's name
    put("folders/bo/attention (1).ipynb", now - 60)
    put("folders/bo/attention.ipynb", now)                                # newest
    put("folders/cy/b.ipynb", now)
    put("folders/cy/a.ipynb", now)                                        # same time: first by path
    put("moodle/Participant_7_assignsubmission_file_/02_qkv_attention.ipynb", now)   # blind marking
    put("moodle/Participant_8_assignsubmission_file_/02_qkv_attention.ipynb", now)
    d = discover(tmp_path / "folders", COURSE, assignment=QKV.id)
    rows = {s.source: (s.student, s.problem, s.evidence.get("also_found"), s.evidence.get("chosen_by"))
            for s in d.submissions}
    assert rows["ann/02_qkv_attention.ipynb"] == ("ann", None, "ann/02_qkv_attention-Copy1.ipynb",
                                                  f"named {QKV.notebook}")
    assert rows["bo/attention.ipynb"] == ("bo", None, "bo/attention (1).ipynb", "the newest file")
    assert rows["cy/a.ipynb"] == ("cy", None, "cy/b.ipynb", "the first by path (same modification time)")
    assert d.superseded == {"ann/02_qkv_attention-Copy1.ipynb": "ann/02_qkv_attention.ipynb",
                            "bo/attention (1).ipynb": "bo/attention.ipynb", "cy/b.ipynb": "cy/a.ipynb"}
    assert len({s.key for s in d.submissions}) == len(d.submissions) == 3
    blind = discover(tmp_path / "moodle", COURSE).submissions
    assert {s.student: s.evidence["moodle_id"] for s in blind} == {"Participant 7": "7", "Participant 8": "8"}
    assert all(s.problem is None for s in blind)
    for raw in (b"ann\x01", b"ann\x02"):       # two folders on disk, one name once cleaned: never merged
        folder = os.path.join(os.fsencode(tmp_path / "clash"), raw)
        os.makedirs(folder)
        Path(os.fsdecode(os.path.join(folder, b"02_qkv_attention.ipynb"))).write_text(nb, encoding="utf-8")
    clash = discover(tmp_path / "clash", COURSE).submissions
    assert len(clash) == 2 and all(s.problem.startswith("ambiguous student: 2 notebooks for ann/") for s in clash)


def test_an_lms_is_one_module_that_declares_its_format(tmp_path, monkeypatch):
    """Issue 26: a new LMS (here a made-up one naming files ``bb-<id>-<student>``) is one module with a FORMAT;
    discovery reads its ids from names and the writer writes its file, no other module edited."""
    import sys
    import types

    from autograder.grading.submissions import discover
    from autograder.reports import lms as L
    from autograder.core.text import csv_rows

    module = types.ModuleType("lms_made_up")

    def from_file(stem):
        parts = stem.split("-", 2)
        return (parts[2].split("_")[0], {"madeup_id": parts[1]}) if len(parts) == 3 and parts[0] == "bb" else None

    def write(table, course):
        ids = table.user_ids("madeup")
        return csv_rows([["id", "student", "total"]], [[ids.get(s, ""), s, f"{t:g}"] for s, _scores, t in table.rows])

    module.FORMAT = L.LmsFormat("madeup", "madeup.csv", write, from_file=from_file)
    monkeypatch.setitem(sys.modules, "lms_made_up", module)
    monkeypatch.setattr(L, "FORMAT_MODULES", (*L.FORMAT_MODULES, "lms_made_up"))
    L.formats.cache_clear()
    try:
        nb = nbformat.writes(MS.student_notebook(QKV))
        (tmp_path / "subs").mkdir()
        (tmp_path / "subs" / f"bb-777-zoe_{QKV.id}.ipynb").write_text(nb, encoding="utf-8")
        (sub,) = discover(tmp_path / "subs", COURSE).submissions
        assert (sub.student, sub.evidence.get("madeup_id")) == ("zoe", "777")
        result = {"key": "zoe__x", "student": "zoe", "assignment": QKV.id, "status": "graded", "points": 3.0,
                  "source": sub.source, "graded_at": "2026-12-01T00:00:00+00:00", "evidence": {"madeup_id": "777"}}
        written = L.write_lms_csv([result], COURSE, tmp_path / "out")
        assert [p.name for p in written] == ["canvas.csv", "moodle.csv", "moodle-grades.csv", "madeup.csv",
                                             "lms-skipped.csv"]
        assert _csv(tmp_path / "out" / "madeup.csv")[1] == ["777", "zoe", "3"]
    finally:
        L.formats.cache_clear()


def test_the_services_export_names_students_by_the_services_roster_then_course_yml_s(tmp_path, course_root):
    """Issue 66, item 2b: students imported with ``serve roster`` (e-mails, Canvas ids, Moodle ID numbers) hand in;
    ``serve export``'s canvas.csv and moodle-grades.csv carry those ids (they once read only course.yml's
    ``roster:`` file: every id empty, and the rows no LMS could match not listed in lms-skipped.csv). A student the
    service's roster does not have is named by course.yml's."""
    from autograder.course.roster import Member
    from autograder.service import db, people
    from autograder.service import queue as Q
    from autograder.service.export import export
    from autograder.course.written import maximum

    (course_root / "roster.csv").write_text("student,name,email,canvas_id\ncat,Cat from course.yml,cat@uni.example,"
                                            "303\nada,Ada from course.yml,old@uni.example,999\n", encoding="utf-8")
    text = (course_root / "course.yml").read_text(encoding="utf-8")
    (course_root / "course.yml").write_text(text + "\nroster: roster.csv\n", encoding="utf-8")
    course = load_course(course_root)
    qkv = course.assignment(QKV.id)
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    try:
        people.import_members(engine, [Member("ada", "Ada Lovelace", "ada@uni.example", "S1", "101", "M-101"),
                                       Member("ben", "Ben", "", "S1", "", "")], by="test")
        for student in ("ada", "ben", "cat"):
            sub, job = Q.store(engine, student=student, assignment=qkv.id, filename="a.ipynb", data=b"{}")
            assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", {
                "student": student, "assignment": qkv.id, "status": "graded", "points": qkv.points,
                "max_points": qkv.points, "exercises": []})
        export(engine, course, tmp_path / "out")
    finally:
        engine.dispose()

    def rows(name: str) -> list[dict[str, str]]:
        return list(csv.DictReader(io.StringIO((tmp_path / "out" / name).read_text(encoding="utf-8-sig"))))

    canvas = {r["SIS Login ID"] or r["ID"]: r for r in rows("canvas.csv") if r["Student"] != "Points Possible"}
    assert (canvas["101"]["Student"], canvas["101"]["Section"]) == ("Ada Lovelace", "S1")   # the service's, not 999
    assert canvas["303"]["Student"] == "Cat from course.yml"           # not on the service's roster: course.yml's
    assert canvas["ben"]["ID"] == ""
    grades = {r["Full name"]: (r["Email address"], r["ID number"]) for r in rows("moodle-grades.csv")}
    assert grades == {"Ada Lovelace": ("ada@uni.example", "M-101"), "Ben": ("", ""),
                      "Cat from course.yml": ("cat@uni.example", "")}
    # ben has no id of either LMS: each says it cannot match his graded row; ada and cat are matched.
    skipped = [(r["student"], r["status"]) for r in rows("lms-skipped.csv")]
    assert sorted(s for s, _ in skipped) == ["ben", "ben"]
    assert sorted("Canvas" in why for _, why in skipped) == [False, True]
    assert sorted("Moodle" in why for _, why in skipped) == [False, True]
    assert {r["Maximum Grade"] for r in rows("moodle.csv")} == {f"{maximum(qkv).points:g}"}
