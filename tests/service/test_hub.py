"""Issue 29: the grading service as a JupyterHub service.

First against a stand-in for the Hub's API (a uvicorn thread answering ``/hub/api/user`` and the OAuth
token endpoint as the Hub does): which Hub tokens are callers and in which role, the OAuth sign-in's
state cookie and its refusals (open redirects included), ``submit()``'s token inside a single-user
server. Then against a real JupyterHub the tests start themselves (``jupyterhub`` from .venv with
configurable-http-proxy from scripts/install-hub.sh, DummyAuthenticator, SimpleLocalProcessSpawner,
``autograder serve`` as its managed service): a Hub user's token submits through the proxy and reads
its verdict, another user's reads it as not found, the instructors' group reads everything; in
Chromium, ada signs in to the Hub, runs ``submit()`` in a cell of her JupyterLab and sees the graded
verdict; the service's pages sign in through the Hub's OAuth and the teacher's dashboard lists ada.

The real Hub's tests fail (never skip) when JupyterHub or the proxy is missing: run scripts/setup.sh.
The two in the browser skip where Chromium or playwright is missing, as tests/features/test_browser.py does; their
screenshots are tests/artifacts/hub-submit.png and hub-dashboard.png. Every process the Hub started (its
proxy, the service and its worker, the single-user servers and their kernels) is stopped, failure or not.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from chromium import ARTIFACTS, CHROMIUM_FLAGS, wait_idle
from conftest import copy_course
from hubs import COURSE, PREFIX, PROXY, QKV, SETUP, USERS, RealHub, hub_config, hub_env, running_hub, \
    solved_notebook
from served import free_port, serving
from autograder.service.tokens import Caller


# == a stand-in for the Hub's API ===================================================================
def _model(name: str, *scopes: str, groups: tuple[str, ...] = (), kind: str = "user") -> dict[str, Any]:
    return {"kind": kind, "name": name, "admin": False, "groups": list(groups), "scopes": list(scopes),
            "session_id": None, "token_id": "a1"}


ACCESS = "access:services!service=autograder"


def _course(**policy: Any) -> Any:
    return SimpleNamespace(service=COURSE.service.model_copy(update=policy))


def test_the_service_is_a_hub_service_only_with_the_hubs_variables(fake_hub):
    from autograder.service.hub import hub_from_env

    assert hub_from_env(COURSE, {}) is None
    assert hub_from_env(COURSE, {"JUPYTERHUB_API_TOKEN": "x"}) is None
    assert hub_from_env(COURSE, {"JUPYTERHUB_SERVICE_PREFIX": PREFIX}) is None
    hub = hub_from_env(COURSE, hub_env(fake_hub))
    assert hub is not None
    assert (hub.prefix, hub.host, hub.port, hub.name) == (PREFIX, "127.0.0.1", 10101, "autograder")
    bare = hub_from_env(COURSE, {"JUPYTERHUB_API_TOKEN": "x", "JUPYTERHUB_SERVICE_PREFIX": "/services/grader"})
    assert (bare.prefix, bare.host, bare.port, bare.name) == ("/services/grader/", None, None, "grader")
    assert bare.auth.oauth_client_id == "service-grader"           # the Hub's default client id for a service


def test_hub_tokens_are_callers_by_the_hubs_word_and_the_courses_roles(fake_hub):
    from autograder.service.hub import Hub

    fake_hub.users.update({
        "ada-token-0001": _model("ada", ACCESS, "access:servers!server=ada/"),
        "teacher-token-01": _model("teacher", ACCESS, groups=("instructors",)),
        "tim-token-00001": _model("tim", ACCESS),                       # named in service.instructors
        "all-token-00001": _model("bo", "access:services"),             # every service: this one too
        "other-token-0001": _model("cy", "access:services!service=another"),
        "server-token-001": _model("di", "access:servers!server=di/", "users:activity!user=di"),
        "service-token-01": _model("cron", ACCESS, kind="service"),
    })
    hub = Hub(_course(instructors=["tim"]), hub_env(fake_hub))
    assert hub.api_caller("ada-token-0001") == Caller("student", "ada")
    assert hub.api_caller("teacher-token-01") == Caller("instructor", "teacher")
    assert hub.api_caller("tim-token-00001") == Caller("instructor", "tim")
    assert hub.api_caller("all-token-00001") == Caller("student", "bo")
    for no in ("other-token-0001", "server-token-001", "service-token-01", "unknown-token-01"):
        assert hub.api_caller(no) is None, no
    # Without the group (instructor_group: null) the teacher is a student; the list still counts.
    alone = Hub(_course(instructors=["tim"], instructor_group=None), hub_env(fake_hub))
    assert alone.api_caller("teacher-token-01") == Caller("student", "teacher")
    # The Hub's answers are cached (HubAuth's cache): asked again, the Hub is not.
    asked = len(fake_hub.seen)
    assert hub.api_caller("ada-token-0001") == Caller("student", "ada")
    assert hub.api_caller("unknown-token-01") is None
    assert len(fake_hub.seen) == asked
    # What cannot be a Hub token is never sent to the Hub.
    for odd in ("", "short", "a b c d e f g h", "x" * 201, "line\r\nX-Evil: 1", "tök-en-0000000"):
        assert hub.api_caller(odd) is None
    assert len(fake_hub.seen) == asked


def test_a_hub_that_does_not_answer_is_a_503_and_no_token_is_logged(fake_hub, caplog):
    from autograder.service.errors import ApiError
    from autograder.service.hub import Hub

    fake_hub.down = True
    hub = Hub(COURSE, hub_env(fake_hub))
    secret = "ada-secret-token-42"
    with caplog.at_level(logging.DEBUG), pytest.raises(ApiError) as raised:
        hub.api_caller(secret)
    assert raised.value.status == 503 and raised.value.key == "hub.unavailable" and raised.value.retry_after
    assert secret not in caplog.text and secret not in str(raised.value.msg)
    fake_hub.down = False            # nothing was cached for it: once the Hub is back, the token is asked again
    fake_hub.users[secret] = _model("ada", ACCESS)
    assert hub.api_caller(secret) == Caller("student", "ada")
    assert secret not in caplog.text


# -- the OAuth sign-in, on the app as `autograder serve` mounts it -------------------------------------
@pytest.fixture
def signing(fake_hub):
    """The OAuth routes on a FastAPI app mounted under the prefix, with a sign_in that records its calls."""
    from fastapi import FastAPI
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount

    from autograder.service.hub import Hub

    hub = Hub(_course(instructors=["tim"]), hub_env(fake_hub))
    app = FastAPI()
    signed: list[tuple[Caller, str]] = []

    def sign_in(request, who: Caller, next_url: str):
        signed.append((who, next_url))
        response = RedirectResponse(next_url, status_code=303)
        response.set_cookie("autograder_session", "s-" + who.who, path=PREFIX, httponly=True)
        return response

    app.include_router(hub.router(sign_in))
    outer = Starlette(routes=[Mount(PREFIX.rstrip("/"), app=app)])
    with serving(outer) as url, httpx.Client(base_url=url, follow_redirects=False, timeout=30) as client:
        yield SimpleNamespace(client=client, hub=hub, fake=fake_hub, signed=signed)


def _start(client, next_url: str | None = "/services/autograder/me") -> tuple[str, str, httpx.Response]:
    """/hub-login: (the state the Hub is sent, the cookie it is kept in, the response)."""
    got = client.get(f"{PREFIX}hub-login", params={} if next_url is None else {"next": next_url})
    assert got.status_code == 302, got.text
    location = urlsplit(got.headers["location"])
    query = parse_qs(location.query)
    return query["state"][0], next(iter(got.cookies.keys())), got


def test_hub_login_sends_the_browser_to_the_hubs_authorize_page_with_a_state_in_a_cookie(signing):
    state, cookie, got = _start(signing.client)
    location = urlsplit(got.headers["location"])
    assert location.path == "/hub/api/oauth2/authorize" and not location.netloc
    query = parse_qs(location.query)
    assert query["client_id"] == ["service-autograder"] and query["response_type"] == ["code"]
    assert query["redirect_uri"] == [f"{PREFIX}oauth_callback"]
    assert cookie == "service-autograder-oauth-state"
    header = got.headers["set-cookie"].lower()
    assert f"path={PREFIX}" in header and "httponly" in header and "samesite=lax" in header
    assert state in got.headers["set-cookie"] and len(state) >= 20
    # A second sign-in under way in the same browser gets a cookie of its own (as HubOAuth does).
    second, other, _ = _start(signing.client)
    assert second != state and other.startswith(cookie + "-")


def test_the_sign_in_binds_the_hubs_code_to_its_own_pkce_verifier(signing):
    """Where JupyterHub offers PKCE (6 and later), the Hub is sent an S256 challenge and the code is exchanged with
    the verifier kept in the sign-in's state: a code issued for another sign-in's challenge signs no one in."""
    from jupyterhub.services.auth import HubOAuth

    if not hasattr(HubOAuth, "generate_pkce_code_challenge"):
        pytest.skip("the installed JupyterHub (< 6) offers no PKCE")
    client, fake = signing.client, signing.fake
    state, _, got = _start(client)
    query = parse_qs(urlsplit(got.headers["location"]).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    fake.users["oauth-ada-token-1"] = _model("ada", ACCESS)
    fake.codes["code-1"], fake.challenges["code-1"] = "oauth-ada-token-1", query["code_challenge"][0]
    done = client.get(f"{PREFIX}oauth_callback", params={"code": "code-1", "state": state})
    assert done.status_code == 303, done.text
    assert signing.signed == [(Caller("student", "ada"), "/services/autograder/me")]
    # Another sign-in in this browser, handed the code the Hub issued for the first one's challenge.
    client.cookies.clear()
    other, _, _ = _start(client)
    fake.codes["code-2"], fake.challenges["code-2"] = "oauth-ada-token-1", query["code_challenge"][0]
    refused = client.get(f"{PREFIX}oauth_callback", params={"code": "code-2", "state": other})
    assert refused.status_code == 502 and len(signing.signed) == 1
    assert "code-2" not in fake.codes                                   # the Hub was asked, and said no


def test_the_callback_signs_in_the_hubs_user_and_returns_to_next(signing):
    client, fake = signing.client, signing.fake
    fake.users["oauth-ada-token-1"] = _model("ada", ACCESS)
    fake.codes["code-1"] = "oauth-ada-token-1"
    state, cookie, _ = _start(client, "/services/autograder/me?tab=2")
    done = client.get(f"{PREFIX}oauth_callback", params={"code": "code-1", "state": state})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/services/autograder/me?tab=2"
    assert signing.signed == [(Caller("student", "ada"), "/services/autograder/me?tab=2")]
    cookies = done.headers.get_list("set-cookie")
    assert any(c.startswith("autograder_session=s-ada") for c in cookies)
    assert any(c.startswith(f"{cookie}=") and "max-age=0" in c.lower() for c in cookies), cookies
    # The teacher (group instructors) and tim (service.instructors) sign in as instructors; no next: the prefix.
    for name, groups in (("teacher", ("instructors",)), ("tim", ())):
        fake.users[f"oauth-{name}-token"] = _model(name, ACCESS, groups=groups)
        fake.codes[f"code-{name}"] = f"oauth-{name}-token"
        client.cookies.clear()
        state, _, _ = _start(client, None)
        assert client.get(f"{PREFIX}oauth_callback", params={"code": f"code-{name}", "state": state}
                          ).status_code == 303
        assert signing.signed[-1] == (Caller("instructor", name), PREFIX)


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["error"]["zh"] and body["error"]["en"], body
    assert "set-cookie" not in response.headers or "autograder_session" not in response.headers["set-cookie"]


def test_the_callback_refuses_a_state_this_browser_did_not_start(signing):
    client, fake = signing.client, signing.fake
    fake.users["oauth-ada-token-1"] = _model("ada", ACCESS)
    fake.codes["code-1"] = "oauth-ada-token-1"
    state, cookie, _ = _start(client)
    _refused(client.get(f"{PREFIX}oauth_callback", params={"code": "code-1"}), 400, "hub.bad_state")
    _refused(client.get(f"{PREFIX}oauth_callback", params={"code": "code-1", "state": "x" + state}), 400,
             "hub.bad_state")
    client.cookies.clear()                   # another browser: the state (from a link) without its cookie
    _refused(client.get(f"{PREFIX}oauth_callback", params={"code": "code-1", "state": state}), 400,
             "hub.bad_state")
    _refused(client.get(f"{PREFIX}oauth_callback", params={"error": "access_denied", "state": state}), 400,
             "hub.refused")
    assert signing.signed == [] and "code-1" in fake.codes          # the code was never exchanged
    # A page for a browser, in both languages.
    page = client.get(f"{PREFIX}oauth_callback", params={"code": "code-1", "state": state},
                      headers={"accept": "text/html"})
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
    assert "重新登录" in page.text and "sign in again" in page.text


def test_the_callback_refuses_a_user_without_access_and_a_code_the_hub_does_not_take(signing):
    client, fake = signing.client, signing.fake
    fake.users["oauth-cy-token-01"] = _model("cy", "access:services!service=another")
    fake.codes["code-cy"] = "oauth-cy-token-01"
    state, _, _ = _start(client)
    _refused(client.get(f"{PREFIX}oauth_callback", params={"code": "code-cy", "state": state}), 403,
             "hub.no_access")
    state, _, _ = _start(client)
    got = client.get(f"{PREFIX}oauth_callback", params={"code": "code-cy", "state": state})   # used already
    _refused(got, 502, "hub.unavailable")
    assert "service-secret" not in got.text
    assert signing.signed == []


@pytest.mark.parametrize("target", [
    "https://evil.example/", "//evil.example/services/autograder/", "///evil.example", "/\\evil.example",
    "/services/autograder/\\..\\..\\hub", "javascript:alert(1)", "http:/services/autograder/", "/hub/admin",
    "/services/autograderX/", "/services/autograder/../../hub/admin", "/services/autograder/%2e%2e/%2e%2e/hub",
    "/services/autograder/./x", "/services/autograder/%0d%0aSet-Cookie:x=1", "services/autograder/",
    "/services/autograder/ x",
])
def test_hub_login_refuses_a_next_outside_the_service(signing, target):
    got = signing.client.get(f"{PREFIX}hub-login", params={"next": target})
    _refused(got, 400, "hub.bad_next")
    assert "location" not in got.headers


def test_local_next_keeps_the_services_own_pages(signing):
    local = signing.hub.local_next
    assert local(None) == local("") == PREFIX
    assert local("/services/autograder") == "/services/autograder"
    assert local("/services/autograder/dashboard?assignment=02_qkv_attention#top") == \
        "/services/autograder/dashboard?assignment=02_qkv_attention#top"
    assert local("/services/autograder/students/ada%40uni") == "/services/autograder/students/ada%40uni"


# -- submit() inside a single-user server --------------------------------------------------------------
def test_submit_inside_a_hub_server_sends_the_servers_token_to_the_hubs_address(tmp_path, monkeypatch):
    from autograder.selfcheck.submit import SubmitError, settings

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("AUTOGRADER_TOKEN", "AUTOGRADER_SERVER", "JUPYTERHUB_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = "http://127.0.0.1:8000/services/autograder/"
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-server-token")
    monkeypatch.setenv("AUTOGRADER_SERVER", server)
    assert settings("en") == (server.rstrip("/"), "hub-server-token")
    monkeypatch.setenv("AUTOGRADER_TOKEN", "course-token")             # a token of the student's own comes first
    assert settings("en") == (server.rstrip("/"), "course-token")
    monkeypatch.delenv("AUTOGRADER_TOKEN")
    config = tmp_path / ".config" / "autograder" / "service.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"token": "file-token"}), encoding="utf-8")
    assert settings("en") == (server.rstrip("/"), "file-token")
    # A file that names another server, and no AUTOGRADER_SERVER: the Hub's token is not sent there.
    config.write_text(json.dumps({"server": "http://elsewhere.example"}), encoding="utf-8")
    monkeypatch.delenv("AUTOGRADER_SERVER")
    with pytest.raises(SubmitError) as said:
        settings("zh")
    assert "AUTOGRADER_SERVER" in str(said.value) and "hub-server-token" not in str(said.value)
    assert "评分服务" in str(said.value)
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    with pytest.raises(SubmitError) as said:
        settings("en")
    assert "AUTOGRADER_TOKEN" in str(said.value)


def test_a_notebook_that_calls_submit_is_graded_as_any_other():
    """The documentation's `from autograder import submit; submit()` cell, saved in the notebook, is no tampering
    (it does nothing inside the grader, as check() does); the grader's other names stay off limits."""
    from autograder.grading.source_scan import TAMPERING, scan_exercise

    answer = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
              "    return e / e.sum(dim, keepdim=True)")
    for cell in ("from autograder import submit; submit()", "from autograder import check, submit\nsubmit('02')",
                 "import autograder\nautograder.submit()"):
        assert scan_exercise(["from autograder import check", answer, cell], "softmax", ["F.softmax"]) == [], cell
    for cell in ("from autograder import submit\nsubmit.__globals__['x'] = 1",
                 "import autograder\nautograder.submit = 1", "from autograder.selfcheck import submit"):
        assert any(f.startswith(TAMPERING) for f in scan_exercise([answer, cell], "softmax", ["F.softmax"])), cell


# == a real JupyterHub ==============================================================================
#: The cell ada adds: her course's self-check (found through the docs' AUTOGRADER_COURSE), then submit().
CODE = 'from autograder import check, submit; check("2.1"); submit()'
PAGE_TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def real_hub(tmp_path_factory) -> Iterator[RealHub]:
    """JupyterHub (from .venv) with configurable-http-proxy, and `autograder serve` as its managed service."""
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    if not jupyterhub.exists() or not (Path(sys.executable).parent / "jupyterhub-singleuser").exists():
        pytest.fail(f"JupyterHub is not installed in {Path(sys.executable).parent}: {SETUP}")
    if not os.access(PROXY, os.X_OK):
        pytest.fail(f"configurable-http-proxy is not installed ({PROXY}): {SETUP}")
    folder = tmp_path_factory.mktemp("hub")
    ports = {name: free_port() for name in ("proxy", "proxy_api", "hub", "service")}
    admin, password = secrets.token_hex(16), secrets.token_hex(8)
    # The course as an instructor has it: its folder, built (release/, dist/student-course/ for the servers).
    course = copy_course(folder / "course")
    built = subprocess.run([str(Path(sys.executable).parent / "autograder"), "build", "--root", str(course)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    config = hub_config(folder, ports, admin, password, course)
    for user in USERS:
        (folder / "homes" / user).mkdir(parents=True)
    with running_hub(jupyterhub, config, folder, f"http://127.0.0.1:{ports['proxy']}", admin, password) as hub:
        yield hub


@pytest.mark.slow
def test_a_hub_users_token_submits_through_the_hubs_proxy_and_reads_only_its_own(real_hub):
    ada, ben, teacher = (real_hub.token_of(u) for u in USERS)
    api = f"{real_hub.service}api/submissions"
    made = httpx.post(api, headers={"Authorization": f"Bearer {ada}"}, data={"assignment": QKV.id},
                      files={"notebook": (f"{QKV.id}.ipynb", solved_notebook(), "application/json")}, timeout=30)
    assert made.status_code == 202, made.text
    number = made.json()["submission"]
    state: dict[str, Any] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and state.get("state") not in ("done", "failed"):
        got = httpx.get(f"{api}/{number}", params={"wait": 20}, headers={"Authorization": f"Bearer {ada}"},
                        timeout=60)
        assert got.status_code == 200, got.text
        state = got.json()
    assert state["state"] == "done", (state, real_hub.log_tail())
    # Full automatic marks, out of 02's maximum (its written answer's points included, waiting for a person).
    assert state["student"] == "ada" and state["result"]["points"] == QKV.points > 0, state
    assert state["result"]["max_points"] == QKV.points + QKV.manual_points, state
    other = httpx.get(f"{api}/{number}", headers={"Authorization": f"Bearer {ben}"}, timeout=30)
    assert other.status_code == 404 and other.json()["code"] == "service.no_submission", other.text
    seen = httpx.get(f"{api}/{number}", headers={"Authorization": f"Bearer {teacher}"}, timeout=30)
    assert seen.status_code == 200 and seen.json()["student"] == "ada", seen.text
    assert "traceback" in seen.json()["result"] or "timing" in seen.json()["result"]    # the instructor's view
    assert httpx.get(f"{api}/{number}", timeout=30).status_code == 401
    assert httpx.get(f"{api}/{number}", headers={"Authorization": "Bearer not-a-hub-token-0000"},
                     timeout=30).status_code == 401
    refused = httpx.post(api, headers={"Authorization": f"Bearer {teacher}"}, data={"assignment": QKV.id},
                         files={"notebook": ("n.ipynb", solved_notebook(), "application/json")}, timeout=30)
    assert refused.status_code == 403 and refused.json()["code"] == "service.students_submit"


@pytest.fixture
def chromium(browser_kit):
    """Chromium (skipped where it or playwright is missing, as tests/features/test_browser.py does), closed after
    the test."""
    with browser_kit.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def _page(browser: Any) -> Any:
    page = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN").new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    return page


def _hub_login(page: Any, hub: RealHub, user: str) -> None:
    """The Hub's login form, as a person fills it in (DummyAuthenticator: the configured password)."""
    page.locator("#username_input").fill(user)
    page.locator("#password_input").fill(hub.password)
    page.locator("#login_submit").click()


@pytest.mark.slow
def test_a_student_signs_in_to_the_hub_and_submits_from_her_notebook(real_hub, chromium):
    """ada logs in, opens the release notebook (answered), adds `submit()` in a cell, runs it: the verdict."""
    notebook = real_hub.homes / "ada" / f"{QKV.id}.ipynb"
    notebook.write_bytes(solved_notebook())
    real_hub.start_server("ada")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "hub-submit.png"
    shot.unlink(missing_ok=True)
    page = _page(chromium)
    try:
        page.goto(f"{real_hub.url}/hub/login")
        _hub_login(page, real_hub, "ada")
        page.wait_for_url("**/user/ada/**")
        page.goto(f"{real_hub.url}/user/ada/lab/tree/{QKV.id}.ipynb")
        wait_idle(page)
        # Every cell of the notebook on the page before the last one is chosen (the kernel can be idle while
        # JupyterLab is still adding cells: a run once found one cell and put ours after it).
        count = len(json.loads(notebook.read_bytes())["cells"])
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length >= {count}")
        cells = page.locator(".jp-Notebook .jp-Cell")
        assert cells.count() == count
        cells.last.locator(".jp-InputPrompt").click()         # the last cell selected (command mode)
        page.keyboard.press("Escape")
        page.keyboard.press("b")                              # a new code cell below it, selected
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length > {count}")
        page.keyboard.press("Enter")                          # editing it
        page.keyboard.type(CODE)
        page.keyboard.press("Escape")
        cell = page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=CODE))
        assert cell.count() == 1 and cells.count() == count + 1
        assert "jp-mod-selected" in (cells.last.get_attribute("class") or "")
        page.keyboard.press("Control+s")                      # submit() sends the saved file
        page.wait_for_function("!document.querySelector('.jp-mod-dirty')")
        # Run every cell, as a student does before she hands in: her functions defined, then ours checks and submits.
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        output = cell.locator(".jp-OutputArea-output", has_text="评分完成")
        output.wait_for(timeout=150_000)
        wait_idle(page)
        text = cell.locator(".jp-OutputArea").inner_text()
        assert "已提交" in text and "Traceback" not in text and "JUPYTERHUB" not in text, text
        # The docs' recipe gives the notebook its course: the self-check ran (no "no course.yml" sentence).
        assert "全部通过" in text and "course.yml" not in text and "ConfigError" not in text, text
        # The whole notebook, the submit() cell in it, graded: full marks (the grader's scan lets the
        # notebook import autograder.submit as it lets it import autograder.check).
        most = QKV.points + QKV.manual_points          # 02's maximum, its written answer's points included
        full = f"评分完成：{QKV.points:g} / {most:g} 分"
        assert full in text, text
        assert f": done, {QKV.points:g} / {most:g}>" in text, text     # submit()'s value: one line
        cell.evaluate("node => node.scrollIntoView({block: 'center'})")
        page.mouse.move(0, 0)
        page.screenshot(path=str(shot))
    except Exception as exc:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "hub-submit-failure.png"))
        raise AssertionError(f"{exc}\n-- jupyterhub log (tail) --\n{real_hub.log_tail()}") from exc
    ada = real_hub.token_of("ada")
    mine = httpx.get(f"{real_hub.service}api/submissions", headers={"Authorization": f"Bearer {ada}"}, timeout=30)
    assert {s["student"] for s in mine.json()["submissions"]} == {"ada"} and len(mine.json()["submissions"]) >= 1
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
def test_the_services_pages_sign_in_through_the_hubs_oauth(real_hub, chromium):
    """/hub-login goes through the Hub's login and back, signed in; the teacher's dashboard lists ada."""
    ada = real_hub.token_of("ada")          # ada has a submission of her own, whichever test ran before
    made = httpx.post(f"{real_hub.service}api/submissions", headers={"Authorization": f"Bearer {ada}"},
                      data={"assignment": QKV.id},
                      files={"notebook": ("n.ipynb", solved_notebook(), "application/json")}, timeout=30)
    assert made.status_code == 202, made.text
    for user in ("ada", "teacher"):
        page = _page(chromium)
        try:
            first = page.goto(f"{real_hub.service}hub-login?next={PREFIX}")
            assert first is not None and first.status < 400
            page.wait_for_url("**/hub/login**")
            _hub_login(page, real_hub, user)
            page.wait_for_url(f"{real_hub.service}**")
            page.wait_for_load_state()
            assert urlsplit(page.url).path.startswith(PREFIX), page.url
            cookies = {c["name"]: c for c in page.context.cookies()}
            assert "autograder_session" in cookies, cookies.keys()
            assert cookies["autograder_session"]["httpOnly"] and cookies["autograder_session"]["path"] in (
                PREFIX, PREFIX.rstrip("/"))
            assert not [n for n in cookies if n.endswith("-oauth-state")], cookies.keys()
            if user == "teacher":
                shown = page.goto(f"{real_hub.service}dashboard")
                assert shown is not None and shown.status == 200, shown and shown.status
                assert "ada" in page.locator("body").inner_text()
                page.screenshot(path=str(ARTIFACTS / "hub-dashboard.png"))
            else:
                shown = page.goto(f"{real_hub.service}dashboard")        # a student's session: not the dashboard
                assert shown is not None and (shown.status >= 400 or "/dashboard" not in page.url)
        except Exception as exc:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / f"hub-oauth-{user}-failure.png"))
            raise AssertionError(f"{exc}\n-- jupyterhub log (tail) --\n{real_hub.log_tail()}") from exc
        finally:
            page.context.close()
