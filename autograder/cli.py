"""The ``autograder`` command: one exit point for every subcommand.

User errors (:class:`AutograderError`) print ``ERROR ...`` and a hint and exit
with their code (2 for bad input); only unexpected errors show a traceback.
Each subcommand lives in the module named for its noun and exposes
``add_arguments(parser)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from autograder.core.errors import finish, run_command, use_course

#: subcommand -> (module, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "course": ("autograder.commands.course", "validate course.yml and show the course"),
    "build": ("autograder.authoring.build", "regenerate release/, solutions/ and the student bundle from source/"),
    "check": ("autograder.selfcheck.command", "run the public self-checks on a saved notebook"),
    "submit": ("autograder.selfcheck.submit", "hand a saved notebook to the course's grading service and show "
               "its verdict"),
    "validate": ("autograder.authoring.validate", "prove the check catalog sound (references pass, mistakes caught)"),
    "grade": ("autograder.commands.grade", "grade a folder or zip of submissions in the sandbox"),
    "similarity": ("autograder.similarity.command", "compare a batch's notebooks: the pairs that share what honest "
                   "work does not, as evidence for a conversation, never a finding (instructor only)"),
    "explain": ("autograder.grading.explain", "why a student lost points on an exercise: its hidden checks replayed "
                "with their inputs, the student's output and the reference's (instructor only)"),
    "export": ("autograder.exports.command", "export the grader for Gradescope or Otter"),
    "serve": ("autograder.service.command", "run the grading service: students submit, workers grade, the API "
              "answers (also: serve roster, serve token)"),
    "worker": ("autograder.service.worker", "grade the grading service's queued submissions (a process of its "
               "own; start several, here or on other machines, against one --database)"),
    "doctor": ("autograder.doctor", "show what this machine offers the grader: cage layers, CUDA, CPUs"),
}

#: subcommand -> a function to call before its module is imported: ``grade`` starts its sandbox template
#: (seconds of importing torch) before importing pydantic, rich and its own modules.
EARLY: dict[str, str] = {"grade": "autograder.sandbox.launch:launch_early"}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen subcommand's module is imported (torch costs seconds to import)."""
    parser = argparse.ArgumentParser(
        prog="autograder", description="Build, self-check, validate and grade the attention course kit.",
        epilog="Run `autograder COMMAND --help` for the options of a command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--course", metavar="PATH",
                        help="the course: its course.yml or the folder holding it (default: the nearest course.yml "
                             "from the current folder upward)")
    chosen = _chosen_command(parser, sys.argv[1:] if argv is None else argv)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            if name in EARLY and not {"-h", "--help"} & set(sys.argv[1:] if argv is None else argv):
                early_module, early_function = EARLY[name].split(":")
                getattr(importlib.import_module(early_module), early_function)()
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def _chosen_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The subcommand named on the command line, if any (options before it may take values)."""
    pre = argparse.ArgumentParser(add_help=False)
    for action in parser._actions:  # noqa: SLF001 - argparse lists a parser's options nowhere else
        if action.option_strings and action.nargs != 0 and action.dest != "help":
            pre.add_argument(*action.option_strings, dest=action.dest)
    _, rest = pre.parse_known_args(argv)
    return next((a for a in rest if not a.startswith("-")), None)


def _version() -> str:
    from autograder.core.version import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    def work() -> int:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        use_course(args.course)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 2
        return int(args._run(args) or 0)  # noqa: SLF001 - set_defaults(_run=): no option's dest can take it

    return run_command(work)


def entry() -> NoReturn:
    """The ``autograder`` console script: :func:`main`, then :func:`autograder.core.errors.finish`."""
    finish(main())


if __name__ == "__main__":
    entry()
