"""Oddities of one function: what a student wrote that the task did not ask for and another student would not
write by chance, each as a key that two notebooks can share.

* ``("identifier", name)``: a name the function binds (a parameter, a variable, a nested function);
* ``("comment", text)``: a comment, read from the raw source (tokenize), its spacing and case normalized; its
  template is the same with the names of the code it mentions as ``_`` ("compute scores" is "compute _":
  :func:`templated`), so that a comment made of a template many students use and a name weighs little;
* ``("string", text)``: a string literal (the docstring apart), its spacing and case normalized;
* ``("raise", text)``: the message of a ``raise``'s exception, the text of its constant parts, as a comment.

Dead code is found on the normalized tree (:mod:`autograder.similarity.fragments`). Which of these are unusual is
decided over the class (:mod:`autograder.similarity.scoring`): a key the course's own files hold (the release's
template, the reference, the alternatives, the known mistakes: :func:`of_source`) never counts, and one that many
students share is no oddity. A text of less than :data:`MIN_TEXT` characters (:func:`information`) says too
little to count. Trusted: the source is
tokenized and walked, never run; what a key shows in the report is gated and bounded.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from autograder.core.text import line

#: Comments and strings shorter than this (:func:`information`) are not oddities: ``# ok``, ``"mean"``.
MIN_TEXT = 8
#: Names shorter than this are not: ``i``, ``q``, ``out``.
MIN_NAME = 4
#: Characters of a text kept in a key and shown.
TEXT_CHARS = 160
#: Keys of one kind kept per function.
MAX_PER_KIND = 100


def normalized(text: str) -> str:
    """Spacing collapsed and case folded: a text as two students who share it would both have it."""
    return line(" ".join(text.split()).casefold(), TEXT_CHARS)


def of_function(nodes: list[ast.AST], source: str) -> dict[tuple[str, str], tuple[str, str]]:
    """The oddity keys of a function (``nodes``: every node of its tree, the ``def`` first; ``source``: its lines
    from its ``def`` to its end), each with what the report shows and its template (a text's :func:`templated`
    form; a name's, itself), before the class decides which are unusual."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    names = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names |= {a.arg for a in nodes if isinstance(a, ast.arg)}
    for name in sorted(n for n in names if len(n) >= MIN_NAME)[:MAX_PER_KIND]:
        found[("identifier", name)] = (line(name, TEXT_CHARS), name)
    for kind, key, text, template in texts(nodes, source):
        if len(found) < 4 * MAX_PER_KIND:
            found.setdefault((kind, key), (line(text, TEXT_CHARS), template))
    return found


def spelled(nodes: list[ast.AST]) -> set[str]:
    """Every name the code spells: bound, read, an attribute, a parameter, a definition's, an import's."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def templated(text: str, names: set[str]) -> str:
    """``text``'s key: :func:`normalized`, each word that names something of the code as ``_``. "compute scores"
    and "compute out_bias" are one comment (the names are the identifiers' evidence, not the comment's)."""
    return normalized(_WORD.sub(lambda m: "_" if m.group(0) in names else m.group(0), text))


def information(key: str) -> int:
    """How much a text says: its characters, a Chinese one counted twice, spaces and ``_`` not at all."""
    return sum(2 if "\u3400" <= c <= "\u9fff" else 1 for c in key if not c.isspace() and c != "_")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def texts(nodes: list[ast.AST], source: str, limit: int = MAX_PER_KIND) -> list[tuple[str, str, str, str]]:
    """(kind, key, text, template) of the comments, strings and raise messages of a tree (``nodes``: all its nodes;
    ``source``: the text it was parsed from) long enough to count, the first ``limit`` of each kind: the key is the
    text :func:`normalized`, the template its :func:`templated` form (a string's: the key)."""
    names = spelled(nodes)
    out = [("comment", c) for c in comments(source)]
    docstrings = {id(node.body[0].value) for node in nodes
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    messages = [m for m in (_raised(n) for n in nodes if isinstance(n, ast.Raise)) if m]
    out += [("raise", m) for m in messages]
    strings = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and id(n) not in docstrings]
    out += [("string", s) for s in strings if s not in messages]
    kept: list[tuple[str, str, str, str]] = []
    counts: dict[str, int] = {}
    for kind, text in out:
        key = normalized(text)
        if information(key) >= MIN_TEXT and counts.get(kind, 0) < limit:
            counts[kind] = counts.get(kind, 0) + 1
            kept.append((kind, key, text, key if kind == "string" else templated(text, names)))
    return kept


def comments(source: str) -> list[str]:
    """The comments of ``source`` without their ``#``; none where it does not tokenize."""
    found: list[str] = []
    if "#" not in source:
        return found
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found.append(token.string.lstrip("#").strip())
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass      # an unterminated string in a cell that still parsed cannot happen; anything odd: what was read
    return found


def _raised(node: ast.Raise) -> str:
    """The text of a raised exception's message: its first argument's constant parts (an f-string's too)."""
    exc = node.exc
    if not isinstance(exc, ast.Call) or not exc.args:
        return ""
    message = exc.args[0]
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        return message.value
    if isinstance(message, ast.JoinedStr):
        return "…".join(v.value for v in message.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


def of_source(tree: ast.AST, source: str) -> tuple[set[str], set[tuple[str, str]]]:
    """What a file of the course's own holds (the release's cells, the references, the alternatives): every name
    it spells (bound, read or an attribute), and its comment, string and raise keys; none of them is an oddity."""
    nodes = list(ast.walk(tree))
    return spelled(nodes), {(kind, key) for kind, key, _, _ in texts(nodes, source, limit=1 << 30)}
