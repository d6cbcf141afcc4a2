"""What a batch writes, with what may differ between two runs of the same kit taken out: the golden
snapshot that ``tests/features/test_golden.py`` compares every run with (grades, every result, every feedback text
and the LMS files of the bundled samples and of the benchmark's kinds of submission).

Taken out: timings (``seconds``, ``timing``), when and where it ran (``graded_at``, ``origin``, Moodle's
"last modified"), how it was caged (``isolation``: root or an ordinary user) and the grader fingerprint
(a hash of the engine's source: any edit changes it). Numbers inside messages keep 4 significant digits
(another CPU's float kernels may differ in the last ones); points are compared exactly.

A change of behaviour the course wants (a new check, a reworded message) is one command away::

    .venv/bin/python tests/golden.py --update     # grade again, rewrite tests/golden/*.json; review the diff
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
#: The benchmark's kinds of submission (bench/bench_grade.py: correct, partial, correct, mistake, stub).
BENCH_ASSIGNMENT, BENCH_COUNT = "02_qkv_attention", 5

_DROPPED = frozenset({"timing", "graded_at", "origin", "isolation", "grader", "seconds"})
_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])")


def _four(match: re.Match[str]) -> str:
    return f"{float(match.group()):.4g}"


def _text(value: str) -> str:
    return _FLOAT.sub(_four, value)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in _DROPPED}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str):
        return _text(value)
    return value


def _moodle(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for i, row in enumerate(rows):
        writer.writerow(row[:-1] + ["<time>"] if i else row)     # the header names the column
    return out.getvalue()


def snapshot(out: Path) -> dict[str, Any]:
    """The comparable part of an ``autograder grade`` output folder, by file."""
    snap: dict[str, Any] = {}
    for name in ("grades.csv", "canvas.csv", "lms-skipped.csv", "moodle.csv"):
        text = (out / name).read_text(encoding="utf-8-sig")
        snap[name] = _moodle(text) if name == "moodle.csv" else text
    for path in sorted((out / "results").glob("*.json")):
        snap[f"results/{path.name}"] = _clean(json.loads(path.read_text(encoding="utf-8")))
    for path in sorted((out / "feedback").glob("*.md")):
        snap[f"feedback/{path.name}"] = _text(path.read_text(encoding="utf-8"))
    return snap


def bench_submissions(folder: Path) -> Path:
    """The benchmark's five kinds of submission of 02, as bench/bench_grade.py makes them."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_grade
    finally:
        sys.path.remove(str(ROOT / "bench"))
    bench_grade.generate(folder, BENCH_COUNT, BENCH_ASSIGNMENT)
    return folder


def grade(submissions: Path, out: Path) -> Path:
    from autograder.cli import main

    code = main(["grade", str(submissions), "-o", str(out), "--force", "-j", "1"])
    if code != 0:
        raise RuntimeError(f"autograder grade {submissions} exited {code}")
    return out


def dump(snap: dict[str, Any]) -> str:
    return json.dumps(snap, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rewrite the golden snapshots of tests/features/test_golden.py.")
    parser.add_argument("--update", action="store_true", help="grade the samples and the bench's submissions "
                        "again and rewrite tests/golden/*.json")
    args = parser.parse_args(argv)
    if not args.update:
        parser.print_help()
        return 2
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        GOLDEN.mkdir(exist_ok=True)
        samples = grade(ROOT / "samples" / "submissions", work / "samples-out")
        (GOLDEN / "samples.json").write_text(dump(snapshot(samples)), encoding="utf-8")
        bench = grade(bench_submissions(work / "bench"), work / "bench-out")
        (GOLDEN / "bench.json").write_text(dump(snapshot(bench)), encoding="utf-8")
    print(f"wrote {GOLDEN / 'samples.json'} and {GOLDEN / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
