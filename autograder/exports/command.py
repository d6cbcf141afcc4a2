"""``autograder export gradescope|otter ASSIGNMENT``, and ``python -m autograder.exports gradescope-run``
(what Gradescope's run_autograder runs).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder import grading as G
from autograder.core.atomic import atomic_write_bytes
from autograder.course.config import load_course
from autograder.core.errors import AutograderError, report
from autograder.exports.gradescope import run_gradescope, zip_bytes
from autograder.exports.targets import targets
from autograder.course.notebook import skip_unused_schema_formats


# -- the command ------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for name, target in targets().items():
        p = sub.add_parser(name, help=target.help, description=target.help)
        p.add_argument("assignment", metavar="ASSIGNMENT", help="assignment ID (see autograder course)")
        p.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                       help="folder to write the zip into (default: the course's dist/)")
        p.add_argument("--language", choices=("zh", "en"), default=None,
                       help="language of the students' results (default: course.yml's)")
    p = sub.add_parser("gradescope-run", help="inside Gradescope: grade the submission, write results.json",
                       description="What run_autograder runs (not for instructors' machines).")
    p.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")),
                   help="the folder laid out as Gradescope's /autograder (default: $AUTOGRADER_ROOT or /autograder)")
    p.add_argument("--assignment", required=True)
    p.add_argument("--language", choices=("zh", "en"), default=None)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")


def run(args: argparse.Namespace) -> int:
    skip_unused_schema_formats()
    if args.target == "gradescope-run":
        return run_gradescope(args.root, args.assignment, device=args.device, language=args.language)

    target = targets()[args.target]
    course = load_course()
    assignment = course.assignment(args.assignment)
    G.check_catalog(course, {assignment.id})  # refuse to export a grader that cannot grade
    out = Path(args.out) if args.out is not None else course.root / "dist"
    files = target.files(course, assignment, language=args.language)
    path = out / target.zip_name(assignment.id)
    data = zip_bytes(files)
    atomic_write_bytes(path, data)
    print(f"wrote {path} ({len(files)} files, {len(data) / 1024:.0f} KiB)")
    print(target.next_steps(path, assignment))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.exports ...``: run_autograder's entry (no nbgrader needed, unlike the full CLI)."""
    parser = argparse.ArgumentParser(prog="python -m autograder.exports", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except AutograderError as exc:
        return report(exc)


if __name__ == "__main__":
    sys.exit(main())
