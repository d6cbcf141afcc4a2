"""The instructor's class report and the students' feedback speak the course's language."""
from __future__ import annotations

import re
import warnings

import pytest

from autograder import reports as R
from autograder.config import load_course

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


def test_the_class_report_is_chinese_for_a_chinese_course_and_draws_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # a missing glyph warns: it must not happen
        page = R.class_report_html(RESULTS, COURSE, "zh")
    text = re.sub(r"<[^>]+>|data:image/png;base64,[^'\"]+", " ", page)
    assert "班级报告" in page and "最常见的已诊断错误" in page and "未通过" in page
    for english in ("class report", "Scores", "submissions", "Pass rate", "mean score", "feedback"):
        assert english not in text, english
    assert "class report" in R.class_report_html(RESULTS, COURSE, "en")


def test_without_a_chinese_font_the_plots_fall_back_to_english_labels(monkeypatch):
    monkeypatch.setattr(R, "cjk_font", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = R.class_report_html(RESULTS, COURSE, "zh")
    assert "班级报告" in page                  # the page itself stays Chinese (the browser has the fonts)


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
