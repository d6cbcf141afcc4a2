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
    config = server_config(app, "127.0.0.1", port, **options)
    # A page left open holds a long poll (?wait=20): the test's server stops without waiting it out.
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
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


def student_token(engine, student: str, name: str = "") -> str:
    """A student's token as the service issues one: to a student on the roster (enrolled here first)."""
    from autograder.course.roster import Member
    from autograder.service import people, tokens

    people.import_members(engine, [Member(student, name=name)], by="test")
    return tokens.issue(engine, student, name=name)


def cli_student_token(base: list[str], env: dict[str, str], folder: Any, student: str) -> str:
    """A student's token through the command line, as an instructor gets one: ``serve roster`` on a one-line
    class list (``base`` is ``autograder serve --database ...``), its token read back from the tokens file."""
    import csv
    import subprocess
    from pathlib import Path

    roster, out = Path(folder) / f"roster-{student}.csv", Path(folder) / f"tokens-{student}.csv"
    roster.write_text(f"student\n{student}\n", encoding="utf-8")
    subprocess.run([*base, "roster", str(roster), "-o", str(out)], env=env, capture_output=True, text=True,
                   timeout=120, check=True)
    with out.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    return next(r["token"] for r in rows if r["student"] == student)


@contextlib.contextmanager
def at_revision(engine: Any, revision: str) -> Iterator[Any]:
    """A writing transaction on ``engine`` whose schema is Alembic's ``revision``: an older kit's database, to
    fill before the newest migrations run over it."""
    from pathlib import Path

    from alembic import command
    from alembic.config import Config

    from autograder.service import db

    config = Config()
    config.set_main_option("script_location", str(Path(db.__file__).parent / "migrations"))
    with db.writing(engine).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        yield connection
