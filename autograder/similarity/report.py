"""The similarity report's two files: ``similarity.csv`` (one row per pair worth a look) and ``similarity.html``
(the same pairs side by side, with the note that a score is evidence for a conversation, not a finding).

``similarity.csv``'s columns are :data:`HEADER`: the pairs sorted by score, highest first, ``student_a`` before
``student_b`` in text order, each cell neutralized against formula injection (:func:`autograder.core.text.csv_rows`).
The HTML page is self-contained (inline CSS, no script) and rendered by Jinja2 with autoescaping on: every name,
line of code and phrase in it is student text, escaped. Both files are written atomically.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autograder.core.atomic import atomic_write_text
from autograder.core.text import csv_rows
from autograder.similarity.evidence import Explained

#: similarity.csv's header.
HEADER = ["assignment", "student_a", "student_b", "score", "evidence"]
CSV_NAME, HTML_NAME = "similarity.csv", "similarity.html"
TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclass
class Summary:
    """One assignment's line of the report."""

    assignment: str
    notebooks: int
    candidates: int
    worth: int
    shown: int


def csv_text(pairs: list[Explained]) -> str:
    """similarity.csv's text: the header, then one row per pair (in the order given)."""
    return csv_rows([HEADER], ([p.assignment, p.student_a, p.student_b, p.score, p.evidence_text] for p in pairs))


def html_text(pairs: list[Explained], summaries: list[Summary], skipped: list[str], course: str,
              floor: float) -> str:
    """similarity.html's text (see the module's docstring)."""
    from jinja2 import Environment, FileSystemLoader  # noqa: PLC0415 - only the report's page needs jinja2

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(HTML_NAME).render(pairs=pairs, summaries=summaries, skipped=skipped, course=course,
                                              floor=floor)


def write(out: Path, pairs: list[Explained], summaries: list[Summary], skipped: list[str], course: str,
          floor: float) -> tuple[Path, Path]:
    """Write both files into ``out`` (made if need be); their paths."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / CSV_NAME, out / HTML_NAME
    atomic_write_text(csv_path, csv_text(pairs))
    atomic_write_text(html_path, html_text(pairs, summaries, skipped, course, floor))
    return csv_path, html_path
