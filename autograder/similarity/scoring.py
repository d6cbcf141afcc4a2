"""One assignment's class compared: which pairs share what honest work does not, and how much (:class:`Cohort`).

Every notebook's keys are listed (:meth:`Cohort.keys_of`): its code fragments per exercise, its statements and
whole functions as spelled (local names as written), its pairs of whole functions, its dead statements, its
oddities and its written answers' shingles, less what the course's own files hold (the baseline:
:func:`autograder.similarity.corpus.read_baseline`). A key's *rarity* ``w`` (0 to 1) is read from how many
students of the assignment hold it (``df``)::

    limit = max(RARE_MIN, round(RARE_SHARE * students))                 # 12 of 300 students; 3 under 88
    w     = clamp(log((limit + 1) / df) / log((limit + 1) / 2), 0, 1)   # 1 for two students, 0 past the limit

(of 300 students: 1 for 2 of them, 0.63 for 4, 0.33 for 7, 0 for 13 or more), and an unusual identifier counts
only while at most two students use it (``w`` 1, else 0). Only pairs that hold a key with ``w > 0`` together are
scored, found from an index key -> students (no loop over all pairs). A pair's four channels:

* code ``C = 1 - exp(-M / TAU_CODE) * (1 - NEAR_WEIGHT * R)``. ``M`` is, per exercise, the nodes of each function
  covered by the rare fragments the two share, each node at the highest ``w`` that covers it, averaged over the
  two functions and summed over the exercises; a node inside a fragment of the baseline, or of one more than
  ``limit`` students wrote (a subtree of any size: a name alone, ``x.sum()``), counts for nothing: the
  reference's approach is subtracted node by node, and what is left is the structure only these two wrote.
  ``R`` is how near-identical the notebooks are: of the pairs of exercises where either wrote a function of their
  own (normalized, local names as written, not as the course's files spell it), the share whose two whole
  functions are the same in both notebooks, each pair at its ``w`` (out of at least ``NEAR_PAIRS`` pairs). A copy
  shares every pair; students who write alike by habit share the pairs of the few exercises they happen to write
  alike (a third of the exercises: a ninth of the pairs).
* oddities ``O = 1 - exp(-S / TAU_ODDITIES)``: ``S`` sums ``ODDITY_WEIGHTS[kind] * w`` over the shared
  identifiers, comments, strings, raise messages and dead statements, and once per exercise (at the most) the
  statements spelled alike or the whole function spelled alike (the latter weighed by how many of its statements
  are the student's own, up to ``SAME_STATEMENTS``). A text's weight is also times the rarity of its template
  (the text with the names of the code it mentions as ``_``: :func:`autograder.similarity.oddities.templated`),
  at least ``TEMPLATE_FLOOR``: "# compute v_heads" is rare only for its name when half the class writes
  "# compute" and a name.
* written answers ``W = 1 - exp(-P / TAU_WRITTEN)``: ``P`` sums ``w`` over the rare shingles (runs of 5 words) the
  two answers share, question by question: one shared phrase of 5 words is 1, a copied paragraph of 50 is 46.
* timing ``T = TIME_WEIGHT * close * same``, where both notebooks carry a trusted submission time: ``close`` falls
  from 1 (the same minute) to 0 at ``TIME_WINDOW_MINUTES`` apart, ``same`` is the share of the exercises both wrote
  whose whole normalized function is the same, and 0 unless one of those is not the baseline's.

The score is ``1 - (1 - C)(1 - O)(1 - W)(1 - T)``: evidence from independent channels adds up, none alone reaches 1.
A pair scoring at least ``FLOOR`` is worth a look. Two students who both wrote the reference's approach (or a
known alternative, or what many others wrote) share nothing that counts and score 0. Trusted: works are what
:mod:`autograder.similarity.corpus` read; nothing here reads a file.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from autograder.similarity.corpus import Baseline, Work
from autograder.similarity.prose import N as SHINGLE_WORDS

#: Rarity: the share of the class past which a key is worth nothing, and the least such limit (a small class).
RARE_SHARE, RARE_MIN = 0.04, 3
#: Each channel's scale: what one unit of evidence is worth (nodes of shared rare code, weighted oddities, words).
TAU_CODE, TAU_ODDITIES, TAU_WRITTEN = 12.0, 2.0, 25.0
#: What each kind of oddity weighs (a text: at most; a short one less, :func:`oddity_weight`).
ODDITY_WEIGHTS = {"identifier": 0.25, "comment": 1.0, "string": 0.7, "raise": 1.5, "dead": 1.0, "spelled": 0.2,
                  "same": 0.8}
TEXTS = ("comment", "string", "raise")
#: The statements of a function spelled alike (not as the course's files spell them) from which it weighs all of
#: ODDITY_WEIGHTS["same"].
SAME_STATEMENTS = 6
#: What a rare text weighs at least when its template is common (its own words are then only the names it mentions).
TEMPLATE_FLOOR = 0.1
#: Timing: the window within which two submissions count as close, and what the channel can reach.
TIME_WINDOW_MINUTES, TIME_WEIGHT = 30.0, 0.5
#: What two near-identical notebooks weigh in the code channel (every function the same, each rare), and the pairs of
#: functions that make a notebook near-identical at the least (two functions alike are one pair: a third of it).
NEAR_WEIGHT, NEAR_PAIRS = 0.9, 3
#: The least score of a pair worth a look.
FLOOR = 0.3

#: A key: ("code", exercise, hash), ("dead", exercise, hash), ("prose", question, hash), or an oddity
#: (kind, normalized text) of :mod:`autograder.similarity.oddities`.
Key = tuple[Any, ...]
CHANNELS = ("code", "oddities", "written", "timing")


@dataclass
class Scored:
    """One pair of an assignment's works (their numbers in :attr:`Cohort.works`, ``a`` < ``b``) and its score."""

    a: int
    b: int
    score: float
    channels: dict[str, float]
    keys: list[Key] = field(default_factory=list)


def rarity(df: int, students: int) -> float:
    """``w`` of a key ``df`` students hold, in a class of ``students`` (see the module's docstring)."""
    if df < 2:
        return 0.0
    limit = max(RARE_MIN, round(RARE_SHARE * students))
    return max(0.0, min(1.0, math.log((limit + 1) / df) / math.log((limit + 1) / 2)))


def saturating(mass: float, scale: float) -> float:
    return 1.0 - math.exp(-mass / scale) if mass > 0 else 0.0


class Cohort:
    """The works of one assignment, indexed: which keys each holds, how rare each key is, which pairs share one."""

    def __init__(self, works: list[Work], baseline: Baseline):
        self.works, self.baseline = works, baseline
        self.templates: dict[Key, Key] = {}             # a text's key -> its template's (oddities.templated)
        self.sizes: dict[Key, int] = {}                 # a whole function's key -> its statements spelled
        self.keys = [self.keys_of(w) for w in works]
        self.template_df = Counter(t for keys in self.keys for t in {self.templates[k] for k in keys
                                                                     if k in self.templates})
        self.df = Counter(k for keys in self.keys for k in keys)
        self.small = Counter((e, h) for w in works for e, fn in w.functions.items() for h in fn.small)
        self.limit = max(RARE_MIN, round(RARE_SHARE * len(works)))
        self._masks: dict[tuple[int, str], bytearray] = {}

    def keys_of(self, work: Work) -> set[Key]:
        """Every key of ``work`` the baseline does not hold."""
        base = self.baseline
        out: set[Key] = set()
        for exercise, fn in work.functions.items():
            out.update(("code", exercise, h) for h in fn.fragments if h not in base.fragments)
            out.update(("dead", exercise, h) for h in fn.dead if h not in base.dead)
            out.update(("spelled", exercise, h) for h in fn.spelled if h not in base.spelled)
            if fn.spelled and fn.whole_spelled not in base.spelled:
                out.add(("same", exercise, fn.whole_spelled))
                self.sizes[("same", exercise, fn.whole_spelled)] = len(set(fn.spelled) - base.spelled)
            for (kind, text), (_, template) in fn.oddities.items():
                if (text not in base.names) if kind == "identifier" else ((kind, text) not in base.texts):
                    out.add((kind, text))
                    if kind in TEXTS:
                        self.templates.setdefault((kind, text), ("template", kind, template))
        for question, answer in work.answers.items():
            out.update(("prose", question, h) for h in answer.shingles if h not in base.shingles)
        out.update(self._pairs_of(work))
        return out

    def _pairs_of(self, work: Work) -> set[Key]:
        """A key per two exercises of the notebook whose functions are both its own (not spelled as the course's
        files spell them): the two whole functions as spelled. Two notebooks share one where both functions are
        the same: what near-identical means."""
        exercises = sorted(e for e, fn in work.functions.items() if fn.whole_spelled not in self.baseline.spelled)
        return {("pair", f"{first}+{second}", hash((work.functions[first].whole_spelled,
                                                    work.functions[second].whole_spelled)))
                for i, first in enumerate(exercises) for second in exercises[i + 1:]}

    def weight(self, key: Key) -> float:
        """``w`` of ``key`` in this class (an identifier: 1 while at most two students use it, else 0)."""
        df = self.df[key]
        if key[0] == "identifier":
            return 1.0 if df == 2 else 0.0
        return rarity(df, len(self.works))

    def oddity(self, key: Key) -> float:
        """What a shared key weighs in the oddities' channel: its kind's weight (a text's, the more it says) times
        its rarity; 0 for a key of another channel."""
        weight = ODDITY_WEIGHTS.get(key[0], 0.0)
        if key[0] == "same":                  # a whole function spelled alike: the longer, the more it says
            weight *= min(1.0, self.sizes.get(key, 0) / SAME_STATEMENTS)
        if key in self.templates:             # a rare comment on a common template ("compute" and a name) says little
            weight *= max(TEMPLATE_FLOOR, rarity(self.template_df[self.templates[key]], len(self.works)))
        return weight * self.weight(key)

    def oddity_mass(self, keys: Iterable[Key]) -> float:
        """``S`` of the oddities' channel: the shared oddities' weights; statements spelled alike count once per
        exercise, at the rarest (one function spelled alike is one piece of evidence, however many lines)."""
        spelled: dict[str, float] = defaultdict(float)
        total = 0.0
        for key in keys:
            if key[0] in ("spelled", "same"):
                spelled[str(key[1])] = max(spelled[str(key[1])], self.oddity(key))
            else:
                total += self.oddity(key)
        return total + sum(spelled.values())

    def candidates(self) -> dict[tuple[int, int], list[Key]]:
        """(a, b) -> the keys with ``w > 0`` the two hold, for every pair that holds one."""
        postings: dict[Key, list[int]] = defaultdict(list)
        for number, keys in enumerate(self.keys):
            for key in keys:
                if self.weight(key) > 0:
                    postings[key].append(number)
        pairs: dict[tuple[int, int], list[Key]] = defaultdict(list)
        for key, members in postings.items():
            for x, a in enumerate(members):
                for b in members[x + 1:]:
                    pairs[(a, b)].append(key)
        return pairs

    def scored(self, floor: float = FLOOR) -> list[Scored]:
        """Every candidate pair scoring at least ``floor``, the highest first."""
        out = []
        for (a, b), keys in self.candidates().items():
            scored = self.score(a, b, keys)
            if scored.score >= floor:
                out.append(scored)
        out.sort(key=lambda s: (-s.score, self.works[s.a].student, self.works[s.b].student))
        return out

    def score(self, a: int, b: int, keys: list[Key]) -> Scored:
        """The score of the pair ``a``, ``b`` from the keys they share (see the module's docstring)."""
        near = NEAR_WEIGHT * self.near(a, b, keys)
        channels = {
            "code": 1.0 - (1.0 - saturating(sum(self.code_mass(a, b, keys).values()), TAU_CODE)) * (1.0 - near),
            "oddities": saturating(self.oddity_mass(keys), TAU_ODDITIES),
            "written": saturating(sum(self.written_mass(a, b, keys).values()), TAU_WRITTEN),
            "timing": self.timing(a, b)[0],
        }
        left = 1.0
        for value in channels.values():
            left *= 1.0 - value
        return Scored(a, b, round(1.0 - left, 3), {k: round(v, 3) for k, v in channels.items()}, keys)

    # -- the code channel ----------------------------------------------------------------------------------------
    def near(self, a: int, b: int, keys: Iterable[Key]) -> float:
        """How near-identical the two notebooks are: of the pairs of exercises where either wrote a function of
        their own (not spelled as the course's files spell it), the share whose two functions are the same in both,
        as spelled, each at its rarity. A copy shares every pair; students who write alike by habit share the pairs
        of the few exercises they happen to write alike, a share that falls as the square of theirs."""
        first, second = self.works[a].functions, self.works[b].functions
        spelled = self.baseline.spelled
        own = {e for e in set(first) & set(second)
               if first[e].whole_spelled not in spelled or second[e].whole_spelled not in spelled}
        if len(own) < 2:
            return 0.0
        shared = sum(self.weight(key) for key in keys if key[0] == "pair")
        return min(1.0, shared / max(NEAR_PAIRS, len(own) * (len(own) - 1) / 2))

    def code_mass(self, a: int, b: int, keys: Iterable[Key]) -> dict[str, float]:
        """exercise -> the weighted nodes of rare shared code, averaged over the pair's two functions."""
        by_exercise: dict[str, list[int]] = defaultdict(list)
        for key in keys:
            if key[0] == "code":
                by_exercise[str(key[1])].append(int(key[2]))
        return {exercise: (self.painted(a, exercise, hashes)[0] + self.painted(b, exercise, hashes)[0]) / 2
                for exercise, hashes in by_exercise.items()}

    def painted(self, number: int, exercise: str, hashes: list[int]) -> tuple[float, list[float]]:
        """The weighted nodes of one function that the fragments ``hashes`` cover (nodes the baseline or a common
        fragment covers count for nothing), and each node's weight."""
        fn = self.works[number].functions[exercise]
        masked = self.mask(number, exercise)
        paint = [0.0] * fn.nodes
        for h in hashes:
            w = self.weight(("code", exercise, h))
            for first, last in fn.fragments.get(h, ()):
                for node in range(first, last):
                    if paint[node] < w and not masked[node]:
                        paint[node] = w
        return sum(paint), paint

    def mask(self, number: int, exercise: str) -> bytearray:
        """1 for each node of a function that a fragment (or a smaller subtree) of the baseline, or a common one,
        covers."""
        cached = self._masks.get((number, exercise))
        if cached is not None:
            return cached
        fn = self.works[number].functions[exercise]
        masked = bytearray(fn.nodes)
        common = [ranges for h, ranges in fn.fragments.items()
                  if h in self.baseline.fragments or self.df[("code", exercise, h)] > self.limit]
        common += [ranges for h, ranges in fn.small.items()
                   if h in self.baseline.fragments or self.small[(exercise, h)] > self.limit]
        for ranges in common:
            for first, last in ranges:
                masked[first:last] = b"\x01" * (last - first)
        self._masks[(number, exercise)] = masked
        return masked

    # -- written answers and timing ------------------------------------------------------------------------------
    def written_mass(self, a: int, b: int, keys: Iterable[Key]) -> dict[str, float]:
        """question -> the rare shingles the pair's two answers share, each counted at its ``w``."""
        found: dict[str, float] = defaultdict(float)
        for key in keys:
            if key[0] == "prose":
                found[str(key[1])] += self.weight(key)
        return dict(found)

    def words_painted(self, number: int, question: str, hashes: list[int]) -> list[float]:
        """Each word of an answer, weighted by the rarest shared shingle that covers it."""
        answer = self.works[number].answers[question]
        paint = [0.0] * len(answer.words)
        for h in hashes:
            w = self.weight(("prose", question, h))
            for start in answer.shingles.get(h, ()):
                for i in range(start, min(start + SHINGLE_WORDS, len(paint))):
                    paint[i] = max(paint[i], w)
        return paint

    def timing(self, a: int, b: int) -> tuple[float, float, int, int]:
        """(T, minutes apart, exercises the same, exercises both wrote); T is 0 without two trusted times."""
        first, second = self.works[a], self.works[b]
        if first.when is None or second.when is None:
            return 0.0, 0.0, 0, 0
        minutes = abs((first.when - second.when).total_seconds()) / 60
        close = max(0.0, 1.0 - minutes / TIME_WINDOW_MINUTES)
        both = sorted(set(first.functions) & set(second.functions))
        same = [e for e in both if first.functions[e].whole == second.functions[e].whole]
        if close == 0.0 or all(first.functions[e].whole in self.baseline.fragments for e in same):
            return 0.0, minutes, len(same), len(both)      # nothing the two share but the course's own
        return TIME_WEIGHT * close * len(same) / len(both), minutes, len(same), len(both)
