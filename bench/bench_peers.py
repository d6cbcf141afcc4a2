"""Benchmark the kit against nbgrader and Otter, side by side, on the same generated submissions.

One command, rerunnable anywhere the course's .venv is set up:

    .venv/bin/python bench/bench_peers.py -n 40 -o bench-out

1. **Submissions.** N notebooks (default 40) across the four assignments, made from
   the release and source notebooks like the bundled samples: mostly correct, some
   with a known mistake (1.1 as 1 - tanh(z), 2.4 without 1/sqrt(d), 3.2 filling
   -1e9, 4.3 without the output projection), some half done, a few stubs. They
   are laid out as nbgrader's ``submitted/<student>/<assignment>/<nb>.ipynb``.
2. **Graders**, each run as an instructor runs it, in a subprocess:
   ``autograder grade`` at -j 1 and -j 2 on all N; ``nbgrader autograde "*"`` on a
   subset in a temporary course folder (course.yml, source/, release/, solutions/,
   nbgrader_config.py, after ``nbgrader generate_assignment "*"``); ``otter run``
   with the zip of ``autograder export otter``, one process per submission, on a
   smaller subset (the peers take seconds per submission: all N would not fit in
   15 minutes on 2 cores; the subsets are stated in the output).
3. **Agreement.** Which exercises earn full points, per submission and exercise,
   for the kit, nbgrader and Otter; every disagreement is listed.
4. **Table.** Seconds per submission (median over repeated runs), wall time of
   the whole command per submission, peak memory, and each peer's ratio to the
   kit at -j 1 from this same run; the time of a warm ``check(...)`` in a real
   kernel; the cold start of ``autograder grade`` on one submission; where the
   kit's milliseconds go for one submission (``timing.profile`` of its results).
5. **Files.** ``OUT/results.md`` (the tables), ``OUT/results.png`` (a bar chart),
   ``OUT/results.json`` (every number).

What "seconds per submission" means for each tool, so that start-up costs are
neither hidden nor counted twice:

* kit: the grading loop of ``autograder grade`` divided by the submissions (its
  closing line), i.e. after the sandbox template imported torch once;
* nbgrader: the median gap between consecutive autograded notebooks of one
  ``nbgrader autograde`` run (each is a fresh kernel that imports torch, runs the
  notebook and its test cells), i.e. after nbgrader itself started;
* otter: the wall time of one ``otter run`` (one process per submission is how
  Otter grades outside Gradescope).

"wall / submission" is the whole command's wall time over the submissions it
graded: start-up included, for every tool.

``--kit-only`` skips nbgrader and Otter. The "Scaling and cold start"
section gives the -j 2 / -j 1 throughput ratio and the memory the second lane process adds, the cold
start of one submission over ``python -c "import torch"`` timed in the same run, and with
``--big 1000`` one run of 1,000 generated notebooks at -j 2 (wall time, notebooks per minute, peak
memory of the whole process tree).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

#: What the j-th submission of an assignment is, cycling: mostly correct, two mistakes, a partial, a stub.
#: The peers grade the first rounds (see peer_subsets): correct, mistaken and stub notebooks come first.
KINDS = ("correct", "mistake", "stub", "correct", "partial", "correct", "correct", "mistake", "correct", "correct")
#: Known mistakes written into the reference solution: (exercise, solution text -> wrong text).
MISTAKES = {
    "01_rnn_decay": ("1.1", (" ** 2", "")),                                        # 1 - tanh(z)
    "02_qkv_attention": ("2.4", None),                                             # samples' NO_SCALE
    "03_padding_masks": ("3.2", ('float("-inf")', "-1e9")),                         # -1e9 for -inf
    "04_multi_head_attention": ("4.3", (" @ out_proj_weight.T", "")),  # no output projection (its weight)
    "05_transformer_block": ("5.3", ("torch.relu(x @ W1.T + b1)", "(x @ W1.T + b1)")),  # no ReLU
}
LANES_LINE = re.compile(r"lanes in other processes: ([^)]*)\)")
GRADED_LINE = re.compile(r"graded (\d+) in ([\d.]+) s \(([\d.]+) s each, of which writing ([\d.]+) ms")
SAMPLE_SECONDS = 0.1


# -- submissions -------------------------------------------------------------------------------
@dataclass
class Sub:
    index: int
    student: str
    assignment: str
    kind: str
    notebook: str                  # file name: <assignment>.ipynb

    @property
    def rel(self) -> str:
        return f"{self.student}/{self.assignment}/{self.notebook}"


def _make_samples() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", ROOT / "samples" / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mistaken_code(ms: Any, assignment: Any) -> tuple[str, str]:
    exercise, edit = MISTAKES[assignment.id]
    if edit is None:
        return exercise, ms.NO_SCALE
    code = ms.solution_code(assignment, exercise)
    old, new = edit
    if old not in code:
        raise SystemExit(f"bench: the solution of {exercise} changed; update MISTAKES ({old!r} not found)")
    return exercise, code.replace(old, new)


def generate(folder: Path, n: int, course: Any) -> list[Sub]:
    """``n`` submissions in nbgrader's layout under ``folder``; submission i is of assignment i % 4."""
    import nbformat

    ms = _make_samples()
    made: dict[tuple[str, str], str] = {}
    subs = []
    for i in range(n):
        a = course.assignments[i % len(course.assignments)]
        kind = KINDS[(i // len(course.assignments)) % len(KINDS)]
        if (a.id, kind) not in made:
            ids = [e.id for e in a.exercises]
            if kind == "correct":
                nb = ms.submission(a, solved="all")
            elif kind == "mistake":
                exercise, code = _mistaken_code(ms, a)
                nb = ms.submission(a, solved=tuple(e for e in ids if e != exercise), code={exercise: code})
            elif kind == "partial":
                nb = ms.submission(a, solved=tuple(ids[: len(ids) // 2]))
            else:
                nb = ms.student_notebook(a)
            made[a.id, kind] = nbformat.writes(nb) + "\n"
        sub = Sub(i, f"s{i:03d}", a.id, kind, a.notebook)
        path = folder / sub.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(made[a.id, kind], encoding="utf-8")
        subs.append(sub)
    return subs


def peer_subsets(subs: list[Sub], n_assignments: int, nbgrader: int, otter: int) -> tuple[list[Sub], list[Sub]]:
    """The first ``nbgrader`` submissions (the first rounds of KINDS over every assignment); of those,
    ``otter`` taken diagonally (assignment a, round a, a+1, ...) so that they differ in kind too."""
    nb = subs[:nbgrader]
    rounds = max(1, -(-len(nb) // n_assignments))

    def diagonal(s: Sub) -> tuple[int, int]:
        j, a = divmod(s.index, n_assignments)
        return (j - a) % rounds, s.index

    return nb, sorted(nb, key=diagonal)[:otter]


# -- running a command and measuring it ----------------------------------------------------------
@dataclass
class Run:
    cmd: list[str]
    wall: float
    rc: int
    stdout: str
    stderr: str
    maxrss_mib: float               # the largest single process of the tree (wait4's ru_maxrss)
    peak_pss_mib: float | None      # the whole tree, sampled (None without psutil)
    cpu_s: float = 0.0              # user + system CPU seconds of the tree (wait4: the reaped descendants)


def _tree_pss(pid: int) -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20


def measure(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 900,
            sample_seconds: float = SAMPLE_SECONDS) -> Run:
    """Run ``cmd`` to its end: wall time, exit code, output, and peak memory of its process tree (sampled every
    ``sample_seconds``: reading a process's smaps costs a millisecond of a CPU the command may be using)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        peak: float | None = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                _pid, status, usage = os.wait4(proc.pid, 0)
                break
            pss = _tree_pss(proc.pid)
            if pss is not None:
                peak = max(peak or 0.0, pss)
            time.sleep(sample_seconds)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return Run(cmd, wall, proc.returncode, out.read().decode("utf-8", "replace"),
                   err.read().decode("utf-8", "replace"), usage.ru_maxrss / 1024, peak,
                   usage.ru_utime + usage.ru_stime)


def _require(run: Run, what: str) -> Run:
    if run.rc != 0:
        tail = (run.stdout + run.stderr)[-3000:]
        raise SystemExit(f"bench: {what} failed (exit {run.rc}): {' '.join(run.cmd)}\n{tail}")
    return run


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"   # nbgrader spawns alembic
    env.update(MPLBACKEND="Agg", COLUMNS="200", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


# -- the tools ---------------------------------------------------------------------------------
@dataclass
class Row:
    """One line of the table."""

    tool: str
    submissions: int
    runs: int
    per_submission: float                 # median, see the module docstring
    wall_per_submission: float            # median of (command wall / submissions)
    maxrss_mib: float
    peak_pss_mib: float | None
    note: str = ""
    samples: list[float] = field(default_factory=list)
    lanes: str = ""                       # kit: its lanes in other processes ("1 forked"), as it said


def kit_runs(subs_dir: Path, work: Path, jobs: int, repeats: int, n: int) -> tuple[Row, Path, float]:
    """``autograder grade -j jobs`` on all submissions, ``repeats`` times into fresh folders.

    Returns the row, the last run's output folder and the median seconds spent writing per submission.
    """
    runs, per, walls, writes = [], [], [], []
    out = work
    for r in range(repeats):
        out = work / f"kit-j{jobs}-r{r}"
        run = _require(measure([str(VENV_BIN / "autograder"), "grade", str(subs_dir), "-o", str(out), "-j", str(jobs)],
                               cwd=ROOT, env=_env()), f"autograder grade -j {jobs}")
        found = GRADED_LINE.search(run.stdout)
        if not found or int(found.group(1)) != n:
            raise SystemExit(f"bench: autograder grade did not report grading {n} submissions:\n{run.stdout[-2000:]}")
        per.append(float(found.group(2)) / n)
        writes.append(float(found.group(4)) / 1000)
        walls.append(run.wall / n)
        runs.append(run)
        print(f"  kit -j {jobs} run {r + 1}/{repeats}: {run.wall:.1f} s wall, grading loop {found.group(2)} s")
    lanes = LANES_LINE.search(" ".join(runs[-1].stdout.split()))
    row = Row(f"kit: autograder grade -j {jobs}", n, repeats, statistics.median(per), statistics.median(walls),
              max(x.maxrss_mib for x in runs), _max_or_none(x.peak_pss_mib for x in runs),
              "grading loop / N (sandbox template started once)", per, lanes.group(1) if lanes else "")
    return row, out, statistics.median(writes)


def import_torch(repeats: int) -> float:
    """The median wall time of ``python -c "import torch"`` (a fresh process each time), in this run."""
    walls = []
    for _ in range(repeats):
        run = _require(measure([sys.executable, "-c", "import torch"], cwd=ROOT, env=_env()), "import torch")
        walls.append(run.wall)
    print(f"  import torch: median {statistics.median(walls):.2f} s over {repeats} runs")
    return statistics.median(walls)


def gradescope_run(sub_file: Path, sub: Sub, work: Path, repeats: int, course: Any) -> float:
    """The median wall time of Gradescope's ``run_autograder`` on one submission, laid out as Gradescope does
    (``A/source`` from ``autograder export gradescope``, ``A/submission``), with this .venv's Python."""
    from autograder.exports.gradescope import gradescope_files

    a = course.assignment(sub.assignment)
    root = work / "gradescope"
    for name, data in gradescope_files(course, a).items():
        target = root / "source" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (root / "source" / "run_autograder").chmod(0o755)
    # Gradescope unpacks the autograder once per image: its bytecode is compiled before the first submission.
    _require(measure([sys.executable, "-m", "compileall", "-q", str(root / "source")], cwd=work, env=_env()),
             "compileall")
    walls = []
    for r in range(repeats + 1):
        shutil.rmtree(root / "submission", ignore_errors=True)
        shutil.rmtree(root / "results", ignore_errors=True)
        (root / "submission").mkdir(parents=True)
        shutil.copyfile(sub_file, root / "submission" / a.notebook)
        run = _require(measure(["bash", str(root / "source" / "run_autograder")], cwd=work,
                               env=_env(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)),
                       "run_autograder")
        if r:   # the first run warms the page cache, as the cold-start runs of the kit find it warm
            walls.append(run.wall)
    print(f"  Gradescope run_autograder: median {statistics.median(walls):.2f} s over {repeats} runs")
    return statistics.median(walls)


def big_run(n: int, jobs: int, work: Path, course: Any) -> dict[str, Any]:
    """One ``autograder grade -j jobs`` of ``n`` generated notebooks: wall time, peak memory, notebooks/minute."""
    folder = work / f"big-{n}"
    generate(folder, n, course)
    print(f"  {n} notebooks generated; grading them at -j {jobs} ...")
    run = _require(measure([str(VENV_BIN / "autograder"), "grade", str(folder), "-o", str(work / f"big-out-{n}"),
                            "-j", str(jobs)], cwd=ROOT, env=_env(), timeout=3600), f"autograder grade ({n})")
    found = GRADED_LINE.search(run.stdout)
    loop = float(found.group(2)) if found else None
    out = {"n": n, "jobs": jobs, "wall": run.wall, "loop": loop, "per_minute": 60 * n / run.wall,
           "peak_pss_mib": run.peak_pss_mib, "maxrss_mib": run.maxrss_mib}
    print(f"  {n} notebooks at -j {jobs}: {run.wall:.0f} s wall ({out['per_minute']:.0f} / minute), peak PSS "
          f"{_fmt(run.peak_pss_mib, 0)} MiB")
    return out


def _max_or_none(values: Any) -> float | None:
    got = [v for v in values if v is not None]
    return max(got) if got else None


def cold_start(sub_file: Path, sub: Sub, work: Path, repeats: int) -> tuple[Row, list[float]]:
    folder = work / "cold-in"
    target = folder / sub.rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sub_file, target)
    walls, runs = [], []
    for r in range(repeats):
        run = _require(measure([str(VENV_BIN / "autograder"), "grade", str(folder), "-o", str(work / f"cold-out-{r}"),
                                "-j", "1"], cwd=ROOT, env=_env()), "autograder grade (cold start)")
        walls.append(run.wall)
        runs.append(run)
        print(f"  cold start run {r + 1}/{repeats}: {run.wall:.1f} s")
    row = Row("kit: cold start, one submission", 1, repeats, statistics.median(walls), statistics.median(walls),
              max(x.maxrss_mib for x in runs), _max_or_none(x.peak_pss_mib for x in runs),
              "whole `autograder grade` process: imports, sandbox template, grading, report", walls)
    return row, walls


KERNEL_CELLS = (
    "import math\n\nimport torch\n\nfrom autograder import check\n",
    'first = check("2.4")\n',
    textwrap.dedent('''\
        import json, time
        seconds, own = [], []
        for _ in range({calls}):
            start = time.perf_counter()
            result = check("2.4")
            seconds.append(time.perf_counter() - start)
            own.append(result.seconds)
        print("BENCH" + json.dumps({{"seconds": seconds, "own": own, "passed": bool(result.passed)}}))
        '''),
)


def warm_check(course: Any, calls: int) -> Row:
    """A real kernel (nbclient) defines the 02 solutions, calls check("2.4") once, then times later calls."""
    import nbformat
    from nbclient import NotebookClient

    ms = _make_samples()
    a = course.assignment("02_qkv_attention")
    solutions = "\n\n".join(ms.solution_code(a, e.id) for e in a.exercises)
    cells = [KERNEL_CELLS[0] + "\n\n" + solutions, KERNEL_CELLS[1], KERNEL_CELLS[2].format(calls=calls)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    start = time.perf_counter()
    with _environ(_env()):
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    wall = time.perf_counter() - start
    text = "".join(o.get("text", "") for o in nb.cells[2].get("outputs", []) if o.get("output_type") == "stream")
    found = re.search(r"BENCH(\{.*\})", text)
    if not found:
        raise SystemExit(f"bench: the kernel did not report check() timings:\n{nb.cells[2].get('outputs')}")
    data = json.loads(found.group(1))
    if not data["passed"]:
        raise SystemExit("bench: check('2.4') did not pass on the reference solution in the kernel")
    print(f"  warm check('2.4') in a kernel: median {statistics.median(data['seconds']) * 1000:.1f} ms "
          f"over {calls} calls after the first (kernel session {wall:.1f} s)")
    return Row('kit: warm check("2.4") in a kernel', 1, calls, statistics.median(data["seconds"]),
               statistics.median(data["seconds"]), 0.0, None,
               "the 2nd..th call in one nbclient kernel, display included", data["seconds"])


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


def nbgrader_course(work: Path, subs_dir: Path, subset: list[Sub]) -> Path:
    course = work / "nbgrader-course"
    course.mkdir()
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy2(ROOT / name, course / name)
    for name in ("source", "release", "solutions"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for s in subset:
        target = course / "submitted" / s.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(subs_dir / s.rel, target)
    return course


def nbgrader_runs(course: Path, subset: list[Sub], repeats: int) -> tuple[Row, dict[str, dict[str, float]], float]:
    env = _env(AUTOGRADER_COURSE=str(course / "course.yml"))
    nbgrader = str(VENV_BIN / "nbgrader")
    setup = _require(measure([nbgrader, "generate_assignment", "*", "--force"], cwd=course, env=env),
                     "nbgrader generate_assignment")
    print(f"  nbgrader generate_assignment '*': {setup.wall:.1f} s (set-up, not counted)")
    gaps: list[float] = []
    walls, runs = [], []
    for r in range(repeats):
        shutil.rmtree(course / "autograded", ignore_errors=True)
        run = _require(measure([nbgrader, "autograde", "*", "--force"], cwd=course, env=env), "nbgrader autograde")
        ends = sorted((course / "autograded" / s.rel).stat().st_mtime for s in subset
                      if (course / "autograded" / s.rel).exists())
        if len(ends) != len(subset):
            raise SystemExit(f"bench: nbgrader autograded {len(ends)} of {len(subset)} notebooks:\n"
                             f"{run.stderr[-3000:]}")
        this = [b - a for a, b in itertools.pairwise(ends)]
        gaps.extend(this)
        walls.append(run.wall / len(subset))
        runs.append(run)
        print(f"  nbgrader autograde run {r + 1}/{repeats}: {run.wall:.1f} s wall for {len(subset)}, "
              f"median gap {statistics.median(this) if this else float('nan'):.2f} s")
    row = Row('nbgrader autograde "*"', len(subset), repeats, statistics.median(gaps) if gaps else walls[0],
              statistics.median(walls), max(x.maxrss_mib for x in runs), _max_or_none(x.peak_pss_mib for x in runs),
              "median gap between consecutive autograded notebooks (a kernel each)", gaps)
    return row, gradebook_points(course, subset), setup.wall


def gradebook_points(course: Path, subset: list[Sub]) -> dict[str, dict[str, float]]:
    """student -> exercise -> points, read from nbgrader's gradebook through its API."""
    import warnings

    from nbgrader.api import Gradebook

    from autograder.course.config import load_course
    from autograder.authoring.notebooks import tests_grade_id

    c = load_course()
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for s in subset:
                a = c.assignment(s.assignment)
                out[s.student] = {e.id: float(gb.find_grade(tests_grade_id(e.id), a.notebook.removesuffix(".ipynb"),
                                                             a.id, s.student).score or 0.0) for e in a.exercises}
    return out


def otter_runs(work: Path, subs_dir: Path, subset: list[Sub]) -> tuple[Row, dict[str, dict[str, float]], float]:
    from autograder import cli
    from autograder.course.config import load_course

    course = load_course()
    zips = work / "otter-zips"
    start = time.perf_counter()
    for a in sorted({s.assignment for s in subset}):
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            if cli.main(["export", "otter", a, "-o", str(zips)]) != 0:
                raise SystemExit(f"bench: autograder export otter {a} failed")
    setup = time.perf_counter() - start
    print(f"  autograder export otter ({len({s.assignment for s in subset})} zips): {setup:.1f} s "
          "(set-up, not counted)")
    walls, runs = [], []
    points: dict[str, dict[str, float]] = {}
    for s in subset:
        folder = work / "otter" / s.student
        (folder / "out").mkdir(parents=True)
        notebook = folder / s.notebook
        shutil.copyfile(subs_dir / s.rel, notebook)
        run = _require(measure([str(VENV_BIN / "otter"), "run", "-a", str(zips / f"{s.assignment}-otter.zip"),
                                "-o", str(folder / "out"), str(notebook)], cwd=folder, env=_env()),
                       f"otter run ({s.student})")
        data = json.loads((folder / "out" / "results.json").read_text(encoding="utf-8"))
        tests = {t["name"]: t for t in data.get("tests", []) if "score" in t}
        a = course.assignment(s.assignment)
        points[s.student] = {e.id: float(tests.get("ex" + e.id.replace(".", "_"), {}).get("score") or 0.0)
                             for e in a.exercises}
        walls.append(run.wall)
        runs.append(run)
        print(f"  otter run {s.student} ({s.assignment}, {s.kind}): {run.wall:.1f} s")
    row = Row("otter run (one process each)", len(subset), 1, statistics.median(walls), statistics.median(walls),
              max(x.maxrss_mib for x in runs), _max_or_none(x.peak_pss_mib for x in runs),
              "wall time of one `otter run` (the kit grades inside it, in its sandbox)", walls)
    return row, points, setup


# -- results -----------------------------------------------------------------------------------
def kit_points(out: Path) -> dict[str, dict[str, float]]:
    points: dict[str, dict[str, float]] = {}
    for path in sorted((out / "results").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        points[result["student"]] = {e["exercise"]: float(e["points"]) for e in result.get("exercises", [])}
    return points


def kit_profile(out: Path) -> tuple[dict[str, float], int]:
    """Mean seconds per profile section over the results in ``out`` (graded ones)."""
    totals: dict[str, float] = {}
    count = 0
    for path in sorted((out / "results").glob("*.json")):
        profile = json.loads(path.read_text(encoding="utf-8")).get("timing", {}).get("profile")
        if not profile:
            continue
        count += 1
        for k, v in profile.items():
            totals[k] = totals.get(k, 0.0) + float(v)
    return {k: v / max(count, 1) for k, v in totals.items()}, count


@dataclass
class Disagreement:
    student: str
    assignment: str
    kind: str
    exercise: str
    verdicts: dict[str, str]


def agreement(subs: list[Sub], course: Any,
              tools: dict[str, dict[str, dict[str, float]]]) -> tuple[int, list[Disagreement]]:
    """Compare pass (full points) / fail per exercise of every submission each tool graded."""
    compared = 0
    out = []
    for s in subs:
        graded = {name: pts[s.student] for name, pts in tools.items() if s.student in pts}
        if len(graded) < 2:
            continue
        for e in course.assignment(s.assignment).exercises:
            verdicts = {}
            for name, pts in graded.items():
                got = pts.get(e.id)
                verdicts[name] = "missing" if got is None else ("pass" if abs(got - e.points) < 1e-6 else
                                                                 f"fail ({got:g}/{e.points:g})")
            compared += 1
            if len({v.split(" ")[0] for v in verdicts.values()}) > 1:
                out.append(Disagreement(s.student, s.assignment, s.kind, e.id, verdicts))
    return compared, out


def _over(x: float | None, base: float) -> str:
    """``x`` against ``base``: "0.24 s more than" or "0.57 s less than"."""
    if x is None:
        return "n/a against"
    return f"{_fmt(abs(x - base), 2)} s {'more' if x >= base else 'less'} than"


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{digits}f}"


def markdown(rows: list[Row], kit: Row, meta: dict[str, Any], compared: int, disagreements: list[Disagreement],
             profile: dict[str, float], profiled: int, sections: dict[str, str]) -> str:
    lines = [f"# The kit against nbgrader and Otter ({meta['date']})", "",
             f"{meta['machine']}; {meta['n']} generated submissions ({meta['kinds']}); "
             f"kit repeats {meta['repeats']}, nbgrader repeats {meta['peer_repeats']}; "
             f"whole benchmark {meta['seconds']:.0f} s.", "",
             f"Subsets: {meta['subsets']}", "",
             "| tool | submissions | runs | s / submission (median) | wall / submission | peak RSS, largest process "
             "(MiB) | peak PSS, whole tree (MiB) | × kit -j 1 (s / submission) | × kit -j 1 (wall) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = r.per_submission / kit.per_submission if kit.per_submission else None
        wall_ratio = r.wall_per_submission / kit.wall_per_submission if kit.wall_per_submission else None
        is_kit_batch = r.tool.startswith("kit: autograder grade")
        lines.append(f"| {r.tool} | {r.submissions} | {r.runs} | {_fmt(r.per_submission)} | "
                     f"{_fmt(r.wall_per_submission)} | {_fmt(r.maxrss_mib or None, 0)} | {_fmt(r.peak_pss_mib, 0)} | "
                     f"{_fmt(ratio, 1) if not r.tool.startswith('kit: ') or is_kit_batch else '—'} | "
                     f"{_fmt(wall_ratio, 1) if not r.tool.startswith('kit: ') or is_kit_batch else '—'} |")
    lines += ["", "What each column means: " + meta["definitions"], ""]
    sc = meta.get("scaling")
    if sc:
        lines += ["## Scaling and cold start", "",
                  f"- **-j 2 speed-up**: {_fmt(sc['speedup_j2'], 2)}× the throughput of -j 1 (grading loop; "
                  f"whole command {_fmt(sc['speedup_j2_wall'], 2)}×); "
                  + (f"the second lane is a grader process forked from the first once its sandbox is warm "
                     f"(\"{sc['lanes']}\"), with a copy of its sandbox template, and adds "
                     f"{_fmt(sc['extra_process_mib'], 0)} MiB of peak PSS (the pages it writes of its own)."
                     if "forked" in sc.get("lanes", "") else
                     f"the second lane is a spawned process of its own (\"{sc['lanes']}\") and adds "
                     f"{_fmt(sc['extra_process_mib'], 0)} MiB of peak PSS (its interpreter, torch and its "
                     "sandbox template)." if sc.get("lanes") else
                     f"the second lane is a thread of the same process ({_fmt(sc['extra_process_mib'], 0)} MiB "
                     "more peak PSS)."),
                  f"- **Cold start / import torch**: {_fmt(sc['cold_start'], 2)} s for one submission from a cold "
                  f"`autograder grade` against {_fmt(sc['import_torch'], 2)} s for `python -c \"import torch\"` "
                  f"in the same run: **{_fmt(sc['cold_over_torch'], 2)}×**; Gradescope's `run_autograder` on the same "
                  f"notebook {_fmt(sc.get('gradescope'), 2)} s ({_over(sc.get('gradescope'), sc['cold_start'])} "
                  "the cold start)."]
        big = sc.get("big")
        if big:
            lines.append(f"- **{big['n']} notebooks** at -j {big['jobs']}: {big['wall']:.0f} s wall "
                         f"(grading loop {_fmt(big['loop'], 0)} s), **{big['per_minute']:.0f} notebooks per "
                         f"minute**, peak memory {_fmt(big['peak_pss_mib'], 0)} MiB PSS of the whole tree "
                         f"(largest process {_fmt(big['maxrss_mib'], 0)} MiB RSS).")
        lines.append("")
    for r in rows:
        if r.note:
            lines.append(f"- **{r.tool}**: {r.note}.")
    lines += ["", "## Agreement on honest submissions", "",
              f"{compared} (submission, exercise) verdicts compared (full points = pass) between "
              f"{meta['compared_tools']}: "
              + ("**all agree**." if not disagreements else f"**{len(disagreements)} disagree**:"), ""]
    if disagreements:
        lines += ["| student | assignment | kind | exercise | " + " | ".join(disagreements[0].verdicts) + " |",
                  "|---|---|---|---|" + "---|" * len(disagreements[0].verdicts)]
        for d in disagreements:
            lines.append(f"| {d.student} | {d.assignment} | {d.kind} | {d.exercise} | "
                         + " | ".join(d.verdicts.values()) + " |")
    total = sum(profile.values())
    lines += ["", f"## Where the kit's time goes (one submission, -j 1, mean of {profiled})", "",
              "| section | ms | share | what |", "|---|---:|---:|---|"]
    for k, v in sorted(profile.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {k} | {v * 1000:.1f} | {v / total:.0%} | {sections.get(k, '')} |")
    lines.append(f"| **total** | {total * 1000:.1f} | 100% | `timing.seconds` of the result, plus writing |")
    lines.append("")
    return "\n".join(lines)


def chart(rows: list[Row], kit: Row, path: Path) -> None:
    """Two panels: seconds (median, and whole-command wall per submission) on a log scale; peak memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.per_submission > 0][::-1]
    names = [r.tool for r in shown]
    colours = ["#2b8cbe" if n.startswith("kit") else "#e34a33" for n in names]
    where = list(range(len(shown)))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 0.75 * len(shown) + 2.4),
                                   gridspec_kw={"width_ratios": [3, 2]})
    ax1.barh([y + 0.2 for y in where], [r.per_submission for r in shown], height=0.4, color=colours,
             label="median (kit: grading loop / N; nbgrader: per notebook; otter: per process)")
    ax1.barh([y - 0.2 for y in where], [r.wall_per_submission for r in shown], height=0.4, color=colours,
             alpha=0.35, label="whole command's wall time / submissions (start-up included)")
    for y, r in zip(where, shown):
        label = f"{r.per_submission:.3g} s"
        if not r.tool.startswith("kit"):
            label += (f"  ({r.per_submission / kit.per_submission:.0f}× kit -j 1; wall "
                      f"{r.wall_per_submission / kit.wall_per_submission:.0f}×)")
        ax1.text(r.per_submission * 1.08, y + 0.2, label, va="center", fontsize=8)
    ax1.set_yticks(where, names)
    ax1.set_xscale("log")
    lows = [min(r.per_submission, r.wall_per_submission) for r in shown]
    ax1.set_xlim(min(lows) / 2, max(r.wall_per_submission for r in shown) * 40)
    ax1.set_xlabel("seconds, log scale (per submission; per call for check(); per run for the cold start)")
    ax1.legend(loc="upper right", fontsize=7)
    ax2.barh(where, [r.peak_pss_mib or r.maxrss_mib for r in shown], color=colours)
    ax2.set_yticks(where, [""] * len(shown))
    ax2.set_xlabel("peak memory, MiB (PSS of the process tree)")
    fig.suptitle("Grading the same notebooks: the kit vs nbgrader and Otter (blue: the kit)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- the command --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=40, help="submissions to generate (default 40)")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench-out", help="where results.md/.png go")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kit measurement (default 3)")
    parser.add_argument("--nbgrader", type=int, default=15, metavar="K",
                        help="submissions nbgrader autogrades (default 15: a correct, a mistaken and a stub "
                             "notebook of each of the five assignments)")
    parser.add_argument("--nbgrader-repeats", type=int, default=2, help="runs of nbgrader autograde (default 2)")
    parser.add_argument("--otter", type=int, default=5, metavar="M", help="submissions otter runs (default 5)")
    parser.add_argument("--kernel-calls", type=int, default=5, help="timed check() calls in the kernel (default 5)")
    parser.add_argument("--kit-only", action="store_true", help="skip nbgrader and Otter")
    parser.add_argument("--big", type=int, default=0, metavar="N",
                        help="also grade N generated notebooks in one run at -j 2 (e.g. --big 1000: minutes)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed) instead of removing it")
    args = parser.parse_args(argv)
    if args.n < 1 or args.repeats < 1:
        parser.error("-n and --repeats must be at least 1")

    from autograder.course.config import load_course
    from autograder.grading.timing import PROFILE_SECTIONS

    started = time.perf_counter()
    course = load_course()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        subs_dir = work / "submissions"
        subs = generate(subs_dir, args.n, course)
        kinds = ", ".join(f"{sum(s.kind == k for s in subs)} {k}" for k in dict.fromkeys(KINDS)
                          if any(s.kind == k for s in subs))
        print(f"{args.n} submissions in {subs_dir}: {kinds}")

        rows: list[Row] = []
        print("kit:")
        kit1, kit_out, writing = kit_runs(subs_dir, work, 1, args.repeats, args.n)
        kit2, _, _ = kit_runs(subs_dir, work, 2, args.repeats, args.n)
        rows += [kit1, kit2]
        profile, profiled = kit_profile(kit_out)
        profile["write"] = writing
        correct = next(s for s in subs if s.kind == "correct")
        cold, _ = cold_start(subs_dir / correct.rel, correct, work, args.repeats)
        torch_seconds = import_torch(args.repeats)
        gradescope = gradescope_run(subs_dir / correct.rel, correct, work, args.repeats, course)
        big = big_run(args.big, 2, work, course) if args.big else None
        warm = warm_check(course, args.kernel_calls)
        tools = {"kit": kit_points(kit_out)}
        subsets = "kit: all submissions."
        if not args.kit_only:
            nb_subset, ot_subset = peer_subsets(subs, len(course.assignments), min(args.nbgrader, args.n),
                                                min(args.otter, args.n))
            print(f"nbgrader ({len(nb_subset)} submissions):")
            nbc = nbgrader_course(work, subs_dir, nb_subset)
            nb_row, tools["nbgrader"], _ = nbgrader_runs(nbc, nb_subset, args.nbgrader_repeats)
            print(f"otter ({len(ot_subset)} submissions):")
            ot_row, tools["otter"], _ = otter_runs(work, subs_dir, ot_subset)
            rows += [nb_row, ot_row]
            subsets = (f"kit: all {args.n}; nbgrader: {', '.join(s.student for s in nb_subset)} "
                       f"({', '.join(sorted({s.kind for s in nb_subset}))}); "
                       f"otter: {', '.join(s.student for s in ot_subset)} "
                       f"({', '.join(f'{s.assignment[:2]} {s.kind}' for s in ot_subset)}). "
                       "nbgrader and Otter take seconds per submission: all N would not fit in 15 minutes here.")
        rows += [warm, cold]
        compared, disagreements = agreement(subs, course, tools)
        seconds = time.perf_counter() - started
        try:
            load = os.getloadavg()
        except OSError:
            load = (float("nan"),) * 3
        import torch

        meta = {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": (f"{os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}, "
                        f"torch {torch.__version__}, load average at the end {load[0]:.1f}"),
            "n": args.n, "kinds": kinds, "repeats": args.repeats, "peer_repeats": args.nbgrader_repeats,
            "seconds": seconds, "subsets": subsets, "compared_tools": ", ".join(tools),
            "scaling": {"speedup_j2": kit1.per_submission / kit2.per_submission if kit2.per_submission else None,
                        "speedup_j2_wall": (kit1.wall_per_submission / kit2.wall_per_submission
                                            if kit2.wall_per_submission else None),
                        "extra_process_mib": (kit2.peak_pss_mib - kit1.peak_pss_mib
                                              if kit1.peak_pss_mib is not None and kit2.peak_pss_mib is not None
                                              else None),
                        "lanes": kit2.lanes,
                        "import_torch": torch_seconds, "cold_start": cold.per_submission,
                        "cold_over_torch": cold.per_submission / torch_seconds if torch_seconds else None,
                        "gradescope": gradescope,
                        "big": big},
            "definitions": ("kit: grading loop / N (template start-up excluded, reported in the cold-start row); "
                            "nbgrader: median gap between consecutive autograded notebooks; otter: one process "
                            "per submission; wall / submission: the whole command's wall time / submissions, "
                            "start-up included; × kit: the tool's figure divided by the kit's -j 1 figure "
                            "from this run"),
        }
        sections = {**PROFILE_SECTIONS, "write": "write results/*.json, feedback .md/.html and grades.csv "
                                                 "(measured by grade_batch, outside timing.seconds)"}
        text = markdown(rows, kit1, meta, compared, disagreements, profile, profiled, sections)
        (out / "results.md").write_text(text, encoding="utf-8")
        chart(rows, kit1, out / "results.png")
        (out / "results.json").write_text(json.dumps(
            {"meta": meta, "rows": [asdict(r) for r in rows], "compared": compared,
             "disagreements": [asdict(d) for d in disagreements], "profile": profile,
             "verdicts": tools}, indent=1), encoding="utf-8")
        print()
        print(text)
        print(f"wrote {out / 'results.md'}, {out / 'results.png'}, {out / 'results.json'} in {seconds:.0f} s")
        return 1 if disagreements else 0
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
