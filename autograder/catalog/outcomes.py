"""What a check's run comes to: its status, the failure it raised, its result; and what a hidden
check may say (:func:`hidden_message`: no input, no reference value, nothing the student's objects
spelled beyond :func:`brief`).
"""
from __future__ import annotations

import builtins
import enum
import functools
import re
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autograder.inside import plain
from autograder.catalog.declarations import Check
from autograder.core.messages import Msg, say


# -- outcomes ------------------------------------------------------------------
class Status(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not_attempted"
    MISSING = "missing"          # the function is not defined
    ERROR = "error"              # the student's code raised
    FORBIDDEN = "forbidden"      # a forbidden call was made
    TIMEOUT = "timeout"
    CRASHED = "crashed"          # the worker died (exit, memory, signal)
    TOO_LARGE = "too_large"
    CHECK_ERROR = "check_error"  # a fault in the kit's own check: reported loudly, never silent


class CheckFailed(Exception):
    """A failed expectation; ``diagnose`` asks the framework to look for a known mistake.

    ``hidden`` is what a hidden check may say instead of ``message``: what was wrong
    without the inputs, the reference's values or text from the student's objects
    (shapes, dtypes, :func:`brief` and which property or output are fine). None: a
    hidden check shows a generic sentence naming the check (see :func:`hidden_message`).
    ``error_type``: for ``Status.ERROR``, the class name of what the student's code raised.
    ``mistake``: the known mistake the check itself recognised, by name, where its signature is nothing an
    output shows (what an error's message says): no output comparison can name it, since a diagnosis is
    given only where the mistake's output departs from the reference's.
    """

    def __init__(self, message: Msg, *, diagnose: bool = False, status: Status = Status.FAILED,
                 hidden: Msg | None = None, error_type: str = "", mistake: str | None = None):
        super().__init__(message.en)
        self.message = message
        self.diagnose = diagnose
        self.status = status
        self.hidden = hidden
        self.error_type = error_type
        self.mistake = mistake
        #: The case that failed, set by ``with ctx.case(...)``: messages start with it.
        self.case: Msg | None = None


@dataclass
class CheckResult:
    exercise: str
    check: str
    audience: str
    kind: str
    title: Msg
    status: Status
    points: float
    max_points: float
    message: Msg | None = None
    mistake: str | None = None
    mistake_message: Msg | None = None
    forbidden: list[str] = field(default_factory=list)
    seconds: float = 0.0
    withheld: bool = False          # passed, but a needs_output check with no passing output check: 0 points
    #: A hidden check's full message (values and all), for the instructor only: never in to_json,
    #: so never in a results file or a student's feedback.
    detail: Msg | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "exercise": self.exercise, "check": self.check, "audience": self.audience, "kind": self.kind,
            "title": self.title._asdict(), "status": self.status.value, "passed": self.passed,
            "points": round(self.points, 2), "max_points": round(self.max_points, 2),
            "message": self.message._asdict() if self.message else None,
            "mistake": self.mistake,
            "mistake_message": self.mistake_message._asdict() if self.mistake_message else None,
            "forbidden": self.forbidden, "seconds": round(self.seconds, 4), "withheld": self.withheld,
        }


# -- what a hidden check may say ---------------------------------------------------
#: The longest description of a student's returned object a hidden check's message may hold.
BRIEF_LIMIT = 80


#: Scalar type names brief() may repeat; any other (a subclass of np.float64 named by the
#: student, say) is described by its kind alone.
_SCALAR_TYPES = frozenset({"float", "int", "bool", "numpy.float64", "numpy.float32", "numpy.float16",
                           "numpy.int64", "numpy.int32", "numpy.int16", "numpy.int8", "numpy.uint8",
                           "numpy.bool_", "numpy.bool", "int (huge)"})


#: A number with a fraction or a signed exponent, as f"{x:.6g}" writes one ("0.123457", "3e-05"):
#: a value, never a shape, a count or a label like "1e4".
_VALUE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+(?:e[-+]?\d+)?|e[-+]\d+)", re.IGNORECASE)


def brief(value: plain.Value) -> str:
    """A bounded description of a returned value: kind, dtype, shape; no value, string, key or type name.

    :meth:`plain.Value.describe` repeats what the student's objects spell (a number's value,
    a string, a dict's keys, a class's name), any of which can be built from a hidden input.
    """
    text = _brief(value.spec, value.arrays, 0)
    if len(text) <= BRIEF_LIMIT:
        return text
    cut = text[:BRIEF_LIMIT - 1]
    if text[BRIEF_LIMIT - 1].isalnum():
        # Never half a word ("fl…" for float): back to the last separator.
        cut = cut[:max(i for i, ch in enumerate(cut) if not ch.isalnum()) + 1] if any(
            not ch.isalnum() for ch in cut) else cut
    return cut.rstrip(", ") + "…"


def _brief(spec: dict[str, Any], arrays: dict[str, np.ndarray], depth: int) -> str:
    t = spec.get("t")
    if t == "tensor":
        dtype = str(spec.get("dtype", "")).removeprefix("torch.")
        return f"Tensor{tuple(int(n) for n in spec['shape'])} {dtype}"
    if t == "ndarray":
        key = spec.get("k")
        arr = arrays.get(key) if isinstance(key, str) else None
        dtype = arr.dtype.name if isinstance(arr, np.ndarray) else "?"
        return f"ndarray{tuple(int(n) for n in spec['shape'])} {dtype}"
    if t in ("float", "int", "bool"):
        kind = spec.get("type")
        kind = kind if kind in _SCALAR_TYPES else t
        return str(kind)
    if t in ("tuple", "list"):
        items = spec.get("items") or []
        if depth >= 2:
            return f"{t}[{len(items)}]"
        inner = ", ".join(_brief(i, arrays, depth + 1) for i in items[:4])
        return f"{t}[{len(items)}]: ({inner}{', …' if len(items) > 4 else ''})"
    if t == "dict":
        n = len(spec.get("items") or {})
        return f"dict[{n}]"
    if t == "none":
        return "None"
    if t == "str":
        return "str"
    return "<object>"


def number_free(text: str, limit: int = 300) -> str:
    """A hidden check's message, with any value-looking number cut out and bounded in length.

    The last line of defence of :func:`hidden_message`: every hidden message is written to
    hold no values, and this keeps one that slipped (a label formatting an input) from
    showing it.
    """
    text = _VALUE.sub("…", text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


@functools.cache
def known_exceptions() -> frozenset[str]:
    """The exception class names a hidden message may repeat: Python's own and those of torch and NumPy.

    Any other name was chosen by the student's code (a class defined in the notebook, or a name the
    worker reported): letters can spell anything, hidden input values included, so it is never shown.
    """
    names = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    modules: tuple[types.ModuleType, ...]
    try:
        import numpy  # noqa: PLC0415 - beside its ImportError fallback
        import torch  # noqa: PLC0415 - beside its ImportError fallback

        modules = (torch, torch.cuda, torch.linalg, torch._C, numpy, numpy.linalg, numpy.exceptions)  # noqa: SLF001 - torch's C API
    except ImportError:
        modules = ()
    for module in modules:
        names |= {n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, BaseException)}
    return frozenset(n for n in names if re.fullmatch(r"[A-Za-z_]{1,40}", n))


def safe_name(name: str) -> str:
    """An exception's class name as a hidden message may repeat it: a builtin, torch or NumPy exception's
    (:func:`known_exceptions`), else ""."""
    return name if name in known_exceptions() else ""


def hidden_message(check: Check, failed: CheckFailed) -> Msg:
    """What a hidden check's failure says: its hidden message, or a sentence naming the check.

    The exception's own text is the student's (``str(x)`` of a hidden input would leak it),
    so an error names only the exception's class.
    """
    if failed.status is Status.ERROR:
        kind = safe_name(failed.error_type)
        return say("check.raised_hidden", kind=kind or say("check.own_exception" if failed.error_type
                                                           else "check.some_exception"))
    if failed.hidden is not None:
        return Msg(number_free(failed.hidden.zh), number_free(failed.hidden.en))
    return say("check.failed_hidden", title=check.title)


def with_case(message: Msg | None, case: Msg | None, *, hidden: bool = False) -> Msg | None:
    """``message`` preceded by the case that failed (a hidden check's case name number-free too)."""
    if case is None or message is None:
        return message
    zh, en = (number_free(case.zh, 120), number_free(case.en, 120)) if hidden else (case.zh, case.en)
    return Msg(f"{zh}：{message.zh}", f"{en}: {message.en}")


@dataclass
class ExerciseResult:
    exercise: str
    function: str
    points: float
    max_points: float
    status: Status
    checks: list[CheckResult]

    def to_json(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "function": self.function, "points": round(self.points, 2),
                "max_points": self.max_points, "status": self.status.value,
                "checks": [c.to_json() for c in self.checks]}
