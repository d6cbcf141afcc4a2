"""Issue 66, item 9: the LTI tool tested without an LMS (``serve lti selftest``), and the service's public URL.

The self-test, run as an administrator runs it (the command line, against a service on a server), passes every step
and leaves the database as it found it, row for row, on SQLite and PostgreSQL; an LMS registered beside it is
untouched (nothing sent to it), and the rows of a self-test killed long ago are removed. A service whose JWKS route
is broken, or a URL where no service answers, fails the steps that need it, each naming why, with a non-zero exit
status, and leaves nothing either. ``service.public_url`` is an https URL that is not loopback; ``serve lti
register`` and the LTI page give the LMS that URL, never the address the page was opened at (127.0.0.1), and say so
where it is not set.
"""
from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy import insert, select

from lti_platform import LEARNER, launch, tool_with_lms
from served import free_port, serving
from late_class import LATE_COURSE, QKV, grade
from pages import browser, sign_in
from autograder.course.config import parse_course
from autograder.course.service_policy import ServicePolicy
from autograder.core.errors import ConfigError
from autograder.service import db, lti_tables, tables, tokens
from autograder.service.app import create_app
from autograder.service.lti import outbox, selftest_platform

ROOT = Path(__file__).resolve().parents[3]
STEPS = ("the tool's keys", "login", "launch", "deep linking", "score sent back")
PUBLIC = "https://grader.example.edu"


def _snapshot(engine) -> dict[str, list[str]]:
    """Every row of every table of the service's database."""
    with engine.connect() as conn:
        return {t.name: sorted(repr(tuple(r)) for r in conn.execute(select(t)))
                for t in tables.Base.metadata.sorted_tables}


def _database(engine) -> str:
    return engine.url.render_as_string(hide_password=False) if engine.dialect.name != "sqlite" else \
        str(engine.url.database)


def _cli(database: str, *args: str, course: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(ROOT)
    where = ["--course", str(course)] if course is not None else []
    return subprocess.run([sys.executable, "-m", "autograder", *where, "serve", "--database", database, "lti", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


def _lines(done: subprocess.CompletedProcess) -> dict[str, str]:
    """Each step's line of the self-test's output, by step."""
    found = {}
    for line in done.stdout.splitlines():
        for step in STEPS:
            if line.split(":")[0].split(None, 1)[-1] == step:
                found[step] = line
    assert set(found) == set(STEPS), done.stdout + done.stderr
    return found


def test_the_selftest_passes_every_step_and_leaves_the_database_as_it_found_it(service_database):
    with tool_with_lms(service_database, LATE_COURSE, "test") as (url, lms, engine, app):
        # An LMS already in use beside it: a student launched, a score sent.
        with browser(url) as ada:
            assert launch(ada, lms, lms.prepare(lms.claims("lms-ada", [LEARNER], sourcedid="ada"))).status_code == 303
        grade(engine, "ada", QKV, 4.0)
        assert outbox.sync(app.state.lti, LATE_COURSE).sent == 1
        received, asked = len(lms.scores), lms.token_requests
        before = _snapshot(engine)
        # A self-test killed midway two hours ago left its rows: this run removes them.
        old = tables.utcnow() - dt.timedelta(hours=2)
        with db.writing(engine).begin() as conn:
            conn.execute(insert(lti_tables.LtiPlatform).values(
                issuer=selftest_platform.ISSUER + "killed", client_id="selftest-killed", deployments=["d"],
                auth_url="http://127.0.0.1:9/a", token_url="http://127.0.0.1:9/t", jwks_url="http://127.0.0.1:9/j",
                token_audience="", enrol=False, changes_seen=0, added_at=old))
            conn.execute(insert(tables.Person).values(student=selftest_platform.STUDENT + "killed", name="", email="",
                                                      section="", canvas_id="", moodle_id_number="", added_at=old,
                                                      updated_at=old))
        done = _cli(_database(engine), "selftest", "--url", url)
        assert done.returncode == 0, done.stdout + done.stderr
        for step, line in _lines(done).items():
            assert line.startswith(f"  passed  {step}: "), done.stdout
        assert "5 of 5 steps passed" in done.stdout and "1 earlier self-test(s) killed midway removed" in done.stdout
        # Nothing of either self-test is left, and nothing else changed; the LMS in use was sent nothing.
        assert _snapshot(engine) == before
        assert (len(lms.scores), lms.token_requests) == (received, asked)


def _broken_jwks(app) -> None:
    """The app's JWKS route answers 404 (a proxy that does not pass it on, say)."""
    from starlette.responses import PlainTextResponse

    class NoJwks:
        def __init__(self, inner):
            self.inner = inner

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/lti/jwks.json":
                return await PlainTextResponse("not found", status_code=404)(scope, receive, send)
            return await self.inner(scope, receive, send)

    app.add_middleware(NoJwks)


def test_a_broken_jwks_route_fails_the_steps_that_need_it_each_saying_why(tmp_path):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    app = create_app(engine, LATE_COURSE)
    _broken_jwks(app)
    try:
        with serving(app) as url:
            before = _snapshot(engine)
            done = _cli(_database(engine), "selftest", "--url", url)
            after = _snapshot(engine)
    finally:
        app.state.lti.close()
        engine.dispose()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = _lines(done)
    assert lines["the tool's keys"].startswith("  FAILED  ") and "HTTP 404" in lines["the tool's keys"]
    assert lines["login"].startswith("  passed  ") and lines["launch"].startswith("  passed  ")
    # The platform checks the tool's deep-linking response and its token requests against the tool's JWKS.
    assert lines["deep linking"].startswith("  FAILED  ") and "jwks.json answered HTTP 404" in lines["deep linking"]
    assert lines["score sent back"].startswith("  FAILED  ") and "access token" in lines["score sent back"]
    assert "2 of 5 steps passed" in done.stdout
    assert after == before


def test_a_url_where_no_service_answers_fails_with_a_non_zero_status_and_leaves_nothing(tmp_path):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    try:
        before = _snapshot(engine)
        nobody = f"http://127.0.0.1:{free_port()}"
        done = _cli(_database(engine), "selftest", "--url", nobody)
        assert _snapshot(engine) == before
    finally:
        engine.dispose()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = _lines(done)
    assert f"no answer from {nobody}/lti/jwks.json" in lines["the tool's keys"]
    assert lines["login"].startswith("  FAILED  ") and lines["launch"].startswith("  skipped ")
    assert lines["score sent back"].startswith("  skipped ") and "0 of 5 steps passed" in done.stdout


# -- the public URL --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("given,kept", [(f"{PUBLIC}/", PUBLIC), (f"{PUBLIC}/services/autograder",
                                                                  f"{PUBLIC}/services/autograder"),
                                        ("https://10.1.2.3:8443", "https://10.1.2.3:8443")])
def test_a_public_url_is_an_https_url_kept_without_its_trailing_slash(given, kept):
    assert ServicePolicy(public_url=given).public_url == kept


@pytest.mark.parametrize("given,said", [
    ("http://grader.example.edu", "plain http"), ("https://127.0.0.1:8765", "loopback"),
    ("https://localhost", "loopback"), ("https://[::1]/", "loopback"), ("https://0.0.0.0", "loopback"),
    ("https://grader.example.edu/?x=1", "https URL"), ("https://me@grader.example.edu", "https URL"),
    ("grader.example.edu", "https URL")])
def test_a_public_url_that_no_lms_can_use_is_refused_naming_the_field(given, said):
    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError) as refused:
        parse_course({**data, "service": {"public_url": given}})
    assert "public_url" in str(refused.value) and said in str(refused.value)


REGISTER = ["register", "--issuer", "https://canvas.instructure.com", "--client-id", "1", "--deployment", "d",
            "--auth-url", "https://sso.canvaslms.com/api/lti/authorize_redirect", "--token-url",
            "https://sso.canvaslms.com/login/oauth2/token", "--jwks-url", "https://sso.canvaslms.com/api/lti/security/jwks"]


def test_register_prints_the_public_url_the_deep_link_url_placements_and_custom_fields(tmp_path, course_root):
    course = course_root / "course.yml"
    course.write_text(course.read_text(encoding="utf-8") + f"\nservice:\n  public_url: {PUBLIC}/\n", encoding="utf-8")
    database = str(tmp_path / "service.db")
    done = _cli(database, *REGISTER, course=course)
    assert done.returncode == 0, done.stderr
    for url in ("/lti/login", "/lti/launch", "/lti/jwks.json"):
        assert f"{PUBLIC}{url}" in done.stdout
    assert f"deep-link URL         {PUBLIC}/lti/launch" in done.stdout
    assert "Assignment Selection, Link Selection" in done.stdout and "canvas_user_id=$Canvas.user.id" in done.stdout
    assert "127.0.0.1" not in done.stdout and "YOUR-SERVICE" not in done.stdout
    # Without it: a placeholder, and what to set. A --url for a trial on one machine is taken, and said to be one.
    bare = _cli(database, *REGISTER)
    assert "https://YOUR-SERVICE/lti/login" in bare.stdout and "set service.public_url" in bare.stdout
    trial = _cli(database, *REGISTER, "--url", "http://127.0.0.1:8765")
    assert trial.returncode == 0 and "http://127.0.0.1:8765/lti/launch" in trial.stdout
    assert "note: an LMS elsewhere may not take these URLs" in trial.stdout


def _lti_page(database: Path, course) -> str:
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    app = create_app(engine, course)
    try:
        with serving(app) as url, browser(url) as prof:
            assert sign_in(prof, tokens.issue(engine, "prof", role="instructor", by="test")).status_code == 303
            page = prof.get("/dashboard/lti")
            assert page.status_code == 200
            return page.text
    finally:
        app.state.lti.close()
        engine.dispose()


def test_the_lti_page_shows_the_public_url_never_the_address_it_was_opened_at(tmp_path):
    public = LATE_COURSE.model_copy(update={"service": LATE_COURSE.service.model_copy(update={"public_url": PUBLIC})})
    page = _lti_page(tmp_path / "public.db", public)
    for url in ("/lti/login", "/lti/launch", "/lti/jwks.json"):
        assert f"<code>{PUBLIC}{url}</code>" in page
    assert "Assignment Selection, Link Selection" in page and "canvas_user_id=$Canvas.user.id" in page
    assert "127.0.0.1" not in page and 'id="lti-no-public-url"' not in page
    # Not set: the URLs the page was opened at, and the page says the setting is missing.
    bare = _lti_page(tmp_path / "bare.db", LATE_COURSE)
    assert 'id="lti-no-public-url"' in bare and "service.public_url" in bare
    assert "http://127.0.0.1:" in bare and "/lti/jwks.json</code>" in bare


def test_the_logins_redirect_uri_is_the_public_urls_launch_not_the_address_the_request_came_to(tmp_path):
    """Behind a proxy that passes neither scheme nor host on, the request's own URL is the inner address: the LMS
    would refuse a redirect URI it was never given. With service.public_url set, the login names the public one."""
    from urllib.parse import parse_qs, urlsplit

    from lti_platform import lms_serving
    from autograder.service.lti import platforms as P

    public = LATE_COURSE.model_copy(update={"service": LATE_COURSE.service.model_copy(update={"public_url": PUBLIC})})
    for course, want in ((public, f"{PUBLIC}/lti/launch"), (LATE_COURSE, None)):
        engine = db.engine_for(str(tmp_path / f"{'public' if want else 'bare'}.db"))
        db.upgrade(engine)
        app = create_app(engine, course)
        try:
            with serving(app) as url, lms_serving() as lms, browser(url) as client:
                P.register(engine, **lms.registration(), courses=[lms.context], by="test")
                started = client.get("/lti/login", params={"iss": lms.issuer, "login_hint": "x",
                                                           "client_id": lms.client_id})
                assert started.status_code == 302
                redirect = parse_qs(urlsplit(started.headers["location"]).query)["redirect_uri"][0]
                assert redirect == (want or f"{url}/lti/launch")
        finally:
            app.state.lti.close()
            engine.dispose()
