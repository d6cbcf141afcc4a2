"""Issue 28: the service's HTTP API, its tokens and `autograder serve`, on a real SQLite database.

Route by route with a student's token, another student's, an instructor's and none; every bad
request a bilingual 4xx with nothing stored; the roster's tokens stored only as digests; and the
whole service (`autograder serve` with a worker process) grading an upload over real HTTP.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sqlalchemy import func, select

from support import make_samples
from served import cli_student_token, free_port, serving, student_token
from autograder.core import messages as M
from autograder.course.config import load_course
from autograder.core.errors import AutograderError
from autograder.service import db, tables, tokens
from autograder.service.app import create_app

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")


@pytest.fixture
def service(tmp_path, request):
    """The app on a real uvicorn server (a thread of this process), and an HTTP client for it."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    people = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
              "teacher": tokens.issue(engine, "teacher", role="instructor")}
    options = getattr(request, "param", {})
    with serving(create_app(engine, COURSE, **options)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client, engine, people
    engine.dispose()


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def notebook() -> bytes:
    return json.dumps(make_samples.submission(QKV, solved="all")).encode()


def submit(client, token, data=None, assignment=QKV.id, name="mine.ipynb"):
    return client.post("/api/submissions", headers=auth(token), data={"assignment": assignment},
                       files={"notebook": (name, notebook() if data is None else data, "application/json")})


def stored(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one()


def test_the_openapi_schema_lists_every_route(service):
    client, _, _ = service
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/submissions", "/api/submissions/{submission_id}"} <= set(paths)


def test_every_route_authorizes_its_caller(service):
    client, engine, who = service
    made = submit(client, who["ada"])
    assert made.status_code == 202, made.text
    body = made.json()
    assert body["position"] == 0 and stored(engine) == 1
    sub = body["submission"]
    for token, status in ((None, 401), ("not-a-token", 401), (who["ben"], 404), (who["ada"], 200),
                          (who["teacher"], 200)):
        got = client.get(f"/api/submissions/{sub}", headers=auth(token))
        assert got.status_code == status, (token, got.text)
        if status != 200:
            error = got.json()["error"]
            assert error["zh"] and error["en"] and (token is None or token not in got.text)
    assert client.get(f"/api/submissions/{sub}", headers=auth(who["ada"])).json()["state"] == "queued"
    assert client.get(f"/api/submissions/{sub + 1}", headers=auth(who["ada"])).status_code == 404
    mine = client.get("/api/submissions", headers=auth(who["ben"])).json()["submissions"]
    everyone = client.get("/api/submissions", headers=auth(who["teacher"])).json()["submissions"]
    assert mine == [] and [s["student"] for s in everyone] == ["ada"]
    assert client.get("/api/submissions").status_code == 401
    assert submit(client, None).status_code == 401 and submit(client, "x" * 500).status_code == 401
    assert submit(client, who["teacher"]).status_code == 403
    assert stored(engine) == 1


@pytest.mark.slow
def test_bad_uploads_are_named_in_both_languages_and_nothing_is_stored(service):
    client, engine, who = service
    cases = [(submit(client, who["ada"], assignment="99_nothing"), 404, "99_nothing"),
             (submit(client, who["ada"], data=b'{"nbformat": 4, "cells": [], "x": "' + b"x" * int(
                 COURSE.limits.notebook_mb * 2**20) + b'"}'), 413, "MiB"),
             (submit(client, who["ada"], data=b"\x89PNG not json"), 415, "notebook"),
             (submit(client, who["ada"], data=b'{"cells": "no"}'), 415, "notebook"),
             (submit(client, who["ada"], data=b"[" * 100_000), 422, "limits.notebook_depth"),
             (client.post("/api/submissions", headers=auth(who["ada"]), data={"assignment": QKV.id}), 422,
              "notebook"),
             (client.post("/api/submissions", headers={**auth(who["ada"]), "Content-Type": "multipart/form-data; "
                          "boundary=zz"}, content=b"--zz\r\ngarbage"), 422, "")]
    for got, status, word in cases:
        assert got.status_code == status, got.text
        error = got.json()["error"]
        assert error["zh"] and error["en"] and word in error["en"]
    # A hostile file name is the student's text, never a path: the stored name is the service's own.
    assert submit(client, who["ada"], name="../../etc/passwd\x00.ipynb").status_code == 202
    with engine.connect() as conn:
        assert conn.execute(select(tables.Submission.filename)).scalars().all() == [f"{QKV.id}.ipynb"]


@pytest.mark.parametrize("service", [{"uploads_per_minute": 2, "requests_per_minute": 6}], indirect=True)
def test_too_many_requests_from_one_token_get_429_with_retry_after(service):
    client, engine, who = service
    assert [submit(client, who["ada"]).status_code for _ in range(3)] == [202, 202, 429]
    refused = submit(client, who["ada"])
    assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "请求太频繁" in refused.json()["error"]["zh"] and stored(engine) == 2
    assert submit(client, who["ben"]).status_code == 202              # one token's limit is not another's
    reads = [client.get("/api/submissions", headers=auth(who["ada"])).status_code for _ in range(3)]
    assert reads[-1] == 429                                          # ada's 6 requests a minute are spent


@pytest.mark.parametrize("service", [{"max_queued": 1}], indirect=True)
def test_a_full_queue_answers_503_and_takes_nothing(service):
    client, engine, who = service
    assert submit(client, who["ada"]).status_code == 202
    full = submit(client, who["ben"])
    assert full.status_code == 503 and full.headers["Retry-After"] == "30"
    assert "队列已满" in full.json()["error"]["zh"] and stored(engine) == 1


def test_the_roster_gives_one_token_per_student_and_keeps_only_digests(tmp_path):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\nada,Ada Lovelace\nben,Ben\n", encoding="utf-8")
    rows = tokens.import_roster(engine, roster)
    assert [(s, n) for s, n, _ in rows] == [("ada", "Ada Lovelace"), ("ben", "Ben")]
    assert tokens.caller(engine, rows[0][2]) == tokens.Caller("student", "ada")
    assert tokens.caller(engine, rows[0][2][:-1] + "x") is None
    engine.dispose()
    raw = (tmp_path / "service.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("service.db-*"))
    assert all(token.encode() not in raw for _, _, token in rows)
    roster.write_text("student\nada\nada\n", encoding="utf-8")
    with pytest.raises(AutograderError, match=r"roster\.csv, row 2: student 'ada' is already row 1"):
        tokens.import_roster(db.engine_for(str(tmp_path / "service.db")), roster)


@pytest.mark.slow
def test_autograder_serve_grades_an_upload_over_http(tmp_path):
    """The whole service: `autograder serve` with one worker process; an upload's verdict arrives."""
    database = str(tmp_path / "service.db")
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    base = [sys.executable, "-m", "autograder", "serve", "--database", database]
    student = cli_student_token(base, env, tmp_path, "ada")
    port = free_port()
    log = tmp_path / "serve.log"
    server = _start_serve(base, env, port, 1, log)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        made = httpx.post(f"{url}/api/submissions", headers=auth(student), data={"assignment": QKV.id},
                          files={"notebook": ("mine.ipynb", notebook(), "application/json")}, timeout=30)
        assert made.status_code == 202, made.text
        sent = time.monotonic()
        sub = made.json()["submission"]
        while time.monotonic() < deadline:
            got = httpx.get(f"{url}/api/submissions/{sub}", headers=auth(student), timeout=10).json()
            if got["state"] == "done":
                break
            time.sleep(0.1)
        print(f"upload to verdict: {time.monotonic() - sent:.2f} s")
        assert got["state"] == "done" and got["result"]["points"] == QKV.points, got
        hidden = [c for ex in got["result"]["exercises"] for c in ex["checks"] if c["audience"] == "hidden"]
        assert hidden and all("message" not in c for c in hidden)      # a student sees titles and pass/fail
        # The student's command: the verdict in the course's language; a wrong token said plainly.
        saved = tmp_path / QKV.notebook
        saved.write_bytes(notebook())
        mine = dict(env, AUTOGRADER_SERVER=url, AUTOGRADER_TOKEN=student)
        done = subprocess.run([sys.executable, "-m", "autograder", "submit", str(saved)], env=mine,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        most = QKV.points + QKV.manual_points          # 02's maximum, its written answer's points included
        assert f"评分完成：{QKV.points:g} / {most:g} 分" in done.stdout and "隐藏检查" in done.stdout
        assert student not in done.stdout + done.stderr
        wrong = subprocess.run([sys.executable, "-m", "autograder", "submit", str(saved)],
                               env=dict(mine, AUTOGRADER_TOKEN="wrong"), capture_output=True, text=True, timeout=300)
        assert wrong.returncode == 2 and "令牌无效" in wrong.stderr
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
    assert student not in log.read_text(errors="replace")              # no token in the service's output
    assert Path(database).exists()


def test_submit_says_where_the_settings_go_and_when_the_file_is_older_than_the_last_run(tmp_path, monkeypatch,
                                                                                        capsys):
    from autograder.selfcheck import submit as S

    monkeypatch.delenv(S.ENV_SERVER, raising=False)
    monkeypatch.delenv(S.ENV_TOKEN, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(S.SubmitError, match="AUTOGRADER_SERVER.*AUTOGRADER_TOKEN.*service.json"):
        S.settings("zh")
    (tmp_path / ".config" / "autograder").mkdir(parents=True)
    (tmp_path / ".config" / "autograder" / "service.json").write_text('{"server": "http://h:1/", "token": "t"}')
    assert S.settings("en") == ("http://h:1", "t")
    saved = tmp_path / QKV.notebook
    saved.write_bytes(notebook())
    os.utime(saved, (1_000_000, 1_000_000))                        # saved long before the last run
    monkeypatch.setattr(S, "_LAST_RUN", [time.time()])
    monkeypatch.setattr("autograder.selfcheck.kernel.notebook_name", lambda _ns: str(saved))
    monkeypatch.setenv(S.ENV_SERVER, f"http://127.0.0.1:{free_port()}")   # nobody listens there
    monkeypatch.setenv(S.ENV_TOKEN, "t")
    assert S.submit() is None
    out = capsys.readouterr()
    assert "比你最后一次运行单元格还旧" in out.out and "连不上评分服务" in out.out and out.err == ""


def _policy_course(**service):
    """The course with course.yml's service: section set (in memory)."""
    return COURSE.model_copy(update={"service": COURSE.service.model_copy(update=service)})


def test_attempts_are_enforced_in_the_transaction_that_stores(tmp_path):
    from autograder.service.intake import admission
    from autograder.service import queue as Q

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    course = _policy_course(attempts=2)

    def store(who, course=course):
        return Q.store(engine, student=who, assignment=QKV.id, filename="a.ipynb", data=b"{}",
                       admission=admission(course, 100))

    for _ in range(2):
        store("ada")
    with pytest.raises(Q.Refused) as info:
        store("ada")
    said = M.say(info.value.key, **info.value.params)
    assert info.value.status == 403 and "2 次" in said.zh and "at most 2" in said.en
    store("ben")                                                    # another student's count is their own
    with pytest.raises(Q.Refused) as info:
        store("ada", _policy_course(attempts_per_day=2, queued_per_student=None))
    assert info.value.status == 429 and 0 < info.value.retry_after <= 86_400
    assert stored(engine) == 3


def test_what_a_student_sees_is_course_policy_and_after_the_due_date_everything():
    from autograder.service.views import policy_view
    from autograder.service.tokens import Caller

    result = {"points": 5.0, "max_points": 8.0, "status": "graded", "timing": {"seconds": 1},
              "exercises": [{"exercise": "2.1", "points": 1, "max_points": 1, "status": "passed",
                             "checks": [{"check": "h", "audience": "hidden", "title": {"zh": "隐", "en": "h"},
                                         "passed": False, "message": {"zh": "输入 -2.06", "en": "input -2.06"}}]}]}
    ada, teacher = Caller("student", "ada"), Caller("instructor", "t")
    titles = policy_view(result, ada, _policy_course(before_due="titles"), QKV.id)
    assert titles["exercises"][0]["checks"][0] == {"check": "h", "audience": "hidden", "title": {"zh": "隐", "en": "h"},
                                                   "passed": False, "status": None, "points": None,
                                                   "max_points": None}
    assert policy_view(result, ada, _policy_course(before_due="score"), QKV.id)["exercises"] == []
    everything = policy_view(result, ada, _policy_course(before_due="everything"), QKV.id)
    assert "message" in everything["exercises"][0]["checks"][0] and "timing" not in everything
    assert policy_view(result, teacher, _policy_course(before_due="score"), QKV.id) is result
    # After the due date: everything feedback shows, whatever before_due says.
    past = COURSE.model_copy(update={"assignments": [a.model_copy(update={"due": "2020-01-01T00:00:00+00:00"})
                                                     if a.id == QKV.id else a for a in COURSE.assignments],
                                     "service": COURSE.service.model_copy(update={"before_due": "score"})})
    assert "message" in policy_view(result, ada, past, QKV.id)["exercises"][0]["checks"][0]
    # ... unless her own due date is later (an extension): until it, what before_due says.
    import datetime as dt

    later = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)
    assert policy_view(result, ada, past, QKV.id, due=later)["exercises"] == []


def test_the_export_counts_the_best_attempt_when_the_course_says_so(tmp_path):
    from autograder.service import queue as Q
    from autograder.service.export import counted

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    for points in (6.0, 8.0, 3.0):
        _, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
        claimed = Q.claim(engine, "w", 60)
        Q.complete(engine, claimed.job, "w", {"student": "ada", "assignment": QKV.id, "points": points,
                                             "max_points": 8.0, "status": "graded"})
    assert [r["points"] for r in counted(engine, "last")] == [3.0]
    assert [r["points"] for r in counted(engine, "best")] == [8.0]


def test_a_long_poll_answers_as_soon_as_the_verdict_is_recorded(service):
    """`?wait=S` holds the read until the job finishes (one query serves every waiting read), or S runs out;
    meanwhile the service answers other requests."""
    from concurrent.futures import ThreadPoolExecutor

    from autograder.service import queue as Q

    client, engine, who = service
    sub = submit(client, who["ada"]).json()["submission"]
    start = time.monotonic()
    timed_out = client.get(f"/api/submissions/{sub}", params={"wait": 1}, headers=auth(who["ada"]))
    assert timed_out.json()["state"] == "queued" and 0.9 <= time.monotonic() - start < 10
    with ThreadPoolExecutor(2) as pool:
        waiting = [pool.submit(client.get, f"/api/submissions/{sub}", params={"wait": 25},
                               headers=auth(token)) for token in (who["ada"], who["teacher"])]
        time.sleep(0.5)
        assert client.get("/api/submissions", headers=auth(who["ben"])).status_code == 200   # not blocked
        assert not any(w.done() for w in waiting)
        claimed = Q.claim(engine, "test-worker", 60)
        assert claimed is not None and claimed.submission == sub
        recorded = time.monotonic()
        Q.complete(engine, claimed.job, "test-worker", {"points": 1.0, "max_points": 2.0, "status": "graded",
                                                        "exercises": []})
        answers = [w.result(timeout=30) for w in waiting]
    assert time.monotonic() - recorded < 5          # woken by the recorded verdict, not by the 25 s running out
    assert [a.json()["state"] for a in answers] == ["done", "done"]
    assert answers[0].json()["result"]["points"] == 1.0 and "job" not in answers[0].json()
    too_long = client.get(f"/api/submissions/{sub}", params={"wait": 3600}, headers=auth(who["ada"]))
    assert too_long.status_code == 422 and "wait" in too_long.json()["error"]["en"]


def _start_serve(base: list[str], env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen:
    """`autograder serve` in a process group of its own, once it answers."""
    with open(log, "ab") as out:
        server = subprocess.Popen([*base, "--port", str(port), "--workers", str(workers)], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
            return server
        except httpx.TransportError:
            assert server.poll() is None, log.read_text(errors="replace")[-2000:]
            time.sleep(0.2)
    raise AssertionError("autograder serve did not answer in 120 s")


@pytest.mark.slow
def test_a_service_killed_between_the_202_and_the_grade_grades_the_upload_once_started_again(tmp_path):
    """kill -9 the whole service (web process and workers) right after the 202; started again on the same
    database, it grades the upload: a 202 is a promise."""
    database = str(tmp_path / "service.db")
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    base = [sys.executable, "-m", "autograder", "serve", "--database", database]
    student = cli_student_token(base, env, tmp_path, "ada")
    port, log = free_port(), tmp_path / "serve.log"
    server = _start_serve(base, env, port, 0, log)        # no workers: nothing can grade before the kill
    try:
        made = httpx.post(f"http://127.0.0.1:{port}/api/submissions", headers=auth(student),
                          data={"assignment": QKV.id}, files={"notebook": ("a.ipynb", notebook())}, timeout=30)
        assert made.status_code == 202, made.text
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=60)
    sub = made.json()["submission"]
    server = _start_serve(base, env, port, 1, log)
    try:
        got = {"state": "queued"}
        deadline = time.monotonic() + 180
        while got["state"] not in ("done", "failed") and time.monotonic() < deadline:
            got = httpx.get(f"http://127.0.0.1:{port}/api/submissions/{sub}", params={"wait": 20},
                            headers=auth(student), timeout=60).json()
        assert got["state"] == "done" and got["result"]["points"] == QKV.points, got
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
    engine = db.engine_for(database)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.Result)).scalar_one() == 1
    engine.dispose()


# -- issue 66, item 12: what a newcomer tripped on ----------------------------------------------------------------
@pytest.mark.parametrize("graded", [False, True], ids=["answers-waiting", "answers-graded"])
def test_the_listing_gives_each_submissions_state_and_score_in_pages(tmp_path, graded):
    """GET /api/submissions gave ids only. Each row now has its state and its score as the submission's own answer
    gives it (the late policy as it is now, the assignment's one maximum, the written answers that wait), a
    student's rows as the staff's, oldest first, in pages; the OpenAPI schema says so."""
    from maximum_class import FULL, served_class

    from autograder.service import queue as Q
    from autograder.service.repository import API_ROWS

    with served_class(tmp_path, graded) as (_app, url, engine, who, subs), \
            httpx.Client(base_url=url, timeout=30) as client:
        queued, _ = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
        staff = client.get("/api/submissions", headers=auth(who["prof"])).json()
        rows = {r["submission"]: r for r in staff["submissions"]}
        assert staff["next"] is None and list(rows) == sorted([subs["ada"], subs["ben"], queued])
        assert rows[queued]["state"] == "queued" and rows[queued]["score"] is None
        for student in ("ada", "ben"):
            row = rows[subs[student]]
            one = client.get(f"/api/submissions/{subs[student]}", headers=auth(who["prof"])).json()
            assert row["state"] == "done" and row["score"] == one["score"], (row, one["score"])
            assert row["score"]["points"] == one["result"]["points"] and row["score"]["max_points"] == FULL
            assert row["score"]["written_waiting"] is not graded
            assert (row["score"]["waiting_points"], row["score"]["waiting_questions"]) == \
                ((0.0, []) if graded else (2.0, ["2.Q1"]))
        assert rows[subs["ben"]]["score"]["points"] < rows[subs["ada"]]["score"]["points"]    # (ben was late)
        # A student: her own rows, as the staff see them.
        mine = client.get("/api/submissions", headers=auth(who["ada"])).json()
        assert mine == {"next": None, "submissions": [rows[subs["ada"]], rows[queued]]}
        # Pages: ?limit= rows, then on from the answer's next.
        first = client.get("/api/submissions", params={"limit": 2}, headers=auth(who["prof"])).json()
        assert first == {"next": subs["ben"], "submissions": [rows[subs["ada"]], rows[subs["ben"]]]}
        rest = client.get("/api/submissions", params={"limit": 2, "after": first["next"]},
                          headers=auth(who["prof"])).json()
        assert rest == {"next": None, "submissions": [rows[queued]]}
        for limit in (0, API_ROWS + 1):
            assert client.get("/api/submissions", params={"limit": limit},
                              headers=auth(who["prof"])).status_code == 422
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"submission", "state", "score"} <= set(schemas["SubmissionRow"]["properties"])
    assert {"points", "max_points", "written_waiting"} <= set(schemas["Score"]["properties"])


def test_a_broken_json_upload_names_its_line_and_column(service):
    """The service said only "this is not a Jupyter notebook" of a notebook cut short or edited by hand; the batch
    grader names where its JSON breaks, and so does the upload's refusal now, in both languages."""
    client, engine, who = service
    got = submit(client, who["ada"], data=b'{\n "nbformat": 4,\n "cells": [,]\n}')
    assert got.status_code == 415, got.text
    error = got.json()["error"]
    assert "第 3 行第 12 列" in error["zh"] and "line 3, column 12" in error["en"], error
    assert "Jupyter" in error["en"] and stored(engine) == 0


@pytest.mark.parametrize("graded", [False, True], ids=["answers-waiting", "answers-graded"])
def test_submits_verdict_says_the_written_answers_wait_for_a_ta(tmp_path, graded):
    """submit()'s verdict said "10 / 12" of a notebook whose written answer (2 points) waits for a TA: it reads as
    two points lost. It says what waits now (from the service's score; from the result's own written answers with
    a service that gives none)."""
    from maximum_class import FULL, QKV as QKV_02, served_class

    from autograder.selfcheck import submit as S

    said = {}
    with served_class(tmp_path, graded) as (_app, url, _engine, who, subs), \
            httpx.Client(base_url=url, headers=auth(who["ada"]), timeout=30) as client:
        for language in ("zh", "en"):
            lines: list[str] = []
            verdict = S._wait_for_verdict(client, subs["ada"], language, 30, lines.append)
            said[language] = lines[0]
    assert verdict is not None and verdict["state"] == "done"
    if graded:
        assert said == {"zh": f"评分完成：{FULL:g} / {FULL:g} 分", "en": f"graded: {FULL:g} / {FULL:g} points"}
        return
    points = QKV_02.points
    assert said["zh"] == f"评分完成：{points:g} / {FULL:g} 分；书面问题 2.Q1（2 分）等待助教批改，还没有计入"
    assert said["en"].startswith(f"graded: {points:g} / {FULL:g} points; the written answers 2.Q1 (2 points) "
                                 "wait for a TA"), said["en"]
    # A service without the score: the result's own written answers say the same.
    assert S.verdict_lines(verdict["result"], "en")[0] == said["en"]
