"""An auto-graded PyTorch course kit: attention from scratch.

Students call :func:`check` in their notebooks; instructors use the
``autograder`` command (build, check, validate, grade).
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["check", "__version__"]


def check(exercise: str | None = None, *, language: str | None = None, score: bool = False):
    """Self-check one exercise (``check("2.4")``) or every exercise of the notebook (``check()``).

    Finds the student's functions in the calling notebook's namespace, runs the
    public checks and shows the result (HTML in JupyterLab, text in a terminal).

    ``check("2.4", score=True)`` is the exercise's nbgrader test cell: its value is the
    exercise's points, a bare number nbgrader reads as partial credit. Under ``nbgrader
    autograde`` on the instructor's machine that is every check, hidden ones included; on a
    student's machine (and in ``nbgrader validate``) the public checks' share of the points.
    """
    if score:
        from autograder.selfcheck import score as _score

        return _score(exercise, language=language, _depth=2)
    from autograder.selfcheck import check as _check

    return _check(exercise, language=language, _depth=2)
