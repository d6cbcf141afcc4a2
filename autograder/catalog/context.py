"""The context a check runs in: seeded inputs, calls into the student's code through a runner (the
sandbox when grading, the student's kernel when self-checking), the reference, and expectations that
raise :class:`~autograder.catalog.outcomes.CheckFailed` with a message in zh and en.

How far an answer may be from the expected one is :mod:`autograder.catalog.tolerance`'s; what a call's
request and reply mean to a check (copies, forbidden calls, failures) is :mod:`autograder.catalog.calls`'s.
"""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from autograder.inside import plain
from autograder.catalog.calls import copied, refuse_forbidden, reply_failure
from autograder.catalog.comparison import OUTPUT, RETURN_VALUE, as_float64, compare, label, mismatch
from autograder.catalog.declarations import Audience, Mistake, Precision
from autograder.catalog.outcomes import CheckFailed, brief
from autograder.catalog.tolerance import (DEPENDENCY_SHARE, FLOAT32_EPS, SCALE_ULPS, SENSITIVE_SCALE, SLACK_FACTOR,
                                          eps, input_scale, is_float64, magnitude, precision_floors, rounded,
                                          tensors)
from autograder.core.messages import Msg
from autograder.inside.probes import Reply, Request
from autograder.core.stopwatch import OFF, Stopwatch


# -- running student code ------------------------------------------------------
class Runner(Protocol):
    """Runs one request against the student's code: in-process or in a sandbox worker."""

    def __call__(self, request: Request) -> Reply: ...


class Diagnoser(Protocol):
    """Finds the known mistake whose output on ``request`` matches the student's ``got``: ``reference`` is the
    exercise's reference where the grader has it, ``evidence`` the student's outputs on the exercise's other calls
    ((request, value) of each check's last), which a named mistake must not contradict."""

    def __call__(self, exercise_id: str, request: Request, got: plain.Value, *,
                 reference: Callable[..., Any] | None = None,
                 evidence: Sequence[tuple[Request, plain.Value]] = ()) -> Mistake | None: ...


def stable_seed(*parts: Any) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


PUBLIC_SEED = "public-self-check"


class Pending:
    """A call :meth:`Context.start` began: :meth:`value` is what :meth:`Context.call` would have returned."""

    def __init__(self, ctx: Context, request: Request, finish: Callable[[], Reply], sent: bool):
        self._ctx, self._request, self._finish, self.sent = ctx, request, finish, sent
        self._reply: Reply | None = None
        ctx._pending.append(self)  # noqa: SLF001 - Pending is Context's part: kept out of the checks' API

    def reply(self) -> Reply:
        """The runner's reply, waited for once (timed as the call, its seconds the student's)."""
        if self._reply is None:
            self._ctx._pending.remove(self)  # noqa: SLF001 - as above
            self._reply = self._ctx._finish(self._finish)  # noqa: SLF001 - as above
        return self._reply

    def value(self) -> plain.Value:
        """The student's return value as plain data; raises CheckFailed as :meth:`Context.call` does."""
        return self._ctx._accept(self._request, self.reply())  # noqa: SLF001 - as above


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
    #: Every call whose value the check took, in order: the evidence a diagnosis is weighed against.
    values: list[tuple[Request, plain.Value]] = field(default_factory=list)
    forbidden_seen: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timer: Stopwatch = OFF                    # where the time goes (see run_exercise); measures nothing by default
    calls: int = 0                            # calls made so far: the n in each request's site
    audience: Audience = Audience.PUBLIC      # whose check this is (a hidden one shows CheckFailed.hidden only)
    #: What the exercise's checks ask of float64 calls (the statement's precision: see :meth:`truth`).
    precision: Precision = Precision.ONE_FLOAT32
    #: The exercise builds on others (course.yml's builds_on): a dependency's answer within its own tolerance
    #: must not cost this exercise points (see :meth:`truth`).
    builds_on: bool = False

    def __post_init__(self) -> None:
        self.generator = torch.Generator().manual_seed(self.seed)
        self._slack: dict[int, tuple[Any, torch.Tensor]] = {}     # id(expected tensor) -> (it, its slack)
        self._pending: list[Pending] = []       # calls started whose replies are not taken yet (see start)

    # inputs ---------------------------------------------------------------
    def randn(self, *shape: int, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> torch.Tensor:
        """Seeded normal noise on the CPU (moved to the device under test by the runner)."""
        with self.timer.section("inputs"):
            x = torch.randn(*shape, generator=self.generator, dtype=torch.float64)
            if scale != 1.0:            # times 1.0 is the same bits: the operation is left out, not changed
                x.mul_(scale)
            return x if dtype is torch.float64 else x.to(dtype)

    def randint(self, low: int, high: int, *shape: int) -> torch.Tensor:
        with self.timer.section("inputs"):
            return torch.randint(low, high, shape, generator=self.generator, dtype=torch.int64)

    def sizes(self, n: int, low: int = 2, high: int = 9) -> list[int]:
        """``n`` distinct sizes in [low, high], so a transposed axis cannot go unnoticed."""
        if high - low + 1 < n:
            raise ValueError("not enough distinct sizes")
        perm = torch.randperm(high - low + 1, generator=self.generator)[:n]
        return [p + low for p in perm.tolist()]

    # calling the student --------------------------------------------------
    def call(self, *args: Any, probe: str = "call", **kwargs: Any) -> plain.Value:
        """Run the student's function on these arguments; return what came back as plain data."""
        return self.start(*args, probe=probe, **kwargs).value()

    def start(self, *args: Any, probe: str = "call", **kwargs: Any) -> Pending:
        """:meth:`call`, begun now and finished by :meth:`Pending.value`: a sandbox sends the request at once
        (its bytes made here: what the check does to the arguments afterwards does not reach the student's
        code), so the check computes its expected value while the worker runs the call. A runner in this
        process makes the call at ``value()`` on copies of the arguments taken now (as a sandbox's bytes),
        after whatever the check did meanwhile, as the order reads:
        ``pending = ctx.start(x)``, ``want = ctx.reference(x)``, ``got = pending.value()`` calls the
        reference first everywhere. Several calls may be started before their values are taken (a sandbox
        sends them together and the worker runs them in order): take the values in the order the calls were
        started, so that every runner makes them in that order."""
        request = self._request(args, kwargs, probe)
        if getattr(self.runner, "start", None) is None:
            # The arguments as they are now, as a sandbox's bytes are made now: what the check does to its own
            # tensors before value() reaches neither the student's code nor the diagnoser's inputs.
            request = copied(request)
        return Pending(self, request, *self._launch(request))

    def settle(self) -> None:
        """Finish the calls started and not taken (a check that stopped between start and value): one sent
        is dropped by the runner where it can (a sandbox: see WorkerHandle._drop), else waited for, so the
        runner is free for the next check; one deferred is dropped, never made."""
        for pending in list(self._pending):
            drop = getattr(pending._finish, "drop", None) if pending.sent else None  # noqa: SLF001 - Context's own Pending
            if pending.sent and drop is None:
                pending.reply()
            else:
                self._pending.remove(pending)
                if drop is not None:
                    drop()

    def _accept(self, request: Request, reply: Reply) -> plain.Value:
        for name in reply.forbidden:
            if name not in self.forbidden_seen:
                self.forbidden_seen.append(name)
        refuse_forbidden(reply, self.forbidden)
        self.last_request = request
        self.last_value = None
        if reply.status == "ok":
            try:
                value = reply.value()
            except plain.PlainDataError as exc:
                raise CheckFailed(Msg(f"返回值无法读取：{exc}", f"the return value could not be read: {exc}"),
                                  hidden=Msg("返回值无法读取", "the return value could not be read")) from None
            self.last_value = value
            self.values.append((request, value))
            return value
        raise reply_failure(reply, self.function)

    @contextlib.contextmanager
    def on_device(self, device: str) -> Any:
        """The calls (and the device :meth:`expect_tensor` expects) inside run on ``device`` rather than the one
        under test: for what only one device can state, such as the exact draws of a seeded CPU generator
        (a GPU's generator draws other numbers from the same seed, and the trusted side never runs CUDA)."""
        saved, self.device = self.device, device
        try:
            yield
        finally:
            self.device = saved

    def call_raw(self, *args: Any, probe: str = "call", **kwargs: Any) -> Reply:
        """Like :meth:`call` but hands back the reply, e.g. to check that a call *raises*."""
        _request, reply = self._send(args, kwargs, probe)
        refuse_forbidden(reply, self.forbidden)
        if reply.status not in ("ok", "error"):
            raise reply_failure(reply, self.function)
        return reply

    def _send(self, args: tuple, kwargs: dict, probe: str) -> tuple[Request, Reply]:
        """One call through the runner, made now."""
        request = self._request(args, kwargs, probe)
        return request, Pending(self, request, *self._launch(request)).reply()

    def _request(self, args: tuple, kwargs: dict, probe: str) -> Request:
        """The next request. Its site (this check, n-th call) names it across machines."""
        self.calls += 1
        return Request(self.function, args, kwargs, probe=probe, forbidden=self.forbidden,
                       device=self.device, site=f"{self.check}#{self.calls}")

    def _launch(self, request: Request) -> tuple[Callable[[], Reply], bool]:
        """What waits for ``request``'s reply, and whether it was sent: the runner's ``start`` where it has one
        (a sandbox: sent now), else the runner called then."""
        begin = getattr(self.runner, "start", None)
        if begin is None:
            return (lambda: self.runner(request)), False
        with self.timer.section("call"):
            return begin(request), True

    def _finish(self, finish: Callable[[], Reply]) -> Reply:
        with self.timer.section("call"):
            reply = finish()
        self.seconds += reply.seconds
        self.timer.add("student", reply.seconds)
        return reply

    def reference(self, *args: Any, **kwargs: Any) -> Any:
        """Hidden checks: the reference solution on CPU float64 copies of the arguments (see :meth:`truth`)."""
        return self.truth(self.reference_function(), *args, **kwargs)

    def reference_function(self) -> Callable[..., Any]:
        """Hidden checks: the reference solution itself (a public check has none: RuntimeError)."""
        if self.reference_fn is None:
            raise RuntimeError(f"check {self.exercise}/{self.check} has no reference (public check?)")
        return self.reference_fn

    def truth(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn`` (the reference, or torch's own function in a public check) on CPU float64 copies of the
        arguments: the expected value.

        Where the inputs are large (a magnitude of :data:`SENSITIVE_SCALE` or more), how far the answer may
        honestly move there is measured too, each element on its own: ``fn`` again on the arguments with every
        floating element moved up or down (random signs, twice), and :meth:`expect_close` allows
        :data:`SLACK_FACTOR` times the widest movement for the tensors returned here. Each argument moves by the
        most of: one rounding unit of its dtype (a numerically sound method is about that far off: logsumexp
        against max-shift, the order of a sum, scores of products of large inputs); float32's unit for a float64
        argument where the exercise's precision is one float32 intermediate (a float32 scale or table moves
        large scores that far); and, where the exercise builds on others, the part of course.yml's relative
        tolerance of its dtype that an answer of a dependency may be off (:data:`DEPENDENCY_SHARE`). On ordinary
        inputs the same allowances are the floors of :meth:`tol`.
        """
        with self.timer.section("reference"):
            value = fn(*as_float64(args), **as_float64(kwargs))
            if magnitude((args, kwargs)) >= SENSITIVE_SCALE:
                self._measure_slack(fn, value, args, kwargs)
            return value

    def _moves(self, dtype: Any) -> float:
        """How far (relative) rounding, the precision declared and the dependencies move an argument of ``dtype``
        on large inputs (see :meth:`truth`)."""
        move = eps(dtype)
        if self.precision is Precision.ONE_FLOAT32 and is_float64(dtype):
            move = max(move, FLOAT32_EPS)
        if self.builds_on:
            move = max(move, DEPENDENCY_SHARE * self.tolerances.for_dtype(dtype).rtol / SLACK_FACTOR)
        return move

    def expected(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` as it is: an expected value that a check computes its own way (torch's own
        module in float64, the reference class through a probe), timed as the reference's work like
        :meth:`truth` (no float64 copies, no slack: ``fn`` decides its precision; a truth inside counts once)."""
        with self.timer.section("reference"):
            return fn(*args, **kwargs)

    def _measure_slack(self, fn: Callable[..., Any], value: Any, args: tuple, kwargs: dict) -> None:
        outputs = tensors(value)
        if not outputs:
            return
        # A generator of its own: the check's inputs (self.generator) stay what they are.
        generator = torch.Generator().manual_seed(self.seed ^ 0x51AC)
        widest = [torch.zeros_like(t, dtype=torch.float64) for t in outputs]
        for _ in range(2):
            try:
                moved = fn(*as_float64(rounded(args, generator, self._moves)),
                           **as_float64(rounded(kwargs, generator, self._moves)))
            except Exception:  # noqa: BLE001 - a function that refuses the moved inputs gives no slack
                return
            again = tensors(moved)
            if len(again) != len(outputs):
                return
            for i, (t, u) in enumerate(zip(outputs, again)):
                if t.shape == u.shape and t.is_floating_point() and u.is_floating_point():
                    delta = (u.detach().double() - t.detach().double()).abs().nan_to_num(nan=0.0, posinf=0.0)
                    widest[i] = torch.maximum(widest[i], delta)
        for t, w in zip(outputs, widest):
            self._slack[id(t)] = (t, w * SLACK_FACTOR)

    def slack_for(self, expected: Any) -> torch.Tensor | None:
        """The rounding slack measured for ``expected`` (a tensor :meth:`truth` returned), or None."""
        found = self._slack.get(id(expected))
        return found[1] if found is not None and found[0] is expected else None

    # expectations ---------------------------------------------------------
    def tol(self, dtype: Any) -> tuple[float, float]:
        """(rtol, atol) for outputs computed in ``dtype``: course.yml's, made scale-aware, at least the floors of
        the precision the exercise declares.

        Rounding an input of magnitude S moves it by about S * eps(dtype), and a softmax, a log-sum
        or a difference of such inputs moves by that much relative to itself, whichever numerically
        sound method computes it (max shift or logsumexp, a loop or a matmul). So the relative
        tolerance is at least :data:`SCALE_ULPS` * eps * S, S the largest finite magnitude among the
        floating inputs of the last call (negligible for inputs of order 1; 4.8e-3 in float32 at 1e4).

        For float64 where the exercise's precision is one float32 intermediate, both are at least
        :data:`SLACK_FACTOR` float32 units; where it builds on others, at least :data:`DEPENDENCY_SHARE` times
        course.yml's relative tolerance of ``dtype``: what an answer of a dependency within its own tolerance moves
        an answer made from it.
        """
        t = self.tolerances.for_dtype(dtype)
        scale = input_scale(self.last_request)
        rtol = max(t.rtol, SCALE_ULPS * eps(dtype) * scale) if scale > 1 else t.rtol
        floor_rtol, floor_atol = precision_floors(self.tolerances, dtype, self.precision, builds_on=self.builds_on)
        return max(rtol, floor_rtol), max(t.atol, floor_atol)

    @contextlib.contextmanager
    def case(self, zh: str, en: str) -> Any:
        """Name the case the expectations inside it test ("an empty batch", "T = 1"): a failure's
        message, a hidden check's included, starts with it, so feedback says which case failed
        rather than listing every case the check holds. No input values in a case's name."""
        try:
            yield
        except CheckFailed as failed:
            if failed.case is None:
                failed.case = Msg(zh, en)
            raise

    def expect_tuple(self, value: plain.Value, n: int, what: str | Msg = RETURN_VALUE) -> list[plain.Value]:
        zh, en = label(what)
        if value.kind not in ("tuple", "list") or len(value.spec["items"]) != n:
            raise CheckFailed(Msg(f"{zh} 应当是 {n} 个元素的元组，实际是 {value.describe()}",
                                  f"{en} should be a tuple of {n}, got {value.describe()}"),
                              hidden=Msg(f"{zh} 应当是 {n} 个元素的元组，实际是 {brief(value)}",
                                         f"{en} should be a tuple of {n}, got {brief(value)}"))
        return value.items()

    def expect_tensor(self, value: plain.Value, shape: tuple[int, ...] | None = None,
                      dtype: torch.dtype | None = None, device: str | None = None,
                      what: str | Msg = OUTPUT) -> torch.Tensor:
        """A tensor of this shape/dtype/device (device defaults to the one under test).

        ``what`` names the value in messages: a code expression (the same in both languages) or a
        :class:`Msg`. Shapes, dtypes and devices of a tensor are safe to state to hidden checks as well."""
        with self.timer.section("compare"):
            return self._tensor_as_expected(value, shape, dtype, device, what)

    def _tensor_as_expected(self, value: plain.Value, shape: tuple[int, ...] | None, dtype: torch.dtype | None,
                            device: str | None, what: str | Msg) -> torch.Tensor:
        zh, en = label(what)
        if value.kind != "tensor":
            raise CheckFailed(Msg(f"{zh} 应当是 torch.Tensor，实际是 {value.describe()}",
                                  f"{en} should be a torch.Tensor, got {value.describe()}"),
                              hidden=Msg(f"{zh} 应当是 torch.Tensor，实际是 {brief(value)}",
                                         f"{en} should be a torch.Tensor, got {brief(value)}"))
        spec = value.spec
        if shape is not None and tuple(spec["shape"]) != tuple(shape):
            message = Msg(f"{zh} 的形状应为 {tuple(shape)}，实际是 {tuple(spec['shape'])}",
                          f"{en} should have shape {tuple(shape)}, got {tuple(spec['shape'])}")
            raise CheckFailed(message, diagnose=True, hidden=message)
        if dtype is not None and spec["dtype"] != str(dtype):
            message = Msg(f"{zh} 的 dtype 应为 {dtype}，实际是 {spec['dtype']}",
                          f"{en} should have dtype {dtype}, got {spec['dtype']}")
            raise CheckFailed(message, hidden=message)
        want_device = device or self.device
        got_device = torch.device(spec["device"])
        if got_device.type != torch.device(want_device).type:
            raise CheckFailed(Msg(f"{zh} 应当在 {want_device} 上，实际在 {spec['device']}",
                                  f"{en} should be on {want_device}, got {spec['device']}"),
                              hidden=Msg(f"{zh} 应当在 {want_device} 上，实际在 {got_device.type}",
                                         f"{en} should be on {want_device}, got {got_device.type}"))
        return value.tensor()

    def expect_close(self, got: torch.Tensor | np.ndarray | float, expected: Any, dtype: Any,
                     what: str | Msg = OUTPUT, diagnose: bool = True) -> None:
        """Compare in float64 with the tolerance of ``dtype``; the message shows the largest difference.

        The hidden message says only that (and whether everywhere) the values differ.
        """
        rtol, atol = self.tol(dtype)
        slack = self.slack_for(expected)
        with self.timer.section("compare"):
            problem = compare(got, expected, rtol, atol, slack=slack)
        if problem is not None:
            raise mismatch(problem, got, expected, rtol, atol, what, diagnose=diagnose, slack=slack)

    def expect(self, condition: bool, zh: str, en: str, diagnose: bool = False, *, safe: bool = False,
               hidden: Msg | None = None) -> None:
        """Fail with (zh, en) unless ``condition``.

        A hidden check shows ``hidden``, or (zh, en) itself when ``safe`` declares that
        they hold no value; else only a sentence naming the check.
        """
        if not condition:
            message = Msg(zh, en)
            raise CheckFailed(message, diagnose=diagnose, hidden=message if safe and hidden is None else hidden)
