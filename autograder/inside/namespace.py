"""The namespace a notebook's cells execute in outside a real kernel: in the sandbox worker and in
``autograder check NOTEBOOK``.

:func:`autograder.course.notebook.to_python` turns IPython's line magics and shell escapes into calls on
``get_ipython()``; here that is :class:`NeutralIPython`, which does nothing, and ``check(...)`` does nothing
either. It runs next to student code (the worker imports it after the cage is shut), so it imports nothing.
"""
from __future__ import annotations

from typing import Any


class NeutralIPython:
    """Stands in for ``get_ipython()`` while grading: magics and shell escapes do nothing."""

    def run_line_magic(self, *args: Any, **kwargs: Any) -> None:
        return None

    def run_cell_magic(self, *args: Any, **kwargs: Any) -> None:
        return None

    def system(self, *args: Any, **kwargs: Any) -> None:
        return None

    def getoutput(self, *args: Any, **kwargs: Any) -> list[str]:
        return []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def fresh_namespace() -> dict[str, Any]:
    """The globals a notebook's cells execute in (outside a real kernel)."""
    shim = NeutralIPython()
    return {"__name__": "__main__", "__builtins__": __builtins__, "get_ipython": lambda: shim,
            "check": lambda *a, **k: None}
