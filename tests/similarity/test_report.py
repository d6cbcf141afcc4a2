"""The report's files: the CSV's header, order and neutralized cells; the HTML page's note, its escaping of every
student text, and no script."""
from __future__ import annotations

import csv
import io

from autograder.similarity.evidence import Explained, Shown, Side
from autograder.similarity.report import HEADER, Summary, csv_text, html_text, write

HOSTILE = "<script>alert('x')</script>"


def pair(a: str, b: str, score: float, evidence: list[str], lines: list[str] | None = None) -> Explained:
    side = Side(lines or ["def f(x):", "    return x"], {1})
    return Explained("02_qkv_attention", a, b, score, {"code": score, "oddities": 0.0, "written": 0.0, "timing": 0.0},
                     evidence, [Shown("2.3", side, None)])


def test_the_csv_has_its_header_and_neutralized_cells():
    rows = list(csv.reader(io.StringIO(csv_text([pair("ada", "ben", 0.91, ["2.3: shared rare fragment `x`"]),
                                                 pair("=cmd|' /C calc'!A0", "zoe", 0.4, ["-2+3"])]))))
    assert rows[0] == HEADER == ["assignment", "student_a", "student_b", "score", "evidence"]
    assert rows[1] == ["02_qkv_attention", "ada", "ben", "0.91", "2.3: shared rare fragment `x`"]
    assert rows[2][1].startswith("'=") and rows[2][4] == "'-2+3"


def test_the_page_escapes_student_text_and_holds_the_note(tmp_path):
    page = html_text([pair(HOSTILE, "zoe", 0.9, [f"2.3: identical comment `# {HOSTILE}`"], ["def f(x):", HOSTILE])],
                     [Summary("02_qkv_attention", 12, 30, 1, 1)], [f"{HOSTILE}/nb.ipynb: invalid JSON"], "Course",
                     0.3)
    assert "<script>" not in page and "&lt;script&gt;" in page
    note = page.index("evidence for a conversation, not a finding")
    assert note < page.index("&lt;script&gt;") and "never" in page[note:note + 600]
    assert 'class="row hit"' in page and "no function for this exercise" in page
    csv_path, html_path = write(tmp_path / "out", [], [], [], "Course", 0.3)
    assert csv_path.read_text(encoding="utf-8") == ",".join(HEADER) + "\n"
    assert "nothing here is worth a look" in html_path.read_text(encoding="utf-8")
