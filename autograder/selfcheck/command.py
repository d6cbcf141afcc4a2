"""``autograder check NOTEBOOK``: run a saved notebook in a separate process, supervised (a cell or a
call still running after ``limits.call_seconds`` is stopped and named), then its public checks, all within
``limits.submission_seconds``: the checks have a time of their own that no cell can spend, and the table
lists every exercise of the notebook, whatever stopped the run.

This module is the command line (and the students' own ``autograder`` command, :func:`main`): it reads the
arguments and course.yml, refuses an unknown ``--exercise`` before anything runs, and hands the rest to
:mod:`autograder.selfcheck.parent` (the parent), :mod:`autograder.selfcheck.child` (the notebook and the
checks) and :mod:`autograder.selfcheck.execute` (the cells).
"""
from __future__ import annotations

import argparse
import difflib
import shutil
import sys
from pathlib import Path

from autograder.core.errors import UnknownExercise, run_command, use_course
from autograder.core.messages import text
from autograder.course.notebook import read_notebook, skip_unused_schema_formats
from autograder.core.version import __version__
from autograder.selfcheck import submit as submitting
from autograder.selfcheck.exercises import resolve
from autograder.selfcheck.results import LANGUAGES, language_of
from autograder.selfcheck.parent import supervise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the saved notebook (.ipynb) to check")
    parser.add_argument("--language", choices=LANGUAGES, help="language of the messages (default: course.yml's)")
    parser.add_argument("--exercise", action="append", metavar="ID",
                        help="check only this exercise (repeatable; default: every exercise of the notebook)")


def run(args: argparse.Namespace) -> int:
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    skip_unused_schema_formats()
    read_notebook(args.notebook)             # NotebookError: the CLI prints it and exits 2
    course = load_course()
    lang = language_of(args.language, course)
    chosen: list[str] = []
    for ex_id in args.exercise or []:        # a typo fails before the notebook runs
        found, _, problems = resolve(course, ex_id, {})
        if problems:
            # In the student's language, and in a terminal's terms (--exercise, not check(...)).
            ids = [e.id for e in course.exercises]
            close = difflib.get_close_matches(str(ex_id), ids + [e.function for e in course.exercises], n=1,
                                              cutoff=0.5)
            guess = next((e.id for e in course.exercises if close and close[0] in (e.id, e.function)), None)
            key = "selfcheck.cli_unknown_exercise_guess" if guess else "selfcheck.cli_unknown_exercise"
            raise UnknownExercise(text(key, lang, key=repr(ex_id), guess=guess or "", ids=", ".join(ids)))
        chosen.extend(e.id for e in found if e.id not in chosen)
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else 120
    return supervise(str(Path(args.notebook).resolve()), chosen, lang, course.limits, tty=tty, width=width)


# -- the students' ``autograder`` command ------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """``autograder check NOTEBOOK``, as the student bundle installs it.

    The kit's own command (:mod:`autograder.cli`) imports the grading modules, which the
    bundle does not ship; this one needs only the self-check's files.
    """
    parser = argparse.ArgumentParser(
        prog="autograder", description="The course's self-check: run the public checks on a saved notebook.",
        epilog="Example: autograder check NOTEBOOK.ipynb --exercise 2.1 --language en (NOTEBOOK: yours, as saved)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} (self-check)")
    parser.add_argument("--course", metavar="FILE", help="course.yml to use (default: the installed one)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_arguments(sub.add_parser("check", help="run the public self-checks on a saved notebook",
                                 description="Run the public self-checks on a saved notebook; exit 0 when all pass."))

    submitting.add_arguments(sub.add_parser("submit", help="hand a saved notebook to the course's grading service",
                                            description="Hand a saved notebook to the course's grading service and "
                                                        "show its verdict."))

    def work() -> int:
        args = parser.parse_args(argv)
        use_course(args.course)
        if args.command == "submit":
            return submitting.run(args)
        if args.command != "check":
            parser.print_help()
            return 2
        return run(args)

    return run_command(work)


if __name__ == "__main__":
    sys.exit(main())
