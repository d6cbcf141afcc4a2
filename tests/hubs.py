"""JupyterHub for the tests: a stand-in for its API, and a real Hub with the grading service as its managed service.
:func:`serving_fake_hub` answers ``/hub/api/user`` and the OAuth token endpoint as the Hub does (the ``fake_hub``
fixture of tests/conftest.py), and :func:`hub_env` gives the variables the Hub gives its service. A real Hub:
:func:`hub_config` writes a jupyterhub_config.py (this machine's Hub and proxy, the service's lines of
docs/admin/jupyterhub.md as printed, :func:`doc_hub_lines`, with only the site's places, :data:`DOC_PLACES`, put in)
and :func:`running_hub` runs ``jupyterhub`` (from .venv, with configurable-http-proxy, :data:`PROXY`) until its
service answers, and stops it and everything it started on the way out. tests/service/test_hub.py,
tests/service/lti/test_hub_users.py and tests/features/test_walkthroughs.py share them; their real Hubs fail (never
skip) without JupyterHub or the proxy, saying :data:`SETUP`.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request

from chromium import write_settings
from support import make_samples
from served import free_port, serving
from autograder.course.config import load_course

ROOT = Path(__file__).resolve().parent.parent
COURSE = load_course()
QKV = COURSE.assignment("02_qkv_attention")
PREFIX = "/services/autograder/"
PROXY = ROOT / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
SETUP = "run scripts/setup.sh (JupyterHub comes with .venv, configurable-http-proxy from scripts/install-hub.sh)"
#: The real Hub's users (DummyAuthenticator), each with a home of their own.
USERS = ("ada", "ben", "teacher")
HUB_START_S = 120


def solved_notebook() -> bytes:
    """02's notebook with every exercise solved, as a student hands it in."""
    return json.dumps(make_samples.submission(QKV, solved="all")).encode()


# == a stand-in for the Hub's API ===================================================================
@dataclass
class FakeHub:
    """What the Hub's API answers: a user model per token, an OAuth token per code; every request seen."""

    url: str
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    challenges: dict[str, str] = field(default_factory=dict)     # code -> the PKCE challenge it was issued for
    seen: list[str] = field(default_factory=list)
    down: bool = False


@contextlib.contextmanager
def serving_fake_hub() -> Iterator[FakeHub]:
    """A stand-in for the Hub's API on uvicorn (a thread): ``/hub/api/user`` answers the user model of a known
    token, ``/hub/api/oauth2/token`` exchanges a code once (its PKCE verifier checked); the hub's record."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    port = free_port()
    hub = FakeHub(f"http://127.0.0.1:{port}/hub/api")

    @app.get("/hub/api/user")
    async def user(request: Request) -> Any:
        hub.seen.append("user")
        if hub.down:
            return JSONResponse({"status": 500}, status_code=500)
        token = request.headers.get("authorization", "").removeprefix("token ")
        model = hub.users.get(token)
        return model if model is not None else JSONResponse({"status": 403}, status_code=403)

    @app.post("/hub/api/oauth2/token")
    async def oauth_token(request: Request) -> Any:
        hub.seen.append("token")
        form = await request.form()
        if form.get("client_secret") != "service-secret" or form.get("client_id") != "service-autograder":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = hub.codes.pop(str(form.get("code")), None)         # a code is good once
        challenge = hub.challenges.pop(str(form.get("code")), None)
        verifier = str(form.get("code_verifier") or "").encode()
        if challenge is not None and _s256(verifier) != challenge:    # as the Hub checks PKCE (RFC 7636, S256)
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if token is None:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return {"access_token": token, "token_type": "Bearer"}

    with serving(app, port):
        yield hub


def _s256(verifier: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).decode().rstrip("=")


def hub_env(hub: FakeHub, **more: str) -> dict[str, str]:
    """The variables JupyterHub gives its managed service `autograder`, the API at ``hub`` (``more`` added)."""
    return {"JUPYTERHUB_API_TOKEN": "service-secret", "JUPYTERHUB_SERVICE_PREFIX": PREFIX,
            "JUPYTERHUB_SERVICE_NAME": "autograder", "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:10101",
            "JUPYTERHUB_API_URL": hub.url, "JUPYTERHUB_CLIENT_ID": "service-autograder",
            "JUPYTERHUB_OAUTH_CALLBACK_URL": f"{PREFIX}oauth_callback", **more}


# == a real JupyterHub ==============================================================================
@dataclass
class RealHub:
    url: str                      # the proxy: what a browser reaches
    api: str                      # the Hub's REST API (through the proxy)
    admin: str                    # a token of the test's admin service
    password: str
    homes: Path                   # each user's home (their notebook folder) is homes / NAME
    log: Path

    @property
    def service(self) -> str:
        return f"{self.url}{PREFIX}"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.api}{path}", headers={"Authorization": f"token {self.admin}"},
                             timeout=30, **kwargs)

    def token_of(self, user: str) -> str:
        made = self.call("POST", f"/users/{user}/tokens", json={"note": "test", "expires_in": 3600})
        assert made.status_code == 201, made.text
        return made.json()["token"]

    def start_server(self, user: str) -> None:
        started = self.call("POST", f"/users/{user}/server")
        assert started.status_code in (201, 202, 400), started.text        # (400: already running)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            server = self.call("GET", f"/users/{user}").json().get("servers", {}).get("", {})
            if server.get("ready"):
                return
            time.sleep(0.25)
        raise AssertionError(f"{user}'s server did not start in 90 s:\n{self.log_tail()}")


#: What the jupyterhub_config.py of docs/admin/jupyterhub.md names for a site, and what this test's site has instead.
DOC_PLACES = ("/srv/course", "http://127.0.0.1:10101",
              "postgresql+psycopg://grader@/autograder?host=/var/run/postgresql&port=5433", "/srv/grader",
              "https://hub.example.edu/services/autograder")


def doc_hub_lines() -> str:
    """The jupyterhub_config.py lines of docs/admin/jupyterhub.md, as an instructor copies them."""
    text = (ROOT / "docs" / "admin" / "jupyterhub.md").read_text(encoding="utf-8")
    opening = text.index("In `jupyterhub_config.py`:\n\n```python\n") + len("In `jupyterhub_config.py`:\n\n```python\n")
    block = text[opening:text.index("```", opening)]
    missing = [place for place in DOC_PLACES if place not in block]
    assert not missing, f"the docs' jupyterhub_config.py no longer names {missing}: update DOC_PLACES"
    return block


def hub_config(folder: Path, ports: dict[str, int], admin: str, password: str, course: Path) -> Path:
    """jupyterhub_config.py: this machine's Hub and proxy, then the docs' lines for the service exactly as
    printed (only the site's places put in: the course folder, the service's port and address, its database and
    home), then what the test itself needs (its admin service, JupyterLab's settings)."""
    bin_dir = Path(sys.executable).parent
    service_url = f"http://127.0.0.1:{ports['proxy']}{PREFIX.rstrip('/')}"
    settings = folder / "lab-settings"
    write_settings(settings)        # no news pop-up over the page, every cell in the DOM
    (folder / "service-home").mkdir()
    values = {
        "proxy": ports["proxy"], "proxy_api": ports["proxy_api"], "hub": ports["hub"], "chp": str(PROXY),
        "db": f"sqlite:///{folder / 'jupyterhub.sqlite'}", "secret": str(folder / "cookie_secret"),
        "pid": str(folder / "proxy.pid"), "password": password, "admin": admin, "users": set(USERS),
        "homes": str(folder / "homes") + "/{username}", "singleuser": [str(bin_dir / "jupyterhub-singleuser")],
        "args": ["--allow-root"] if os.geteuid() == 0 else [],
        "user_env": {"JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_PREFER_ENV_PATH": "1"},
    }
    site = """
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {proxy}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub}
c.JupyterHub.db_url = {db!r}
c.JupyterHub.cookie_secret_file = {secret!r}
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.pid_file = {pid!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {users!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r}
c.Spawner.cmd = {singleuser!r}
c.Spawner.args = {args!r}
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
""".format(**values)
    readme = doc_hub_lines()
    for place, here in zip(DOC_PLACES, (str(course), f"http://127.0.0.1:{ports['service']}",
                                       str(folder / "service.db"), str(folder / "service-home"), service_url)):
        readme = readme.replace(place, here)
    test = """
# The test's own: an admin service to make tokens and start servers, JupyterLab without its news pop-up.
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin!r}}})
c.JupyterHub.load_roles.append({{"name": "test-admin", "scopes": ["admin:users", "admin:servers", "tokens"],
                                "services": ["test-admin"]}})
c.Spawner.environment.update({user_env!r})
""".format(**values)
    path = folder / "jupyterhub_config.py"
    path.write_text(site + "\n# -- the docs' lines (docs/admin/jupyterhub.md) --\n" + readme + test, encoding="utf-8")
    return path


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` now (from /proc): the proxy, the service, its workers, servers, kernels."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _stop_hub(process: subprocess.Popen) -> None:
    """The Hub stops its proxy, service and servers on SIGTERM; whatever is left of them is killed, group by
    group (each server and kernel has a session of its own), never this test's own group."""
    below = _descendants(process.pid)
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait)
    process.wait()
    mine = os.getpgrp()
    below += [p for pid in below for p in _descendants(pid)]
    deadline = time.monotonic() + 10
    for pid in dict.fromkeys(below):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            os.kill(pid, signal.SIGTERM)
            if group != mine:
                os.killpg(group, signal.SIGTERM)
    for pid in dict.fromkeys(below):
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and \
                "zombie" not in _state(pid):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)


def _state(pid: int) -> str:
    try:
        return "zombie" if (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" else ""
    except (OSError, IndexError):
        return "zombie"


@contextlib.contextmanager
def running_hub(jupyterhub: Path, config: Path, folder: Path, url: str, admin: str, password: str, *,
                argv: list[str] | None = None, start_s: float = HUB_START_S, **env: str) -> Iterator[RealHub]:
    """``jupyterhub -f config`` (or ``argv``, a command that ends by running it: the docs' lines) run in ``folder``
    (its log there, ``env`` added to a scrubbed environment) until its service answers at ``url`` (within
    ``start_s``); stopped, with everything it started, on the way out."""
    scrubbed = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "AUTOGRADER_", "JPY_"))}
    scrubbed.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{scrubbed.get('PATH', '')}", **env)
    log = folder / "jupyterhub.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(argv or [str(jupyterhub), "-f", str(config)], cwd=folder, env=scrubbed, stdout=sink,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    hub = RealHub(url, f"{url}/hub/api", admin, password, folder / "homes", log)
    try:
        deadline = time.monotonic() + start_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyterhub exited with {process.returncode}:\n{hub.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{hub.service}openapi.json", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"the Hub's service did not answer within {start_s} s:\n{hub.log_tail()}")
            time.sleep(0.25)
        yield hub
    finally:
        _stop_hub(process)
