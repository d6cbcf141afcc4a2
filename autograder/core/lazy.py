"""Lazy re-exports for a package's ``__init__``: a name loads its module on first use.

A package writes what it re-exports once, as imports under ``if TYPE_CHECKING:`` (what type checkers,
editors and readers see), and ends with ``__getattr__ = lazy_exports(__name__, __file__)``. At run time
the first use of a name imports the module that block names for it, so importing one module of a package
(``autograder.grading.cells``) no longer loads every sibling, torch and pydantic with them.

A name the block does not list but which is a module of the package (``grading.lanes``) is imported as
that module, as an eager ``__init__`` that imported it would have offered it.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lazy_exports(package: str, init_file: str) -> Callable[[str], Any]:
    """The package's module-level ``__getattr__`` (PEP 562), reading its ``TYPE_CHECKING`` imports once."""
    table: dict[str, tuple[str, str]] = {}

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if not table:
            table.update(type_checking_imports(package, Path(init_file).read_text(encoding="utf-8")))
        if name in table:
            module, attribute = table[name]
            value = getattr(importlib.import_module(module), attribute)
        elif importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)     # the next use is a plain attribute
        return value

    return __getattr__


def type_checking_imports(package: str, source: str) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) of every ``from ... import ...`` under ``if TYPE_CHECKING:`` in ``source``."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            module = statement.module or ""
            if statement.level:
                base = package.split(".")[: len(package.split(".")) - (statement.level - 1)]
                module = ".".join([*base, *([module] if module else [])])
            for alias in statement.names:
                out[alias.asname or alias.name] = (module, alias.name)
    return out
