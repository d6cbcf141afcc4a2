"""LTI 1.3 against the simulated LMS of the tests (``tests/lti_platform.py``), in one run (issue 52).

The service (this course, a SQLite file) and the simulated platform each run on a uvicorn server of this process,
the platform registered as ``serve lti register --enrol`` registers one. Two things are measured:

* **launch to page**: a browser launched from the LMS, ``--launches`` times (each a student of its own, the first
  launch, which adds them to the roster; then each again): the login initiation, the platform's signed answer,
  the ``id_token`` POSTed to ``/lti/launch``, the redirect followed until the signed-in page is served. The median
  and p95 of the POST-to-page time, of the tool's part (that and the login initiation) and of the whole flow,
  against one plain request of the same page by a browser already signed in (the baseline, timed in the same run);
* **the passback of ``--changes`` changed scores**: ``--students`` LMS members (pulled in through Names and Role
  Provisioning), their scores changed ``--changes`` times in all through the real queue and score history (graded,
  then regraded, alternating between two assignments, every value differing from the one before), then drained by
  ``outbox.sync`` with a fresh tool (no cached token, no line item known yet). Counted: the requests the tool made
  (token requests, line-item GETs and POSTs, score POSTs), the seconds, and from the platform's own record the
  scores received against the history's changes: none lost, none duplicated, each student's in the order they
  happened. The baseline is the same number of bare score POSTs to the platform (one token, no outbox).

The exit status is 1 when a score was lost, duplicated or out of order, or a launch did not reach its page::

    python bench/bench_lti.py -o bench/lti.md
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

FORM = {"Content-Type": "application/vnd.ims.lis.v1.score+json"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds."""
    return statistics.median(values) * 1000, percentile(values, 0.95) * 1000


# -- launch to page ----------------------------------------------------------------------------------------------
def timed_launch(url: str, lms: Any, platform: Any, sub: str, student: str) -> tuple[dict[str, float], Any]:
    """One launch of ``student`` (LMS user ``sub``) in a browser of its own: its times in seconds (``login``: the
    tool's login initiation; ``platform``: the platform's signed answer; ``post``: the POST to ``/lti/launch`` until
    the signed-in page is served; ``tool``: login + post; ``whole``), and the signed-in browser."""
    import httpx

    from lti_platform import LEARNER

    hint = lms.prepare(lms.claims(sub, [LEARNER], sourcedid=student, name=f"Student {student}"))
    browser = httpx.Client(base_url=url, timeout=30, follow_redirects=False)
    start = time.perf_counter()
    started = browser.get("/lti/login", params={"iss": lms.issuer, "login_hint": hint, "client_id": lms.client_id,
                                                "target_link_uri": f"{lms.tool_url}/lti/launch",
                                                "lti_deployment_id": lms.deployment})
    if started.status_code != 302:
        raise SystemExit(f"login initiation: {started.status_code} {started.text[:500]}")
    redirected = time.perf_counter()
    answer = platform.get(started.headers["location"]).json()            # the platform signs the launch
    posted = time.perf_counter()
    launched = browser.post("/lti/launch", data={"id_token": answer["id_token"], "state": answer["state"]})
    if launched.status_code != 303:
        raise SystemExit(f"launch: {launched.status_code} {launched.text[:500]}")
    page = browser.get(launched.headers["location"])
    end = time.perf_counter()
    if page.status_code != 200 or student not in page.text:
        raise SystemExit(f"the signed-in page: {page.status_code} {page.text[:500]}")
    times = {"login": redirected - start, "platform": posted - redirected, "post": end - posted,
             "whole": end - start}
    times["tool"] = times["login"] + times["post"]
    return times, browser


def measure_launches(url: str, lms: Any, n: int) -> dict[str, Any]:
    """``n`` first launches, ``n`` launches again of the same students, ``n`` plain requests of the page."""
    import httpx

    with httpx.Client(timeout=30) as platform:
        _, warm = timed_launch(url, lms, platform, "lms-warm", "warm-up")       # the platform's JWKS fetched once
        warm.close()
        first: list[dict[str, float]] = []
        again: list[dict[str, float]] = []
        browsers = []
        for i in range(n):
            times, browser = timed_launch(url, lms, platform, f"lms-l{i:04d}", f"l{i:04d}")
            first.append(times)
            browser.close()
        for i in range(n):
            times, browser = timed_launch(url, lms, platform, f"lms-l{i:04d}", f"l{i:04d}")
            again.append(times)
            browsers.append(browser)
    plain: list[float] = []
    for i, browser in enumerate(browsers):                                   # the page, by a browser signed in
        start = time.perf_counter()
        page = browser.get("/me")
        plain.append(time.perf_counter() - start)
        if page.status_code != 200 or f"l{i:04d}" not in page.text:
            raise SystemExit(f"the plain page: {page.status_code}")
        browser.close()
    return {"first": {k: [t[k] for t in first] for k in first[0]},
            "again": {k: [t[k] for t in again] for k in again[0]}, "plain": plain}


# -- the passback ------------------------------------------------------------------------------------------------
def changes_noted(engine: Any, course: Any, students: list[str], total: int) -> int:
    """``total`` changes of counted scores, round by round over the students (each student's changes spread over
    the history), through the queue and the score history: each student's first change of an assignment a graded
    submission, the next ones regrades of it; two assignments taken in turn, each value one point from the cell's
    last. How many changes the history recorded."""
    from autograder.service import history, tables
    from autograder.service import queue as Q

    assignments = course.assignments[:2]
    later = tables.utcnow() + dt.timedelta(days=1)
    subs: dict[tuple[str, str], int] = {}
    noted = 0
    for n in range(total):
        student = students[n % len(students)]
        turn = n // len(students)
        a = assignments[turn % len(assignments)]
        k = turn // len(assignments)                          # this cell's k-th change
        points = float((n % len(students) + k) % int(a.points))               # differs from this cell's last
        if (student, a.id) not in subs:
            subs[(student, a.id)], _job = Q.store(engine, student=student, assignment=a.id, filename="a.ipynb",
                                                   data=b"{}")
        else:
            Q.requeue(engine, [subs[(student, a.id)]])
        claimed = Q.claim(engine, "bench", 60, now=later)
        if claimed is None:
            raise SystemExit("the queue gave no job")
        Q.complete(engine, claimed.job, "bench", {"student": student, "assignment": a.id, "points": points,
                                                  "max_points": float(a.points), "status": "graded",
                                                  "exercises": []})
        noted += history.note(engine, course, [(student, a.id)], why="graded" if turn < 2 else "regrade",
                              who=history.WORKER)
    return noted


class Counting:
    """The tool's HTTP client, each request counted by what it asked the platform."""

    def __init__(self) -> None:
        import httpx

        self.counts: Counter[str] = Counter()
        self.http = httpx.Client(timeout=10, follow_redirects=False, event_hooks={"request": [self._count]})

    def _count(self, request: Any) -> None:
        path = request.url.path
        if path.endswith("/token"):
            kind = "token"
        elif path.endswith("/scores"):
            kind = "score POST"
        elif "/lineitems" in path:
            kind = f"line item {request.method}"
        else:
            kind = f"other {request.method}"
        self.counts[kind] += 1


def measure_passback(engine: Any, course: Any, lms: Any, students: int, total: int) -> dict[str, Any]:
    from sqlalchemy import func, select

    from autograder.service import lti_tables, tables
    from autograder.service.lti import nrps, outbox
    from autograder.service.lti.tool import Tool

    from lti_platform import LEARNER

    names = [f"p{i:04d}" for i in range(students)]
    lms.members = [{"user_id": f"lms-{s}", "name": f"Student {s}", "email": f"{s}@uni.example", "status": "Active",
                    "lis_person_sourcedid": s, "roles": [LEARNER]} for s in names]
    puller = Tool(engine, course.root)
    try:
        pulled = nrps.pull(puller, by="bench")
    finally:
        puller.close()
    if len(pulled.added) != students:
        raise SystemExit(f"the members' pull added {len(pulled.added)} of {students}")
    start = time.perf_counter()
    noted = changes_noted(engine, course, names, total)
    noting = time.perf_counter() - start
    with engine.connect() as conn:
        history = conn.execute(select(tables.ScoreChange.student, tables.ScoreChange.assignment,
                                      tables.ScoreChange.new_points)
                               .where(tables.ScoreChange.student.in_(names)).order_by(tables.ScoreChange.id)).all()
    tokens_before, received_before = lms.token_requests, len(lms.scores)
    counting = Counting()
    tool = Tool(engine, course.root, http=counting.http)
    rounds, sent, same, failed = 0, 0, 0, 0
    try:
        start = time.perf_counter()
        while True:
            done = outbox.sync(tool, course)
            rounds += 1
            sent, same, failed = sent + done.sent, same + done.same, failed + done.failed
            if done.failed:
                raise SystemExit(f"the passback failed: {done.errors[:3]}")
            if not done.sent and not done.same:
                break
        seconds = time.perf_counter() - start
    finally:
        tool.close()
    with engine.connect() as conn:
        pending = conn.execute(select(func.count()).select_from(lti_tables.LtiScore)
                               .where(lti_tables.LtiScore.state == "pending")).scalar_one()
    items = {i["id"]: i["resourceId"] for i in lms.line_items}
    received = lms.scores[received_before:]
    expected: dict[tuple[str, str], list[float]] = {}
    for row in history:
        expected.setdefault((f"lms-{row.student}", row.assignment), []).append(float(row.new_points))
    got: dict[tuple[str, str], list[float]] = {}
    stamps: dict[tuple[str, str], list[str]] = {}
    for item, body in received:
        cell = (body["userId"], items[item])
        got.setdefault(cell, []).append(float(body["scoreGiven"]))
        stamps.setdefault(cell, []).append(body["timestamp"])
    lost = sum(max(0, len(v) - len(got.get(c, []))) for c, v in expected.items())
    extra = sum(max(0, len(v) - len(expected.get(c, []))) for c, v in got.items())
    duplicated = sum(n - 1 for n in Counter((c, t) for c, ts in stamps.items() for t in ts).values() if n > 1)
    in_order = sum(got.get(c) == v for c, v in expected.items())
    stamps_sorted = all(ts == sorted(ts) for ts in stamps.values())
    per_user = Counter(body["userId"] for _, body in received)
    return {"students": students, "changes": total, "noted": noted, "noting_s": noting, "seconds": seconds,
            "rounds": rounds, "sent": sent, "same": same, "failed": failed, "pending_after": pending,
            "requests": dict(counting.counts), "requests_total": sum(counting.counts.values()),
            "platform_token_requests": lms.token_requests - tokens_before, "received": len(received),
            "expected": len(history), "lost": lost, "extra": extra, "duplicated": duplicated,
            "cells": len(expected), "cells_in_order": in_order, "timestamps_in_order": stamps_sorted,
            "users": len(per_user), "line_items": len(lms.line_items)}


def bare_posts(total: int) -> float:
    """Seconds for ``total`` score POSTs to a simulated platform of its own, one client and one token, no outbox."""
    import secrets

    import httpx

    from lti_platform import SCOPES, lms_serving

    with lms_serving() as lms:
        access = secrets.token_urlsafe(16)
        lms.tokens[access] = list(SCOPES)
        with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {access}"}) as client:
            made = client.post(f"{lms.url}/{lms.context}/lineitems", json={"label": "bare", "scoreMaximum": 10,
                                                                           "resourceId": "bare"})
            made.raise_for_status()
            item = made.json()["id"]
            client.headers.update(FORM)
            start = time.perf_counter()
            for n in range(total):
                stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
                answer = client.post(f"{item}/scores", json={
                    "userId": f"u{n % 200}", "scoreGiven": float(n % 10), "scoreMaximum": 10.0, "timestamp": stamp,
                    "activityProgress": "Completed", "gradingProgress": "FullyGraded"})
                answer.raise_for_status()
            seconds = time.perf_counter() - start
        if len(lms.scores) != total:
            raise SystemExit(f"bare POSTs: {len(lms.scores)} of {total} recorded")
    return seconds


# -- the run -------------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    from autograder.course.config import load_course

    from lti_platform import tool_with_lms

    course = load_course(ROOT)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-lti-") as tmp, \
            tool_with_lms(Path(tmp) / "service.db", course, "bench") as (url, lms, engine, _app):
        launches = measure_launches(url, lms, args.launches)
        passback = measure_passback(engine, course, lms, args.students, args.changes)
    passback["bare_seconds"] = bare_posts(args.changes)
    return {"launches": launches, "passback": passback, "load": load}


def table(args: argparse.Namespace, result: dict[str, Any]) -> str:
    la, pb = result["launches"], result["passback"]
    plain_med, plain_p95 = ms(la["plain"])
    lines = ["# LTI 1.3 against the simulated LMS", "",
             f"`python bench/bench_lti.py --launches {args.launches} --students {args.students} --changes "
             f"{args.changes}`, one run on {os.cpu_count()} CPUs (load average {result['load']:.1f} at its start), "
             f"{dt.date.today().isoformat()}: the service (this course, SQLite) and the simulated platform of "
             "`tests/lti_platform.py` on uvicorn servers of one process, over 127.0.0.1.", "",
             "## Launch to page", "",
             f"{args.launches} students each launched from the LMS in a browser of their own: the first launch "
             "(which adds the student to the roster), then each again. *POST to page*: the `id_token` POSTed to "
             "`/lti/launch` until the signed-in page (`/me`, after the redirect) is served; *the tool's part*: that "
             "and the OIDC login initiation; *whole*: from the login initiation on, the platform's signed answer "
             f"included (median {ms(la['first']['platform'])[0]:.1f} ms and {ms(la['again']['platform'])[0]:.1f} ms: "
             "the simulated platform loads its key from PEM for each signature). The baseline: the same page "
             "requested by a browser already signed in.", "",
             "| what | median | p95 | median vs the plain page |", "|---|---|---|---|"]
    for when, name in (("first", "first launch"), ("again", "launch again")):
        for key, label in (("post", "POST to page"), ("tool", "the tool's part"), ("whole", "whole")):
            med, p95 = ms(la[when][key])
            lines.append(f"| {name}, {label} | {med:.1f} ms | {p95:.1f} ms | {med / plain_med:.1f}x |")
    lines.append(f"| the plain page, signed in (baseline) | {plain_med:.1f} ms | {plain_p95:.1f} ms | 1.0x |")
    req = pb["requests"]
    per = pb["seconds"] / max(1, pb["sent"]) * 1000
    bare_per = pb["bare_seconds"] / max(1, pb["changes"]) * 1000
    lines += ["", f"## The passback of {pb['changes']:,} changed scores", "",
              f"{pb['students']} LMS members (pulled in through Names and Role Provisioning), their counted scores "
              f"changed {pb['changes']:,} times through the queue and the score history ({pb['noted']:,} changes "
              f"recorded, in {pb['noting_s']:.1f} s), two assignments in turn; then `outbox.sync` until nothing "
              "was pending, by a tool with no token cached and no line item known. The baseline: as many bare "
              "score POSTs to a platform of their own (one client, one token, no outbox).", "",
              "| what | value |", "|---|---|",
              f"| seconds (sync rounds: {pb['rounds']}) | {pb['seconds']:.2f} s ({per:.2f} ms a score) |",
              f"| bare score POSTs (baseline) | {pb['bare_seconds']:.2f} s ({bare_per:.2f} ms a score); the "
              f"passback {pb['seconds'] / pb['bare_seconds']:.2f}x |",
              f"| requests to the platform | {pb['requests_total']:,}: {req.get('token', 0)} token, "
              f"{req.get('line item GET', 0)} line-item GET, {req.get('line item POST', 0)} line-item POST, "
              f"{req.get('score POST', 0):,} score POST |",
              f"| token requests the platform counted | {pb['platform_token_requests']} |",
              f"| scores received / expected (the history's changes) | {pb['received']:,} / {pb['expected']:,} |",
              f"| lost / duplicated / beyond the history | {pb['lost']} / {pb['duplicated']} / {pb['extra']} |",
              f"| cells (student x line item) received in the order of the changes | {pb['cells_in_order']} / "
              f"{pb['cells']} (timestamps in order: {'yes' if pb['timestamps_in_order'] else 'NO'}) |",
              f"| line items on the platform | {pb['line_items']} |",
              f"| outbox rows still pending | {pb['pending_after']} |"]
    return "\n".join(lines) + "\n"


def healthy(result: dict[str, Any]) -> bool:
    pb = result["passback"]
    return (pb["noted"] == pb["changes"] == pb["expected"] == pb["received"] == pb["sent"]
            and pb["lost"] == pb["duplicated"] == pb["extra"] == pb["failed"] == pb["pending_after"] == 0
            and pb["cells_in_order"] == pb["cells"] and pb["timestamps_in_order"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=50, help="students launched, each twice (default 50)")
    parser.add_argument("--students", type=int, default=200, help="LMS members whose scores change (default 200)")
    parser.add_argument("--changes", type=int, default=1000, help="score changes in all (default 1000)")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "lti.md")
    args = parser.parse_args(argv)
    result = run(args)
    text = table(args, result)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(json.dumps(result["passback"], indent=1))
    return 0 if healthy(result) else 1


if __name__ == "__main__":
    sys.exit(main())
