"""Independent statements in one order: swapped independent statements (and a class's methods) give one order,
a statement that depends on another never moves across it."""
from __future__ import annotations

import ast

import pytest

from autograder.similarity.fragments import function_code
from autograder.similarity.normalize import normalize


def whole(source: str) -> int:
    return function_code("x", ast.parse(source).body[0], source.split("\n")).whole


SWAPPED = {
    "statements": ["def f(Q, K, V):\n    a = Q.sum()\n    b = K.sum()\n    c = V.sum()\n    return a + b + c",
                   "def f(Q, K, V):\n    c = V.sum()\n    a = Q.sum()\n    b = K.sum()\n    return a + b + c",
                   "def f(Q, K, V):\n    b = K.sum()\n    c = V.sum()\n    a = Q.sum()\n    return a + b + c"],
    "methods": ["class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
                "        self.w = nn.Linear(d, d)\n\n    def forward(self, x):\n        return self.w(x)",
                "class M(nn.Module):\n    def forward(self, inp):\n        return self.w(inp)\n\n"
                "    def __init__(self, dim):\n        super().__init__()\n        self.w = nn.Linear(dim, dim)"],
}


@pytest.mark.parametrize("kind", sorted(SWAPPED))
def test_independent_statements_get_one_order(kind):
    assert len({whole(source) for source in SWAPPED[kind]}) == 1


def test_dependent_statements_keep_their_order():
    """A statement that reads what another writes (or writes what it reads) never moves across it."""
    first = whole("def f(x):\n    y = x.exp()\n    z = y.sum()\n    return z")
    second = whole("def f(x):\n    z = x.sum()\n    y = x.exp()\n    return z")
    assert first != second
    fn = ast.parse("def f(x):\n    out = []\n    out.append(x)\n    total = x.sum()\n    return out, total").body[0]
    normalize(fn)
    assert isinstance(fn.body[1], ast.Expr)               # a call may change anything: it stays where it was
