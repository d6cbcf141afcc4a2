"""Written answers as the comparison reads them: words, and the runs of :data:`N` words two answers can share.

A word is a run of Latin letters, digits or ``_`` (case folded), or one Chinese character: the course's answers
are mostly Chinese, where a character is the unit a phrase is made of, with formulas and English terms between.
Punctuation, spacing and LaTeX's markup characters are dropped (``$\\sqrt{d_k}$`` reads ``sqrt d_k``). An answer's
shingles are the hashes of its runs of :data:`N` consecutive words, each with the positions it starts at.

Which shingles count is decided over the class (:mod:`autograder.similarity.scoring`): one the question's own
text, the chapter around it or the model answer holds (:func:`shingles` of the release's and the instructor's
notebooks) never does, and one many students wrote is a common phrase. Trusted: the text has passed the text
gate (:func:`autograder.course.written.answers`); at most :data:`MAX_WORDS` words of an answer are read.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

#: Words in a shingle.
N = 5
#: Words of one answer read.
MAX_WORDS = 5_000
_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*|_", re.UNICODE)
_CJK = re.compile(r"([\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff])")


@dataclass
class Prose:
    """One written answer: its words and its shingles (hash -> the positions it starts at)."""

    words: list[str]
    shingles: dict[int, list[int]] = field(default_factory=dict)

    def phrase(self, first: int, last: int, chars: int = 80) -> str:
        """Words ``first`` to ``last`` (exclusive) as text: Chinese characters together, other words spaced."""
        out = ""
        for word in self.words[first:last]:
            joined = out and not (_CJK.fullmatch(word) and _CJK.fullmatch(out[-1]))
            out += (" " if joined else "") + word
        return out if len(out) <= chars else out[:chars - 1] + "…"


def words(text: str) -> list[str]:
    """The words of ``text`` (see the module's docstring), at most :data:`MAX_WORDS`."""
    text = _CJK.sub(r" \1 ", unicodedata.normalize("NFKC", text).casefold())
    return [w for w in _WORD.findall(text) if w != "_"][:MAX_WORDS]


def shingle_key(words: list[str]) -> int:
    digest = hashlib.blake2b("\x1f".join(words).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def prose(text: str) -> Prose:
    """``text`` as :class:`Prose`."""
    found = Prose(words(text))
    for i in range(len(found.words) - N + 1):
        found.shingles.setdefault(shingle_key(found.words[i:i + N]), []).append(i)
    return found


def shingles(text: str) -> set[int]:
    """The shingles of a text of the course's own (a question, the chapter, a model answer)."""
    return set(prose(text).shingles)
