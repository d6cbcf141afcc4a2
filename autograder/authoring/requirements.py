"""No unstated requirement, and no unenforced one: every hidden check names what the student was told,
and every requirement sentence is enforced by a check.

A hidden check may test only what its exercise's statement says. Each declares the requirement it
enforces (:class:`~autograder.catalog.Check`): ``statement=``, words of the statement, or ``same_as=``,
the public check that tests the same property on other inputs (which the student can run). This module
finds what the student reads for an exercise and lists every hidden check whose requirement is not there.

What the student reads for exercise X.Y, in the source notebook as the release shows it: its statement
cell (``exX_Y_statement``), its stub (``exX_Y`` outside the solution region: the signature and docstring)
and the notebook's other markdown cells that belong to no exercise (the introduction with the notebook's
conventions, explanations, the summary). Matching
ignores whitespace and Markdown's emphasis and code marks, so a quote need not copy the line breaks.

The other direction: an exercise's *requirements* are the sentences of its statement cell under the bold
headings 任务 (task), 要求 (requirements) and 禁止调用 (forbidden calls), up to the next other heading
or the 提示 (hint) paragraph, and every display formula ($$...$$) of the cell; each bullet, each sentence
(split at 。), each table row, each formula and the signature in the cell's title is one. Each
must be enforced: a check (public or hidden) whose ``statement=`` is words of that sentence covers it (a
hidden check's ``same_as=`` covers what its public twin covers); an alternative at full marks with
``statement=`` covers a permission ("其余 torch 函数都可以用"); and a sentence the statement itself
leaves ungraded is declared so with :func:`~autograder.catalog.not_graded` and a reason. Any other
sentence is an *unenforced requirement* and fails validate (issue: 5.7 said ties go to the lowest
index and no check fed a tie).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder.course.config import Course, grade_id
from autograder.course.notebook import cell_grade_id

_NOISE = re.compile(r"[\s*`$_\\]+")


def normalized(text: str) -> str:
    return _NOISE.sub("", text)


def _cells(path: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return []


_SOLUTION = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.S)


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return _SOLUTION.sub("", text)      # what the student gets is the stub: the solution is not a statement


def _notebook_cells(course: Course, assignment: Any) -> list[dict[str, Any]]:
    """The assignment's source notebook's cells (its release's where the source is not there)."""
    path = course.root / "source" / assignment.id / assignment.notebook
    if not path.is_file():
        path = course.root / "release" / assignment.id / assignment.notebook
    return _cells(path)



def statement_texts(course: Course) -> dict[str, str]:
    """exercise ID -> everything its student reads about it (see the module docstring)."""
    out: dict[str, str] = {}
    for a in course.assignments:
        own: dict[str, list[str]] = {e.id: [] for e in a.exercises}
        ids = {grade_id(e.id): e.id for e in a.exercises}
        ids.update({grade_id(e.id) + "_statement": e.id for e in a.exercises})
        shared: list[str] = []
        for cell in _notebook_cells(course, a):
            gid = cell_grade_id(cell) or ""
            if gid in ids:
                own[ids[gid]].append(_text(cell))
            elif cell.get("cell_type") == "markdown" and not gid.endswith("_statement"):
                shared.append(_text(cell))
        for e in a.exercises:
            out[e.id] = "\n".join(own[e.id] + shared)
    return out


def requirement_gaps(course: Course, exercises: list[str] | None = None) -> list[str]:
    """One line per hidden check whose requirement is missing or not found, per public check or alternative whose
    ``statement=`` is not found, and per exercise whose precision is not declared or whose words are not found."""
    texts = statement_texts(course)
    gaps: list[str] = []
    for ex in course.exercises:
        if exercises and ex.id not in exercises:
            continue
        public = {c.name for c in C.checks_for(ex.id, (C.Audience.PUBLIC,))}
        said = normalized(texts.get(ex.id, ""))
        for c in C.checks_for(ex.id, (C.Audience.HIDDEN,)):
            if c.statement is None and c.same_as is None:
                gaps.append(f"{ex.id}/{c.name}: names no requirement (statement= words of the statement, or "
                            f"same_as= a public check of {ex.id})")
            elif c.same_as is not None and c.same_as not in public:
                gaps.append(f"{ex.id}/{c.name}: same_as={c.same_as!r} is not a public check of {ex.id} "
                            f"(they are: {', '.join(sorted(public)) or 'none'})")
        quoting = [(c.name, c.statements) for c in C.CHECKS.get(ex.id, [])] + \
            [(f"alternative {a.name}", a.statements) for a in C.ALTERNATIVES.get(ex.id, [])]
        declared = C.PRECISIONS.get(ex.id)
        if declared is None:
            gaps.append(f"{ex.id}: declares no precision (precision([...], Precision.ONE_FLOAT32 or FLOAT64, "
                        f"statement= the words of the notebook that teach it) in checks.py)")
        else:
            quoting.append((f"precision {declared.precision.value}", (declared.statement,)))
        for name, statements in quoting:
            for words in statements:
                if normalized(words) not in said:
                    gaps.append(f"{ex.id}/{name}: statement={words!r} is not in what the student reads for "
                                f"{ex.id} (its statement cell, its stub, the notebook's other text)")
    return gaps


# -- the other direction: every requirement sentence enforced --------------------------------------------------

#: The bold headings whose text is requirements (task, requirements, forbidden calls).
_REQUIREMENT_HEADINGS = ("任务", "要求", "禁止调用")
_HEADING = re.compile(r"^\*\*([^*]+)\*\*")
_SIGNATURE = re.compile(r"`[A-Za-z_]\w*\(.*\)`")


@dataclass
class Requirement:
    """One requirement sentence of an exercise and what enforces it."""

    exercise: str
    sentence: str
    checks: list[str] = field(default_factory=list)          # "public/name" or "hidden/name"
    alternatives: list[str] = field(default_factory=list)    # permissions shown by an alternative
    not_graded: str | None = None                              # why no check enforces it, as declared

    @property
    def enforced_by(self) -> str | None:
        """What enforces it, first of: "checks", "alternatives" (a permission), "not graded"; None: nothing."""
        return ("checks" if self.checks else "alternatives" if self.alternatives
                else "not graded" if self.not_graded else None)

    @property
    def enforced(self) -> bool:
        return self.enforced_by is not None

    def enforcers(self, name: Callable[[str], str] = str) -> list[str]:
        """The checks and alternatives that enforce it (each name written by ``name``), or the declared reason
        it is not graded."""
        by = [name(c) for c in self.checks] + [f"alternative {name(a)}" for a in self.alternatives]
        return by or ([f"not graded: {self.not_graded}"] if self.not_graded else [])


def requirement_lines(statement: str) -> list[str]:
    """The lines of a statement cell under the requirement headings (see the module docstring)."""
    out: list[str] = []
    on = False
    formula: list[str] = []
    for line in statement.splitlines():
        if formula or (line.lstrip().startswith("$$") and not on):
            formula.append(line.strip())      # a display formula anywhere in the cell: what is computed
            joined = " ".join(formula)
            if len(joined) > 2 and joined.endswith("$$"):
                out.append(joined)
                formula = []
            continue
        signature = _SIGNATURE.search(line) if line.startswith("#") else None
        if signature:
            out.append(signature.group(0))        # the signature in the title: its defaults are requirements too
            continue
        m = _HEADING.match(line)
        if m:
            title = m.group(1).strip()
            on = title in _REQUIREMENT_HEADINGS
            rest = line[m.end():].lstrip("：: ")
            if on and rest:
                out.append((title if title not in ("任务", "要求") else "") + rest)
            continue
        if line.lstrip().startswith("提示"):
            on = False
        elif on and line.strip():
            out.append(line.strip())
    return out


def split_sentences(lines: list[str]) -> list[str]:
    """Bullets split at 。, and table rows (not the header or the rule), each one requirement."""
    out: list[str] = []
    header = True
    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            if not header:
                out.append(" | ".join(cells))
            header = False
            continue
        header = True
        line = re.sub(r"^[-*] ", "", line)
        if line.startswith("$$"):
            out.append(line)
            continue
        out.extend(p.strip() for p in re.split(r"(?<=。)", line) if p.strip())
    return out


def statement_requirements(course: Course) -> dict[str, list[str]]:
    """exercise ID -> its requirement sentences, as the source notebook states them."""
    out: dict[str, list[str]] = {}
    for a in course.assignments:
        cells = {cell_grade_id(c): c for c in _notebook_cells(course, a)}
        for e in a.exercises:
            cell = cells.get(grade_id(e.id) + "_statement")
            out[e.id] = split_sentences(requirement_lines(_text(cell))) if cell else []
    return out


def _covers(words: str, sentence: str) -> bool:
    w, s = normalized(words), normalized(sentence)
    return bool(w) and (w in s or s in w)


def requirement_coverage(course: Course, exercises: list[str] | None = None) -> tuple[list[Requirement], list[str]]:
    """Every requirement sentence with what enforces it, and one line per problem: a sentence nothing enforces,
    a :func:`~autograder.catalog.not_graded` declaration whose words are in no sentence (or in several)."""
    found: list[Requirement] = []
    problems: list[str] = []
    for ex_id, sentences in statement_requirements(course).items():
        if exercises and ex_id not in exercises:
            continue
        reqs = [Requirement(ex_id, s) for s in sentences]
        _attach_checks(ex_id, reqs)
        _attach_not_graded(ex_id, reqs, problems)
        for r in reqs:
            if not r.enforced:
                problems.append(f"{ex_id}: no check enforces «{r.sentence}» (give a check statement= words of "
                                f"it, or declare it not graded in hidden.py with the reason)")
        found.extend(reqs)
    return found, problems


def _attach_checks(ex_id: str, reqs: list[Requirement]) -> None:
    """Record on each requirement the checks (and the alternatives) whose statement words cover it."""
    checks = C.CHECKS.get(ex_id, [])
    public = {c.name: c for c in checks if c.audience is C.Audience.PUBLIC}
    for r in reqs:
        for c in checks:
            words = list(c.statements)
            if c.same_as in public:
                words += public[c.same_as].statements
            if any(_covers(w, r.sentence) for w in words):
                r.checks.append(f"{c.audience.value}/{c.name}")
        r.alternatives = [a.name for a in C.ALTERNATIVES.get(ex_id, [])
                          if any(_covers(w, r.sentence) for w in a.statements)]


def _attach_not_graded(ex_id: str, reqs: list[Requirement], problems: list[str]) -> None:
    """Mark the requirements each not_graded declaration names; a problem for one in other than one sentence."""
    for ng in C.NOT_GRADED.get(ex_id, []):
        hits = [r for r in reqs if normalized(ng.words) in normalized(r.sentence)]
        if len(hits) != 1:
            problems.append(f"{ex_id}: not_graded({ng.words!r}) is in {len(hits)} requirement sentences, "
                            f"not one")
        for r in hits:
            r.not_graded = ng.why
