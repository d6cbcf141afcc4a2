"""Issue 52: the service as an LTI 1.3 Advantage tool, against a simulated LMS on 127.0.0.1 (tests/lti_platform.py).

Registration and the tool's key; the OIDC login and the launch with its id_token checked whole (each refusal with a
clear message and nothing stored); the launched browser signed in with the LMS's role, mapped to the roster by the
LMS's ids; deep linking (exactly one line item per assignment); the passback of every counted score (one Score per
student and line item, again on each change, never the same value twice, in order, the platform's access token
cached; the platform down then back: every pending score arrives once, in order); the LMS's members into the roster.
End to end with 30 students and two assignments, graded through the real queue and score history."""
from __future__ import annotations

import csv
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jwt
import pytest
from sqlalchemy import func, select

from lti_platform import INSTRUCTOR, LEARNER, TA, launch, tool_with_lms
from served import serving
from late_class import LATE_COURSE, ON_TIME, QKV, RNN, complete, grade, regrade
from pages import browser, csrf_of, said
from autograder.course.roster import Member
from autograder.service import db, history, lti_tables, people, repository, tables
from autograder.service import queue as Q
from autograder.service.app import create_app
from autograder.service.export import export
from autograder.service.lti import nrps, outbox
from autograder.service.lti import platforms as P
from autograder.service.lti.keys import KEY_FILE
from autograder.service.lti.launch import cookie_name
from autograder.course.written import maximum

ROOT = Path(__file__).resolve().parents[3]
UTC = dt.timezone.utc
LATE = dt.datetime(2026, 1, 11, 12, 0, tzinfo=UTC)
STUDENTS = 30


@pytest.fixture
def lti(tmp_path):
    """The service (LATE_COURSE, a SQLite file) and the simulated LMS, each on a server, the LMS registered:
    (tool's url, lms, engine, app)."""
    with tool_with_lms(tmp_path / "service.db", LATE_COURSE, "test") as served:
        yield served


def stored(engine) -> dict[str, int]:
    """Rows of every table a launch writes."""
    with engine.connect() as conn:
        return {t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (lti_tables.LtiNonce, lti_tables.LtiUser, lti_tables.LtiContext, tables.WebSession,
                          tables.Person, lti_tables.LtiLineItem)}


# -- registration and the tool's key --------------------------------------------------------------------------
def test_register_keeps_the_key_0600_beside_the_database_and_serves_its_jwks(tmp_path):
    database = tmp_path / "data" / "service.db"
    database.parent.mkdir()
    base = [sys.executable, "-m", "autograder", "serve", "--database", str(database), "lti"]
    args = ["register", "--issuer", "https://canvas.instructure.com", "--client-id", "10000000000042",
            "--deployment", "7:abc", "--auth-url", "https://sso.canvaslms.com/api/lti/authorize_redirect",
            "--token-url", "https://sso.canvaslms.com/login/oauth2/token", "--jwks-url",
            "https://sso.canvaslms.com/api/lti/security/jwks", "--url", "https://grader.example.edu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "https://grader.example.edu/lti/launch" in done.stdout and "/lti/jwks.json" in done.stdout
    key = database.parent / KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600
    first = key.read_bytes()
    again = subprocess.run([*base, *args[:5], "--deployment", "8:def", *args[7:]], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, env=env)
    assert again.returncode == 0 and key.read_bytes() == first          # made once
    engine = db.engine_for(str(database))
    try:
        [platform] = P.platforms(engine)
        assert platform.deployments == ["7:abc", "8:def"] and platform.client_id == "10000000000042"
        app = create_app(engine, LATE_COURSE)
        with serving(app) as url:
            jwks = httpx.get(f"{url}/lti/jwks.json").json()
        [public] = jwks["keys"]
        assert public["kid"] == app.state.lti.key.kid and public["alg"] == "RS256" and "d" not in public
        signed = app.state.lti.key.sign({"hello": "lms"})
        assert jwt.decode(signed, jwt.PyJWK(public).key, algorithms=["RS256"]) == {"hello": "lms"}
        app.state.lti.close()
        nothing = subprocess.run([*base, "sync"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        assert nothing.returncode == 0 and "0 score(s) sent" in nothing.stdout, nothing.stdout + nothing.stderr
    finally:
        engine.dispose()


# -- launches ---------------------------------------------------------------------------------------------------
def test_a_launch_signs_in_with_the_lms_role_mapped_to_the_roster_by_lms_id(lti):
    url, lms, engine, _app = lti
    people.import_members(engine, [Member("s2026001", name="Ada", canvas_id="4242"),
                                   Member("s2026002", name="Ben", moodle_id_number="MO-7")], by="test")
    with browser(url) as ada, browser(url) as ben, browser(url) as prof, browser(url) as ta, browser(url) as eve:
        seen = launch(ada, lms, lms.prepare(lms.claims("uuid-ada", [LEARNER], custom={"canvas_user_id": 4242})))
        assert seen.status_code == 303 and seen.headers["location"].endswith("/me")
        assert "s2026001" in ada.get("/me").text
        assert ada.get("/dashboard").status_code == 403 and ada.get("/dashboard/lti").status_code == 403
        assert launch(ben, lms, lms.prepare(lms.claims("77", [LEARNER], sourcedid="MO-7"))).status_code == 303
        assert launch(prof, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], email="prof@uni.example"))
                      ).headers["location"].endswith("/dashboard")
        page = prof.get("/dashboard/lti")
        assert page.status_code == 200 and "Attention 101" in page.text and "/lti/jwks.json" in page.text
        assert launch(ta, lms, lms.prepare(lms.claims("t2", [TA, INSTRUCTOR], name="T. A."))).status_code == 303
        ta_csrf = csrf_of(ta.get("/dashboard/lti").text)
        assert ta.post("/dashboard/lti/roster", data={"csrf": ta_csrf}).status_code == 403     # instructors only
        # A learner not on the roster: added (the platform was registered with --enrol) under their SIS id.
        assert launch(eve, lms, lms.prepare(lms.claims("e9", [LEARNER], name="Eve", sourcedid="s2026009"))
                      ).status_code == 303
    with engine.connect() as conn:
        members = {r.sub: (r.who, r.role) for r in conn.execute(select(lti_tables.LtiUser))}
    assert members == {"uuid-ada": ("s2026001", "student"), "77": ("s2026002", "student"),
                       "t1": ("prof@uni.example", "instructor"), "t2": ("T. A.", "ta"), "e9": ("s2026009", "student")}
    assert people.on_roster(engine, "s2026009")
    # Without --enrol, a stranger to the roster is refused and nothing is stored.
    P.register(engine, **lms.registration(), enrol=False, by="test")
    before = stored(engine)
    with browser(url) as zed:
        refused = launch(zed, lms, lms.prepare(lms.claims("z1", [LEARNER], sourcedid="s2026099")))
    assert refused.status_code == 403 and said(refused, "service.lti.not_on_roster")
    assert stored(engine) == before


def test_every_bad_launch_is_refused_with_a_clear_message_and_nothing_stored(lti):
    url, lms, engine, app = lti
    app.state.lti.jwks_cooldown = 0.0           # (a new key is otherwise taken 30 s after the last fetch at most)
    now = int(time.time())
    learner = lms.claims("s1", [LEARNER], sourcedid="s1")
    cases = {
        "service.lti.bad_signature": lms.prepare(learner, key=lms.rogue),            # the published kid, another key
        "service.lti.unknown_key": lms.prepare(learner, key=lms.rogue, kid="not-published"),
        "service.lti.unknown_platform": lms.prepare(learner, aud="another-tool"),
        "service.lti.deployment": lms.prepare({**learner, "https://purl.imsglobal.org/spec/lti/claim/deployment_id":
                                               "dep-other"}),
        "service.lti.expired": lms.prepare(learner, iat=now - 7200, exp=now - 3600),
        "service.lti.future": lms.prepare(learner, iat=now + 3600, exp=now + 7200),
        "service.lti.azp": lms.prepare(learner, aud=[lms.client_id, "other"], azp="other"),
        "service.lti.version": lms.prepare({**learner, "https://purl.imsglobal.org/spec/lti/claim/version": "1.1"}),
        "service.lti.staff_only": lms.prepare(lms.claims("s1", [LEARNER], message="LtiDeepLinkingRequest")),
        "service.lti.no_role": lms.prepare(lms.claims("s1", ["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"])),
    }
    before = stored(engine)
    for code, hint in cases.items():
        with browser(url) as client:
            refused = launch(client, lms, hint)
        assert said(refused, code), (code, refused.text)
        assert refused.status_code in (400, 401, 403), code
        assert "autograder_session" not in refused.headers.get("set-cookie", ""), code
    # The wrong issuer: the same token from an issuer nobody registered.
    with browser(url) as client:
        answer = client.get("/lti/login", params={"iss": "https://evil.example", "login_hint": "x"})
        assert answer.status_code == 400 and said(answer, "service.lti.unknown_platform")
    # A state from another browser: the launch posted by a browser that did not start the login.
    with browser(url) as mine, browser(url) as theirs:
        refused = launch(mine, lms, lms.prepare(learner), post_to=theirs)
        assert refused.status_code == 400 and said(refused, "service.lti.state")
    assert stored(engine) == before
    # A token sent again (its nonce seen): the first launch is accepted, the replay refused, nothing more stored.
    with browser(url) as client:
        started = client.get("/lti/login", params={"iss": lms.issuer, "login_hint": lms.prepare(learner)})
        answer = httpx.get(started.headers["location"]).json()
        form = {"id_token": answer["id_token"], "state": answer["state"]}
        assert client.post("/lti/launch", data=form).status_code == 303
        after = stored(engine)
        client.cookies.set(cookie_name(answer["state"]), answer["state"])
        replayed = client.post("/lti/launch", data=form)
        assert replayed.status_code == 401 and said(replayed, "service.lti.replayed")
    assert stored(engine) == after
    # The platform's key rotated: a token signed with the new key is taken (its JWKS fetched again for the new kid).
    lms.rotate()
    with browser(url) as client:
        assert launch(client, lms, lms.prepare(learner)).status_code == 303


# -- end to end: deep linking, 30 students, the passback --------------------------------------------------------
def deep_link(client: httpx.Client, lms, assignments: list[str]) -> httpx.Response:
    seen = launch(client, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], message="LtiDeepLinkingRequest",
                                                      email="prof@uni.example")))
    assert seen.status_code == 303 and "/lti/deep-link?request=" in seen.headers["location"]
    page = client.get(seen.headers["location"])
    assert page.status_code == 200 and all(a in page.text for a in assignments)
    token = page.text.split('name="request" value="')[1].split('"')[0]
    picked = client.post("/lti/deep-link", data={"csrf": csrf_of(page.text), "request": token,
                                                 "assignment": assignments})
    assert picked.status_code == 200, picked.text
    assert f"form-action 'self' {lms.url}" in picked.headers["content-security-policy"]
    signed = picked.text.split('name="JWT" value="')[1].split('"')[0]
    return httpx.post(f"{lms.url}/deep_link_return", data={"JWT": signed})


def test_deep_links_then_thirty_students_graded_reach_the_lms_gradebook_once_in_order(lti, tmp_path):
    url, lms, engine, app = lti
    tool = app.state.lti
    with browser(url) as prof:
        assert deep_link(prof, lms, [RNN.id, QKV.id]).status_code == 200
        assert sorted((i["resourceId"], i["scoreMaximum"]) for i in lms.line_items) == [
            (RNN.id, RNN.points + RNN.manual_points), (QKV.id, QKV.points + QKV.manual_points)]
        assert deep_link(prof, lms, [QKV.id]).status_code == 200           # linked again: no second column
        assert len(lms.line_items) == 2 and "lineItem" not in lms.deep_links[-1][
            "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"][0]
        assert lms.deep_links[0]["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-platform-data"
        # A deep-link request for a deployment the platform does not have, or signed by anyone else: refused.
        for secret, deployment in ((tool.key.secret, "dep-other"), (b"x" * 32, lms.deployment)):
            forged = jwt.encode({"platform": 1, "deployment": deployment, "return": f"{lms.url}/deep_link_return",
                                 "who": "prof@uni.example", "multiple": True, "context": lms.context,
                                 "exp": int(time.time()) + 60}, secret, algorithm="HS256")
            page = prof.get(f"/lti/deep-link?request={forged}")
            assert page.status_code == 403, page.text
            assert said(page, "service.lti.deployment" if deployment == "dep-other" else "service.lti.deep_link")
    subs = {}
    for n in range(STUDENTS):
        student = f"s{n:03d}"
        with browser(url) as client:
            hint = lms.prepare(lms.claims(f"lms-{n}", [LEARNER], sourcedid=student, custom={"assignment": QKV.id}))
            assert launch(client, lms, hint).status_code == 303
        grade(engine, student, RNN, float(n % 12))
        late = n == 1                       # s001: full marks a day late (half the maximum off)
        subs[student] = grade(engine, student, QKV, QKV.points if late else float(n % 11),
                              received=LATE if late else ON_TIME)
    done = outbox.sync(tool, LATE_COURSE)
    assert (done.sent, done.failed) == (2 * STUDENTS, 0), done.errors
    assert lms.token_requests == 2           # one per scope set (line items, scores): cached until they expire
    export(engine, LATE_COURSE, tmp_path / "out")
    with (tmp_path / "out" / "grades.csv").open(encoding="utf-8-sig", newline="") as file:
        sheet = {(r["student"], r["assignment"]): float(r["total"]) for r in csv.DictReader(file)}
    assert len(sheet) == 2 * STUDENTS
    for (student, assignment), total in sheet.items():
        assert lms.cell(assignment, f"lms-{int(student[1:])}") == total, (student, assignment)
    assert lms.cell(QKV.id, "lms-1") == QKV.points - maximum(QKV).points / 2      # half the maximum off
    # The written answers wait for a person: the score says so, out of the whole maximum (the line item's).
    assert len(lms.scores) == 2 * STUDENTS and all(
        s["gradingProgress"] == "PendingManual" and s["activityProgress"] == "Completed" and s["scoreMaximum"] in
        (RNN.points + RNN.manual_points, QKV.points + QKV.manual_points) for _, s in lms.scores)
    # An extension (s001's late penalty goes) and a regrade (s002: 2 -> 9): the platform receives each once.
    repository.grant_extension(engine, student="s001", assignment=QKV.id, reason="ill", granted_by="prof",
                               due=dt.datetime(2026, 1, 12, tzinfo=UTC))
    history.note(engine, LATE_COURSE, [("s001", QKV.id)], why="extension", who="prof")
    Q.requeue(engine, [subs["s002"]])
    complete(engine, Q.claim(engine, "w", 60, now=tables.utcnow() + dt.timedelta(days=2)), QKV, 9.0, ON_TIME)
    history.note(engine, LATE_COURSE, [("s002", QKV.id)], why="regrade", who=history.WORKER)
    history.note(engine, LATE_COURSE, [("s003", QKV.id)], why="regrade", who=history.WORKER)   # no change
    received = len(lms.scores)
    assert outbox.sync(tool, LATE_COURSE).sent == 2 and outbox.sync(tool, LATE_COURSE).sent == 0
    assert [(s["userId"], s["scoreGiven"]) for _, s in lms.scores[received:]] == [("lms-1", QKV.points), ("lms-2", 9.0)]
    # The platform down: three changes wait (s004's twice), each tried once a round, backing off; none lost.
    lms.down = True
    for student, points in (("s004", 7.0), ("s005", 1.0), ("s004", 3.0)):
        regrade(engine, subs[student], student, points)
    received = len(lms.scores)
    failed = outbox.sync(tool, LATE_COURSE)
    assert failed.sent == 0 and failed.failed == 1 and "503" in failed.errors[0]
    assert outbox.sync(tool, LATE_COURSE).failed == 1          # the next row; the first waits its backoff
    with browser(url) as prof:
        launch(prof, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], email="prof@uni.example")))
        page = prof.get("/dashboard/lti").text
    assert 'data-student="s004"' in page and "503" in page
    lms.down = False
    later = tables.utcnow() + dt.timedelta(hours=2)
    back = outbox.sync(tool, LATE_COURSE, now=later)
    assert (back.sent, back.failed) == (3, 0), back.errors
    assert [(s["userId"], s["scoreGiven"]) for _, s in lms.scores[received:]] == [
        ("lms-4", 7.0), ("lms-4", 3.0), ("lms-5", 1.0)]
    stamps = [s["timestamp"] for _, s in lms.scores[received:] if s["userId"] == "lms-4"]
    assert stamps == sorted(stamps)
    assert outbox.sync(tool, LATE_COURSE, now=later).sent == 0 and lms.cell(QKV.id, "lms-4") == 3.0
    per_cell: dict[tuple[str, str], int] = {}
    for item, s in lms.scores:
        per_cell[(item, s["userId"])] = per_cell.get((item, s["userId"]), 0) + 1
    assert len(per_cell) == 2 * STUDENTS and lms.token_requests == 2


def test_the_same_value_is_never_sent_twice_and_a_deleted_line_item_is_made_again(lti):
    _url, lms, engine, app = lti
    tool = app.state.lti
    with browser(_url) as client:
        assert launch(client, lms, lms.prepare(lms.claims("lms-a", [LEARNER], sourcedid="ada"))).status_code == 303
    sub = grade(engine, "ada", QKV, 4.0)
    assert outbox.sync(tool, LATE_COURSE).sent == 1
    assert [i["resourceId"] for i in lms.line_items] == [QKV.id]           # found or made by the passback itself
    regrade(engine, sub, "ada", 8.0)
    regrade(engine, sub, "ada", 4.0)
    # Two changes back to the value sent: both sent, in order (the LMS must end on 4, not stay at 8).
    assert outbox.sync(tool, LATE_COURSE).sent == 2 and lms.cell(QKV.id, "lms-a") == 4.0
    with engine.begin() as conn:                                             # the outbox holds 4 again, say twice
        again = conn.execute(select(lti_tables.LtiScore.__table__).where(lti_tables.LtiScore.id == 3)).mappings().one()
        conn.execute(lti_tables.LtiScore.__table__.insert().values({**again, "id": None, "state": "pending"}))
    done = outbox.sync(tool, LATE_COURSE)
    assert (done.sent, done.same) == (0, 1) and len(lms.scores) == 3
    lms.line_items.clear()                                                   # the column deleted in the LMS
    regrade(engine, sub, "ada", 6.0)
    first = outbox.sync(tool, LATE_COURSE)
    assert first.failed == 1 and "404" in first.errors[0]
    assert outbox.sync(tool, LATE_COURSE, now=tables.utcnow() + dt.timedelta(minutes=5)).sent == 1
    assert [i["resourceId"] for i in lms.line_items] == [QKV.id] and lms.cell(QKV.id, "lms-a") == 6.0


# -- Names and Role Provisioning ----------------------------------------------------------------------------------
def test_the_lms_members_come_into_the_roster_page_by_page_before_anyone_submits(lti):
    url, lms, engine, app = lti
    people.import_members(engine, [Member("s0007", name="Old Name", section="B", canvas_id="99")], by="test")
    lms.members = [{"user_id": f"u{n}", "name": f"Student {n}", "email": f"s{n}@uni.example", "status": "Active",
                    "lis_person_sourcedid": f"s{n:04d}", "roles": ["Learner"]} for n in range(230)]
    lms.members += [{"user_id": "gone", "name": "Left", "status": "Inactive", "roles": ["Learner"]},
                    {"user_id": "t1", "name": "Prof", "email": "prof@uni.example", "roles": [INSTRUCTOR]}]
    with browser(url) as prof:
        launch(prof, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], email="prof@uni.example")))
        assert prof.get("/dashboard/lti").status_code == 200
        pulled = prof.post("/dashboard/lti/roster", data={"csrf": csrf_of(prof.get("/dashboard/lti").text)})
        assert pulled.status_code == 303 and "232" in httpx.URL(pulled.headers["location"]).params["notice"]
        roster = prof.get("/dashboard/roster").text
    assert lms.member_pages == 3
    roll = {r.student: r for r in people.people(engine)}
    assert len(roll) == 230 and "Left" not in roster and "Student 229" in roster
    assert (roll["s0007"].name, roll["s0007"].section, roll["s0007"].canvas_id) == ("Student 7", "B", "99")
    # A member the LMS listed gets their score before they ever launch.
    grade(engine, "s0012", QKV, 5.0)
    assert outbox.sync(app.state.lti, LATE_COURSE).sent == 1 and lms.cell(QKV.id, "u12") == 5.0
    again = nrps.pull(app.state.lti, by="cli")
    assert again.added == [] and again.read == 232 and len(people.people(engine)) == 230
