"""What grading writes and reads back: result files (:mod:`~autograder.reports.files`,
:mod:`~autograder.reports.results`), what a student sees and the gradebook
(:mod:`~autograder.reports.feedback`), what the instructor sees (:mod:`~autograder.reports.class_report`)
and the grade files an LMS imports (:mod:`~autograder.reports.lms`). Everything works from result dicts,
so a resumed batch reports exactly what a fresh one would.
"""
from __future__ import annotations

from autograder.reports.files import (GRADED, RESULT_SCHEMA, atomic_write_bytes, atomic_write_text, dump_result,
                                      load_result, remove_stale_temporaries, write_if_changed)  # noqa: F401
from autograder.reports.results import is_graded, load_results, newest_results  # noqa: F401
from autograder.reports.feedback import (cell_message, cell_number, check_lines, exercise_columns, exercise_title,
                                         feedback_html, feedback_markdown, fmt_points, grades_csv,
                                         message_text)  # noqa: F401
from autograder.reports.class_report import (CJK_FONTS, cjk_font, class_report_html, class_stats,
                                             print_summary)  # noqa: F401
from autograder.reports.lms import (CANVAS_FILE, CANVAS_STUDENT_COLUMNS, CANVAS_TOTAL, LMS_SKIPPED_COLUMNS,
                                    LMS_SKIPPED_FILE, MOODLE_COLUMNS, MOODLE_FILE, MOODLE_PARTICIPANT, canvas_csv,
                                    lms_skipped_csv, lms_table, LmsEntry, LmsTable, moodle_csv,
                                    write_lms_csv)  # noqa: F401
