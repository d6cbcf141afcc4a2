"""``autograder validate``: prove the check catalog fair and sound.

* every reference solution in ``solutions/`` scores full marks on every check,
  public and hidden, on every seed tried;
* every correct alternative (each assignment's ``alternatives.py``) scores full marks too, graded in
  the sandbox as a submission on several seeds (:mod:`autograder.authoring.alternatives`);
* every hidden check names the requirement it enforces, and that requirement is in what the student
  reads or is a public check; and every requirement sentence of every statement is enforced by a check
  (or shown by an alternative, or declared not graded with a reason) (:mod:`autograder.authoring.requirements`);
* every known mistake loses points on at least one check and is diagnosed as
  itself (not as another mistake, not undiagnosed), and its diagnosis fires on no other known mistake and no
  correct alternative (:mod:`autograder.authoring.diagnoses`); graded in the sandbox inside an otherwise correct
  notebook, on every seed, it loses points on its own exercise and nowhere else (``only-loses``);
* every exercise declares the precision its checks ask of float64 calls, in words the student reads, and the
  answers that differ from the reference only in what the statement does not teach keep full marks: the reference
  with float32 scalars and tables (where the precision is one float32 intermediate), and each dependency's answer
  at the edge of its own tolerance inside the exercise built on it (:mod:`autograder.authoring.precision`).

Prints tables (alternatives: fair; mistakes: caught / diagnosed) and exits non-zero on any gap.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import html
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from autograder import catalog as C
from autograder.authoring import precision
from autograder.authoring.alternatives import grade_alternatives, grade_mistakes
from autograder.authoring.diagnoses import misdiagnoses
from autograder.authoring.requirements import requirement_coverage, requirement_gaps
from autograder.course.config import Course, load_course
from autograder.grading.references import reference


@dataclass
class MistakeVerdict:
    exercise: str
    mistake: str
    caught: bool
    diagnosed: bool
    named_as: list[str]
    points: float
    max_points: float


@dataclass
class Validation:
    reference_failures: list[str]
    verdicts: list[MistakeVerdict]
    missing: list[str]            # exercises without checks, with < 2 mistakes or < 3 alternatives
    alternatives: list[Any] = field(default_factory=list)     # alternatives.AlternativeVerdict
    requirements: list[str] = field(default_factory=list)     # hidden checks whose requirement is not found
    only_loses: list[Any] = field(default_factory=list)       # alternatives.OnlyLosesVerdict: mistakes as notebooks
    coverage: list[Any] = field(default_factory=list)         # requirements.Requirement: each sentence, its checks
    unenforced: list[str] = field(default_factory=list)       # requirement sentences nothing enforces
    precision: list[Any] = field(default_factory=list)        # precision.PrecisionVerdict: full marks expected
    misdiagnosed: list[Any] = field(default_factory=list)     # diagnoses.Misdiagnosis: a diagnosis on another answer

    @property
    def ok(self) -> bool:
        return not self.reference_failures and not self.missing and not self.requirements and not \
            self.unenforced and all(
            v.caught and v.diagnosed for v in self.verdicts) and all(a.fair for a in self.alternatives) and all(
            m.ok for m in self.only_loses) and all(p.fair for p in self.precision) and not self.misdiagnosed


def solution_for(course: Course, exercise_id: str):
    return reference(course, exercise_id)


def validate(course: Course | None = None, seeds: tuple[int, ...] = (0, 1, 2),
             exercises: list[str] | None = None, min_mistakes: int = 2, min_alternatives: int = 3, *,
             alternatives: bool = True, jobs: int = 2, progress: Callable[[Any], None] | None = None,
             planned: Callable[[int], None] | None = None) -> Validation:
    """``alternatives``: grade every correct alternative in the sandbox on ``len(seeds)`` seeds (the slow
    part: a few seconds per alternative); without, the references, requirements and mistakes only.
    ``progress`` is called with each verdict of the sandbox (from the grading threads), ``planned`` once before
    with how many there will be."""
    course = course or load_course()
    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    audiences = (C.Audience.PUBLIC, C.Audience.HIDDEN)
    diagnoser = C.LiveDiagnoser(course.tolerances)
    ref_fail: list[str] = []
    verdicts: list[MistakeVerdict] = []
    missing: list[str] = []
    for ex in course.exercises:
        if exercises and ex.id not in exercises:
            continue
        if not C.checks_for(ex.id, audiences):
            missing.append(f"{ex.id}: no checks")
            continue
        missing += _too_few(ex.id, min_mistakes, min_alternatives, alternatives)
        reference = solution_for(course, ex.id)
        for seed in seeds:
            result = C.run_exercise(ex, C.in_process_runner({ex.function: reference}),
                                    audiences=audiences, tolerances=course.tolerances,
                                    seed_parts=("validate", seed), reference=reference, diagnoser=diagnoser)
            ref_fail += _failures(ex.id, seed, result)
        for m in C.MISTAKES.get(ex.id, []):
            result = C.run_exercise(ex, C.in_process_runner({ex.function: m.fn}),
                                    audiences=audiences, tolerances=course.tolerances,
                                    seed_parts=("validate", seeds[0]), reference=reference, diagnoser=diagnoser)
            named = sorted({r.mistake for r in result.checks if r.mistake})
            verdicts.append(MistakeVerdict(ex.id, m.name, result.points < ex.points - 1e-9,
                                           named == [m.name], named, result.points, ex.points))
    graded: list[Any] = []
    only_loses: list[Any] = []
    if alternatives:
        graded, only_loses = _sandboxed(course, exercises, len(seeds), jobs, progress, planned)
    coverage, unenforced = requirement_coverage(course, exercises)
    proofs = precision.prove(course, exercises, seeds, diagnoser)
    return Validation(ref_fail, verdicts, missing, graded, requirement_gaps(course, exercises), only_loses,
                      coverage, unenforced, proofs,
                      misdiagnosed=misdiagnoses(course, exercises, ("validate", seeds[0])))


def _too_few(ex_id: str, min_mistakes: int, min_alternatives: int, alternatives: bool) -> list[str]:
    """A gap for an exercise with fewer known mistakes, or (``alternatives``) correct alternatives, than wanted."""
    out = []
    if len(C.MISTAKES.get(ex_id, [])) < min_mistakes:
        out.append(f"{ex_id}: only {len(C.MISTAKES.get(ex_id, []))} known mistakes (want {min_mistakes})")
    if alternatives and len(C.ALTERNATIVES.get(ex_id, [])) < min_alternatives:
        out.append(f"{ex_id}: only {len(C.ALTERNATIVES.get(ex_id, []))} correct alternatives "
                   f"(want {min_alternatives})")
    return out


def _failures(ex_id: str, seed: int, result: Any) -> list[str]:
    """One line per check the reference solution fails on one seed."""
    out = []
    for r in result.checks:
        if not r.passed:
            said = r.detail or r.message
            out.append(f"{ex_id}/{r.check} (seed {seed}): {r.status.value}: {said.en if said else ''}")
    return out


def _sandboxed(course: Course, exercises: list[str] | None, seeds: int, jobs: int,
               progress: Callable[[Any], None] | None,
               planned: Callable[[int], None] | None) -> tuple[list[Any], list[Any]]:
    """Every correct alternative and every known mistake of these exercises graded in the sandbox as submissions:
    (the alternatives' verdicts, the mistakes')."""
    graded: list[Any] = []
    only_loses: list[Any] = []
    chosen = [ex for ex in course.exercises if not exercises or ex.id in exercises]
    todo = [a for ex in chosen for a in C.ALTERNATIVES.get(ex.id, [])]
    wrong = [m for ex in chosen for m in C.MISTAKES.get(ex.id, [])]
    if planned:
        planned(len(todo) + len(wrong))
    if todo:
        with tempfile.TemporaryDirectory(prefix="autograder-alternatives-") as tmp:
            graded = grade_alternatives(course, todo, seeds=seeds, jobs=jobs, workdir=Path(tmp), progress=progress)
    if wrong:
        with tempfile.TemporaryDirectory(prefix="autograder-mistakes-") as tmp:
            only_loses = grade_mistakes(course, wrong, seeds=seeds, jobs=jobs, workdir=Path(tmp), progress=progress)
    return graded, only_loses


def print_report(v: Validation, console: Any = None) -> None:
    from rich.console import Console

    console = console or Console()
    if v.alternatives:
        _print_alternatives(v, console)
    _print_mistakes(v, console)
    _print_misdiagnoses(v, console)
    _print_precision(v, console)
    for line in v.reference_failures:
        console.print(f"[red]reference solution fails[/] {line}")
    for line in v.missing:
        console.print(f"[red]gap[/] {line}")
    _print_requirements(v, console)
    console.print("[green]catalog fair and sound[/]" if v.ok else "[red]catalog has gaps[/]")


def _print_alternatives(v: Validation, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Correct alternatives: full marks, graded in the sandbox as submissions")
    for col in ("exercise", "alternative", "method", "fair", "score", "seeds"):
        table.add_column(col)
    for a in v.alternatives:
        table.add_row(a.exercise, a.name, escape(a.description.en), "yes" if a.fair else "[red]NO[/]",
                      f"{a.points:.2f}/{a.max_points:g}", str(a.seeds))
    console.print(table)
    console.print(f"{len(v.alternatives)} correct alternatives; full marks on every seed: "
                  f"{sum(a.fair for a in v.alternatives)}")
    for a in v.alternatives:
        if a.error:
            console.print(f"[red]alternative {a.exercise}/{a.name} not graded[/] {escape(a.error)}")
        for lost in a.lost[:6]:
            console.print(f"[red]alternative {a.exercise}/{a.name} loses points[/] {escape(lost)}")


def _print_mistakes(v: Validation, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Known mistakes: caught and diagnosed")
    for col in ("exercise", "mistake", "caught", "diagnosed", "score"):
        table.add_column(col)
    for m in v.verdicts:
        diag = "yes" if m.diagnosed else ("as " + ", ".join(m.named_as) if m.named_as else "no")
        table.add_row(m.exercise, m.mistake, "yes" if m.caught else "[red]NO[/]",
                      diag if m.diagnosed else f"[red]{diag}[/]", f"{m.points:.2f}/{m.max_points:g}")
    console.print(table)
    exercises = sorted({m.exercise for m in v.verdicts}, key=lambda e: tuple(map(int, e.split("."))))
    console.print(f"{len(v.verdicts)} known mistakes over {len(exercises)} exercises; "
                  f"caught {sum(m.caught for m in v.verdicts)}, diagnosed {sum(m.diagnosed for m in v.verdicts)}")
    if v.only_loses:
        bad = [m for m in v.only_loses if not m.ok]
        console.print(f"{len(v.only_loses)} known mistakes graded as notebooks on "
                      f"{max(m.seeds for m in v.only_loses)} seeds: {len(v.only_loses) - len(bad)} lose points on "
                      "their own exercise only")
        for m in bad:
            console.print(f"[red]mistake {m.exercise}/{m.name} graded as a notebook[/] {escape(m.said)}")


def _print_precision(v: Validation, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    if not v.precision:
        return
    table = Table(title="Precision: what each exercise asks of float64 calls, and the answers it must accept")
    for col in ("exercise", "declared precision", "answer", "fair", "score"):
        table.add_column(col)
    for p in v.precision:
        table.add_row(p.exercise, p.precision, p.kind, "yes" if p.fair else "[red]NO[/]",
                      f"{p.points:.2f}/{p.max_points:g}")
    console.print(table)
    console.print(f"{len(v.precision)} answers within the precision taught (float32 intermediates, dependencies at "
                  f"the edge of their tolerance); full marks on every seed: {sum(p.fair for p in v.precision)}")
    for p in v.precision:
        for lost in p.lost[:6]:
            console.print(f"[red]{p.exercise} with {p.kind} loses points[/] {escape(lost)}")


def _print_misdiagnoses(v: Validation, console: Any) -> None:
    from rich.markup import escape

    console.print(f"diagnoses that fire on another known mistake or a correct alternative: {len(v.misdiagnosed)}")
    for m in v.misdiagnosed:
        console.print(f"[red]misdiagnosis[/] {escape(str(m))}")


def _print_requirements(v: Validation, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    if v.coverage:
        table = Table(title="Requirements: every sentence of every statement, and what enforces it")
        for col in ("exercise", "sentences", "by checks", "by alternatives", "declared not graded", "unenforced"):
            table.add_column(col)
        for ex, rows in _by_exercise(v.coverage).items():
            by = collections.Counter(r.enforced_by for r in rows)
            table.add_row(ex, str(len(rows)), str(by["checks"]), str(by["alternatives"]), str(by["not graded"]),
                          f"[red]{by[None]}[/]" if by[None] else "0")
        console.print(table)
    for line in v.requirements:
        console.print(f"[red]unstated requirement[/] {escape(line)}")
    for line in v.unenforced:
        console.print(f"[red]unenforced requirement[/] {escape(line)}")


def _by_exercise(coverage: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in coverage:
        out.setdefault(r.exercise, []).append(r)
    return out


def requirements_markdown(v: Validation, course: Course) -> str:
    """Every requirement sentence of every statement with the checks that enforce it (``--requirements``)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"# Requirements of {course.name}, each with what enforces it", "",
             "Written by `autograder validate --no-alternatives --requirements requirements.md` (a test keeps it "
             "current). Each sentence under 任务, 要求 and 禁止调用 in an exercise's statement, each display "
             "formula and the signature in its title is a requirement; `autograder validate` fails on one that no "
             "check enforces, no alternative shows allowed and no declaration in `hidden.py` says is not graded.", ""]
    for ex, rows in _by_exercise(v.coverage).items():
        lines += [f"## {ex}", "", "| requirement | enforced by |", "|---|---|"]
        for r in rows:
            by = ", ".join(r.enforcers(lambda n: f"`{n}`")) or "**NOTHING**"
            lines.append(f"| {cell(r.sentence)} | {cell(by)} |")
        lines.append("")
    totals = collections.Counter(r.enforced_by for r in v.coverage)
    lines += [f"{len(v.coverage)} requirement sentences: {totals['checks']} enforced by checks, "
              f"{totals['alternatives']} permissions shown by alternatives, {totals['not graded']} declared not "
              "graded.", ""]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("exercises", nargs="*", help="exercise IDs to validate (default: all)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="how many seeds to run the references and the correct alternatives on")
    parser.add_argument("--no-alternatives", dest="alternatives", action="store_false",
                        help="skip grading in the sandbox (the correct alternatives, and each known mistake as a "
                             "notebook): references, requirements and mistakes in-process only, seconds instead of "
                             "minutes")
    parser.add_argument("--mutants", action="store_true",
                        help="mutation testing: grade one-token changes of every reference in the sandbox; "
                             "exit 1 on any that keeps full marks and is not a declared equivalent (mutants.yml)")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="the HTML report (default: validate.html; with --mutants: validate-mutants.html)")
    parser.add_argument("--requirements", type=Path, default=None, metavar="PATH",
                        help="also write every requirement sentence with the checks that enforce it, as Markdown")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="with --mutants: a fixed, seeded subset of N mutants per exercise (default: all)")
    parser.add_argument("--sample-seed", type=int, default=0, metavar="S", help="with --sample: the seed")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="alternatives (or with --mutants: mutants) graded in parallel (default: the CPU count)")


def run(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    if args.mutants:
        return run_mutants_command(args)
    from rich.console import Console

    console = Console()
    with shown_progress(console, "in the sandbox", "validate",
                        "notebooks graded in the sandbox (correct alternatives, known mistakes)") as (advance, plan):
        result = validate(seeds=tuple(range(args.seeds)), exercises=args.exercises or None,
                          alternatives=args.alternatives, jobs=args.jobs, progress=advance, planned=plan)
    print_report(result, console)
    page = args.html or Path("validate.html")
    page.write_text(html_report(result, load_course()), encoding="utf-8")
    console.print(f"wrote {page}")
    if args.requirements:
        args.requirements.write_text(requirements_markdown(result, load_course()), encoding="utf-8")
        console.print(f"wrote {args.requirements}")
    return 0 if result.ok else 1


class LogProgress:
    """Progress for a log (stdout no terminal, where rich's transient bar shows nothing: a CI job's log, ``> log``):
    a line at the start, every ``every`` items, when ``seconds`` have passed since the last line, and at the end,
    e.g. ``validate: 40/127 notebooks graded in the sandbox``."""

    def __init__(self, prefix: str, what: str, *, every: int = 10, seconds: float = 30.0,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.prefix, self.what, self.every, self.seconds = prefix, what, every, seconds
        self.stream, self.clock = stream, clock
        self.done: int = 0
        self.total: int | None = None       # (once planned)
        self._said_at = clock()
        self._lock = threading.Lock()       # (items are counted from the grading threads)

    def plan(self, total: int) -> None:
        """How many items there will be (said at once, so the log shows the slow part began)."""
        with self._lock:
            self.total = total
            self._say()

    def advance(self, _item: Any = None) -> None:
        with self._lock:
            self.done += 1
            if self.done % self.every == 0 or self.done == self.total or \
                    self.clock() - self._said_at >= self.seconds:
                self._say()

    def _say(self) -> None:
        of = f"/{self.total}" if self.total is not None else ""
        print(f"{self.prefix}: {self.done}{of} {self.what}", file=self.stream or sys.stdout, flush=True)
        self._said_at = self.clock()


@contextlib.contextmanager
def shown_progress(console: Any, title: str, prefix: str, what: str
                   ) -> Iterator[tuple[Callable[[Any], None], Callable[[int], None]]]:
    """(advance, plan) of the progress shown: on a terminal rich's bar (``title``, gone when done), else a
    :class:`LogProgress` line now and then."""
    if not console.is_terminal or console.is_dumb_terminal:       # (where rich's live display draws nothing)
        lines = LogProgress(prefix, what)
        yield lines.advance, lines.plan
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(title), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)
        yield (lambda _item: bar.advance(task)), (lambda _total: None)    # (the bar as it was: no total)


def html_report(v: Validation, course: Course) -> str:
    """One self-contained page: the alternatives (fair?), the known mistakes (caught, named?), the gaps."""
    e = html.escape

    def yes(flag: bool) -> str:
        return "<td class='ok'>yes</td>" if flag else "<td class='bad'>NO</td>"

    alternatives = "".join(
        f"<tr><td>{e(a.exercise)}</td><td>{e(a.name)}</td><td>{e(a.description.en)}<br><span lang='zh'>"
        f"{e(a.description.zh)}</span></td>{yes(a.fair)}<td>{a.points:.2f}/{a.max_points:g}</td><td>{a.seeds}</td>"
        f"<td>{'<br>'.join(e(x) for x in ([a.error] if a.error else []) + a.lost[:6])}</td></tr>"
        for a in v.alternatives)
    mistakes = "".join(
        f"<tr><td>{e(m.exercise)}</td><td>{e(m.mistake)}</td>{yes(m.caught)}{yes(m.diagnosed)}"
        f"<td>{m.points:.2f}/{m.max_points:g}</td></tr>" for m in v.verdicts)
    gaps = "".join(f"<li class='bad'>{e(x)}</li>" for x in
                   [f"reference solution fails {x}" for x in v.reference_failures] + v.missing +
                   [f"unstated requirement {x}" for x in v.requirements] +
                   [f"unenforced requirement {x}" for x in v.unenforced] +
                   [f"mistake {m.exercise}/{m.name} graded as a notebook: {m.said}" for m in v.only_loses if not m.ok]
                   + [f"{p.exercise} with {p.kind} loses points: {lost}" for p in v.precision for lost in p.lost[:3]]
                   + [f"misdiagnosis {m}" for m in v.misdiagnosed])
    proofs = "".join(
        f"<tr><td>{e(p.exercise)}</td><td>{e(p.precision)}</td><td>{e(p.kind)}</td>{yes(p.fair)}"
        f"<td>{p.points:.2f}/{p.max_points:g}</td><td>{'<br>'.join(e(x) for x in p.lost[:6])}</td></tr>"
        for p in v.precision)
    requirements = "".join(
        f"<tr><td>{e(r.exercise)}</td><td lang='zh'>{e(r.sentence)}</td>"
        f"<td{'' if r.enforced else ' class=bad'}>{'<br>'.join(e(x) for x in r.enforcers()) or 'NOTHING'}</td></tr>"
        for r in v.coverage)
    verdict = "<p class='ok'>Catalog fair and sound.</p>" if v.ok else "<p class='bad'>The catalog has gaps.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Validate: {e(course.name)}</title>
<style>
body{{font-family:system-ui,"Noto Sans CJK SC",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;margin-bottom:2em}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left;
vertical-align:top}}.bad{{color:#b00020;font-weight:bold}}.ok{{color:#1b5e20}}
</style></head><body>
<h1>Validate: {e(course.name)}</h1>
{verdict}
<h2>Correct alternatives ({sum(a.fair for a in v.alternatives)}/{len(v.alternatives)} at full marks)</h2>
<p>Each is a correct implementation written another way than the reference, graded in the sandbox as a
student's notebook (every public and hidden check) on several seeds; the whole notebook must keep full marks.</p>
<table><tr><th>exercise</th><th>alternative</th><th>method</th><th>fair</th><th>score</th><th>seeds</th>
<th>points lost</th></tr>{alternatives}</table>
<h2>Known mistakes ({sum(m.caught and m.diagnosed for m in v.verdicts)}/{len(v.verdicts)} caught and named)</h2>
<table><tr><th>exercise</th><th>mistake</th><th>caught</th><th>named</th><th>score</th></tr>{mistakes}</table>
<h2>Precision ({sum(p.fair for p in v.precision)}/{len(v.precision)} at full marks)</h2>
<p>What each exercise's checks ask of float64 calls (its declared precision, in words its notebook says), and the
answers that differ from the reference only in what the statement does not teach: the reference with float32
scalars and tables, and each dependency at the edge of its own tolerance inside the exercise built on it. Each
must keep full marks on every seed.</p>
<table><tr><th>exercise</th><th>declared precision</th><th>answer</th><th>fair</th><th>score</th>
<th>points lost</th></tr>{proofs}</table>
<h2>Requirements ({sum(r.enforced for r in v.coverage)}/{len(v.coverage)} enforced)</h2>
<p>Each sentence of each statement's task, requirements and forbidden calls, each formula and each signature,
with the checks that enforce it.</p>
<table><tr><th>exercise</th><th>requirement</th><th>enforced by</th></tr>{requirements}</table>
<h2>Gaps</h2>{f"<ul>{gaps}</ul>" if gaps else "<p class='ok'>None.</p>"}
<p>Mutants: <code>autograder validate --mutants</code> writes <code>validate-mutants.html</code>.</p>
</body></html>
"""


def run_mutants_command(args: argparse.Namespace) -> int:
    """``validate --mutants``: the table and survivors on the terminal, the HTML page at ``--html``."""
    from autograder.authoring import mutants as M  # noqa: PLC0415 - loads libcst

    from rich.console import Console

    course = load_course()
    console = Console()
    with shown_progress(console, "mutants", "validate --mutants", "mutants graded") as (advance, plan):
        result = M.run_mutants(course, exercises=args.exercises or None, per_exercise=args.sample,
                               seed=args.sample_seed, jobs=args.jobs, progress=advance, planned=plan)
    M.print_mutants_report(result, course, console)
    page = args.html or Path("validate-mutants.html")
    page.write_text(M.html_report(result, course), encoding="utf-8")
    console.print(f"wrote {page}")
    return 0 if result.ok else 1
