"""A platform's key set (its JWKS), as a launch needs it: no key outlives its key set, and no launch waits on another.

One :class:`KeySet` per JWKS URL holds the set last fetched (its RSA signing keys by key id) and when it came.
:meth:`KeySet.signing_key` answers from that set alone while it is fresh (``lifespan`` seconds); past that, or for a
key id not in it (a platform's new key, at most one fetch per ``cooldown`` seconds), the set is fetched again and
*replaces* the old one: a key the platform withdrew is gone with the first fetch that lacks it. There is no cache
of single keys beside the set.

A fetch is the only thing here that waits on the network, and a launch is an anonymous request: so one fetch per
set is in flight at a time (at most :data:`FETCHES_AT_ONCE` in all), and a caller that would have to wait for it is
refused at once (:class:`Busy`: 503 with Retry-After), never queued in the server's thread pool; while a set's
refetch is in flight, the set it replaces still answers for the keys it holds. A fetch that fails is remembered for
``retry`` seconds: the launches that need the set meanwhile are refused at once (:class:`Unreachable`, or
:class:`Unusable` for a document that is too large, malformed or without an RSA signing key) instead of each trying
again. Each fetch is bounded: ``timeout`` seconds, :data:`MAX_BYTES`, :data:`MAX_KEYS` keys.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The largest JWKS document taken (a platform's is a few KiB: its current key, the previous and the next).
MAX_BYTES = 256 * 1024
#: The most keys a JWKS may hold; a document with more is refused whole.
MAX_KEYS = 32
#: JWKS fetches in flight at once, over all the platforms (each set has one at most).
FETCHES_AT_ONCE = 4

_fetches = threading.BoundedSemaphore(FETCHES_AT_ONCE)


class KeySetError(Exception):
    """A key the key set cannot give; ``retry_after``: seconds after which asking again may help (or None)."""

    def __init__(self, why: str, retry_after: float | None = None):
        super().__init__(why)
        self.retry_after = retry_after


class UnknownKey(KeySetError):
    """The key id is not in the platform's current key set."""


class Busy(KeySetError):
    """The key set is being fetched by another request (or too many are being fetched): ask again shortly."""


class Unreachable(KeySetError):
    """The platform's JWKS did not come (no answer, an HTTP error, too slow), now or within ``retry`` seconds."""


class Unusable(KeySetError):
    """The platform's JWKS came but is no key set: too large, not JSON, too many keys, no RSA signing key."""


@dataclass(frozen=True)
class _Fetched:
    keys: dict[str, Any]            # key id -> jwt.PyJWK
    at: float


@dataclass(frozen=True)
class _Failed:
    error: KeySetError
    at: float


class KeySet:
    """The key set of the platform whose JWKS is at ``url`` (the module's rule); ``clock`` is a monotonic clock."""

    def __init__(self, url: str, *, lifespan: float, cooldown: float, retry: float, timeout: float,
                 clock: Callable[[], float] = time.monotonic):
        self.url, self.lifespan, self.cooldown, self.retry, self.timeout = url, lifespan, cooldown, retry, timeout
        self.clock = clock
        self.fetches = 0                                # fetches tried (what the tests count)
        self._current: _Fetched | None = None
        self._failed: _Failed | None = None
        self._fetching = threading.Lock()              # held by the one fetch in flight; never waited for
        self._since = 0.0                               # (when that fetch began, by time.monotonic)

    def signing_key(self, kid: str) -> Any:
        """The ``jwt.PyJWK`` of ``kid`` in the platform's current key set, fetched first where the module's rule
        says so; else :class:`UnknownKey`, :class:`Busy`, :class:`Unreachable` or :class:`Unusable`."""
        found = self._from_current(kid, self.clock())
        if found is not None:
            return found
        if not self._fetching.acquire(blocking=False):
            current, now = self._current, self.clock()
            if current is not None and kid in current.keys and now - current.at < self.lifespan + self.timeout:
                return current.keys[kid]                # the set being replaced still answers while its fetch runs
            raise Busy("a fetch of this key set is in flight", self._busy_for())
        try:
            if not _fetches.acquire(blocking=False):
                raise Busy("too many key sets are being fetched", 1.0)
            try:
                found = self._from_current(kid, self.clock())   # (a fetch that ended meanwhile may have brought it)
                if found is not None:
                    return found
                self._since = time.monotonic()
                self._fetch()
            finally:
                _fetches.release()
        finally:
            self._fetching.release()
        current = self._current
        if current is None or kid not in current.keys:
            raise UnknownKey(kid)
        return current.keys[kid]

    def _from_current(self, kid: str, now: float) -> Any:
        """``kid``'s key from a fresh set, None where the set must be fetched first, or the refusal that stands."""
        current = self._current
        fresh = current is not None and now - current.at < self.lifespan
        if current is not None and fresh and kid in current.keys:
            return current.keys[kid]
        failed = self._failed
        if failed is not None and now - failed.at < self.retry:
            raise type(failed.error)(str(failed.error), failed.at + self.retry - now)
        if current is not None and fresh and now - current.at < self.cooldown:
            raise UnknownKey(kid)                       # a key id not in a set this recent: no fetch for it
        return None

    def _busy_for(self) -> float:
        return min(self.timeout, max(1.0, self._since + self.timeout - time.monotonic()))

    def _fetch(self) -> None:
        """The set fetched again: it replaces the one held, or the failure is remembered (and raised)."""
        self.fetches += 1
        started = self.clock()
        try:
            keys = parse(self._download())
        except KeySetError as exc:
            now = self.clock()
            self._failed = _Failed(type(exc)(str(exc)), now)
            exc.retry_after = self.retry
            raise
        self._current, self._failed = _Fetched(keys, started), None

    def _download(self) -> bytes:
        import httpx  # (loaded with the first fetch)

        deadline = time.monotonic() + self.timeout
        body = bytearray()
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=True, max_redirects=3,
                              headers={"Accept": "application/json", "Accept-Encoding": "identity"}) as client, \
                    client.stream("GET", self.url) as response:
                if response.status_code != 200:
                    raise Unreachable(f"HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isascii() and declared.isdigit() and int(declared) > MAX_BYTES:
                    raise Unusable(f"{declared} bytes")
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise Unusable(f"over {MAX_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise Unreachable(f"over {self.timeout} s")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from None
        return bytes(body)


def parse(document: bytes) -> dict[str, Any]:
    """The RSA signing keys of a JWKS document by key id (keys of other kinds, for encryption or without a key id
    left out), or :class:`Unusable`."""
    import jwt  # noqa: PLC0415 - loads cryptography's backends

    if len(document) > MAX_BYTES:
        raise Unusable(f"over {MAX_BYTES} bytes")
    try:
        said = json.loads(document)
    except (ValueError, RecursionError):
        raise Unusable("not JSON") from None
    listed = said.get("keys") if isinstance(said, dict) else None
    if not isinstance(listed, list):
        raise Unusable("no list of keys")
    if len(listed) > MAX_KEYS:
        raise Unusable(f"{len(listed)} keys (at most {MAX_KEYS})")
    keys: dict[str, Any] = {}
    for jwk in listed:
        if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or jwk.get("use", "sig") != "sig":
            continue
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid or len(kid) > 200 or kid in keys:
            continue
        try:
            keys[kid] = jwt.PyJWK(jwk, algorithm="RS256")
        except (jwt.PyJWTError, ValueError, TypeError):
            continue                                    # (a key that does not load: the others still count)
    if not keys:
        raise Unusable("no RSA signing key")
    return keys
