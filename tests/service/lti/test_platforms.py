"""Issue 65, findings 1 and 2: the LTI tool bound to its LMS course(s), and every page session held by a live grant.

A deployment is a whole Moodle site or Canvas account: a second LMS course of the same deployment (its own teacher,
its own learners, correctly signed by the same platform) is refused whatever its role, nobody is signed in, and the
refusal is in the record of actions; the course is listed as asking until this service's instructor binds it. A
session opened by a launch ends at once when its grant does: the student taken off the roster, the LMS course
unbound, the role the LMS gives changed; a launch asks the roster again every time. On SQLite and PostgreSQL.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from lti_platform import INSTRUCTOR, LEARNER, TA, Lms, launch, tool_with_lms
from served import at_revision, free_port
from late_class import LATE_COURSE, QKV, grade
from pages import browser, csrf_of, said, sign_in
from autograder.course.roster import Member
from autograder.service import db, lti_tables, people, sessions, tables, tokens
from autograder.service.lti import hub_users, nrps, outbox
from autograder.service.lti import platforms as P
from autograder.service.tokens import Caller

ROOT = Path(__file__).resolve().parents[3]
OTHER = "course-of-another-teacher"


@pytest.fixture
def lti(service_database):
    """The service and the simulated LMS (its course bound, learners enrolled), on SQLite then PostgreSQL."""
    with tool_with_lms(service_database, LATE_COURSE, "test") as served:
        yield served


def _rows(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def _actions(engine, action: str) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [(r.target, r.detail) for r in conn.execute(select(tables.Action).where(tables.Action.action == action))]


def _signed_in(client, page: str = "/me") -> bool:
    return client.get(page).status_code == 200


def test_a_second_lms_course_of_the_same_deployment_gets_no_role_until_our_instructor_binds_it(lti):
    url, lms, engine, _app = lti
    sessions_before, members_before, people_before = (_rows(engine, t) for t in (tables.WebSession, lti_tables.LtiUser,
                                                                                 tables.Person))
    # The other course's teacher, its TA and a learner: the same platform, key, deployment; another context.
    for sub, roles in (("other-prof", [INSTRUCTOR]), ("other-ta", [TA]), ("other-learner", [LEARNER])):
        with browser(url) as client:
            refused = launch(client, lms, lms.prepare(lms.claims(sub, roles, context=OTHER, title="Another course",
                                                                 email=f"{sub}@uni.example", sourcedid=sub)))
            assert refused.status_code == 403 and said(refused, "service.lti.unbound_course"), refused.text[:500]
            assert "Another course" in refused.text and OTHER in refused.text
            assert sessions.COOKIE not in client.cookies
            assert client.get("/dashboard").status_code == 303 and client.get("/me").status_code == 303
    # The deep-linking request of that teacher too (the first way an LMS adds the tool).
    with browser(url) as client:
        refused = launch(client, lms, lms.prepare(lms.claims("other-prof", [INSTRUCTOR], context=OTHER,
                                                             message="LtiDeepLinkingRequest")))
        assert refused.status_code == 403 and said(refused, "service.lti.unbound_course")
    # Nobody signed in, no member, nobody enrolled (the platform enrols learners of the bound course only).
    assert (_rows(engine, tables.WebSession), _rows(engine, lti_tables.LtiUser), _rows(engine, tables.Person)) == (
        sessions_before, members_before, people_before)
    refusals = _actions(engine, "lti.refused")
    assert len(refusals) == 4 and {t for t, _ in refusals} == {OTHER}
    assert any("other-prof" in d and "instructor" in d for _, d in refusals)
    # Our instructor (a kit token) sees the course asking, and binds it.
    token = tokens.issue(engine, "prof", role="instructor", by="test")
    with browser(url) as prof:
        assert sign_in(prof, token).status_code == 303
        page = prof.get("/dashboard/lti")
        assert page.status_code == 200 and f'data-context="{OTHER}" class="asking"' in page.text
        [row] = [c for c in P.courses(engine) if c.context_id == OTHER]
        assert not row.bound
        bound = prof.post("/dashboard/lti/bind", data={"csrf": csrf_of(page.text), "context": str(row.id),
                                                       "bound": "1"})
        assert bound.status_code == 303
        assert f'data-context="{OTHER}" class="bound"' in prof.get("/dashboard/lti").text
    assert [t for t, _ in _actions(engine, "lti.bind")] == [lms.context, OTHER]
    # Now its teacher is taken, with the LMS's role, holding by that membership.
    with browser(url) as other:
        assert launch(other, lms, lms.prepare(lms.claims("other-prof", [INSTRUCTOR], context=OTHER,
                                                         email="other-prof@uni.example"))).status_code == 303
        assert _signed_in(other, "/dashboard")
        # Unbound again (by the command line): the session ends at the next request, the launch is refused again.
        done = _cli(engine, "unbind", "--course", OTHER)
        assert done.returncode == 0, done.stderr
        assert other.get("/dashboard").status_code == 303
        again = launch(other, lms, lms.prepare(lms.claims("other-prof", [INSTRUCTOR], context=OTHER)))
        assert again.status_code == 403 and said(again, "service.lti.unbound_course")
    # The member pull reads the bound course's list only (the other's, known from its launch, is another class).
    with browser(url) as ours:
        assert launch(ours, lms, lms.prepare(lms.claims("our-learner", [LEARNER], sourcedid="s9"))).status_code == 303
    assert all(c.memberships_url for c in P.courses(engine))
    nrps.pull(_app.state.lti, by="test")
    assert lms.members_asked == [lms.context]


def test_a_ta_cannot_bind_a_course_and_a_student_cannot_reach_the_page(lti):
    url, lms, engine, _app = lti
    with browser(url) as client:
        launch(client, lms, lms.prepare(lms.claims("x", [LEARNER], context=OTHER)))
    [row] = [c for c in P.courses(engine) if c.context_id == OTHER]
    with browser(url) as ta:
        assert launch(ta, lms, lms.prepare(lms.claims("t2", [TA], name="T. A."))).status_code == 303
        page = ta.get("/dashboard/lti")
        assert page.status_code == 200 and "/dashboard/lti/bind" not in page.text
        refused = ta.post("/dashboard/lti/bind", data={"csrf": csrf_of(page.text), "context": str(row.id),
                                                       "bound": "1"})
        assert refused.status_code == 403
    assert not [c for c in P.courses(engine) if c.context_id == OTHER][0].bound


def test_a_student_taken_off_the_roster_loses_the_launched_session_and_is_refused_at_the_next_launch(
        service_database):
    with tool_with_lms(service_database, LATE_COURSE, "test") as (url, lms, engine, _app):
        P.register(engine, **lms.registration(), enrol=False, by="test")        # no --enrol
        people.import_members(engine, [Member("s2026001", name="Ada", canvas_id="77")], by="test")
        with browser(url) as ada:
            claims = lms.claims("uuid-ada", [LEARNER], name="Ada", custom={"canvas_user_id": "77"})
            assert launch(ada, lms, lms.prepare(claims)).status_code == 303
            assert _signed_in(ada)
            gone, _revoked = tokens.remove_student(engine, "s2026001", by="test")
            assert gone
            assert ada.get("/me").status_code == 303                    # signed out at once
            # Her LMS link is still recorded: the launch asks the roster anyway, and she is not on it.
            refused = launch(ada, lms, lms.prepare(claims))
            assert refused.status_code == 403 and said(refused, "service.lti.not_on_roster")
            assert ada.get("/me").status_code == 303
        # Back on the roster, she is taken again; with --enrol a removed learner is enrolled again by her launch.
        P.register(engine, **lms.registration(), enrol=True, by="test")
        with browser(url) as ada:
            assert launch(ada, lms, lms.prepare(claims)).status_code == 303 and _signed_in(ada)
        assert people.on_roster(engine, "s2026001")


def test_a_role_the_lms_changed_ends_the_staff_session_opened_with_the_old_one(lti):
    url, lms, engine, _app = lti
    with browser(url) as first, browser(url) as second:
        assert launch(first, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], email="t@uni.example"))
                      ).status_code == 303
        assert "/dashboard/lti/bind" in first.get("/dashboard/lti").text         # an instructor's form
        # The LMS now says TA: the new launch is a TA, and the instructor's session of before ends.
        assert launch(second, lms, lms.prepare(lms.claims("t1", [TA], email="t@uni.example"))).status_code == 303
        assert first.get("/dashboard/lti").status_code == 303
        page = second.get("/dashboard/lti")
        assert page.status_code == 200 and "/dashboard/lti/bind" not in page.text


def test_removal_ends_every_session_of_the_student_whatever_opened_it(service_engine):
    engine = service_engine
    people.import_members(engine, [Member("s1", name="A"), Member("s2", name="B")], by="test")
    hub, _ = sessions.start(engine, Caller("student", "s1"))                    # JupyterHub's word
    token = tokens.issue(engine, "s1", by="test")
    by_token, _ = sessions.start(engine, tokens.caller(engine, token))
    other, _ = sessions.start(engine, Caller("student", "s2"))
    staff, _ = sessions.start(engine, Caller("ta", "s1"))                     # a TA of the same name stays
    assert all(sessions.find(engine, v) for v in (hub, by_token, other, staff))
    tokens.remove_student(engine, "s1", by="test")
    assert sessions.find(engine, hub) is None and sessions.find(engine, by_token) is None
    assert sessions.find(engine, other) is not None and sessions.find(engine, staff) is not None


def test_only_bound_courses_are_pulled_linked_from_the_hub_and_bound_from_the_command_line(service_engine, tmp_path):
    engine = service_engine
    lms = Lms(free_port())
    platform = P.register(engine, **lms.registration(), courses=[lms.context], by="test")
    people.import_members(engine, [Member("s2026001", name="Ada")], by="test")
    claims = lms.claims("lms-ada", [LEARNER], context=OTHER)
    claims.update({"iss": lms.issuer, "aud": lms.client_id})
    # A Hub user launched from another course of the same deployment: not linked, the course listed as asking.
    assert hub_users.link(engine, "s2026001", claims, outbox.backfill) == hub_users.UNBOUND
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(lti_tables.LtiUser)).scalar_one() == 0
    asking = {c.context_id: c.bound for c in P.courses(engine)}
    assert asking == {lms.context: True, OTHER: False}
    assert platform.enrol is False


def _cli(engine, *args: str) -> subprocess.CompletedProcess:
    database = engine.url.render_as_string(hide_password=False) if engine.dialect.name != "sqlite" else \
        engine.url.database
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "autograder", "serve", "--database", database, "lti", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def test_the_command_line_registers_with_a_course_lists_binds_and_unbinds(tmp_path):
    database = tmp_path / "service.db"
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    try:
        base = ["register", "--issuer", "https://moodle.uni.example", "--client-id", "abc", "--deployment", "1",
                "--auth-url", "https://moodle.uni.example/mod/lti/auth.php", "--token-url",
                "https://moodle.uni.example/mod/lti/token.php", "--jwks-url",
                "https://moodle.uni.example/mod/lti/certs.php"]
        alone = _cli(engine, *base)
        assert alone.returncode == 0 and "no LMS course is bound yet" in alone.stdout
        done = _cli(engine, *base, "--course", "42")
        assert done.returncode == 0, done.stderr
        assert "no LMS course is bound yet" not in done.stdout
        assert _cli(engine, "bind", "--course", "43").returncode == 0
        assert _cli(engine, "unbind", "--course", "42").returncode == 0
        listed = _cli(engine, "courses")
        assert listed.returncode == 0
        assert "asking  42" in listed.stdout and "bound   43" in listed.stdout
        missing = _cli(engine, "unbind", "--course", "99")
        assert missing.returncode != 0 and "no LMS course '99'" in missing.stderr
    finally:
        engine.dispose()


def test_courses_recorded_before_the_binding_wait_for_their_instructor(service_database):
    engine = db.engine_for(service_database)
    try:
        with at_revision(engine, "0008") as conn:
            conn.execute(lti_tables.LtiPlatform.__table__.insert().values(
                issuer="https://lms", client_id="c", deployments=["d"], auth_url="https://lms/a",
                token_url="https://lms/t", jwks_url="https://lms/j", token_audience="", enrol=False, changes_seen=0,
                added_at=tables.utcnow()))
            conn.exec_driver_sql("INSERT INTO lti_contexts (platform_id, context_id, deployment_id, title, "
                                 "lineitems_url, scopes, memberships_url, updated_at) VALUES (1, 'old', 'd', 'Old', "
                                 "'', '[]', '', '2026-01-01 00:00:00+00:00')")
        db.upgrade(engine)
        assert [(c.context_id, c.bound) for c in P.courses(engine)] == [("old", False)]
    finally:
        engine.dispose()


def test_the_scores_of_an_unbound_course_wait_and_are_sent_once_it_is_bound_again(lti):
    url, lms, engine, app = lti
    with browser(url) as client:
        assert launch(client, lms, lms.prepare(lms.claims("lms-a", [LEARNER], sourcedid="ada"))).status_code == 303
    [ours] = [c for c in P.courses(engine) if c.context_id == lms.context]
    P.set_bound(engine, ours.id, False, by="test")
    grade(engine, "ada", QKV, 4.0)
    done = outbox.sync(app.state.lti, LATE_COURSE)
    assert (done.sent, done.failed) == (0, 0) and lms.scores == []
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(lti_tables.LtiScore)
                            .where(lti_tables.LtiScore.state == "pending")).scalar_one() == 1
    P.set_bound(engine, ours.id, True, by="test")
    assert outbox.sync(app.state.lti, LATE_COURSE).sent == 1 and lms.cell(QKV.id, "lms-a") == 4.0
