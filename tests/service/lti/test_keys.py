"""Issue 65, findings 3 and 4: the platforms' key sets (autograder/service/lti/jwks.py).

- No key outlives its key set: a key the platform withdrew is refused from the next fetch of its JWKS on (the key
  used before, so any cache of single keys would still hold it), a key id not in the set fetches it at most once
  per cooldown.
- Nothing an anonymous request starts blocks the server's thread pool on the network: while the platform's JWKS
  hangs, one fetch is in flight, the launches beyond it are refused at once with 503 and Retry-After, a signed-in
  student is served; the failed fetch is remembered (the launches meanwhile refused without a fetch).
- A JWKS document too large, malformed, with too many keys or none to sign with is refused cleanly.
"""
from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import func, select

from lti_platform import LEARNER, launch, tool_with_lms
from served import serving, student_token
from autograder.course.config import load_course
from autograder.core.messages import CATALOGUE
from autograder.service import db, lti_tables, tables
from autograder.service.app import create_app
from autograder.service.lti import jwks as J
from autograder.service.lti import platforms as P
from autograder.service.lti.launch import cookie_name
from autograder.service.lti.tool import JWKS_COOLDOWN, JWKS_RETRY, JWKS_SECONDS

COURSE = load_course()
ISSUER, CLIENT, DEPLOYMENT = "https://lms.example.edu", "tool-client", "dep-1"
LAUNCHES = 45                       # (more than the server's thread pool: 40 threads)


def said(response: httpx.Response, key: str) -> bool:
    """The refusal says the message ``key`` in both languages."""
    return all(html.escape(text.split("{")[0], quote=True) in response.text for text in CATALOGUE[key])


def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: Any, kid: str) -> dict[str, Any]:
    return {**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid, "alg": "RS256",
            "use": "sig"}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- a JWKS endpoint the test controls ------------------------------------------------------------------------------
class Endpoint:
    """A platform's JWKS URL on 127.0.0.1: ``body`` with ``status``, each answer held until ``gate`` is set;
    ``seen`` counts the requests."""

    def __init__(self) -> None:
        self.body, self.status, self.length = b'{"keys": []}', 200, True
        self.gate = threading.Event()
        self.gate.set()
        self.seen = 0
        self._lock = threading.Lock()
        self.url = ""

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.seen += 1
        self.gate.wait(60)
        handler.send_response(self.status)
        handler.send_header("Content-Type", "application/json")
        if self.length:
            handler.send_header("Content-Length", str(len(self.body)))
        handler.end_headers()
        try:
            handler.wfile.write(self.body)
        except (BrokenPipeError, ConnectionResetError):
            pass                            # (the tool stopped reading at its bound)


@contextmanager
def endpoint() -> Iterator[Endpoint]:
    found = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.answer(self)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    found.url = f"http://127.0.0.1:{server.server_address[1]}/jwks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.gate.set()
        server.shutdown()
        server.server_close()


def key_set(url: str, clock: Clock, **changes: float) -> J.KeySet:
    settings = {"lifespan": JWKS_SECONDS, "cooldown": JWKS_COOLDOWN, "retry": JWKS_RETRY, "timeout": 10.0, **changes}
    return J.KeySet(url, clock=clock, **settings)


# -- the service with a platform whose JWKS is the endpoint's --------------------------------------------------------
@pytest.fixture
def service(tmp_path):
    """(the service's URL, its engine, its tool, the endpoint, a clock of the key set): a platform registered
    with the endpoint as its JWKS URL."""
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    app = create_app(engine, COURSE)
    try:
        with endpoint() as found, serving(app) as url:
            P.register(engine, issuer=ISSUER, client_id=CLIENT, deployments=[DEPLOYMENT], auth_url=f"{ISSUER}/auth",
                       token_url=f"{ISSUER}/token", jwks_url=found.url, enrol=True, by="test")
            keys = app.state.lti.jwks(found.url)
            keys.clock = Clock()
            yield url, engine, app.state.lti, found
    finally:
        app.state.lti.close()
        engine.dispose()


SIGNER = rsa_key().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())


def forged(url: str, kid: str) -> httpx.Response:
    """An anonymous launch (no login before it: its own state and cookie) whose token names the platform and
    ``kid``: what anyone may post."""
    state = secrets.token_urlsafe(16)
    now = int(time.time())
    token = jwt.encode({"iss": ISSUER, "aud": CLIENT, "iat": now, "exp": now + 300, "nonce": "n", "sub": "x"},
                       SIGNER, algorithm="RS256", headers={"kid": kid})
    with httpx.Client(base_url=url, timeout=60, cookies={cookie_name(state): state}) as client:
        return client.post("/lti/launch", data={"id_token": token, "state": state})


# -- rotation ------------------------------------------------------------------------------------------------------
def replace_key(lms: Any, kid: str) -> None:
    """The platform signs with a new key, the only one it publishes (its other keys withdrawn)."""
    lms.key, lms.kid = rsa_key(), kid
    lms.published = [(lms.key, lms.kid)]


def test_a_withdrawn_key_is_refused_from_the_next_fetch_of_the_key_set(tmp_path):
    with tool_with_lms(tmp_path / "service.db", COURSE, "test") as (url, lms, _engine, app):
        keys = app.state.lti.jwks(lms.registration()["jwks_url"])
        clock = keys.clock = Clock()
        learner = lms.claims("s1", [LEARNER], sourcedid="s1")
        first, first_kid = lms.key, lms.kid
        with httpx.Client(base_url=url, timeout=30) as client:
            assert launch(client, lms, lms.prepare(learner)).status_code == 303           # key 1: fetched, used
        assert keys.fetches == 1
        replace_key(lms, "lms-key-2")           # the platform withdraws key 1 and signs with key 2 only
        clock.now += JWKS_SECONDS - 1           # within the set's lifespan: the set fetched stands (key 1 with it)
        with httpx.Client(base_url=url, timeout=30) as client:
            assert launch(client, lms, lms.prepare(learner, key=first, kid=first_kid)).status_code == 303
        assert keys.fetches == 1
        clock.now += 2                          # the set's lifespan over: fetched again, without key 1
        with httpx.Client(base_url=url, timeout=30) as client:
            refused = launch(client, lms, lms.prepare(learner, key=first, kid=first_kid))
        assert refused.status_code == 401 and said(refused, "service.lti.unknown_key"), refused.text
        assert keys.fetches == 2
        with httpx.Client(base_url=url, timeout=30) as client:
            assert launch(client, lms, lms.prepare(learner)).status_code == 303           # key 2, the same set
        second, second_kid = lms.key, lms.kid
        # Key 3 comes and key 2 goes at once: the first launch with key 3 (a key id not in the set, past the
        # cooldown) fetches the set, and key 2, used a moment ago, is gone with it.
        clock.now += JWKS_COOLDOWN + 1
        replace_key(lms, "lms-key-3")
        with httpx.Client(base_url=url, timeout=30) as client:
            assert launch(client, lms, lms.prepare(learner)).status_code == 303
            assert keys.fetches == 3
            refused = launch(client, lms, lms.prepare(learner, key=second, kid=second_kid))
        assert refused.status_code == 401 and said(refused, "service.lti.unknown_key"), refused.text
        assert keys.fetches == 3                 # (within the cooldown: no fetch for it)


def test_a_key_id_not_in_the_set_fetches_it_at_most_once_per_cooldown():
    signer = rsa_key()
    with endpoint() as found:
        found.body = json.dumps({"keys": [jwk(signer, "k1")]}).encode()
        clock = Clock()
        keys = key_set(found.url, clock)
        assert keys.signing_key("k1").key_id == "k1" and found.seen == 1
        for n in range(50):
            with pytest.raises(J.UnknownKey):
                keys.signing_key(f"made-up-{n}")
        assert found.seen == 1 and keys.fetches == 1
        clock.now += JWKS_COOLDOWN + 1
        for n in range(50):
            with pytest.raises(J.UnknownKey):
                keys.signing_key(f"made-up-{n}")
        assert found.seen == 2
        assert keys.signing_key("k1").key_id == "k1" and found.seen == 2


def test_while_its_refetch_is_in_flight_the_set_answers_for_its_keys_and_refuses_the_rest_at_once():
    signer = rsa_key()
    with endpoint() as found:
        found.body = json.dumps({"keys": [jwk(signer, "k1")]}).encode()
        clock = Clock()
        keys = key_set(found.url, clock)
        keys.signing_key("k1")
        clock.now += JWKS_SECONDS + 1
        found.gate.clear()
        with ThreadPoolExecutor(1) as pool:
            refetch = pool.submit(keys.signing_key, "k1")
            deadline = time.monotonic() + 30
            while found.seen < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert found.seen == 2 and not refetch.done()
            assert keys.signing_key("k1").key_id == "k1"             # the set being replaced, while its fetch runs
            with pytest.raises(J.Busy) as busy:
                keys.signing_key("k2")
            assert busy.value.retry_after is not None and 1 <= busy.value.retry_after <= 10
            found.gate.set()
            assert refetch.result(timeout=30).key_id == "k1"
        assert found.seen == 2


# -- a platform whose JWKS hangs ------------------------------------------------------------------------------------
def test_a_hanging_jwks_holds_one_launch_refuses_the_rest_at_once_and_the_service_serves_on(service):
    url, engine, tool, found = service
    keys = tool.jwks(found.url)
    keys.timeout = 120.0                    # (the fetch hangs until the test lets it go, not until its timeout)
    token = student_token(engine, "ada")
    found.status, found.body = 500, b"oops"
    found.gate.clear()
    with ThreadPoolExecutor(LAUNCHES) as pool:
        launches = [pool.submit(forged, url, f"made-up-{n}") for n in range(LAUNCHES)]
        deadline = time.monotonic() + 30
        while sum(f.done() for f in launches) < LAUNCHES - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        held = [f for f in launches if not f.done()]
        assert len(held) == 1 and found.seen == 1                   # one fetch in flight, hanging
        for refused in (f.result() for f in launches if f.done()):
            assert refused.status_code == 503 and said(refused, "service.lti.jwks_busy"), refused.text
            assert int(refused.headers["retry-after"]) >= 1
        # A signed-in student is served while the platform's JWKS still hangs.
        with httpx.Client(base_url=url, timeout=30) as client:
            mine = client.get("/api/submissions", headers={"Authorization": f"Bearer {token}"})
            assert mine.status_code == 200 and mine.json()["submissions"] == []
            assert client.get("/login").status_code == 200
        assert not held[0].done() and found.seen == 1
        found.gate.set()                                            # the platform answers: 500
        away = held[0].result(timeout=30)
    assert away.status_code == 502 and said(away, "service.lti.platform_away"), away.text
    # The failure is remembered: the launches within the window are refused without a fetch.
    for n in range(5):
        again = forged(url, f"again-{n}")
        assert again.status_code == 502 and said(again, "service.lti.platform_away"), again.text
        assert 1 <= int(again.headers["retry-after"]) <= JWKS_RETRY
    assert found.seen == 1 and keys.fetches == 1
    keys.clock.now += JWKS_RETRY + 1                               # past the window: one fetch again
    assert forged(url, "later").status_code == 502 and found.seen == 2
    assert forged(url, "later-again").status_code == 502 and found.seen == 2


# -- the document's bounds -------------------------------------------------------------------------------------------
def test_an_oversized_jwks_is_refused_cleanly_and_not_fetched_again_at_once(service):
    url, engine, tool, found = service
    found.body = b'{"keys": [' + b'{"kty": "RSA"},' * (J.MAX_BYTES // 14) + b"{}]}"
    kinds = lti_tables.LtiNonce, lti_tables.LtiUser, lti_tables.LtiContext, tables.WebSession
    refused = forged(url, "k1")
    assert refused.status_code == 502 and said(refused, "service.lti.bad_jwks"), refused.text
    assert "autograder_session" not in refused.headers.get("set-cookie", "")
    assert forged(url, "k1").status_code == 502 and found.seen == 1
    with engine.connect() as conn:
        assert all(conn.execute(select(func.count()).select_from(t)).scalar_one() == 0 for t in kinds)
    found.length = False                    # no Content-Length: the body is cut at the bound as it comes
    keys = key_set(found.url, Clock())
    with pytest.raises(J.Unusable, match="bytes"):
        keys.signing_key("k1")


@pytest.mark.parametrize("document", [
    b"not json", b"[]", b'{"keys": "none"}', b'{"nothing": []}', b"[" * 100_000 + b"]" * 100_000,
    json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "k1"}]}).encode(),          # no RSA key
    json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "n": "!!", "e": "AQAB"}]}).encode(),    # one that does not load
    json.dumps({"keys": [{**jwk(rsa_key(), "k1"), "use": "enc"}]}).encode(),                 # not for signatures
])
def test_a_malformed_jwks_is_refused_cleanly(document):
    with pytest.raises(J.Unusable):
        J.parse(document)


def test_a_jwks_of_too_many_keys_is_refused_whole_and_its_usable_keys_are_kept_from_a_mixed_one():
    signer = rsa_key()
    one = jwk(signer, "k0")
    with pytest.raises(J.Unusable, match="keys"):
        J.parse(json.dumps({"keys": [{**one, "kid": f"k{n}"} for n in range(J.MAX_KEYS + 1)]}).encode())
    mixed = {"keys": [{"kty": "EC", "kid": "ec"}, {**one, "kid": ""}, "x", one, {**one, "kid": "enc", "use": "enc"}]}
    assert list(J.parse(json.dumps(mixed).encode())) == ["k0"]
