"""Benchmark ``autograder grade``: seconds per submission and submissions per minute at -j 1 and -j 2.

Generates N student notebooks of one assignment (a mix of correct, partial,
known-mistake and stub-only submissions, made like the bundled samples), starts
the sandbox's warm template once (timed and reported apart), then grades the
whole set once per ``-j`` value with ``--force`` semantics into a fresh output
folder. The figures cover everything a batch does per submission: reading the
notebook, forking a worker, running the cells and every public and hidden check,
references and diagnosis, writing results, feedback and grades.csv.

    .venv/bin/python bench/bench_grade.py               # N=40, -j 1 and -j 2
    .venv/bin/python bench/bench_grade.py -n 100 --jobs 1 2 4
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder import grading as G  # noqa: E402
from autograder.course.config import load_course  # noqa: E402


def _make_samples():
    spec = importlib.util.spec_from_file_location("make_samples", ROOT / "samples" / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(folder: Path, n: int, assignment_id: str) -> dict[str, int]:
    """``n`` submissions ``folder/s000/<assignment>.ipynb``: half correct, the rest partial, mistaken, stubs."""
    import nbformat

    ms = _make_samples()
    course = load_course()
    a = course.assignment(assignment_id)
    ids = [e.id for e in a.exercises]
    kinds = {
        "correct": ms.submission(a, solved="all"),
        "partial": ms.submission(a, solved=tuple(ids[: len(ids) // 2])),
        "stub": ms.student_notebook(a),
    }
    if assignment_id == "02_qkv_attention":
        # 2.4 without the scale (a known mistake), every other exercise solved
        kinds["mistake"] = ms.submission(a, solved=tuple(i for i in ids if i != "2.4"), code={"2.4": ms.NO_SCALE})
    order = ["correct", "partial", "correct", "mistake" if "mistake" in kinds else "correct", "stub"]
    counts: dict[str, int] = {}
    for i in range(n):
        kind = order[i % len(order)]
        counts[kind] = counts.get(kind, 0) + 1
        path = folder / f"s{i:03d}" / f"{assignment_id}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nbformat.writes(kinds[kind]), encoding="utf-8")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=40, help="submissions to generate (default 40)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="-j values to time (default 1 2)")
    parser.add_argument("--assignment", default="02_qkv_attention", help="assignment of the generated notebooks")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    args = parser.parse_args(argv)

    import torch

    from autograder.sandbox import Sandbox

    torch.set_num_threads(1)  # as `autograder grade` does
    course = load_course()
    device = G.resolve_device(args.device)
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        subs = Path(tmp) / "submissions"
        counts = generate(subs, args.n, args.assignment)
        print(f"{args.n} submissions of {args.assignment}: "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        t0 = time.perf_counter()
        with Sandbox(course.limits, device) as sandbox:
            warm = time.perf_counter() - t0
            print(f"sandbox warm start (template imports torch once): {warm:.2f} s  [excluded below]")
            for jobs in args.jobs:
                batch = G.plan(subs, course, Path(tmp) / f"out-j{jobs}", device=device)
                outcome = G.grade_batch(batch, sandbox, jobs=jobs, force=True)
                per = outcome.seconds / max(outcome.graded, 1)
                opens = [r["timing"]["open_seconds"] for r in outcome.results if "timing" in r]
                each = [r["timing"]["seconds"] for r in outcome.results if "timing" in r]
                totals = sorted({r["points"] for r in outcome.results})
                print(f"-j {jobs}: {outcome.graded} graded in {outcome.seconds:.2f} s = {per:.3f} s/submission, "
                      f"{60 / per:.0f} submissions/minute (one submission: median {statistics.median(each):.3f} s, "
                      f"of which fork + cells {statistics.median(opens):.3f} s); scores {totals}")
                profiles = [r["timing"]["profile"] for r in outcome.results if "timing" in r]
                if profiles:
                    fork = statistics.mean(p.get("fork", 0.0) for p in profiles)
                    cage = statistics.mean(p.get("cage", 0.0) for p in profiles)
                    print(f"  isolation {sandbox.isolation.mode}: fork {fork * 1000:.1f} ms + cage "
                          f"{cage * 1000:.1f} ms per submission (means; {', '.join(sandbox.isolation.layers)})")
                bad = [r["status"] for r in outcome.results if not r["status"].startswith("graded")]
                if bad:
                    print(f"  not graded: {json.dumps(bad[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
