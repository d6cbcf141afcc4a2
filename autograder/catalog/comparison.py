"""Comparing outputs: in float64 on the CPU, within the course's tolerance for the dtype under test.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from autograder.inside import plain
from autograder.core.messages import Msg
from autograder.catalog.outcomes import CheckFailed


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
        if x.dtype is torch.float64 and x.is_cpu and not x.requires_grad:
            return x            # already what the chain below gives (compare writes to neither side)
        return x.detach().cpu().double()
    return torch.tensor(float(x), dtype=torch.float64)


def compare(got: Any, expected: Any, rtol: float, atol: float, *, hidden: bool = False,
            slack: torch.Tensor | None = None) -> tuple[str, str] | None:
    """None when close (a NaN of ``got`` never equals a number); else (zh, en) with shapes and the largest
    difference.

    Close: ``|got - expected| <= atol + rtol * |expected| + slack`` everywhere, where an infinite expected
    value is met only by the same infinity and an expected NaN (an element the reference leaves undefined)
    by any value. ``slack`` (expected's shape, or None) is what rounding the
    inputs alone can move each element by (see Context.reference): any numerically sound method is that
    far off and right. ``hidden``: the same verdict, told without values or positions (shapes only, and
    whether every element or some differ, NaN included).
    """
    g, e = _to_double(got), _to_double(expected)
    if g.shape != e.shape:
        return (f"形状应为 {tuple(e.shape)}，实际是 {tuple(g.shape)}",
                f"expected shape {tuple(e.shape)}, got {tuple(g.shape)}")
    if g.numel() == 0:
        return None
    extra = slack.to(torch.float64) if slack is not None and tuple(slack.shape) == tuple(e.shape) else 0.0
    # The common case in one pass: every expected value finite, every difference finite and within
    # tolerance. A NaN anywhere makes this False (NaN compares False), an infinite expected value skips it
    # (inf <= atol + rtol * inf would hold for anything), and the full rules below decide. The bound is
    # atol + rtol * |e| + extra, each operation on the tensor's side (a float on the left of a tensor goes
    # through Python-level reflected operators) and in place on tensors of its own.
    if bool(torch.isfinite(e).all()):
        bound = e.abs().mul_(rtol).add_(atol)
        if isinstance(extra, torch.Tensor):
            bound.add_(extra)
        if bool((g - e).abs_().le_(bound).all()):
            return None
    bad_nan = torch.isnan(g) & ~torch.isnan(e)
    if bad_nan.any():
        return _nan_message(e, bad_nan, hidden)
    diff, over = _over(g, e, rtol, atol, extra)
    if not over.any():
        return None
    flat = int(torch.argmax(torch.where(over, diff.nan_to_num(nan=math.inf), torch.zeros_like(diff))))
    idx = tuple(int(i) for i in np.unravel_index(flat, tuple(g.shape))) if g.dim() else ()
    n_bad = int(over.sum())
    if hidden:
        return _hidden_message(g, e, over, n_bad)
    want, seen = shown_apart(e[idx].item(), g[idx].item())
    return (f"{n_bad}/{g.numel()} 个元素不符，最大差 {diff[idx].item():.3g} 在位置 {idx}：期望 {want}，"
            f"得到 {seen}（形状 {tuple(g.shape)}）",
            f"{n_bad}/{g.numel()} elements differ, largest difference {diff[idx].item():.3g} at {idx}: "
            f"expected {want}, got {seen} (shape {tuple(g.shape)})")


def _nan_message(e: torch.Tensor, bad_nan: torch.Tensor, hidden: bool) -> tuple[str, str]:
    """(zh, en) for a NaN where the reference has a number: the first place and value, unless ``hidden``."""
    if hidden:
        if bool((e[bad_nan] == 0).all()):
            return ("在参考答案恰好为 0 的位置出现了 NaN", "NaN where the reference is exactly 0")
        return ("出现了 NaN，而参考答案在那里是一个数", "NaN where the reference has a number")
    idx = tuple(int(i) for i in bad_nan.nonzero()[0])
    return (f"出现 NaN（位置 {idx}，期望 {e[idx].item():.6g}）",
            f"NaN at index {idx} (expected {e[idx].item():.6g})")


def _hidden_message(g: torch.Tensor, e: torch.Tensor, over: torch.Tensor, n_bad: int) -> tuple[str, str]:
    """(zh, en) for values beyond the tolerance, told without values or positions."""
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


#: Significant digits a number in a message gets at least, and at most (17 tell any two float64 apart).
SHOWN_DIGITS, MOST_DIGITS = 6, 17


def shown_apart(expected: float, got: float) -> tuple[str, str]:
    """Two numbers as a message prints them: :data:`SHOWN_DIGITS` significant digits, or as many more as it
    takes for two different numbers to read differently ("expected 0.00239768, got 0.00239768" says nothing;
    "expected 0.0023976812, got 0.0023976849" does)."""
    digits = SHOWN_DIGITS
    while True:
        a, b = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if a != b or digits >= MOST_DIGITS or expected == got or math.isnan(expected) or math.isnan(got):
            return a, b
        digits += 1


def _over(g: torch.Tensor, e: torch.Tensor, rtol: float, atol: float,
          extra: torch.Tensor | float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(|g - e|, where it is beyond the bound): :func:`compare`'s rule element by element (an infinite expected value
    met only by the same infinity, an expected NaN by anything, a NaN never close to a number)."""
    same_inf = torch.isinf(e) & (g == e)
    diff = torch.where(same_inf, torch.zeros_like(g), (g - e).abs())
    limit = atol + rtol * e.abs().nan_to_num(posinf=0.0, neginf=0.0) + extra
    return diff, (diff > limit) | (torch.isnan(diff) & ~torch.isnan(e))


#: What the expectations call a value they were not told the name of.
OUTPUT = Msg("输出", "the output")
RETURN_VALUE = Msg("返回值", "the return value")


def all_close_normwise(pairs: list[tuple[Any, Any]], rtol: float, atol: float) -> bool:
    """Whether every ``(got, want)`` pair passes ``compare(got, want, rtol, atol + rtol * top)``, ``top`` the
    largest magnitude of that ``want``: the common case of many tensors (a model's gradients) in one batched
    pass, a handful of operations in all instead of a dozen per tensor.

    True only where each pair would pass on its own, by the same float64 operations element by element
    (compare's first test, with every expected value finite). False says only "look at each pair": a
    difference beyond its bound, a NaN, an infinity, an empty or mismatched tensor, anything not a tensor.
    """
    if not pairs:
        return True
    gots, wants, sizes = [], [], []
    for got, want in pairs:
        if type(got) is not torch.Tensor or type(want) is not torch.Tensor or got.shape != want.shape \
                or not got.numel() or not got.is_floating_point() or not want.is_floating_point() \
                or not got.is_cpu or not want.is_cpu:
            return False
        gots.append(got.detach().reshape(-1))
        wants.append(want.detach().reshape(-1))
        sizes.append(got.numel())
    # float64 after joining (one conversion, exact from any float dtype), as compare converts each side
    e = torch.cat(wants).double()
    if not bool(torch.isfinite(e).all()):
        return False
    lengths = torch.tensor(sizes)
    tops = torch.segment_reduce(e.abs(), "max", lengths=lengths)        # each want's largest magnitude
    # atol + rtol * top, then |e| * rtol + that: compare's own operations on each element, in its order
    bound = e.abs().mul_(rtol).add_(tops.mul_(rtol).add_(atol).repeat_interleave(lengths))
    return bool((torch.cat(gots).double() - e).abs_().le_(bound).all())


def label(what: str | Msg) -> tuple[str, str]:
    """(zh, en) of a value's name in messages: a :class:`Msg`, or a code expression the same in both."""
    if isinstance(what, Msg):
        return what.zh, what.en
    return str(what), str(what)


def mismatch(problem: tuple[str, str], got: Any, expected: Any, rtol: float, atol: float, what: str | Msg, *,
             diagnose: bool = True, slack: torch.Tensor | None = None) -> CheckFailed:
    """The failure of a :func:`compare` that found ``problem``: its hidden message told without values."""
    zh, en = problem
    what_zh, what_en = label(what)
    hidden_zh, hidden_en = compare(got, expected, rtol, atol, hidden=True, slack=slack) or \
        ("与参考答案不符", "differs from the reference")
    return CheckFailed(Msg(f"{what_zh}：{zh}", f"{what_en}: {en}"), diagnose=diagnose,
                       hidden=Msg(f"{what_zh}：{hidden_zh}", f"{what_en}: {hidden_en}"))


#: The loosest a diagnosis compares (the course's tolerance where it is looser): a known mistake computed
#: another way (torch's softmax against the student's own) still matches.
DIAGNOSIS_RTOL, DIAGNOSIS_ATOL = 1e-6, 1e-7
#: The kinds of plain value that hold numbers: a float and a 0-d tensor count as the same value.
NUMERIC = frozenset({"tensor", "ndarray", "float", "int"})


def values_match(got: plain.Value, other: plain.Value, tolerances: Any) -> bool:
    """Structural and numerical match of two plain values (diagnosis of known mistakes)."""
    a, b = got.spec, other.spec
    if a["t"] != b["t"]:
        # a float vs a 0-d tensor etc. still counts as the same mistake
        if not (a["t"] in NUMERIC and b["t"] in NUMERIC):
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
    return compare(ga, gb, max(tol.rtol, DIAGNOSIS_RTOL), max(tol.atol, DIAGNOSIS_ATOL)) is None


def departures(got: plain.Value, expected: plain.Value | None, tolerances: Any) -> list[torch.Tensor]:
    """Where ``got`` departs from ``expected``, element by element, at the tolerance :func:`values_match` judges a
    match by (the dtype of ``expected``'s element): one flat bool tensor per leaf of ``got`` (a tensor or an array
    element by element; a number, a string, a bool or None as one element), in ``got``'s order. A leaf that
    ``expected`` lacks, or holds in another shape or kind, departs everywhere; so does every leaf when
    ``expected`` is None (no value: the reference raised).

    What a diagnosis weighs: a known mistake explains a student's failure only where the mistake departs from
    the reference too (see :class:`autograder.catalog.runners.LiveDiagnoser`).
    """
    out: list[torch.Tensor] = []
    _departures(got, expected, tolerances, out)
    return out


def _departures(got: plain.Value, expected: plain.Value | None, tolerances: Any, out: list[torch.Tensor]) -> None:
    t = got.kind
    if t in ("tuple", "list"):
        items = got.items()
        theirs: list[plain.Value | None] = [None] * len(items)
        if expected is not None and expected.kind in ("tuple", "list") and len(expected.spec["items"]) == len(items):
            theirs = list(expected.items())
        for mine, other in zip(items, theirs):
            _departures(mine, other, tolerances, out)
        return
    if t == "dict":
        keyed = expected.spec["items"] if expected is not None and expected.kind == "dict" else {}
        for k, spec in got.spec["items"].items():
            other = plain.Value(keyed[k], expected.arrays) if expected is not None and k in keyed else None
            _departures(plain.Value(spec, got.arrays), other, tolerances, out)
        return
    size = int(np.prod(got.spec["shape"])) if t in ("tensor", "ndarray") else 1
    if expected is None or t not in NUMERIC or expected.kind not in NUMERIC:
        same = expected is not None and values_match(got, expected, tolerances)
        out.append(torch.full((size,), not same, dtype=torch.bool))
        return
    g, e = _to_double(got).reshape(-1), _to_double(expected).reshape(-1)
    shapes = [list(v.spec["shape"]) for v in (got, expected) if v.kind in ("tensor", "ndarray")]
    if g.numel() != e.numel() or (len(shapes) == 2 and shapes[0] != shapes[1]):
        out.append(torch.ones(size, dtype=torch.bool))
        return
    tol = tolerances.for_dtype(expected.spec.get("dtype", got.spec.get("dtype", "float64")))
    out.append(_over(g, e, max(tol.rtol, DIAGNOSIS_RTOL), max(tol.atol, DIAGNOSIS_ATOL))[1])


def kinds(spec: Any) -> Any:
    """A plain value's spec without its values and array keys: its kinds, dtypes and shapes all the way down
    (a float32 tensor, an ndarray, a Python float...)."""
    if isinstance(spec, dict):
        return {k: kinds(v) for k, v in spec.items() if k not in ("k", "v")}
    if isinstance(spec, list):
        return [kinds(v) for v in spec]
    return spec


def same_kinds(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two specs have the same kinds and dtypes all the way down (see :func:`kinds`)."""
    return kinds(a) == kinds(b)
