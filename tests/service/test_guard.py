"""Issue 47: the service under attack, each finding's reproducer (each failed on the main of 2026-12-05).

A hostile student and a stranger on the course's network: a notebook of millions of tiny values,
bodies sent before (or without) a token, a half-sent header or body, ids past any integer, uploads
sent at once past the attempt limit, SIGTERM and SIGKILL of ``autograder serve``. The app runs on
the server ``autograder serve`` runs (tests/served.py: the same protocol and bounds), over a real
SQLite database; the queue's own rules (fair share, attempts counted where the upload is stored,
private files) are in tests/service/test_queue.py on SQLite and PostgreSQL.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from typing import Annotated

import httpx
import pytest
from fastapi import FastAPI, Form
from sqlalchemy import func, select

from support import make_samples, wait_for_job
from processes import alive, descendants
from served import free_port, serving, student_token
from autograder.course.config import load_course
from autograder.core.errors import NotebookError
from autograder.course.notebook import Bounds, read_notebook, scan_notebook
from autograder.service import db, tables, tokens
from autograder.service.app import create_app

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
MiB = 2**20


@pytest.fixture
def service(tmp_path, request):
    """The app on the service's own server configuration (short header and body timeouts for the test)."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    people = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
              "teacher": tokens.issue(engine, "teacher", role="instructor")}
    options = dict(getattr(request, "param", {}))
    course = options.pop("course", COURSE)
    app = create_app(engine, course, body_idle_seconds=1.0, **options)
    with serving(app, header_seconds=1.0) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, engine, people, url
    engine.dispose()


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def honest() -> bytes:
    return json.dumps(make_samples.submission(QKV, solved="all")).encode()


def stored(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one()


def bomb(megabytes: int, where: str = "outputs") -> bytes:
    """A notebook of about ``megabytes`` MiB made of empty lists: in one cell's outputs, or as cells."""
    values = b",".join([b"[]"] * (megabytes * MiB // 3))
    if where == "cells":
        return b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [' + values + b"]}"
    return (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
            b'"metadata": {}, "source": "", "execution_count": 1, "outputs": [' + values + b"]}]}")


# -- 1. a bomb notebook: refused after a bounded look, in the web process and in the worker ---------------------
def test_a_notebook_of_millions_of_tiny_values_is_refused_naming_the_bound(service):
    client, engine, who, _ = service
    for where, setting in (("outputs", "limits.notebook_values"), ("cells", "limits.notebook_cells")):
        data = bomb(32, where)
        assert len(data) < COURSE.limits.notebook_mb * MiB
        got = client.post("/api/submissions", headers=auth(who["ada"]), data={"assignment": QKV.id},
                          files={"notebook": ("a.ipynb", data, "application/json")})
        assert got.status_code == 422, got.text
        error = got.json()["error"]
        assert setting in error["en"] and setting in error["zh"] and "笔记本没有收下" in error["zh"]
    assert stored(engine) == 0
    ok = client.post("/api/submissions", headers=auth(who["ada"]), data={"assignment": QKV.id},
                     files={"notebook": ("a.ipynb", honest(), "application/json")})
    assert ok.status_code == 202 and stored(engine) == 1


def test_a_bomb_upload_is_refused_before_most_of_it_is_read(service):
    """The notebook is looked at as it arrives: a 48 MiB bomb is refused once its first values pass the bound,
    and the client is stopped from sending the rest (only the sockets' buffers beyond it are ever taken)."""
    client, engine, who, url = service
    values = b",".join([b"[]"] * (48 * MiB // 3))
    head = (b'--zz\r\nContent-Disposition: form-data; name="assignment"\r\n\r\n' + QKV.id.encode() +
            b'\r\n--zz\r\nContent-Disposition: form-data; name="notebook"; filename="a.ipynb"\r\n'
            b'Content-Type: application/json\r\n\r\n{"nbformat": 4, "metadata": {}, "cells": [{"cell_type": "code", '
            b'"source": "", "metadata": {}, "outputs": [')

    class Bomb(Body):
        def __iter__(self):
            yield head
            for start in range(0, len(values), self.chunk):
                self.sent += self.chunk
                yield values[start:start + self.chunk]

    body = Bomb(0)
    got = httpx.post(url + "/api/submissions", headers={**auth(who["ada"]),
                                                        "Content-Type": "multipart/form-data; boundary=zz"},
                     content=body, timeout=60)
    assert got.status_code == 422 and "limits.notebook_values" in got.json()["error"]["en"]
    assert body.sent < 12 * MiB, body.sent
    assert stored(engine) == 0


def test_the_look_at_a_notebook_stops_at_its_bound_whatever_follows(monkeypatch):
    """The streaming look consumes at most ``values`` of the parser's events: its cost is the bound's, not the
    file's (a 64 MiB file of 20 million values costs what 200,000 do)."""
    import ijson

    consumed = []
    real = ijson.basic_parse_coro

    def counting(target, **kwargs):
        def forward():
            while True:
                event = yield
                consumed.append(len(consumed) + 1)
                target.send(event)

        relay = forward()
        next(relay)
        return real(relay, **kwargs)

    monkeypatch.setattr(ijson, "basic_parse_coro", counting)
    bounds = Bounds(max_bytes=64 * MiB, values=50_000)
    with pytest.raises(NotebookError) as refused:
        scan_notebook(bomb(40), bounds, "bomb.ipynb")
    # (an empty list is two events, its start and its end: at most twice the values, and the depth)
    assert "limits.notebook_values" in refused.value.message and max(consumed) <= 2 * 50_001 + 16
    consumed.clear()
    with pytest.raises(NotebookError, match="limits.notebook_depth"):
        scan_notebook(b"[" * (10 * MiB), bounds, "deep.ipynb")
    assert max(consumed) <= bounds.depth + 1
    # An honest notebook is well within every bound, and its shape is what the service needs.
    shape = scan_notebook(honest(), Bounds.of(COURSE.limits))
    assert shape.nbformat == 4 and shape.has_cells and shape.values < COURSE.limits.notebook_values / 20


def test_the_worker_reads_a_bomb_as_an_unreadable_notebook_naming_the_bound(tmp_path):
    path = tmp_path / f"{QKV.id}.ipynb"
    path.write_bytes(bomb(16))
    with pytest.raises(NotebookError) as refused:
        read_notebook(path, bounds=Bounds.of(COURSE.limits))
    assert "limits.notebook_values" in refused.value.message
    assert "limits.notebook_values" in refused.value.said.zh


# -- 2. nothing unbounded before the caller is known ----------------------------------------------------------
class Body:
    """A request body of ``total`` bytes sent in chunks (no Content-Length: chunked), counting what was taken."""

    def __init__(self, total: int, chunk: int = 64 * 1024, first: bytes = b""):
        self.total, self.chunk, self.sent, self.first = total, chunk, 0, first

    def __iter__(self):
        block = b"x" * self.chunk
        if self.first:
            self.sent += len(self.first)
            yield self.first
        while self.sent < self.total:
            self.sent += self.chunk
            yield block


def test_a_body_is_not_read_before_the_token_is_checked(service):
    """200 MiB sent without a token, with a wrong one, to the sign-in form: each is refused at once, and no more
    than the sockets' buffers was ever taken from the client (nothing spooled to disk)."""
    client, engine, who, url = service
    for headers, path, status in (({}, "/api/submissions", 401), (auth("not-a-token"), "/api/submissions", 401),
                                  (auth(who["teacher"]), "/api/submissions", 403),
                                  ({"Content-Type": "application/x-www-form-urlencoded"}, "/login", 413)):
        body = Body(200 * MiB)
        got = httpx.post(url + path, headers=headers, content=body, timeout=60)
        assert got.status_code == status, (path, got.text[:300])
        assert body.sent < 16 * MiB, (path, body.sent)
    # A declared size past what the route may take: 413 before anything is read.
    got = httpx.post(url + "/login", content=b"x" * (100 * 1024), timeout=60)
    assert got.status_code == 413 and "16 KiB" in got.text
    assert stored(engine) == 0


@pytest.mark.slow
def test_an_upload_past_the_limit_is_refused_as_it_passes_it(service):
    client, engine, who, url = service
    limit = int(COURSE.limits.notebook_mb * MiB)
    declared = httpx.post(url + "/api/submissions", headers={**auth(who["ada"]), "Content-Length": str(limit * 2),
                                                             "Content-Type": "multipart/form-data; boundary=zz"},
                          content=Body(limit * 2), timeout=60)
    assert declared.status_code == 413 and "MiB" in declared.json()["error"]["en"]
    # A well-formed form whose file part goes on and on: read (and spooled) only up to the limit.
    body = Body(limit * 2, first=b'--zz\r\nContent-Disposition: form-data; name="notebook"; filename="a.ipynb"\r\n'
                b'Content-Type: application/json\r\n\r\n{"nbformat": 4, "cells": [], "metadata": {"x": "')
    chunked = httpx.post(url + "/api/submissions", headers={**auth(who["ada"]),
                                                            "Content-Type": "multipart/form-data; boundary=zz"},
                         content=body, timeout=60)
    assert chunked.status_code == 413 and limit < body.sent < limit + 16 * MiB
    assert stored(engine) == 0


def test_a_route_that_reads_its_body_before_authenticating_gets_a_few_kib():
    """The guard's rule holds for routes written later: a FastAPI Form parameter is read before any dependency
    runs, so such an upload route never gets past the small bound, and its tests fail instead of a disk filling."""
    from autograder.service.guard import SMALL_BODY, Guard

    app = FastAPI()
    app.add_middleware(Guard, uploads=frozenset({("POST", "/careless")}), upload_bytes=64 * MiB)

    @app.post("/careless")
    async def careless(text: Annotated[str, Form()]) -> dict[str, int]:
        return {"n": len(text)}

    with serving(app) as url:
        small = httpx.post(url + "/careless", data={"text": "x" * 1000}, timeout=30)
        large = httpx.post(url + "/careless", data={"text": "x" * (SMALL_BODY + 1)}, timeout=30)
    assert small.json() == {"n": 1000} and large.status_code == 413


# -- 3. slow clients -------------------------------------------------------------------------------------------
def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_header_that_never_ends_and_a_body_that_stalls_are_cut(service):
    client, _, who, url = service
    port = _port(url)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
        slow.sendall(b"GET /api/submissions HTTP/1.1\r\nHost: x\r\n")        # and nothing more
        assert slow.recv(1024) == b""                       # closed by the server (header_seconds=1), not hung
    with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
        slow.sendall(f"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {who['ada']}\r\n"
                     "Content-Type: multipart/form-data; boundary=zz\r\nContent-Length: 100000\r\n\r\n--zz\r\n"
                     .encode())
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"connection: close" in answer.lower()
        assert "请求发送太慢".encode() in answer


def test_hundreds_of_half_sent_requests_leave_honest_ones_answered(service):
    client, _, who, url = service
    port = _port(url)
    held = []
    try:
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET / HTTP/1.1\r\nHo")
            held.append(s)
        assert client.get("/api/submissions", headers=auth(who["ada"])).status_code == 200
    finally:
        for s in held:
            s.close()


# -- 4. uploads sent at once, over HTTP ------------------------------------------------------------------------
def _policy_course(**service):
    return COURSE.model_copy(update={"service": COURSE.service.model_copy(update=service)})


@pytest.mark.parametrize("service", [{"course": _policy_course(attempts=2, queued_per_student=10),
                                      "uploads_per_minute": 100}], indirect=True)
def test_eight_uploads_sent_at_once_with_two_attempts_store_two(service):
    client, engine, who, url = service
    data, start, codes = honest(), threading.Barrier(8), []

    def upload() -> None:
        start.wait()
        got = httpx.post(url + "/api/submissions", headers=auth(who["ada"]), data={"assignment": QKV.id},
                         files={"notebook": ("a.ipynb", data, "application/json")}, timeout=60)
        codes.append(got.status_code)

    threads = [threading.Thread(target=upload) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [202, 202] + [403] * 6 and stored(engine) == 2


@pytest.mark.parametrize("service", [{"course": _policy_course(queued_per_student=2)}], indirect=True)
def test_a_student_with_enough_waiting_gets_429_and_the_others_are_served(service):
    client, engine, who, _ = service

    def upload(token):
        return client.post("/api/submissions", headers=auth(token), data={"assignment": QKV.id},
                           files={"notebook": ("a.ipynb", honest(), "application/json")})

    assert [upload(who["ada"]).status_code for _ in range(3)] == [202, 202, 429]
    refused = upload(who["ada"])
    assert "你已有 2 份提交在排队" in refused.json()["error"]["zh"] and refused.headers["Retry-After"]
    ben = upload(who["ben"])
    assert ben.status_code == 202 and ben.json()["position"] == 1      # behind ada's first, before her second


# -- 5. clean errors --------------------------------------------------------------------------------------------
def test_an_id_past_any_integer_is_a_clean_4xx_with_the_security_headers(service):
    client, _, who, _ = service
    for path in (f"/api/submissions/{2**70}", "/api/submissions/0", "/api/submissions/x",
                 f"/api/submissions?assignment={'a' * 500}"):
        got = client.get(path, headers=auth(who["ada"]))
        assert got.status_code == 422, (path, got.text)
        assert got.json()["error"]["zh"] and got.headers["X-Content-Type-Options"] == "nosniff"
        assert "default-src 'none'" in got.headers["Content-Security-Policy"]
    assert client.get("/no/such/page").headers["X-Frame-Options"] == "DENY"


def test_an_unexpected_failure_is_a_bilingual_500_with_headers_and_one_traceback_in_the_log(tmp_path, caplog):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    app = create_app(engine, COURSE)

    @app.get("/api/boom")
    async def boom() -> None:
        raise ZeroDivisionError("a bug")

    with caplog.at_level(logging.ERROR, logger="autograder.service"), serving(app) as url:
        answers = [httpx.get(url + "/api/boom", timeout=30) for _ in range(3)]
    for got in answers:
        assert got.status_code == 500 and got.headers["X-Content-Type-Options"] == "nosniff"
        assert got.json()["code"] == "service.internal" and "评分服务内部出错" in got.json()["error"]["zh"]
    records = [r for r in caplog.records if r.name == "autograder.service"]
    assert len(records) == 3 and sum(r.exc_info is not None for r in records) == 1
    assert all("GET /api/boom" in r.getMessage() and "ZeroDivisionError" in r.getMessage() for r in records)
    engine.dispose()


def test_a_database_that_does_not_answer_is_a_503_with_retry_after(tmp_path, caplog):
    from sqlalchemy.exc import OperationalError

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    app = create_app(engine, COURSE)

    @app.get("/api/away")
    async def away() -> None:
        raise OperationalError("SELECT 1", {}, ConnectionError("the server closed the connection"))

    with caplog.at_level(logging.WARNING, logger="autograder.service"), serving(app) as url:
        got = httpx.get(url + "/api/away", timeout=30)
    assert got.status_code == 503 and got.headers["Retry-After"] == "5"
    assert "数据库暂时连不上" in got.json()["error"]["zh"] and got.headers["X-Frame-Options"] == "DENY"
    assert not any(r.exc_info for r in caplog.records)
    engine.dispose()


def test_a_token_with_odd_characters_is_named(service):
    client, _, who, _ = service
    odd = client.get("/api/submissions", headers={"Authorization": f"Bearer {who['ada']}\u00e9".encode()})
    assert odd.status_code == 401 and "invalid characters" in odd.json()["error"]["en"]


@pytest.mark.parametrize("service", [{"stranger_requests_per_minute": 5}], indirect=True)
def test_requests_without_a_valid_token_are_limited_by_address(service):
    client, _, who, _ = service
    codes = [client.get("/api/submissions", headers=auth("guess")).status_code for _ in range(7)]
    assert codes == [401] * 5 + [429] * 2
    assert client.get("/api/submissions", headers=auth(who["ada"])).status_code == 200   # a valid token is not


# -- 6. the service's lifecycle: no worker outlives it -----------------------------------------------------------
def _serve_with_workers(tmp_path: Path, port: int) -> tuple[subprocess.Popen, set[int]]:
    """`autograder serve --workers 1` once its worker has started its sandbox: (the server, its descendants)."""
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    with open(tmp_path / "serve.log", "ab") as log:
        server = subprocess.Popen([sys.executable, "-m", "autograder", "serve", "--database",
                                   str(tmp_path / "s.db"), "--port", str(port), "--workers", "1"], env=env,
                                  stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        family = descendants(server.pid)
        if len(family) >= 2:             # the worker and its sandbox's template
            time.sleep(1.0)
            return server, descendants(server.pid)
        assert server.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
        time.sleep(0.2)
    server.kill()
    raise AssertionError("the worker did not start its sandbox in 120 s")


def _gone(pids: set[int], seconds: float = 60) -> set[int]:
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_worker_outlives_autograder_serve(tmp_path, how):
    """SIGTERM or SIGINT: the server stops its workers and their sandboxes before it exits. SIGKILL (nothing of
    the server runs): each worker sees its parent gone and stops after the job in hand."""
    server, family = _serve_with_workers(tmp_path, free_port())
    try:
        server.send_signal(how)
        server.wait(timeout=120)
        if how != signal.SIGKILL:
            assert not alive(family), "the server exited before its workers"
        assert not _gone(family), (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
    finally:
        for p in alive(family | {server.pid}):
            os.kill(p, signal.SIGKILL)


def test_serve_refuses_a_port_in_use_before_it_says_it_serves(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
        done = subprocess.run([sys.executable, "-m", "autograder", "serve", "--database", str(tmp_path / "s.db"),
                               "--port", str(port), "--workers", "1"], env=env, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode != 0 and "serving" not in done.stdout
    assert f"--port {port}: cannot listen there" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_workers_of_a_killed_service_finish_their_job_and_stop(tmp_path):
    """kill -9 `autograder serve` (threads and all) while its worker grades: the worker is told once that its
    parent is gone, however many of the parent's threads end, finishes the job in hand (recorded, not left to
    its lease) and stops."""
    from autograder.service import queue as Q

    server, family = _serve_with_workers(tmp_path, free_port())
    engine = db.engine_for(str(tmp_path / "s.db"))
    try:
        import nbformat

        slow = make_samples.submission(QKV, solved="all")
        slow.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(4)"))
        _, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=json.dumps(slow).encode())
        wait_for_job(engine, job, seconds=60, poll=0.1)
        server.kill()
        server.wait(timeout=60)
        assert not _gone(family)
        with engine.connect() as conn:
            assert conn.execute(select(tables.Job.state, tables.Job.claims).where(tables.Job.id == job)).one() == \
                ("done", 1)
        assert "worker: graded 1 submission(s)" in (tmp_path / "serve.log").read_text(errors="replace")
    finally:
        engine.dispose()
        for p in alive(family | {server.pid}):
            os.kill(p, signal.SIGKILL)


@pytest.mark.slow
def test_a_storm_of_parent_death_signals_stops_the_worker_after_its_job(tmp_path):
    """The kernel sends the parent-death signal once per thread of a dying parent: however many arrive, the
    worker finishes its job and stops (its handler takes no lock: one that did deadlocked the worker)."""
    from autograder.service import queue as Q

    engine = db.engine_for(str(tmp_path / "s.db"))
    db.upgrade(engine)
    import nbformat

    slow = make_samples.submission(QKV, solved="all")
    slow.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(3)"))
    _, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=json.dumps(slow).encode())
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=honest())
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    worker = subprocess.Popen([sys.executable, "-m", "autograder", "worker", "--database", str(tmp_path / "s.db"),
                               "--parent", str(os.getpid())], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_job(engine, job)
        for _ in range(300):
            os.kill(worker.pid, signal.SIGUSR1)
        out, _ = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0 and "worker: graded 1 submission(s)" in out, out[-2000:]
    with engine.connect() as conn:
        states = dict(conn.execute(select(tables.Job.id, tables.Job.state)).all())
    assert states[job] == "done" and sorted(states.values()) == ["done", "queued"]   # ben's waits for the next
    engine.dispose()


@pytest.mark.slow
def test_a_worker_killed_while_the_service_runs_is_replaced_and_its_job_queued_again_at_once(tmp_path):
    """kill -9 a worker mid-grade: the server names it, queues its job again without waiting for its lease
    (300 s by default), and a new worker grades it."""
    from autograder.service import queue as Q

    port = free_port()
    server, family = _serve_with_workers(tmp_path, port)
    engine = db.engine_for(str(tmp_path / "s.db"))
    try:
        slow = make_samples.submission(QKV, solved="all")
        import nbformat

        slow.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(8)"))
        sub, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb",
                           data=json.dumps(slow).encode())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                owner = conn.execute(select(tables.Job.owner).where(tables.Job.id == job)).scalar_one()
            if owner:
                break
            time.sleep(0.1)
        worker = int(owner.rsplit(":", 1)[1])
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                state, claims = conn.execute(select(tables.Job.state, tables.Job.claims)
                                             .where(tables.Job.id == job)).one()
            if state == "done":
                break
            time.sleep(0.2)
        assert (state, claims) == ("done", 2)
        log = (tmp_path / "serve.log").read_text(errors="replace")
        assert f"worker {worker} stopped (killed by SIGKILL)" in log and "1 job(s) queued again" in log
    finally:
        family |= descendants(server.pid)             # the new worker and its sandbox too
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=180)
        engine.dispose()
    assert len(family) >= 4 and not _gone(family)


def test_a_declared_length_that_is_no_ascii_number_is_not_a_number():
    """guard._content_length: "²" is a digit to str.isdigit and no number to int(): refused as malformed, never
    a crash of the guard."""
    from autograder.service.guard import _content_length

    for value, length in ((b"12", 12), (b"\xb2", -1), (b"1" * 19, -1), (b"-1", -1), (b" 7 ", 7)):
        assert _content_length({"headers": [(b"content-length", value)]}) == length
    assert _content_length({"headers": []}) is None
