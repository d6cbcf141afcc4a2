"""The grading service under faults and attack (issue 47): nothing acknowledged is lost, honest students wait
at most about twice as long, nothing is left running.

For each database (SQLite, and PostgreSQL where its server is installed) it runs ``autograder serve
--workers W`` three times on a fresh database, each time with ``--clients`` honest clients handing in
``-n`` notebooks (one student's notebook at a time: upload, then wait for the verdict with long polls;
a refused or unanswered request is tried again, as ``submit()`` does):

* ``calm``: nothing else happens (for reference);
* ``faults``: on one seeded schedule (at random points of the run's progress, one every 20 to 36
  honest verdicts), a worker is killed with ``kill -9``, the web process is killed with ``kill -9`` and
  started again on the same database and port, and, on PostgreSQL, the database server is restarted;
* ``faults+attack``: the same schedule, while five hostile students each send a 32 MiB notebook of
  tiny values as often as they are let, one student floods uploads of slow notebooks (each sleeps 8
  s), a stranger sends 100 MiB bodies without a token, and another holds 500 half-sent requests
  (reopening each one the server cuts). The attackers run in a process of their own at nice 19: in a
  real attack they are other machines, so their own sending should not take the honest clients' CPU
  on this one; everything the service does with their requests counts.

It reports, per run: every upload acknowledged with a 202 has exactly one result (and its job is
done); the honest upload-to-verdict p50 and p95; the peak resident memory of the web process; the
attackers' answers; and whether any process the service started is still running afterwards. The
target is ``faults+attack`` p95 at most 2x ``faults`` p95 (the same faults, no attackers)::

    python bench/bench_chaos.py -n 200 --clients 20 --workers 2
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import signal
import socket
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

from processes import alive, children, descendants  # noqa: E402 - (tests/processes.py, on the path above)

#: How long a waiting client's read waits at the service (a long poll, as submit() asks).
LONG_POLL = 20.0
MiB = 2**20


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mib(pid: int) -> float:
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Service:
    """``autograder serve`` that can be killed and started again on the same port and database; it remembers
    every process it ever started (for the orphan check) and the web process's peak memory."""

    def __init__(self, database: str, workers: int, env: dict[str, str], log: Path):
        self.database, self.workers, self.env, self.log = database, workers, env, log
        self.base = [sys.executable, "-m", "autograder", "serve", "--database", database]
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: set[int] = set()
        self.peak_rss = 0.0
        self.restarts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.start()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*self.base, "--port", str(self.port), "--workers", str(self.workers)],
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.seen.add(self.proc.pid)

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            proc = self.proc
            if proc is None:
                continue
            self.peak_rss = max(self.peak_rss, _rss_mib(proc.pid))
            self.seen |= descendants(proc.pid)

    def wait_ready(self, timeout: float = 180) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/openapi.json", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        raise TimeoutError(f"the service did not answer in {timeout} s: {self.log}")

    def kill_worker(self, rng: random.Random) -> str:
        proc = self.proc
        workers = [p for p in children(proc.pid) if f"--parent {proc.pid}" in _cmdline(p)] if proc else []
        if not workers:
            return "no worker to kill"
        victim = rng.choice(sorted(workers))
        os.kill(victim, signal.SIGKILL)
        return f"kill -9 worker {victim}"

    def kill_web(self) -> str:
        with self._lock:
            proc = self.proc
            assert proc is not None
            self.seen |= descendants(proc.pid)
            proc.kill()
            proc.wait()
            self.restarts += 1
            self.start()
        return f"kill -9 web process {proc.pid}; started again"

    def tokens(self, students: list[str], work: Path) -> dict[str, str]:
        from bench_service import roster_tokens

        return roster_tokens(self.base, self.env, students, work / f"tokens-{self.port}")

    def close(self) -> set[int]:
        """SIGTERM, wait; the processes still running a minute later (none, if nothing is orphaned)."""
        self._stop.set()
        proc = self.proc
        if proc is not None:
            self.seen |= descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
        deadline = time.monotonic() + 150        # (a killed web process's workers finish their job, then stop)
        while alive(self.seen) and time.monotonic() < deadline:
            time.sleep(0.5)
        return alive(self.seen)


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def honest_upload(url: str, token: str, assignment: str, data: bytes, stop: threading.Event,
                  timeout: float = 900) -> tuple[int | None, float]:
    """Upload until acknowledged (retrying refusals and an unreachable service), then wait for the verdict:
    (submission id, seconds from the first try to the verdict); (None, ...) when it never came."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    start = time.monotonic()
    sub = None
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        while sub is None and time.monotonic() - start < timeout and not stop.is_set():
            try:
                made = client.post("/api/submissions", data={"assignment": assignment},
                                   files={"notebook": (f"{assignment}.ipynb", data, "application/json")})
            except httpx.TransportError:
                time.sleep(0.5)
                continue
            if made.status_code == 202:
                sub = made.json()["submission"]
            elif made.status_code in (429, 500, 502, 503):
                time.sleep(min(5.0, float(made.headers.get("Retry-After") or 0.5)))
            else:
                raise RuntimeError(f"upload refused: {made.status_code} {made.text[:300]}")
        while sub is not None and time.monotonic() - start < timeout:
            try:
                got = client.get(f"/api/submissions/{sub}", params={"wait": LONG_POLL})
            except httpx.TransportError:
                time.sleep(0.5)
                continue
            if got.status_code != 200:
                time.sleep(min(5.0, float(got.headers.get("Retry-After") or 0.5)))
                continue
            if got.json()["state"] in ("done", "failed"):
                return sub, time.monotonic() - start
    return sub, float("inf")


class AttackProcess:
    """The attackers in a process of their own at the lowest CPU priority (nice 19): in a real attack they are
    other machines, so their own work (building and sending 32 MiB bodies, opening connections) takes this
    machine's idle time, not the honest clients' or the service's; what the service does with their requests
    is counted in full."""

    def __init__(self, service: Service, tokens: dict[str, str], slow: bytes, assignment: str, work: Path):
        self.spec = work / f"attack-{service.port}.json"
        (work / f"slow-{service.port}.ipynb").write_bytes(slow)
        self.spec.write_text(json.dumps({"url": service.url, "port": service.port, "tokens": tokens,
                                         "assignment": assignment, "slow": str(work / f"slow-{service.port}.ipynb"),
                                         "answers": str(work / f"answers-{service.port}.json")}))
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--attack", str(self.spec)],
                                     preexec_fn=lambda: os.nice(19))
        self.answers: dict[str, dict[str, int]] = {}

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)
        answers = Path(json.loads(self.spec.read_text())["answers"])
        self.answers = json.loads(answers.read_text()) if answers.exists() else {"attackers": {"lost": 1}}


def attack(spec_path: Path) -> int:
    """The attack process (``--attack SPEC``): the attackers until SIGTERM, then their answers to a file."""
    spec = json.loads(spec_path.read_text())
    target = type("Target", (), {"url": spec["url"], "port": spec["port"]})()
    attackers = Attackers(target, spec["tokens"], Path(spec["slow"]).read_bytes(), _bomb(32), spec["assignment"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    attackers.start()
    while not stop.wait(0.5):
        pass
    attackers.close()
    Path(spec["answers"]).write_text(json.dumps({k: dict(v) for k, v in attackers.answers.items()}))
    return 0


class Attackers:
    """The hostile clients of the attack run, each a thread counting its answers."""

    def __init__(self, service: Any, tokens: dict[str, str], slow: bytes, bomb: bytes, assignment: str):
        self.service, self.tokens, self.slow, self.bomb, self.assignment = service, tokens, slow, bomb, assignment
        self.answers: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._bombs, args=(f"bomb{i}",), daemon=True) for i in range(5)]
        self.threads += [threading.Thread(target=self._flood, daemon=True),
                         threading.Thread(target=self._stranger, daemon=True),
                         threading.Thread(target=self._slow_connections, daemon=True)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)

    def _post(self, kind: str, token: str | None, data: bytes) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            got = httpx.post(f"{self.service.url}/api/submissions", headers=headers, timeout=60,
                             data={"assignment": self.assignment},
                             files={"notebook": ("x.ipynb", data, "application/json")})
            self.answers[kind][str(got.status_code)] += 1
        except httpx.HTTPError as exc:
            self.answers[kind][type(exc).__name__] += 1
            self.stop.wait(0.5)

    def _bombs(self, who: str) -> None:
        while not self.stop.is_set():
            self._post("bomb", self.tokens[who], self.bomb)
            self.stop.wait(0.2)

    def _flood(self) -> None:
        while not self.stop.is_set():
            self._post("flood", self.tokens["flood"], self.slow)
            self.stop.wait(0.05)

    def _stranger(self) -> None:
        import httpx

        def body():
            block = b"x" * (256 * 1024)
            for _ in range(400):            # 100 MiB
                yield block

        while not self.stop.is_set():
            try:
                got = httpx.post(f"{self.service.url}/api/submissions", content=body(), timeout=60)
                self.answers["stranger"][str(got.status_code)] += 1
            except httpx.HTTPError as exc:
                self.answers["stranger"][type(exc).__name__] += 1
            self.stop.wait(0.2)

    def _slow_connections(self, count: int = 500) -> None:
        held: list[socket.socket] = []
        opened = 0
        while not self.stop.is_set():
            alive = []
            for s in held:
                try:
                    s.setblocking(False)
                    if s.recv(1, socket.MSG_PEEK) == b"":
                        s.close()                # cut by the server
                        continue
                except BlockingIOError:
                    pass                         # still open, nothing said
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            held = alive
            while len(held) < count and not self.stop.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", self.service.port), timeout=5)
                    s.sendall(b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Le")
                    held.append(s)
                    opened += 1
                except OSError:
                    self.stop.wait(0.2)
                    break
            self.answers["slow connections"]["opened"] = opened
            self.stop.wait(0.5)
        for s in held:
            s.close()


def faults_schedule(seed: int, postgres: bool, n: int) -> list[tuple[int, str]]:
    """(honest verdicts so far, fault): at seeded random points of the run's progress, one per 20 to 36 verdicts,
    cycling through the kinds. By progress, not by the clock: a run slowed by attackers meets the very faults of
    the run without them, at the same points, not more of them for taking longer."""
    rng = random.Random(seed)
    kinds = ["worker", "web"] + (["database"] if postgres else [])
    at, out = 0, []
    while True:
        at += rng.randint(20, 36)
        if at >= n - 10:
            return out
        out.append((at, kinds[len(out) % len(kinds)]))


def _inject(service: Service, rng: random.Random, faults: list[tuple[int, str]], restart_db: Any,
            latencies: list[float], finished: threading.Event, log: list[str]) -> None:
    """The faults' thread: each fault once ``at`` verdicts came back (until the run is finished), said in ``log``."""
    began = time.monotonic()
    for at, kind in faults:
        while len(latencies) < at:
            if finished.wait(0.05):
                return
        if kind == "worker":
            said = service.kill_worker(rng)
        elif kind == "web":
            said = service.kill_web()
        else:
            restart_db()
            said = "database restarted"
        log.append(f"{at} verdicts, {time.monotonic() - began:.1f} s: {said}")


def run_once(database: str, label: str, scenario: str, subs: list[tuple[str, str, bytes]], args: argparse.Namespace,
             work: Path, env: dict[str, str], restart_db: Any = None) -> dict[str, Any]:
    from sqlalchemy import select

    from autograder.service import db, tables

    slug = f"{label}-{scenario}".replace("+", "-")
    service = Service(database, args.workers, env, work / f"serve-{slug}.log")
    rng = random.Random(args.seed)
    attackers = None
    log: list[str] = []
    try:
        service.wait_ready()
        students = sorted({s for s, _, _ in subs} | {"warm-up", "flood"} | {f"bomb{i}" for i in range(5)})
        tokens = service.tokens(students, work)
        never = threading.Event()
        for _ in range(args.workers):
            honest_upload(service.url, tokens["warm-up"], subs[0][1], subs[0][2], never)
        if "attack" in scenario:
            import nbformat

            slow_nb = nbformat.reads(subs[0][2].decode(), as_version=4)
            slow_nb.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(8)"))
            attackers = AttackProcess(service, tokens, nbformat.writes(slow_nb).encode(), subs[0][1], work)
        latencies: list[float] = []
        acked: list[int] = []
        lock = threading.Lock()
        queue = list(subs)
        finished = threading.Event()

        def client() -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    student, assignment, data = queue.pop(0)
                sub, seconds = honest_upload(service.url, tokens[student], assignment, data, never)
                with lock:
                    if sub is not None:
                        acked.append(sub)
                    latencies.append(seconds)

        start = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        faults = faults_schedule(args.seed, restart_db is not None, len(subs))
        injector = threading.Thread(target=_inject, args=(service, rng, faults, restart_db, latencies, finished, log),
                                    daemon=True) if "faults" in scenario else None
        for t in threads:
            t.start()
        if injector:
            injector.start()
        for t in threads:
            t.join()
        finished.set()
        wall = time.monotonic() - start
        if injector:
            injector.join(timeout=300)
        if attackers:
            attackers.close()
    finally:
        left = service.close()
    engine = db.engine_for(database)
    with engine.connect() as conn:
        results = set(conn.execute(select(tables.Result.submission_id)).scalars())
        last_jobs = dict(conn.execute(select(tables.Job.submission_id, tables.Job.state).order_by(tables.Job.id)).all())
    engine.dispose()
    missing = [s for s in acked if s not in results]
    not_done = [s for s in acked if last_jobs.get(s) != "done"]
    finite = [x for x in latencies if x != float("inf")]
    return {"database": label, "scenario": scenario, "honest": len(subs), "acked": len(acked),
            "verdicts": len(finite), "missing_results": missing, "not_done": not_done,
            "p50": _percentile(finite, 0.5), "p95": _percentile(finite, 0.95),
            "max": max(finite) if finite else float("nan"), "wall": wall,
            "web_peak_rss_mib": service.peak_rss, "web_restarts": service.restarts, "faults": log,
            "attackers": attackers.answers if attackers else {},
            "processes_started": len(service.seen), "orphans": sorted(left)}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _bomb(megabytes: int) -> bytes:
    values = b",".join([b"[]"] * (megabytes * MiB // 3))
    return (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
            b'"metadata": {}, "source": "", "execution_count": 1, "outputs": [' + values + b"]}]}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--attack"]:
        return attack(Path(argv[1]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200, help="honest notebooks (default 200)")
    parser.add_argument("--clients", type=int, default=20, help="honest clients (default 20)")
    parser.add_argument("--workers", type=int, default=2, help="service workers (default 2)")
    parser.add_argument("--seed", type=int, default=47, help="the faults' schedule (default 47)")
    parser.add_argument("--scenarios", default="calm,faults,faults+attack",
                        help="which runs, comma-separated (default calm,faults,faults+attack)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep the databases and the services' logs in DIR (default: a temporary folder)")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "chaos.md")
    args = parser.parse_args(argv)
    from bench_peers import generate

    from autograder.course.config import load_course

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)       # 500 held connections and the clients'
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    course = load_course(ROOT)
    env = dict(os.environ, AUTOGRADER_COURSE=str(ROOT / "course.yml"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp:
        work = Path(tmp)
        if args.keep:
            work = args.keep
            work.mkdir(parents=True, exist_ok=True)
        made = generate(work / "subs", args.n, course)
        subs = [(s.student, s.assignment, (work / "subs" / s.rel).read_bytes()) for s in made]
        for scenario in scenarios:
            runs.append(run_once(str(work / f"{scenario.replace('+', '-')}.db"), "SQLite", scenario, subs, args, work,
                                 env))
            print(json.dumps(runs[-1]), flush=True)
        if not args.no_postgres:
            import postgres

            if postgres.binaries() is not None:
                with postgres.server() as url:
                    for i, scenario in enumerate(scenarios):
                        fresh = postgres.fresh_database(str(url), f"chaos{i}")
                        runs.append(run_once(fresh, "PostgreSQL", scenario, subs, args, work, env,
                                             restart_db=url.restart))
                        print(json.dumps(runs[-1]), flush=True)
    text = report(runs, args)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    lost = [r for r in runs if r["missing_results"] or r["not_done"] or r["orphans"] or r["verdicts"] < r["honest"]]
    return 1 if lost else 0


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = ["# The grading service under faults and attack", "",
             f"`python bench/bench_chaos.py -n {args.n} --clients {args.clients} --workers {args.workers} "
             f"--seed {args.seed}`, one run on {os.cpu_count()} CPUs. Honest clients: {args.clients}, "
             f"{args.n} notebooks; faults at seeded points of the run's progress, one every 20 to 36 verdicts (kill -9 "
             "a worker, kill -9 the web process and start "
             "it again, restart PostgreSQL); attackers: five students sending a 32 MiB notebook of tiny values, "
             "one flooding slow notebooks, a stranger sending 100 MiB bodies without a token, 500 half-sent "
             "requests held open.", "",
             "| database | run | acknowledged / honest | with one result | p50 | p95 | max | p95 vs faults | web peak "
             "RSS | web restarts | orphans |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["database"], r["scenario"]): r for r in runs}
    for r in runs:
        base = by.get((r["database"], "faults"))
        ratio = f"{r['p95'] / base['p95']:.2f}x" if base and r["scenario"] != "faults" and base["p95"] else ""
        lines.append(f"| {r['database']} | {r['scenario']} | {r['acked']} / {r['honest']} | "
                     f"{r['acked'] - len(r['missing_results'])} | {r['p50']:.2f} s | {r['p95']:.2f} s | "
                     f"{r['max']:.1f} s | {ratio} | "
                     f"{r['web_peak_rss_mib']:.0f} MiB | {r['web_restarts']} | {len(r['orphans'])} of "
                     f"{r['processes_started']} |")
    for r in runs:
        if r["attackers"]:
            answers = "; ".join(f"{k}: " + ", ".join(f"{code} x{n}" for code, n in sorted(v.items()))
                                for k, v in r["attackers"].items())
            lines += ["", f"Attackers' answers ({r['database']}, {r['scenario']}): {answers}"]
        if r["faults"]:
            lines += ["", f"Faults ({r['database']}, {r['scenario']}): " + "; ".join(s.strip() for s in r["faults"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
