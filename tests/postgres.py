"""A real PostgreSQL server for a test: started in a temporary folder of its own, on a Unix socket there
(no TCP), as the postgres user when the tests run as root (the server refuses root), stopped after.

The server comes from Debian's postgresql package, which the set-up installs (docs/admin/setup.md)
(scripts/install-postgres.sh); where it is missing the fixture says so instead of running.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _as_owner(argv: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *argv] if owner else argv


class Server(str):
    """The URL of a running server's database, and how to restart that server."""

    restart: Any


@contextmanager
def server() -> Iterator[Server]:
    """A running server; yields the SQLAlchemy URL of its database ``autograder``."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's server is not installed (scripts/install-postgres.sh installs it)")
    folder = Path(tempfile.mkdtemp(prefix="autograder-pg-"))
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        entry = pwd.getpwnam(owner)
        os.chmod(folder, 0o755)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    data, port = folder / "data", 5400 + os.getpid() % 500
    log = folder / "server.log"
    try:
        subprocess.run(_as_owner([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                                  "--no-sync"], owner), check=True, capture_output=True, timeout=120)
        subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
                                  f"-p {port} -k {folder} -c listen_addresses='' -c fsync=off", "start"], owner),
                       check=True, capture_output=True, timeout=120)
        subprocess.run(_as_owner([str(bin_dir / "createdb"), "-h", str(folder), "-p", str(port), "-U", "postgres",
                                  "autograder"], owner), check=True, capture_output=True, timeout=60)
        url = Server(f"postgresql+psycopg://postgres@/autograder?host={folder}&port={port}")

        def restart() -> None:
            subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-m", "fast",
                                      "restart"], owner), check=True, capture_output=True, timeout=120)

        url.restart = restart
        yield url
    finally:
        subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], owner),
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(base: str, name: str) -> str:
    """A new, empty database ``name`` on the server whose ``autograder`` database ``base`` names (dropped first if
    it is there): its URL."""
    from sqlalchemy import create_engine

    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return base.replace("/autograder?", f"/{name}?")
