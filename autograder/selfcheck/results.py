"""What a self-check returns and shows: its result, its notes, how far it got, and in which language.

:class:`SelfCheckResult` is truthy when every check it ran passed, and shows as HTML in Jupyter, as text in a
terminal; a :class:`Note` is a line that is no check's; the :class:`Progress` of a self-check stopped part way
still lists every exercise it was to check, those not checked marked so and why.

It trusts the catalog's results as given (``checks.ExerciseResult`` objects) and renders them through
:mod:`autograder.selfcheck.render`; it runs nothing of the student's.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograder import catalog as C
from autograder.core.messages import Msg, say
from autograder.selfcheck.render import render_html, render_text

if TYPE_CHECKING:
    from autograder.course.config import Course


LANGUAGES = ("zh", "en")


#: A message in both languages: the catalogue's (autograder.core.messages), one type for the whole kit.
Text = Msg


@dataclass
class Note:
    """A line that is not a check result: an unknown ID, a cell that raised, a check that broke."""

    level: str      # "info" (calm) or "error" (counts as not passed)
    message: Text


@dataclass
class SelfCheckResult:
    """What ``check()`` returns: truthy when every check it ran passed.

    Jupyter shows it once (HTML); a terminal shows its text. ``exercises`` holds
    ``checks.ExerciseResult`` objects, one per exercise run.
    """

    exercises: list[Any]
    language: str = "zh"
    notes: list[Note] = field(default_factory=list)
    seconds: float = 0.0
    title: str = ""
    _shown_at: Any = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return bool(self.exercises) and all(e.status.value == "passed" for e in self.exercises) \
            and not any(n.level == "error" for n in self.notes)

    def __bool__(self) -> bool:
        return self.passed

    # rendering ------------------------------------------------------------
    def text(self) -> str:
        return render_text(self)

    def html(self) -> str:
        return render_html(self)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return self.text()

    def _ipython_display_(self) -> None:
        # check() displays its result itself (so a check in the middle of a cell shows too);
        # the displayhook then finds the same object at the end of that cell: show it once.
        shell = ipython_shell()
        count = getattr(shell, "execution_count", None)
        if self._shown_at is not None and self._shown_at == count:
            return
        self._shown_at = count
        from IPython.display import display

        display({"text/html": self.html(), "text/plain": self.text()}, raw=True)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "language": self.language, "seconds": round(self.seconds, 4),
                "exercises": [e.to_json() for e in self.exercises],
                "notes": [{"level": n.level, **n.message._asdict()} for n in self.notes]}


@dataclass
class Progress:
    """How far a self-check got: the exercises it was to check (course.yml Exercise objects, or anything with
    their ``id``, ``function`` and ``points``), in order, under ``title``, and the results so far."""

    exercises: list[Any] = field(default_factory=list)
    title: str = ""
    results: list[Any] = field(default_factory=list)

    def listed(self, why: Msg, status: str = "timeout") -> list[Any]:
        """Every exercise, in order: its result where it was checked, else a row saying it was not, and ``why``."""
        done = {r.exercise: r for r in self.results}
        return [done[ex.id] if ex.id in done else not_checked(ex, why, status) for ex in self.exercises]


def not_checked(ex: Any, why: Msg, status: str = "timeout") -> Any:
    """The result of an exercise the self-check did not check (0 points, one row saying so, and ``why``)."""
    return whole_exercise(C, ex, C.Status(status), say("selfcheck.not_checked", why=why))


def whole_exercise(C: Any, ex: Any, status: Any, message: Any) -> Any:
    """An exercise's result as one row of ``status`` and ``message`` for all its public checks, 0 points."""
    row = C.CheckResult(ex.id, "(all)", C.Audience.PUBLIC.value, "", say("selfcheck.public_checks"),
                        status, 0.0, ex.points, message=message)
    return C.ExerciseResult(ex.id, ex.function, 0.0, ex.points, status, [row])


def ipython_shell() -> Any:
    ipython = sys.modules.get("IPython")   # never import IPython just to learn it is absent
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # noqa: BLE001 - a half-imported or odd IPython: treated as no shell
        return None


def language_of(language: str | None, course: Course | None, strict: bool = False) -> Any:
    """zh or en: the requested one ("zh-CN" counts as zh), else course.yml's, else zh."""
    if language is not None:
        lang = str(language).strip().lower()
        for known in LANGUAGES:
            if lang == known or lang.startswith(known + "-") or lang.startswith(known + "_"):
                return known
    if strict:
        return None
    if course is not None:
        return str(getattr(course.language, "value", course.language))
    return "zh"
