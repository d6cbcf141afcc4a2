"""What grading writes and reads back: result files (:mod:`~autograder.reports.files`,
:mod:`~autograder.reports.results`), what a student sees and the gradebook
(:mod:`~autograder.reports.feedback`), what the instructor sees (:mod:`~autograder.reports.class_report`)
and the grade files an LMS imports (:mod:`~autograder.reports.lms`). Everything works from result dicts,
so a resumed batch reports exactly what a fresh one would.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.reports.files import (GRADED as GRADED, RESULT_SCHEMA as RESULT_SCHEMA,
                                          atomic_write_bytes as atomic_write_bytes,
                                          atomic_write_text as atomic_write_text, dump_result as dump_result,
                                          load_result as load_result,
                                          remove_stale_temporaries as remove_stale_temporaries,
                                          write_if_changed as write_if_changed)
    from autograder.reports.results import (is_graded as is_graded, load_results as load_results,
                                            newest_results as newest_results)
    from autograder.reports.model import (Result as Result, checked as checked_result, json_schema as json_schema,
                                          parse as parse)
    from autograder.reports.feedback import (cell_message as cell_message, cell_number as cell_number,
                                             check_lines as check_lines, exercise_columns as exercise_columns,
                                             exercise_title as exercise_title, feedback_html as feedback_html,
                                             feedback_markdown as feedback_markdown, fmt_points as fmt_points,
                                             grades_csv as grades_csv, message_text as message_text)
    from autograder.reports.class_report import (CJK_FONTS as CJK_FONTS, cjk_font as cjk_font,
                                                 class_report_html as class_report_html, class_stats as class_stats,
                                                 print_summary as print_summary)
    from autograder.reports.lms import (LMS_SKIPPED_COLUMNS as LMS_SKIPPED_COLUMNS,
                                        LMS_SKIPPED_FILE as LMS_SKIPPED_FILE, LmsEntry as LmsEntry,
                                        LmsFormat as LmsFormat, LmsTable as LmsTable, formats as formats,
                                        id_keys as id_keys, lms_skipped_csv as lms_skipped_csv, lms_table as lms_table,
                                        write_lms_csv as write_lms_csv)
    from autograder.reports.lms_canvas import (CANVAS_STUDENT_COLUMNS as CANVAS_STUDENT_COLUMNS,
                                               CANVAS_TOTAL as CANVAS_TOTAL, canvas_csv as canvas_csv)
    from autograder.reports.lms_moodle import (MOODLE_COLUMNS as MOODLE_COLUMNS,
                                               MOODLE_PARTICIPANT as MOODLE_PARTICIPANT, moodle_csv as moodle_csv)

CANVAS_FILE, MOODLE_FILE = "canvas.csv", "moodle.csv"     # (each format's file: formats()[i].file)

__getattr__ = lazy_exports(__name__, __file__)
