"""``autograder grade SUBMISSIONS -o OUT``: the command (options, progress, the summary).

A command of its own layer: it grades (:mod:`autograder.grading`), then writes what the batch feeds,
the LMS files (:mod:`autograder.reports`) and, with ``--nbgrader``, the scores in an nbgrader course's
gradebook (:mod:`autograder.exports.nbgrader`), which sits above grading.
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder import reports as R
from autograder.course.clock import parse_time
from autograder.course.config import Course, load_course
from autograder.core.errors import AutograderError
from autograder.exports.nbgrader import after_batch, discover_nbgrader_course, gradebook_times
from autograder.grading.archives import opened
from autograder.grading.batch import batch_lanes, grade_batch, lane_processes, plan
from autograder.grading.distributed import cluster_description
from autograder.grading.grader import resolve_device
from autograder.grading.lane_grading import lane_config
from autograder.grading.process import import_lazy_modules, prepare_grader_process, sigterm_interrupts, trusted_torch
from autograder.reports.lms import write_lms_csv
from autograder.sandbox.launch import launch_template, take_early_launch
from autograder.core.text import line


# -- the command ---------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                        help="a folder of notebooks (any nesting) or a .zip exported from an LMS")
    parser.add_argument("-o", "--out", type=Path, required=True, metavar="OUT",
                        help="output folder: results/, feedback/, grades.csv, report.html")
    parser.add_argument("--assignment", metavar="A", help="grade only this assignment; also the assignment of "
                        "notebooks whose path and content name none")
    parser.add_argument("--student", metavar="ID", help="regrade only this student's notebooks (as grades.csv "
                        "names them), whatever is already done; every other row stays as it is")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                        help="where student code runs: cpu, cuda, or auto (cuda when available)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="submissions graded in parallel (default: the CPU count): this process and N-1 "
                             "grader processes forked from it once its sandbox is warm")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="grade on a Dask distributed cluster (tcp://HOST:8786; needs pip install '.[dask]'): "
                             "each Dask worker holds its own sandbox, this process writes every output")
    parser.add_argument("--force", action="store_true", help="regrade submissions that already have a result")
    parser.add_argument("--language", choices=("zh", "en"), default=None,
                        help="language of the feedback (default: course.yml's)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="run student code without the cage (for trusted code only: a machine where "
                             "`autograder doctor` finds no cage); every result records it")
    parser.add_argument("--times", type=Path, metavar="CSV", default=None,
                        help="submission times an LMS exported: a CSV with student, submitted_at (ISO 8601) and "
                             "optionally assignment columns; trusted before timestamp.txt and Canvas' _late marker")
    parser.add_argument("--as-of", metavar="TIME", default=None, dest="as_of",
                        help="grade as if at TIME (ISO 8601): a submission whose time nobody vouches for counts "
                             "as handed in then, so a deadline's effect shows before it applies")
    parser.add_argument("--nbgrader", action="store_true",
                        help="SUBMISSIONS is an nbgrader course folder: grade its submitted/ and record the "
                             "scores in its gradebook.db")


def _as_of(text: str | None, course: Course) -> Any:
    """--as-of as an aware time (the course's timezone for one written without an offset)."""
    if text is None:
        return None

    return parse_time(text, where="--as-of", default_tz=course.timezone)


def run(args: argparse.Namespace) -> int:
    prepare_grader_process()
    if args.jobs < 1:
        raise AutograderError(f"-j {args.jobs}: need at least one worker")

    # The sandbox template imports torch while this process does (a cold start waits for both; one after
    # the other they took twice as long): started by the command line before this module was imported
    # (autograder.cli.EARLY), else now. The sandbox adopts it below.
    launch = take_early_launch()
    if args.scheduler and launch is not None:
        launch.close()
        launch = None
    elif not args.scheduler and launch is None:
        launch = launch_template()
    try:
        return _run(args, launch)
    finally:
        if launch is not None:
            launch.close()   # a template no sandbox adopted (the command stopped before grading)


def _run(args: argparse.Namespace, launch: Any) -> int:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    course = load_course()
    language = args.language or course.language.value
    device = resolve_device(args.device)
    trusted_torch(device)      # the trusted side runs references in several threads: one torch thread each
    sigterm_interrupts()
    if args.student is not None:
        args.force = True        # --student regrades that student, whatever is already done
    course_root: Path | None = None
    nbgrader_word = None
    if args.nbgrader:
        course_root = args.submissions
        args.submissions = discover_nbgrader_course(course_root)

        nbgrader_word = gradebook_times(course_root, course)       # its submission times and extensions
    with opened(args.submissions) as (root, refused):
        batch = plan(root, course, args.out, refused=refused, assignment=args.assignment,
                     language=language, device=device, origin=args.submissions, student=args.student,
                     times=args.times, as_of=_as_of(args.as_of, course), gradebook=nbgrader_word)
        found = batch.found
        if not found.submissions:
            raise AutograderError(f"{args.submissions}: no notebook (.ipynb) found",
                                  hint="pass the folder or zip that holds the submitted notebooks")
        _say_found(console, batch, args)
        t0 = time.perf_counter()
        todo = len(found.submissions) if args.force else \
            sum(1 for s in found.submissions if s.key not in batch.outputs.rows)
        importing = import_lazy_modules(batch=todo > 1)
        try:
            if args.scheduler:
                console.print(f"{len(found.submissions)} submissions under {escape(str(args.submissions))}; "
                              f"device {device}, on {escape(cluster_description(args.scheduler))}")
                warm = time.perf_counter() - t0
                if args.no_isolation:
                    console.print("[bold red]--no-isolation: student code runs uncaged on the cluster[/]")
                with _progress(console) as progress:
                    outcome = grade_batch(batch, None, jobs=args.jobs, force=args.force, progress=progress,
                                          scheduler=args.scheduler,
                                          isolation="none" if args.no_isolation else None)
            else:
                console.print(f"{len(found.submissions)} submissions under {escape(str(args.submissions))}; "
                              f"device {device}, {args.jobs} workers")
                outcome, warm = _grade_here(console, args, batch, (course, device, language), launch, todo,
                                             importing, t0)
        except KeyboardInterrupt:
            done = len(list(batch.outputs.results_dir.glob("*.json")))
            console.print(f"[yellow]interrupted: {done} results are saved in {batch.outputs.results_dir}; "
                          "run the same command again to finish[/]")
            raise
    failed = _after_batch(console, batch, outcome, course, course_root)
    _say_done(console, batch, outcome, warm, args.no_isolation)
    for problem in failed:
        console.print(f"[red]ERROR[/] {escape(problem)}; every result written is in {escape(str(batch.outputs.out))}"
                      "/results/")
    return 1 if failed else 0


def _progress(console: Any) -> Any:
    """The batch's progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console)


def _say_found(console: Any, batch: Any, args: argparse.Namespace) -> None:
    """What the search for notebooks left out: other files, second copies, other assignments, and the students
    with an extension who have no notebook here."""
    from rich.markup import escape

    found = batch.found
    for name in found.ignored[:10]:
        console.print(f"[dim]ignored (not a notebook): {escape(name)}[/]")
    if len(found.ignored) > 10:
        console.print(f"[dim]... and {len(found.ignored) - 10} more files that are not notebooks[/]")
    for extra, chosen in list(found.superseded.items())[:10]:
        console.print(f"[dim]not graded: {escape(extra)} (a second copy; {escape(chosen)} is graded)[/]")
    if found.out_of_scope:
        console.print(f"[dim]{len(found.out_of_scope)} notebooks of other assignments skipped (--assignment "
                      f"{args.assignment})[/]")
    if batch.deadlines is not None and args.student is None:
        here = {s.student for s in found.submissions}
        waiting = sorted({e.student for e in batch.deadlines.extensions} - here)
        if waiting:
            listed = ", ".join(waiting[:8]) + (f" and {len(waiting) - 8} more" if len(waiting) > 8 else "")
            console.print(f"[dim]{batch.deadlines.source or 'extensions'}: {len(waiting)} student(s) with an "
                          f"extension have no notebook here ({escape(listed)}): kept for when they hand in[/]")


def _grade_here(console: Any, args: argparse.Namespace, batch: Any, where: tuple[Any, str, str], launch: Any,
                todo: int, importing: Any, t0: float) -> tuple[Any, float]:
    """Grade the batch on this machine, in a sandbox adopting ``launch``; ``where``: (course, device,
    language). The outcome and the warm-up's seconds (since ``t0``)."""
    from rich.markup import escape

    from autograder.sandbox import Sandbox  # noqa: PLC0415 - loads torch

    course, device, language = where
    with Sandbox(course.limits, device, isolation=not args.no_isolation, launch=launch) as sandbox:
        warm = time.perf_counter() - t0
        iso = sandbox.isolation
        if iso.mode == "none":
            console.print("[bold red]--no-isolation: student code runs uncaged, with the grader's "
                          "rights[/]")
        else:
            console.print(f"isolation: {iso.mode} ({', '.join(iso.layers)})")
        if lane_processes(args.jobs, todo):
            # The other lanes are forked from this process (see ForkedLanes) before any thread
            # but the sandbox's reaper runs: no import half done, no progress bar's thread.
            importing.join()
        lanes, unforked = batch_lanes(args.jobs, todo, sandbox, lane_config(batch, sandbox, language))
        if unforked is not None:
            console.print(f"[dim]grading lanes not forked from this process: {escape(unforked)}[/]")
        try:
            with _progress(console) as progress:
                outcome = grade_batch(batch, sandbox, jobs=args.jobs, force=args.force,
                                      progress=progress, lanes=lanes)
        finally:
            if lanes is not None:
                lanes.close()
    return outcome, warm


def _after_batch(console: Any, batch: Any, outcome: Any, course: Course, course_root: Path | None) -> list[str]:
    """The batch-level steps after grading: report.html, the LMS files, the gradebook, the summary table.
    One that fails is named (the list returned) and the command exits 1, but every result stays on disk
    and the other steps still run."""
    from rich.markup import escape


    out = batch.outputs.out
    everything = batch.outputs.all_results()
    failed = [f"no row could be written for {where}" for where in outcome.unwritten]

    def step(what: str, work: Callable[[], Any]) -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - one batch step that fails is named; the others still run
            failed.append(f"{what} failed ({type(exc).__name__}: {line(str(exc), 300)})")

    def gradebook(root: Path) -> None:
        for text in after_batch(out, root, course=course).lines():
            console.print(escape(line(text, 1000)))

    step("report.html", lambda: batch.outputs.report(everything))
    step("the LMS files", lambda: write_lms_csv(everything, course, out))
    if course_root is not None:
        step("recording in gradebook.db", lambda: gradebook(course_root))
    step("the summary table", lambda: R.print_summary(console, everything, course))
    earlier = len(everything) - len(outcome.results)
    if earlier:
        console.print(f"{earlier} rows of grades.csv come from earlier runs into {out} (other submissions)")
    return failed


def _say_done(console: Any, batch: Any, outcome: Any, warm: float, no_isolation: bool) -> None:
    """The batch's last lines: how many, how fast, what was written."""
    out = batch.outputs.out
    per = outcome.seconds / outcome.graded if outcome.graded else 0.0
    writing = outcome.write_seconds / outcome.graded if outcome.graded else 0.0
    lanes_said = f"; lanes in other processes: {outcome.lanes}" if outcome.lanes else ""
    console.print(f"graded {outcome.graded} in {outcome.seconds:.2f} s ({per:.3f} s each, of which writing "
                  f"{writing * 1000:.1f} ms; sandbox warm-up {warm:.1f} s{lanes_said}), {outcome.resumed} kept from an "
                  f"earlier run; wrote {out}/grades.csv, canvas.csv, moodle.csv, moodle-grades.csv, lms-skipped.csv, "
                  "report.html, results/, feedback/")
    if no_isolation:
        console.print("[bold red]graded with --no-isolation: student code ran uncaged (recorded in every result)[/]")
