"""The check catalog: declarations, the context a check runs in, and scoring.

The engine names no exercise: each assignment's folder of the course (``source/<id>/``) declares
its *public* checks in ``checks.py`` (shipped to students), its hidden checks in ``hidden.py``
and its known mistakes in ``mistakes.py`` (neither is ever shipped); :func:`load_catalog`
imports them.

A check is a function ``run(ctx)`` on the trusted side. It builds inputs, asks
``ctx.call(...)`` to run the student's function (in-process for self-check, in a
sandbox worker for grading), gets back a :class:`plain.Value`, and compares with
``ctx.expect_*``. A failed expectation raises :class:`CheckFailed` with a message
in zh and en; when the failure is numerical, the framework compares the
student's output with each known mistake on the same inputs and names a match.

Points: an exercise's points come from course.yml and are shared among its
checks by ``weight``; a forbidden call anywhere in an exercise scores it 0.

Two rules of the engine (:func:`run_exercise`) keep grading honest:

* *Hidden stays hidden.* A failed expectation carries two messages: the full one
  (values, positions, what came back) and a ``hidden`` one that states what was
  wrong (a shape, a property, which output) with no input, no reference value and
  nothing the student's objects spelled beyond :func:`brief`. A hidden check's
  result only ever holds the hidden one, or a generic sentence naming the check
  when the raiser gave none, so a message nobody wrote for hidden checks cannot
  leak. The ``ctx.expect_*`` helpers write both; ``ctx.expect`` shows its text to
  hidden checks only when declared ``safe``.
* *No points without output.* A check that a submission passes without any
  correct output (a forbidden-call scan passes a function that returns None; a
  "raises ValueError" check passes one that always raises) is declared
  ``needs_output`` (every ``Kind.FORBIDDEN`` check is) and earns its points only
  when an output check of the same exercise (``OUTPUT_KINDS``: it compares values)
  passed. Its status stays; its points are 0 and ``withheld`` says why.
"""
from __future__ import annotations

import enum
import hashlib
import importlib
import importlib.util
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple, Protocol

import numpy as np
import torch

from autograder import plain
from autograder.messages import Msg, say
from autograder.points import shares as share_points, total as total_points
from autograder.probes import Reply, Request
from autograder.stopwatch import OFF, Stopwatch


# -- declarations --------------------------------------------------------------
class Audience(str, enum.Enum):
    PUBLIC = "public"    # runs in self-check and in the autograder
    HIDDEN = "hidden"    # autograder only


class Kind(str, enum.Enum):
    SHAPE = "shape"          # shape, dtype, device of every output
    PROPERTY = "property"    # rows sum to 1, exact zeros, round trips, finiteness
    FACT = "fact"            # the chapter's numbers
    NUMERIC = "numeric"      # agreement with a reference on seeded random inputs
    GRADIENT = "gradient"    # gradients against torch
    EDGE = "edge"            # T = 1, one head, fully padded rows, inputs near 1e4
    FORBIDDEN = "forbidden"  # forbidden library calls


#: Checks that compare the student's output with values: passing one is "a correct output".
OUTPUT_KINDS = frozenset({Kind.NUMERIC, Kind.FACT, Kind.GRADIENT})




@dataclass(frozen=True)
class Check:
    exercise: str
    name: str
    audience: Audience
    kind: Kind
    title: Msg
    run: Callable[["Context"], None]
    weight: float = 1.0
    #: Passes without any correct output (a forbidden-call scan, "raises ValueError"): earns its
    #: points only together with a passing check of OUTPUT_KINDS in the same exercise.
    needs_output: bool = False


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation with the same signature as the student's function."""

    exercise: str
    name: str
    message: Msg
    fn: Callable[..., Any]


@dataclass(frozen=True)
class ExerciseSpec:
    """Per-exercise facts the catalog owns (the rest is in course.yml)."""

    exercise: str
    forbidden: tuple[str, ...] = ()


CHECKS: dict[str, list[Check]] = {}
MISTAKES: dict[str, list[Mistake]] = {}
SPECS: dict[str, ExerciseSpec] = {}
#: exercise -> regular expressions of code that solves it in one line without being a line of its
#: reference (declared in hidden.py: they describe answers). ``autograder build`` refuses a student
#: bundle with a line that matches (matched with all whitespace removed).
NEAR_ANSWERS: dict[str, tuple[str, ...]] = {}


def check(exercise: str, name: str, audience: Audience, kind: Kind, zh: str, en: str,
          weight: float = 1.0, needs_output: bool | None = None
          ) -> Callable[[Callable[["Context"], None]], Callable[["Context"], None]]:
    """Decorator: declare a check of ``exercise``.

    ``needs_output`` (default: True for ``Kind.FORBIDDEN``, else False) declares a check that
    a submission can pass with no correct output; see the module docstring.
    """
    if needs_output is None:
        needs_output = kind is Kind.FORBIDDEN

    def register(fn: Callable[["Context"], None]) -> Callable[["Context"], None]:
        existing = CHECKS.setdefault(exercise, [])
        if any(c.name == name for c in existing):
            raise ValueError(f"check {exercise}/{name} declared twice")
        existing.append(Check(exercise, name, audience, kind, Msg(zh, en), fn, weight, needs_output))
        return fn

    return register


def mistake(exercise: str, name: str, zh: str, en: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare a known mistake of ``exercise`` (same signature as the student's function)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = MISTAKES.setdefault(exercise, [])
        if any(m.name == name for m in existing):
            raise ValueError(f"mistake {exercise}/{name} declared twice")
        existing.append(Mistake(exercise, name, Msg(zh, en), fn))
        return fn

    return register


def exercise(exercise_id: str, forbidden: Iterable[str] = ()) -> None:
    """Declare per-exercise facts (the forbidden calls, as exercises.md names them)."""
    SPECS[exercise_id] = ExerciseSpec(exercise_id, tuple(forbidden))


def near_answer(exercise_id: str, *patterns: str) -> None:
    """Declare near-answers of an exercise (hidden.py; see :data:`NEAR_ANSWERS`)."""
    for pattern in patterns:
        re.compile(pattern)
    NEAR_ANSWERS[exercise_id] = NEAR_ANSWERS.get(exercise_id, ()) + tuple(patterns)


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
    """

    def __init__(self, message: Msg, *, diagnose: bool = False, status: Status = Status.FAILED,
                 hidden: Msg | None = None, error_type: str = ""):
        super().__init__(message.en)
        self.message = message
        self.diagnose = diagnose
        self.status = status
        self.hidden = hidden
        self.error_type = error_type


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


# -- running student code ------------------------------------------------------
class Runner(Protocol):
    """Runs one request against the student's code: in-process or in a sandbox worker."""

    def __call__(self, request: Request) -> Reply: ...


class Diagnoser(Protocol):
    """Finds the known mistake whose output on ``request`` matches the student's ``got``."""

    def __call__(self, exercise: str, request: Request, got: plain.Value) -> Mistake | None: ...


def stable_seed(*parts: Any) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


PUBLIC_SEED = "public-self-check"


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
    return text if len(text) <= BRIEF_LIMIT else text[:BRIEF_LIMIT - 1] + "…"


def _brief(spec: dict[str, Any], arrays: dict[str, np.ndarray], depth: int) -> str:
    t = spec.get("t")
    if t == "tensor":
        dtype = str(spec.get("dtype", "")).removeprefix("torch.")
        return f"Tensor{tuple(int(n) for n in spec['shape'])} {dtype}"
    if t == "ndarray":
        arr = arrays.get(spec.get("k"))
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


def _safe_name(name: str) -> str:
    """An exception's class name as a hidden message may repeat it: letters only, bounded."""
    return name if re.fullmatch(r"[A-Za-z_]{1,40}", name or "") else ""


def hidden_message(check: "Check", failed: "CheckFailed") -> Msg:
    """What a hidden check's failure says: its hidden message, or a sentence naming the check.

    The exception's own text is the student's (``str(x)`` of a hidden input would leak it),
    so an error names only the exception's class.
    """
    if failed.status is Status.ERROR:
        kind = _safe_name(failed.error_type)
        return say("check.raised_hidden", kind=kind or say("check.some_exception"))
    if failed.hidden is not None:
        return Msg(number_free(failed.hidden.zh), number_free(failed.hidden.en))
    return say("check.failed_hidden", title=check.title)


@dataclass
class Context:
    """What a check sees: seeded inputs, the student's function, expectations."""

    exercise: str
    function: str
    check: str
    runner: Runner
    tolerances: Any                 # config.Tolerances
    seed: int
    forbidden: tuple[str, ...] = ()
    device: str = "cpu"
    reference_fn: Callable[..., Any] | None = None   # hidden checks: the solution
    last_request: Request | None = None
    last_value: plain.Value | None = None
    forbidden_seen: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timer: Stopwatch = OFF                    # where the time goes (see run_exercise); measures nothing by default
    calls: int = 0                            # calls made so far: the n in each request's site
    audience: Audience = Audience.PUBLIC      # whose check this is (a hidden one shows CheckFailed.hidden only)

    def __post_init__(self) -> None:
        self.generator = torch.Generator().manual_seed(self.seed)

    # inputs ---------------------------------------------------------------
    def randn(self, *shape: int, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> torch.Tensor:
        """Seeded normal noise on the CPU (moved to the device under test by the runner)."""
        with self.timer.section("inputs"):
            return torch.randn(*shape, generator=self.generator, dtype=torch.float64).mul_(scale).to(dtype)

    def randint(self, low: int, high: int, *shape: int) -> torch.Tensor:
        with self.timer.section("inputs"):
            return torch.randint(low, high, shape, generator=self.generator, dtype=torch.int64)

    def sizes(self, n: int, low: int = 2, high: int = 9) -> list[int]:
        """``n`` distinct sizes in [low, high], so a transposed axis cannot go unnoticed."""
        if high - low + 1 < n:
            raise ValueError("not enough distinct sizes")
        perm = torch.randperm(high - low + 1, generator=self.generator)[:n]
        return [int(p) + low for p in perm]

    # calling the student --------------------------------------------------
    def call(self, *args: Any, probe: str = "call", **kwargs: Any) -> plain.Value:
        """Run the student's function on these arguments; return what came back as plain data."""
        request, reply = self._send(args, kwargs, probe)
        for name in reply.forbidden:
            if name not in self.forbidden_seen:
                self.forbidden_seen.append(name)
        _refuse_forbidden(reply, self.forbidden)
        self.last_request = request
        self.last_value = None
        if reply.status == "ok":
            try:
                value = reply.value()
            except plain.PlainDataError as exc:
                raise CheckFailed(Msg(f"返回值无法读取：{exc}", f"the return value could not be read: {exc}"),
                                  hidden=Msg("返回值无法读取", "the return value could not be read"))
            self.last_value = value
            return value
        raise _reply_failure(reply, self.function)

    def call_raw(self, *args: Any, probe: str = "call", **kwargs: Any) -> Reply:
        """Like :meth:`call` but hands back the reply, e.g. to check that a call *raises*."""
        _request, reply = self._send(args, kwargs, probe)
        _refuse_forbidden(reply, self.forbidden)
        if reply.status not in ("ok", "error"):
            raise _reply_failure(reply, self.function)
        return reply

    def _send(self, args: tuple, kwargs: dict, probe: str) -> tuple[Request, Reply]:
        """One call through the runner. Its site (this check, n-th call) names it across machines."""
        self.calls += 1
        request = Request(self.function, args, kwargs, probe=probe, forbidden=self.forbidden,
                          device=self.device, site=f"{self.check}#{self.calls}")
        with self.timer.section("call"):
            reply = self.runner(request)
        self.seconds += reply.seconds
        self.timer.add("student", reply.seconds)
        return request, reply

    def reference(self, *args: Any, **kwargs: Any) -> Any:
        """Hidden checks: the reference solution on CPU float64 copies of the arguments."""
        if self.reference_fn is None:
            raise RuntimeError(f"check {self.exercise}/{self.check} has no reference (public check?)")
        with self.timer.section("reference"):
            return self.reference_fn(*as_float64(args), **as_float64(kwargs))

    # expectations ---------------------------------------------------------
    def tol(self, dtype: Any) -> tuple[float, float]:
        t = self.tolerances.for_dtype(dtype)
        return t.rtol, t.atol

    def expect_tuple(self, value: plain.Value, n: int, what: str = "the return value") -> list[plain.Value]:
        if value.kind not in ("tuple", "list") or len(value.spec["items"]) != n:
            raise CheckFailed(Msg(f"{what} 应当是 {n} 个元素的元组，实际是 {value.describe()}",
                                  f"{what} should be a tuple of {n}, got {value.describe()}"),
                              hidden=Msg(f"{what} 应当是 {n} 个元素的元组，实际是 {brief(value)}",
                                         f"{what} should be a tuple of {n}, got {brief(value)}"))
        return value.items()

    def expect_tensor(self, value: plain.Value, shape: tuple[int, ...] | None = None,
                      dtype: torch.dtype | None = None, device: str | None = None,
                      what: str = "the output") -> torch.Tensor:
        """A tensor of this shape/dtype/device (device defaults to the one under test).

        Shapes, dtypes and devices of a tensor are safe to state to hidden checks as well."""
        with self.timer.section("compare"):
            return self._tensor_as_expected(value, shape, dtype, device, what)

    def _tensor_as_expected(self, value: plain.Value, shape: tuple[int, ...] | None, dtype: torch.dtype | None,
                            device: str | None, what: str) -> torch.Tensor:
        if value.kind != "tensor":
            raise CheckFailed(Msg(f"{what} 应当是 torch.Tensor，实际是 {value.describe()}",
                                  f"{what} should be a torch.Tensor, got {value.describe()}"),
                              hidden=Msg(f"{what} 应当是 torch.Tensor，实际是 {brief(value)}",
                                         f"{what} should be a torch.Tensor, got {brief(value)}"))
        spec = value.spec
        if shape is not None and tuple(spec["shape"]) != tuple(shape):
            message = Msg(f"{what} 的形状应为 {tuple(shape)}，实际是 {tuple(spec['shape'])}",
                          f"{what} should have shape {tuple(shape)}, got {tuple(spec['shape'])}")
            raise CheckFailed(message, diagnose=True, hidden=message)
        if dtype is not None and spec["dtype"] != str(dtype):
            message = Msg(f"{what} 的 dtype 应为 {dtype}，实际是 {spec['dtype']}",
                          f"{what} should have dtype {dtype}, got {spec['dtype']}")
            raise CheckFailed(message, hidden=message)
        want_device = device or self.device
        got_device = torch.device(spec["device"])
        if got_device.type != torch.device(want_device).type:
            raise CheckFailed(Msg(f"{what} 应当在 {want_device} 上，实际在 {spec['device']}",
                                  f"{what} should be on {want_device}, got {spec['device']}"),
                              hidden=Msg(f"{what} 应当在 {want_device} 上，实际在 {got_device.type}",
                                         f"{what} should be on {want_device}, got {got_device.type}"))
        return value.tensor()

    def expect_close(self, got: torch.Tensor | np.ndarray | float, expected: Any, dtype: Any,
                     what: str = "the output", diagnose: bool = True) -> None:
        """Compare in float64 with the tolerance of ``dtype``; the message shows the largest difference.

        The hidden message says only that (and whether everywhere) the values differ.
        """
        rtol, atol = self.tol(dtype)
        with self.timer.section("compare"):
            problem = compare(got, expected, rtol, atol)
        if problem is not None:
            raise mismatch(problem, got, expected, rtol, atol, what, diagnose=diagnose)

    def expect(self, condition: bool, zh: str, en: str, diagnose: bool = False, *, safe: bool = False,
               hidden: Msg | None = None) -> None:
        """Fail with (zh, en) unless ``condition``.

        A hidden check shows ``hidden``, or (zh, en) itself when ``safe`` declares that
        they hold no value; else only a sentence naming the check.
        """
        if not condition:
            message = Msg(zh, en)
            raise CheckFailed(message, diagnose=diagnose, hidden=message if safe and hidden is None else hidden)


def as_float64(value: Any) -> Any:
    """Floating tensors/arrays -> float64 CPU copies, recursively (reference precision)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        return t.double() if t.is_floating_point() else t.clone()
    if isinstance(value, np.ndarray):
        return value.astype(np.float64) if value.dtype.kind == "f" else value.copy()
    if isinstance(value, tuple):
        return tuple(as_float64(v) for v in value)
    if isinstance(value, list):
        return [as_float64(v) for v in value]
    if isinstance(value, dict):
        return {k: as_float64(v) for k, v in value.items()}
    return value


def _to_double(x: Any) -> torch.Tensor:
    if isinstance(x, plain.Value):
        x = x.to_python()
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.asarray(x, dtype=np.float64).copy())
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double()
    return torch.tensor(float(x), dtype=torch.float64)


def compare(got: Any, expected: Any, rtol: float, atol: float, *, hidden: bool = False) -> tuple[str, str] | None:
    """None when close (NaN never equals anything); else (zh, en) with shapes and the largest difference.

    ``hidden``: the same verdict, told without values or positions (shapes only, and
    whether every element or some differ, NaN included).
    """
    g, e = _to_double(got), _to_double(expected)
    if g.shape != e.shape:
        return (f"形状应为 {tuple(e.shape)}，实际是 {tuple(g.shape)}",
                f"expected shape {tuple(e.shape)}, got {tuple(g.shape)}")
    if g.numel() == 0:
        return None
    # The common case in one pass: every difference finite and within tolerance. A NaN or an
    # infinity anywhere makes this False (NaN compares False; inf - inf is NaN), and the full
    # rules below decide, so the verdict is the same either way.
    if bool(((g - e).abs() <= atol + rtol * e.abs()).all()):
        return None
    bad_nan = torch.isnan(g) & ~torch.isnan(e)
    if hidden and bad_nan.any():
        if bool((e[bad_nan] == 0).all()):
            return ("在参考答案恰好为 0 的位置出现了 NaN", "NaN where the reference is exactly 0")
        return ("出现了 NaN，而参考答案在那里是一个数", "NaN where the reference has a number")
    if bad_nan.any():
        idx = tuple(int(i) for i in bad_nan.nonzero()[0])
        return (f"出现 NaN（位置 {idx}，期望 {e[idx].item():.6g}）",
                f"NaN at index {idx} (expected {e[idx].item():.6g})")
    same_inf = torch.isinf(e) & (g == e)
    diff = torch.where(same_inf, torch.zeros_like(g), (g - e).abs())
    limit = atol + rtol * e.abs().nan_to_num(posinf=0.0, neginf=0.0)
    over = (diff > limit) | (torch.isnan(diff) & ~torch.isnan(e))
    if not over.any():
        return None
    flat = int(torch.argmax(torch.where(over, diff.nan_to_num(nan=math.inf), torch.zeros_like(diff))))
    idx = tuple(int(i) for i in np.unravel_index(flat, tuple(g.shape))) if g.dim() else ()
    n_bad = int(over.sum())
    if hidden:
        # Which elements, as a class (all, or only where the reference is exactly 0: masked
        # positions, say), never their values or places.
        if g.numel() == 1:
            return ("与参考答案不符（超出容差）", "differs from the reference (beyond the tolerance)")
        every = n_bad == g.numel()
        zeros = not every and bool((e[over] == 0).all())
        where = ("每个元素", "every element") if every else \
            ("参考答案恰好为 0 的元素", "the elements where the reference is exactly 0") if zeros else \
            ("部分元素", "some elements")
        inf = bool((torch.isinf(g) & over).any())
        return (f"与参考答案不符：{where[0]}超出容差{'（含 inf）' if inf else ''}（形状 {tuple(g.shape)}）",
                f"differs from the reference in {where[1]}{' (inf among them)' if inf else ''} "
                f"(shape {tuple(g.shape)})")
    return (f"{n_bad}/{g.numel()} 个元素不符，最大差 {diff[idx].item():.3g} 在位置 {idx}：期望 {e[idx].item():.6g}，"
            f"得到 {g[idx].item():.6g}（形状 {tuple(g.shape)}）",
            f"{n_bad}/{g.numel()} elements differ, largest difference {diff[idx].item():.3g} at {idx}: "
            f"expected {e[idx].item():.6g}, got {g[idx].item():.6g} (shape {tuple(g.shape)})")


def mismatch(problem: tuple[str, str], got: Any, expected: Any, rtol: float, atol: float, what: str, *,
             diagnose: bool = True) -> "CheckFailed":
    """The failure of a :func:`compare` that found ``problem``: its hidden message told without values."""
    zh, en = problem
    hidden_zh, hidden_en = compare(got, expected, rtol, atol, hidden=True) or ("与参考答案不符", "differs from the reference")
    return CheckFailed(Msg(f"{what}：{zh}", f"{what}: {en}"), diagnose=diagnose,
                       hidden=Msg(f"{what}：{hidden_zh}", f"{what}: {hidden_en}"))


def values_match(got: plain.Value, other: plain.Value, tolerances: Any) -> bool:
    """Structural and numerical match of two plain values (diagnosis of known mistakes)."""
    a, b = got.spec, other.spec
    if a["t"] != b["t"]:
        # a float vs a 0-d tensor etc. still counts as the same mistake
        numeric = {"tensor", "ndarray", "float", "int"}
        if not (a["t"] in numeric and b["t"] in numeric):
            return False
    t = a["t"]
    if t in ("tuple", "list"):
        ia, ib = got.items(), other.items()
        return len(ia) == len(ib) and all(values_match(x, y, tolerances) for x, y in zip(ia, ib))
    if t == "dict":
        ka, kb = a["items"], b["items"]
        return ka.keys() == kb.keys() and all(
            values_match(plain.Value(ka[k], got.arrays), plain.Value(kb[k], other.arrays), tolerances) for k in ka)
    if t in ("none", "other", "str"):
        return a.get("type") == b.get("type") and a.get("v") == b.get("v")
    if t == "bool":
        return a["v"] == b.get("v")
    dtype = a.get("dtype", "float64")
    tol = tolerances.for_dtype(dtype)
    ga, gb = _to_double(got), _to_double(other)
    if ga.shape != gb.shape:
        return False
    if not torch.equal(torch.isnan(ga), torch.isnan(gb)):
        # compare() lets an expected NaN pass anything: a mistake's NaN must meet the student's NaN
        return False
    if got.kind == "tensor" and ga.numel() and not ga.is_floating_point():
        return bool((ga == gb).all())
    return compare(ga, gb, max(tol.rtol, 1e-6), max(tol.atol, 1e-7)) is None


# -- running checks --------------------------------------------------------------
def _refuse_forbidden(reply: Reply, known: Iterable[str] = ()) -> None:
    """Fail on a forbidden call. The names come from the worker: a hidden check repeats only known ones."""
    if reply.forbidden:
        known = set(known)
        named = [n for n in reply.forbidden if n in known] or ["a forbidden call"]
        raise CheckFailed(say("check.forbidden", names=", ".join(reply.forbidden)), status=Status.FORBIDDEN,
                          hidden=say("check.forbidden", names=", ".join(named)))


def _reply_failure(reply: Reply, function: str) -> CheckFailed:
    # Hidden messages: the worker's text (too_large) is the student's process speaking, the
    # sandbox's own (timeout, crashed) is bounded; neither repeats a value.
    if reply.status == "not_attempted":
        message = say("check.not_attempted")
        return CheckFailed(message, status=Status.NOT_ATTEMPTED, hidden=message)
    if reply.status == "missing":
        message = say("check.missing", function=function)
        return CheckFailed(message, status=Status.MISSING, hidden=message)
    if reply.status == "too_large":
        return CheckFailed(_sandbox_said("check.too_large", reply), status=Status.TOO_LARGE,
                           hidden=say("check.too_large_hidden"))
    if reply.status == "timeout":
        return CheckFailed(_sandbox_said("check.timeout", reply), status=Status.TIMEOUT,
                           hidden=_sandbox_said("check.timeout", reply, hidden=True))
    if reply.status == "crashed":
        return CheckFailed(_sandbox_said("check.crashed", reply), status=Status.CRASHED,
                           hidden=_sandbox_said("check.crashed", reply, hidden=True))
    return CheckFailed(say("check.raised", kind=reply.error_type, detail=reply.error),
                       status=Status.ERROR, error_type=reply.error_type)


def _sandbox_said(key: str, reply: Reply, hidden: bool = False) -> Msg:
    """``key``'s sentence around what the sandbox said: its own words in both languages when it gave
    them (``Reply.message``), else its text; a hidden check's without any number."""
    said = getattr(reply, "message", None)
    if not isinstance(said, Msg):
        said = Msg(reply.error or "", reply.error or "")
    if hidden:
        said = Msg(number_free(said.zh, 160), number_free(said.en, 160))
    return say(key, detail=said)


#: The package the course's own modules are imported under: ``autograder_course.<module>.checks``,
#: ``.hidden``, ``.mistakes`` (one subpackage per assignment, its folder the assignment's
#: :meth:`~autograder.config.Course.content_dir`), so that a course's files import each other
#: relatively (``from .checks import ...``, ``from ..padding_masks.checks import ...``).
COURSE_PACKAGE = "autograder_course"
from autograder.config import COURSE_FILES, HIDDEN_FILE, MISTAKES_FILE, PUBLIC_FILE  # noqa: E402,F401 - declared there

#: (course root, hidden, mistakes) of what is loaded now.
_LOADED: dict[str, Any] = {}


def _course_package(course: Any) -> None:
    """Make ``autograder_course`` and one subpackage per assignment importable from the course's folders."""
    import sys
    import types

    root = types.ModuleType(COURSE_PACKAGE, "The course being graded (loaded by autograder.catalog).")
    root.__path__ = []
    root.__file__ = str(course.root / "course.yml")
    sys.modules[COURSE_PACKAGE] = root
    for a in course.assignments:
        folder = course.content_dir(a)
        package = types.ModuleType(f"{COURSE_PACKAGE}.{a.module}", f"Checks of assignment {a.id}.")
        package.__path__ = [str(folder)]
        package.__package__ = package.__name__
        sys.modules[package.__name__] = package
        setattr(root, a.module, package)


def _forget_course() -> None:
    import sys

    # The references too (autograder.grading.references imports them as autograder_course.solutions.*).
    for name in [n for n in sys.modules if n == COURSE_PACKAGE or n.startswith(COURSE_PACKAGE + ".")]:
        del sys.modules[name]
    CHECKS.clear()
    MISTAKES.clear()
    SPECS.clear()
    NEAR_ANSWERS.clear()
    _LOADED.clear()


def load_catalog(course: Any = None, *, hidden: bool, mistakes: bool) -> None:
    """Import the course's check modules: each assignment's public checks, and where asked (and present:
    the instructor's course has them, a student's never) its hidden checks and known mistakes.

    ``course``: a :class:`~autograder.config.Course` (default: :func:`~autograder.config.load_course`).
    Loading another course's catalog first forgets the one loaded before.
    """
    from autograder.config import load_course
    from autograder.errors import ConfigError

    course = course if course is not None else load_course()
    root = str(course.root)
    if _LOADED.get("root") not in (None, root):
        _forget_course()
    if _LOADED.get("root") is None:
        _course_package(course)
        _LOADED.update(root=root, hidden=False, mistakes=False)
    wanted = [PUBLIC_FILE] + ([HIDDEN_FILE] if hidden else []) + ([MISTAKES_FILE] if mistakes else [])
    for a in course.assignments:
        folder = course.content_dir(a)
        for file in wanted:
            if file != PUBLIC_FILE and not (folder / file).is_file():
                continue      # a student's course: no hidden checks, no mistakes
            if not (folder / file).is_file():
                raise ConfigError(f"{folder / file}: missing: assignment {a.id} declares its public checks there",
                                  hint="every assignment folder has a checks.py (see the README: adding an exercise)")
            importlib.import_module(f"{COURSE_PACKAGE}.{a.module}.{file.removesuffix('.py')}")
    _LOADED["hidden"] = _LOADED["hidden"] or hidden
    _LOADED["mistakes"] = _LOADED["mistakes"] or mistakes


def hidden_available(course: Any = None) -> bool:
    """Whether the course has hidden checks here (the instructor's course; never a student's)."""
    from autograder.config import load_course

    course = course if course is not None else load_course()
    return any((course.content_dir(a) / HIDDEN_FILE).is_file() for a in course.assignments)


def checks_for(exercise_id: str, audiences: Iterable[Audience]) -> list[Check]:
    wanted = set(audiences)
    return [c for c in CHECKS.get(exercise_id, []) if c.audience in wanted]


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


def run_exercise(exercise: Any, runner: Runner, *, audiences: Iterable[Audience], tolerances: Any,
                 seed_parts: tuple[Any, ...], device: str = "cpu", reference: Callable[..., Any] | None = None,
                 diagnoser: Diagnoser | None = None, timer: Stopwatch = OFF) -> ExerciseResult:
    """Run every check of one exercise (a course.yml :class:`~autograder.config.Exercise`: its ID,
    function and points) for these audiences; score it.

    ``timer`` accumulates seconds per section: ``inputs`` (ctx.randn and friends), ``call`` (round
    trips to the student's code, of which ``student`` is the time inside it), ``reference``,
    ``compare`` (ctx.expect_tensor / expect_close) and ``diagnose`` (known mistakes run on the
    failing inputs).

    The two rules of the module docstring apply here: a hidden check's message is
    :func:`hidden_message` (its full one kept in ``CheckResult.detail`` for the
    instructor), and a ``needs_output`` check keeps its status but earns 0 points,
    ``withheld``, unless a check of ``OUTPUT_KINDS`` of this exercise passed.
    """
    exercise_id, function, max_points = exercise.id, exercise.function, exercise.points
    checks = checks_for(exercise_id, audiences)
    if not checks:
        raise ValueError(f"no checks declared for exercise {exercise_id}")
    spec = SPECS.get(exercise_id, ExerciseSpec(exercise_id))
    # Each check's share in hundredths of a point, adding up to max_points exactly (autograder.points).
    check_shares = share_points(max_points, [c.weight for c in checks])
    results: list[CheckResult] = []
    stop_status: Status | None = None
    for c, share in zip(checks, check_shares):
        if stop_status is not None:
            # Not attempted / missing: every later check would say the same.
            results.append(CheckResult(exercise_id, c.name, c.audience.value, c.kind.value, c.title,
                                       stop_status, 0.0, share, message=results[-1].message))
            continue
        ctx = Context(exercise_id, function, c.name, runner, tolerances,
                      stable_seed(*seed_parts, exercise_id, c.name), spec.forbidden, device, reference,
                      timer=timer, audience=c.audience)
        hidden = c.audience is Audience.HIDDEN
        status, message, found, detail = Status.PASSED, None, None, None
        try:
            c.run(ctx)
        except CheckFailed as failed:
            status, message = failed.status, failed.message
            if hidden:
                detail, message = message, hidden_message(c, failed)
            if failed.diagnose and diagnoser is not None and ctx.last_request is not None \
                    and ctx.last_value is not None:
                with timer.section("diagnose"):
                    found = diagnoser(exercise_id, ctx.last_request, ctx.last_value)
        except plain.PlainDataError as exc:
            # The text describes the student's value (describe()): hidden checks keep it as detail.
            status, message = Status.FAILED, Msg(f"返回值不对：{exc}", f"wrong return value: {exc}")
            if hidden:
                detail, message = message, Msg(f"返回值的类型或结构不对：{c.title.zh}",
                                               f"wrong kind of return value: {c.title.en}")
        except Exception as exc:  # noqa: BLE001 - a fault in the check itself must not lose the exercise
            status = Status.CHECK_ERROR
            message = Msg(f"检查程序本身出错（{type(exc).__name__}: {exc}），请告诉助教",
                          f"the check itself failed ({type(exc).__name__}: {exc}); tell the teaching staff")
            if hidden:
                kind = type(exc).__name__
                detail, message = message, Msg(f"检查程序本身出错（{kind}），请告诉助教",
                                               f"the check itself failed ({kind}); tell the teaching staff")
        results.append(CheckResult(
            exercise_id, c.name, c.audience.value, c.kind.value, c.title, status,
            share if status is Status.PASSED else 0.0, share, message=message,
            mistake=found.name if found else None, mistake_message=found.message if found else None,
            forbidden=list(ctx.forbidden_seen), seconds=ctx.seconds, detail=detail))
        if status in (Status.NOT_ATTEMPTED, Status.MISSING):
            stop_status = status
    _withhold_without_output(checks, results)
    forbidden = sorted({f for r in results for f in r.forbidden})
    points = total_points(r.points for r in results)
    if forbidden:
        points = 0.0
        for r in results:
            r.points = 0.0
        overall = Status.FORBIDDEN
    elif all(r.passed for r in results):
        overall = Status.PASSED
    elif stop_status is not None and all(r.status is stop_status for r in results):
        overall = stop_status
    else:
        overall = next((r.status for r in results if r.status in (Status.TIMEOUT, Status.CRASHED)),
                       Status.FAILED)
    return ExerciseResult(exercise_id, function, points, max_points, overall, results)


WITHHELD = Msg("这一项要和正确的输出一起才得分：本练习还没有一项比较输出数值的检查通过",
               "earns its points together with a correct output: no check of this exercise that compares "
               "the output's values passed")


def _withhold_without_output(checks: list[Check], results: list[CheckResult]) -> None:
    """No points without output: a passed ``needs_output`` check scores 0 unless an output check passed.

    A function that returns None calls nothing forbidden; one that always raises
    ValueError raises "a ValueError when E % H != 0". Such passes are worth their share
    only next to a value the student got right (a passed check of ``OUTPUT_KINDS``).
    """
    if any(r.passed and c.kind in OUTPUT_KINDS and not c.needs_output for c, r in zip(checks, results)):
        return
    for c, r in zip(checks, results):
        if c.needs_output and r.passed:
            r.points, r.withheld, r.message = 0.0, True, WITHHELD


# -- diagnosis ------------------------------------------------------------------
def in_process_runner(namespace: dict[str, Any]) -> Runner:
    """A runner for trusted code or the student's own kernel (no sandbox)."""
    from autograder.probes import execute

    def run(request: Request) -> Reply:
        # Copies, as the sandbox would: a function that edits its arguments in place must not
        # change the check's own inputs.
        return execute(namespace, copied(request))

    return run


def copied(request: Request) -> Request:
    """The request with fresh copies of its tensors and arrays, as a sandbox would see them.

    A function that edits its arguments in place then cannot change the check's
    inputs, nor the fingerprint the diagnoser computes afterwards.
    """
    return Request(request.function, _copy(request.args), _copy(request.kwargs), probe=request.probe,
                   forbidden=request.forbidden, device=request.device, site=request.site)


def _copy(value: Any) -> Any:
    if type(value) is torch.Tensor:
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad else copy
    if type(value) is np.ndarray:
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


class LiveDiagnoser:
    """Instructor side: runs each known mistake on the same inputs (needs the course's mistakes.py)."""

    def __init__(self, tolerances: Any):
        self.tolerances = tolerances

    def __call__(self, exercise_id: str, request: Request, got: plain.Value) -> Mistake | None:
        from autograder.probes import execute

        for m in MISTAKES.get(exercise_id, []):
            cpu_request = Request(request.function, request.args, request.kwargs, probe=request.probe)
            reply = execute({request.function: m.fn}, cpu_request)
            if reply.status == "ok" and values_match(got, reply.value(), self.tolerances):
                return m
        return None
