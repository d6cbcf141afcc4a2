"""The sandbox: where student code runs, and the grader's handle on it.

* :mod:`~autograder.sandbox.template` and :mod:`~autograder.sandbox.worker`: the untrusted side, a template
  process that imported torch and friends and forks one worker per submission, which runs the cells and
  answers calls.
* :mod:`~autograder.sandbox.protocol`: what crosses between the two sides (frames, a fork's configuration,
  the template's environment), imported by both.
* :mod:`~autograder.sandbox.cage`: what a forked worker enters before any student code runs
  (namespaces, an empty root, an unprivileged uid, seccomp, Landlock, resource limits).
* the grader's side, below: :class:`Sandbox` owns the template and hands out :class:`WorkerHandle`\\ s;
  every byte a worker sends is treated as hostile there.

The grader's side is split by job: :mod:`~autograder.sandbox.launch` (starting the template process, its
folder and environment), :mod:`~autograder.sandbox.host` (:class:`Sandbox`: the template, the cage,
forking), :mod:`~autograder.sandbox.handle` (:class:`WorkerHandle`: a worker's life),
:mod:`~autograder.sandbox.calls` (a handle's calls, several in flight), :mod:`~autograder.sandbox.replies`
(what a worker's bytes may become), :mod:`~autograder.sandbox.processes` (worker uids, folders,
processes) and :mod:`~autograder.sandbox.stand_ins` (the reference answering an earlier exercise's calls).
Their names are importable from this package (``from autograder.sandbox import Sandbox``); they load
on first use, so that the worker, which imports this package on its way to its own module, never loads
the grader's code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.lazy)
    from autograder.sandbox.handle import WorkerHandle as WorkerHandle
    from autograder.sandbox.host import Sandbox as Sandbox
    from autograder.sandbox.launch import template_environment as template_environment
    from autograder.sandbox.processes import (UID_BASE as UID_BASE, SandboxError as SandboxError,
                                              cage_modes as cage_modes)
    from autograder.sandbox.replies import (UNREADABLE_REPLY as UNREADABLE_REPLY, encode_request as encode_request,
                                            readable as readable)

__getattr__ = lazy_exports(__name__, __file__)
