"""Fragments of one normalized function: what two students' code can share, each a hash and the nodes it covers.

A function's body (:func:`function_code`), once :func:`autograder.similarity.normalize.normalize` has rewritten
it, is read as tokens in preorder (:class:`autograder.similarity.normalize.Writer`); its fragments are

* every statement and every expression of at least :data:`MIN_NODES` nodes (a subtree); a smaller subtree (a
  name, a constant, ``x.sum()``) is kept apart (:attr:`FunctionCode.small`): it is never evidence by itself, but
  where the course's files or many students hold it, the nodes it covers count for nothing;
* every run of 2 or 3 consecutive statements of one block (k-grams of statements), and the whole body.

A fragment's hash reads its tokens with the local names numbered inside the fragment by first use (``$0``,
``$1``...): ``scores = q @ k`` and ``s = a @ b`` are one fragment, ``s = a @ a`` another, and a name added or
renamed elsewhere in the function changes no other fragment. The parameters keep their names (the template's,
every student's): ``Q @ K`` and ``K @ Q`` are two fragments. Each fragment keeps the range of node numbers it
covers (a subtree, or a run of sibling statements, is one range in preorder), so what two functions share can
be measured in nodes and shown by line. Each simple statement that names a local is kept as spelled too (its
locals by their names, :attr:`FunctionCode.spelled`): the reference's approach in a student's own names is no
evidence, but the same statements in the same unusual names are. Dead code (statements after a ``return``,
``raise``, ``break`` or ``continue`` of their block; an assignment to a local nothing reads) is kept apart too:
the same dead statement in two notebooks is an oddity (:mod:`autograder.similarity.oddities`).

Trusted: the tree is the student's, parsed and never run; a function of more than :data:`MAX_NODES` nodes is not
compared (:class:`TooLarge`), and every line kept for display passes the text gate.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from autograder.core.text import line
from autograder.similarity import oddities
from autograder.similarity.normalize import normalize, parameters
from autograder.similarity.tokens import Definition, Writer, all_nodes

#: The smallest statement or expression that is a fragment of its own (``a @ b`` and ``x = 0`` are 3 nodes: every
#: student writes some); a dead statement smaller than this is no oddity either.
MIN_NODES = 4
#: Runs of consecutive statements that are fragments.
STATEMENT_RUNS = (2, 3)
#: A function (or class) larger than this (in AST nodes) is not compared: the course's largest reference has 350.
MAX_NODES = 3_000
#: Lines of a function kept for the report, and characters of each.
MAX_LINES, LINE_CHARS = 300, 200


class TooLarge(ValueError):
    """A function past :data:`MAX_NODES`: it is left out of the comparison, and the report says so."""


@dataclass
class FunctionCode:
    """One exercise's function in one notebook, as the comparison reads it."""

    exercise: str
    lines: list[str]                  # its source as written (gated, bounded), for the report
    node_lines: list[int]             # each counted node's line, 0 for the ``def`` line
    fragments: dict[int, list[tuple[int, int]]] = field(default_factory=dict)   # hash -> node ranges [first, last)
    small: dict[int, list[tuple[int, int]]] = field(default_factory=dict)       # the same, under MIN_NODES nodes
    whole: int = 0                    # the hash of the whole body
    whole_spelled: int = 0            # the same, its locals by their names
    dead: dict[int, int] = field(default_factory=dict)                          # dead statement's hash -> its node
    spelled: dict[int, int] = field(default_factory=dict)       # statement as spelled (locals by name) -> its node
    oddities: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)   # key -> (shown, template)

    @property
    def nodes(self) -> int:
        return len(self.node_lines)

    def text(self, first: int, last: int, chars: int = 80) -> str:
        """The source lines of nodes ``first`` to ``last`` (exclusive), on one line, cut at ``chars``."""
        rows = sorted({self.node_lines[i] for i in range(first, min(last, self.nodes))})
        if not rows:
            return ""
        shown = " ".join(self.lines[r].strip() for r in range(rows[0], rows[-1] + 1) if r < len(self.lines))
        return cut(" ".join(shown.split()), chars)


def cut(text: str, chars: int) -> str:
    """``text`` on one line, at most ``chars`` characters, an ellipsis where it was cut."""
    text = line(text, 4 * chars + 16)
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


def fragment_key(tokens: list[str], start: int, end: int) -> int:
    """The hash of ``tokens[start:end]`` with its local names numbered by first use inside it."""
    names: dict[str, str] = {}
    parts = []
    for token in tokens[start:end]:
        if token.startswith("\0"):
            token = names.setdefault(token, f"${len(names)}")
        parts.append(token)
    return _hash(parts)


def spelled_key(tokens: list[str], start: int, end: int) -> int | None:
    """The hash of ``tokens[start:end]`` with its local names as written; None where it names no local."""
    parts = tokens[start:end]
    return _hash(parts) if any(token.startswith("\0") for token in parts) else None


def _hash(parts: list[str]) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def function_code(exercise: str, fn: Definition, source: list[str]) -> FunctionCode:
    """``fn`` (parsed from ``source``, the lines of its cell) as :class:`FunctionCode`; ``fn`` is normalized in
    place. :class:`TooLarge` past :data:`MAX_NODES`; RecursionError for a tree too deep to walk."""
    before = all_nodes(fn)
    if len(before) > MAX_NODES:
        raise TooLarge(f"{len(before)} nodes, more than the {MAX_NODES} compared")
    first, last = fn.lineno, fn.end_lineno or fn.lineno
    first = min([first, *(d.lineno for d in fn.decorator_list)])
    lines = [line(text, LINE_CHARS) for text in source[first - 1:last][:MAX_LINES]]
    found = oddities.of_function(before, "\n".join(source[first - 1:last]))
    local, after = normalize(fn, before)
    writer = Writer(local - parameters(fn), record=True)   # a parameter keeps its name: the template gave it
    for statement in fn.body:                # the body only: the signature is the template's
        writer.emit(statement)
    code = FunctionCode(exercise, lines, [max(0, span[2] - first) for span in writer.spans], oddities=found)
    _fragments(code, writer, after)
    for index in _dead(after, local, writer):
        start, end, _, size = writer.spans[index]
        if size >= MIN_NODES:
            code.dead[fragment_key(writer.out, start, end)] = index
    return code


def _fragments(code: FunctionCode, writer: Writer, nodes: list[ast.AST]) -> None:
    """Fill ``code.fragments`` and ``code.whole`` from the writer's record of a body (``nodes``: the function's)."""
    spans, tokens = writer.spans, writer.out

    def add(start: int, end: int, first: int, last: int) -> None:
        code.fragments.setdefault(fragment_key(tokens, start, end), []).append((first, last))

    for index, (start, end, _, size) in enumerate(spans):
        node = writer.nodes[index]
        if isinstance(node, (ast.stmt, ast.expr)) and size >= MIN_NODES:
            add(start, end, index, index + size)
            as_written = spelled_key(tokens, start, end) if isinstance(node, _SIMPLE) else None
            if as_written is not None:
                code.spelled.setdefault(as_written, index)
        else:
            code.small.setdefault(fragment_key(tokens, start, end), []).append((index, index + size))
    position = {id(node): index for index, node in enumerate(writer.nodes)}
    for block in _blocks(nodes, position):
        for k in STATEMENT_RUNS:
            for j in range(len(block) - k + 1):
                first, last = block[j], block[j + k - 1]
                add(spans[first][0], spans[last][1], first, last + spans[last][3])
    code.whole = fragment_key(tokens, 0, len(tokens))
    code.whole_spelled = spelled_key(tokens, 0, len(tokens)) or code.whole
    if spans:
        code.fragments.setdefault(code.whole, []).append((0, len(spans)))


def _blocks(nodes: list[ast.AST], position: dict[int, int]) -> list[list[int]]:
    """The node numbers of the statements of each block (a body, an ``else``, a ``finally``) of ``nodes``."""
    blocks = []
    for node in nodes:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                numbers = [position[id(s)] for s in block if id(s) in position]
                if len(numbers) > 1:
                    blocks.append(numbers)
    return blocks


#: Statements that hold no other statement: what :attr:`FunctionCode.spelled` keeps.
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr, ast.Raise, ast.Assert)
#: Statements after which nothing in their block runs.
_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def _dead(nodes: list[ast.AST], local: frozenset[str], writer: Writer) -> list[int]:
    """The node numbers of a function's dead statements (``nodes``: its nodes): after an exit of their block, or
    an assignment of locals that nothing reads (``_`` names apart: they say "unused" on purpose)."""
    position = {id(node): index for index, node in enumerate(writer.nodes)}
    read = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    found: list[int] = []
    for node in nodes:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            exits = [i for i, s in enumerate(block) if isinstance(s, _EXITS)]
            after = block[exits[0] + 1:] if exits else []
            found += [position[id(s)] for s in after if id(s) in position]
    for node in nodes:
        if isinstance(node, ast.Assign) and id(node) in position and _unread(node.targets, local, read):
            found.append(position[id(node)])
    return sorted(set(found))


def _unread(targets: list[ast.expr], local: frozenset[str], read: set[str]) -> bool:
    names = [n.id for t in targets for n in all_nodes(t) if isinstance(n, ast.Name)]
    return bool(names) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in targets) and all(
        n in local and n not in read and not n.startswith("_") for n in names)
