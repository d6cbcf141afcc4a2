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
forking), :mod:`~autograder.sandbox.handle` (:class:`WorkerHandle`), :mod:`~autograder.sandbox.replies`
(what a worker's bytes may become), :mod:`~autograder.sandbox.processes` (worker uids, folders,
processes) and :mod:`~autograder.sandbox.stand_ins` (the reference answering an earlier exercise's calls).
Their names are importable from this package (``from autograder.sandbox import Sandbox``); they load
on first use, so that the worker, which imports this package on its way to its own module, never loads
the grader's code.
"""
from __future__ import annotations

import importlib
from typing import Any

#: Where a name of this package is looked up, in order (the worker's own names last: TEMPLATE_ENV...).
_MODULES = ("host", "handle", "replies", "processes", "launch", "protocol", "template", "worker")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    for module in _MODULES:
        found = importlib.import_module(f"{__name__}.{module}")
        if name in vars(found):
            return vars(found)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
