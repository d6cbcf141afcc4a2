"""The HTTP server the service runs on: uvicorn, with bounds on slow and idle clients.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) and the connections and
requests in flight (``limit_concurrency``: past it, 503), but not a request whose header never
ends: a client sending a byte now and then holds a connection, and a file descriptor, forever.
:class:`BoundedH11Protocol` closes a connection whose request header is not complete within
:data:`HEADER_SECONDS` of its first byte (or of the connection: one that sends nothing is cut as
soon); a slow *body* is the guard's to refuse (:mod:`autograder.service.guard`). The process's
open-file limit is raised to its hard limit, so that many honest clients and a few hundred
attackers' connections fit below it.

Behind a reverse proxy (nginx, Caddy, JupyterHub's configurable-http-proxy) the proxy holds the
clients' connections and its own timeouts apply first; these bounds then guard the service from
the proxy's side (see docs/admin/service.md, a deployment with PostgreSQL).
"""
from __future__ import annotations

import asyncio
import resource
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: TID253 - this module is the server: it subclasses uvicorn

from autograder.core.errors import AutograderError

#: A request's header must be complete this long after its connection opens (or after the previous
#: response on a kept-alive connection, once its first byte came).
HEADER_SECONDS = 10.0
#: Connections and requests in flight at most (uvicorn answers 503 past it); kept below the open-file limit.
MAX_CONNECTIONS = 2_000
#: An idle kept-alive connection is closed after this long.
KEEP_ALIVE_SECONDS = 5


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request's header (see the module's text)."""

    header_seconds = HEADER_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._watch_header()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_header()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _watch_header(self) -> None:
        """Arm the header's deadline while a request's header is awaited, disarm it once it came."""
        waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
        if waiting and self._header_timer is None and self.timeout_keep_alive_task is None:
            self._header_timer = self.loop.call_later(self.header_seconds, self._header_late)
        elif not waiting:
            self._stop_header_timer()

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def bind(host: str, port: int) -> Any:
    """The service's listening socket, bound now: a port in use or an address not of this machine is one
    AutograderError naming it (before any worker starts, before anything says it is serving)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _name, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        sock.listen(2048)
    except OSError as exc:
        raise AutograderError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})",
                              hint="another program (an earlier autograder serve?) holds the port: stop it, or "
                                   "give --port another one") from None
    return sock


def raise_open_files() -> int:
    """The process's soft open-file limit raised to its hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65_536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def server_config(app: Any, host: str, port: int, *, header_seconds: float = HEADER_SECONDS,
                  max_connections: int = MAX_CONNECTIONS, keep_alive_seconds: int = KEEP_ALIVE_SECONDS) -> Any:
    """uvicorn's configuration for the service: its bounded protocol, the connection limit, short keep-alive."""
    import uvicorn

    protocol = type("BoundedH11", (BoundedH11Protocol,), {"header_seconds": header_seconds})
    return uvicorn.Config(app, host=host, port=port, http=protocol, limit_concurrency=max_connections,
                          timeout_keep_alive=keep_alive_seconds, log_level="warning", access_log=False)
