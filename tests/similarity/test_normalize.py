"""Code normalized for comparison: equivalent spellings become one form, different computations stay apart, every
node keeps its line."""
from __future__ import annotations

import ast

import pytest

from autograder.similarity.fragments import function_code
from autograder.similarity.normalize import normalize


def normal(source: str) -> int:
    """The hash of the function's normalized body, its local names numbered by first use (what a renamed copy
    shares)."""
    return function_code("x", ast.parse(source).body[0], source.split("\n")).whole


SAME = {
    "transpose": ["def f(K):\n    return K.transpose(-2, -1)", "def f(K):\n    return K.mT",
                  "def f(K):\n    return K.transpose(-1, -2)", "def f(K):\n    return torch.transpose(K, -2, -1)",
                  "def f(K):\n    return K.swapaxes(-1, -2)"],
    "matmul": ["def f(a, b):\n    return a @ b", "def f(a, b):\n    return torch.matmul(a, b)",
               "def f(a, b):\n    return a.matmul(b)"],
    "softmax": ["def f(x):\n    return torch.softmax(x, dim=-1)", "def f(x):\n    return F.softmax(x, -1)",
                "def f(x):\n    return torch.nn.functional.softmax(x, dim=-1)", "def f(x):\n    return x.softmax(-1)",
                "def f(x):\n    return softmax(x, dim=-1)"],
    "keyword-or-positional": ["def f(x):\n    return x.sum(dim=-1, keepdim=True)",
                              "def f(x):\n    return x.sum(-1, True)",
                              "def f(x):\n    return torch.sum(x, -1, keepdim=True)"],
    "literals": ["def f(x):\n    return x * 1.0", "def f(x):\n    return x * 1.", "def f(x):\n    return x * 1e0",
                 "def f(x):\n    return 1 * x"],
    "square-root": ["def f(Q):\n    return math.sqrt(Q.shape[-1])", "def f(Q):\n    return Q.size(-1) ** 0.5",
                    "def f(Q):\n    return torch.sqrt(Q.size(dim=-1))"],
    "commutative": ["def f(a, b, c):\n    return a + b * c", "def f(a, b, c):\n    return c * b + a",
                    "def f(a, b, c):\n    return (b * c) + a"],
    "augmented": ["def f(a, b):\n    a += b\n    return a", "def f(a, b):\n    a = a + b\n    return a"],
    "renamed": ["def f(Q, K):\n    scores = Q @ K.mT\n    return scores / 2",
                "def f(Q, K):\n    tmp_x = Q @ K.mT\n    return tmp_x / 2"],
    "docstring-and-comments": ["def f(x):\n    '''Doc.'''\n    # why\n    return x", "def f(x):\n    return x"],
}


@pytest.mark.parametrize("kind", sorted(SAME))
def test_equivalent_spellings_normalize_to_one_form(kind):
    forms = {normal(source) for source in SAME[kind]}
    assert len(forms) == 1, forms


DIFFERENT = [
    ("def f(K):\n    return K.transpose(-2, -1)", "def f(K):\n    return K.transpose(0, 1)"),
    ("def f(a, b):\n    return a @ b", "def f(a, b):\n    return b @ a"),              # @ does not commute
    ("def f(a, b):\n    return a - b", "def f(a, b):\n    return b - a"),
    ("def f(x):\n    return x.sum(dim=-1)", "def f(x):\n    return x.sum(dim=0)"),
    ("def f(x):\n    return x * 2", "def f(x):\n    return x * 3"),
    ("def f(a, b):\n    return a + a", "def f(a, b):\n    return a + b"),              # which local, not only how many
]


@pytest.mark.parametrize("first, second", DIFFERENT)
def test_different_computations_stay_apart(first, second):
    assert normal(first) != normal(second)


def test_nodes_keep_their_lines():
    fn = ast.parse("def f(a, b):\n    x = 1\n    y = torch.matmul(a, b)\n    return x + y").body[0]
    normalize(fn)
    assert sorted(statement.lineno for statement in fn.body) == [2, 3, 4]
    assert all(hasattr(node, "lineno") for node in ast.walk(fn) if isinstance(node, (ast.expr, ast.stmt)))
