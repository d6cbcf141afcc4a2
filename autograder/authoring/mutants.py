"""``autograder validate --mutants``: mutation testing of every reference solution.

Hand-listed mistakes (each assignment's ``mistakes.py``) cover what their author thought of. This
module derives the rest automatically: one-token changes to each reference in
``solutions/<module>.py`` (a *mutant*), each graded as a student's notebook would be, in
the sandbox, with the whole catalog, public and hidden. A mutant that loses points is
*killed*; one that keeps full marks is either *equivalent* (declared in ``mutants.yml``
with a one-line reason, and confirmed here on the checks' seeded random inputs) or a
*survivor*: a gap in the checks. ``validate --mutants`` exits 1 on any survivor.

Operators
---------
*Generic* operators (arithmetic and comparison swaps, numbers changed, ``True``/``False``,
``a = b`` -> ``a = None``, an argument dropped or made ``None``, strings changed) are
mutmut's own node mutators (``mutmut.mutation.mutators.mutation_operators``): plain
functions from one libcst node to its mutated replacements, so they serve as a library
without mutmut's test runner, trampolines or on-disk state. Cosmic Ray was the other
candidate; its operators also work on single sources (``cosmic_ray.mutating.mutate_code``)
but it brings a database, aiohttp, GitPython and a plugin loader for the same operators.
Two generic operators mutmut lacks are written here: *off by one* (an integer ``n`` ->
``n - 1``; mutmut makes ``n + 1``) and *dropped statement*.

*Tensor-aware* operators (this module, on libcst) match the course's real mistakes: a
reduction changed, the dim changed, ``keepdim`` dropped, another transpose or none, the
scale changed or dropped, a mask inverted or applied after the softmax, ``-inf`` <-> a
large finite value, ``.detach()`` / ``torch.no_grad()`` inserted, a dtype cast added or
removed, and an in-place op on an input.

Not mutated: docstrings, the text of a raised exception's message, annotations.

Mutants are deduplicated on their AST with docstrings removed (formatting and comments
never make two mutants); the *id* of a mutant is a hash of that normal form and its
exercise, stable for as long as the reference and the mutation are.
"""
from __future__ import annotations

import html
import tempfile
import time
from types import SimpleNamespace
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from autograder import catalog as C
from autograder.authoring.operators import Mutant, mutants_of, reference_source, replace_definition, sample
from autograder.authoring.session import GradingSession
from autograder.course.config import Course, load_course
from autograder.core.errors import AutograderError, ConfigError
from autograder.grading.references import reference as solution_for


#: The course's declared equivalents, beside its course.yml.
MUTANTS_NAME = "mutants.yml"


class Equivalent(BaseModel):
    """One mutant that keeps full marks because it computes what the reference computes."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
    exercise: str = Field(pattern=r"^[1-9]\d*\.[1-9]\d*$", description="exercise ID, as in course.yml")
    id: str = Field(pattern=r"^[0-9a-f]{12}$", description="the mutant's id, as validate --mutants prints it")
    reason: str = Field(min_length=10, max_length=300, description="why it is equivalent, one line")

    @field_validator("reason")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("the reason is one line")
        return value


class MutantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    equivalent: list[Equivalent] = Field(default_factory=list)


def load_equivalents(course: Course, path: Path | None = None) -> dict[tuple[str, str], str]:
    """(exercise, id) -> reason, from mutants.yml; a bad file is a ConfigError naming the entry and field."""
    path = path if path is not None else course.root / MUTANTS_NAME
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        parsed = MutantsFile.model_validate(data)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path.name}: not valid YAML ({exc})") from None
    except ValidationError as exc:
        lines = [f"{path.name}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
        raise ConfigError("\n  ".join(lines)) from None
    known = {e.id for e in course.exercises}
    out: dict[tuple[str, str], str] = {}
    for i, e in enumerate(parsed.equivalent):
        if e.exercise not in known:
            raise ConfigError(f"{path.name}: equivalent.{i}.exercise: no exercise {e.exercise} in course.yml")
        if (e.exercise, e.id) in out:
            raise ConfigError(f"{path.name}: equivalent.{i}: {e.exercise} {e.id} declared twice")
        out[(e.exercise, e.id)] = e.reason
    return out


# -- confirming an equivalent: the mutant next to the reference, on the checks' inputs ------------
def mutant_namespace(module: str, function: str, source: str, root: Path) -> dict[str, Any]:
    """solutions/<module>.py with ``function`` replaced by ``source``, executed: the mutant among the
    other references (so 2.4's mutant calls the reference softmax, and 2.2's mutant is called by nothing)."""
    text, _ = reference_source(module, function, root)
    namespace: dict[str, Any] = {"__name__": f"mutant_of_{module}"}
    exec(compile(replace_definition(text, function, source), f"<mutant of {module}>", "exec"), namespace)
    return namespace


def confirm_equivalent(course: Course, mutant: Mutant, seeds: Iterable[int] = range(3)) -> list[str]:
    """Where the mutant and the reference differ on the inputs of every check (public and hidden) of its
    exercise, on several seeds of random inputs: [] when they never do."""
    import torch

    from autograder.inside.probes import execute  # noqa: PLC0415 - loads torch

    C.load_catalog(course, hidden=True, mistakes=True)
    assignment, ex = course.exercise(mutant.exercise)
    reference = solution_for(course, ex.id)
    ref_ns = {ex.function: reference}
    mut_ns = mutant_namespace(assignment.module, ex.function, mutant.source, course.root)
    differences: list[str] = []

    def runner(request: Any) -> Any:
        # Both start from the same global random state: a call that draws from the global numbers (an unseeded
        # sample) draws the same in either, as any two runs of one answer would from that state.
        before = torch.random.get_rng_state()
        want = execute(ref_ns, C.copied(request))
        after = torch.random.get_rng_state()
        torch.random.set_rng_state(before)
        got = execute(mut_ns, C.copied(request))
        torch.random.set_rng_state(after)
        if want.status != got.status or (want.status == "error" and want.error_type != got.error_type):
            differences.append(f"{request.site or ex.function}: reference {want.status} {want.error_type}, "
                               f"mutant {got.status} {got.error_type} {got.error}".strip())
        elif want.status == "ok" and not _same(want.value(), got.value(), course, ex):
            differences.append(f"{request.site or ex.function}: different values")
        return want

    for seed in seeds:
        C.run_exercise(ex, runner, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                       tolerances=course.tolerances, seed_parts=("mutant-equivalence", seed), reference=reference)
    return differences


class _Floored:
    """course.yml's tolerances, at least the floors of the precision an exercise's statement teaches
    (:func:`autograder.catalog.tolerance.precision_floors`): what its checks allow is what is equivalent."""

    def __init__(self, tolerances: Any, exercise: Any):
        self.tolerances, self.exercise = tolerances, exercise

    def for_dtype(self, dtype: Any) -> Any:
        from autograder.catalog.tolerance import precision_floors  # noqa: PLC0415 - loads torch

        rtol, atol = precision_floors(self.tolerances, dtype, C.precision_of(self.exercise.id),
                                      builds_on=bool(self.exercise.builds_on))
        return SimpleNamespace(rtol=rtol, atol=atol)


def _same(a: Any, b: Any, course: Course, exercise: Any) -> bool:
    """Equal values: the same structure and dtypes, numbers equal within the course's tolerance of their dtype
    (a float32 result may round differently from the reference's float32 result, never by more), at least the
    floors of the precision the exercise's statement teaches (a float32 table inside a float64 call)."""
    from autograder.catalog import values_match  # noqa: PLC0415 - loads torch

    if a.spec.get("dtype") != b.spec.get("dtype"):
        return False
    return values_match(a, b, _Floored(course.tolerances, exercise))


# -- grading mutants as submissions ----------------------------------------------------------------
@dataclass
class Verdict:
    mutant: Mutant
    status: str                       # killed | killed (does not compile) | killed (raises) | equivalent | survived
    points: float = 0.0
    max_points: float = 0.0
    lost: list[str] = field(default_factory=list)     # exercises that lost points
    failed: list[str] = field(default_factory=list)   # checks that failed, "2.4/name"
    reason: str = ""                                  # of a declared equivalent

    @property
    def killed(self) -> bool:
        return self.status.startswith("killed")


def grade_mutants(course: Course, mutants: list[Mutant], *, jobs: int = 2, workdir: Path,
                  progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """Grade each mutant as ``autograder grade`` grades a notebook: a sandbox worker per submission, every
    exercise of its assignment, public and hidden checks, the grader's own seeds. Killed = lost points."""
    with GradingSession(course, workdir) as session:
        session.require_full_marks(sorted({course.exercise(m.exercise)[0].id for m in mutants}))

        def one(mutant: Mutant) -> Verdict:
            assignment = course.exercise(mutant.exercise)[0].id
            if not mutant.compiles():
                verdict = Verdict(mutant, "killed (does not compile)")
            else:
                data = session.notebooks.notebook(assignment, mutant.exercise, mutant.function, mutant.source)
                verdict = _verdict(mutant, session.grade(assignment, f"mutant-{mutant.id}", data))
            if progress:
                progress(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mutant") as pool:
            return list(pool.map(one, mutants))


def _verdict(mutant: Mutant, result: dict[str, Any] | None) -> Verdict:
    if not result or not result.get("exercises"):
        raise AutograderError(f"mutant {mutant.exercise} {mutant.id} could not be graded: "
                              f"{(result or {}).get('status')}")
    lost = [e["exercise"] for e in result["exercises"] if e["points"] < e["max_points"] - 1e-9]
    failed = [f"{c['exercise']}/{c['check']}" for e in result["exercises"] for c in e["checks"] if not c["passed"]]
    own = next(e for e in result["exercises"] if e["exercise"] == mutant.exercise)
    # The mutated exercise's points (the report says "keeps 1/1" of 2.5, not the assignment's 9/9); killed
    # when any exercise of the notebook lost points (a mutant of 2.2 may cost 2.4 its points).
    points, max_points = float(own["points"]), float(own["max_points"])
    if not lost:
        return Verdict(mutant, "survived", points, max_points)
    raises = bool(own["checks"]) and all(c["status"] == "error" for c in own["checks"]
                                         if c["kind"] != "forbidden")
    return Verdict(mutant, "killed (raises)" if raises else "killed", points, max_points, lost, failed)


# -- the whole run --------------------------------------------------------------------------------
@dataclass
class MutationRun:
    verdicts: list[Verdict]
    problems: list[str]                 # declared equivalents that differ, were killed, or no longer exist
    seconds: float
    subset: str = ""                    # "" for all mutants, else how the subset was drawn

    def by_exercise(self, course: Course) -> list[tuple[str, dict[str, int]]]:
        rows = []
        for ex in course.exercises:
            vs = [v for v in self.verdicts if v.mutant.exercise == ex.id]
            if not vs:
                continue
            rows.append((ex.id, {"made": len(vs), "killed": sum(v.killed for v in vs),
                                 "equivalent": sum(v.status == "equivalent" for v in vs),
                                 "survived": sum(v.status == "survived" for v in vs)}))
        return rows

    @property
    def survivors(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "survived"]

    @property
    def ok(self) -> bool:
        return not self.survivors and not self.problems


def run_mutants(course: Course | None = None, *, exercises: list[str] | None = None, per_exercise: int = 0,
                seed: int = 0, jobs: int = 2, equivalents_file: Path | None = None,
                progress: Callable[[Verdict], None] | None = None,
                planned: Callable[[int], None] | None = None) -> MutationRun:
    """Make, grade and judge the mutants of ``exercises`` (default all); ``per_exercise`` > 0 draws a seeded
    subset of that many per exercise (every declared equivalent must still exist; those drawn are confirmed).
    ``progress`` is called with each verdict (from the grading threads), ``planned`` once before with how many."""
    course = course or load_course()
    equivalents_file = equivalents_file if equivalents_file is not None else course.root / MUTANTS_NAME
    start = time.perf_counter()
    declared = load_equivalents(course, equivalents_file)
    chosen = [e.id for e in course.exercises if not exercises or e.id in exercises]
    everything = {ex: mutants_of(course, ex) for ex in chosen}
    pool = [m for ms in everything.values() for m in ms]
    todo = sample(pool, per_exercise, seed) if per_exercise > 0 else pool
    drawn = {(m.exercise, m.id) for m in todo}
    problems: list[str] = []
    by_id = {(m.exercise, m.id): m for ms in everything.values() for m in ms}
    for ex, mid in declared:
        if ex not in everything:
            continue
        if (ex, mid) not in by_id:
            problems.append(f"{ex} {mid}: declared equivalent in {equivalents_file.name}, but no such mutant "
                            f"exists any more (the reference or an operator changed): remove or update it")
            continue
        if (ex, mid) not in drawn and per_exercise > 0:
            continue          # a subset confirms the equivalents it drew; the full run confirms them all
        differences = confirm_equivalent(course, by_id[(ex, mid)])
        if differences:
            problems.append(f"{ex} {mid}: declared equivalent, but it differs from the reference on "
                            f"{len(differences)} calls, first: {differences[0]}")
    if planned:
        planned(len(todo))
    with tempfile.TemporaryDirectory(prefix="autograder-mutants-") as tmp:
        verdicts = grade_mutants(course, todo, jobs=jobs, workdir=Path(tmp), progress=progress)
    for v in verdicts:
        key = (v.mutant.exercise, v.mutant.id)
        if key in declared:
            if v.status == "survived":
                v.status, v.reason = "equivalent", declared[key]
            else:
                problems.append(f"{key[0]} {key[1]}: declared equivalent, but grading takes points from it "
                                f"({v.points:g}/{v.max_points:g}): remove it from {equivalents_file.name}")
    subset = f"{per_exercise} per exercise, seed {seed}" if per_exercise > 0 else ""
    return MutationRun(verdicts, problems, time.perf_counter() - start, subset)


# -- reports -----------------------------------------------------------------------------------------
def print_mutants_report(run: MutationRun, course: Course, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.syntax import Syntax
    from rich.table import Table

    console = console or Console()
    title = "Mutants of the reference solutions" + (f" (subset: {run.subset})" if run.subset else "")
    table = Table(title=title)
    for col in ("exercise", "made", "killed", "equivalent", "surviving"):
        table.add_column(col, justify="left" if col == "exercise" else "right")
    totals = {"made": 0, "killed": 0, "equivalent": 0, "survived": 0}
    for ex, counts in run.by_exercise(course):
        for k in totals:
            totals[k] += counts[k]
        survived = str(counts["survived"]) if not counts["survived"] else f"[red]{counts['survived']}[/]"
        table.add_row(ex, str(counts["made"]), str(counts["killed"]), str(counts["equivalent"]), survived)
    table.add_row("all", *(str(totals[k]) for k in ("made", "killed", "equivalent", "survived")), style="bold")
    console.print(table)
    uncompiled = sum(v.status == "killed (does not compile)" for v in run.verdicts)
    raising = sum(v.status == "killed (raises)" for v in run.verdicts)
    console.print(f"of the killed: {raising} raise on every call, {uncompiled} do not compile; "
                  f"{run.seconds:.0f} s")
    for v in run.survivors:
        console.print(f"[red]survivor[/] {v.mutant.exercise} {v.mutant.id} ({escape(v.mutant.operator)}, "
                      f"line {v.mutant.line}): keeps {v.points:g}/{v.max_points:g}")
        console.print(Syntax(v.mutant.diff, "diff", theme="ansi_dark"))
    for p in run.problems:
        console.print(f"[red]equivalent[/] {escape(p)}")
    console.print("[green]every mutant killed or declared equivalent[/]" if run.ok else
                  f"[red]{len(run.survivors)} surviving mutants, {len(run.problems)} problems with declared "
                  f"equivalents[/]")


def html_report(run: MutationRun, course: Course) -> str:
    """One self-contained page: counts per exercise, each survivor's diff, the declared equivalents."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(ex)}</td><td>{c['made']}</td><td>{c['killed']}</td><td>{c['equivalent']}</td>"
        f"<td class='{'bad' if c['survived'] else 'ok'}'>{c['survived']}</td></tr>"
        for ex, c in run.by_exercise(course))

    def diff_html(text: str) -> str:
        out = []
        for ln in text.splitlines():
            cls = "add" if ln.startswith("+") and not ln.startswith("+++") else \
                "del" if ln.startswith("-") and not ln.startswith("---") else ""
            out.append(f"<span class='{cls}'>{e(ln)}</span>")
        return "<pre>" + "\n".join(out) + "</pre>"

    survivors = "".join(
        f"<h3>{e(v.mutant.exercise)} <code>{e(v.mutant.id)}</code> {e(v.mutant.operator)}, line {v.mutant.line}"
        f"</h3>{diff_html(v.mutant.diff)}" for v in run.survivors) or "<p class='ok'>None.</p>"
    equivalents = "".join(
        f"<h3>{e(v.mutant.exercise)} <code>{e(v.mutant.id)}</code> {e(v.mutant.operator)}</h3>"
        f"<p>{e(v.reason)}</p>{diff_html(v.mutant.diff)}" for v in run.verdicts if v.status == "equivalent")
    problems = "".join(f"<li class='bad'>{e(p)}</li>" for p in run.problems)
    subset = f" (subset: {e(run.subset)})" if run.subset else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Mutation testing: {e(course.name)}</title>
<style>
body{{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .8em;text-align:right}}
td:first-child{{text-align:left}}.bad{{color:#b00020;font-weight:bold}}.ok{{color:#1b5e20}}
pre{{background:#f6f8fa;padding:.8em;overflow-x:auto}}.add{{color:#1b5e20}}.del{{color:#b00020}}
</style></head><body>
<h1>Mutants of the reference solutions{subset}</h1>
<p>Each mutant is a one-token change to a reference solution, graded in the sandbox like a student's notebook,
with every public and hidden check. Killed: it lost points. Equivalent: declared in mutants.yml and confirmed
on random inputs. {len(run.verdicts)} mutants in {run.seconds:.0f} s.</p>
<table><tr><th>exercise</th><th>made</th><th>killed</th><th>equivalent</th><th>surviving</th></tr>{rows}</table>
{f"<h2>Problems with declared equivalents</h2><ul>{problems}</ul>" if problems else ""}
<h2>Survivors</h2>{survivors}
<h2>Declared equivalents</h2>{equivalents or "<p>None.</p>"}
</body></html>
"""
