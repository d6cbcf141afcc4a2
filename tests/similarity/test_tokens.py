"""The code as tokens: the names a function binds, its nodes, module paths in one spelling, chains as one node."""
from __future__ import annotations

import ast

from autograder.similarity.tokens import Writer, all_nodes, chain, dotted, local_names


def test_local_names_are_the_functions_own():
    fn = ast.parse("def f(x, y=1):\n    global G\n    G = 2\n    z = [w for w in x]\n    try:\n        pass\n"
                   "    except ValueError as err:\n        pass\n    return torch.sum(z)").body[0]
    assert local_names(fn) == {"x", "y", "z", "w", "err"}
    cls = ast.parse("class M:\n    def forward(self, x):\n        def inner():\n            pass\n"
                    "        return x").body[0]
    assert local_names(cls) == {"self", "x", "inner"}           # a method keeps its name: the task's


def test_all_nodes_are_what_ast_walk_finds():
    tree = ast.parse("def f(x):\n    return [y * 2 for y in x if y] + x.sum(dim=-1)")
    assert {id(n) for n in all_nodes(tree)} == {id(n) for n in ast.walk(tree)}


def test_module_paths_have_one_spelling_and_locals_none():
    expr = ast.parse("torch.nn.functional.softmax", mode="eval").body
    assert dotted(expr, frozenset()) == "F.softmax"
    assert dotted(ast.parse("numpy.sqrt", mode="eval").body, frozenset()) == "np.sqrt"
    assert dotted(ast.parse("x.softmax", mode="eval").body, frozenset({"x"})) is None


def test_a_chain_is_one_node_of_its_operands():
    expr = ast.parse("a * b * c * d", mode="eval").body
    assert [n.id for n in chain(expr)] == ["a", "b", "c", "d"]
    writer = Writer(frozenset({"a", "b", "c", "d"}), record=True)
    writer.emit(expr)
    assert len(writer.spans) == 5 and writer.out[:3] == ["Chain", "Mult", "["]    # the chain and its 4 operands
