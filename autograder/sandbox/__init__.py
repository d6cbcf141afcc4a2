"""The sandbox: where student code runs, and the grader's handle on it.

* :mod:`~autograder.sandbox.worker`: the untrusted side, a template process that imported torch and
  friends and forks one worker per submission, which runs the cells and answers calls.
* :mod:`~autograder.sandbox.cage`: what a forked worker enters before any student code runs
  (namespaces, an empty root, an unprivileged uid, seccomp, Landlock, resource limits).
* :mod:`~autograder.sandbox.host`: the grader's side: :class:`Sandbox` owns the template and hands out
  :class:`WorkerHandle`\\ s; every byte a worker sends is treated as hostile there.

The host's names are importable from this package (``from autograder.sandbox import Sandbox``); they load
on first use, so that the worker, which imports this package on its way to its own module, never loads
the host's code.
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    host = importlib.import_module("autograder.sandbox.host")
    try:
        return getattr(host, name)
    except AttributeError:
        raise AttributeError(f"module 'autograder.sandbox' has no attribute {name!r}") from None
