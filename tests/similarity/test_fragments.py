"""Fragments of a normalized function: a renamed copy shares them all, each covers the nodes (and lines) it came
from, dead code is found, and a function too large is not compared."""
from __future__ import annotations

import ast

import pytest

from autograder.similarity.fragments import MAX_NODES, TooLarge, function_code

SOURCE = """def attention_scores(Q, K):
    # my comment
    width = Q.shape[-1]
    raw = torch.matmul(Q, K.transpose(-2, -1))
    scaled = raw * (1.0 / math.sqrt(width))
    return scaled.contiguous()
"""


def code(source: str, exercise: str = "2.3"):
    lines = source.split("\n")
    return function_code(exercise, ast.parse(source).body[0], lines)


def test_a_renamed_reordered_copy_has_the_same_fragments():
    copy = SOURCE.replace("width", "dk_x1").replace("raw", "prod_tmp").replace("scaled", "out_val")
    copy = copy.replace("    dk_x1 = Q.shape[-1]\n    prod_tmp = torch.matmul(Q, K.transpose(-2, -1))\n",
                        "    prod_tmp = Q @ K.mT\n    dk_x1 = Q.size(-1)\n")
    first, second = code(SOURCE), code(copy)
    assert set(first.fragments) == set(second.fragments)
    assert first.whole == second.whole


def test_fragments_cover_the_nodes_and_lines_they_came_from():
    found = code(SOURCE)
    assert found.nodes > 10 and found.lines[0].startswith("def attention_scores")
    assert all(0 <= first < last <= found.nodes for ranges in found.fragments.values() for first, last in ranges)
    assert found.fragments[found.whole] == [(0, found.nodes)]
    assert set(found.node_lines) == {2, 3, 4, 5}          # the comment's line (1) holds no node
    assert "math.sqrt(width)" in found.text(0, found.nodes, chars=300)


def test_a_different_computation_has_other_fragments():
    other = code(SOURCE.replace("K.transpose(-2, -1)", "K.transpose(0, 1)"))
    assert other.whole != code(SOURCE).whole


def test_dead_code_is_found():
    found = code("def f(x):\n    leftover_thing = torch.zeros_like(x).sum() + 1\n    _ignored = x.sum() + 2\n"
                 "    y = x.exp()\n    return y\n    print('never', x.sum())\n")
    dead_lines = sorted(found.node_lines[node] for node in found.dead.values())
    assert dead_lines == [1, 5]                      # the unread assignment and the line after return; not `_ignored`


def test_a_dead_statement_too_small_to_say_anything_is_no_oddity():
    assert code("def f(x):\n    unused = 0\n    return x\n").dead == {}


def test_a_function_too_large_is_not_compared():
    body = "\n".join(f"    v{i} = x + {i}" for i in range(MAX_NODES // 4))
    with pytest.raises(TooLarge, match="nodes"):
        code(f"def f(x):\n{body}\n    return x\n")


def test_the_lines_kept_for_the_report_pass_the_text_gate():
    found = code("def f(x):\n    return x  # \x1b[31mred\u202e\n")
    assert "\x1b" not in "".join(found.lines) and "\u202e" not in "".join(found.lines)
