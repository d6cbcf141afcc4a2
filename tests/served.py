"""An ASGI app on a real uvicorn server in a thread of the test's process, and a free local port."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(app: Any, port: int | None = None, **options: Any) -> Iterator[str]:
    """``app`` on uvicorn (a thread of this process) for the block, configured as ``autograder serve``
    configures it (``options``: server_config's bounds): its URL."""
    from autograder.service.server import server_config

    port = port or free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
