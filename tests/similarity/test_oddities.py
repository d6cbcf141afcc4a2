"""Oddities of a function: its names, comments, strings and error messages as keys, and what the course's own
files hold."""
from __future__ import annotations

import ast

from autograder.similarity.tokens import all_nodes
from autograder.similarity.oddities import comments, information, normalized, of_function, of_source, templated

SOURCE = '''def softmax(x, dim=-1):
    """Its docstring is the template's, not an oddity."""
    # Normalise  so exp never overflows
    if x.numel() == 0:
        raise ValueError(f"softmax of nothing ({x.shape}) makes no sense")
    zz_peak = x.amax(dim=dim, keepdim=True)   # ok
    label = "a label of my own"
    return torch.exp(x - zz_peak) / torch.exp(x - zz_peak).sum(dim=dim, keepdim=True)
'''


def keys():
    return of_function(all_nodes(ast.parse(SOURCE).body[0]), SOURCE)


def test_names_comments_strings_and_messages_are_keys():
    found = keys()
    assert ("identifier", "zz_peak") in found and ("identifier", "label") in found
    assert ("identifier", "x") not in found                          # too short to say anything
    assert ("comment", "normalise so exp never overflows") in found
    assert found[("comment", "normalise so exp never overflows")] == ("Normalise  so exp never overflows",
                                                                    "normalise so _ never overflows")   # exp: a name
    assert ("comment", "ok") not in found                            # too short
    assert ("raise", "softmax of nothing (…) makes no sense") in found
    assert ("string", "a label of my own") in found
    assert not any("docstring" in text for _, text in found)


def test_a_comment_is_read_with_the_names_of_its_code_as_its_template():
    assert templated("# Compute  v_heads now", {"v_heads"}) == "# compute _ now"
    assert templated("see p. 284", {"p"}) == "see _. 284"
    assert information("compute _") == 7 and information("计算 _") == 4


def test_comments_are_read_from_the_source_and_nothing_breaks_on_odd_text():
    assert comments("x = 1  # one\n# two\ny = '# not a comment'\n") == ["one", "two"]
    assert comments("no comment at all") == []
    assert comments("x = (\n") == []                                  # cut short: what was read (nothing)


def test_normalized_text_ignores_spacing_and_case():
    assert normalized("  Scale\tBY  sqrt ") == "scale by sqrt"


def test_the_course_files_names_and_texts_are_collected():
    source = "import torch\n\ndef softmax(x, dim=-1):\n    # subtract the max first\n    shifted = x - x.max()\n" \
             "    raise NotImplementedError('请完成练习 2.2 (softmax)')\n"
    names, texts = of_source(ast.parse(source), source)
    assert {"torch", "softmax", "x", "dim", "shifted", "max"} <= names
    assert ("comment", "subtract the max first") in texts and ("raise", "请完成练习 2.2 (softmax)") in texts
