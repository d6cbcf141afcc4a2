"""The grading service against ``autograder grade -j 2`` on the same notebooks, in one run (issue 28).

For each database (SQLite, and PostgreSQL where its server is installed) it starts ``autograder
serve --workers W`` on a port of its own, waits until a first upload's verdict arrives (a warm
service), then measures:

* a lone submission's upload-to-verdict latency (median of ``--lone`` uploads, one at a time);
* ``--clients`` concurrent clients submitting ``-n`` notebooks in all (each uploads, then waits for
  its verdict with long polls, as ``submit()`` does): upload-to-verdict p50 and p95, the throughput,
  and the peak PSS of the service's process tree;

and checks that every submission has exactly one result row. ``autograder grade -j W`` grades the
same notebooks as the baseline; the ratios are taken within the run. Results go to
``bench/service.md`` (``--out``)::

    python bench/bench_service.py -n 200 --clients 20
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pss(pid: int) -> float:
    from bench_peers import _tree_pss

    return _tree_pss(pid) or 0.0


class Service:
    """``autograder serve`` in a process group of its own, with a token per student."""

    def __init__(self, database: str, workers: int, env: dict[str, str], log: Path):
        self.database, self.env = database, env
        base = [sys.executable, "-m", "autograder", "serve", "--database", database]
        self.base = base
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([*base, "--port", str(self.port), "--workers", str(workers)], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.peak = 0.0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            self.peak = max(self.peak, _pss(self.proc.pid))

    def tokens(self, students: list[str], work: Path) -> dict[str, str]:
        return roster_tokens(self.base, self.env, students, work / f"tokens-{self.port}")

    def close(self) -> None:
        self._stop.set()
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=300)


def roster_tokens(serve: list[str], env: dict[str, str], students: list[str], folder: Path) -> dict[str, str]:
    """One token per student, through ``autograder serve ... roster`` (one process for all): student -> token."""
    import csv

    folder.mkdir(parents=True, exist_ok=True)
    roster, out = folder / "roster.csv", folder / "tokens.csv"
    roster.write_text("student\n" + "".join(f"{s}\n" for s in students), encoding="utf-8")
    subprocess.run([*serve, "roster", str(roster), "-o", str(out)], env=env, capture_output=True, check=True,
                   timeout=300)
    with open(out, encoding="utf-8", newline="") as f:
        return {row["student"]: row["token"] for row in csv.DictReader(f)}


def submit_and_wait(url: str, token: str, assignment: str, data: bytes, timeout: float = 600) -> float:
    """Upload, then poll until the verdict: the seconds from the upload's start to the verdict."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    start = time.monotonic()
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        while True:
            made = client.post("/api/submissions", data={"assignment": assignment},
                               files={"notebook": (f"{assignment}.ipynb", data, "application/json")})
            if made.status_code in (429, 503):
                time.sleep(float(made.headers.get("Retry-After") or 1))
                continue
            made.raise_for_status()
            break
        sub = made.json()["submission"]
        while time.monotonic() - start < timeout:
            got = client.get(f"/api/submissions/{sub}", params={"wait": LONG_POLL})
            if got.status_code == 429:
                time.sleep(float(got.headers.get("Retry-After") or 1))
                continue
            got.raise_for_status()
            if got.json()["state"] in ("done", "failed"):
                return time.monotonic() - start
    raise TimeoutError(f"submission {sub} not graded in {timeout} s")


#: How long a waiting client's read waits at the service for the verdict (a long poll, as submit() asks).
LONG_POLL = 20.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_service(database: str, label: str, subs: list[tuple[str, str, bytes]], args: argparse.Namespace,
                work: Path, env: dict[str, str]) -> dict[str, Any]:
    from sqlalchemy import func, select

    from autograder.service import db, tables

    service = Service(database, args.workers, env, work / f"serve-{label}.log")
    try:
        deadline = time.monotonic() + 180
        import httpx

        while time.monotonic() < deadline:
            try:
                httpx.get(f"{service.url}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        students = sorted({s for s, _, _ in subs} | {"warm-up"})
        tokens = service.tokens(students, work)
        warm = tokens["warm-up"]
        for _ in range(args.workers):          # every worker warm: one grade each
            submit_and_wait(service.url, warm, subs[0][1], subs[0][2])
        lone = [submit_and_wait(service.url, warm, subs[0][1], subs[0][2]) for _ in range(args.lone)]
        latencies: list[float] = []
        lock = threading.Lock()
        queue = list(subs)

        def client(_i: int) -> None:
            # Each client hands in one student's notebook at a time, with that student's token.
            while True:
                with lock:
                    if not queue:
                        return
                    student, assignment, data = queue.pop(0)
                seconds = submit_and_wait(service.url, tokens[student], assignment, data)
                with lock:
                    latencies.append(seconds)

        start = time.monotonic()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        engine = db.engine_for(database)
        with engine.connect() as conn:
            submitted = conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one()
            results = conn.execute(select(func.count()).select_from(tables.Result)).scalar_one()
        engine.dispose()
    finally:
        service.close()
    return {"database": label, "lone_median": statistics.median(lone), "p50": percentile(latencies, 0.5),
            "p95": percentile(latencies, 0.95), "wall": wall, "per_second": len(subs) / wall,
            "peak_pss_mib": service.peak, "submitted": submitted, "results": results,
            "expected": len(subs) + args.workers + args.lone}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200, help="notebooks the concurrent clients submit (default 200)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (default 20)")
    parser.add_argument("--workers", type=int, default=2, help="service workers, and grade -j (default 2)")
    parser.add_argument("--lone", type=int, default=5, help="lone uploads timed one at a time (default 5)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "service.md")
    args = parser.parse_args(argv)
    from bench_peers import generate

    from autograder.course.config import load_course

    course = load_course(ROOT)
    env = dict(os.environ, AUTOGRADER_COURSE=str(ROOT / "course.yml"))
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        work = Path(tmp)
        made = generate(work / "subs", args.n, course)
        subs = [(s.student, s.assignment, (work / "subs" / s.rel).read_bytes()) for s in made]
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(work / "subs"), "-o", str(work / "out"),
                               "-j", str(args.workers), "--force"], env=env, capture_output=True, text=True)
        grade_wall = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
        runs = [run_service(str(work / "service.db"), "SQLite", subs, args, work, env)]
        if not args.no_postgres:
            import postgres

            if postgres.binaries() is not None:
                with postgres.server() as url:
                    runs.append(run_service(str(url), "PostgreSQL", subs, args, work, env))
    grade_rate = args.n / grade_wall
    lines = [f"# The grading service against `autograder grade -j {args.workers}`", "",
             f"`python bench/bench_service.py -n {args.n} --clients {args.clients} --workers {args.workers}`, one "
             f"run on {os.cpu_count()} CPUs. `autograder grade -j {args.workers}` on the same {args.n} notebooks: "
             f"{grade_wall:.1f} s, {grade_rate:.2f} notebooks/s (the whole command, start-up included).", "",
             "| database | lone upload to verdict (median) | p50 | p95 | throughput | vs grade -j | peak PSS | "
             "results / submissions |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['database']} | {r['lone_median']:.2f} s | {r['p50']:.2f} s | {r['p95']:.2f} s | "
                     f"{r['per_second']:.2f}/s | {r['per_second'] / grade_rate:.2f}x | {r['peak_pss_mib']:.0f} MiB | "
                     f"{r['results']} / {r['submitted']} (expected {r['expected']}) |")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(json.dumps(runs, indent=1))
    bad = [r for r in runs if not (r["results"] == r["submitted"] == r["expected"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
