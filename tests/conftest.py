"""Shared fixtures: a copy of the course in tmp_path that tests may build, break and edit; the module's sandbox; the
browser, the service's pages and the Hub's stand-in that several test modules use."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autograder.grading.process import GRADER_ENV

# Before numpy or torch load: their math in one thread, as in `autograder grade`. Numpy's OpenBLAS would
# otherwise start a thread pool at import, and grading lanes are forked only from a process without one.
for _key, _value in GRADER_ENV.items():
    os.environ.setdefault(_key, _value)

#: The repository: the course and the engine, side by side.
ROOT = Path(__file__).resolve().parent.parent

COPIED = ("course.yml", "pyproject.toml", "nbgrader_config.py", "autograder", "source", "release", "solutions")


def copy_course(root: Path) -> Path:
    """Copy the course's files (not .git, .venv or outputs) to ``root``; returns ``root``."""
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.tmp"))
        elif src.is_file():
            root.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    return root


@pytest.fixture
def course_root(tmp_path: Path) -> Path:
    """A copy of the course: tests never modify the repository."""
    return copy_course(tmp_path / "course")


@pytest.fixture(scope="session")
def built_once(tmp_path_factory) -> Path:
    """The course copied and built once per test process (`autograder build`: seconds): tests copy it, never edit it."""
    from autograder.authoring import build

    root = copy_course(tmp_path_factory.mktemp("built") / "course")
    build.build(root)
    return root


@pytest.fixture
def built_course_root(built_once: Path, tmp_path: Path) -> Path:
    """A copy of the course as `autograder build` leaves it (release/, solutions/, dist/): tests may edit it."""
    return Path(shutil.copytree(built_once, tmp_path / "course"))


@pytest.fixture
def one_thread():
    """The checks' tensors are tiny: a second intra-op thread only adds contention on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def course():
    """The course with the whole catalog (public, hidden, mistakes) loaded."""
    from autograder import catalog as C
    from autograder.course.config import load_course

    C.load_catalog(hidden=True, mistakes=True)
    return load_course()


@pytest.fixture(scope="module")
def postgres_server():
    """One PostgreSQL server for the module's tests (each test gets a database of its own: service_database)."""
    import postgres

    with postgres.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def service_database(request, tmp_path) -> str:
    """A fresh database's URL for the service: a SQLite file, or a new database on the module's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "service.db")
    import postgres

    return postgres.fresh_database(request.getfixturevalue("postgres_server"),
                                   f"t{abs(hash(request.node.nodeid)) % 10**9}")


@pytest.fixture
def service_engine(service_database):
    """An engine on a fresh service database (SQLite, then PostgreSQL), migrated to the newest schema."""
    from autograder.service import db

    engine = db.engine_for(service_database)
    db.upgrade(engine)
    yield engine
    engine.dispose()


# -- fixtures the test modules share: thin wrappers over the helper modules beside this file ---------------------------
@pytest.fixture(scope="module")
def sandbox(request):
    """One sandbox on the CPU for the module's tests, with the module's ``LIMITS`` (the course's where it has none)."""
    from autograder.sandbox import Sandbox

    limits = getattr(request.module, "LIMITS", None)
    if limits is None:
        from autograder.course.config import load_course

        limits = load_course().limits
    with Sandbox(limits, "cpu") as sb:
        yield sb


@pytest.fixture
def browser_kit():
    """The system Chromium and Playwright (tests/chromium.py), or a skip that says how to get them."""
    import chromium

    return chromium.find_browser()


@pytest.fixture
def site(tmp_path):
    """The service for tests/pages.py's COURSE on uvicorn over a new SQLite file: (base URL, engine, tokens of ada,
    ben and a teacher, database file)."""
    import pages

    with pages.site_for(tmp_path, pages.COURSE) as running:
        yield running


@pytest.fixture
def fake_hub():
    """A stand-in for JupyterHub's API on uvicorn (tests/hubs.py): its users, OAuth codes and the requests it saw."""
    import hubs

    with hubs.serving_fake_hub() as hub:
        yield hub
