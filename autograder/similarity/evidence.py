"""What a pair worth a look shares, in a person's words (:func:`explain`): the short list the CSV's ``evidence``
column holds, and the two students' functions side by side with the lines that matched, for the HTML report.

Each item names where it was found (an exercise, a question) and quotes a little of it: the shared rare fragment
that covers the most (``2.4: shared rare fragment `...```), the unusual identifiers both use, an identical
comment, string or error message, the same dead statement, the longest shared rare phrase of a written answer,
and two submissions minutes apart. Items come strongest first, at most :data:`MAX_ITEMS`. Everything quoted is
student text that passed the text gate where it was read; the HTML report escapes it again.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from autograder.core.text import line
from autograder.similarity.fragments import FunctionCode, cut
from autograder.similarity.scoring import ODDITY_WEIGHTS, Cohort, Key, Scored

#: Items of evidence kept per pair (the page shows them all), those the CSV's cell holds, and its characters.
MAX_ITEMS, CSV_ITEMS, EVIDENCE_CHARS = 12, 6, 800
#: Characters quoted from a fragment, a comment or a phrase.
QUOTE_CHARS = 70


@dataclass
class Side:
    """One student's function of a pair: its lines, and which of them hold matched code."""

    lines: list[str]
    marked: set[int] = field(default_factory=set)


@dataclass
class Shown:
    """One exercise of a pair, side by side."""

    exercise: str
    a: Side | None
    b: Side | None


@dataclass
class Explained:
    """A pair worth a look, as the report shows it."""

    assignment: str
    student_a: str
    student_b: str
    score: float
    channels: dict[str, float]
    evidence: list[str]
    shown: list[Shown]

    @property
    def evidence_text(self) -> str:
        """The CSV's cell: the strongest items, on one line."""
        return line("; ".join(self.evidence[:CSV_ITEMS]), EVIDENCE_CHARS)


def explain(cohort: Cohort, pair: Scored) -> Explained:
    """``pair`` of ``cohort`` in words and side by side (see the module's docstring)."""
    first, second = cohort.works[pair.a], cohort.works[pair.b]
    items: list[tuple[float, str]] = []
    marks: dict[str, tuple[set[int], set[int]]] = defaultdict(lambda: (set(), set()))
    items += _code(cohort, pair, marks)
    items += _oddities(cohort, pair, marks)
    items += _written(cohort, pair)
    for extra in (_near(cohort, pair), _timing(cohort, pair)):
        if extra is not None:
            items.append(extra)
    items.sort(key=lambda item: -item[0])
    shown = [Shown(exercise, _side(first.functions.get(exercise), marks[exercise][0]),
                   _side(second.functions.get(exercise), marks[exercise][1]))
             for exercise in sorted(marks)]
    return Explained(first.assignment, first.student, second.student, pair.score, pair.channels,
                     [text for _, text in items[:MAX_ITEMS]], shown)


def _side(fn: FunctionCode | None, marked: set[int]) -> Side | None:
    return None if fn is None else Side(fn.lines, marked)


def _code(cohort: Cohort, pair: Scored, marks: dict[str, tuple[set[int], set[int]]]) -> list[tuple[float, str]]:
    """Per exercise, the shared rare fragment covering the most of the first function; the lines matched."""
    items = []
    for exercise, mass in cohort.code_mass(pair.a, pair.b, pair.keys).items():
        hashes = [int(k[2]) for k in pair.keys if k[0] == "code" and k[1] == exercise]
        fn_a = cohort.works[pair.a].functions[exercise]
        fn_b = cohort.works[pair.b].functions[exercise]
        _, paint_a = cohort.painted(pair.a, exercise, hashes)
        _, paint_b = cohort.painted(pair.b, exercise, hashes)
        marks[exercise][0].update(fn_a.node_lines[i] for i, w in enumerate(paint_a) if w > 0)
        marks[exercise][1].update(fn_b.node_lines[i] for i, w in enumerate(paint_b) if w > 0)
        best = max(((sum(paint_a[first:last]), first, last) for h in hashes for first, last in fn_a.fragments[h]),
                   default=None)
        if best is not None and best[0] > 0 and mass > 0:
            quoted = fn_a.text(best[1], best[2], QUOTE_CHARS)
            items.append((mass / 4, f"{exercise}: shared rare fragment `{quoted}`"))
    return items


def _oddities(cohort: Cohort, pair: Scored, marks: dict[str, tuple[set[int], set[int]]]) -> list[tuple[float, str]]:
    """The shared oddities, grouped: identifiers and statements spelled alike per exercise, each comment, string,
    message and dead statement."""
    first, second = cohort.works[pair.a], cohort.works[pair.b]
    names: dict[str, list[str]] = defaultdict(list)
    spelled: dict[str, list[int]] = defaultdict(list)
    whole: dict[str, float] = {}
    items: list[tuple[float, str]] = []
    for key in pair.keys:
        kind = key[0]
        if kind == "spelled":
            spelled[str(key[1])].append(int(key[2]))
        elif kind == "same":
            whole[str(key[1])] = cohort.oddity(key)
        elif kind == "dead":
            items.append(_dead(cohort, pair, key, marks))
        elif kind in _WORDS or kind == "identifier":
            exercise, shown = _where(first.functions, key)
            if kind == "identifier":
                names[exercise].append(shown)
            else:
                items.append((cohort.oddity(key), f"{exercise}: {_WORDS[kind]} {_quoted(kind, shown)}"))
            if exercise in first.functions and exercise in second.functions:
                marks.setdefault(exercise, (set(), set()))        # shown side by side, nothing marked
    for exercise, found in names.items():
        items.append((ODDITY_WEIGHTS["identifier"] * len(found),
                      f"{exercise}: same identifiers {cut(', '.join(sorted(found)), QUOTE_CHARS)}"))
    items += [_spelled(cohort, pair, exercise, hashes, marks, whole.get(exercise))
              for exercise, hashes in spelled.items()]
    return items


def _dead(cohort: Cohort, pair: Scored, key: Key, marks: dict[str, tuple[set[int], set[int]]]) -> tuple[float, str]:
    exercise = str(key[1])
    fn_a, fn_b = cohort.works[pair.a].functions[exercise], cohort.works[pair.b].functions[exercise]
    node_a, node_b = fn_a.dead[int(key[2])], fn_b.dead[int(key[2])]
    marks[exercise][0].add(fn_a.node_lines[node_a])
    marks[exercise][1].add(fn_b.node_lines[node_b])
    return cohort.oddity(key), f"{exercise}: same dead code `{fn_a.text(node_a, node_a + 1, QUOTE_CHARS)}`"


def _spelled(cohort: Cohort, pair: Scored, exercise: str, hashes: list[int],
             marks: dict[str, tuple[set[int], set[int]]], whole: float | None) -> tuple[float, str]:
    """The statements of one exercise the two wrote alike, in the same local names: how many, and one of them
    (``whole``: the weight of the whole function spelled alike, where it is)."""
    fn_a, fn_b = cohort.works[pair.a].functions[exercise], cohort.works[pair.b].functions[exercise]
    nodes_a, nodes_b = [fn_a.spelled[h] for h in hashes], [fn_b.spelled[h] for h in hashes]
    marks[exercise][0].update(fn_a.node_lines[n] for n in nodes_a)
    marks[exercise][1].update(fn_b.node_lines[n] for n in nodes_b)
    example = fn_a.text(min(nodes_a), min(nodes_a) + 1, QUOTE_CHARS)
    weight = max([whole or 0.0, *(cohort.oddity(("spelled", exercise, h)) for h in hashes)])
    count = f"{len(hashes)} statements" if len(hashes) > 1 else "a statement"
    if whole is not None:
        return weight, f"{exercise}: the whole function in the same names ({count} of its own), e.g. `{example}`"
    return weight, f"{exercise}: {count} in the same names, e.g. `{example}`"


_WORDS = {"comment": "identical comment", "string": "identical string", "raise": "same error message"}


def _quoted(kind: str, text: str) -> str:
    text = cut(text, QUOTE_CHARS)
    return f"`# {text}`" if kind == "comment" else f"“{text}”"


def _where(functions: dict[str, FunctionCode], key: Key) -> tuple[str, str]:
    """(the exercise whose function holds the oddity ``key``, what it shows)."""
    for exercise in sorted(functions):
        found = functions[exercise].oddities.get((str(key[0]), str(key[1])))
        if found is not None:
            return exercise, found[0]
    return "?", str(key[1])


def _written(cohort: Cohort, pair: Scored) -> list[tuple[float, str]]:
    """Per question, the longest run of the first answer's words that shared rare shingles cover."""
    items = []
    for question, mass in cohort.written_mass(pair.a, pair.b, pair.keys).items():
        hashes = [int(k[2]) for k in pair.keys if k[0] == "prose" and k[1] == question]
        paint = cohort.words_painted(pair.a, question, hashes)
        best, start = (0, 0), None
        for i, w in enumerate([*paint, 0.0]):
            if w > 0 and start is None:
                start = i
            elif w == 0 and start is not None:
                best, start = max(best, (i - start, start)), None
        if best[0] and mass > 0:
            phrase = cohort.works[pair.a].answers[question].phrase(best[1], best[1] + best[0], QUOTE_CHARS)
            label = question.split(".", 1)[-1] if "." in question else question
            items.append((mass / 2, f"{label}: shared rare phrase “{phrase}”"))
    return items


def _near(cohort: Cohort, pair: Scored) -> tuple[float, str] | None:
    """The notebooks near-identical: how many of the functions both wrote are the same, spelled alike."""
    near = cohort.near(pair.a, pair.b, pair.keys)
    if near <= 0:
        return None
    first, second = cohort.works[pair.a].functions, cohort.works[pair.b].functions
    both = sorted(set(first) & set(second))
    same = [e for e in both if first[e].whole_spelled == second[e].whole_spelled
            and first[e].whole_spelled not in cohort.baseline.spelled]
    return 4 * near, f"near-identical: {len(same)} of {len(both)} functions the same in the same names"


def _timing(cohort: Cohort, pair: Scored) -> tuple[float, str] | None:
    value, minutes, same, both = cohort.timing(pair.a, pair.b)
    if value <= 0:
        return None
    return value * 2, f"submitted {minutes:.0f} min apart, {same} of {both} functions identical"
