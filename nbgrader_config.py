"""nbgrader's configuration for this course (read by `nbgrader ...` run from this folder).

`nbgrader generate_assignment <assignment> --force` writes release/<assignment>/ with
the very pipeline of `autograder build` (autograder.authoring.notebooks.NBGRADER_PREPROCESSORS), so
both write the same bytes and never fight. The course's checks, hidden checks and
known mistakes beside each source notebook are the grader's: nbgrader never copies
them into release/ (CourseDirectory.ignore). nbgrader spawns `alembic`: put the
virtual environment's bin/ first on PATH.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # this checkout's autograder, even where the kit is not installed

# The kernels nbgrader starts (autograde: `check("2.4", score=True)` grades in them) use this course,
# never one found from the submission's folder.
os.environ["AUTOGRADER_COURSE"] = os.path.join(HERE, "course.yml")

from autograder.authoring.notebooks import NBGRADER_PREPROCESSORS, course_stub, course_text_stub  # noqa: E402
from autograder.course.files import COURSE_FILES  # noqa: E402
from nbgrader.coursedir import CourseDirectory  # noqa: E402

c = get_config()  # noqa: F821 - traitlets defines it for config files

c.CourseDirectory.root = HERE
# nbgrader's release/fetch/submit/collect exchange needs a course id (release_assignment fails without one).
c.CourseDirectory.course_id = "attention-from-scratch"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")  # git-ignored
# checks.py, hidden.py, mistakes.py: the grader's, never released (nor collected back from students).
c.CourseDirectory.ignore = [*CourseDirectory.class_traits()["ignore"].default(), *sorted(COURSE_FILES)]

# The stub names the exercise: ex2_4 -> 'raise NotImplementedError("Need to implement for exercise 2.4")'.
c.ClearSolutions.code_stub = {"python": course_stub(HERE)}
c.ClearSolutions.text_stub = course_text_stub(HERE)     # a written answer's cell, in the release
# `nbgrader export` writes every score in hundredths, as grades.csv does (nbgrader's own sums are floats).
c.ExportApp.plugin_class = "autograder.exports.nbgrader_export.HundredthsCsvExport"
c.GenerateAssignment.preprocessors = NBGRADER_PREPROCESSORS
