"""Grading speed of ``autograder grade`` on honest notebooks, section by section, against a baseline revision.

Generates N students x every assignment of the course (each notebook answered with the reference
solutions: honest work, full marks), then, in one run and interleaved so that the machine's mood falls on
both alike:

* ``autograder grade -j 1`` of the kit as it is and, with ``--baseline REV``, of that git revision (a
  worktree of it, same venv, same notebooks); per notebook the mean of each result's ``timing.seconds``,
  per assignment, and of each ``timing.profile`` section; the whole command's wall and CPU time;
* the same at ``-j J`` for each ``--jobs`` value: the whole command's throughput against -j 1's, and the
  peak PSS of the whole process tree; with ``--one-cpu``, -j 1 also with ``AUTOGRADER_LANE_CPUS=1`` (a lane on
  one CPU, where it would take two: the curve of lanes against one CPU each);
* the cold start: one submission graded by a fresh ``autograder grade`` against ``python -c "import
  torch"``, both with a warm page cache (medians of ``--repeats``);
* whether the verdicts agree: points, statuses and messages of every result, and grades.csv, between the
  kit and the baseline (a speed-up must change no verdict).

"Must-do work" is what no grader can skip: the student's code, the reference solutions, the inputs and
the comparisons (the sections ``student``, ``reference``, ``inputs``, ``compare``); the rest is overhead.

    .venv/bin/python bench/bench_speed.py --baseline f24b862 --one-cpu  # 50 students, bench/speed.md
    .venv/bin/python bench/bench_speed.py -n 10 --jobs 2 --repeats 1     # a quick look
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_peers import Run, _env, _make_samples, measure  # noqa: E402

MUST_DO = ("student", "reference", "inputs", "compare")


@dataclass(frozen=True)
class Setting:
    """How one run grades: ``-j jobs``, with ``env`` added to the environment."""

    jobs: int
    env: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.jobs}" + "".join(f", {k}={v}" for k, v in self.env)


#: The -j 1 every ratio is taken against.
ONE = Setting(1)


@dataclass
class Kit:
    """One grader to time: this checkout, or a worktree of a baseline revision."""

    label: str
    root: Path
    runs: dict[Setting, list[Run]] = field(default_factory=dict)
    outs: dict[Setting, list[Path]] = field(default_factory=dict)
    cold: list[float] = field(default_factory=list)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "autograder", *args]

    def env(self, setting: Setting = ONE) -> dict[str, str]:
        return _env(PYTHONPATH=str(self.root), AUTOGRADER_COURSE=str(self.root / "course.yml"), **dict(setting.env))


def generate(folder: Path, n: int, assignments: list[Any]) -> int:
    import nbformat

    ms = _make_samples()
    for a in assignments:
        text = nbformat.writes(ms.submission(a, solved="all"))
        for i in range(n):
            path = folder / f"s{i:03d}" / f"{a.id}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return n * len(assignments)


def worktree(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(into), rev], check=True,
                   capture_output=True)
    return into


def grade(kit: Kit, subs: Path, out: Path, setting: Setting) -> Run:
    # PSS twice a second: at ten a second, reading the tree's smaps took a tenth of a CPU from the grader, all of
    # it from a lane whose two sides hold both CPUs (its -j 1 read 170 ms a notebook there, 146 unsampled).
    run = measure(kit.command("grade", str(subs), "-o", str(out), "-j", str(setting.jobs), "--force"), cwd=kit.root,
                  env=kit.env(setting), timeout=1800, sample_seconds=0.5)
    if run.rc != 0:
        raise SystemExit(f"{kit.label}: autograder grade -j {setting.label} failed ({run.rc}):\n{run.stderr[-3000:]}")
    return run


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "results").glob("*.json"))]


def per_notebook(outs: list[Path]) -> tuple[dict[str, float], dict[str, float], int]:
    """Mean ms per notebook by assignment and by profile section, over every run in ``outs``."""
    by_assignment: dict[str, list[float]] = {}
    sections: dict[str, float] = {}
    count = 0
    for out in outs:
        for r in results(out):
            timing = r.get("timing") or {}
            by_assignment.setdefault(r["assignment"], []).append(1000 * timing.get("seconds", 0.0))
            for name, seconds in (timing.get("profile") or {}).items():
                sections[name] = sections.get(name, 0.0) + 1000 * seconds
            count += 1
    means = {a: statistics.mean(v) for a, v in sorted(by_assignment.items())}
    means["all"] = statistics.mean([x for v in by_assignment.values() for x in v])
    return means, {k: v / max(count, 1) for k, v in sections.items()}, count


def verdicts(out: Path) -> tuple[dict[str, Any], str]:
    """What must not change: each result's points, status and messages, and grades.csv."""
    table = {}
    for r in results(out):
        table[r["key"]] = {
            "points": r.get("points"), "status": r.get("status"), "message": r.get("message"),
            "exercises": [{"exercise": e.get("exercise"), "points": e.get("points"), "status": e.get("status"),
                           "checks": [{k: v for k, v in c.items() if k != "seconds"} for c in e.get("checks", [])]}
                          for e in r.get("exercises", [])]}
    return table, (out / "grades.csv").read_text(encoding="utf-8")


def cold_start(kit: Kit, sub_file: Path, work: Path, repeats: int) -> list[float]:
    folder = work / f"cold-in-{kit.label}"
    (folder / "s000").mkdir(parents=True, exist_ok=True)
    (folder / "s000" / sub_file.name).write_bytes(sub_file.read_bytes())
    walls = []
    for r in range(repeats + 1):            # the first run warms the page cache and is not counted
        run = measure(kit.command("grade", str(folder), "-o", str(work / f"cold-out-{kit.label}-{r}"), "-j", "1"),
                      cwd=kit.root, env=kit.env())
        if run.rc != 0:
            raise SystemExit(f"{kit.label}: cold start failed:\n{run.stderr[-2000:]}")
        if r:
            walls.append(run.wall)
    return walls


def import_torch(repeats: int) -> list[float]:
    walls = []
    for r in range(repeats + 1):
        run = measure([sys.executable, "-c", "import torch"], cwd=ROOT, env=_env())
        if r:
            walls.append(run.wall)
    return walls


def cpu_seconds(run: Run) -> float:
    return run.cpu_s


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def markdown(kits: list[Kit], meta: dict[str, Any], torch_walls: list[float], agree: str | None,
             jobs: list[Setting]) -> str:
    lines = [f"# Grading speed, section by section ({meta['when']})", "",
             f"One run of `{meta['command']}`: {meta['cpus']} CPUs, Python {meta['python']}, torch {meta['torch']}; "
             f"{meta['notebooks']} honest notebooks ({meta['students']} students × {meta['assignments']} "
             f"assignments, every answer the reference's); each -j value {meta['repeats']}× per grader, "
             f"interleaved; load average at the end {meta['load']}.", ""]
    stats = {k.label: per_notebook(k.outs[ONE]) for k in kits}
    latest = stats[kits[-1].label][1]
    names = sorted({s for _m, sec, _n in stats.values() for s in sec}, key=lambda s: -latest.get(s, 0))
    head = "| ms per notebook, -j 1 | " + " | ".join(k.label for k in kits) + " |"
    lines += ["## Per notebook (mean of `timing.seconds`, -j 1)", "", head, "|---|" + "---:|" * len(kits)]
    for a in stats[kits[-1].label][0]:
        lines.append(f"| {'**all**' if a == 'all' else a} | "
                     + " | ".join(_ms(stats[k.label][0].get(a)) for k in kits) + " |")
    lines += ["", "## Where a notebook's time goes (mean of `timing.profile`, ms, -j 1)", "", head.replace(
        "ms per notebook, -j 1", "section"), "|---|" + "---:|" * len(kits)]
    for s in names:
        lines.append(f"| {s}{' (must-do)' if s in MUST_DO else ''} | "
                     + " | ".join(_ms(stats[k.label][1].get(s)) for k in kits) + " |")
    must = {k.label: sum(stats[k.label][1].get(s, 0.0) for s in MUST_DO) for k in kits}
    total = {k.label: sum(stats[k.label][1].values()) for k in kits}
    lines.append("| **total / must-do work** | " + " | ".join(
        f"{total[k.label]:.1f} / {must[k.label]:.1f} = **{total[k.label] / max(must[k.label], 1e-9):.2f}×**"
        for k in kits) + " |")
    lines += ["", "## The whole command", "",
              "| grader | -j | wall (median) | CPU user+sys (median) | × -j 1 throughput | peak PSS, whole tree |",
              "|---|---:|---:|---:|---:|---:|"]
    for k in kits:
        base = statistics.median(r.wall for r in k.runs[ONE])
        for j in jobs:
            walls = [r.wall for r in k.runs[j]]
            pss = max((r.peak_pss_mib or 0.0) for r in k.runs[j])
            lines.append(f"| {k.label} | {j.label} | {statistics.median(walls):.1f} s | "
                         f"{statistics.median(cpu_seconds(r) for r in k.runs[j]):.1f} s | "
                         f"{base / statistics.median(walls):.2f}× | {pss:.0f} MiB |")
    single = [j for j in jobs if j.jobs == 1 and j != ONE]
    for j in single:
        mine = kits[-1].runs
        one = statistics.median(r.wall for r in mine[j])
        lines += ["", f"Against -j {j.label} (a lane on one CPU) instead, this checkout's lanes scale: " + ", ".join(
            f"-j {m.label} {one / statistics.median(r.wall for r in mine[m]):.2f}×" for m in jobs if m.jobs > 1) + "."]
    torch_s = statistics.median(torch_walls)
    lines += ["", "## Cold start", "",
              f"`python -c \"import torch\"`: {torch_s:.2f} s (median of {len(torch_walls)}).", ""]
    for k in kits:
        cold = statistics.median(k.cold)
        lines.append(f"- {k.label}: one submission from a fresh `autograder grade` {cold:.2f} s = "
                     f"**{cold / torch_s:.2f}×** import torch")
    if agree is not None:
        lines += ["", "## Verdicts", "", agree]
    lines += ["", "Must-do work: " + ", ".join(MUST_DO) + " (the student's code, the references, the seeded inputs, "
              "the comparisons); every other section is the grader's overhead. Wall times on a shared machine move "
              "by tens of percent between runs: compare the columns of one run."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=50, help="students (default 50): N notebooks per assignment")
    parser.add_argument("--jobs", type=int, nargs="*", default=[2], help="-j values besides 1 (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each -j value per grader (default 2)")
    parser.add_argument("--one-cpu", action="store_true", help="also -j 1 with AUTOGRADER_LANE_CPUS=1 (a lane on one "
                        "CPU where it would take two), and the lanes' throughput against it")
    parser.add_argument("--cold-repeats", type=int, default=3, help="cold starts timed per grader (default 3)")
    parser.add_argument("--baseline", metavar="REV", help="a git revision to time beside this checkout")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the kit to time (default: this checkout)")
    parser.add_argument("--assignments", nargs="*", help="assignment IDs (default: those of the course that "
                        "the baseline also has)")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "speed.md", help="markdown written here")
    args = parser.parse_args(argv)

    import torch

    from autograder.course.config import load_course

    course = load_course(args.checkout)
    jobs = [ONE] + ([Setting(1, (("AUTOGRADER_LANE_CPUS", "1"),))] if args.one_cpu else []) \
        + [Setting(j) for j in args.jobs if j != 1]
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
        work = Path(tmp)
        kits = [Kit("this checkout" if args.checkout == ROOT else str(args.checkout), args.checkout.resolve())]
        known = {a.id for a in course.assignments}
        if args.baseline:
            base = Kit(f"baseline {args.baseline}", worktree(args.baseline, work / "baseline"))
            kits.insert(0, base)
            theirs = load_course(base.root / "course.yml")
            known &= {a.id for a in theirs.assignments}
        chosen = [a for a in course.assignments if a.id in (set(args.assignments) if args.assignments else known)]
        if not chosen:
            raise SystemExit("no assignment to grade (see --assignments)")
        subs = work / "subs"
        total = generate(subs, args.n, chosen)
        print(f"{total} notebooks: {args.n} students x {', '.join(a.id for a in chosen)}", flush=True)
        try:
            for r in range(args.repeats):
                for j in jobs:
                    for k in kits:
                        out = work / f"out-{len(k.outs.get(j, []))}-{jobs.index(j)}-{kits.index(k)}"
                        run = grade(k, subs, out, j)
                        k.runs.setdefault(j, []).append(run)
                        k.outs.setdefault(j, []).append(out)
                        print(f"  {k.label} -j {j.label} run {r + 1}: {run.wall:.1f} s wall, "
                              f"{cpu_seconds(run):.1f} s CPU, peak PSS {run.peak_pss_mib or 0:.0f} MiB", flush=True)
            torch_walls = import_torch(args.cold_repeats)
            sample = next(iter(sorted(subs.glob("s000/*.ipynb"))))
            for k in kits:
                k.cold = cold_start(k, sample, work, args.cold_repeats)
            agree = None
            if len(kits) > 1:
                (a, a_csv), (b, b_csv) = verdicts(kits[0].outs[ONE][0]), verdicts(kits[1].outs[ONE][0])
                differ = sorted(key for key in set(a) | set(b) if a.get(key) != b.get(key))
                agree = (f"{len(a)} results of the baseline and {len(b)} of this checkout: "
                         + ("**every verdict the same** (points, statuses, messages of every exercise and check)"
                            if not differ else f"**{len(differ)} differ**: {', '.join(differ[:10])}")
                         + ("; grades.csv identical." if _rows(a_csv) == _rows(b_csv) else "; **grades.csv differs**."))
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "baseline")],
                               capture_output=True)
        meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
                "python": platform.python_version(), "torch": torch.__version__, "notebooks": total,
                "students": args.n, "assignments": len(chosen), "repeats": args.repeats,
                "load": f"{os.getloadavg()[0]:.1f}",
                "command": "python bench/bench_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])}
        text = markdown(kits, meta, torch_walls, agree, jobs)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0 if agree is None or "differ" not in agree else 1


def _rows(text: str) -> list[list[str]]:
    """grades.csv's rows, the run's own columns (time stamps) left out."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return rows
    keep = [i for i, name in enumerate(rows[0]) if "time" not in name.lower() and "graded_at" not in name.lower()]
    return [[row[i] for i in keep if i < len(row)] for row in rows]


if __name__ == "__main__":
    sys.exit(main())
