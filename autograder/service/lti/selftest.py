"""``autograder serve lti selftest``: the running service checked as an LMS would check it, without an LMS, before
its values go into one.

The command is a platform of its own for the test's duration (:class:`Platform`: an RSA key and its JWKS, the OIDC
authorization endpoint, an OAuth2 token endpoint that takes only an assertion signed with the tool's key as the
tool's JWKS gives it, Assignment and Grade Services, a deep-linking return URL that checks the tool's response
against the tool's JWKS), served on a local port (``--platform-host``) and registered in the service's database
under an issuer of its own, ``https://selftest.invalid/<run>`` (a random run: two self-tests never share a row), with
its client id, deployment and LMS course (bound), and one student on the roster, ``lti-selftest-<run>``. It then
drives the service over HTTP as a browser and that platform would, one line per step:

1. the tool's keys: ``/lti/jwks.json`` serves an RSA signing key;
2. the login: ``/lti/login`` sends the browser to the platform's authorization URL, whose checks a real LMS makes
   too (the client id; the redirect URI the service names is the launch URL under the URL tested: behind a proxy
   that does not pass the scheme and host on, an LMS refuses it); the platform answers with a signed id_token;
3. the launch: the id_token posted to ``/lti/launch`` signs the student in, and the page it leads to answers;
4. deep linking: a TA's deep-linking launch, the first assignment the page offers picked, the tool's signed response
   taken by the platform only once it holds against the tool's JWKS;
5. a score: one pending row of the outbox for the student, sent by the service's *Send grades now* from the TA's
   session (by its own passback's round where there is no such session): the platform must receive it, once.

The command's exit status is 0 only when every step passed.

What it trusts and touches: the database, where it writes only rows of its own (the platform, its LMS course, the
student; then what the service records for its launches: members, nonces, page sessions, a line item, the score)
and removes every one of them afterwards, whatever happened; a run killed midway leaves them, and a later run removes
those of runs older than :data:`STALE`. The service is what is tested: each of its answers is checked in its step
and trusted no further. Nothing goes to a real LMS from here: the only platform the command talks to is its own
(*Send grades now* runs one round of the service's passback, which sends what is due to every LMS, as the service's
own rounds do every few seconds).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import html
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autograder.service.db import (Action, LtiContext, LtiLineItem, LtiNonce, LtiPlatform, LtiScore, LtiUser, Person,
                                   ScoreChange, WebSession, utcnow, writing)
from autograder.service.lti import jwks
from autograder.service.lti import platforms as P
from autograder.service.lti.ags import LINE_ITEM, SCOPE_LINEITEM, SCOPE_SCORE, SCORE
from autograder.service.lti.deep_linking import DL
from autograder.service.lti.tool import urls as tool_urls

#: The issuers of the self-tests' platforms: this, and the run. (``.invalid`` is never a real host: RFC 2606.)
ISSUER = "https://selftest.invalid/"
#: The roster id of a self-test's student: this, and the run.
STUDENT = "lti-selftest-"
#: A self-test's rows older than this are a run that was killed: the next run removes them.
STALE = dt.timedelta(hours=1)
#: Seconds one HTTP request of the test may take.
HTTP_SECONDS = 15.0
#: Seconds the score may take to reach the platform (one round of the passback, or the service's next round).
SCORE_SECONDS = 30.0
#: The points of the test's score.
POINTS = 1.0
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
TA = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
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


# == the database's rows of a self-test ===============================================================================
def register(engine: Engine, platform: Platform) -> None:
    """The platform, its LMS course (bound) and its student, recorded (nothing in the record of actions: they are
    removed again by :func:`remove`)."""
    now = utcnow()
    with writing(engine).begin() as conn:
        last = int(conn.execute(select(func.coalesce(func.max(ScoreChange.id), 0))).scalar_one())
        pk = conn.execute(insert(LtiPlatform).values(
            issuer=platform.issuer, client_id=platform.client_id, deployments=[platform.deployment],
            auth_url=platform.auth_url, token_url=platform.token_url, jwks_url=f"{platform.base}/jwks",
            token_audience="", enrol=False, changes_seen=last, added_at=now).returning(LtiPlatform.id)).scalar_one()
        conn.execute(insert(LtiContext).values(
            platform_id=pk, context_id=platform.context, deployment_id=platform.deployment, title=TITLE,
            lineitems_url="", scopes=[], memberships_url="", updated_at=now, bound=True, bound_by="selftest",
            bound_at=now))
        conn.execute(insert(Person).values(student=platform.student, name=TITLE, email="", section="", canvas_id="",
                                           moodle_id_number="", added_at=now, updated_at=now))


def remove(engine: Engine, issuer: str, student: str, nonces: list[str]) -> None:
    """Every row of the self-test of ``issuer``: its platform, LMS course, members, their page sessions and scores,
    its line items, the nonces of its launches, its student, and what was recorded under its name; in one
    transaction (a round of the passback sees all of them or none)."""
    with writing(engine).begin() as conn:
        pk = conn.execute(select(LtiPlatform.id).where(LtiPlatform.issuer == issuer)).scalar()
        if pk is not None:
            members = select(LtiUser.id).where(LtiUser.platform_id == pk)
            contexts = select(LtiContext.id).where(LtiContext.platform_id == pk)
            conn.execute(delete(LtiScore).where(LtiScore.member_id.in_(members)))
            conn.execute(delete(WebSession).where(WebSession.lti_member_id.in_(members)))
            conn.execute(delete(LtiLineItem).where(LtiLineItem.context_id.in_(contexts)))
            conn.execute(delete(LtiUser).where(LtiUser.platform_id == pk))
            conn.execute(delete(LtiContext).where(LtiContext.platform_id == pk))
            conn.execute(delete(LtiPlatform).where(LtiPlatform.id == pk))
        digests = [hashlib.sha256(n.encode()).hexdigest() for n in nonces]
        if digests:
            conn.execute(delete(LtiNonce).where(LtiNonce.digest.in_(digests)))
        conn.execute(delete(Person).where(Person.student == student))
        conn.execute(delete(Action).where(Action.who == f"lti:{issuer}"[:200]))


def remove_stale(engine: Engine) -> int:
    """The rows of self-tests older than :data:`STALE` (killed midway) removed: how many self-tests."""
    with engine.connect() as conn:
        issuers = list(conn.execute(select(LtiPlatform.issuer).where(
            LtiPlatform.issuer.startswith(ISSUER, autoescape=True),
            LtiPlatform.added_at < utcnow() - STALE)).scalars())
    for issuer in issuers:
        remove(engine, issuer, STUDENT + issuer.removeprefix(ISSUER), [])
    return len(issuers)


# == the browser's side ==============================================================================================
class _Forms(HTMLParser):
    """The forms of a page: (id, action, [(name, value)]) each."""

    def __init__(self, page: str):
        super().__init__()
        self.forms: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append((found.get("id", ""), found.get("action", ""), []))
        elif tag == "input" and self.forms and found.get("name"):
            if found.get("type") in ("checkbox", "radio") or "value" in found:
                self.forms[-1][2].append((found["name"], found.get("value", "")))

    def form(self, form_id: str = "", *, action_ends: str = "") -> tuple[str, list[tuple[str, str]]]:
        """The form with this id (or whose action ends so): its action and fields."""
        for found, action, fields in self.forms:
            if (form_id and found == form_id) or (action_ends and action.endswith(action_ends)):
                return action, fields
        raise Failed(f"the page has no form {form_id or action_ends!r}")


def _data(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    """A form's fields as httpx posts them."""
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    return data


def _said(response: Any) -> str:
    """What the service's refusal says (its English), in a line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("en", ""))[:300]
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])[:500]
    text = response.text
    found = re.search(r"<p lang='en'>(.*?)</p>", text) or re.search(r"<h1 id='error'>(.*?)</h1>", text)
    if found:
        return html.unescape(found.group(1))[:300]
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())[:200]


def _expect(response: Any, status: int, what: str) -> Any:
    if response.status_code != status:
        raise Failed(f"{what} answered HTTP {response.status_code}, not {status}: {_said(response)}")
    return response


class _Run:
    """One self-test: the service at ``url``, the platform, a browser for the student and one for the TA."""

    def __init__(self, engine: Engine, url: str, platform: Platform, out: Callable[[str], None],
                 score_seconds: float, fallback: str):
        import httpx

        self.engine, self.url, self.platform, self.out, self.fallback = engine, url, platform, out, fallback
        self.urls = tool_urls(url)
        self.score_seconds = score_seconds
        self.student = httpx.Client(timeout=HTTP_SECONDS, follow_redirects=False)
        self.staff = httpx.Client(timeout=HTTP_SECONDS, follow_redirects=False)
        self.outcomes: list[bool] = []
        self.kid = ""
        self.assignment = ""
        self.launched = False           # the student's launch passed
        self.staff_signed_in = False    # the TA's launch passed (its session sends the score)

    def close(self) -> None:
        self.student.close()
        self.staff.close()

    def step(self, name: str, action: Callable[[], str], *, needs: str = "") -> None:
        import httpx

        if needs:
            self.outcomes.append(False)
            self.out(f"  {'skipped':<7} {name}: {needs}")
            return
        try:
            said = action()
        except Failed as exc:
            passed, said = False, str(exc)
        except httpx.HTTPError as exc:
            try:
                where = str(exc.request.url.copy_with(query=None))
            except RuntimeError:            # (an error raised before its request was made)
                where = self.url
            passed, said = False, f"no answer from {where} ({type(exc).__name__}: {exc})"
        except (ValueError, KeyError, IndexError, TypeError) as exc:     # (an answer not as the protocol has it)
            passed, said = False, f"an answer the self-test cannot read ({type(exc).__name__}: {exc})"
        else:
            passed = True
        self.outcomes.append(passed)
        self.out(f"  {'passed' if passed else 'FAILED':<7} {name}: {said}")

    def all(self) -> None:
        self.step("the tool's keys", self.keys)
        answer: dict[str, Any] = {}
        self.step("login", lambda: self.login(answer))
        self.step("launch", lambda: self.launch(answer), needs="" if answer else "no id_token to post")
        self.step("deep linking", self.deep_link)
        self.step("score sent back", self.score, needs="" if self.launched else "no student launched")

    # -- the steps -------------------------------------------------------------------------------------------------
    def keys(self) -> str:
        answer = _expect(self.student.get(self.urls["jwks"]), 200, self.urls["jwks"])
        try:
            keys = jwks.parse(answer.content)
        except jwks.KeySetError as exc:
            raise Failed(f"{self.urls['jwks']} is no key set ({exc})") from None
        self.kid = next(iter(keys))
        return f"{self.urls['jwks']} serves the tool's RSA key {self.kid}"

    def _login(self, browser: Any, claims: dict[str, Any]) -> dict[str, Any]:
        """The login initiation and the platform's answer: the launch's form (action, state, id_token)."""
        p = self.platform
        started = _expect(browser.get(self.urls["login"], params={
            "iss": p.issuer, "login_hint": p.prepare(claims), "client_id": p.client_id,
            "lti_deployment_id": p.deployment, "target_link_uri": self.urls["launch"]}), 302, self.urls["login"])
        target = started.headers.get("location", "")
        if not target.startswith(p.auth_url + "?"):
            raise Failed(f"{self.urls['login']} sent the browser to {target[:200]!r}, not the platform's "
                         f"authorization URL {p.auth_url}")
        if parse_qs(urlsplit(target).query).get("state", [""])[0] not in browser.cookies.values():
            raise Failed(f"{self.urls['login']} bound no state to the browser (its cookie)")
        answer = browser.get(target)
        if answer.status_code != 200:
            raise Failed(f"the platform refused the login: {_said(answer)}")
        form: dict[str, Any] = answer.json()
        return form

    def login(self, answer: dict[str, Any]) -> str:
        claims = self.platform.claims(f"selftest-student-{self.platform.run}", LEARNER, name=TITLE,
                                      sourcedid=self.platform.student)
        answer.update(self._login(self.student, claims))
        return (f"{self.urls['login']} sent the browser to the platform, which took the request for "
                f"{self.urls['launch']}")

    def _launch(self, browser: Any, form: dict[str, Any], lands: str) -> Any:
        """The launch's form posted; the page it leads to (whose path ends with ``lands``)."""
        done = _expect(browser.post(form["action"], data={"id_token": form["id_token"], "state": form["state"]}),
                       303, self.urls["launch"])
        target = urljoin(self.url + "/", done.headers.get("location", ""))
        if not urlsplit(target).path.endswith(lands):
            raise Failed(f"the launch led to {target[:200]!r}, not to {lands}")
        return target

    def launch(self, form: dict[str, Any]) -> str:
        target = self._launch(self.student, form, "/me")
        _expect(self.student.get(target), 200, target)
        self.launched = True
        return f"a student's id_token signed with the platform's key was taken; {target} answers"

    def deep_link(self) -> str:
        p = self.platform
        claims = p.claims(f"selftest-ta-{p.run}", TA, deep_link=True, name=f"{TITLE} (TA {p.run})")
        form = self._login(self.staff, claims)
        target = self._launch(self.staff, form, "/lti/deep-link")
        self.staff_signed_in = True
        page = _expect(self.staff.get(target), 200, target)
        action, fields = _Forms(page.text).form("deep-link")
        offered = [value for name, value in fields if name == "assignment"]
        if not offered:
            raise Failed(f"{target} offers no assignment to link")
        self.assignment = offered[0]
        chosen = [(name, value) for name, value in fields if name != "assignment"] + [("assignment", offered[0])]
        picked = _expect(self.staff.post(urljoin(self.url + "/", action), data=_data(chosen)), 200,
                         "the assignment picked")
        back, signed = _Forms(picked.text).form("deep-link-return")
        if back != p.return_url:
            raise Failed(f"the response goes to {back[:200]!r}, not the platform's return URL {p.return_url}")
        jwt_ = dict(signed).get("JWT", "")
        answer = self.staff.post(back, data={"JWT": jwt_})
        if answer.status_code != 200:
            raise Failed(f"the platform refused the tool's response: {_said(answer)}")
        item = answer.json()["items"][0]
        column = f"; its gradebook column out of {item['lineItem']['scoreMaximum']} points" if "lineItem" in item \
            else ""
        return (f"a TA picked {self.assignment}; the tool's signed response holds against {self.urls['jwks']} and "
                f"links it at {item['url']}{column}")

    def score(self) -> str:
        p = self.platform
        assignment = self.assignment or self._first_assignment()
        with self.engine.connect() as conn:
            member = conn.execute(select(LtiUser.id, LtiUser.sub).join(LtiPlatform, LtiPlatform.id ==
                                                                      LtiUser.platform_id)
                                  .where(LtiPlatform.issuer == p.issuer, LtiUser.who == p.student)).first()
        if member is None:
            raise Failed("the student's launch recorded no member")
        with writing(self.engine).begin() as conn:
            row = conn.execute(insert(LtiScore).values(
                member_id=member.id, assignment=assignment, change_id=0, points=POINTS, max_points=None,
                waiting_points=0.0, changed_at=utcnow(), state="pending", attempts=0, next_try_at=utcnow(),
                error="").returning(LtiScore.id)).scalar_one()
        how = "the service's passback"
        if self.staff_signed_in:
            self._send_now()
            how = "Send grades now"
        deadline = time.monotonic() + self.score_seconds
        while True:
            state = self._row(row)
            received = [s for _, s in p.scores if s.get("userId") == member.sub]
            if state.state == "sent" and received:
                break
            if state.error:
                refused = f" (the platform: {p.refused[-1]})" if p.refused and p.refused[-1] not in state.error \
                    else ""
                raise Failed(f"the service could not send it: {state.error[:300]}{refused}")
            if time.monotonic() > deadline:
                raise Failed(f"the platform received nothing within {self.score_seconds:.0f} s (the row is "
                             f"{state.state})")
            time.sleep(0.2)
        if self.staff_signed_in:
            self._send_now()                # again: nothing more may come
        received = [s for _, s in p.scores if s.get("userId") == member.sub]
        if len(received) != 1 or received[0].get("scoreGiven") != POINTS:
            raise Failed(f"the platform received {[s.get('scoreGiven') for s in received]} for the student, not "
                         f"{POINTS} once")
        return (f"{how} sent {POINTS} of {received[0].get('scoreMaximum')} for {assignment}, with an access token "
                f"granted to the tool's signed assertion; the platform received it once")

    def _first_assignment(self) -> str:
        if not self.fallback:
            raise Failed("no assignment is known (deep linking did not pass)")
        return self.fallback

    def _send_now(self) -> None:
        page = _expect(self.staff.get(self.url + "/dashboard/lti"), 200, f"{self.url}/dashboard/lti")
        _action, fields = _Forms(page.text).form(action_ends="/dashboard/lti/sync")
        _expect(self.staff.post(self.url + "/dashboard/lti/sync", data=_data(fields)), 303, "Send grades now")

    def _row(self, row: int) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(select(LtiScore.state, LtiScore.error).where(LtiScore.id == row)).one()


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


def run(engine: Engine, url: str, *, platform_host: str = "127.0.0.1", out: Callable[[str], None] = print,
        score_seconds: float = SCORE_SECONDS, assignment: str = "") -> bool:
    """The self-test of the service at ``url`` on its database ``engine`` (the module's steps), each said by ``out``;
    whether every step passed. Its rows are removed whatever happens. ``assignment``: the one the score is for where
    deep linking did not pick one."""
    url = url.rstrip("/")
    stale = remove_stale(engine)
    run_id = secrets.token_hex(6)
    with serving(run_id, url, platform_host) as platform:
        out(f"lti selftest of {url}, as the LMS {platform.issuer} (served at {platform.base})"
            + (f"; the rows of {stale} earlier self-test(s) killed midway removed" if stale else ""))
        session = _Run(engine, url, platform, out, score_seconds, assignment)
        try:
            register(engine, platform)
            session.all()
        finally:
            session.close()
            remove(engine, platform.issuer, platform.student, platform.nonces)
    passed = sum(session.outcomes)
    out(f"lti selftest: {passed} of {len(session.outcomes)} steps passed; the test's platform, course, student, "
        "members, sessions and scores removed from the database")
    return passed == len(session.outcomes)
