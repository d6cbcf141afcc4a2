"""A route handler holds no SQL (:mod:`autograder.service.repository`): no module of autograder/service/routes/ imports
SQLAlchemy or a table (:mod:`autograder.service.tables`, :mod:`autograder.service.lti_tables`: every module that
declares one on their base), and none opens a connection or runs a statement itself.
Every query the routes make is a function of the repository (or of the service module that owns the table)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from autograder.service import lti_tables, tables

ROOT = Path(__file__).resolve().parents[2]
ROUTES = ROOT / "autograder" / "service" / "routes"
#: The modules that declare a table: each mapped class's module (both imported above, so every table is mapped).
TABLE_MODULES = frozenset(m.class_.__module__ for m in tables.Base.registry.mappers)
#: The methods that run SQL: an engine's or a connection's.
SQL_CALLS = frozenset({"execute", "connect", "begin"})


def _tables() -> frozenset[str]:
    """The names of the table classes of the table modules (and their base)."""
    return frozenset(name for module in TABLE_MODULES for name, value in vars(sys.modules[module]).items()
                     if isinstance(value, type) and issubclass(value, tables.Base))


def _absolute(module: str | None, level: int, package: str) -> str:
    """An import's module as an absolute name (``from ..db import X`` inside ``package``)."""
    if not level:
        return module or ""
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*parts, *([module] if module else [])])


def _is_sqlalchemy(module: str) -> bool:
    return module == "sqlalchemy" or module.startswith("sqlalchemy.")


def _imports(tree: ast.AST, package: str, tables: frozenset[str]) -> tuple[set[tuple[int, str]], set[str]]:
    """(the imports of SQLAlchemy or of a table: line, what; the names a table module itself is bound to, as in
    ``from autograder.service import tables``)."""
    found: set[tuple[int, str]] = set()
    db_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, f"import {a.name}") for a in node.names if _is_sqlalchemy(a.name)}
            db_names |= {a.asname or a.name for a in node.names if a.name in TABLE_MODULES}
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node.module, node.level, package)
            if _is_sqlalchemy(module):
                found.add((node.lineno, f"from {module} import ..."))
            elif module in TABLE_MODULES:
                found |= {(node.lineno, f"from {module} import {a.name} (a table)") for a in node.names
                          if a.name == "*" or a.name in tables}
            db_names |= {a.asname or a.name for a in node.names if f"{module}.{a.name}" in TABLE_MODULES}
    return found, db_names


def sql_in(source: str, package: str = "autograder.service.routes", filename: str = "<source>") -> list[str]:
    """Each place in ``source`` (a module of ``package``) that holds SQL, as ``file:line: what``."""
    tables = _tables()
    tree = ast.parse(source, filename)
    found, db_names = _imports(tree, package, tables)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            found.add((node.lineno, f".{node.func.attr}(...)"))
        elif isinstance(node, ast.Attribute) and node.attr in tables and ast.unparse(node.value) in db_names:
            found.add((node.lineno, f"{ast.unparse(node)} (a table)"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(found)]


def test_no_route_module_holds_sql() -> None:
    modules = sorted(ROUTES.glob("*.py"))
    assert len(modules) > 5, modules            # the routes are where they were: this test reads something
    found = [place for path in modules
             for place in sql_in(path.read_text(encoding="utf-8"), filename=str(path.relative_to(ROOT)))]
    assert not found, "SQL in a route module (move the query into autograder/service/repository.py):\n" + \
        "\n".join(found)


def test_the_tables_are_known() -> None:
    assert TABLE_MODULES == {tables.__name__, lti_tables.__name__}
    assert {"Submission", "Result", "Job", "LtiContext", "LtiScore", "LtiUser"} <= _tables()
    assert "utcnow" not in _tables() and "granted_extensions" not in _tables()


@pytest.mark.parametrize(("source", "expected"), [
    ("from sqlalchemy import select\n", ["<source>:1: from sqlalchemy import ..."]),
    ("import sqlalchemy.orm as orm\n", ["<source>:1: import sqlalchemy.orm"]),
    ("from sqlalchemy.engine import Engine\n", ["<source>:1: from sqlalchemy.engine import ..."]),
    ("from autograder.service.tables import Result, utcnow\n",
     ["<source>:1: from autograder.service.tables import Result (a table)"]),
    ("from ..lti_tables import LtiScore\n",
     ["<source>:1: from autograder.service.lti_tables import LtiScore (a table)"]),
    ("from autograder.service import tables\n\nrows = tables.Submission\n",
     ["<source>:3: tables.Submission (a table)"]),
    ("from autograder.service import lti_tables as L\n\nrows = L.LtiUser\n", ["<source>:3: L.LtiUser (a table)"]),
    ("from autograder.service.db import writing, engine_for\n", []),
    ("def f(state):\n    with state.engine.connect() as conn:\n        return conn.execute(query).all()\n",
     ["<source>:2: .connect(...)", "<source>:3: .execute(...)"]),
    ("def f(engine):\n    with writing(engine).begin() as conn:\n        pass\n", ["<source>:2: .begin(...)"]),
    ("from autograder.service.tables import granted_extensions, utcnow\nfrom autograder.service import repository\n"
     "rows = repository.submissions(engine, student='ada')\n", []),
])
def test_sql_is_found_where_it_is(source: str, expected: list[str]) -> None:
    assert sql_in(source) == expected
