"""Issue 50, part 1: the instructor's first-day tools on the service: the roster in the database, tokens that
can be listed, revoked, issued again and expire, TAs beside instructors, the class's state per assignment (who
has not submitted), and a record of every action, with who and when.

The data layer runs on SQLite and PostgreSQL; the pages over HTTP on a real uvicorn server (a thread) over a real
SQLite file; the command line as an instructor types it (``python -m autograder serve ...``)."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys

import httpx
import pytest
from sqlalchemy import select, update

from support import make_samples
from served import at_revision, serving
from pages import browser, csrf_of, sign_in
from autograder.course.config import load_course
from autograder.core.errors import AutograderError
from autograder.course.roster import Member
from autograder.service import audit, db, history, people, sessions, tables, tokens
from autograder.service import queue as Q
from autograder.service.app import create_app

COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
#: 02's maximum (autograder.course.written.maximum): its automatic points and its written answer's, graded or not.
MAX = QKV.points + QKV.manual_points


@pytest.fixture
def engine(service_engine):
    return service_engine


def roster_file(tmp_path, text: str):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def actions_of(engine, action: str) -> list:
    return [r for r in audit.entries(engine) if r.action == action]


# -- the roster and tokens (data layer, both databases) ---------------------------------------------------------
def test_a_roster_import_updates_the_class_and_keeps_every_token(engine, tmp_path):
    first = tokens.import_roster(engine, roster_file(tmp_path, "student,name,email\nada,Ada,ada@x.example\nben,Ben,\n"),
                                 by="prof")
    assert sorted(s for s, _, _ in first) == ["ada", "ben"]
    ada_token = dict((s, t) for s, _, t in first)["ada"]
    # A new export: Ada's email changed, Cat joined; Ben is unchanged.
    second = tokens.import_roster(engine, roster_file(tmp_path, "student,name,email,section\nada,Ada,ada@y.example,A\n"
                                                                "ben,Ben,,\ncat,Cat,,B\n"), by="prof")
    assert [s for s, _, _ in second] == ["cat"]                        # only the newcomer gets a token
    assert tokens.caller(engine, ada_token) == tokens.Caller("student", "ada")      # Ada's still works
    rows = {r.student: r for r in people.people(engine)}
    assert (rows["ada"].email, rows["ada"].section, rows["cat"].section) == ("ada@y.example", "A", "B")
    imports = actions_of(engine, "roster.import")
    assert len(imports) == 2 and imports[0].who == "prof" and "1 added, 1 updated, 1 unchanged" in imports[0].detail


def test_a_bad_roster_changes_nothing_and_names_the_row(engine, tmp_path):
    tokens.import_roster(engine, roster_file(tmp_path, "student\nada\n"))
    with pytest.raises(AutograderError, match=r"roster.csv, row 2: student 'ben' is already row 1"):
        tokens.import_roster(engine, roster_file(tmp_path, "student\nben\nben\n"))
    assert [r.student for r in people.people(engine)] == ["ada"]
    assert [t.who for t in tokens.listing(engine)] == ["ada"]


def test_only_a_student_on_the_roster_gets_a_student_token(engine):
    with pytest.raises(tokens.NotOnRoster, match="nobody99: not on the roster"):
        tokens.issue(engine, "nobody99")
    assert tokens.listing(engine) == [] and actions_of(engine, "token.issue") == []
    assert tokens.caller(engine, tokens.issue(engine, "T. A.", role="ta")) == tokens.Caller("ta", "T. A.")
    with pytest.raises(AutograderError, match="role 'admin'"):
        tokens.issue(engine, "x", role="admin")


def test_a_revoked_token_stops_at_once_and_its_page_sessions_with_it(engine):
    people.import_members(engine, [Member("ada")], by="prof")
    token = tokens.issue(engine, "ada", by="prof")
    who = tokens.caller(engine, token)
    assert who is not None and who.token_id is not None
    cookie, _csrf = sessions.start(engine, who)
    other, _ = sessions.start(engine, tokens.Caller("student", "ada"))          # (a Hub sign-in: no kit token)
    assert sessions.find(engine, cookie) is not None
    assert tokens.revoke(engine, token_id=who.token_id, by="prof") == 1
    assert tokens.caller(engine, token) is None and sessions.find(engine, cookie) is None
    assert sessions.find(engine, other) is not None                 # a session of no kit token is not touched
    assert tokens.revoke(engine, token_id=who.token_id, by="prof") == 0          # once
    [listed] = tokens.listing(engine)
    assert (listed.state, listed.revoked_by) == ("revoked", "prof")
    assert token not in repr(listed) and tokens.digest(token) not in repr(listed)   # never the secret
    [revoked] = actions_of(engine, "token.revoke")
    assert (revoked.who, revoked.target) == ("prof", "ada")


def test_issuing_again_stops_the_old_token_in_the_same_transaction(engine):
    people.import_members(engine, [Member("ada", name="Ada")], by="prof")
    old = tokens.issue(engine, "ada")
    role, new = tokens.reissue(engine, "ada", by="prof")
    assert role == "student" and tokens.caller(engine, old) is None
    assert tokens.caller(engine, new) == tokens.Caller("student", "ada")
    assert [t.name for t in tokens.listing(engine)] == ["Ada", "Ada"]
    with pytest.raises(AutograderError, match="holds no live token"):
        tokens.reissue(engine, "nobody", by="prof")


def test_an_expired_token_and_its_sessions_stop(engine):
    from autograder.service.tables import Token, utcnow
    import datetime as dt

    people.import_members(engine, [Member("ada")], by="prof")
    token = tokens.issue(engine, "ada", expires=utcnow() + dt.timedelta(days=30))
    who = tokens.caller(engine, token)
    cookie, _ = sessions.start(engine, who)
    with pytest.raises(AutograderError, match="that time has passed"):
        tokens.issue(engine, "ada", expires=utcnow() - dt.timedelta(seconds=1))
    with db.writing(engine).begin() as conn:             # thirty days later
        conn.execute(update(Token).values(expires_at=utcnow() - dt.timedelta(seconds=1)))
    assert tokens.caller(engine, token) is None and sessions.find(engine, cookie) is None
    assert [t.state for t in tokens.listing(engine)] == ["expired"]


def test_removing_a_student_revokes_their_tokens_and_keeps_their_submissions(engine):
    people.import_members(engine, [Member("ada"), Member("ben")], by="prof")
    token = tokens.issue(engine, "ada")
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=b"{}")
    assert tokens.remove_student(engine, "ada", by="prof") == (True, 1)
    assert tokens.caller(engine, token) is None and [r.student for r in people.people(engine)] == ["ben"]
    with engine.connect() as conn:
        assert conn.execute(select(tables.Submission.student)).scalars().all() == ["ada"]
    assert tokens.remove_student(engine, "ada", by="prof") == (False, 0)


def test_an_older_database_takes_its_token_holders_as_its_roster(tmp_path):
    """Migration 0005 on a database of 0004 with tokens: their students are the roster, their tokens still work."""
    engine = db.engine_for(str(tmp_path / "old.db"))
    with at_revision(engine, "0004") as connection:
        connection.exec_driver_sql("INSERT INTO tokens (digest, role, who, name, created_at) VALUES "
                                   f"('{tokens.digest('old-token')}', 'student', 'ada', 'Ada', '2026-09-01 08:00:00'),"
                                   f"('{tokens.digest('staff')}', 'instructor', 'prof', '', '2026-09-01 08:00:00')")
    db.upgrade(engine)
    assert [(r.student, r.name) for r in people.people(engine)] == [("ada", "Ada")]
    assert tokens.caller(engine, "old-token") == tokens.Caller("student", "ada")
    engine.dispose()


# -- the command line ------------------------------------------------------------------------------------------
def test_serve_roster_writes_the_tokens_into_the_services_folder_and_never_over_an_earlier_file(course_root,
                                                                                                   tmp_path):
    """Issue 66, item 5: without -o the tokens go to service-data/ (0700, ignored by git), not into the checkout;
    a later import's newcomers get a file of their own there, the earlier one kept (its tokens exist nowhere else)."""
    def run(*args: str):
        return subprocess.run([sys.executable, "-m", "autograder", "--course", str(course_root / "course.yml"),
                               "serve", *args], cwd=course_root, env=dict(os.environ, HOME=str(tmp_path)),
                              capture_output=True, text=True, timeout=120)

    before = {p.name for p in course_root.iterdir()}
    first = run("roster", str(roster_file(tmp_path, "student,name\nada,Ada\n")))
    data = course_root / "service-data"
    assert first.returncode == 0 and "issued 1 tokens" in first.stdout, first.stderr
    assert str(data / "tokens.csv") in first.stdout
    assert {p.name for p in course_root.iterdir()} - before == {"service-data"}
    assert data.stat().st_mode & 0o777 == 0o700 and (data / "tokens.csv").stat().st_mode & 0o777 == 0o600
    kept = (data / "tokens.csv").read_text(encoding="utf-8")
    assert [r["student"] for r in csv.DictReader(io.StringIO(kept))] == ["ada"]
    second = run("roster", str(roster_file(tmp_path, "student,name\nada,Ada\nben,Ben\n")))
    assert second.returncode == 0 and str(data / "tokens-2.csv") in second.stdout, second.stderr
    assert (data / "tokens.csv").read_text(encoding="utf-8") == kept
    assert [r["student"] for r in csv.DictReader(io.StringIO((data / "tokens-2.csv").read_text(encoding="utf-8")))
            ] == ["ben"] and (data / "tokens-2.csv").stat().st_mode & 0o777 == 0o600
    again = run("roster", str(roster_file(tmp_path, "student,name\nada,Ada\nben,Ben\n")))   # nobody new: no file
    assert again.returncode == 0 and "issued 0 tokens" in again.stdout and not (data / "tokens-3.csv").exists()


def test_the_command_line_imports_lists_revokes_and_issues_again(tmp_path):
    env = dict(os.environ, AUTOGRADER_COURSE=str(COURSE.root / "course.yml"))
    base = [sys.executable, "-m", "autograder", "serve", "--database", str(tmp_path / "s.db")]

    def run(*args: str):
        return subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=120)

    refused = run("token", "--student", "nobody99")
    assert refused.returncode == 2 and "nobody99: not on the roster" in refused.stderr and not refused.stdout
    roster = roster_file(tmp_path, "student,name\nada,Ada\n")
    made = run("roster", str(roster), "-o", str(tmp_path / "tokens.csv"))
    assert made.returncode == 0 and "issued 1 tokens" in made.stdout
    token = next(csv.DictReader(io.StringIO((tmp_path / "tokens.csv").read_text(encoding="utf-8"))))["token"]
    again = run("roster", str(roster))                 # nobody new: no tokens file needed, Ada keeps hers
    assert again.returncode == 0 and "issued 0 tokens" in again.stdout
    ta = run("token", "--ta", "T. A.", "--expires", "30d")
    assert ta.returncode == 0 and len(ta.stdout.strip()) > 30
    listed = run("token", "--list")
    assert listed.returncode == 0 and token not in listed.stdout
    assert "ta" in listed.stdout and "expires" in listed.stdout
    assert "ada" in run("roster", "--list").stdout.splitlines()[1]
    reissued = run("token", "--reissue", "ada")
    assert reissued.returncode == 0 and reissued.stdout.strip() != token
    engine = db.engine_for(str(tmp_path / "s.db"))
    try:
        assert tokens.caller(engine, token) is None
        assert tokens.caller(engine, reissued.stdout.strip()) == tokens.Caller("student", "ada")
        assert run("token", "--revoke", "ada").returncode == 0
        assert tokens.caller(engine, reissued.stdout.strip()) is None
        nothing = run("token", "--revoke", "ada")
        assert nothing.returncode == 2 and "no live token" in nothing.stderr
        for strange in ("²", str(2**70)):       # a digit int() refuses, a number no row holds: still one line
            odd = run("token", "--revoke", strange)
            assert odd.returncode == 2 and "no live token" in odd.stderr and "Traceback" not in odd.stderr
        bad = run("token", "--student", "ada", "--expires", "someday")
        assert bad.returncode == 2 and "--expires: 'someday' is neither a time" in bad.stderr
        gone = run("roster", "--remove", "ada")
        assert gone.returncode == 0 and not people.on_roster(engine, "ada")
        assert {r.who for r in audit.entries(engine)} == {"cli"}
    finally:
        engine.dispose()


# -- the pages: roles, the roster page, tokens, actions ----------------------------------------------------------
@pytest.fixture
def staffed(tmp_path):
    """The app over a SQLite file with ada, ben and cat on the roster, ada's upload graded, ben's waiting; tokens
    for ada, a TA and an instructor: (url, engine, tokens)."""
    from autograder.service.worker import serve

    database = tmp_path / "service.db"
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    people.import_members(engine, [Member("ada", name="Ada Lovelace", email="ada@x.example"), Member("ben"),
                                   Member("cat", name="=HYPERLINK(1)")], by="prof")
    who = {"ada": tokens.issue(engine, "ada"), "ta": tokens.issue(engine, "T. A.", role="ta"),
           "prof": tokens.issue(engine, "prof", role="instructor")}
    data = json.dumps(make_samples.submission(QKV, solved="all")).encode()
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=data)
    assert serve(str(database), once=True, owner="w") == 1
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb", data=data)
    try:
        with serving(create_app(engine, COURSE)) as url:
            yield url, engine, who
    finally:
        engine.dispose()


@contextlib.contextmanager
def signed_in(url: str, token: str):
    with browser(url) as client:
        assert sign_in(client, token).status_code == 303
        yield client


def test_the_roster_page_shows_names_and_who_has_not_submitted_with_a_csv_to_mail(staffed):
    url, _engine, who = staffed
    with signed_in(url, who["ta"]) as ta:
        page = ta.get("/dashboard/roster", params={"lang": "en"})
        assert page.status_code == 200 and "Ada Lovelace" in page.text and "3 on the roster" in page.text
        assert 'data-student="ada"' in page.text and "Remove from the roster" not in page.text   # (a TA's view)
        missing = ta.get("/dashboard/roster", params={"assignment": QKV.id, "show": "missing"})
        assert 'data-student="cat"' in missing.text and 'data-student="ada"' not in missing.text
        assert 'id="mail-them"' not in missing.text                 # (cat has no email)
        waiting = ta.get("/dashboard/roster", params={"assignment": QKV.id, "show": "graded", "lang": "en"})
        assert 'href="mailto:?bcc=ada%40x.example"' in waiting.text and "Mail these 1" in waiting.text
        assert 'data-student="ben"' not in missing.text           # submitted, waiting for its grade
        sheet = ta.get("/dashboard/roster.csv", params={"assignment": QKV.id, "show": "missing"})
        assert sheet.status_code == 200 and sheet.headers["cache-control"] == "no-store"
        rows = list(csv.DictReader(io.StringIO(sheet.text)))
        assert [r["student"] for r in rows] == ["cat"] and rows[0]["name"] == "'=HYPERLINK(1)"  # no formula
        everyone = {r["student"]: r for r in csv.DictReader(io.StringIO(ta.get("/dashboard/roster.csv").text))}
        assert everyone["ada"][f"{QKV.id} state"] == "graded" and \
            everyone["ada"][f"{QKV.id} points"] == f"{QKV.points:g} / {MAX:g}"
        assert everyone["ben"][f"{QKV.id} state"] == "waiting" and everyone["cat"][f"{QKV.id} state"] == "missing"
        # The worker that graded Ada's upload recorded her counted score's first value.
        assert [(r.old_points, r.new_points, r.why, r.who) for r in history.changes(_engine, student="ada")] == [
            (None, QKV.points, "graded", "grader")]
        board = ta.get("/dashboard", params={"lang": "en"})                        # a TA sees the dashboard
        assert board.status_code == 200 and '<span class="name">Ada Lovelace</span>' in board.text


def test_a_ta_may_grade_and_extend_but_only_an_instructor_revokes_or_changes_the_roster(staffed):
    url, engine, who = staffed
    with signed_in(url, who["ta"]) as ta, signed_in(url, who["prof"]) as prof, signed_in(url, who["ada"]) as ada:
        csrf = csrf_of(ta.get("/dashboard/tokens").text)
        ada_token = next(t for t in tokens.listing(engine) if t.who == "ada")
        for path, form in (("/dashboard/tokens/revoke", {"token": str(ada_token.id)}),
                           ("/dashboard/tokens/reissue", {"who": "ada"}),
                           ("/dashboard/roster/remove", {"student": "ben"})):
            refused = ta.post(path, data={"csrf": csrf, **form})
            assert refused.status_code == 403 and "only an instructor" in refused.text, path
        assert tokens.caller(engine, who["ada"]) is not None and people.on_roster(engine, "ben")
        granted = ta.post("/dashboard/extensions", data={"csrf": csrf, "student": "ada", "assignment": QKV.id,
                                                         "due": "3d", "reason": "ill"})
        assert granted.status_code == 303
        assert ta.post("/dashboard/requeue", data={"csrf": csrf, "assignment": QKV.id}).status_code == 303
        # The instructor revokes Ada's token from the tokens page: her page session ends at once.
        assert ada.get("/me").status_code == 200
        page = prof.get("/dashboard/tokens")
        assert f'data-token="{ada_token.id}" data-state="live"' in page.text and who["ada"] not in page.text
        done = prof.post("/dashboard/tokens/revoke", data={"csrf": csrf_of(page.text), "token": str(ada_token.id)})
        assert done.status_code == 303 and "/dashboard/tokens?notice=" in done.headers["location"]
        assert ada.get("/me").status_code == 303                               # signed out
        assert httpx.get(f"{url}/api/submissions", headers={"Authorization": f"Bearer {who['ada']}"}).status_code == 401
        issued = prof.post("/dashboard/tokens/reissue", data={"csrf": csrf_of(page.text), "who": "T. A."})
        assert issued.status_code == 200 and issued.headers["cache-control"] == "no-store"
        new = issued.text.split('<code id="new-token">')[1].split("</code>")[0]
        assert tokens.caller(engine, new) == tokens.Caller("ta", "T. A.") and tokens.caller(engine, who["ta"]) is None
        assert ta.get("/dashboard").status_code == 303                          # the TA's old session ended
        bad = prof.post("/dashboard/tokens/revoke", data={"csrf": csrf_of(page.text), "token": "1 OR 1=1"})
        assert bad.status_code == 422
        log = prof.get("/dashboard/actions", params={"lang": "en"})
        assert log.status_code == 200
        for action, by in (("extension.grant", "T. A."), ("regrade", "T. A."), ("token.revoke", "prof")):
            assert any(r.action == action and r.who == by for r in audit.entries(engine)), action
        sheet = list(csv.DictReader(io.StringIO(prof.get("/dashboard/actions.csv").text)))
        assert {"extension.grant", "token.revoke", "token.issue", "roster.import", "regrade"} \
            <= {r["action"] for r in sheet}
        ext = next(r for r in sheet if r["action"] == "extension.grant")
        assert ext["who"] == "T. A." and ext["target"] == "ada" and "ill" in ext["detail"]
        with signed_in(url, who["prof"]) as again:
            assert again.get("/dashboard/actions").status_code == 200
    with signed_in(url, who["prof"]) as prof:
        csrf = csrf_of(prof.get("/dashboard/roster").text)
        removed = prof.post("/dashboard/roster/remove", data={"csrf": csrf, "student": "ben"})
        assert removed.status_code == 303 and not people.on_roster(engine, "ben")
        assert prof.post("/dashboard/roster/remove", data={"csrf": csrf, "student": "ben"}).status_code == 404


# -- the history of every counted score ----------------------------------------------------------------------
def _changes(engine, student="ada"):
    return [(r.old_points, r.new_points, r.why, r.who) for r in history.changes(engine, student=student)]


def test_every_change_of_a_counted_score_is_recorded_with_why_who_and_when(engine, tmp_path):
    """A late submission graded (50% off), an extension granted (full marks) and revoked, a regrade that moved the
    score, course.yml's due date moved: each is one row, old and new, why and who; nothing else is."""
    from late_class import LATE_COURSE, late_result
    from autograder.grading.deadlines import Deadlines, submitted_json
    from autograder.grading.times import SubmittedAt
    from autograder.service import repository
    from autograder.service.export import export
    import datetime as dt

    late_result(engine, "ada")
    assert history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="graded", who=history.WORKER) == 1
    assert history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="graded", who=history.WORKER) == 0   # no change
    repository.grant_extension(engine, student="ada", assignment=QKV.id, reason="ill", granted_by="T. A.",
                               due=dt.datetime(2026, 1, 12, tzinfo=dt.timezone.utc))
    history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="extension", who="T. A.")
    repository.revoke_extensions(engine, "ada", QKV.id, by="prof")
    history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="extension", who="prof")
    # Graded again (a check changed): 8 before the penalty, 8 - M/2 after it (half the maximum M off, its written
    # answer's points included).
    [sub] = [s.id for s in repository.submissions(engine, student="ada")]
    Q.requeue(engine, [sub])
    claimed = Q.claim(engine, "w", 60)
    received = dt.datetime(2026, 1, 11, 12, 0, tzinfo=dt.timezone.utc)
    result = {"student": "ada", "assignment": QKV.id, "points": 8.0, "max_points": QKV.points, "status": "graded",
              "exercises": []}
    Deadlines.load(LATE_COURSE).settle(result, submitted_json(SubmittedAt(received, "the service's receipt")))
    assert Q.complete(engine, claimed.job, "w", result) == "regrade"
    history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="regrade", who=history.WORKER)
    # course.yml's due date moved past the submission: the late penalty goes.
    later = LATE_COURSE.model_copy(update={"assignments": [
        a.model_copy(update={"due": "2026-01-20T23:59:00+00:00"}) if a.id == QKV.id else a
        for a in LATE_COURSE.assignments]})
    assert history.settle_all(engine, later) == 1
    full, off = float(QKV.points), MAX / 2
    half = full - off
    assert _changes(engine) == [(None, half, "graded", "grader"), (half, full, "extension", "T. A."),
                                (full, half, "extension", "prof"), (half, 8 - off, "regrade", "grader"),
                                (8 - off, 8.0, "late_policy", "course.yml")]
    assert history.settle_all(engine, later) == 0
    export(engine, later, tmp_path / "out")
    sheet = list(csv.DictReader(io.StringIO((tmp_path / "out" / "score-history.csv").read_text(encoding="utf-8"))))
    assert [(r["old_points"], r["new_points"], r["why"]) for r in sheet] == [
        ("", str(half), "graded"), (str(half), str(full), "extension"), (str(full), str(half), "extension"),
        (str(half), str(8 - off), "regrade"), (str(8 - off), "8.0", "late_policy")]
    # Each score out of the maximum it was out of: the assignment's, its written answer waiting (issue 66).
    assert {(r["max_points"], r["waiting_points"]) for r in sheet} == {(str(MAX), "2.0")}


def test_two_changes_at_once_record_one_step_each_never_the_same_twice(engine):
    """Many notes of the same pair at once (threads, as two workers and a page would): one row, not many."""
    import threading

    from late_class import LATE_COURSE, late_result

    late_result(engine, "ada")
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(history.note(
        engine, LATE_COURSE, [("ada", QKV.id)], why="graded", who=history.WORKER))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(counts) == [0, 0, 0, 0, 0, 1] and len(_changes(engine)) == 1


def test_a_student_reads_her_own_score_history_and_the_staff_every_students(tmp_path):
    from late_class import LATE_COURSE, late_result
    from autograder.service import repository
    import datetime as dt

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    people.import_members(engine, [Member("ada"), Member("ben")], by="prof")
    who = {"ada": tokens.issue(engine, "ada"), "ben": tokens.issue(engine, "ben"),
           "prof": tokens.issue(engine, "prof", role="instructor")}
    for student in ("ada", "ben"):
        late_result(engine, student)
        history.note(engine, LATE_COURSE, [(student, QKV.id)], why="graded", who=history.WORKER)
    try:
        with serving(create_app(engine, LATE_COURSE)) as url:
            with signed_in(url, who["prof"]) as prof:
                page = prof.get("/dashboard", params={"lang": "en"})
                granted = prof.post("/dashboard/extensions", data={
                    "csrf": csrf_of(page.text), "student": "ada", "assignment": QKV.id, "due": "2d", "reason": ""})
                assert granted.status_code == 303
                mine = prof.get("/dashboard/student", params={"id": "ada", "lang": "en"})
                assert 'data-why="extension"' in mine.text and \
                    f"{QKV.points - MAX / 2:g} → {QKV.points:g} / {MAX:g}" in mine.text
                sheet = prof.get("/dashboard/download/score-history.csv").text
                assert sheet.count("\n") == 4 and "extension" in sheet      # header, two grades, one extension
            with signed_in(url, who["ada"]) as ada:
                page = ada.get("/me", params={"lang": "en"})
                assert "Score history" in page.text and 'data-why="extension"' in page.text
                assert f"{QKV.points - MAX / 2:g} → {QKV.points:g} / {MAX:g} (2 of it waiting for a person)" \
                    in page.text and "ben" not in page.text
            with signed_in(url, who["ben"]) as ben:
                page = ben.get("/me", params={"lang": "zh"})
                assert "成绩变化记录" in page.text and 'data-why="extension"' not in page.text
                assert "评分程序" in page.text                       # the grader, in the student's language
        assert repository.known_students(engine) >= {"ada", "ben"}
        assert dt.datetime.now(dt.timezone.utc) > history.changes(engine)[-1].at
    finally:
        engine.dispose()
