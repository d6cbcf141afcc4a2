"""The kit's exceptions: one module, so the CLI has one place to catch user errors."""
from __future__ import annotations


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
