"""The service's database: its engine and its migrations.

One database holds everything the service must not lose: every notebook uploaded (its bytes and
their sha256, stored before the upload is acknowledged), the queue of grading jobs, and one result
per submission (the tables: :mod:`autograder.service.tables`, and the LMS's, :mod:`autograder.service.lti_tables`).
The embedded default is one SQLite file in WAL mode (readers never wait for the writer; ``busy_timeout`` makes a
second writer wait instead of failing), its files readable by their owner only; a deployment passes a
PostgreSQL URL (``postgresql+psycopg://...``). The schema is Alembic's to create and change
(:func:`upgrade`, from autograder/service/migrations beside this module), never ``create_all``, so a database
made by an older kit is migrated, not broken.

What it trusts: the URL it is given (the operator's ``--database``); a database that cannot be reached is one
error naming it, its password hidden.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from autograder.core.errors import AutograderError

#: How long a writer waits for SQLite's lock before it reports the database busy, in ms.
SQLITE_BUSY_MS = 30_000


def private_folder(folder: Path) -> Path:
    """``folder``, made if missing, readable by its owner only (0700): the service's data folder."""
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def private_sqlite(path: Path) -> None:
    """A SQLite database file and its WAL and shared-memory files readable by their owner only (0600), from
    their creation: every notebook and every hidden check's message is in them. SQLite gives the -wal and
    -shm files the database file's own mode, so the file is made 0600 before SQLite first opens it."""
    if not path.exists() and path.parent.is_dir():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
    for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if each.stat().st_mode & 0o077:
                os.chmod(each, 0o600)
        except OSError:
            pass


def engine_for(url: str) -> Engine:
    """An engine for ``url``: a path or ``sqlite:///FILE`` gives SQLite in WAL mode, its files 0600."""
    if "://" not in url:
        url = f"sqlite:///{Path(url).resolve()}"
    # pool_pre_ping: a connection the server dropped (PostgreSQL restarted) is replaced, not used and failed.
    engine = create_engine(url, future=True, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        if engine.url.database and engine.url.database != ":memory:":
            private_sqlite(Path(engine.url.database))
        @event.listens_for(engine, "connect")
        def _sqlite(dbapi: Any, _record: Any) -> None:
            # pysqlite's own transaction handling off: the queue issues BEGIN IMMEDIATE itself.
            dbapi.isolation_level = None
            cursor = dbapi.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # A writer (writing(engine)) takes the lock at once: no deadlock upgrading it; a reader takes none,
            # and in WAL mode never waits for the writer.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("writing") else "BEGIN")
    return engine


def writing(engine: Engine) -> Engine:
    """``engine`` for a transaction that writes (on SQLite it begins IMMEDIATE)."""
    return engine.execution_options(writing=True)


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest schema (Alembic; creates it when empty). A database that cannot
    be reached is one ERROR line naming it (its password hidden), never a traceback."""
    from alembic import command  # noqa: PLC0415 - loads alembic: migrations only
    from alembic.config import Config  # noqa: PLC0415 - loads alembic: migrations only


    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    try:
        with writing(engine).begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        if engine.dialect.name == "sqlite" and engine.url.database and engine.url.database != ":memory:":
            private_sqlite(Path(engine.url.database))       # (a database an older kit made 0644)
    except OperationalError as exc:
        where = engine.url.render_as_string(hide_password=True)
        why = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:300]
        raise AutograderError(f"--database {where}: cannot be opened ({why})",
                              hint="a SQLite file in a folder that exists, or a PostgreSQL server that is running "
                                   "(postgresql+psycopg://USER@HOST/DB)") from None
