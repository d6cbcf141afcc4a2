"""The platform's services as the tool calls them: an OAuth2 access token (client credentials, the tool's signed
assertion, RFC 7523), cached until it expires; Assignment and Grade Services' line items (found by their
``resourceId``, created only where none is) and scores; Names and Role Provisioning Services' member pages."""
from __future__ import annotations

import secrets
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from autograder.service.lti.platforms import Platform

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from autograder.service.lti.keys import ToolKey

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_MEMBERS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINE_ITEM = "application/vnd.ims.lis.v2.lineitem+json"
LINE_ITEMS = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE = "application/vnd.ims.lis.v1.score+json"
MEMBERS = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
#: The tag of the line items the tool creates.
TAG = "autograder"
#: Pages of a list followed at most (line items, members).
MAX_PAGES = 200
#: Seconds a call to a platform may take.
HTTP_SECONDS = 10.0
#: An access token is used until this many seconds before it expires.
TOKEN_MARGIN = 30


class PlatformError(Exception):
    """The platform did not do what was asked: ``transient`` where trying again later may help (it is away, busy,
    or answered 5xx/429), ``status`` its HTTP status (None: no answer)."""

    def __init__(self, message: str, *, transient: bool, status: int | None = None):
        super().__init__(message)
        self.transient, self.status = transient, status


def _failed(response: httpx.Response, what: str) -> PlatformError:
    status = response.status_code
    return PlatformError(f"{what}: HTTP {status} {response.text[:200]}", status=status,
                         transient=status >= 500 or status in (401, 408, 429))


class Services:
    """The platforms' services for one tool; thread-safe (the passback's thread and the pages' share it)."""

    def __init__(self, key: Callable[[], ToolKey], *, http: httpx.Client | None = None):
        import httpx

        self.key = key              # the tool's key (made on first use)
        self.http = http or httpx.Client(timeout=HTTP_SECONDS, follow_redirects=False)
        self._tokens: dict[tuple[int, tuple[str, ...]], tuple[str, float]] = {}
        self._lock = threading.Lock()
        self.requests = 0           # calls made to platforms (the token endpoint's included)

    def _send(self, method: str, url: str, **options: Any) -> httpx.Response:
        import httpx

        self.requests += 1
        try:
            return self.http.request(method, url, **options)
        except httpx.HTTPError as exc:
            raise PlatformError(f"{method} {url}: {type(exc).__name__} {exc}"[:300], transient=True) from None

    def token(self, platform: Platform, scopes: tuple[str, ...]) -> str:
        """An access token for ``scopes``, the cached one while it lasts."""
        key = (platform.id, scopes)
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
        now = int(time.time())
        assertion = self.key().sign({"iss": platform.client_id, "sub": platform.client_id,
                                        "aud": platform.audience, "iat": now, "exp": now + 300,
                                        "jti": secrets.token_urlsafe(16)})
        response = self._send("POST", platform.token_url, data={
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion, "scope": " ".join(scopes)})
        if response.status_code != 200:
            raise _failed(response, "access token")
        try:
            body = response.json()
            token, lasts = str(body["access_token"]), float(body.get("expires_in") or 3600)
        except (ValueError, KeyError, TypeError):
            raise PlatformError("access token: not an OAuth2 answer", transient=True) from None
        with self._lock:
            self._tokens[key] = (token, time.monotonic() + max(0.0, lasts - TOKEN_MARGIN))
        return token

    def call(self, platform: Platform, scopes: tuple[str, ...], method: str, url: str,
             **options: Any) -> httpx.Response:
        """A call with the access token; a 401 drops the cached token and tries once with a new one."""
        for attempt in (1, 2):
            token = self.token(platform, scopes)
            headers = {**options.pop("headers", {}), "Authorization": f"Bearer {token}"}
            response = self._send(method, url, headers=headers, **options)
            if response.status_code != 401 or attempt == 2:
                return response
            with self._lock:
                self._tokens.pop((platform.id, scopes), None)
            options["headers"] = {k: v for k, v in headers.items() if k != "Authorization"}
        raise AssertionError("unreachable")

    def _pages(self, platform: Platform, scopes: tuple[str, ...], url: str, accept: str, params: dict[str, Any],
               field: str | None) -> list[dict[str, Any]]:
        """Every item of a list and its next pages (the ``Link: rel="next"`` header)."""
        out: list[dict[str, Any]] = []
        next_url: str | None = url
        for page in range(MAX_PAGES):
            if next_url is None:
                break
            response = self.call(platform, scopes, "GET", next_url, headers={"Accept": accept},
                                 params=params if page == 0 else None)
            if response.status_code != 200:
                raise _failed(response, f"GET {next_url}")
            try:
                body = response.json()
            except ValueError:
                raise PlatformError(f"GET {next_url}: not JSON", transient=True) from None
            items = body.get(field) if field is not None and isinstance(body, dict) else body
            out.extend(i for i in items or [] if isinstance(i, dict))
            next_url = response.links.get("next", {}).get("url")
        return out

    # -- Assignment and Grade Services ---------------------------------------------------------------
    def line_items(self, platform: Platform, lineitems_url: str, resource_id: str) -> list[dict[str, Any]]:
        """The line items of an LMS course whose ``resourceId`` is ``resource_id``."""
        found = self._pages(platform, (SCOPE_LINEITEM,), lineitems_url, LINE_ITEMS,
                            {"resource_id": resource_id, "limit": 100}, None)
        return [i for i in found if i.get("resourceId") == resource_id and isinstance(i.get("id"), str)]

    def find_or_create(self, platform: Platform, lineitems_url: str, assignment: str, label: str,
                       maximum: float) -> str:
        """The URL of the assignment's line item: the one there is (the oldest where the LMS holds several), or a new
        one."""
        found = self.line_items(platform, lineitems_url, assignment)
        if found:
            return str(found[0]["id"])
        response = self.call(platform, (SCOPE_LINEITEM,), "POST", lineitems_url,
                             json={"label": label, "scoreMaximum": maximum, "resourceId": assignment, "tag": TAG},
                             headers={"Content-Type": LINE_ITEM, "Accept": LINE_ITEM})
        if response.status_code not in (200, 201):
            raise _failed(response, "create line item")
        try:
            return str(response.json()["id"])
        except (ValueError, KeyError, TypeError):
            raise PlatformError("create line item: no id in the answer", transient=True) from None

    def score(self, platform: Platform, lineitem_url: str, score: dict[str, Any]) -> None:
        """Post one Score to a line item (its URL + ``/scores``, its query kept)."""
        parts = urlsplit(lineitem_url)
        url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/scores", parts.query, ""))
        response = self.call(platform, (SCOPE_SCORE,), "POST", url, json=score, headers={"Content-Type": SCORE})
        if response.status_code not in (200, 201, 202, 204):
            raise _failed(response, "score")

    # -- Names and Role Provisioning Services --------------------------------------------------------
    def members(self, platform: Platform, memberships_url: str) -> list[dict[str, Any]]:
        """Every member of an LMS course (each page of the list)."""
        return self._pages(platform, (SCOPE_MEMBERS,), memberships_url, MEMBERS, {"limit": 100}, "members")
