"""The sandbox: where student code runs, and the grader's handle on it.

The untrusted side lives in :mod:`autograder.inside` (the template process that forks one worker per
submission, the worker, its cage and the protocol both sides speak); this package is the grader's side only.

:class:`Sandbox` owns the template and hands out :class:`WorkerHandle`\\ s; every byte a worker sends is
treated as hostile here.

The grader's side is split by job: :mod:`~autograder.sandbox.launch` (starting the template process, its
folder and environment), :mod:`~autograder.sandbox.host` (:class:`Sandbox`: the template, the cage,
forking), :mod:`~autograder.sandbox.control` (the template's control channel, a copy, a restart),
:mod:`~autograder.sandbox.spares` (the spare worker forked ahead), :mod:`~autograder.sandbox.handle`
(:class:`WorkerHandle`: a worker's life), :mod:`~autograder.sandbox.calls` (a handle's calls, several in
flight), :mod:`~autograder.sandbox.replies` (what a worker's bytes may become),
:mod:`~autograder.sandbox.processes` (worker uids, folders, processes) and :mod:`~autograder.sandbox.stand_ins`
(the reference answering an earlier exercise's calls).
Their names are importable from this package (``from autograder.sandbox import Sandbox``); they load
on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.sandbox.handle import WorkerHandle as WorkerHandle
    from autograder.sandbox.host import Sandbox as Sandbox
    from autograder.sandbox.launch import template_environment as template_environment
    from autograder.sandbox.processes import (UID_BASE as UID_BASE, SandboxError as SandboxError,
                                              cage_modes as cage_modes)
    from autograder.sandbox.replies import (UNREADABLE_REPLY as UNREADABLE_REPLY, encode_request as encode_request,
                                            readable as readable)

__getattr__ = lazy_exports(__name__, __file__)
