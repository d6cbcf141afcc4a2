"""``autograder serve lti selftest``: the running service checked as an LMS would check it, without an LMS, before
its values go into one.

The command is a platform of its own for the test's duration (:mod:`.selftest_platform`: an RSA key and its JWKS,
the OIDC authorization endpoint, an OAuth2 token endpoint that takes only an assertion signed with the tool's key as
the tool's JWKS gives it, Assignment and Grade Services, a deep-linking return URL that checks the tool's response
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
and removes every one of them afterwards, whatever happened (:mod:`.selftest_rows`); a run killed midway leaves
them, and a later run removes those of runs older than :data:`~autograder.service.lti.selftest_rows.STALE`. The
service is what is tested: each of its answers is checked in its step and trusted no further. Nothing goes to a
real LMS from here: the only platform the command talks to is its own (*Send grades now* runs one round of the
service's passback, which sends what is due to every LMS, as the service's own rounds do every few seconds).
"""
from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from autograder.service.db import writing
from autograder.service.lti import jwks
from autograder.service.lti.selftest_platform import HTTP_SECONDS, TITLE, Failed, Platform, serving
from autograder.service.lti.selftest_rows import register, remove, remove_stale
from autograder.service.lti.tool import urls as tool_urls
from autograder.service.lti_tables import LtiPlatform, LtiScore, LtiUser
from autograder.service.tables import utcnow

#: Seconds the score may take to reach the platform (one round of the passback, or the service's next round).
SCORE_SECONDS = 30.0
#: The points of the test's score.
POINTS = 1.0
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
TA = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"


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
