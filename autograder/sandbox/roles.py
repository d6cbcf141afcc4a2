"""Who makes whom on the grader's side of the sandbox, as the made see their makers: the
:class:`~autograder.sandbox.host.Sandbox` makes each :class:`~autograder.sandbox.handle.WorkerHandle`, and each
handle makes its :class:`~autograder.sandbox.calls.Calls`. The handle and its calls reach their makers through
these protocols (what they use of them, no more), so neither imports the module above it and the package has no
import circle; mypy checks that each maker fits where it hands itself down (``WorkerHandle(self, ...)``,
``Calls(self, ...)``).
"""
from __future__ import annotations

from typing import Any, Protocol

from autograder.core.messages import Msg
from autograder.core.stopwatch import Stopwatch
from autograder.course.config import Limits
from autograder.inside.probes import Reply
from autograder.sandbox.processes import WorkerProcess


class SandboxSide(Protocol):
    """What a worker's handle and its calls use of the :class:`~autograder.sandbox.host.Sandbox` that made it."""

    @property
    def device(self) -> str: ...

    @property
    def max_restarts(self) -> int: ...

    def spawn(self, label: str, limits: Limits, complete: bool = False, spare: bool = True) -> WorkerProcess: ...

    def worker_closed(self, limits: Limits, complete: bool) -> None: ...

    def finish(self, proc: WorkerProcess) -> int | None: ...

    def retire(self, proc: WorkerProcess) -> None: ...

    def forget(self, worker: Any) -> None: ...     # worker: the WorkerHandle closed


class HandleSide(Protocol):
    """What the calls use of the :class:`~autograder.sandbox.handle.WorkerHandle` that made them."""

    restarts: int           # counted by the calls: re-forks after a call killed the worker

    @property
    def timer(self) -> Stopwatch: ...

    @property
    def deadline(self) -> float: ...

    @property
    def broken(self) -> Reply | None: ...

    @property
    def memory_killed(self) -> bool: ...

    @property
    def process(self) -> WorkerProcess | None: ...

    @property
    def closed(self) -> bool: ...

    def time_left(self) -> float: ...

    def budget_message(self) -> Msg: ...

    def stop(self, wait: bool = True) -> int | None: ...

    def launch(self) -> bool: ...

    def missed_import(self, proc: WorkerProcess, header: dict[str, Any]) -> bool: ...
