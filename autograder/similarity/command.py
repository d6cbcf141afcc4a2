"""``autograder similarity SUBMISSIONS -o OUT``: the similarity report of a batch (the command: options, progress,
the summary).

SUBMISSIONS is what ``autograder grade`` reads (a folder in any of its layouts, a zip an LMS exported, the
``submitted/`` folder of ``autograder serve export``), found and named by the same discovery
(:func:`autograder.grading.submissions.discover`); ``--assignment`` scopes it the same way. Each notebook is read
(:mod:`autograder.similarity.corpus`), each assignment's class compared (:mod:`autograder.similarity.scoring`),
and OUT gets ``similarity.csv`` and ``similarity.html`` (:mod:`autograder.similarity.report`): at most ``--top``
pairs per assignment, those scoring at least the floor. A notebook that cannot be read is named, with why, and
left out; the others are compared. Nothing is graded and no grade is changed: the report is evidence for a
conversation, not a finding.
"""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autograder.core.errors import AutograderError
from autograder.course.config import Course, load_course
from autograder.grading.archives import opened
from autograder.grading.submissions import Discovery, discover
from autograder.similarity import batch, report
from autograder.similarity.corpus import Work, read_baseline
from autograder.similarity.evidence import Explained, explain
from autograder.similarity.scoring import FLOOR, Cohort

#: Pairs shown per assignment unless --top says otherwise.
TOP = 50
#: Notebooks past which reading them shows a progress bar.
PROGRESS_FROM = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                        help="a folder of notebooks (any layout `autograder grade` reads, the submitted/ folder of "
                             "`autograder serve export` included) or a .zip exported from an LMS")
    parser.add_argument("-o", "--out", type=Path, required=True, metavar="OUT",
                        help="output folder: similarity.csv and similarity.html")
    parser.add_argument("--assignment", metavar="A", help="compare only this assignment's notebooks; also the "
                        "assignment of notebooks whose path and content name none")
    parser.add_argument("--top", type=int, default=TOP, metavar="N",
                        help=f"at most N pairs per assignment, the highest scores (default {TOP}); a pair is listed "
                             f"only when its score is at least {FLOOR}")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    if args.top < 1:
        raise AutograderError(f"--top {args.top}: need at least one pair")
    console = Console()
    course = load_course()
    with opened(args.submissions) as (root, refused):
        out = Path(args.out).resolve()
        if out.is_relative_to(Path(root).resolve()):
            raise AutograderError(f"{out}: the output folder is inside SUBMISSIONS",
                                  hint="write the report elsewhere")
        given = Path(args.submissions)
        around = tuple(p.name for p in (given.resolve().parent, given.resolve())) if given.is_dir() else ()
        found = discover(root, course, assignment=args.assignment, refused=refused, around=around,
                         files_trusted=given.is_dir())
        if not found.submissions:
            raise AutograderError(f"{args.submissions}: no notebook (.ipynb) found",
                                  hint="pass the folder or zip that holds the submitted notebooks")
        works, skipped = read_all(found, course, console)
    for text in skipped:
        console.print(f"[yellow]skipped[/] {escape(text)}")
    pairs, summaries = compare(works, course, args.top)
    csv_path, html_path = report.write(out, pairs, summaries, skipped, course.name, FLOOR)
    for s in summaries:
        console.print(f"{escape(s.assignment)}: {s.notebooks} notebooks, {s.candidates} pairs scored, {s.worth} "
                      f"worth a look" + (f", the top {s.shown} listed" if s.shown < s.worth else ""))
    console.print(f"wrote {escape(str(csv_path))} and {escape(str(html_path))} (evidence for a conversation, "
                  "not a finding: no grade is changed)")
    return 0


def read_all(found: Discovery, course: Course, console: Any) -> tuple[list[Work], list[str]]:
    """Every notebook found, read (:mod:`autograder.similarity.batch`); the ones that could not be, each as one
    line naming it and why."""
    tasks, skipped = batch.tasks_of(found)
    with batch.reading(tasks, course, batch.workers(len(tasks))) as results, \
            _progress(console, len(tasks)) as advance:
        works, more = batch.collect(results, advance)
    return works, skipped + more


def compare(works: list[Work], course: Course, top: int) -> tuple[list[Explained], list[report.Summary]]:
    """Each assignment's class compared: the pairs to list (the highest first, at most ``top`` per assignment)
    and one summary per assignment, in course.yml's order."""
    pairs: list[Explained] = []
    summaries: list[report.Summary] = []
    for assignment in course.assignments:
        mine = [w for w in works if w.assignment == assignment.id]
        if not mine:
            continue
        cohort = Cohort(mine, read_baseline(course, assignment))
        candidates = cohort.candidates()
        worth = [s for s in (cohort.score(a, b, keys) for (a, b), keys in candidates.items()) if s.score >= FLOOR]
        worth.sort(key=lambda s: (-s.score, *sorted((cohort.works[s.a].student, cohort.works[s.b].student))))
        listed = [_ordered(explain(cohort, s)) for s in worth[:top]]
        pairs += listed
        summaries.append(report.Summary(assignment.id, len(mine), len(candidates), len(worth), len(listed)))
    pairs.sort(key=lambda p: (-p.score, p.assignment, p.student_a, p.student_b))
    return pairs, summaries


def _ordered(pair: Explained) -> Explained:
    """The pair with ``student_a`` < ``student_b`` (their sides swapped when need be)."""
    if pair.student_a <= pair.student_b:
        return pair
    pair.student_a, pair.student_b = pair.student_b, pair.student_a
    for shown in pair.shown:
        shown.a, shown.b = shown.b, shown.a
    return pair


@contextlib.contextmanager
def _progress(console: Any, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar while notebooks are read (rich's, as ``autograder grade`` shows), where there are many:
    yields the function that advances it."""
    if total < PROGRESS_FROM:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("reading notebooks"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("read", total=total)
        yield lambda: bar.advance(task)
