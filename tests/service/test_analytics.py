"""Issue 51, "Analytics": item analytics per assignment on the staff's dashboard (autograder/service/analytics.py,
the page /dashboard/analytics and its CSV tables).

The numbers are tested on plain result dicts against hand computations (numpy's Pearson r for the point-biserial
correlation); the page and the CSV through the real app on a real uvicorn server, over SQLite and PostgreSQL, with
the results inserted as rows (grading is not the point here)."""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import hashlib
import io
import re

import numpy as np
import pytest
from sqlalchemy import insert

from served import serving
from pages import browser, sign_in
from autograder.course.config import load_course
from autograder.course.roster import Member
from autograder.service import analytics as A
from autograder.service import db, people, tables, tokens
from autograder.service.app import create_app

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")          # 2.1 (1 point), 2.2 (2), 2.3 (2), 2.4 (3), 2.5 (2): 10 points
IDS = [e.id for e in QKV.exercises]
FIRST = COURSE.assignments[0]
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)
HOUR = dt.timedelta(hours=1)


def result(student: str, points: dict[str, float], mistakes: dict[str, list[str]] | None = None,
           assignment: str = QKV.id, maxima: dict[str, float] | None = None) -> dict:
    """A stored result as the grader writes one: exercises with their points and checks (the mistakes named)."""
    maxima = maxima or {e.id: e.points for e in QKV.exercises}
    exercises = [{"exercise": e, "function": "f", "points": p, "max_points": maxima[e], "status": "graded",
                  "checks": [{"check": f"c{i}", "passed": False, "mistake": m, "mistake_message": None}
                             for i, m in enumerate((mistakes or {}).get(e, []))]}
                 for e, p in points.items()]
    return {"student": student, "assignment": assignment, "status": "graded", "points": sum(points.values()),
            "max_points": sum(maxima[e] for e in points), "exercises": exercises}


# -- the numbers, on plain values ----------------------------------------------------------------------------------
def test_the_point_biserial_correlation_is_pearsons_r_of_the_flags_and_the_values():
    flags = [True, False, True, True, False, False, True]
    values = [7.0, 2.0, 5.5, 6.0, 4.0, 1.0, 3.0]
    expected = np.corrcoef([1.0 if f else 0.0 for f in flags], values)[0, 1]
    assert A.point_biserial(flags, values) == pytest.approx(expected, abs=1e-12)
    # The textbook form: (M1 - M0) / s_n * sqrt(p q), s_n the population standard deviation.
    ones, zeros = [v for f, v in zip(flags, values) if f], [v for f, v in zip(flags, values) if not f]
    p = len(ones) / len(values)
    by_hand = (np.mean(ones) - np.mean(zeros)) / np.std(values) * np.sqrt(p * (1 - p))
    assert A.point_biserial(flags, values) == pytest.approx(by_hand, abs=1e-12)


def test_discrimination_is_corrected_full_marks_against_the_other_exercises_total():
    table = {"s1": {"2.1": 1, "2.2": 2, "2.3": 2, "2.4": 3}, "s2": {"2.1": 0, "2.2": 1, "2.3": 0, "2.4": 1},
             "s3": {"2.1": 1, "2.2": 0, "2.3": 2, "2.4": 0}, "s4": {"2.1": 0, "2.2": 2, "2.3": 1, "2.4": 3},
             "s5": {"2.1": 1, "2.2": 2, "2.3": 0, "2.4": 1.5}}
    results = [result(s, pts) for s, pts in table.items()]
    for exercise, most in (("2.1", 1.0), ("2.4", 3.0)):
        full = [1.0 if pts[exercise] >= most else 0.0 for pts in table.values()]
        rest = [sum(v for e, v in pts.items() if e != exercise) for pts in table.values()]
        assert A.discrimination(results, exercise) == pytest.approx(np.corrcoef(full, rest)[0, 1], abs=1e-12)
        # Not the uncorrected one (the exercise's own points in the total): that would differ.
        whole = [sum(pts.values()) for pts in table.values()]
        assert A.discrimination(results, exercise) != pytest.approx(np.corrcoef(full, whole)[0, 1], abs=1e-6)


def test_discrimination_is_na_for_one_student_or_no_variance():
    assert A.point_biserial([True], [3.0]) is None                       # one student
    assert A.point_biserial([], []) is None
    assert A.point_biserial([True, True, True], [1.0, 2.0, 3.0]) is None   # everybody has full marks
    assert A.point_biserial([True, False], [4.0, 4.0]) is None             # the rest of the totals do not vary
    one = A.analyse(QKV.id, QKV.points, [(e.id, e.points) for e in QKV.exercises],
                    [result("s1", {"2.1": 1, "2.2": 1, "2.3": 2, "2.4": 0})], [])
    assert [e.discrimination for e in one.exercises] == [None] * len(QKV.exercises)
    assert one.exercises[0].pass_rate == 1.0 and one.exercises[1].pass_rate == 0.0


def test_pass_rate_mean_distribution_and_difficulty():
    results = [result("a", {"2.2": 2}), result("b", {"2.2": 1}), result("c", {"2.2": 1}), result("d", {"2.2": 0}),
               result("e", {"2.1": 1})]                               # e's result holds no 2.2: not counted for it
    stats = A.exercise_stats(results, [], "2.2", 2.0)
    assert (stats.n, stats.full, stats.pass_rate) == (4, 1, 0.25)
    assert stats.mean == pytest.approx(1.0) and stats.difficulty == pytest.approx(0.5)
    assert stats.distribution == [(0, 1), (1, 2), (2, 1)]
    empty = A.exercise_stats([], [], "2.2", 2.0)
    assert (empty.n, empty.pass_rate, empty.mean, empty.difficulty, empty.attempts) == (0, None, None, None, None)


def test_attempts_and_time_to_full_marks_are_medians_over_the_students_who_reached_it():
    def sub(student, n, hours, points):
        return A.Attempt(student, n, T0 + hours * HOUR, None if points is None else result(student, {"2.1": points}))

    attempts = [
        # ada: waiting, then 0, then full at her third submission, three hours after her first; a fourth after.
        sub("ada", 1, 0, None), sub("ada", 5, 1, 0), sub("ada", 9, 3, 1), sub("ada", 12, 4, 1),
        sub("ben", 2, 2, 1),                                    # full at once: 1 submission, no time
        # cat: received in this order (ids out of order: a regrade's order is not the time order): full at the 2nd
        sub("cat", 20, 0, 0), sub("cat", 3, 10, 1),
        sub("dan", 4, 0, 0), sub("dan", 6, 5, 0),               # never full: not in the medians
        sub("eve", 7, 0, None),                                 # never graded: not tried
    ]
    tried, reached = A.to_full_marks(attempts, "2.1")
    assert tried == 4 and sorted(reached) == [(1, 0.0), (2, 36000.0), (3, 10800.0)]
    stats = A.exercise_stats([], attempts, "2.1", 1.0)
    assert (stats.tried, stats.reached, stats.attempts, stats.seconds) == (4, 3, 2.0, 10800.0)
    assert A.exercise_stats([], attempts[:5], "2.1", 1.0).attempts == 2.0      # ada 3, ben 1: the median of two


def test_mistakes_are_counted_once_per_student():
    results = [result("a", {"2.3": 0}, {"2.3": ["swapped_axes", "swapped_axes", "no_scale"]}),
               result("b", {"2.3": 0, "2.4": 0}, {"2.3": ["swapped_axes"], "2.4": ["no_scale"]}),
               result("c", {"2.3": 1}, {"2.3": ["no_mask", "wrong_sign"]}),
               result("d", {"2.3": 1}, {"2.3": ["wrong_sign"]})]
    assert A.common_mistakes(results, "2.3") == [("swapped_axes", 2), ("wrong_sign", 2), ("no_mask", 1)]
    assert A.common_mistakes(results, "2.4") == [("no_scale", 1)]
    # The same student twice (two results) still counts once.
    assert A.common_mistakes(results + [results[0]], "2.3")[0] == ("swapped_axes", 2)


def test_sections_tables_and_the_histogram_of_this_assignment_only():
    roster = {"a": ("Ada", "B"), "b": ("=HYPERLINK(1)", "A"), "c": ("Cat", "")}
    results = [result("a", {"2.1": 1, "2.2": 2, "2.3": 2, "2.4": 3}),
               result("b", {"2.1": 0, "2.2": 2, "2.3": 0, "2.4": 0}),
               result("c", {"2.1": 1, "2.2": 0, "2.3": 0, "2.4": 0}),
               result("d", {"2.1": 1, "2.2": 0, "2.3": 0, "2.4": 0}),
               result("a", {"1.1": 0}, assignment=FIRST.id, maxima={"1.1": 1.0})]      # another assignment
    found = A.analyse(QKV.id, QKV.points, [(e.id, e.points) for e in QKV.exercises], results, [], roster)
    assert found.n == 4 and [t.student for t in found.totals] == ["a", "b", "c", "d"]
    assert [(s.section, s.n) for s in found.sections] == [("A", 1), ("B", 1), ("", 2)]        # no section last
    nosection = found.sections[-1]
    assert nosection.mean_total == pytest.approx(1.0) and nosection.pass_rates["2.1"] == 1.0
    assert nosection.pass_rates["2.2"] == 0.0
    svg = A.histogram_svg(found, title="Totals of <02>", xlabel="total", ylabel="students")
    assert svg.startswith("<svg role='img' aria-label='Totals of &lt;02&gt;' ")
    assert "<title>Totals of &lt;02&gt;</title>" in svg
    assert "<title>0–10: 0</title>" in svg and "<title>10–20: 2</title>" in svg and "<title>90–100: 1</title>" in svg
    rows = list(csv.DictReader(io.StringIO(A.table_csv(found, "exercises"))))
    assert [r["exercise"] for r in rows] == IDS
    assert rows[0]["pass_rate"] == "0.75" and rows[1]["distribution"] == "0: 2; 2: 2"
    totals = list(csv.DictReader(io.StringIO(A.table_csv(found, "totals"))))
    assert totals[1]["name"] == "'=HYPERLINK(1)" and totals[0]["points"] == "8"          # no formula
    sections = list(csv.DictReader(io.StringIO(A.table_csv(found, "sections"))))
    assert [s["section"] for s in sections] == ["A", "B", ""] and sections[2]["2.1 pass_rate"] == "1"
    with pytest.raises(ValueError, match="table 'nope'"):
        A.table_csv(found, "nope")


def test_an_exercise_course_yml_does_not_name_follows_its_own():
    """A question a result holds that course.yml's exercise list does not (graded by hand, say) is shown after."""
    results = [result("a", {"2.1": 1, "2.9": 2}, maxima={"2.1": 1.0, "2.9": 2.0})]
    found = A.analyse(QKV.id, QKV.points, [(e.id, e.points) for e in QKV.exercises], results, [])
    assert [e.exercise for e in found.exercises] == [*IDS, "2.9"]
    assert found.exercises[-1].max_points == 2.0 and found.exercises[-1].pass_rate == 1.0


# -- from the database, and the page -----------------------------------------------------------------------------
def store(engine, student: str, assignment: str, received: dt.datetime, graded: dict | None) -> int:
    """A submission (and its result, where ``graded``) inserted as rows."""
    with db.writing(engine).begin() as conn:
        sid = conn.execute(insert(tables.Submission).values(
            student=student, assignment=assignment, filename="a.ipynb", sha256=hashlib.sha256(b"{}").hexdigest(),
            data=b"{}", received_at=received)).inserted_primary_key[0]
        if graded is not None:
            conn.execute(insert(tables.Result).values(submission_id=sid, points=graded["points"],
                                                  max_points=graded["max_points"], status=graded["status"],
                                                  result=graded, graded_by="test"))
    return int(sid)


def fill(engine) -> dict[str, str]:
    """A class of four on 02 (and one result on 01); tokens: {ada, ta}."""
    people.import_members(engine, [Member("ada", name="<script>alert(1)</script>", section="<b>A</b>"),
                                   Member("ben", section="B"), Member("cat", name="=HYPERLINK(1)")], by="test")
    store(engine, "ada", QKV.id, T0, result("ada", {"2.1": 0, "2.2": 2, "2.3": 0, "2.4": 0}, {"2.1": ["off_by_one"]}))
    store(engine, "ada", QKV.id, T0 + 2 * HOUR, result("ada", {"2.1": 1, "2.2": 2, "2.3": 2, "2.4": 3}))
    store(engine, "ben", QKV.id, T0 + HOUR, result("ben", {"2.1": 1, "2.2": 0, "2.3": 1, "2.4": 1},
                                                   {"2.2": ["no_scale"]}))
    store(engine, "cat", QKV.id, T0, result("cat", {"2.1": 0, "2.2": 2, "2.3": 2, "2.4": 1}, {"2.1": ["off_by_one"]}))
    store(engine, "dan", QKV.id, T0, None)                              # waiting for a grade: no counted result
    store(engine, "ada", FIRST.id, T0, result("ada", {"1.1": 0}, assignment=FIRST.id, maxima={"1.1": 1.0}))
    return {"ada": tokens.issue(engine, "ada"), "ta": tokens.issue(engine, "T. A.", role="ta")}


def test_read_takes_the_counted_results_and_every_attempt(service_engine):
    fill(service_engine)
    found = A.read(service_engine, COURSE, QKV.id)
    assert [(t.student, t.points) for t in found.totals] == [("ada", 8.0), ("ben", 3.0), ("cat", 5.0)]
    first = found.exercises[0]
    assert (first.exercise, first.n, first.full, first.tried, first.reached) == ("2.1", 3, 2, 3, 2)
    assert (first.attempts, first.seconds) == (1.5, 3600.0)          # ada 2 in 2 h, ben 1 at once
    assert first.mistakes == [("off_by_one", 1)]                     # cat's: ada's counted result has none
    assert [(s.section, s.n) for s in found.sections] == [("<b>A</b>", 1), ("B", 1), ("", 1)]


@contextlib.contextmanager
def signed_in(url: str, token: str):
    with browser(url) as client:
        assert sign_in(client, token).status_code == 303
        yield client


def test_the_page_and_its_csv_for_the_staff_only(service_engine):
    who = fill(service_engine)
    with serving(create_app(service_engine, COURSE)) as url:
        with signed_in(url, who["ada"]) as ada:
            assert ada.get("/dashboard/analytics").status_code == 403
            assert ada.get("/dashboard/analytics.csv", params={"assignment": QKV.id}).status_code == 403
        with browser(url) as stranger:
            assert stranger.get("/dashboard/analytics").status_code == 303      # to sign in
        with signed_in(url, who["ta"]) as ta:
            board = ta.get("/dashboard", params={"lang": "en"})
            assert 'href="/dashboard/analytics">Analytics</a>' in board.text
            default = ta.get("/dashboard/analytics", params={"lang": "en"})
            assert default.status_code == 200 and f"<option selected>{FIRST.id}</option>" in default.text
            page = ta.get("/dashboard/analytics", params={"assignment": QKV.id, "lang": "en"})
            assert page.status_code == 200 and "3 students with a counted result" in page.text
            text = page.text
            assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
            assert "<b>A</b>" not in text and 'data-section="&lt;b&gt;A&lt;/b&gt;"' in text
            assert "corrected item-total correlation" in text and "no section" in text
            row = re.search(r'<tr data-exercise="2.1">.*?</tr>', text, re.S).group(0)
            assert '<td class="pass-rate">67%</td>' in row and "<code>off_by_one</code> × 1" in row
            assert "1.5 <small>(2 of 3 reached it)</small>" in row and '<td class="time">1 h</td>' in row
            # The histogram: this assignment's three totals of its maximum, 12 with its written answer (67%, 25%,
            # 42%), not 01's 0 among them.
            svg = re.search(r"<svg role='img' aria-label='Totals of 02_qkv_attention'.*?</svg>", text, re.S).group(0)
            assert "<title>Totals of 02_qkv_attention</title>" in svg
            assert "<title>0–10: 0</title>" in svg and "<title>20–30: 1</title>" in svg
            assert "<title>40–50: 1</title>" in svg and "<title>60–70: 1</title>" in svg
            zh = ta.get("/dashboard/analytics", params={"assignment": QKV.id, "lang": "zh"})
            assert "校正后的题目与总分相关" in zh.text and "2/3 人拿到满分" in zh.text
            sheet = ta.get("/dashboard/analytics.csv", params={"assignment": QKV.id})
            assert sheet.status_code == 200 and sheet.headers["cache-control"] == "no-store"
            assert sheet.headers["content-type"].startswith("text/csv")
            rows = list(csv.DictReader(io.StringIO(sheet.text)))
            assert [r["exercise"] for r in rows] == IDS + [q.id for q in QKV.questions]   # the written one: n 0
            assert rows[-1]["n"] == "0"
            assert rows[0]["median_seconds_to_full"] == "3600" and rows[1]["top_mistakes"] == "no_scale: 1"
            totals = list(csv.DictReader(io.StringIO(ta.get("/dashboard/analytics.csv", params={
                "assignment": QKV.id, "table": "totals"}).text)))
            assert [(t["student"], t["name"]) for t in totals] == [
                ("ada", "<script>alert(1)</script>"), ("ben", ""), ("cat", "'=HYPERLINK(1)")]
            empty = ta.get("/dashboard/analytics", params={"assignment": COURSE.assignments[2].id, "lang": "en"})
            assert empty.status_code == 200 and 'id="analytics-empty"' in empty.text and "<svg" not in empty.text
            padding = COURSE.assignments[2]             # no student on any exercise or written question
            assert empty.text.count("<td>0</td>") == len(padding.exercises) + len(padding.questions)
            unknown = ta.get("/dashboard/analytics", params={"assignment": "09_nope", "lang": "en"})
            assert unknown.status_code == 404 and "no assignment 09_nope" in unknown.text
            assert QKV.id in unknown.text                              # the ones there are, named
            assert ta.get("/dashboard/analytics.csv", params={"assignment": "09_nope"}).status_code == 404
            bad = ta.get("/dashboard/analytics.csv", params={"assignment": QKV.id, "table": "everything"})
            assert bad.status_code == 422 and "exercises, sections, totals" in bad.text


def test_a_written_answer_a_person_graded_is_an_item_and_one_waiting_is_not():
    """Issue 51: the written questions sit beside the exercises, from the marks given (one waiting: no item yet)."""
    graded = [result(s, {e.id: e.points for e in QKV.exercises}) for s in ("a", "b", "c")]
    for r, points in zip(graded, (2.0, 1.0, None)):
        r["questions"] = [{"question": "2.Q1", "max_points": 2.0, "points": points}]
    found = A.analyse(QKV.id, QKV.points, [(e.id, e.points) for e in QKV.exercises] + [("2.Q1", 2.0)], graded, [])
    written = found.exercises[-1]
    assert (written.exercise, written.n, written.full, written.mean) == ("2.Q1", 2, 1, 1.5)
    assert written.distribution == [(1.0, 1), (2.0, 1)]

