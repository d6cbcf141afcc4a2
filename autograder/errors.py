"""The kit's exceptions: one module, so the CLI has one place to catch user errors."""
from __future__ import annotations

from typing import Callable


class AutograderError(Exception):
    """A user error: printed as one ``ERROR ...`` line (plus a hint), exit code 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(AutograderError):
    """course.yml is missing, unreadable or invalid."""


class BuildError(AutograderError):
    """source/ cannot be turned into release/ and solutions/."""


class StaleError(AutograderError):
    """Derived files do not match source/ (``autograder build --check``)."""

    exit_code = 1


class NotebookError(AutograderError):
    """A notebook cannot be read (bad JSON, wrong nbformat, ...)."""


class UnknownExercise(AutograderError):
    """An exercise ID that course.yml does not declare."""


def report(exc: AutograderError) -> int:
    """Print a user error as one ``ERROR ...`` line (and its hint) on stderr; its exit code."""
    import sys

    print(f"ERROR {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"  hint: {exc.hint}", file=sys.stderr)
    return exc.exit_code


def run_command(work: "Callable[[], int]") -> int:
    """The one exit path of a command line: ``work()``'s code, a user error's one ERROR line, or 130."""
    import sys

    try:
        return int(work() or 0)
    except AutograderError as exc:
        return report(exc)
    except KeyboardInterrupt:
        print("ERROR interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`autograder course | head`): nothing more to say, and nothing to flush.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def use_course(path: str | None) -> None:
    """``--course FILE``: every later load_course() reads that file."""
    import os

    if path:
        os.environ["AUTOGRADER_COURSE"] = os.path.abspath(path)
