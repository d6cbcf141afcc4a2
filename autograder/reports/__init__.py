"""What grading writes and reads back: result files (:mod:`~autograder.reports.files`,
:mod:`~autograder.reports.results`), what a student sees and the gradebook
(:mod:`~autograder.reports.feedback`), what the instructor sees (:mod:`~autograder.reports.class_report`)
and the grade files an LMS imports (:mod:`~autograder.reports.lms`). Everything works from result dicts,
so a resumed batch reports exactly what a fresh one would.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers; each loads its module on first use (autograder.lazy)
    from autograder.reports.files import (GRADED, RESULT_SCHEMA, atomic_write_bytes, atomic_write_text, dump_result,
                                          load_result, remove_stale_temporaries, write_if_changed)
    from autograder.reports.results import is_graded, load_results, newest_results
    from autograder.reports.model import Result, checked as checked_result, json_schema, parse
    from autograder.reports.feedback import (cell_message, cell_number, check_lines, exercise_columns, exercise_title,
                                             feedback_html, feedback_markdown, fmt_points, grades_csv, message_text)
    from autograder.reports.class_report import CJK_FONTS, cjk_font, class_report_html, class_stats, print_summary
    from autograder.reports.lms import (LMS_SKIPPED_COLUMNS, LMS_SKIPPED_FILE, LmsEntry, LmsFormat, LmsTable, formats,
                                        id_keys, lms_skipped_csv, lms_table, write_lms_csv)
    from autograder.reports.lms_canvas import CANVAS_STUDENT_COLUMNS, CANVAS_TOTAL, canvas_csv
    from autograder.reports.lms_moodle import MOODLE_COLUMNS, MOODLE_PARTICIPANT, moodle_csv

CANVAS_FILE, MOODLE_FILE = "canvas.csv", "moodle.csv"     # (each format's file: formats()[i].file)

__getattr__ = lazy_exports(__name__, __file__)
