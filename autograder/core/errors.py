"""The kit's exceptions: one module, so the CLI has one place to catch user errors."""
from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


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
    """A notebook cannot be read (bad JSON, wrong nbformat, ...). ``said``: the reason without the file
    name, in both languages (a messages.Msg), for the student's feedback."""

    def __init__(self, message: str, hint: str | None = None, said: object = None, kind: str = "unreadable"):
        super().__init__(message, hint)
        self.said = said
        #: Why, for a caller that answers differently: "too_large" (limits.notebook_mb), "bound" (a notebook
        #: bound: cells, depth, values), "not_json" (empty, not UTF-8, not JSON), else "unreadable".
        self.kind = kind


class UnknownExercise(AutograderError):
    """An exercise ID that course.yml does not declare."""


#: Top-level modules of optional dependencies -> the extra of pyproject.toml that installs them (``make setup``
#: installs every extra; a grading machine needs none of them).
OPTIONAL_MODULES: dict[str, str] = {
    "fastapi": "service", "starlette": "service", "uvicorn": "service", "sqlalchemy": "service",
    "alembic": "service", "multipart": "service", "python_multipart": "service",
    "jupyterhub": "hub", "psycopg": "postgres", "otter": "otter", "dask": "dask", "distributed": "dask",
    "mkdocs": "docs", "material": "docs", "playwright": "browser",
}
PACKAGE_NAME = "attention-course-kit"


class MissingExtra(AutograderError):
    """A command needs an optional dependency that is not installed."""

    def __init__(self, module: str, extra: str):
        super().__init__(f"this needs the kit's {extra!r} extra: the module {module!r} is not installed",
                         hint=f'pip install "{PACKAGE_NAME}[{extra}]" (or `make setup`, which installs every extra)')
        self.module = module
        self.extra = extra


def missing_extra(exc: ModuleNotFoundError) -> MissingExtra | None:
    """The extra that installs the module ``exc`` did not find, if it is one of the kit's optional ones."""
    top = (exc.name or "").partition(".")[0]
    return MissingExtra(top, OPTIONAL_MODULES[top]) if top in OPTIONAL_MODULES else None


def report(exc: AutograderError) -> int:
    """Print a user error as one ``ERROR ...`` line (and its hint) on stderr; its exit code."""
    print(f"ERROR {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"  hint: {exc.hint}", file=sys.stderr)
    return exc.exit_code


def run_command(work: Callable[[], int]) -> int:
    """The one exit path of a command line: ``work()``'s code, a user error's one ERROR line, or 130."""
    try:
        return int(work() or 0)
    except AutograderError as exc:
        return report(exc)
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        return report(extra)
    except KeyboardInterrupt:
        print("ERROR interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`autograder course | head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def finish(code: int) -> NoReturn:
    """Leave the process once a command is done, as the interpreter would but without its teardown.

    Threads are joined and atexit handlers run (sandboxes, temporary folders, multiprocessing) exactly
    as at a normal exit, and the standard streams are flushed; what is skipped is the interpreter's
    destruction of every module object (torch, sympy, matplotlib), half a second or more of a cold
    ``autograder grade`` that frees only memory the kernel frees anyway. For the console scripts only:
    a caller of ``main()`` in the same process (tests) gets its return value instead.
    """
    try:
        shutdown = getattr(threading, "_shutdown", None)   # what Py_Finalize calls: pools stopped, threads joined
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()  # noqa: SLF001 - what Py_Finalize runs, before os._exit skips it
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
        os._exit(code)


def use_course(path: str | None) -> None:
    """``--course FILE``: every later load_course() reads that file."""
    if path:
        os.environ["AUTOGRADER_COURSE"] = os.path.abspath(path)
