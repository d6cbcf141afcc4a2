"""What ``autograder export TARGET ASSIGNMENT`` can write: one :class:`ExportTarget` per target, each
declared by its own module (``TARGET = ExportTarget(...)``) and listed in :data:`TARGET_MODULES`. Adding a
target is one new module that declares its files and what to tell the instructor, plus its tests."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The modules that declare an export target, in the order ``autograder export --help`` lists them.
TARGET_MODULES = ("autograder.exports.gradescope", "autograder.exports.otter")


@dataclass(frozen=True)
class ExportTarget:
    name: str                                                     # the command's word: "gradescope"
    help: str                                                     # one line for --help
    files: Callable[..., dict[str, bytes]]                        # (course, assignment, language=) -> path -> bytes
    next_steps: Callable[[Path, Any], str]                        # (the zip written, the assignment) -> what to do

    def zip_name(self, assignment_id: str) -> str:
        return f"{assignment_id}-{self.name}.zip"


def targets() -> dict[str, ExportTarget]:
    """Every export target, by name."""
    found: dict[str, ExportTarget] = {}
    for module in TARGET_MODULES:
        target = importlib.import_module(module).TARGET
        found[target.name] = target
    return found
