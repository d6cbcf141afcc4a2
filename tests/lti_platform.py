"""A simulated LMS for the LTI tests: an LTI 1.3 platform on 127.0.0.1 with its own RSA key pair and JWKS, the OIDC
authorization endpoint (it answers a login with a signed id_token for the launch the test prepared), an OAuth2
client-credentials token endpoint that checks the tool's signed assertion against the tool's JWKS, Assignment and
Grade Services (line items found by resource id and created, scores recorded in order, a gradebook), Names and Role
Provisioning Services (members, paged), and a deep-linking return URL that checks the tool's response and creates the
line items it carries. ``down`` makes every service answer 503 (the platform away)."""
from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from served import free_port, serving

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TA = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
SCOPES = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem", "https://purl.imsglobal.org/spec/lti-ags/scope/score",
          "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"]


def _key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key: Any, kid: str) -> dict[str, Any]:
    public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**public, "kid": kid, "alg": "RS256", "use": "sig"}


class Lms:
    """The platform: its state is read and changed by the test directly."""

    def __init__(self, port: int, *, client_id: str = "tool-client", deployment: str = "dep-1",
                 context: str = "course-1"):
        self.url = f"http://127.0.0.1:{port}"
        self.issuer, self.client_id, self.deployment, self.context = self.url, client_id, deployment, context
        self.key, self.kid = _key(), "lms-key-1"
        self.rogue = _key()                     # a key the platform does not publish
        self.published = [(self.key, self.kid)]
        self.tool_url = ""                      # the tool's base URL (its JWKS)
        self.prepared: dict[str, dict[str, Any]] = {}
        self.line_items: list[dict[str, Any]] = []
        self.scores: list[tuple[str, dict[str, Any]]] = []      # (line item id, score) in the order received
        self.gradebook: dict[tuple[str, str], float | None] = {}
        self.members: list[dict[str, Any]] = []
        self.tokens: dict[str, list[str]] = {}
        self.token_requests = 0
        self.member_pages = 0
        self.members_asked: list[str] = []      # the LMS course of each page of members read
        self.down = False
        self.deep_links: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.app = self._app()

    # -- what the platform tells the tool ---------------------------------------------------------------
    def registration(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "client_id": self.client_id, "deployments": [self.deployment],
                "auth_url": f"{self.url}/auth", "token_url": f"{self.url}/token", "jwks_url": f"{self.url}/jwks"}

    def claims(self, sub: str, roles: list[str], *, message: str = "LtiResourceLinkRequest",
               custom: dict[str, Any] | None = None, name: str = "", email: str = "", sourcedid: str = "",
               lineitem: str | None = None, context: str | None = None, title: str = "Attention 101"
               ) -> dict[str, Any]:
        """A launch's claims from the LMS course ``context`` (the platform's own course by default: another course
        of the same deployment, a Moodle site's or a Canvas account's, with another)."""
        context = context or self.context
        claims: dict[str, Any] = {
            "sub": sub, "name": name, "email": email, LTI + "roles": roles, LTI + "message_type": message,
            LTI + "version": "1.3.0", LTI + "deployment_id": self.deployment,
            LTI + "context": {"id": context, "title": title},
            LTI + "resource_link": {"id": "link-1"}, LTI + "target_link_uri": f"{self.tool_url}/lti/launch",
            LTI + "custom": custom or {}, LTI + "lis": {"person_sourcedid": sourcedid} if sourcedid else {},
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": SCOPES[:2], "lineitems": f"{self.url}/{context}/lineitems",
                **({"lineitem": lineitem} if lineitem else {})},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": f"{self.url}/{context}/members", "service_versions": ["2.0"]}}
        if message == "LtiDeepLinkingRequest":
            claims[DL + "deep_linking_settings"] = {"deep_link_return_url": f"{self.url}/deep_link_return",
                                                    "accept_types": ["ltiResourceLink"], "accept_multiple": True,
                                                    "data": "opaque-platform-data"}
        return claims

    def prepare(self, claims: dict[str, Any], *, key: Any = None, kid: str | None = None,
                **changes: Any) -> str:
        """A launch the next authorization request with this login hint answers: its claims, the key it is
        signed with and the header's kid, and claims changed or removed (``None``) after the usual ones."""
        hint = secrets.token_urlsafe(8)
        self.prepared[hint] = {"claims": claims, "key": key, "kid": kid, "changes": changes}
        return hint

    def sign(self, claims: dict[str, Any], key: Any = None, kid: str | None = None) -> str:
        pem = (key or self.key).private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())
        return jwt.encode(claims, pem, algorithm="RS256", headers={"kid": kid or self.kid})

    def rotate(self) -> None:
        """A new signing key (the old one still published, as platforms do while tokens signed with it live)."""
        self.key, self.kid = _key(), f"lms-key-{len(self.published) + 1}"
        self.published.append((self.key, self.kid))

    def _tool_claims(self, token: str, audience: str) -> dict[str, Any]:
        """A JWT the tool signed, checked against the tool's JWKS."""
        keys = jwt.PyJWKClient(f"{self.tool_url}/lti/jwks.json", cache_keys=False)
        return jwt.decode(token, keys.get_signing_key_from_jwt(token).key, algorithms=["RS256"], audience=audience,
                          issuer=self.client_id)

    def _bearer(self, request: Request, scope: str) -> bool:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        return scope in self.tokens.get(token, [])

    # -- the platform's HTTP side ----------------------------------------------------------------------
    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def away(request: Request, call_next: Any) -> Response:
            if self.down and request.url.path not in ("/jwks", "/auth"):
                return Response("down for maintenance", status_code=503)
            return await call_next(request)

        @app.get("/jwks")
        def jwks() -> dict[str, Any]:
            return {"keys": [_jwk(k, kid) for k, kid in self.published]}

        @app.get("/auth")
        def auth(request: Request) -> Response:
            q = request.query_params
            assert q["scope"] == "openid" and q["response_type"] == "id_token" and q["response_mode"] == "form_post"
            assert q["client_id"] == self.client_id and q["redirect_uri"] == f"{self.tool_url}/lti/launch"
            spec = self.prepared.pop(q["login_hint"])
            now = int(time.time())
            claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300, "nonce": q["nonce"],
                      **spec["claims"]}
            for name, value in spec["changes"].items():
                if value is None:
                    claims.pop(name, None)
                else:
                    claims[name] = value
            return JSONResponse({"action": q["redirect_uri"], "state": q["state"],
                                 "id_token": self.sign(claims, spec["key"], spec["kid"])})

        @app.post("/token")
        async def token(request: Request) -> Response:
            form = await request.form()
            with self._lock:
                self.token_requests += 1
            if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != (
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"):
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            try:
                said = self._tool_claims(str(form.get("client_assertion")), f"{self.url}/token")
            except jwt.PyJWTError as exc:
                return JSONResponse({"error": "invalid_client", "why": str(exc)}, status_code=401)
            assert said["sub"] == self.client_id and said["jti"]
            access = secrets.token_urlsafe(16)
            self.tokens[access] = str(form.get("scope") or "").split()
            return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                                 "scope": form.get("scope")})

        @app.get("/{context}/lineitems")
        def line_items(context: str, request: Request, resource_id: str = "", limit: int = 100,
                       page: int = 0) -> Response:
            if not self._bearer(request, SCOPES[0]):
                return Response(status_code=401)
            found = [i for i in self.line_items if not resource_id or i["resourceId"] == resource_id]
            body = found[page * limit:(page + 1) * limit]
            headers = {}
            if (page + 1) * limit < len(found):
                headers["Link"] = (f'<{self.url}/{context}/lineitems?resource_id={resource_id}&limit={limit}'
                                   f'&page={page + 1}>; rel="next"')
            return JSONResponse(body, headers=headers)

        @app.post("/{context}/lineitems")
        async def create(context: str, request: Request) -> Response:
            if not self._bearer(request, SCOPES[0]):
                return Response(status_code=401)
            return JSONResponse(self._create(context, await request.json()), status_code=201)

        @app.post("/{context}/lineitems/{number}/scores")
        async def score(context: str, number: int, request: Request) -> Response:
            if not self._bearer(request, SCOPES[1]):
                return Response(status_code=401)
            assert request.headers["content-type"] == "application/vnd.ims.lis.v1.score+json"
            body = await request.json()
            item = f"{self.url}/{context}/lineitems/{number}"
            if not any(i["id"] == item for i in self.line_items):
                return Response(status_code=404)
            with self._lock:
                self.scores.append((item, body))
                self.gradebook[(item, body["userId"])] = body.get("scoreGiven")
            return Response(status_code=204)

        @app.get("/{context}/members")
        def members(context: str, request: Request, limit: int = 100, page: int = 0) -> Response:
            if not self._bearer(request, SCOPES[2]):
                return Response(status_code=401)
            self.member_pages += 1
            self.members_asked.append(context)
            body = {"id": f"{self.url}/{context}/members", "context": {"id": context},
                    "members": self.members[page * limit:(page + 1) * limit]}
            headers = {}
            if (page + 1) * limit < len(self.members):
                headers["Link"] = f'<{self.url}/{context}/members?limit={limit}&page={page + 1}>; rel="next"'
            return JSONResponse(body, headers=headers)

        @app.post("/deep_link_return")
        async def deep_link_return(request: Request) -> Response:
            form = await request.form()
            try:
                said = self._tool_claims(str(form.get("JWT")), self.issuer)
            except jwt.PyJWTError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            if said.get(LTI + "deployment_id") != self.deployment or said.get(
                    LTI + "message_type") != "LtiDeepLinkingResponse":
                return JSONResponse({"error": "wrong deployment or message"}, status_code=400)
            self.deep_links.append(said)
            for item in said.get(DL + "content_items", []):
                if "lineItem" in item:
                    self._create(self.context, item["lineItem"])
            return JSONResponse({"ok": True})

        return app

    def _create(self, context: str, item: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            made = {**item, "id": f"{self.url}/{context}/lineitems/{len(self.line_items) + 1}"}
            self.line_items.append(made)
        return made

    def cell(self, resource_id: str, sub: str) -> float | None:
        """The gradebook's cell of a student (their LMS user id) in the assignment's column."""
        [item] = [i["id"] for i in self.line_items if i["resourceId"] == resource_id]
        return self.gradebook.get((item, sub))


@contextmanager
def lms_serving(**options: Any) -> Iterator[Lms]:
    port = free_port()
    lms = Lms(port, **options)
    with serving(lms.app, port=port):
        yield lms


@contextmanager
def tool_with_lms(database: Any, course: Any, by: str) -> Iterator[tuple[str, Lms, Any, Any]]:
    """The service (``course``, a SQLite file at ``database``) and the simulated LMS, each on a server, the LMS
    registered as ``by`` (unknown students enrolled) with its course bound: (the tool's url, lms, engine, app); closed
    on the way out."""
    from autograder.service import db
    from autograder.service.app import create_app
    from autograder.service.lti import platforms as P

    engine = db.engine_for(str(database))
    db.upgrade(engine)
    app = create_app(engine, course)
    try:
        with serving(app) as url, lms_serving() as lms:
            lms.tool_url = url
            P.register(engine, **lms.registration(), enrol=True, courses=[lms.context], by=by)
            yield url, lms, engine, app
    finally:
        app.state.lti.close()
        engine.dispose()


def launch(browser: httpx.Client, lms: Lms, hint: str, *, post_to: httpx.Client | None = None) -> httpx.Response:
    """A browser launched from the LMS: the login initiation, the platform's answer, the launch's form POST (by
    ``post_to``: another browser, for a state that is not its own)."""
    started = browser.get("/lti/login", params={"iss": lms.issuer, "login_hint": hint, "client_id": lms.client_id,
                                                "target_link_uri": f"{lms.tool_url}/lti/launch",
                                                "lti_deployment_id": lms.deployment})
    assert started.status_code == 302, started.text
    where = urlsplit(started.headers["location"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == f"{lms.url}/auth"
    assert parse_qs(where.query)["state"][0] in "".join(browser.cookies.values())
    answer = httpx.get(started.headers["location"], timeout=30).json()
    return (post_to or browser).post("/lti/launch", data={"id_token": answer["id_token"], "state": answer["state"]})
