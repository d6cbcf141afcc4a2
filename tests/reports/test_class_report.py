"""The instructor's class report and the students' feedback speak the course's language."""
from __future__ import annotations

import csv
import datetime as dt
import io
import re
import warnings

import pytest

from autograder import reports as R
from autograder.course.config import load_course

COURSE = load_course()
CHECK = {"exercise": "2.2", "audience": "public", "kind": "value", "withheld": False, "mistake": None,
         "mistake_message": None, "forbidden": []}


def _result(student: str, points: float, passed: bool) -> dict:
    checks = [dict(CHECK, check="a", title={"zh": "形状", "en": "shape"}, status="passed", passed=True,
                   points=0.67, max_points=0.67, message=None),
              dict(CHECK, check="b", title={"zh": "数值", "en": "values"}, status="passed" if passed else "failed",
                   passed=passed, points=0.67 if passed else 0.0, max_points=0.67,
                   message=None if passed else {"zh": "与参考答案不符", "en": "differs from the reference"}),
              dict(CHECK, check="c", title={"zh": "稳定", "en": "stable"}, status="passed", passed=True,
                   points=0.66, max_points=0.66, message=None)]
    return {"key": f"{student}__02_qkv_attention", "student": student, "assignment": "02_qkv_attention",
            "points": points, "max_points": 2.0, "status": "graded", "message": None, "notes_msg": [],
            "cells": [{"index": 4, "status": "error", "error_type": "ValueError", "message": "bad"}],
            "exercises": [{"exercise": "2.2", "function": "softmax", "points": points, "max_points": 2.0,
                           "status": "passed" if passed else "failed", "checks": checks}]}


RESULTS = [_result("ada", 2.0, True), _result("ben", 1.33, False)]
#: The course these results are of: 02 as one exercise, 2.2, of 2 points (an assignment's maximum is course.yml's,
#: autograder.course.written.maximum).
ONE_EXERCISE = COURSE.model_copy(update={"assignments": [
    a.model_copy(update={"exercises": [e for e in a.exercises if e.id == "2.2"], "questions": []})
    if a.id == "02_qkv_attention" else a for a in COURSE.assignments]})


def test_the_class_report_is_chinese_for_a_chinese_course_and_draws_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # a missing glyph warns: it must not happen
        page = R.class_report_html(RESULTS, COURSE, "zh")
    text = re.sub(r"<[^>]+>|data:image/svg\+xml;base64,[^'\"]+", " ", page)
    assert "班级报告" in page and "最常见的已诊断错误" in page and "未通过" in page
    for english in ("class report", "Scores", "submissions", "Pass rate", "mean score", "feedback"):
        assert english not in text, english
    assert "class report" in R.class_report_html(RESULTS, COURSE, "en")


def _charts(page):
    """The report's charts, decoded and parsed (each a well-formed SVG document)."""
    import base64
    import xml.etree.ElementTree as ET

    found = re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", page)
    return [ET.fromstring(base64.b64decode(m)) for m in found]


def test_the_charts_are_svg_in_the_report_s_language_whatever_fonts_the_grader_has(monkeypatch):
    """The charts are drawn as SVG (no matplotlib on the trusted side): their labels are the report's language,
    Chinese included on a machine without a Chinese font (the browser draws the text), and the bars say what
    the tables say."""
    monkeypatch.setattr(R, "cjk_font", lambda: None)
    ben = _result("ben", 1.33, False)
    ben["exercises"][0]["checks"][1]["mistake"] = "no-max-subtraction"
    page = R.class_report_html([RESULTS[0], ben], ONE_EXERCISE, "zh")
    charts = _charts(page)
    assert len(charts) == 3
    texts = ["".join(c.itertext()) for c in charts]
    assert "得分分布" in texts[0] and "各练习的满分率" in texts[1] and "最常见的已诊断错误" in texts[2]
    ns = "{http://www.w3.org/2000/svg}"
    # the histogram: ada at 100% (last bin), ben at 66.5% (the 60-70 bin); bars of height 0 elsewhere
    heights = [float(r.get("height")) for r in charts[0].iter(f"{ns}rect")][1:]    # (the first: the background)
    assert len(heights) == 10 and heights[6] == heights[9] > 0 and sum(h > 0 for h in heights) == 2
    # one exercise, half the class with full points: a bar half the plot's height
    bar = [r for r in charts[1].iter(f"{ns}rect")][1]
    assert "2.2: 50" in "".join(bar.itertext())
    en = "".join("".join(c.itertext()) for c in _charts(R.class_report_html(RESULTS, COURSE, "en")))
    assert "Score histogram" in en and "得分" not in en
    assert "2.2 no-max-subtraction: 1" in "".join(charts[2].itertext())


def test_a_chart_escapes_its_labels():
    from autograder.reports import charts

    svg = charts.bar_chart(["<script>alert(1)</script>", "a & 'b'"], [3, 1], title="t<", xlabel="x>")
    import xml.etree.ElementTree as ET

    doc = ET.fromstring(svg)
    assert "<script>" not in svg and not list(doc.iter("{http://www.w3.org/2000/svg}script"))
    assert "<script>alert(1)</script>" in "".join(doc.itertext())      # shown as text, never as markup
    assert [charts.nice_step(x) for x in (1, 7, 10, 45, 100)] == [0.2, 2, 2, 10, 20]


@pytest.mark.parametrize("language", ["zh", "en"])
def test_feedback_lists_every_check_with_its_points_and_counts_cells_from_one(language):
    md = R.feedback_markdown(RESULTS[1], COURSE, language)
    page = R.feedback_html(RESULTS[1], COURSE, language)
    for text in (md, page):
        assert "0.67 / 0.67" in text and "0 / 0.67" in text and "0.66 / 0.66" in text   # passed ones too
        assert "1.33 / 2" in text
    assert re.search(r"(单元格|cell) 5\b", md), md                    # index 4 is the fifth cell
    title = COURSE.exercise("2.2")[1].title_in(language)
    assert title in md


def test_a_plot_title_in_chinese_is_drawn_with_a_font_that_has_its_glyphs():
    """Issue 24, item 11: the set-up installs a CJK font (scripts/install-font.sh), the class report and the
    notebooks use it, and a Chinese title is drawn with glyphs, not boxes or an English fallback."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import font_manager
    from matplotlib.figure import Figure
    from matplotlib.ft2font import FT2Font

    from autograder.reports.class_report import cjk_font

    font = cjk_font()
    assert font is not None, "no CJK font: scripts/install-font.sh installs one (fonts-wqy-microhei)"
    with matplotlib.rc_context({"font.family": [font, "sans-serif"]}):
        fig = Figure()
        ax = fig.subplots()
        title = ax.set_title("各练习的满分率")
        fig.canvas.draw()
        path = font_manager.findfont(title.get_fontproperties(), fallback_to_default=False)
    drawn = FT2Font(path)
    assert all(drawn.get_char_index(ord(c)) for c in "各练习的满分率"), path


def test_every_result_is_the_result_model_and_the_schema_file_is_derived_from_it(tmp_path):
    """Issue 26: one typed result model (autograder.reports.model); the results the grader writes validate
    against it, a file that does not is not read back as a result, and schemas/result.schema.json is the
    model's own schema."""
    import json

    from pydantic import ValidationError

    from autograder.reports import files, model
    from support import ROOT

    assert (ROOT / "schemas" / "result.schema.json").read_text(encoding="utf-8") == model.schema_text(), \
        "regenerate: python -c 'from autograder.reports.model import schema_text; print(schema_text(), end=\"\")' " \
        "> schemas/result.schema.json"
    good = {"schema": 1, "key": "ada__02", "student": "ada", "assignment": "02", "status": "graded",
            "exercises": [{"exercise": "2.1", "function": "f", "points": 1, "max_points": 1, "status": "passed",
                           "checks": [{"exercise": "2.1", "check": "c", "audience": "public", "kind": "numeric",
                                       "title": {"zh": "标题", "en": "title"}, "status": "passed", "passed": True,
                                       "points": 1, "max_points": 1}]}], "future_field": [1, 2]}
    assert model.parse(good).exercises[0].checks[0].title.zh == "标题"
    assert model.checked(good) is good                                   # the dict itself, extras kept
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good), encoding="utf-8")
    assert files.load_result(path) == good
    bad = {**good, "exercises": [{"exercise": "2.1"}]}                   # no points, no status...
    with pytest.raises(ValidationError):
        model.parse(bad)
    path.write_text(json.dumps(bad), encoding="utf-8")
    assert files.load_result(path) is None


def test_the_batch_report_and_feedback_give_the_assignments_due_date_in_the_courses_zone_and_one_maximum():
    """Issue 66, items 1 and 2: the class report's due date is the assignment's (not the first result's extension,
    not UTC, not ISO); an on-time result's feedback is not labelled late; a graded written answer no longer waits,
    and every total is out of the assignment's maximum (its written answers' points included)."""
    from autograder.grading.deadlines import Deadlines, submitted_json
    from autograder.grading.times import SubmittedAt
    from autograder.course.late_policy import Extension
    from autograder.core.messages import say
    from autograder.course.written import answers, maximum

    qkv = COURSE.assignment("02_qkv_attention")
    course = COURSE.model_copy(update={"timezone": "Asia/Shanghai", "assignments": [
        a.model_copy(update={"due": "2026-12-08T23:59:00+08:00"}) if a.id == qkv.id else a
        for a in COURSE.assignments]})
    extended = Deadlines(course, [Extension(student="ada", assignment=qkv.id,
                                            due=dt.datetime(2026, 12, 10, 15, 59, tzinfo=dt.timezone.utc))])
    results = []
    for student, day in (("ada", 9), ("ben", 8)):
        nb = {"cells": [{"cell_type": "markdown", "source": "because",
                         "metadata": {"nbgrader": {"grade_id": "q2_Q1", "grade": True, "solution": True}}}]}
        result = {"key": f"{student}__{qkv.id}", "student": student, "assignment": qkv.id, "status": "graded",
                  "points": qkv.points, "max_points": qkv.points, "exercises": [],
                  "questions": answers(nb, qkv.questions),
                  "notes_msg": [dict(zip(("zh", "en"), say("submission.written_pending", questions="2.Q1",
                                                           points="2")))]}
        if student == "ada":                                       # a person graded ada's answer: 1 of 2
            result["questions"][0].update(points=1.0, status="graded")
            result["raw_points"] = qkv.points + 1
        received = dt.datetime(2026, 12, day, 1, 0, tzinfo=dt.timezone.utc)
        results.append(extended.settle(result, submitted_json(SubmittedAt(received, "test"))))
    full = maximum(qkv).points
    assert [r["max_points"] for r in results] == [full, full]
    report = R.class_report_html(results, course, "zh")
    assert "截止 2026-12-08 23:59 +08:00" in report and "2026-12-10" not in report and "T15:59" not in report
    assert f"{qkv.points + 1:g} / {full:g}" in report
    ada, ben = (R.feedback_markdown(r, course, "zh") for r in results)
    assert "提交期限: 截止时间 2026-12-10 23:59 +08:00（已延期）；按时提交" in ada and "迟交:" not in ada
    assert f"**总分: {qkv.points + 1:g} / {full:g}**" in ada and "等待" not in ada
    assert f"**总分: {qkv.points:g} / {full:g}（其中 2 分的书面问题等待批改：2.Q1）**" in ben
    assert "书面问题等待助教批改" not in ben                      # (said once, beside the total)
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(R.grades_csv(results, course)))}
    assert (rows["ada"]["max"], rows["ada"]["waiting"], rows["ben"]["max"], rows["ben"]["waiting"]) == (
        f"{full:g}", "", f"{full:g}", "2")
