"""Reading submissions: every malformed file gets a NotebookError naming it; IPython syntax is neutralized."""
from __future__ import annotations

import json

import nbformat
import pytest

from autograder.errors import NotebookError
from autograder.notebook import code_cells, fresh_namespace, read_notebook, to_python


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("text, fragment", [
    ("", "empty file"),
    ("{not json", "invalid JSON at line 1"),
    ('{"cells": []}', "no nbformat"),
    ('{"nbformat": 4, "nbformat_minor": 5}', "no list of cells"),
    ('{"nbformat": 4, "nbformat_minor": 5, "cells": [1]}', "cell 0 is not a cell"),
    ('{"nbformat": 2}', "unsupported nbformat 2"),
    ("[1, 2]", "not a notebook"),
])
def test_malformed_notebooks_are_named(tmp_path, text, fragment):
    path = _write(tmp_path, "alice.ipynb", text)
    with pytest.raises(NotebookError) as info:
        read_notebook(path)
    assert str(path) in info.value.message and fragment in info.value.message


def test_nbformat3_is_converted(tmp_path):
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
          "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 41 + 1", "outputs": [],
                                     "language": "python", "metadata": {}}], "metadata": {}}]}
    nb = read_notebook(_write(tmp_path, "old.ipynb", json.dumps(v3)))
    cells = code_cells(nb)
    assert [c.code.strip() for c in cells] == ["x = 41 + 1"]
    assert nb.metadata["autograder_converted_from"] == 3


def test_stripped_metadata_and_grade_ids(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("hi"), nbformat.v4.new_code_cell("a = 1"),
                nbformat.v4.new_code_cell("b = 2")]
    nb.cells[2].metadata["nbgrader"] = {"grade_id": "ex2_4", "solution": True}
    del nb.cells[1]["metadata"]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    cells = code_cells(read_notebook(path))
    assert [(c.index, c.grade_id, c.code.strip()) for c in cells] == [(1, None, "a = 1"), (2, "ex2_4", "b = 2")]


def test_magics_and_shell_escapes_are_neutralized():
    code, skipped = to_python("%timeit x = 1\n!rm -rf /\nfiles = !ls\ny = 2\n")
    assert skipped is None
    ns = fresh_namespace()
    exec(code, ns)  # would fail as Python if the magics survived
    assert ns["y"] == 2 and ns["files"] == []


def test_cell_magics_pass_or_skip():
    assert to_python("%%bash\nrm -rf /\n") == ("", "cell magic %%bash is not run by the grader")
    code, skipped = to_python("%%time\nz = 3\n")
    ns = fresh_namespace()
    exec(code, ns)
    assert skipped is None and ns["z"] == 3


def test_check_calls_are_replaced_keeping_line_numbers():
    code, _ = to_python('x = 1\ncheck("2.4")\ncheck(\n  "2.3")\ny = x\n')
    assert code.split("\n")[:5] == ["x = 1", "pass", "pass", "", "y = x"]
    nested, _ = to_python("def f():\n    check('1.1')\n")
    assert "check('1.1')" in nested  # only top-level self-checks are dropped


def test_syntax_errors_survive_for_the_executor_to_report():
    code, skipped = to_python("def f(:\n")
    with pytest.raises(SyntaxError):
        compile(code, "cell", "exec")
