"""What the comparison reads from a notebook (its last definitions, its answers, its time) and from the course's own
files (the baseline: template, reference, alternatives, known mistakes, the release's text, the model answers)."""
from __future__ import annotations

import ast
import datetime as dt
import json

import pytest

from similar_class import COURSE, EVE, QKV, REFERENCE, notebook
from autograder.core.errors import NotebookError
from autograder.similarity.corpus import read_baseline, read_work
from autograder.similarity.fragments import function_code
from autograder.similarity.prose import shingles


def write(tmp_path, nb, name="nb.ipynb"):
    path = tmp_path / name
    path.write_text(json.dumps(nb, ensure_ascii=False) if isinstance(nb, dict) else nb, encoding="utf-8")
    return path


def test_the_last_definition_of_each_function_is_read_and_a_broken_cell_skipped(tmp_path):
    nb = notebook(EVE, "我的回答：方差是 d_k，所以要缩放。")
    cell = lambda source: {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],  # noqa: E731
                           "execution_count": None}
    nb["cells"] += [cell("def softmax(x, dim=-1):\n    return x.softmax(dim)\n"),
                    cell("def attention_scores(Q, K):\n    return Q @@ K\n"),            # does not parse
                    cell("%%time\ndef project_qkv(x, W_q, W_k, W_v):\n    return x @ W_q, x @ W_k, x @ W_v\n")]
    when = {"when": "2026-03-01T10:00:00+00:00", "source": "nbgrader timestamp.txt"}
    work = read_work(write(tmp_path, nb), "ada/nb.ipynb", "ada", QKV, COURSE, when)
    assert set(work.functions) == {"2.1", "2.2", "2.3", "2.4", "2.5"}
    assert work.functions["2.2"].lines == ["def softmax(x, dim=-1):", "    return x.softmax(dim)"]
    assert "torch.matmul" in "\n".join(work.functions["2.3"].lines)          # the broken cell never ran: EVE's
    assert work.when == dt.datetime(2026, 3, 1, 10, tzinfo=dt.timezone.utc)
    assert list(work.answers) == ["2.Q1"] and work.answers["2.Q1"].words[:2] == ["我", "的"]


def test_the_stub_answer_and_missing_functions_are_not_read(tmp_path):
    work = read_work(write(tmp_path, notebook({})), "nb.ipynb", "ada", QKV, COURSE)
    assert work.answers == {} and work.when is None
    assert set(work.functions) == set(QKV.exercises[i].id for i in range(5))      # the release's stubs


@pytest.mark.parametrize("text, says", [
    ("{not json", "invalid JSON"),
    ('{"cells": []}', "not a notebook"),
    ("", "nb.ipynb"),
])
def test_a_notebook_that_cannot_be_read_is_named(tmp_path, text, says):
    with pytest.raises(NotebookError) as caught:
        read_work(write(tmp_path, text), "ada/nb.ipynb", "ada", QKV, COURSE)
    assert "ada/nb.ipynb" in caught.value.message and says in caught.value.message


def test_the_baseline_holds_the_courses_own_code_and_text():
    base = read_baseline(COURSE, QKV)
    lines = REFERENCE["softmax"].split("\n")
    reference = function_code("2.2", ast.parse(REFERENCE["softmax"]).body[0], lines)
    assert set(reference.fragments) <= base.fragments                         # solutions/qkv_attention.py
    alternative = "def softmax(x, dim=-1):\n    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))\n"
    assert function_code("2.2", ast.parse(alternative).body[0], alternative.split("\n")).whole in base.fragments
    stub = 'def softmax(x, dim=-1):\n    raise NotImplementedError("请完成练习 2.2")\n'
    assert function_code("2.2", ast.parse(stub).body[0], stub.split("\n")).whole in base.fragments
    assert ("raise", "请完成练习 2.2") in base.texts and "W_q" in base.names
    assert shingles("设查询和键的每个分量相互独立，均值为 0、方差为 1。") <= base.shingles       # the question
    assert shingles("除以 $\\sqrt{d_k}$ 后方差回到 1，与 $d_k$ 无关。") <= base.shingles        # the model answer
    assert read_baseline(COURSE, QKV) is base                                   # read once while unchanged
