"""course.yml's problems in the reader's words: what :func:`autograder.course.config.parse_course` raises.

pydantic's errors name a field by its path (``assignments[1].exercises[1].point``); here each becomes
the place as an instructor knows it (``exercise 2.2 (assignments[1].exercises[1]): point``), an unknown key
gets a "did you mean ..." hint, and a file with many problems lists the first :data:`MAX_REPORTED`.
"""
from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

#: Problems of one course.yml listed at once (each on its own line).
MAX_REPORTED = 10


def did_you_mean(word: str, options: list[str]) -> str | None:
    """``"did you mean 'x'?"`` for the option closest to ``word``; None when none is close."""
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model under ``root`` that owns the field at ``loc`` (for did-you-mean on unknown keys)."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model


def _named_path(loc: tuple[Any, ...], data: Any) -> str:
    """``assignments[1].exercises[1].point`` as the reader knows it: ``exercise 2.2: point``."""
    try:
        if len(loc) >= 4 and loc[0] == "assignments" and loc[2] == "exercises":
            ex = data["assignments"][loc[1]]["exercises"][loc[3]]
            if isinstance(ex, dict) and isinstance(ex.get("id"), str):
                rest = _field_path(loc[4:]) if loc[4:] else ""
                return f"exercise {ex['id']} ({_field_path(loc[:4])})" + (f": {rest}" if rest else "")
        if len(loc) >= 2 and loc[0] == "assignments":
            a = data["assignments"][loc[1]]
            if isinstance(a, dict) and isinstance(a.get("id"), str):
                rest = _field_path(loc[2:]) if loc[2:] else ""
                return f"assignment {a['id']} ({_field_path(loc[:2])})" + (f": {rest}" if rest else "")
    except (KeyError, IndexError, TypeError):
        pass
    return _field_path(loc)


def describe(error: ErrorDetails, data: Any, root: type[BaseModel]) -> tuple[str, str | None]:
    """(what is wrong and where, a hint or None) of one validation error of ``data`` read as ``root``."""
    loc = tuple(error["loc"])
    path = _named_path(loc, data)
    kind = error["type"]
    if kind == "extra_forbidden":
        owner = _model_at(root, loc[:-1])
        hint = did_you_mean(str(loc[-1]), list(owner.model_fields)) if owner else None
        return f"{path}: unknown key", hint
    if kind == "missing":
        return f"{path}: missing (required field)", None
    got = error.get("input")
    msg = error["msg"].removeprefix("Value error, ")
    if kind == "value_error" and not loc:      # a course-wide check names its own place
        return msg, ("or give the course a timezone: (an IANA name) for dates written without one"
                     if "has no time zone" in msg else None)
    return f"{path}: {msg} (got {got!r})" if kind != "value_error" else f"{path}: {msg}", None


def validation_message(exc: ValidationError, data: Any, root: type[BaseModel], source: str) -> str:
    """Every problem ``exc`` found in ``data`` (read as ``root``, from the file ``source``), one a line:
    the first :data:`MAX_REPORTED`, then how many more."""
    # An unknown key first: a typo'd key also shows up as "missing" under its real name.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    lines = []
    for error in errors[:MAX_REPORTED]:
        text, hint = describe(error, data, root)
        lines.append(f"{source}: {text}" + (f" ({hint})" if hint else ""))
    if len(errors) > MAX_REPORTED:
        lines.append(f"... and {len(errors) - MAX_REPORTED} more")
    return "\n  ".join(lines)
