"""Property-based tests (hypothesis) of the trusted side against hostile input (issue 9).

Generated: file and folder names of arbitrary bytes, text with surrogates and control
characters, notebook structures of any JSON shape, values of any kind returned by the
student's function. Whatever comes, every run ends with one row per submission, outputs
within their caps, safe CSV cells and no traceback.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import make_samples as MS
from autograder import grading as G
from autograder import reports as R
from autograder.course.config import load_course
from autograder.course.notebook import NotebookError, parse_notebook
from autograder.grading.evidence import notebook_evidence
from autograder.grading.submissions import discover
from autograder.core.text import TRUNCATED, clean, csv_cell, csv_rows, STEM_HASH, file_stem, line

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
#: Any code point, lone surrogates included (hypothesis leaves them out by default).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FORMULA = ("=", "+", "-", "@", "\t", "\r")
FAST = settings(max_examples=300, deadline=None)


# -- the text gate ------------------------------------------------------------------------------
@FAST
@given(ANY_TEXT, st.integers(1, 500))
def test_clean_text_is_valid_utf8_printable_and_bounded(text, limit):
    out = clean(text, limit)
    out.encode("utf-8")                                  # never raises: no lone surrogate survives
    assert not CONTROL.search(out)
    assert len(out) <= limit + len(TRUNCATED)
    assert "\n" not in line(text, limit) and "\t" not in line(text, limit)


def _gate_by_rule(text: str, limit: int, one_line: bool) -> str:
    """The text gate's rule written out step by step (no fast path): what clean and line must return."""
    from autograder.core import text as T
    if one_line:
        text = T._LINE_BREAKS.sub(" ", text)
    cut = len(text) > limit * 2
    text = text[: limit * 2]
    text = T._CONTROLS.sub("", T._SURROGATES.sub("\ufffd", text).replace("\r\n", "\n").replace("\r", "\n"))
    if len(text) > limit:
        text, cut = text[:limit], True
    text = text + TRUNCATED if cut else text
    return text.replace("\n", " ") if one_line else text


@FAST
@given(st.one_of(ANY_TEXT, st.text(st.characters(codec="ascii"), max_size=300),
                 st.text(st.characters(categories=("L", "N", "P", "Zs")), max_size=300)), st.integers(1, 400))
def test_the_gates_fast_path_gives_what_the_rule_gives(text, limit):
    # Printable text skips the regular expressions (the grader's hot path): it must come out exactly as the
    # step-by-step rule makes it, for any text, printable or not, short or long.
    assert clean(text, limit) == _gate_by_rule(text, limit, one_line=False)
    assert line(text, limit) == _gate_by_rule(text, limit, one_line=True)


@FAST
@given(st.binary(max_size=300))
def test_bytes_of_any_encoding_become_clean_text(data):
    clean(data).encode("utf-8")


@FAST
@given(ANY_TEXT)
def test_file_stems_are_short_distinct_and_safe(text):
    stem = file_stem(text)
    assert 0 < len(stem.encode("utf-8")) <= 100 + 1 + STEM_HASH
    assert "/" not in stem and "\x00" not in stem and not stem.startswith(".")
    assert stem == file_stem(text)                      # stable
    if stem != text:
        assert file_stem(text + "x") != stem            # a changed name carries a hash of the original


@pytest.mark.slow
@FAST
@given(st.lists(st.lists(st.one_of(ANY_TEXT, st.floats(allow_nan=False), st.integers(), st.none()),
                         min_size=1, max_size=5), max_size=5))
def test_csv_cells_never_start_a_formula(rows):
    text = csv_rows([["a", "b"]], rows, reserved=("Points Possible",))
    parsed = list(csv.reader(io.StringIO(text)))
    assert len(parsed) == len(rows) + 1
    for row, given_row in zip(parsed[1:], rows):
        for cell, value in zip(row, given_row):
            if isinstance(value, (int, float)):
                assert cell == str(value)                   # numbers stay numbers (a spreadsheet's, not a formula)
                continue
            assert not cell.startswith(FORMULA) and cell.strip().casefold() != "points possible"
    assert csv_cell("Points Possible", ("Points Possible",)) == "'Points Possible"


# -- discovery and notebooks of any shape -----------------------------------------------------------
NAME_BYTES = st.binary(min_size=1, max_size=255).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..") and not b.startswith(b"."))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NAME_BYTES, min_size=1, max_size=5, unique=True))
def test_any_folder_names_give_one_clean_row_each(tmp_path_factory, names):
    root = tmp_path_factory.mktemp("subs")
    notebook = json.dumps(MS.submission(QKV, solved="all"))
    for name in names:
        folder = os.path.join(os.fsencode(root), name)
        os.mkdir(folder)
        with open(os.path.join(folder, b"02_qkv_attention.ipynb"), "w", encoding="utf-8") as f:
            f.write(notebook)
    found = discover(root, COURSE)
    assert len(found.submissions) == len(names)
    keys = [s.key for s in found.submissions]
    assert len(set(keys)) == len(keys)
    for s in found.submissions:
        assert len(f"{s.key}.json".encode()) <= 255
        for text in (s.source, s.student or "", s.problem or ""):
            text.encode("utf-8")
            assert not CONTROL.search(text)
    rows = [{"student": s.student, "assignment": s.assignment, "points": 1.0, "max_points": 8.0,
             "status": s.problem or "graded", "source": s.source, "exercises": []} for s in found.submissions]
    for row in csv.reader(io.StringIO(R.grades_csv(rows, COURSE))):
        assert not any(cell.startswith(FORMULA) for cell in row)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_notebooks_of_any_json_shape_never_raise_beyond_a_named_error(data):
    raw = json.dumps(data).encode()
    ev = notebook_evidence(raw, COURSE)                     # never raises
    assert ev.declared is None or len(ev.declared) <= 80 + len(TRUNCATED)
    for shaped in (data, {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": data},
                   {"nbformat": 4, "nbformat_minor": 5, "metadata": data, "cells": [
                       {"cell_type": "code", "source": data, "metadata": data, "outputs": []}]}):
        try:
            nb = parse_notebook(shaped)
        except NotebookError:
            continue
        G.submission_cells(nb, {})                          # never raises on what parse_notebook accepts


# -- whole batches in the sandbox, with hostile names and returned values ----------------------------
RETURNED = st.recursive(
    st.sampled_from([
        "None", "float('nan')", "10 ** 400", "-(2 ** 70)", "'\\ud800' * 300", "'\\x1b[2J' * 50",
        "type('N' * 100000, (), {})()", "torch.ones(0)", "Q.to(torch.complex64)", "np.array(['text'])",
        "np.array([object()])", "Q", "(Q @ K.transpose(-2, -1)).softmax(-1)", "V", "float('inf')",
        "type(str(Q.tolist()), (), {})()", "Ellipsis", "b'bytes'", "print"]),
    lambda inner: st.builds(lambda a, b: f"({a}, {b})", inner, inner)
    | st.builds(lambda a: f"[{a}] * 100", inner)
    | st.builds(lambda k, v: f"{{{k!r}: {v}}}", ANY_TEXT.filter(lambda t: "\\" not in t and len(t) < 30), inner),
    max_leaves=4)

#: The course's limits, but an endless loop costs seconds (the sandbox fixture of tests/conftest.py opens with them).
LIMITS = COURSE.limits.model_copy(update={"call_seconds": 4.0, "submission_seconds": 30.0})


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(NAME_BYTES, RETURNED), min_size=1, max_size=3, unique_by=lambda t: t[0]))
def test_hostile_batches_end_with_one_capped_row_each(tmp_path_factory, sandbox, cases):
    root = tmp_path_factory.mktemp("subs")

    def write(name: bytes, nb) -> None:
        folder = os.path.join(os.fsencode(root), name)
        os.mkdir(folder)
        Path(os.fsdecode(os.path.join(folder, b"02_qkv_attention.ipynb"))).write_text(json.dumps(nb), encoding="utf-8")

    write(b"honest-ada", MS.submission(QKV, solved="all"))
    for name, expr in cases:
        nb = MS.submission(QKV, solved="all")
        nb.cells.append(nbformat.v4.new_code_cell(
            "import numpy as np, torch\n"
            f"def scaled_dot_product_attention(Q, K, V):\n    return {expr}\n"))
        write(b"h-" + name[:200], nb)
    out = tmp_path_factory.mktemp("out")
    batch = G.plan(root, COURSE, out)
    outcome = G.grade_batch(batch, sandbox, jobs=2)
    batch.outputs.report(outcome.results)
    assert len(outcome.results) == len(cases) + 1 == len(list((out / "results").glob("*.json")))
    ada = next(r for r in outcome.results if r["student"] == "honest-ada")
    assert ada["points"] == QKV.points and ada["status"] == R.GRADED
    for path in (out / "results").glob("*.json"):
        assert path.stat().st_size <= G.RESULT_MAX_BYTES
        result = json.loads(path.read_text(encoding="utf-8"))
        assert not result["status"].startswith("crash: grader error"), result.get("traceback")
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        for row in list(csv.reader(f))[1:]:
            assert not any(cell.startswith(FORMULA) for cell in row)
