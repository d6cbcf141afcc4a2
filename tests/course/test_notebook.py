"""Reading submissions: every malformed file gets a NotebookError naming it; IPython syntax is neutralized."""
from __future__ import annotations

import json

import nbformat
import pytest

from autograder.core.errors import NotebookError
from autograder.course.notebook import _already_python, code_cells, read_notebook, to_python
from autograder.inside.namespace import fresh_namespace


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


#: Cells that are Python already, and the corner cases of IPython's clean-up transforms.
PLAIN_EDGE_CASES = (
    "x = 1", "\n\n  \n\tx = 1\n", "   \n", "", "x = 1   \n\n\n", "def f():\n    return 1\n\n    \n",
    "s = '''\n    \n  a\n'''\n", "if True:\n\tpass\n", "y = (1 +\n  2) / 3\n", "print(1 != 2)  # why?\n",
    "s = '%d items' % 3\n", "x = [\n  1,\n]\n", "...\n", "\ufeffx = 1\n", "x = 1\r\ny = 2\r\n",
)
#: Cells the fast path must leave to IPython: magics, escapes, prompts (also inside strings), not Python.
IPYTHON_CASES = (
    "%timeit x = 1\n", "!ls\n", "x = !ls\n", "x?\n", ">>> x = 1\n", "In [1]: x = 1\n",
    'def f():\n    """\n    >>> f()\n    """\n', "    x = 1\n", "def f(:\n", "...\n>>> 1\n",
)


def _notebook_cells():
    from support import ROOT

    for path in sorted(ROOT.glob("**/*.ipynb")):
        if ".venv" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue        # the malformed samples
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                source = cell.get("source", "")
                yield "".join(source) if isinstance(source, list) else source


def test_plain_python_cells_skip_ipython_and_read_exactly_as_ipython_reads_them():
    """The fast path (no IPython import on a cold start) gives IPython's own transform, byte for byte, on
    every code cell of every notebook in the repository and on the clean-up transforms' corner cases;
    a cell IPython would act on is left to IPython."""
    from IPython.core.inputtransformer2 import TransformerManager

    cells = list(_notebook_cells())
    assert len(cells) > 100
    fast = 0
    for source in (*cells, *PLAIN_EDGE_CASES):
        code = _already_python(source)
        if code is not None:
            fast += 1
            assert code == TransformerManager().transform_cell(source), source[:300]
    assert fast >= 0.9 * len(cells)            # most cells never need IPython
    for source in IPYTHON_CASES:
        assert _already_python(source) is None, source


def test_syntax_errors_survive_for_the_executor_to_report():
    code, skipped = to_python("def f(:\n")
    with pytest.raises(SyntaxError):
        compile(code, "cell", "exec")


def test_commands_that_read_notebooks_skip_the_schema_format_nbformat_never_checks(tmp_path):
    """`autograder grade` spends no cold-start second on jsonschema's "iri" checker (rfc3987_syntax), nor on
    importing nbformat or IPython, and the notebooks it reads validate against nbformat's schema all the same."""
    import subprocess
    import sys

    from support import ROOT

    subs = tmp_path / "subs" / "ada"
    subs.mkdir(parents=True)
    release = ROOT / "release" / "02_qkv_attention" / "02_qkv_attention.ipynb"
    (subs / release.name).write_bytes(release.read_bytes())
    probe = ("import sys\n"
             "from autograder.cli import main\n"
             f"code = main(['grade', {str(tmp_path / 'subs')!r}, '-o', {str(tmp_path / 'out')!r}])\n"
             "print('read without', [m for m in ('nbformat', 'IPython') if m not in sys.modules])\n"
             "import nbformat\n"
             f"nbformat.validate(nbformat.read({str(release)!r}, as_version=4))\n"
             "print(code, sys.modules.get('rfc3987_syntax', 'absent'))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "0 None", done.stdout[-2000:]
    # Nor on nbformat or IPython (0.2 s and 0.7 s): plain nbformat 4 notebooks are read as JSON.
    assert "read without ['nbformat', 'IPython']" in done.stdout, done.stdout[-2000:]
