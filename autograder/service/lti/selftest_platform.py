"""The LMS of ``autograder serve lti selftest`` (:mod:`autograder.service.lti.selftest`): an LTI 1.3 platform of
the command's own, for the test's duration.

Served on a free local port by uvicorn in a thread (:func:`serving`), it has an RSA key and its JWKS, the OIDC
authorization endpoint (whose checks a real LMS makes too: the client id, and the redirect URI the service names,
its launch URL), an OAuth2 token endpoint that takes only an assertion signed with the tool's key as the tool's JWKS
gives it, Assignment and Grade Services (line items, scores) and a deep-linking return URL that checks the tool's
response against the tool's JWKS. Its identity is a run's own: the issuer ``https://selftest.invalid/<run>``
(:data:`ISSUER`), the client id, deployment and LMS course ``selftest-<run>``, the student ``lti-selftest-<run>``
(:data:`STUDENT`).

What it trusts: nothing the tool sends; each request is checked as an LMS checks it and refused otherwise (why, in
:attr:`Platform.refused`), each JWT the tool signed against the tool's JWKS as the service serves it at that moment.
"""
from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autograder.service.lti import jwks
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import LINE_ITEM, SCOPE_LINEITEM, SCOPE_SCORE, SCORE
from autograder.service.lti.deep_linking import DL
from autograder.service.lti.tool import urls as tool_urls

#: The issuers of the self-tests' platforms: this, and the run. (``.invalid`` is never a real host: RFC 2606.)
ISSUER = "https://selftest.invalid/"
#: The roster id of a self-test's student: this, and the run.
STUDENT = "lti-selftest-"
#: Seconds one HTTP request of the test may take.
HTTP_SECONDS = 15.0
TITLE = "LTI self-test"


class Failed(Exception):
    """A step that did not pass: why, in a line."""


class Platform:
    """The self-test's LTI platform: its identity and key, the launches it answers, what it received."""

    def __init__(self, run: str, base: str, tool: str):
        self.run, self.base, self.tool = run, base, tool.rstrip("/")
        self.issuer = ISSUER + run
        self.client_id = self.deployment = self.context = f"selftest-{run}"
        self.student = STUDENT + run
        self.key, self.kid = rsa.generate_private_key(public_exponent=65537, key_size=2048), f"selftest-{run}"
        self.launch_url = tool_urls(self.tool)["launch"]
        self.prepared: dict[str, dict[str, Any]] = {}
        self.nonces: list[str] = []             # of every launch it signed (the tool records each: removed after)
        self.tokens: dict[str, list[str]] = {}  # access token -> scopes
        self.line_items: list[dict[str, Any]] = []
        self.scores: list[tuple[str, dict[str, Any]]] = []     # (line item, score) as received
        self.deep_links: list[dict[str, Any]] = []
        self.refused: list[str] = []            # why it refused the tool's requests, in order
        self._lock = threading.Lock()
        self.app = Starlette(routes=[
            Route(f"/{run}/jwks", self._jwks), Route(f"/{run}/auth", self._auth),
            Route(f"/{run}/token", self._token, methods=["POST"]),
            Route(f"/{run}/lineitems", self._line_items, methods=["GET", "POST"]),
            Route(f"/{run}/lineitems/{{number:int}}/scores", self._score, methods=["POST"]),
            Route(f"/{run}/deep-link-return", self._deep_link_return, methods=["POST"])])

    @property
    def auth_url(self) -> str:
        return f"{self.base}/auth"

    @property
    def token_url(self) -> str:
        return f"{self.base}/token"

    @property
    def return_url(self) -> str:
        return f"{self.base}/deep-link-return"

    def claims(self, sub: str, role: str, *, name: str, deep_link: bool = False, sourcedid: str = ""
               ) -> dict[str, Any]:
        """A launch's claims from the platform's LMS course (``sourcedid``: the roster id it names the user by)."""
        claims: dict[str, Any] = {
            "sub": sub, "name": name, P.LTI + "roles": [role], P.LTI + "version": "1.3.0",
            P.LTI + "deployment_id": self.deployment,
            P.LTI + "message_type": "LtiDeepLinkingRequest" if deep_link else "LtiResourceLinkRequest",
            P.LTI + "context": {"id": self.context, "title": TITLE}, P.LTI + "resource_link": {"id": self.context},
            P.LTI + "target_link_uri": self.launch_url,
            P.AGS: {"scope": [SCOPE_LINEITEM, SCOPE_SCORE], "lineitems": f"{self.base}/lineitems"}}
        if sourcedid:
            claims[P.LTI + "lis"] = {"person_sourcedid": sourcedid}
        if deep_link:
            claims[DL + "deep_linking_settings"] = {"deep_link_return_url": self.return_url, "data": self.run,
                                                    "accept_types": ["ltiResourceLink"], "accept_multiple": False}
        return claims

    def prepare(self, claims: dict[str, Any]) -> str:
        """The login hint whose authorization request the platform answers with ``claims``."""
        hint = secrets.token_urlsafe(12)
        self.prepared[hint] = claims
        return hint

    def _refuse(self, why: str, status: int = 400) -> Response:
        with self._lock:
            self.refused.append(why)
        return JSONResponse({"error": why}, status_code=status)

    def tool_claims(self, token: str, audience: str) -> dict[str, Any]:
        """A JWT the tool signed, checked against the tool's JWKS as the service serves it now; :class:`Failed`."""
        import httpx
        import jwt  # noqa: PLC0415 - loads cryptography's backends

        where = tool_urls(self.tool)["jwks"]
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            answer = httpx.get(where, timeout=HTTP_SECONDS)
        except jwt.PyJWTError as exc:
            raise Failed(f"the tool's JWT is malformed ({exc})") from None
        except httpx.HTTPError as exc:
            raise Failed(f"the tool's JWKS {where} did not answer ({type(exc).__name__})") from None
        if answer.status_code != 200:
            raise Failed(f"the tool's JWKS {where} answered HTTP {answer.status_code}")
        try:
            keys = jwks.parse(answer.content)
        except jwks.KeySetError as exc:
            raise Failed(f"the tool's JWKS {where} is no key set ({exc})") from None
        if kid not in keys:
            raise Failed(f"the tool signed with key {kid!r}, which its JWKS {where} does not hold")
        try:
            return dict(jwt.decode(token, keys[kid].key, algorithms=["RS256"], audience=audience,
                                   issuer=self.client_id, options={"require": ["exp", "iat", "iss", "aud"]}))
        except jwt.PyJWTError as exc:
            raise Failed(f"the tool's JWT does not hold against its JWKS ({type(exc).__name__}: {exc})") from None

    def _bearer(self, request: Request, scope: str) -> bool:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        return scope in self.tokens.get(token, [])

    # -- the platform's endpoints ----------------------------------------------------------------------------------
    async def _jwks(self, _request: Request) -> Response:
        import jwt  # noqa: PLC0415 - loads cryptography's backends

        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]})

    async def _auth(self, request: Request) -> Response:
        """The OIDC authorization request the tool's login sends the browser with, checked as an LMS checks it."""
        import jwt  # noqa: PLC0415 - loads cryptography's backends

        q = request.query_params
        expected = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post",
                    "client_id": self.client_id}
        for name, value in expected.items():
            if q.get(name) != value:
                return self._refuse(f"the authorization request's {name} is {q.get(name)!r}, not {value!r}")
        if q.get("redirect_uri") != self.launch_url:
            return self._refuse(f"the service names its launch URL {q.get('redirect_uri')!r}, not {self.launch_url!r}"
                                " (what the LMS is given): the LMS refuses the login (behind a proxy: pass the "
                                "scheme and host on, X-Forwarded-Proto and Host; or test the URL the service has)")
        nonce, state, claims = q.get("nonce", ""), q.get("state", ""), self.prepared.pop(q.get("login_hint", ""), None)
        if not nonce or not state or claims is None:
            return self._refuse("the authorization request lacks its nonce, state or login hint")
        now = int(time.time())
        with self._lock:
            self.nonces.append(nonce)
        signed = jwt.encode({"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300, "nonce": nonce,
                             **claims}, self.key, algorithm="RS256", headers={"kid": self.kid})
        return JSONResponse({"action": self.launch_url, "state": state, "id_token": signed})

    async def _token(self, request: Request) -> Response:
        """An access token for the tool's assertion (RFC 7523) signed with the key its JWKS serves."""
        form = await request.form()
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != (
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"):
            return self._refuse("the tool's token request is no client-credentials grant with a JWT assertion")
        try:
            said = await run_in_threadpool(self.tool_claims, str(form.get("client_assertion") or ""), self.token_url)
        except Failed as exc:
            return self._refuse(f"access token refused: {exc}", 401)
        if said.get("sub") != self.client_id or not said.get("jti"):
            return self._refuse("access token refused: the assertion's sub is not the client id, or it has no jti",
                                401)
        access = secrets.token_urlsafe(24)
        with self._lock:
            self.tokens[access] = str(form.get("scope") or "").split()
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                             "scope": form.get("scope")})

    async def _line_items(self, request: Request) -> Response:
        if not self._bearer(request, SCOPE_LINEITEM):
            return self._refuse("line items asked for without an access token of their scope", 401)
        if request.method == "POST":
            return JSONResponse(self._create(await request.json()), status_code=201, media_type=LINE_ITEM)
        wanted = request.query_params.get("resource_id", "")
        return JSONResponse([i for i in self.line_items if not wanted or i.get("resourceId") == wanted])

    async def _score(self, request: Request) -> Response:
        if not self._bearer(request, SCOPE_SCORE):
            return self._refuse("a score sent without an access token of its scope", 401)
        if request.headers.get("content-type", "").split(";")[0] != SCORE:
            return self._refuse(f"a score sent as {request.headers.get('content-type')!r}, not {SCORE}", 415)
        item = f"{self.base}/lineitems/{request.path_params['number']}"
        if not any(i["id"] == item for i in self.line_items):
            return self._refuse(f"a score sent to {item}, no line item of the platform", 404)
        body = await request.json()
        with self._lock:
            self.scores.append((item, body))
        return Response(status_code=204)

    async def _deep_link_return(self, request: Request) -> Response:
        """The tool's deep-linking response: its signature against the tool's JWKS, then what it says."""
        form = await request.form()
        try:
            said = await run_in_threadpool(self.tool_claims, str(form.get("JWT") or ""), self.issuer)
        except Failed as exc:
            return self._refuse(str(exc))
        items = said.get(DL + "content_items")
        if said.get(P.LTI + "deployment_id") != self.deployment or said.get(P.LTI + "message_type") != \
                "LtiDeepLinkingResponse" or said.get(DL + "data") != self.run or not said.get("nonce"):
            return self._refuse("the response names another deployment or message, or lacks the request's data or "
                                "a nonce")
        if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], dict) or \
                items[0].get("type") != "ltiResourceLink" or items[0].get("url") != self.launch_url or \
                not (items[0].get("custom") or {}).get("assignment"):
            return self._refuse(f"the response's content items are not one resource link to {self.launch_url} with "
                                f"its assignment: {str(items)[:200]}")
        with self._lock:
            self.deep_links.append(said)
        if isinstance(items[0].get("lineItem"), dict):
            self._create(items[0]["lineItem"])
        return JSONResponse({"items": items})

    def _create(self, item: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            made = {**item, "id": f"{self.base}/lineitems/{len(self.line_items) + 1}"}
            self.line_items.append(made)
        return made


@contextmanager
def serving(run: str, tool: str, host: str) -> Iterator[Platform]:
    """The platform of ``run``, on a free port of ``host`` (uvicorn in a thread of this process) for the block."""
    import uvicorn

    family, kind, proto, _name, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    port = sock.getsockname()[1]
    platform = Platform(run, f"http://{f'[{host}]' if ':' in host else host}:{port}/{run}", tool)
    server = uvicorn.Server(uvicorn.Config(platform.app, log_level="error", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="lti-selftest-platform",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield platform
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()

