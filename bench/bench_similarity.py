"""Benchmark the similarity report (issue 69) against copydetect and compare50 on a generated class.

One command, rerunnable anywhere the course's .venv is set up (scripts/setup.sh installs both peers):

    .venv/bin/python bench/bench_similarity.py -n 300 -o bench-out

1. **A class** (``similarity_class.py``): N students (default 300) x every assignment of course.yml, each
   notebook the release's with every exercise filled in, laid out as nbgrader's
   ``<student>/<assignment>/<notebook>``. Honest students write the reference's approach, a correct
   alternative or a known mistake of the course's catalog, each in their own style (names, equivalent
   spellings, comments, layout, quirks; ``similarity_style.py``) and answer the written questions in their own
   phrasing. Twenty pairs copy, disguised five ways (four pairs each): renamed identifiers, reordered
   independent statements, reformatted and recommented, equivalent operations swapped, only two exercises
   copied. Honest pairs who wrote the reference's approach everywhere in the same code are marked
   "honest reference-like": a report must not rank them among its top.
2. **The report**: ``autograder similarity SUBMISSIONS -o OUT`` run as an instructor runs it (a subprocess,
   timed), its ``similarity.csv`` read back.
3. **Peers on the same files**: the code cells each student writes (nbgrader's solution cells) of one
   assignment as one ``.py`` file, ``<student>/<assignment>.py``, the release notebook's same cells (the
   stubs: headers and docstrings) as the template both peers subtract (copydetect's boilerplate, compare50's
   distro); copydetect through its Python API (``CopyDetector``), compare50 through its command line (its
   own virtual environment: its pins conflict with the kit's, see scripts/setup.sh), its scores read from
   the graph its ``index.html`` carries.
4. **Scores**: a pair of students is counted once, at its highest score over the assignments. Precision
   among the top 20 pairs (ties at the 20th score shared out: the expected precision under a random order
   of the tied pairs), recall of the 20 injected pairs among every pair the tool reports (the report: each
   row; copydetect: a similarity over its display threshold; compare50: its ranking of ``-n`` matches), the
   honest reference-like pairs in the top 20, and wall seconds. ``OUT/similarity.md`` (printed too) and
   ``OUT/similarity.json``.

``--no-peers`` runs the report alone; ``--keep`` keeps the work folder (the notebooks, ``truth.json``, every
tool's output). The exit status is 0 when every tool ran (1 when one could not, named in the table).
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from bench_peers import _env, _make_samples, measure  # noqa: E402
from similarity_class import DISGUISES, Truth, generate  # noqa: E402

TOP = 20
#: compare50 in its own virtual environment (scripts/setup.sh): its pins (attrs<21) conflict with the kit's.
COMPARE50_PYTHON = ROOT / ".venv" / "compare50" / "bin" / "python"
COMPARE50_MATCHES = 50             # its default -n: the matches it ranks and renders
COPYDETECT_DISPLAY = 0.33          # its default display threshold: the pairs its report lists


@dataclass
class ToolRun:
    """What one tool said about the class: a score for each pair of students it scored."""

    tool: str
    scores: dict[tuple[str, str], float] = field(default_factory=dict)   # max over assignments
    reported: set[tuple[str, str]] = field(default_factory=set)          # the pairs its output lists
    wall: float = 0.0
    note: str = ""                                                       # how it ran, or why it did not
    ran: bool = True


@dataclass
class Score:
    tool: str
    ran: bool
    precision: float | None = None
    recall: float | None = None
    reported: int = 0
    reference_like_top: float | None = None
    wall: float = 0.0
    note: str = ""
    ties: int = 0                                  # pairs tied at the 20th score
    found_top: dict[str, int] = field(default_factory=dict)        # disguise -> pairs in the top 20
    found: dict[str, int] = field(default_factory=dict)            # disguise -> pairs reported


def pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _keep_max(scores: dict[tuple[str, str], float], key: tuple[str, str], value: float) -> None:
    if value > scores.get(key, float("-inf")):
        scores[key] = value


# -- the report --------------------------------------------------------------------------------
def has_similarity() -> bool:
    """Whether ``autograder similarity`` is a command of this checkout."""
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", "--help"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    return done.returncode == 0


def run_ours(subs: Path, out: Path) -> ToolRun:
    """``autograder similarity SUBMISSIONS -o OUT``, timed; its CSV read back."""
    tool = "autograder similarity"
    if not has_similarity():
        return ToolRun(tool, ran=False, note="not run: `autograder similarity` is not a command of this checkout")
    run = measure([sys.executable, "-m", "autograder", "similarity", str(subs), "-o", str(out)], cwd=ROOT,
                  env=_env(), timeout=1800)
    if run.rc != 0:
        last = [line.strip() for line in (run.stdout + run.stderr).splitlines() if line.strip()][-1:] or [""]
        return ToolRun(tool, wall=run.wall, ran=False, note=f"failed (exit {run.rc}): `{last[0][:300]}`")
    made = ToolRun(tool, wall=run.wall, note=f"subprocess, peak memory {run.peak_pss_mib or run.maxrss_mib:.0f} MiB")
    with (out / "similarity.csv").open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            key = pair(row["student_a"], row["student_b"])
            _keep_max(made.scores, key, float(row["score"]))
            made.reported.add(key)
    return made


# -- the peers ----------------------------------------------------------------------------------
def code_of(nb: dict[str, Any]) -> str:
    """The code cells a student writes in a notebook (nbgrader's solution cells), one after another."""
    cells = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in nb["cells"]
             if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    return "\n\n".join(cells) + "\n"


def extract(subs: Path, work: Path, course: Any, template: dict[str, Any]) -> dict[str, tuple[Path, Path]]:
    """Per assignment: a folder of ``<student>/<assignment>.py`` (a folder per student: compare50 names a
    submission by its folder) and the template's same cells (the release notebook's stubs)."""
    folders = {}
    for a in course.assignments:
        students, boiler = work / a.id / "students", work / a.id / "template"
        boiler.mkdir(parents=True)
        for notebook in sorted(subs.glob(f"*/{a.id}/{a.notebook}")):
            target = students / notebook.parent.parent.name / f"{a.id}.py"
            target.parent.mkdir(parents=True)
            target.write_text(code_of(json.loads(notebook.read_text(encoding="utf-8"))), encoding="utf-8")
        (boiler / "template.py").write_text(code_of(template[a.id]), encoding="utf-8")
        folders[a.id] = (students, boiler / "template.py")
    return folders


def copydetect_pairs(students: str, boiler: str) -> list[tuple[str, str, float]]:
    """copydetect's ``CopyDetector`` on one assignment, its defaults otherwise: each pair of students with the
    higher of its two similarities (what its report sorts by)."""
    from copydetect import CopyDetector

    detector = CopyDetector(test_dirs=[students], ref_dirs=[students], boilerplate_dirs=[str(Path(boiler).parent)],
                            extensions=["py"], autoopen=False, silent=True)
    detector.run()
    sims = detector.similarity_matrix
    names = [Path(f).parent.name for f in detector.test_files]
    refs = [Path(f).parent.name for f in detector.ref_files]
    best: dict[tuple[str, str], float] = {}
    for i, a in enumerate(names):
        for j, b in enumerate(refs):
            if a != b and sims[i, j, 0] >= 0:
                _keep_max(best, pair(a, b), float(max(sims[i, j, 0], sims[i, j, 1])))
    return [(a, b, value) for (a, b), value in best.items()]


#: One assignment's copydetect in a process of its own (copydetect runs on one core; two run side by side).
COPYDETECT_CHILD = ("import json, sys; sys.path.insert(0, sys.argv[1]); from bench_similarity import copydetect_pairs; "
                    "print(json.dumps(copydetect_pairs(sys.argv[2], sys.argv[3])))")


def run_copydetect(folders: dict[str, tuple[Path, Path]], jobs: int) -> ToolRun:
    """copydetect on each assignment (every pair of files), ``jobs`` assignments at a time."""
    tool = "copydetect"
    if importlib.util.find_spec("copydetect") is None:
        return ToolRun(tool, ran=False, note="not run: copydetect is not installed (the `bench` extra)")
    made = ToolRun(tool, note=f"Python API (`CopyDetector`), defaults (noise 25, guarantee 25), one process per "
                              f"assignment, {jobs} at a time; reported: a similarity over {COPYDETECT_DISPLAY}")

    def one(folder: tuple[Path, Path]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", COPYDETECT_CHILD, str(ROOT / "bench"), str(folder[0]),
                               str(folder[1])], capture_output=True, text=True, env=_env(), timeout=3600)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:      # threads that wait on processes
        done = list(pool.map(one, folders.values()))
    made.wall = time.perf_counter() - start
    for assignment, result in zip(folders, done):
        if result.returncode != 0:
            last = [line.strip() for line in result.stderr.splitlines() if line.strip()][-1:] or [""]
            return ToolRun(tool, wall=made.wall, ran=False,
                           note=f"failed on {assignment} (exit {result.returncode}): `{last[0][:300]}`")
        for a, b, value in json.loads(result.stdout):
            _keep_max(made.scores, (a, b), value)
            if value > COPYDETECT_DISPLAY:
                made.reported.add((a, b))
    return made


def compare50_graph(index_html: str) -> list[dict[str, Any]]:
    """The links of the graph compare50 writes into its ``index.html`` (``var GRAPH = {...}``): each ranked
    pair, its files and its score scaled to the best pair's (``value``, 0-10)."""
    at = index_html.index("var GRAPH = ") + len("var GRAPH = ")
    graph, _ = json.JSONDecoder().raw_decode(index_html, at)
    return graph["links"]


def run_compare50(folders: dict[str, tuple[Path, Path]], work: Path) -> ToolRun:
    """``compare50 FILES -d TEMPLATE -o OUT`` on each assignment, its default passes and ``-n``."""
    tool = "compare50"
    if not COMPARE50_PYTHON.exists():
        return ToolRun(tool, ran=False, note=f"not run: {COMPARE50_PYTHON.relative_to(ROOT)} is missing "
                                             "(scripts/setup.sh makes it)")
    made = ToolRun(tool, note=f"command line, default passes, -n {COMPARE50_MATCHES} per assignment")
    # Its start checks PyPI for a newer version; a closed local port answers at once, so the run needs no
    # network and its time is its work. PYTHONHASHSEED=50: what its own `compare50` script sets.
    env = _env(PYTHONHASHSEED="50", HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    for assignment, (students, boiler) in folders.items():
        out = work / f"compare50-{assignment}"
        files = sorted(str(p) for p in students.iterdir())
        run = measure([str(COMPARE50_PYTHON), "-m", "compare50", *files, "-d", str(boiler), "-o", str(out),
                       "-n", str(COMPARE50_MATCHES)], cwd=work, env=env, timeout=1800)
        made.wall += run.wall
        if run.rc != 0:
            made.ran = False
            last = [line.strip() for line in (run.stdout + run.stderr).splitlines() if line.strip()][-1:] or [""]
            made.note = f"failed on {assignment} (exit {run.rc}): `{last[0][:300]}`"
            return made
        if not (out / "index.html").exists():      # "no similarities found": nothing ranked
            continue
        for link in compare50_graph((out / "index.html").read_text(encoding="utf-8")):
            key = pair(Path(link["source"]).name, Path(link["target"]).name)
            _keep_max(made.scores, key, float(link["value"]) / 10)
            made.reported.add(key)
    return made


# -- scores -------------------------------------------------------------------------------------
def ranked(scores: dict[tuple[str, str], float], k: int = TOP) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The pairs surely in the top ``k``, and those tied at the k-th score (some of which are)."""
    order = sorted(scores.items(), key=lambda kv: -kv[1])
    if len(order) <= k:
        return [p for p, _ in order], []
    cut = order[k - 1][1]
    return [p for p, s in order if s > cut], [p for p, s in order if s == cut]


def evaluate(run: ToolRun, truth: Truth, k: int = TOP) -> Score:
    """Precision among the top ``k`` (ties shared out), recall among the pairs reported, the honest
    reference-like pairs in the top ``k``, and which disguises were found."""
    score = Score(run.tool, run.ran, wall=run.wall, note=run.note)
    if not run.ran:
        return score
    injected = {pair(p.source, p.copier): p.disguise for p in truth.pairs}
    honest_alike = {pair(a, b) for _, a, b in truth.reference_like} - set(injected)
    above, tied = ranked(run.scores, k)
    slots = min(k, len(run.scores)) - len(above)
    share = slots / len(tied) if tied else 0.0

    def expected(wanted: set[tuple[str, str]]) -> float:
        return sum(p in wanted for p in above) + share * sum(p in wanted for p in tied)

    taken = min(k, len(run.scores))
    score.precision = expected(set(injected)) / taken if taken else 0.0
    score.recall = len(set(injected) & run.reported) / len(injected)
    score.reported = len(run.reported)
    score.reference_like_top = expected(honest_alike)
    score.ties = len(tied) if tied and slots < len(tied) else 0
    for disguise in DISGUISES:
        mine = {p for p, d in injected.items() if d == disguise}
        score.found_top[disguise] = round(expected(mine))
        score.found[disguise] = len(mine & run.reported)
    return score


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}" if value != int(value) else str(int(value))


def markdown(scores: list[Score], meta: dict[str, Any]) -> str:
    lines = ["# The similarity report against copydetect and compare50", "",
             f"{meta['date']}; {meta['machine']}. Generated class: {meta['class']}", "",
             f"| tool | precision@{TOP} | recall (pairs reported) | honest reference-like in top {TOP} | wall s |",
             "|---|---:|---:|---:|---:|"]
    for s in scores:
        if not s.ran:
            lines.append(f"| {s.tool} | — | — | — | {_fmt(s.wall, 1) if s.wall else '—'} |")
            continue
        ties = f" ({s.ties} pairs tied at the {TOP}th score)" if s.ties else ""
        lines.append(f"| {s.tool} | {s.precision:.3f}{ties} | {s.recall:.2f} ({s.reported}) | "
                     f"{_fmt(s.reference_like_top, 1)} | {s.wall:.1f} |")
    ours = next((s for s in scores if s.tool == "autograder similarity"), None)
    peer = next((s for s in scores if s.tool == "copydetect"), None)
    if ours and peer and ours.ran and peer.ran and ours.precision is not None and peer.precision is not None:
        ratio = f"{ours.precision / peer.precision:.1f}×" if peer.precision else "∞ (copydetect's is 0)"
        lines += ["", f"precision@{TOP} of the report over copydetect's: **{ratio}**."]
    lines += ["", f"Targets (issue 69): precision@{TOP} ≥ 0.9, recall ≥ 0.8, at least 3× copydetect's precision@{TOP}, "
              f"no honest reference-like pair in the top {TOP}, under 60 s for 300 students × 5 notebooks on 2 cores.",
              "", f"## Injected pairs found, by disguise (in the top {TOP} / reported, of "
                  f"{meta['per_disguise']} each)", "",
              "| disguise | " + " | ".join(s.tool for s in scores if s.ran) + " |",
              "|---|" + "---:|" * sum(s.ran for s in scores)]
    for d in DISGUISES:
        lines.append(f"| {d} | " + " | ".join(f"{s.found_top[d]} / {s.found[d]}" for s in scores if s.ran) + " |")
    lines += ["", "## How each tool ran", ""]
    lines += [f"- **{s.tool}**: {s.note}" for s in scores]
    return "\n".join(lines) + "\n"


def describe(truth: Truth) -> str:
    kinds: dict[str, int] = defaultdict(int)
    for per in truth.approaches.values():
        for exercises in per.values():
            for key in exercises.values():
                kinds[key.split(":")[0]] += 1
    total = sum(kinds.values())
    shares = ", ".join(f"{kinds[k] / total:.0%} {k}" for k in ("reference", "alternative", "mistake"))
    honest = len({(a, b) for _, a, b in truth.reference_like})
    assignments = len(next(iter(truth.approaches.values())))
    return (f"{len(truth.students)} students × {assignments} assignments (exercises: {shares}), "
            f"{len(truth.pairs)} copy pairs, {honest} honest reference-like pairs, seed {truth.seed}.")


# -- the command --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300, help="students per assignment (default 300; at least 40)")
    parser.add_argument("--seed", type=int, default=69, help="the class's seed (default 69)")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench-out", help="where similarity.md goes")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed) instead of removing it")
    parser.add_argument("--no-peers", action="store_true", help="run the report alone (no copydetect, compare50)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="copydetect's assignments run side by side (default: 2, or 1 on one CPU)")
    args = parser.parse_args(argv)
    if args.n < 40:
        parser.error("-n must be at least 40 (20 copy pairs of distinct students)")

    from autograder.course.config import load_course

    course = load_course(ROOT / "course.yml")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-similarity-"))
    try:
        subs = work / "submissions"
        started = time.perf_counter()
        samples = _make_samples()
        truth = generate(subs, args.n, course, args.seed, samples)
        (work / "truth.json").write_text(truth.to_json(), encoding="utf-8")
        print(f"class: {describe(truth)} Written in {time.perf_counter() - started:.0f} s to {subs}")
        runs = [run_ours(subs, work / "ours")]
        print(f"  {runs[-1].tool}: {runs[-1].wall:.1f} s {runs[-1].note}")
        if not args.no_peers:
            folders = extract(subs, work / "code", course,
                              {a.id: samples.student_notebook(a) for a in course.assignments})
            runs.append(run_copydetect(folders, args.jobs))
            print(f"  {runs[-1].tool}: {runs[-1].wall:.1f} s")
            runs.append(run_compare50(folders, work))
            print(f"  {runs[-1].tool}: {runs[-1].wall:.1f} s")
        scores = [evaluate(r, truth) for r in runs]
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = float("nan")
        meta = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}, "
                           f"load average at the end {load:.1f}",
                "class": describe(truth), "per_disguise": len(truth.pairs) // len(DISGUISES)}
        text = markdown(scores, meta)
        (out / "similarity.md").write_text(text, encoding="utf-8")
        (out / "similarity.json").write_text(json.dumps({"meta": meta, "scores": [asdict(s) for s in scores]},
                                                        indent=1), encoding="utf-8")
        print()
        print(text)
        print(f"wrote {out / 'similarity.md'} and {out / 'similarity.json'}")
        return 0 if all(r.ran for r in runs) else 1
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
