"""The generated class of bench/bench_similarity.py: N students' notebooks for every assignment, honest and
copied, and the ground truth (which pairs copied, how, and which honest pairs look alike).

Honest students vary as a class does. Each has lasting traits (``Profile``): how often they write the
reference's approach, a correct alternative (the course's ``alternatives.py``) or a known mistake
(``mistakes.py``); whether they keep the book's names and spellings (a "conformist") or have their own
(``similarity_style.SPELLINGS``, names from ``NAME_GROUPS``); comments, blank lines, layout, docstrings kept or
not; a few personal quirks (a commented-out print, a personal note, an odd name, an unused line). A written
answer is made of the rubric's points in one of several phrasings, sometimes with a sentence of the student's
own. Conformists who write the reference's approach everywhere turn in the same code as each other: those
pairs are the "honest reference-like" pairs a report must not rank among its top.

Twenty pairs copy (``DISGUISES``, four pairs each, over four different assignments): the copier starts from
the source's notebook of one assignment and renames its locals, reorders independent statements, reformats
and recomments it, swaps operations for equivalent ones, or copies only two exercises and writes the rest
honestly. Every choice is drawn from ``random.Random`` seeded by the seed, the student and what is drawn: the
same seed writes the same bytes.
"""
from __future__ import annotations

import ast
import copy
import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import similarity_style as S

DISGUISES = ("renamed", "reordered", "reformatted", "equivalent", "partial")
PAIRS_PER_DISGUISE = 4
PARTIAL_EXERCISES = 2
#: (chance of the reference's approach, of a correct alternative), by skill; the rest: a known mistake.
SKILLS = {"reference-leaning": (0.9, 0.07), "mixed": (0.55, 0.3), "struggling": (0.4, 0.15)}
SKILL_SHARES = (0.4, 0.45, 0.15)
QUIRKS = ("debug", "note", "odd", "dead")
INITIALS = "abcdefghjklmnpqrstwxyz"
NOTES = {"zh": ["v{a}：对照了第 {b} 页的公式", "第 {a} 次改，终于对了", "参考第 {b} 页", "自己推的，{a} 分钟"],
         "en": ["v{a}: checked against page {b}", "attempt {a}, finally", "see p. {b}", "worked out in {a} min"]}
#: A written answer's words: each student picks one of each word's options (the word itself among them).
SYNONYMS = {
    "zh": {"因为": ("因为", "由于", "是因为"), "所以": ("所以", "因此", "于是"),
           "变小": ("变小", "减小", "缩小", "越来越小"), "就是": ("就是", "即", "正是"),
           "每一步": ("每一步", "每步", "每个时间步"), "接近": ("接近", "趋近", "靠近"),
           "一样": ("一样", "相同", "一致"), "得到": ("得到", "算出", "给出"), "不能": ("不能", "无法", "没法")},
    "en": {"because": ("because", "since", "as"), "shrinks": ("shrinks", "gets smaller", "decays"),
           "each": ("each", "every"), "becomes": ("becomes", "gets", "turns"), "the same": ("the same", "identical"),
           "cannot": ("cannot", "can't", "is unable to")},
}
OPENINGS = {"zh": ("", "我认为", "可以看到，", "简单说，", "答：", "首先，"),
            "en": ("", "I think ", "We can see that ", "In short, ", "Answer: ", "First, ")}
JOINERS = {"zh": ("，", "；", "，而且", "。"), "en": (", ", "; ", ", and ", ". ")}
OWN_SENTENCES = {"zh": ["我在 L = {n} 时试了一下，结果一致。", "我用 d = {n} 验证过。",
                        "第 {n} 个单元格的输出也说明了这一点。", "我觉得这和第 {n} 页的图是一回事。"],
                 "en": ["I checked it with L = {n}.", "Tried d = {n} as well.", "Cell {n}'s output shows it too."]}


@dataclass
class Approach:
    key: str                       # "reference", "alternative:<name>", "mistake:<name>"
    source: str                    # the cell's code, docstrings removed (parsed anew for each student: faster
                                   # than a deep copy of the tree)


@dataclass
class Bank:
    """Every approach of every exercise, and what the release's cells give (headers, docstrings)."""

    approaches: dict[str, list[Approach]]
    templates: dict[str, S.Template]
    notebooks: dict[str, Any]      # assignment -> the release notebook (a dict)


@dataclass
class Profile:
    student: str
    skill: str
    conformist: bool
    habits: S.Habits
    fmt: S.Format
    quirks: list[str]
    note: str
    suffix: str                    # their initials: an odd name's ending
    own_sentence: bool
    list_style: str                # "numbered", "paragraphs", "one"


@dataclass
class Draft:
    approach: str
    tree: ast.Module
    fmt: S.Format


@dataclass
class Notebook:
    drafts: dict[str, Draft]       # exercise ID -> its cell
    answers: dict[str, str]        # question ID -> its answer


@dataclass
class CopyPair:
    assignment: str
    source: str
    copier: str
    disguise: str
    exercises: list[str]           # the exercises copied


@dataclass
class Truth:
    seed: int
    students: list[str]
    pairs: list[CopyPair]
    reference_like: list[tuple[str, str, str]]           # (assignment, student_a, student_b), a < b
    approaches: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)   # student -> assignment -> ex

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)


# -- the course's approaches ---------------------------------------------------------------------
def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and len(node.body) > 1 and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) and \
                isinstance(node.body[0].value.value, str):
            node.body = node.body[1:]


def _bound(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


def _splice(reference: ast.Module, function: str, other: ast.Module, imported: set[str]) -> ast.Module:
    """The reference's cell with ``function``'s definition replaced by ``other``'s code (its imports first,
    those the notebook's imports cell already makes, or the cell does not use, left out)."""
    _strip_docstrings(other)
    imports = [s for s in other.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [s for s in other.body if s not in imports]
    cell = copy.deepcopy(reference)
    body: list[ast.stmt] = []
    for stmt in cell.body:
        body += rest if getattr(stmt, "name", None) == function else [stmt]
    used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    needed = [s for s in imports if ast.unparse(s) not in imported and any(_bound(a) in used for a in s.names)]
    cell.body = needed + body
    return cell


def load_bank(course: Any, make_samples: Any) -> Bank:
    """The approaches of every exercise: the reference cell, and each correct alternative and known mistake
    of the course's catalog put in its place (``autograder.authoring.alternatives.alternative_source``)."""
    from autograder.authoring.alternatives import alternative_source
    from autograder.catalog.declarations import ALTERNATIVES, MISTAKES
    from autograder.catalog.loading import load_catalog
    from autograder.course.config import grade_id

    load_catalog(course, hidden=False, mistakes=True, alternatives=True)
    approaches: dict[str, list[Approach]] = {}
    templates: dict[str, S.Template] = {}
    notebooks: dict[str, Any] = {}
    for a in course.assignments:
        nb = make_samples.student_notebook(a)
        notebooks[a.id] = nb
        cells = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
        imported = {ast.unparse(s) for s in ast.parse(cells["imports"].source).body} if "imports" in cells else set()
        for ex in a.exercises:
            templates[ex.id] = S.Template.of(cells[grade_id(ex.id)].source)
            reference = ast.parse(make_samples.solution_code(a, ex.id))
            _strip_docstrings(reference)
            found = [Approach("reference", ast.unparse(reference))]
            for kind, table in (("alternative", ALTERNATIVES), ("mistake", MISTAKES)):
                for decl in table.get(ex.id, []):
                    try:
                        other = ast.parse(alternative_source(decl, ex.function))
                    except (ValueError, SyntaxError):
                        continue
                    found.append(Approach(f"{kind}:{decl.name}",
                                          ast.unparse(_splice(reference, ex.function, other, imported))))
            approaches[ex.id] = found
    return Bank(approaches, templates, notebooks)


# -- students ------------------------------------------------------------------------------------
def _rng(seed: int, *what: object) -> random.Random:
    return random.Random(":".join(map(str, (seed, *what))))


def profile(seed: int, student: str) -> Profile:
    """A student's lasting traits (the same for every assignment)."""
    r = _rng(seed, student, "profile")
    conformist = r.random() < 0.35
    language = "zh" if r.random() < 0.7 else "en"
    density = r.choices((0.0, 0.25, 0.6), (0.45, 0.35, 0.2))[0]
    habits = S.Habits(spellings={} if conformist else S.choose_spellings(r), rename=0.0 if conformist else 0.6,
                      comments=density, language=language, blank=r.choice((0.0, 0.0, 0.0, 0.15, 0.3)),
                      return_var="" if conformist or r.random() > 0.15 else r.choice(("result", "out", "res", "ans")),
                      voice=S.comment_voice(r, language))
    fmt = S.Format(keep_doc=r.random() < 0.8, quotes='"' if r.random() < 0.6 else "'",
                   compact_ops=r.random() < 0.1, tight_commas=r.random() < 0.08, spaced_kwargs=r.random() < 0.05,
                   trailing=r.random() < 0.5)
    quirks = r.sample(QUIRKS, r.choices((0, 1, 2), (0.6, 0.3, 0.1))[0])
    note = r.choice(NOTES[language]).format(a=r.randint(2, 99), b=r.randint(10, 400))
    return Profile(student, r.choices(list(SKILLS), SKILL_SHARES)[0], conformist, habits, fmt, quirks, note,
                   "".join(r.sample(INITIALS, 2)), r.random() < 0.3,
                   r.choice(("numbered", "paragraphs", "one")))


def _choose(approaches: list[Approach], skill: str, r: random.Random) -> Approach:
    reference, alternative = SKILLS[skill]
    alternatives = [x for x in approaches if x.key.startswith("alternative:")]
    mistakes = [x for x in approaches if x.key.startswith("mistake:")]
    roll = r.random()
    if roll < reference or not (alternatives or mistakes):
        return approaches[0]
    if (roll < reference + alternative and alternatives) or not mistakes:
        return r.choice(alternatives)
    return r.choices(mistakes, [1 / (k + 1) for k in range(len(mistakes))])[0]   # the common mistakes first


def _main_def(tree: ast.Module, function: str) -> ast.FunctionDef | None:
    node = next((s for s in tree.body if getattr(s, "name", None) == function), None)
    if isinstance(node, ast.ClassDef):
        methods = [m for m in node.body if isinstance(m, ast.FunctionDef)]
        node = next((m for m in methods if m.name == "forward"), methods[0] if methods else None)
    return node if isinstance(node, ast.FunctionDef) else None


def _quirk(tree: ast.Module, function: str, kind: str, p: Profile, r: random.Random) -> None:
    fn = _main_def(tree, function)
    if fn is None or not fn.body:
        return
    local = (S.locals_of(fn) or [a.arg for a in fn.args.args if a.arg != "self"] or ["x"])[0]
    if kind == "debug":
        fn.body[-1].before = [*getattr(fn.body[-1], "before", []), f"print({local}.shape)"]   # type: ignore[attr-defined]
    elif kind == "note":
        fn.body[0].before = [*getattr(fn.body[0], "before", []), p.note]                     # type: ignore[attr-defined]
    elif kind == "odd" and S.locals_of(fn):
        S.rename(tree, {local: f"{local}_{p.suffix}"})
    elif kind == "dead":
        name = next((n for n in ("eps", "tiny", "EPS") if n not in S.names_in(tree)), None)
        if name:
            fn.body.insert(0, ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                         value=ast.Constant(value=10.0 ** -r.randint(5, 12)), lineno=0))


def honest_draft(bank: Bank, exercise: Any, p: Profile, seed: int, assignment: str) -> Draft:
    """What student ``p`` writes for ``exercise`` on their own."""
    r = _rng(seed, p.student, assignment, exercise.id)
    approach = _choose(bank.approaches[exercise.id], p.skill, r)
    tree = S.spell(ast.parse(approach.source), p.habits.spellings)
    if p.habits.rename:
        taken = S.names_in(tree)
        pick = {}
        for name in S.all_locals(tree):
            mine = _rng(seed, p.student, "name", name)          # a student names the same thing the same way
            # A name no group holds is the approach's own: kept more often, else made over one of many ways.
            if mine.random() < p.habits.rename * (1 if name in S.GROUP_OF else 0.4):
                new = mine.choice(S.synonyms(name)[1:])
                if new not in taken:
                    pick[name] = new
                    taken.add(new)
        S.rename(tree, pick)
    if p.habits.return_var:
        S.return_via(tree, p.habits.return_var)
    S.annotate(tree, p.habits, r)
    for kind in p.quirks:
        if r.random() < 0.5:
            _quirk(tree, exercise.function, kind, p, r)
    return Draft(approach.key, tree, p.fmt)


def voice(seed: int, student: str, language: str) -> dict[str, Any]:
    """How a student words things: their connectives and synonyms, an opening, a joiner of clauses."""
    r = _rng(seed, student, "voice")
    swaps = {word: r.choice(options) for word, options in SYNONYMS[language].items()}
    return {"swaps": swaps, "opening": r.choice(OPENINGS[language]), "joiner": r.choice(JOINERS[language]),
            "keep": r.choice((0.4, 0.6, 0.8))}


def _phrase(item: Any, language: str, v: dict[str, Any], r: random.Random) -> str:
    """One rubric point in the student's words: some of its clauses, their words swapped for the student's."""
    zh = language == "zh" and bool(item.text_zh)
    text = (item.text_zh if zh else item.text).rstrip("。.")
    clauses = [c for c in re.split(r"[：；，:;,]\s*" if zh else r"[:;,]\s+", text) if c.strip()]
    kept = [clauses[0]] + [c for c in clauses[1:] if r.random() < v["keep"]]
    sentence = v["joiner"].join(kept)
    for word, other in v["swaps"].items():
        sentence = sentence.replace(word, other)
    opening = v["opening"] if r.random() < 0.5 else ""
    return opening + sentence + ("。" if zh else ".")


def _join(parts: list[str], style: str) -> str:
    if style == "numbered":
        return "\n".join(f"{i}. {part}" for i, part in enumerate(parts, 1))
    return ("\n\n" if style == "paragraphs" else " ").join(parts)


def honest_answer(question: Any, p: Profile, seed: int) -> list[str]:
    """The sentences of student ``p``'s answer to ``question``: most of the rubric's points (a wrong claim
    now and then), in the student's words, sometimes a sentence of their own."""
    r = _rng(seed, p.student, question.id)
    language = p.habits.language
    v = voice(seed, p.student, language)
    parts = [_phrase(item, language, v, r) for item in question.rubric
             if r.random() < (0.8 if item.points > 0 else 0.1)]
    if p.own_sentence:
        parts.append(r.choice(OWN_SENTENCES[language]).format(n=r.randint(3, 999)))
    return parts or [_phrase(question.rubric[0], language, v, r)]


# -- copies --------------------------------------------------------------------------------------
def plan_pairs(students: list[str], assignments: list[str], seed: int) -> list[CopyPair]:
    """Twenty pairs of distinct students, four per disguise, each disguise over four different assignments."""
    r = _rng(seed, "pairs")
    total = len(DISGUISES) * PAIRS_PER_DISGUISE
    if len(students) < 2 * total:
        raise ValueError(f"{total} copy pairs need at least {2 * total} students, got {len(students)}")
    chosen = r.sample(students, 2 * total)
    pairs = []
    for i in range(total):
        d, j = divmod(i, PAIRS_PER_DISGUISE)
        pairs.append(CopyPair(assignments[(d + j) % len(assignments)], chosen[2 * i], chosen[2 * i + 1],
                              DISGUISES[d], []))
    return pairs


def _disguised(draft: Draft, disguise: str, copier: Profile, r: random.Random) -> Draft:
    tree = copy.deepcopy(draft.tree)
    fmt = copy.copy(draft.fmt)
    if disguise == "renamed":
        S.rename(tree, S.own_names(tree, r, 0.9))
    elif disguise == "reordered":
        S.reorder(tree, r)
    elif disguise == "reformatted":
        S.strip_comments(tree)
        habits = copy.copy(copier.habits)
        habits.comments = max(habits.comments, 0.3)
        habits.blank = r.choice((0.0, 0.2, 0.4))
        S.annotate(tree, habits, r)
        fmt = S.Format(keep_doc=not fmt.keep_doc if r.random() < 0.5 else fmt.keep_doc,
                       quotes="'" if fmt.quotes == '"' else '"', compact_ops=not fmt.compact_ops,
                       tight_commas=r.random() < 0.3, spaced_kwargs=r.random() < 0.2, trailing=not fmt.trailing)
    elif disguise == "equivalent":
        now = {key: options[0] for key, (options, _) in S.SPELLINGS.items()}
        tree = S.spell(tree, S.other_spellings({**now, **copier.habits.spellings}, r))
    return Draft(draft.approach, tree, fmt)


def copied(source: Notebook, own: Notebook, pair: CopyPair, copier: Profile, seed: int,
           exercises: list[str]) -> Notebook:
    """The copier's notebook: the source's, disguised (``pair.exercises`` records what was copied)."""
    r = _rng(seed, "copy", pair.copier, pair.assignment)
    if pair.disguise == "partial":
        pair.exercises = sorted(r.sample(exercises, PARTIAL_EXERCISES))
        drafts = {ex: copy.deepcopy(source.drafts[ex]) if ex in pair.exercises else own.drafts[ex] for ex in exercises}
        return Notebook(drafts, own.answers)
    pair.exercises = list(exercises)
    drafts = {ex: _disguised(source.drafts[ex], pair.disguise, copier, r) for ex in exercises}
    answers = dict(source.answers)
    if pair.disguise == "reordered":
        answers = {q: "\n\n".join(text.split("\n\n")[::-1]) for q, text in answers.items()}
    elif pair.disguise == "reformatted":
        answers = {q: text.replace("\n\n", "\n").replace("。", "。 ") for q, text in answers.items()}
    return Notebook(drafts, answers)


# -- the class -----------------------------------------------------------------------------------
def _cell_source(draft: Draft, template: S.Template) -> str:
    return S.render(draft.tree, template, draft.fmt)


def notebook_bytes(bank: Bank, assignment: Any, book: Notebook) -> bytes:
    """The release notebook with the student's cells filled in (JSON as nbformat writes it)."""
    from autograder.course.config import grade_id
    from autograder.course.written import answer_grade_id

    fill = {grade_id(ex): _cell_source(d, bank.templates[ex]) for ex, d in book.drafts.items()}
    fill.update({answer_grade_id(q): text for q, text in book.answers.items()})
    nb = dict(bank.notebooks[assignment.id])
    nb["cells"] = [dict(c, source=fill[gid]) if (gid := c.get("metadata", {}).get("nbgrader", {}).get("grade_id"))
                   in fill else c for c in nb["cells"]]
    return (json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _signature(book: Notebook) -> tuple[str, ...] | None:
    """The code as the syntax tree has it (no comments, layout or docstrings), if every exercise is the
    reference's approach; else None."""
    if any(d.approach != "reference" for d in book.drafts.values()):
        return None
    return tuple(ast.dump(d.tree) for _, d in sorted(book.drafts.items()))


def reference_like(assignment: str, books: dict[str, Notebook], involved: set[str]) -> list[tuple[str, str, str]]:
    """Pairs of honest students of ``assignment`` who wrote the reference's approach everywhere, the same code."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for student, book in books.items():
        sig = _signature(book)
        if sig is not None and student not in involved:
            groups[sig].append(student)
    return [(assignment, a, b) for group in groups.values() for i, a in enumerate(sorted(group))
            for b in sorted(group)[i + 1:]]


def generate(folder: Path, n: int, course: Any, seed: int, make_samples: Any) -> Truth:
    """``n`` students' notebooks of every assignment under ``folder``/<student>/<assignment>/<notebook>
    (nbgrader's layout, as bench_peers writes it), and the ground truth."""
    bank = load_bank(course, make_samples)
    students = [f"s{i:03d}" for i in range(1, n + 1)]
    profiles = {s: profile(seed, s) for s in students}
    pairs = plan_pairs(students, [a.id for a in course.assignments], seed)
    truth = Truth(seed, students, pairs, [])
    for a in course.assignments:
        exercises = [ex.id for ex in a.exercises]
        books = {s: Notebook({ex.id: honest_draft(bank, ex, profiles[s], seed, a.id) for ex in a.exercises},
                             {q.id: _join(honest_answer(q, profiles[s], seed), profiles[s].list_style)
                              for q in a.questions}) for s in students}
        mine = [p for p in pairs if p.assignment == a.id]
        for pair in mine:
            books[pair.copier] = copied(books[pair.source], books[pair.copier], pair, profiles[pair.copier], seed,
                                        exercises)
        truth.reference_like += reference_like(a.id, books, {s for p in mine for s in (p.source, p.copier)})
        for s, book in books.items():
            path = folder / s / a.id / a.notebook
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(notebook_bytes(bank, a, book))
            truth.approaches.setdefault(s, {})[a.id] = {ex: d.approach for ex, d in book.drafts.items()}
    return truth
