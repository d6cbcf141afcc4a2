"""Issue 52's JupyterHub part: a Hub signing its users in with ltiauthenticator's LTI13Authenticator (LTI 1.3), the
Hub user's LMS identity (their auth_state) linked by the service, their scores back to the LMS gradebook.

First the linking's rules on a database of its own (autograder/service/lti/hub_users.py: which claims link a Hub
user, which are refused and why, the roster's ids, the outbox's backfill, the link's own line item, the Hub read again
only after a while and not at all while it is away). Then a real JupyterHub (as tests/service/test_hub.py starts it:
.venv's jupyterhub, configurable-http-proxy, `autograder serve` as its managed service) configured with the lines of
docs/admin/lti.md as printed, against the simulated LMS of tests/lti_platform.py: the LMS launches a student into the
Hub (the Hub's own LTI 1.3 login: OIDC initiation, the platform's signed id_token form-posted to the Hub's callback),
the Hub keeps the claims as the user's auth_state, the student submits with `autograder submit` and the Hub token
(what `submit()` sends inside a Hub server), a worker of the service grades, the service's passback links the Hub
user to the LMS user and sends the counted score into the link's own gradebook column, and `serve lti sync` finds
nothing more to send. The real Hub's test fails (never skips) without JupyterHub, ltiauthenticator or the proxy.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select

from conftest import copy_course
from lti_platform import INSTRUCTOR, LEARNER, Lms
from served import free_port, serving
from late_class import LATE_COURSE, QKV, grade
from hubs import COURSE, PREFIX, PROXY, SETUP, RealHub, hub_config, hub_env, running_hub, solved_notebook
from autograder.course.roster import Member
from autograder.service import db, lti_tables, people, tables
from autograder.service.errors import ApiError
from autograder.service.lti import hub_users, outbox
from autograder.service.lti import platforms as P

ROOT = Path(__file__).resolve().parents[3]
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
#: What the jupyterhub_config.py lines of docs/admin/lti.md name for a site (the LMS's), and what the test has instead.
DOC_PLACES = ("https://canvas.instructure.com", "HUB_CLIENT_ID", "https://sso.canvaslms.com/api/lti/authorize_redirect",
              "https://sso.canvaslms.com/api/lti/security/jwks")


# == the linking's rules ==============================================================================================
@pytest.fixture
def linking(tmp_path):
    """A service database with the simulated LMS registered (not served: only its claims are used), a roster of two
    (s2026001 with Canvas id 77), and the Hub users' links: (engine, lms, platform)."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    lms = Lms(free_port())
    platform = P.register(engine, **lms.registration(), courses=[lms.context], by="test")
    people.import_members(engine, [Member("s2026001", name="Ada", canvas_id="77"),
                                   Member("s2026002", name="Ben", email="ben@uni.example")], by="test")
    try:
        yield engine, lms, platform
    finally:
        engine.dispose()


def _learner(lms: Lms, sub: str, **custom: Any) -> dict[str, Any]:
    """The claims LTI13Authenticator keeps as a Learner's auth_state (the id_token's, iss and aud included)."""
    return {"iss": lms.issuer, "aud": lms.client_id, "nonce": "n", **lms.claims(sub, [LEARNER], custom=custom)}


def _members(engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as conn:
        return {r.sub: (r.who, r.role) for r in conn.execute(select(lti_tables.LtiUser))}


def test_a_hub_learners_claims_link_them_under_their_hub_name_by_the_rosters_ids(linking):
    engine, lms, _platform = linking
    grade(engine, "s2026001", QKV, 5.0)                      # a score before the link: the backfill brings it
    outbox.enqueue(engine)                                   # (the platform has seen it, with no member for it yet)
    state = _learner(lms, "lms-ada", canvas_user_id="77", student_id="s2026001")
    assert hub_users.link(engine, "s2026001", state, outbox.backfill) == hub_users.LINKED
    assert _members(engine) == {"lms-ada": ("s2026001", "student")}
    with engine.connect() as conn:
        rows = conn.execute(select(lti_tables.LtiScore.points, lti_tables.LtiScore.assignment)).all()
        context = conn.execute(select(lti_tables.LtiContext.context_id, lti_tables.LtiContext.lineitems_url)).one()
    assert [(r.points, r.assignment) for r in rows] == [(5.0, QKV.id)]
    assert context == (lms.context, f"{lms.url}/{lms.context}/lineitems")
    assert hub_users.link(engine, "s2026001", state, outbox.backfill) == hub_users.KNOWN
    grade(engine, "s2026001", QKV, 7.0)                      # a later change: the outbox's own, through the link
    assert outbox.enqueue(engine) == 1
    # A student the roster does not hold is linked (the Hub says who they are), and not put on it without --enrol.
    assert hub_users.link(engine, "s2026009", _learner(lms, "lms-9"), outbox.backfill) == hub_users.LINKED
    assert not people.on_roster(engine, "s2026009")
    # The link's own column (a Canvas assignment link: its lineitem claim, the kit's assignment in a custom field).
    column = f"{lms.url}/{lms.context}/lineitems/41"
    link = {**_learner(lms, "lms-ben", assignment=QKV.id), "email": "ben@uni.example",
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": [], "lineitems": f"{lms.url}/{lms.context}/lineitems", "lineitem": column}}
    # (the roster's s2026002 by the email: not under the Hub name ben@uni.example)
    assert hub_users.link(engine, "ben@uni.example", link, outbox.backfill, {QKV.id}) == hub_users.CONFLICT
    assert hub_users.link(engine, "s2026002", link, outbox.backfill, {QKV.id}) == hub_users.LINKED
    with engine.connect() as conn:
        assert conn.execute(select(lti_tables.LtiLineItem.assignment, lti_tables.LtiLineItem.url)).all() == \
            [(QKV.id, column)]


def test_claims_that_name_no_registered_learner_or_another_student_link_nothing(linking, caplog):
    engine, lms, _platform = linking
    learner = _learner(lms, "lms-ada", canvas_user_id="77")
    refused = {
        "no state": (None, hub_users.NOT_LTI),
        "another authenticator's": ({"access_token": "x", "name": "s2026001"}, hub_users.NOT_LTI),
        "another issuer": ({**learner, "iss": "https://evil.example"}, hub_users.UNKNOWN_PLATFORM),
        "another client id": ({**learner, "aud": ["another-tool"]}, hub_users.UNKNOWN_PLATFORM),
        "another deployment": ({**learner, LTI + "deployment_id": "dep-other"}, hub_users.DEPLOYMENT),
        "an instructor": ({**learner, LTI + "roles": [INSTRUCTOR]}, hub_users.NOT_LEARNER),
        "no user id": ({**learner, "sub": ""}, hub_users.NOT_LEARNER),
        # The roster knows LMS user 77 as s2026001: not under another Hub name (a score never to the wrong one).
        "the roster's s2026001 as ada": (learner, hub_users.CONFLICT),
    }
    for why, (state, outcome) in refused.items():
        assert hub_users.link(engine, "ada", state, outbox.backfill) == outcome, why
    assert _members(engine) == {}
    assert "ada is LMS user lms-ada" in caplog.text and "s2026001" in caplog.text
    # Linked, then another LMS user under the same Hub name (LTI13Authenticator.username_key on a shared value).
    assert hub_users.link(engine, "s2026001", learner, outbox.backfill) == hub_users.LINKED
    other = _learner(lms, "lms-eve")
    assert hub_users.link(engine, "s2026001", other, outbox.backfill) == hub_users.CONFLICT
    assert _members(engine) == {"lms-ada": ("s2026001", "student")}
    # With --enrol, a Hub learner not on the roster is added to it under their Hub name.
    P.register(engine, **lms.registration(), enrol=True, by="test")
    assert hub_users.link(engine, "s2026010", _learner(lms, "lms-10", student_id="s2026010"),
                          outbox.backfill) == hub_users.LINKED
    assert people.on_roster(engine, "s2026010")


class _Hub:
    """A stand-in for :class:`autograder.service.hub.Hub`'s auth_state: the users' states, each read counted."""

    def __init__(self, states: dict[str, Any]):
        self.states, self.asked, self.away = states, [], False

    def auth_state(self, name: str) -> Any:
        if self.away:
            raise ApiError(503, "hub.unavailable", retry_after=10)
        self.asked.append(name)
        return self.states.get(name)


def test_the_hub_is_asked_for_the_changed_students_once_a_while_and_not_while_away(linking):
    engine, lms, _platform = linking
    hub = _Hub({"s2026001": _learner(lms, "lms-ada", canvas_user_id="77"), "s2026003": _learner(lms, "lms-3")})
    users = hub_users.HubUsers(hub, outbox.backfill)       # type: ignore[arg-type]
    assert users.refresh(engine, LATE_COURSE) == {}         # no score changed: nobody asked about
    hub.away = True
    grade(engine, "s2026001", QKV, 4.0)
    assert users.refresh(engine, LATE_COURSE) == {} and hub.asked == []
    hub.away = False
    grade(engine, "s2026003", QKV, 6.0)
    grade(engine, "s2026002", QKV, 2.0)                     # a Hub user without LTI claims (another authenticator)
    assert users.refresh(engine, LATE_COURSE) == {"s2026001": hub_users.LINKED, "s2026003": hub_users.LINKED,
                                                  "s2026002": hub_users.NOT_LTI}
    assert outbox.enqueue(engine) == 2                      # the two linked students' scores, none for s2026002
    grade(engine, "s2026001", QKV, 9.0)
    assert users.refresh(engine, LATE_COURSE) == {} and len(hub.asked) == 3     # read again only after RECHECK
    users.recheck = 0.0
    assert users.refresh(engine, LATE_COURSE) == {"s2026001": hub_users.KNOWN}
    assert outbox.enqueue(engine) == 1


def test_the_hubs_auth_state_is_none_where_it_shows_none_and_a_503_where_the_hub_is_away(fake_hub):
    from autograder.service.hub import Hub

    hub = Hub(COURSE, hub_env(fake_hub))
    assert hub.auth_state("ada") is None                    # (the stand-in has no /users/NAME: a 404)
    away = Hub(COURSE, hub_env(fake_hub, JUPYTERHUB_API_URL=f"http://127.0.0.1:{free_port()}/hub/api"))
    with pytest.raises(ApiError) as raised:
        away.auth_state("ada")
    assert raised.value.status == 503 and raised.value.key == "hub.unavailable"


# == a real JupyterHub with LTI13Authenticator ========================================================================
class HubLms(Lms):
    """The simulated LMS with the Hub registered as its tool: ``/hub-auth`` answers the Hub's authorization request
    (its redirect URI, the Hub's LTI callback) with the id_token of the launch the test prepared, as ``/auth`` answers
    the service's."""

    hub_callback = ""

    def _app(self) -> Any:
        app = super()._app()

        @app.get("/hub-auth")
        def hub_auth(request: Request) -> JSONResponse:
            q = request.query_params
            assert q["scope"] == "openid" and q["response_type"] == "id_token" and q["response_mode"] == "form_post"
            assert q["client_id"] == self.client_id and q["redirect_uri"] == self.hub_callback and q["prompt"] == "none"
            claims = self.prepared.pop(q["login_hint"])["claims"]
            now = int(time.time())
            token = self.sign({"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300,
                               "nonce": q["nonce"], **claims})
            return JSONResponse({"action": q["redirect_uri"], "state": q["state"], "id_token": token})

        return app


def doc_lti_lines() -> str:
    """The jupyterhub_config.py lines of docs/admin/lti.md, as an instructor copies them."""
    text = (ROOT / "docs" / "admin" / "lti.md").read_text(encoding="utf-8")
    opening = text.index("```python\n", text.index("## Inside JupyterHub")) + len("```python\n")
    block = text[opening:text.index("```", opening)]
    missing = [place for place in DOC_PLACES if place not in block]
    assert not missing, f"the docs' LTI lines no longer name {missing}: update DOC_PLACES"
    return block


@contextlib.contextmanager
def lti_hub(folder: Path, lms: HubLms) -> Iterator[tuple[RealHub, Path]]:
    """JupyterHub with the docs' Hub lines (docs/admin/jupyterhub.md), then the docs' LTI lines with the simulated
    LMS's places put in, and `autograder serve` as its managed service: (the Hub, the service's database)."""
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    if not jupyterhub.exists():
        pytest.fail(f"JupyterHub is not installed in {Path(sys.executable).parent}: {SETUP}")
    if not os.access(PROXY, os.X_OK):
        pytest.fail(f"configurable-http-proxy is not installed ({PROXY}): {SETUP}")
    try:
        import ltiauthenticator.lti13.auth  # noqa: F401 - what the Hub loads
    except ImportError:
        pytest.fail(f"jupyterhub-ltiauthenticator is not installed: {SETUP}")
    ports = {name: free_port() for name in ("proxy", "proxy_api", "hub", "service")}
    admin = secrets.token_hex(16)
    course = copy_course(folder / "course")
    config = hub_config(folder, ports, admin, secrets.token_hex(8), course)
    lines = doc_lti_lines()
    for place, here in zip(DOC_PLACES, (lms.issuer, lms.client_id, f"{lms.url}/hub-auth", f"{lms.url}/jwks")):
        lines = lines.replace(place, here)
    with config.open("a", encoding="utf-8") as file:
        file.write("\n# -- the docs' LTI lines (docs/admin/lti.md) --\n" + lines)
    url = f"http://127.0.0.1:{ports['proxy']}"
    lms.tool_url = f"{url}{PREFIX.rstrip('/')}"          # the service: its JWKS signs the passback's requests
    lms.hub_callback = f"{url}/hub/lti13/oauth_callback"
    with running_hub(jupyterhub, config, folder, url, admin, "", JUPYTERHUB_CRYPT_KEY=secrets.token_hex(32)) as hub:
        yield hub, folder / "service.db"


def _wait(what: str, hub: RealHub, done: Any, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"{what} did not happen in {seconds:g} s:\n{hub.log_tail()}")


@pytest.mark.slow
def test_a_student_launched_from_the_lms_into_the_hub_submits_and_the_lms_gradebook_gets_the_score(tmp_path):
    port = free_port()
    lms = HubLms(port)
    column = lms._create(lms.context, {"label": "QKV (the LMS's own assignment)", "scoreMaximum": 10})["id"]
    with serving(lms.app, port=port), lti_hub(tmp_path, lms) as (hub, database):
        engine = db.engine_for(str(database))
        try:
            P.register(engine, **lms.registration(), courses=[lms.context], by="test")   # serve lti register
            people.import_members(engine, [Member("s2026001", name="Ada", canvas_id="77")], by="test")
            # The LMS launches ada (a Canvas assignment link: its own column, the kit's assignment) into the Hub.
            claims = lms.claims("lms-ada", [LEARNER], name="Ada", email="ada@uni.example", lineitem=column,
                                custom={"student_id": "s2026001", "canvas_user_id": "77", "assignment": QKV.id})
            hint = lms.prepare(claims)
            with httpx.Client(base_url=hub.url, timeout=30) as browser:
                started = browser.get("/hub/lti13/oauth_login", params={
                    "iss": lms.issuer, "login_hint": hint, "client_id": lms.client_id,
                    "target_link_uri": f"{hub.url}/hub/", "lti_deployment_id": lms.deployment})
                assert started.status_code == 302, (started.text, hub.log_tail())
                where = urlsplit(started.headers["location"])
                assert f"{where.scheme}://{where.netloc}{where.path}" == f"{lms.url}/hub-auth"
                assert parse_qs(where.query)["redirect_uri"] == [lms.hub_callback]
                answer = httpx.get(started.headers["location"], timeout=30).json()
                landed = browser.post(answer["action"], data={"id_token": answer["id_token"],
                                                              "state": answer["state"]})
                assert landed.status_code == 302, (landed.status_code, landed.text[-500:], hub.log_tail())
                assert urlsplit(landed.headers["location"]).path == "/hub/"
                assert any(name.startswith("jupyterhub-session") for name in browser.cookies.keys())
            # The Hub user is the roster's id; their auth_state holds the launch's claims.
            user = hub.call("GET", "/users/s2026001")
            assert user.status_code == 200, user.text
            state = user.json()["auth_state"]
            assert state["sub"] == "lms-ada" and state["iss"] == lms.issuer and state[LTI + "deployment_id"] == \
                lms.deployment and state[LTI + "custom"]["canvas_user_id"] == "77", state
            # ada submits as submit() does inside her server: the Hub's token, the service's address from the Hub.
            home = tmp_path / "ada"
            home.mkdir()
            notebook = home / f"{QKV.id}.ipynb"
            notebook.write_bytes(solved_notebook())
            env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "AUTOGRADER_", "JPY_"))}
            env.update(HOME=str(home), JUPYTERHUB_API_TOKEN=hub.token_of("s2026001"), AUTOGRADER_SERVER=hub.service)
            sent = subprocess.run([str(Path(sys.executable).parent / "autograder"), "submit", str(notebook),
                                   "--language", "en"], cwd=tmp_path / "course", env=env, capture_output=True,
                                  text=True, timeout=120)
            assert sent.returncode == 0, sent.stdout + sent.stderr + hub.log_tail()
            # The worker graded it; the service's passback linked ada to lms-ada and sent the counted score, into
            # the link's own column (no second one made).
            counted = _wait("the score change", hub, lambda: _counted(engine, "s2026001"))
            _wait("the score in the LMS gradebook", hub, lambda: (column, "lms-ada") in lms.gradebook, 30)
            assert lms.gradebook[(column, "lms-ada")] == counted > 0
            [(item, score)] = lms.scores
            assert item == column and score["userId"] == "lms-ada"
            assert score["scoreMaximum"] == QKV.points + QKV.manual_points and len(lms.line_items) == 1
            assert _members(engine) == {"lms-ada": ("s2026001", "student")}
            _wait("the outbox row marked sent", hub, lambda: _states(engine) == {"sent": 1}, 10)
            # `serve lti sync`: nothing more to send (never twice).
            base = [sys.executable, "-m", "autograder", "serve", "--database", str(database), "lti", "sync"]
            again = subprocess.run(base, capture_output=True, text=True, timeout=120, cwd=tmp_path / "course",
                                   env={**env, "PYTHONPATH": str(ROOT)})
            assert again.returncode == 0 and "0 score(s) sent" in again.stdout, again.stdout + again.stderr
            assert len(lms.scores) == 1
        finally:
            engine.dispose()


def _counted(engine, student: str) -> float | None:
    with engine.connect() as conn:
        row = conn.execute(select(tables.ScoreChange.new_points).where(tables.ScoreChange.student == student)
                           .order_by(tables.ScoreChange.id.desc()).limit(1)).first()
    return row.new_points if row is not None and row.new_points is not None else None


def _states(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {r.state: r.n for r in conn.execute(select(lti_tables.LtiScore.state, func.count().label("n"))
                                                   .group_by(lti_tables.LtiScore.state))}
