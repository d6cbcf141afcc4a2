"""What the LTI routes and the passback share in one process: the tool's key, each platform's key set
(:class:`autograder.service.lti.jwks.KeySet`: the JWKS last fetched, fetched again after :data:`JWKS_SECONDS` or for a
key id not in it, a withdrawn key gone with the first fetch that lacks it; one fetch in flight per set, a failure
remembered :data:`JWKS_RETRY` seconds), and the platform services' client with its access tokens cached until they
expire; and the tool's URLs as an LMS is given them (:func:`urls`), with the placements and custom fields it is
set up with."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from autograder.service.lti.jwks import KeySet
from autograder.service.lti.keys import ToolKey, folder_for, load_or_make

#: How long a platform's JWKS is used before it is fetched again: a key the platform withdrew is refused at most
#: this long after (a key id not in it fetches it again sooner, see :data:`JWKS_COOLDOWN`).
JWKS_SECONDS = 300
#: Seconds after a fetch of a platform's JWKS before a key id not in it fetches it again (the guard against a
#: flood of made-up key ids): a platform's new key is taken at most this long after its first use.
JWKS_COOLDOWN = 30.0
#: Seconds a failed fetch of a platform's JWKS is remembered: the launches meanwhile are refused without one.
JWKS_RETRY = 10.0
#: Seconds the platform's JWKS may take to come.
HTTP_SECONDS = 10
#: Canvas' placements of the tool: both deep linking (an instructor picks the kit's assignment from a list).
CANVAS_PLACEMENTS = ("Assignment Selection", "Link Selection")
#: Moodle's setting for deep linking (then its Content Selection URL is the deep-link URL).
MOODLE_DEEP_LINKING = "Supports Deep Linking (Content-Item Message)"
#: The custom fields the tool reads (Canvas': the roster's canvas_id finds a student by the first).
CUSTOM_FIELDS = ("canvas_user_id=$Canvas.user.id",)


def urls(base: str) -> dict[str, str]:
    """The tool's URLs under the service's address ``base`` (its public URL): login initiation, launch (the
    redirect URI and target link URI), its keys (JWKS), and the deep-link URL (the launch's: a deep-linking request
    is a launch of its own message type)."""
    base = base.rstrip("/")
    return {"login": f"{base}/lti/login", "launch": f"{base}/lti/launch", "jwks": f"{base}/lti/jwks.json",
            "deep_link": f"{base}/lti/launch"}


class Tool:
    """The LTI tool of one service (its database, the course's folder)."""

    def __init__(self, engine: Engine, course_root: Path, *, http: Any = None):
        self.engine = engine
        self.folder = folder_for(engine, course_root)
        self._key: ToolKey | None = None
        self._jwks: dict[str, KeySet] = {}
        self._lock = threading.Lock()
        self._http = http
        self._services: Any = None
        self.jwks_cooldown = JWKS_COOLDOWN              # (read when a platform's key set is made: tests shorten it)

    @property
    def key(self) -> ToolKey:
        """The tool's key pair (made on first use)."""
        with self._lock:
            if self._key is None:
                self._key = load_or_make(self.folder)
            return self._key

    def jwks(self, url: str) -> KeySet:
        """The key set of the platforms whose JWKS is at ``url``."""
        with self._lock:
            if url not in self._jwks:
                self._jwks[url] = KeySet(url, lifespan=JWKS_SECONDS, cooldown=self.jwks_cooldown, retry=JWKS_RETRY,
                                         timeout=HTTP_SECONDS)
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
