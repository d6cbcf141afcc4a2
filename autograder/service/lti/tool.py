"""What the LTI routes and the passback share in one process: the tool's key, a JWKS client per platform (PyJWKClient:
the platform's keys cached, fetched again for a key id not seen yet), and the platform services' client with its
access tokens cached until they expire."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from autograder.service.lti.keys import ToolKey, folder_for, load_or_make

#: How long a platform's JWKS is kept before it is fetched again (a key id not in it is fetched at once).
JWKS_SECONDS = 300
#: Seconds after a fetch of a platform's JWKS before a key id not in it fetches it again (PyJWT's guard against a
#: flood of made-up key ids): a platform's new key is taken at most this long after its first use.
JWKS_COOLDOWN = 30.0
#: Seconds the platform's JWKS may take to come.
HTTP_SECONDS = 10


class Tool:
    """The LTI tool of one service (its database, the course's folder)."""

    def __init__(self, engine: Engine, course_root: Path, *, http: Any = None):
        self.engine = engine
        self.folder = folder_for(engine, course_root)
        self._key: ToolKey | None = None
        self._jwks: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._http = http
        self._services: Any = None
        self.jwks_cooldown = JWKS_COOLDOWN

    @property
    def key(self) -> ToolKey:
        """The tool's key pair (made on first use)."""
        with self._lock:
            if self._key is None:
                self._key = load_or_make(self.folder)
            return self._key

    def jwks(self, url: str) -> Any:
        """The PyJWKClient of the platform whose JWKS is at ``url``."""
        import jwt  # noqa: PLC0415 - loads cryptography's backends

        with self._lock:
            if url not in self._jwks:
                self._jwks[url] = jwt.PyJWKClient(url, cache_keys=True, lifespan=JWKS_SECONDS,
                                                  timeout=HTTP_SECONDS, cooldown_duration=self.jwks_cooldown)
            return self._jwks[url]

    def close(self) -> None:
        """The connections to the platforms closed."""
        with self._lock:
            if self._services is not None:
                self._services.http.close()
                self._services = None

    @property
    def services(self) -> Any:
        """The client of the platforms' services (:class:`autograder.service.lti.ags.Services`)."""
        from autograder.service.lti.ags import Services  # noqa: PLC0415 - loads httpx

        with self._lock:
            if self._services is None:
                self._services = Services(lambda: self.key, http=self._http)
            return self._services
