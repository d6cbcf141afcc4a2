"""Markdown made HTML on the server, for the pages' Content-Security-Policy (``script-src 'self'``: no script of
the page may render it in the browser), with nothing of the text's own HTML let through.

:func:`markdown_html` is CommonMark (markdown-it-py) with raw HTML off, so a ``<script>`` or an ``<img onerror>`` in
the text is shown as the text it is; links whose target is a script (``javascript:``, ``vbscript:``, ``data:``,
``file:``) are no links (markdown-it's own check); images are left out (the policy allows the service's own images
only, and a grader needs the words). Formulas (``$...$``, ``$$...$$``) are kept as their TeX source, in a
``<span class="math">``, so that Markdown's emphasis never eats their ``_`` and ``*``; nothing renders them.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markupsafe import Markup


def _closing(src: str, start: int, end: int, mark: str) -> int:
    """Where the formula that opens before ``start`` closes with ``mark`` (-1: it does not): the first ``mark``
    not escaped by a backslash."""
    at = src.find(mark, start, end)
    while at != -1 and src[at - 1] == "\\":
        at = src.find(mark, at + 1, end)
    return at


def _math(state: StateInline, silent: bool) -> bool:
    """``$$...$$`` or ``$...$`` at the state's position: one token holding the formula's source. A single ``$``
    opens a formula only where no space follows it, and closes one only where no space comes before it and no
    digit after it (pandoc's rule: "$5 and $6" is money)."""
    src, pos, end = state.src, state.pos, state.posMax
    if src[pos] != "$":
        return False
    mark = "$$" if src.startswith("$$", pos) else "$"
    start = pos + len(mark)
    close = _closing(src, start, end, mark)
    if close == -1 or close == start:
        return False
    body = src[start:close]
    if mark == "$" and (body[0].isspace() or body[-1].isspace()
                        or (close + 1 < end and src[close + 1].isdigit())):
        return False
    if not silent:
        token = state.push("math", "span", 0)
        token.content, token.markup = body, mark
    state.pos = close + len(mark)
    return True


def _render_math(_renderer: Any, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
    token = tokens[idx]
    kind = "math display" if token.markup == "$$" else "math"
    return f'<span class="{kind}">{escapeHtml(token.markup + token.content + token.markup)}</span>'


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.inline.ruler.before("escape", "math", _math)
    md.add_render_rule("math", _render_math)
    return md


@functools.lru_cache(maxsize=256)
def markdown_html(text: str) -> Markup:
    """``text`` (Markdown) as HTML safe to write into a page: its own HTML escaped, formulas as their source."""
    return Markup(_parser().render(text))
