"""Issue 28, first part: the service's database, its queue and its workers, on a real SQLite file.

Submissions are stored with their job in one transaction; jobs are claimed under a lease, claimed
again when the lease runs out (a worker killed with SIGKILL mid-grade), and recorded once per
submission whoever grades them; two workers racing for one job get it once. The worker grades a
stored notebook as ``autograder grade`` would (the same scores), with the server's receipt time as
the submission time for the late policy.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select

from support import make_samples, wait_for_job
from served import at_revision, student_token
from autograder.course.config import load_course
from autograder.service import db, lti_tables, tables
from autograder.service import queue as Q
from autograder.service.worker import serve

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
UTC = dt.timezone.utc


@pytest.fixture
def database(service_database) -> str:
    return service_database


@pytest.fixture
def engine(database):
    e = db.engine_for(database)
    db.upgrade(e)
    yield e
    e.dispose()


def url_of(engine) -> str:
    """The database as a worker is told it (a SQLite path, or the PostgreSQL URL)."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=False)


def notebook(solved: str = "all", extra: str | None = None) -> bytes:
    nb = make_samples.submission(QKV, solved="all" if solved == "all" else ())
    if extra is not None:
        import nbformat

        nb.cells.append(nbformat.v4.new_code_cell(extra))
    return json.dumps(nb).encode()


def test_the_schema_is_alembics_and_upgrading_twice_changes_nothing(engine):
    names = set(inspect(engine).get_table_names())
    assert {"submissions", "jobs", "results", "tokens", "alembic_version"} <= names
    # The models and the migrations agree: Alembic finds nothing to add or change.
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    assert lti_tables.LtiScore.metadata is tables.Base.metadata        # (the LMS's tables are compared too)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), tables.Base.metadata) == []
    db.upgrade(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all() == ["0012"]
        if engine.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_stored_submission_is_claimed_once_and_again_only_when_its_lease_ran_out(engine):
    first = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
    second = Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=b"{}")
    assert Q.position(engine, second[1]) == 1
    ada = Q.claim(engine, "w1", 60)
    assert (ada.student, ada.data, ada.received_at.tzinfo is not None) == ("ada", b"{}", True)
    assert Q.claim(engine, "w2", 60).student == "ben"
    assert Q.claim(engine, "w3", 60) is None                       # both held
    later = dt.datetime.now(UTC) + dt.timedelta(seconds=61)
    again = Q.claim(engine, "w3", 60, now=later)                    # w1's lease ran out: w3 takes ada's
    assert again.job == ada.job
    assert not Q.renew(engine, ada.job, "w1", 60)                   # w1 no longer holds it
    assert not Q.complete(engine, ada.job, "w1", {"points": 1, "max_points": 8, "status": "graded"})
    assert Q.complete(engine, ada.job, "w3", {"points": 8, "max_points": 8, "status": "graded"})
    assert Q.position(engine, ada.job) is None
    # A regrade is a new job; its result replaces the row: one result per submission.
    (job,) = Q.requeue(engine, [first[0]])
    again = Q.claim(engine, "w4", 60)
    assert again.job == job and Q.complete(engine, job, "w4", {"points": 7, "max_points": 8, "status": "graded"})
    with engine.connect() as conn:
        rows = conn.execute(select(tables.Result.submission_id, tables.Result.points)).all()
        claims = conn.execute(select(tables.Job.claims).where(tables.Job.id == ada.job)).scalar_one()
    assert rows == [(first[0], 7.0)] and claims == 2


def test_two_workers_racing_for_one_job_get_it_once(database):
    path = database
    setup = db.engine_for(path)
    db.upgrade(setup)
    Q.store(setup, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
    got: list[object] = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        mine = db.engine_for(path)          # one engine (one connection pool) per worker, as processes have
        start.wait()
        got.append(Q.claim(mine, f"w{i}", 60))
        mine.dispose()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(c is not None for c in got) == 1
    setup.dispose()


def test_a_worker_grades_stored_notebooks_as_autograder_grade_does(engine, tmp_path):
    ids = {name: Q.store(engine, student=name, assignment=QKV.id, filename=f"{name}.ipynb", data=data)[0]
           for name, data in (("ada", notebook("all")), ("ben", notebook("none")), ("cai", b"not a notebook"))}
    assert serve(url_of(engine), once=True, owner="test-worker") == 3
    with engine.connect() as conn:
        rows = {r.submission_id: r for r in conn.execute(select(tables.Result)).all()}
        states = conn.execute(select(tables.Job.state)).scalars().all()
    assert states == ["done"] * 3
    assert rows[ids["ada"]].points == QKV.points and rows[ids["ada"]].status == "graded"
    assert rows[ids["ben"]].points == 0.0
    assert rows[ids["cai"]].points == 0.0 and "unreadable" in rows[ids["cai"]].status
    ada = rows[ids["ada"]].result
    assert ada["student"] == "ada" and ada["submitted"]["source"] == "the service's receipt"


def test_the_workers_last_line_says_the_time_it_spent_grading_not_its_uptime(engine, monkeypatch):
    """Issue 66, item 12: "graded 3 submission(s) in 3600.0 s" was the worker's uptime, an idle queue's wait
    included. It counts the graded jobs and the time their grading took (on the tally's clock, here one that
    moves 4 s a grade); a job the grader failed on is neither; the uptime is said apart, as such."""
    from autograder.service import worker as W

    for name in ("ada", "ben", "cai"):
        Q.store(engine, student=name, assignment=QKV.id, filename=f"{name}.ipynb", data=notebook("all"))
    now = [1000.0]
    real = W.grade_claimed

    def timed(claimed, *args):
        now[0] += 4.0
        if claimed.student == "cai":
            raise RuntimeError("the grader's own fault")
        return real(claimed, *args)

    monkeypatch.setattr(W, "grade_claimed", timed)
    tally = W.Tally(clock=lambda: now[0])
    assert serve(url_of(engine), once=True, owner="w", tally=tally) == 2
    assert (tally.graded, tally.seconds) == (2, 8.0)
    assert W.stopped(tally, 3600.0) == "worker: graded 2 submission(s) in 8.0 s of grading (uptime 3600.0 s)"
    with engine.connect() as conn:
        assert sorted(conn.execute(select(tables.Job.state)).scalars()) == ["done", "done", "failed"]


@pytest.mark.slow
def test_a_worker_killed_mid_grade_hands_its_job_on_and_it_is_graded_once(engine, tmp_path):
    """kill -9 a worker while it grades; its lease runs out; another worker grades the job; one result."""
    slow = notebook("all", extra="import time\ntime.sleep(6)")
    sub, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=slow)
    database = url_of(engine)
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    log = tmp_path / "first.log"
    with open(log, "wb") as err:
        first = subprocess.Popen([sys.executable, "-m", "autograder", "worker", "--database", database, "--lease",
                                  "2"], env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        state = wait_for_job(engine, job, poll=0.1)
        assert state == "running", log.read_text(errors="replace")[-2000:]
        time.sleep(2.5)                     # its heartbeat keeps the lease past 2 s while it grades
        assert Q.claim(engine, "thief", 2) is None
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    time.sleep(2.2)                         # the dead worker's lease runs out
    assert serve(database, once=True, owner="second", lease=30) == 1
    with engine.connect() as conn:
        results = conn.execute(select(func.count()).select_from(tables.Result)).scalar_one()
        row = conn.execute(select(tables.Job.claims, tables.Job.state, tables.Job.owner)
                           .where(tables.Job.id == job)).one()
        points = conn.execute(select(tables.Result.points).where(tables.Result.submission_id == sub)).scalar_one()
    assert results == 1 and tuple(row) == (2, "done", "second") and points == QKV.points


@pytest.mark.slow
def test_the_worker_command_says_what_it_did(engine, tmp_path):
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=notebook("all"))
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    done = subprocess.run([sys.executable, "-m", "autograder", "worker", "--database", url_of(engine),
                           "--once"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "worker: graded 1 submission(s)" in done.stdout
    if engine.dialect.name == "sqlite":
        assert Path(engine.url.database).exists()


@pytest.mark.slow
def test_sigterm_finishes_the_job_in_hand_then_the_worker_stops(engine, tmp_path):
    slow = notebook("all", extra="import time\ntime.sleep(3)")
    sub, job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=slow)
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=notebook("all"))
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    worker = subprocess.Popen([sys.executable, "-m", "autograder", "worker", "--database", url_of(engine)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_job(engine, job)
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, out[-2000:]
    assert "worker: graded 1 submission(s)" in out                  # ada's, not ben's: it stopped after hers
    with engine.connect() as conn:
        states = conn.execute(select(tables.Job.state).order_by(tables.Job.id)).scalars().all()
    assert states == ["done", "queued"]


def test_serve_export_writes_what_autograder_grade_writes_from_the_latest_attempts(engine, tmp_path):
    from autograder.service.export import export

    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=notebook("none"))
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=notebook("none"))
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=notebook("all"))   # her second try
    assert serve(url_of(engine), once=True, owner="w") == 3
    out = tmp_path / "out"
    written = export(engine, COURSE, out)
    assert sorted((r["student"], r["points"]) for r in written) == [("ada", QKV.points), ("ben", 0.0)]
    import csv

    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert float(rows["ada"]["total"]) == QKV.points and rows["ada"]["source"] == "submission 3"
    for name in ("report.html", "canvas.csv", "moodle.csv", f"feedback/ada__{QKV.id}.md",
                 f"results/ben__{QKV.id}.json"):
        assert (out / name).exists(), name
    # The notebook each counted result graded, in nbgrader collect's layout with the receipt time.
    handed = out / "submitted" / "ada" / QKV.id / QKV.notebook
    assert handed.read_bytes() == notebook("all")
    stamp = (handed.parent / "timestamp.txt").read_text().strip()
    assert stamp.endswith(" UTC") and dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f UTC").year >= 2026


@pytest.mark.slow
def test_serve_export_records_the_counted_scores_in_an_nbgrader_gradebook(tmp_path):
    """`serve export --nbgrader COURSE`: the scores in nbgrader's gradebook, as `grade --nbgrader` records
    them, and the formgrader's autograded/ copy of each student's own notebook."""
    import shutil

    from nbgrader.api import Gradebook

    from autograder.core.errors import AutograderError
    from autograder.service.export import export

    course = tmp_path / "nbcourse"
    course.mkdir()
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy2(COURSE.root / name, course / name)
    for name in ("source", "release"):
        shutil.copytree(COURSE.root / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    e = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(e)
    Q.store(e, student="ada", assignment=QKV.id, filename="a.ipynb", data=notebook("all"))
    Q.store(e, student="ben", assignment=QKV.id, filename="b.ipynb", data=notebook("none"))
    assert serve(str(tmp_path / "service.db"), once=True, owner="w") == 2
    with pytest.raises(AutograderError, match="not an nbgrader course folder"):
        export(e, COURSE, tmp_path / "nowhere", nbgrader=tmp_path)
    assert not (tmp_path / "nowhere").exists()                     # refused before anything was written
    export(e, COURSE, tmp_path / "out", nbgrader=course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(QKV.id, "ada").score == pytest.approx(QKV.points)
        assert gb.find_submission(QKV.id, "ben").score == 0.0
        assert gb.find_submission(QKV.id, "ada").timestamp is not None
    def answers(nb: dict) -> list[str]:
        return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]
                if (c.get("metadata", {}).get("nbgrader") or {}).get("solution")]

    graded = json.loads((course / "autograded" / "ada" / QKV.id / QKV.notebook).read_text(encoding="utf-8"))
    assert answers(graded) == answers(json.loads(notebook("all"))) and answers(graded)
    e.dispose()


def test_the_queue_reconnects_after_postgresql_restarted(postgres_server):
    """PostgreSQL restarted between two claims: the same engine goes on (a dropped connection is replaced)."""
    e = db.engine_for(postgres_server)
    db.upgrade(e)
    Q.store(e, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
    Q.store(e, student="ben", assignment=QKV.id, filename="b.ipynb", data=b"{}")
    first = Q.claim(e, "w", 60)
    postgres_server.restart()
    second = Q.claim(e, "w", 60)
    assert first is not None and second is not None and {first.student, second.student} >= {"ben"}
    assert Q.complete(e, second.job, "w", {"points": 1, "max_points": 8, "status": "graded"})
    e.dispose()


def test_serve_regrade_queues_every_submission_of_an_assignment_again(tmp_path):
    database = str(tmp_path / "service.db")
    e = db.engine_for(database)
    db.upgrade(e)
    for student in ("ada", "ben"):
        Q.store(e, student=student, assignment=QKV.id, filename="a.ipynb", data=b"{}")
    Q.store(e, student="ada", assignment="01_rnn_decay", filename="b.ipynb", data=b"{}")
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    base = [sys.executable, "-m", "autograder", "serve", "--database", database, "regrade"]
    done = subprocess.run([*base, "--assignment", QKV.id], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "queued 2 submissions" in done.stdout, done.stdout + done.stderr
    with e.connect() as conn:
        jobs = conn.execute(select(tables.Job.submission_id).order_by(tables.Job.id)).scalars().all()
    assert jobs == [1, 2, 3, 1, 2]
    wrong = subprocess.run([*base, "--assignment", "99_nothing"], env=env, capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "99_nothing" in wrong.stdout + wrong.stderr
    e.dispose()


def test_a_database_that_cannot_be_opened_is_one_line_naming_it_without_its_password(tmp_path):
    from autograder.core.errors import AutograderError

    for url, why in ((str(tmp_path / "missing" / "x.db"), "unable to open database file"),
                     (f"postgresql+psycopg://nobody:s3cret@/x?host={tmp_path}", "connection")):
        with pytest.raises(AutograderError) as info:
            db.upgrade(db.engine_for(url))
        assert info.value.message.startswith("--database ") and why in info.value.message
        assert "s3cret" not in info.value.message and "\n" not in info.value.message


def test_the_api_answers_again_after_postgresql_restarted(postgres_server, tmp_path):
    """The web process's engine replaces connections the restarted server dropped (pool_pre_ping)."""
    import threading

    import httpx
    import uvicorn

    from autograder.service.app import create_app

    e = db.engine_for(postgres_server)
    db.upgrade(e)
    token = student_token(e, "ada")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(e, COURSE), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}) as c:
            before = c.get("/api/submissions")          # (the module's server is shared: whatever ada has there)
            assert before.status_code == 200
            postgres_server.restart()
            after = c.get("/api/submissions")
            assert after.status_code == 200 and after.json() == before.json()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        e.dispose()


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a server the test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


HOSTILE = '''
import glob, os, socket
DB, PG_SOCKET, PORT, WORKER, TMP = {consts}
class Blocked(Exception):
    pass
def attempt(name, code):
    try:
        exec(code, globals())
    except Exception:          # refused, whichever way: only an attempt that got through is a breach
        return
    raise RuntimeError(f"BREACH {{name}}")
def others():
    for path in glob.glob(os.path.join(TMP, "autograder-worker-*", "**", "*"), recursive=True):
        if "SECRET-OF-BEN" in open(path, errors="replace").read():
            return
    raise Blocked()
attempt("database-file", "open(DB, 'rb').read(16) if DB else (_ for _ in ()).throw(Blocked())")
attempt("tokens", "import sqlite3; sqlite3.connect(DB).execute('SELECT digest FROM tokens').fetchall() if DB else "
                  "(_ for _ in ()).throw(Blocked())")
attempt("postgresql", "socket.socket(socket.AF_UNIX).connect(PG_SOCKET) if PG_SOCKET else "
                      "(_ for _ in ()).throw(Blocked())")
attempt("network", "socket.create_connection(('127.0.0.1', PORT), timeout=2).close()")
attempt("worker-environ", "open(f'/proc/{{WORKER}}/environ', 'rb').read()")
attempt("other-submission", "others()")
raise RuntimeError("ATTACKS-RAN")
'''


def test_a_hostile_notebook_reaches_neither_the_database_nor_tokens_nor_other_submissions_nor_the_network(
        engine, tmp_path):
    """Graded by the service's worker in the same cage as `autograder grade`: each way out is refused, and the
    honest cells of the same notebook keep their points."""
    import socket
    import tempfile


    student_token(engine, "ada")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    if engine.dialect.name == "sqlite":
        db_file, pg_socket = str(engine.url.database), ""
    else:
        query = engine.url.query
        db_file, pg_socket = "", f"{query['host']}/.s.PGSQL.{query['port']}"
    consts = repr((db_file, pg_socket, listener.getsockname()[1], os.getpid(), tempfile.gettempdir()))
    # Ben's notebook as another worker on this machine holds it while it grades him (in its job folder).
    busy = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
    (busy / "job-1" / "student").mkdir(parents=True)
    (busy / "job-1" / "student" / f"{QKV.id}.ipynb").write_bytes(notebook("all", "# SECRET-OF-BEN"))
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=notebook("all", "# SECRET-OF-BEN"))
    sub, _ = Q.store(engine, student="mallory", assignment=QKV.id, filename="m.ipynb",
                     data=notebook("all", HOSTILE.format(consts=consts)))
    try:
        assert serve(url_of(engine), once=True, owner="w") == 2
    finally:
        listener.close()
        import shutil

        shutil.rmtree(busy)
    with engine.connect() as conn:
        row = conn.execute(select(tables.Result).where(tables.Result.submission_id == sub)).one()
    text = json.dumps(row.result, ensure_ascii=False)
    last = row.result["cells"][-1]
    assert "ATTACKS-RAN" in (last["message"] or ""), last     # the attacks ran to their end, every one refused
    assert "BREACH" not in text, text[:3000]
    assert row.points == QKV.points                      # the honest cells before them keep their points


# -- issue 47: fair share, attempts counted where they are stored, private files ------------------------------
def _store(engine, who, **admission):
    return Q.store(engine, student=who, assignment=QKV.id, filename="a.ipynb", data=b"{}",
                   admission=Q.Admission(**admission) if admission else None)


def test_workers_take_every_students_first_upload_before_anyones_second(engine):
    """One student's flood waits behind the others' work: ranks, then how long each job has been eligible."""
    done = {"points": 1, "max_points": 1, "status": "graded"}
    flood = [_store(engine, "flood")[1] for _ in range(3)]
    ada = _store(engine, "ada")[1]
    ben = _store(engine, "ben")[1]
    assert Q.position(engine, flood[0]) == 0 and Q.position(engine, ada) == 1 and Q.position(engine, ben) == 2
    assert Q.position(engine, flood[1]) == 3 and Q.position(engine, flood[2]) == 4
    order = []
    while (got := Q.claim(engine, "w", 60)) is not None:
        order.append(got.job)
        Q.complete(engine, got.job, "w", done)
    assert order == [flood[0], ada, ben, flood[1], flood[2]]
    # A regrade of the class goes behind every student's own uploads.
    with engine.connect() as conn:
        subs = list(conn.execute(select(tables.Submission.id).order_by(tables.Submission.id)).scalars())
    regraded = Q.requeue(engine, subs, behind=3)
    late = _store(engine, "cai")[1]
    assert Q.claim(engine, "w", 60).job == late and Q.claim(engine, "w", 60).job in regraded


def test_a_student_pays_back_the_worker_time_their_notebook_took(engine):
    """A job that held a worker 100 s charges its student for longer still: another student's upload, queued after
    that student's next one, is graded first; a duplicate upload still waits only for those before it."""
    done = {"points": 1, "max_points": 1, "status": "graded"}
    slow = _store(engine, "slow")[1]
    Q.claim(engine, "w", 300, now=dt.datetime.now(UTC) - dt.timedelta(seconds=100))     # taken 100 s ago
    again = _store(engine, "slow")[1]                   # queued while the first was graded
    Q.complete(engine, slow, "w", done)                 # done now: charged until 100 s from now
    ada = _store(engine, "ada")[1]
    assert [Q.claim(engine, "w", 60).job for _ in range(2)] == [ada, again]
    # A quick one charges little (here none: it took no time): a client's second copy (its first was taken, the
    # answer lost) is not sent to the back of the queue.
    Q.complete(engine, ada, "w", done)
    first = _store(engine, "ben")[1]
    copy = _store(engine, "ben")[1]
    assert Q.claim(engine, "w2", 60, now=dt.datetime.now(UTC) + dt.timedelta(seconds=30)).job == first
    Q.complete(engine, first, "w2", done)
    cai = _store(engine, "cai")[1]
    assert [Q.claim(engine, f"w{i}", 60).job for i in (3, 4)] == [copy, cai]


def test_a_student_has_one_job_graded_at_a_time_so_a_flood_holds_one_worker_at_most(engine):
    slow = [_store(engine, "flood")[1] for _ in range(3)]
    assert Q.claim(engine, "w1", 60).job == slow[0]
    assert Q.claim(engine, "w2", 60) is None                 # flood's next waits for its first, the worker idles
    ada = _store(engine, "ada")[1]
    assert Q.claim(engine, "w2", 60).job == ada
    Q.complete(engine, slow[0], "w1", {"points": 0, "max_points": 1, "status": "graded"})
    assert Q.claim(engine, "w1", 60).job == slow[1]
    # A worker that died: its parent queues its job again at once, and the student's next can go.
    assert Q.release(engine, "w1") == 1 and Q.position(engine, slow[1]) == 0
    assert Q.claim(engine, "w3", 60).job == slow[1]


def test_each_student_may_have_a_few_jobs_waiting_and_503_only_when_the_queue_is_full_of_others(engine):
    limits = {"waiting_per_student": 2, "waiting": 4}
    _store(engine, "flood", **limits)
    _store(engine, "flood", **limits)
    with pytest.raises(Q.Refused) as refused:
        _store(engine, "flood", **limits)
    assert refused.value.status == 429 and refused.value.key == "service.queued_enough"
    assert refused.value.retry_after and refused.value.params == {"waiting": 2}
    _store(engine, "ada", **limits)
    _store(engine, "ben", **limits)                       # four waiting: the queue is full
    with pytest.raises(Q.Refused) as refused:
        _store(engine, "cai", **limits)
    assert refused.value.status == 503 and refused.value.key == "service.queue_full"
    Q.claim(engine, "w", 60)                              # one taken: room for one more student again
    _store(engine, "cai", **limits)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one() == 5


def test_uploads_sent_at_once_never_pass_the_attempt_limit(database):
    """Eight uploads at once with attempts: 2 (one engine, one connection pool each, as the web process's
    threads and several web processes have): exactly two are stored."""
    setup = db.engine_for(database)
    db.upgrade(setup)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def upload(i: int) -> None:
        mine = db.engine_for(database)
        start.wait()
        try:
            _store(mine, "ada", attempts=2)
            outcomes.append("stored")
        except Q.Refused as refused:
            outcomes.append(refused.key)
        finally:
            mine.dispose()

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["service.attempts_used"] * 6 + ["stored"] * 2
    with setup.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one() == 2
    setup.dispose()


def test_the_database_files_are_private_from_creation_and_after_an_upgrade(tmp_path):
    folder = db.private_folder(tmp_path / "service-data")
    assert folder.stat().st_mode & 0o777 == 0o700
    path = folder / "service.db"
    engine = db.engine_for(str(path))
    db.upgrade(engine)
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert modes == {"service.db": 0o600, "service.db-wal": 0o600, "service.db-shm": 0o600}, modes
    engine.dispose()
    # A database an older kit left readable by everyone is made private when the service opens it.
    for p in folder.iterdir():
        os.chmod(p, 0o644)
    os.chmod(folder, 0o755)
    from types import SimpleNamespace

    from autograder.service.command import database_url

    assert database_url(SimpleNamespace(database=None), SimpleNamespace(root=tmp_path)) == str(path)
    again = db.engine_for(str(path))
    db.upgrade(again)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()} == modes
    again.dispose()


def test_an_older_databases_jobs_learn_their_student(tmp_path):
    """A database at the schema before fair share (0003): its jobs get their submission's student."""
    engine = db.engine_for(str(tmp_path / "old.db"))
    with at_revision(engine, "0003") as connection:
        connection.exec_driver_sql("INSERT INTO submissions (id, student, assignment, filename, sha256, data, "
                                   "received_at) VALUES (1, 'ada', 'x', 'a.ipynb', '', x'00', '2026-01-01')")
        connection.exec_driver_sql("INSERT INTO jobs (id, submission_id, state, claims, created_at) "
                                   "VALUES (1, 1, 'queued', 0, '2026-01-01')")
    db.upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(select(tables.Job.student, tables.Job.round)).one() == ("ada", 0)
    engine.dispose()
