"""Correct alternatives, graded as submissions: the first promise of a grade (a correct answer gets full
marks) proven the way ``validate --mutants`` proves the second.

Each assignment folder may hold ``alternatives.py``: correct implementations written another way than
the reference (a loop against vectorized code, einsum, logsumexp, float64 and back, an early return for
an empty input...), each declared with ``@alternative(exercise, name, zh=..., en=...)``. The function
(or class) has the student's signature; its source, renamed to the exercise's function, with the
module's imports and the module-level helpers it uses before it, replaces the reference's definition in
the solved notebook of its assignment, and that notebook is graded in the sandbox exactly as
``autograder grade`` grades a student's, under several students' names (each name seeds other hidden
inputs). An alternative is *fair* when the whole notebook keeps full marks on every seed: its own
exercise, and every exercise built on it (a 2.2 softmax that made 2.4 lose points would be unfair too). An
alternative of an exercise that builds on others is graded a second time on the substitution path, its
dependencies left unanswered so the references stand in for them, and must keep full marks there too (a
stand-in that refuses what a correct answer passes, 4.4's None biases to 4.3, would cost it points).
"""
from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder import catalog as C
from autograder.authoring.session import GradingSession
from autograder.catalog.declarations import Alternative, Mistake
from autograder.course.config import Course
from autograder.grading.references import reference as solution_for
from autograder.grading.submission import hidden_seed_parts
from autograder.grading.submissions import Submission
from autograder.core.pyast import parse as parse_python


#: The decorators that declare a definition of a course's modules: a correct alternative, a known mistake.
DECLARATIONS = ("alternative", "mistake")


def alternative_source(alt: Alternative | Mistake, function: str) -> str:
    """The code that goes into the solution cell: imports, helpers, then the definition named ``function``
    (an alternative's, or a known mistake's: each declared by its decorator in its module)."""
    kind = "mistake" if isinstance(alt, Mistake) else "alternative"
    path = inspect.getsourcefile(alt.fn)
    if path is None:
        raise ValueError(f"{kind} {alt.exercise}/{alt.name}: its source file cannot be found")
    text = Path(path).read_text(encoding="utf-8")
    tree = parse_python(text)
    lines = text.splitlines(True)
    target = next((node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                   and _declares(node, alt.exercise, alt.name, kind)), None)
    if target is None:
        raise ValueError(f"{path}: no top-level definition decorated @{kind}({alt.exercise!r}, {alt.name!r})")
    imports = [_segment(lines, node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
               and not _is_kit_import(node)]
    helpers = _helpers(tree, target, lines)
    definition = _segment(lines, target, with_decorators=False)
    head, _, rest = definition.partition(target.name)
    renamed = head + function + rest
    return "".join(imports) + "\n" + "".join(h + "\n" for h in helpers) + renamed


def _declares(node: ast.FunctionDef | ast.ClassDef, exercise: str, name: str, kind: str = "alternative") -> bool:
    for deco in node.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "id", getattr(deco.func, "attr", "")) == kind:
            args = [a.value for a in deco.args[:2] if isinstance(a, ast.Constant)]
            if args == [exercise, name]:
                return True
    return False


def _is_kit_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module in ("__future__",) or (node.module or "").split(".")[0] == "autograder" or node.level > 0
    return any(alias.name.split(".")[0] == "autograder" for alias in node.names)


def _segment(lines: list[str], node: ast.stmt, with_decorators: bool = True) -> str:
    start = node.lineno
    if with_decorators:
        start = min([start] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1:node.end_lineno])


def _helpers(tree: ast.Module, target: ast.stmt, lines: list[str]) -> list[str]:
    """Module-level definitions and assignments (not alternatives themselves) that ``target`` uses,
    transitively, in the module's order."""
    defined: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not any(
                isinstance(d, ast.Call) and getattr(d.func, "id", "") in DECLARATIONS for d in node.decorator_list):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name):
                    defined[t.id] = node
    wanted: list[ast.stmt] = []
    todo: list[ast.stmt] = [target]
    while todo:
        node = todo.pop()
        for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            helper = defined.get(name)
            if helper is not None and helper not in wanted:
                wanted.append(helper)
                todo.append(helper)
    order = {id(node): i for i, node in enumerate(tree.body)}
    return [_segment(lines, node) for node in sorted(wanted, key=lambda n: order[id(n)])]


# -- grading them -----------------------------------------------------------------------------------
@dataclass
class AlternativeVerdict:
    exercise: str
    name: str
    description: Any                                   # messages.Msg
    points: float = 0.0                                # its exercise's lowest score over the seeds
    max_points: float = 0.0                            # its exercise's points
    seeds: int = 0
    lost: list[str] = field(default_factory=list)      # "2.4/reference-random (seed 1): message", one per failure
    error: str = ""                                    # the source could not be made into a notebook

    @property
    def fair(self) -> bool:
        return not self.error and not self.lost and self.seeds > 0


def seed_names(seeds: int) -> list[str]:
    """The students an alternative is graded as: each name seeds other hidden inputs."""
    return [f"alternative-seed-{i}" for i in range(seeds)]


def grade_alternatives(course: Course, alternatives: list[Alternative], *, seeds: int = 3, jobs: int = 2,
                       workdir: Path, progress: Callable[[AlternativeVerdict], None] | None = None
                       ) -> list[AlternativeVerdict]:
    """Grade each alternative's notebook in the sandbox under ``seeds`` students' names."""
    from autograder.grading.earlier import dependencies  # noqa: PLC0415 - loads torch

    with GradingSession(course, workdir) as session:
        session.require_full_marks(sorted({course.exercise(a.exercise)[0].id for a in alternatives}))

        def one(alt: Alternative) -> AlternativeVerdict:
            assignment, ex = course.exercise(alt.exercise)
            verdict = AlternativeVerdict(alt.exercise, alt.name, alt.description)
            try:
                source = alternative_source(alt, ex.function)
                data = session.notebooks.notebook(assignment.id, alt.exercise, ex.function, source)
            except (ValueError, KeyError, SyntaxError) as exc:
                verdict.error = f"{type(exc).__name__}: {exc}"
            else:
                totals = []
                verdict.max_points = ex.points
                # The substitution path: its dependencies unanswered, so the references stand in for them and
                # answer every call this alternative makes (a stand-in must take whatever a correct answer passes).
                deps = dependencies(course, ex)
                stood_in = {d.id for d in deps}
                substituted = session.notebooks.notebook(
                    assignment.id, alt.exercise, ex.function, source,
                    unanswered=tuple(dict.fromkeys(d.function for d in deps))) if deps else None
                for seed, student in enumerate(seed_names(seeds)):
                    name = f"{student}-{alt.exercise}-{alt.name}"
                    result = session.grade(assignment.id, name, data)
                    own = [e for e in result.get("exercises") or [] if e["exercise"] == alt.exercise]
                    totals.append(float(own[0]["points"]) if own else 0.0)
                    losses = _losses(result, seed)
                    if losses:
                        losses = explain(course, alt, source, name, data, seed) or losses
                    if substituted is not None:
                        result = session.grade(assignment.id, f"{name}-substituted", substituted)
                        lost = [loss + " (its dependencies answered by the references)" for loss in
                                _losses(result, seed, skip=stood_in)]
                        own = [e for e in result.get("exercises") or [] if e["exercise"] == alt.exercise]
                        totals.append(float(own[0]["points"]) if own else 0.0)
                        losses += lost
                    verdict.lost += losses
                    verdict.seeds += 1
                verdict.points = min(totals) if totals else 0.0
            if progress:
                progress(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="alternative") as pool:
            return list(pool.map(one, alternatives))


# -- known mistakes, graded as submissions ---------------------------------------------------------
@dataclass
class OnlyLosesVerdict:
    """A known mistake graded inside an otherwise correct notebook: it must lose points on its own exercise
    and nowhere else (the exercises built on it are graded with the reference standing in)."""

    exercise: str
    name: str
    seeds: int = 0
    own_lost: bool = True                              # its own exercise lost points on every seed
    elsewhere: list[str] = field(default_factory=list)     # "2.4/reference-random (seed 1): message"
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and not self.elsewhere and self.own_lost and self.seeds > 0

    @property
    def said(self) -> str:
        """What is wrong, for the report ("" when nothing is)."""
        if self.ok:
            return ""
        return self.error or ("; ".join(self.elsewhere[:3]) if self.elsewhere else "its own exercise kept full marks")


def grade_mistakes(course: Course, mistakes: list[Mistake], *, seeds: int = 3, jobs: int = 2, workdir: Path,
                   progress: Callable[[OnlyLosesVerdict], None] | None = None) -> list[OnlyLosesVerdict]:
    """Grade each known mistake's notebook (the solved notebook, the mistake in its exercise's cell) in the
    sandbox under ``seeds`` students' names: the README's promise that a wrong answer loses its own points and
    nothing else."""
    with GradingSession(course, workdir) as session:
        session.require_full_marks(sorted({course.exercise(m.exercise)[0].id for m in mistakes}))

        def one(mistake: Mistake) -> OnlyLosesVerdict:
            assignment, ex = course.exercise(mistake.exercise)
            verdict = OnlyLosesVerdict(mistake.exercise, mistake.name)
            try:
                data = session.notebooks.notebook(assignment.id, mistake.exercise, ex.function,
                                                  alternative_source(mistake, ex.function))
            except (ValueError, KeyError, SyntaxError) as exc:
                verdict.error = f"{type(exc).__name__}: {exc}"
            else:
                for seed, student in enumerate(seed_names(seeds)):
                    result = session.grade(assignment.id, f"{student}-{mistake.exercise}-{mistake.name}", data)
                    own = [e for e in result.get("exercises") or [] if e["exercise"] == mistake.exercise]
                    verdict.own_lost &= bool(own) and own[0]["points"] < own[0]["max_points"] - 1e-9
                    verdict.elsewhere += _losses(result, seed, skip={mistake.exercise})
                    verdict.seeds += 1
            if progress:
                progress(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mistake") as pool:
            return list(pool.map(one, mistakes))


def _losses(result: dict[str, Any], seed: int, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Every check of the notebook that did not give its points, with what it said (the instructor's text);
    the exercises in ``skip`` (left unanswered on purpose) aside."""
    if not result.get("exercises"):
        return [f"(seed {seed}) not graded: {result.get('status')}"]
    out = []
    for e in result["exercises"]:
        if e["exercise"] in skip:
            continue
        for c in e["checks"]:
            if c["points"] < c["max_points"] - 1e-9:
                message = c.get("detail") or c.get("message") or {}
                out.append(f"{c['exercise']}/{c['check']} (seed {seed}): {c['status']}: {message.get('en', '')}")
    return out


def explain(course: Course, alt: Alternative, source: str, student: str, data: bytes, seed: int) -> list[str]:
    """The instructor's account of what an alternative lost: its assignment's exercises run again in this
    process on the very inputs the sandbox graded it with (the same seed parts), so the messages hold the
    values a hidden check's result never shows."""
    from autograder.authoring.mutants import mutant_namespace  # noqa: PLC0415 - loads libcst

    assignment, ex = course.exercise(alt.exercise)
    namespace = mutant_namespace(assignment.module, ex.function, source, course.root)
    sub = Submission(Path(student), student, hashlib.sha256(data).hexdigest(), student, assignment.id)
    out = []
    for e in assignment.exercises:
        result = C.run_exercise(e, C.in_process_runner(namespace), audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                                tolerances=course.tolerances, seed_parts=hidden_seed_parts(course, sub, assignment.id),
                                reference=solution_for(course, e.id))
        for r in result.checks:
            if r.points < r.max_points - 1e-9:
                said = r.detail or r.message
                out.append(f"{e.id}/{r.check} (seed {seed}): {r.status.value}: {said.en if said else ''}")
    return out
