"""``ast.parse``, one thread at a time.

CPython 3.11 converts a parsed tree to Python objects with a recursion counter that is not per thread:
two threads parsing at once (grading lanes that are threads, validate's pool) can fail with ``SystemError:
AST constructor recursion depth mismatch``, which would read as a grader fault on an honest submission.
Every parse of the kit's trusted side goes through :func:`parse`.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.Module:
    """:func:`ast.parse`, serialized across threads."""
    with _LOCK:
        return ast.parse(source, filename, mode)   # type: ignore[return-value]
