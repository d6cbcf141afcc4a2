"""Result files, written atomically (a temporary file in the same folder, then ``os.replace``): a batch
killed at any instant leaves each output either the old complete file or the new one, never half.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# the reports' writers, offered here
from autograder.core.atomic import atomic_write_bytes as atomic_write_bytes, atomic_write_text as atomic_write_text
from autograder.reports.model import RESULT_SCHEMA as RESULT_SCHEMA, checked  # the result format's version, one place


GRADED = "graded"


# -- atomic files (autograder.core.atomic) ------------------------------------------------------
def write_if_changed(path: Path, text: str, encoding: str = "utf-8") -> bool:
    """Atomic write, skipped when the file already holds exactly this text (keeps mtimes honest)."""
    data = text.encode(encoding)
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write_bytes(path, data)
    return True


def remove_stale_temporaries(folder: Path) -> None:
    """Temporary files a killed batch left behind (never a finished output)."""
    if folder.is_dir():
        for p in folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)


def dump_result(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def load_result(path: Path) -> dict[str, Any] | None:
    """A result file, or None when it is missing or not one of ours (not the result model's, see
    :mod:`autograder.reports.model`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != RESULT_SCHEMA:
        return None
    try:
        return checked(data)
    except ValidationError:
        return None
