"""The template's memory cgroups for its workers: one per worker, the next one made ahead.

Run in the sandbox's template process (:mod:`autograder.inside.template`), never next to student code. Where
:func:`autograder.inside.memcg.find` found memory cgroups, the template makes a group for each worker it forks
(:func:`memory_group`): its limit is the template's resident memory plus the worker's ``memory_mb`` (from the
grader's :class:`~autograder.inside.protocol.WorkerConfig`) plus :data:`~autograder.inside.memcg.MARGIN_MB`. The
next worker's group is made ahead, after a fork (:func:`ahead`), and the template waits in it, so that the worker
is born in it; :func:`remove_groups` removes those left when the template ends. The state is the template
process's own (:data:`MEMORY`, :data:`AHEAD`); a worker's copy of it is never read.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

from autograder.inside.protocol import MiB, WorkerConfig
from autograder.inside.worker import vm_kib

#: The template's memory cgroups (memcg.find(): where to make a group per worker, or None and why not).
MEMORY: dict[str, Any] = {"groups": None, "why": "not looked for"}
#: The next worker's memory cgroup, made ahead and holding the template itself (``group``), so that the
#: worker is born in it: a process joins a group only after an RCU grace period (milliseconds, tens of
#: them on a busy machine), which the template then spends between forks instead of each worker before
#: its first cell. ``home``: the template's own group, where it goes back when it leaves one; ``off``:
#: made-ahead groups failed once here and are not tried again (workers join groups made at fork time).
AHEAD: dict[str, Any] = {"group": None, "home": None, "off": False}
#: How many memory cgroups the template made: the next group's name.
GROUPS_MADE = [0]


def remove_groups(groups: list[str]) -> None:
    """The template's last act: its workers' memory cgroups go (a killed worker leaves its group in a moment)."""
    deadline = time.monotonic() + 2.0
    while groups and time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        groups = [g for g in groups if not MEMORY["groups"].remove(g)]
        if groups:
            time.sleep(0.02)


def ahead(config: WorkerConfig, left: str | None) -> None:
    """After a fork (the grader already has its answer): make the next worker's group and move this
    template into it; ``left``: the group the template was in, now the new worker's alone. Where that
    fails the template goes home, and makes no group ahead any more."""
    groups = MEMORY["groups"]
    if groups is None or config.mode == "none" or AHEAD["off"] or AHEAD["home"] is None:
        return
    from autograder.inside.memcg import MARGIN_MB

    GROUPS_MADE[0] += 1
    path = None
    try:
        # A provisional limit (set again at the fork): room for what the template itself allocates meanwhile.
        path = groups.make(f"autograder-{os.getpid()}-{GROUPS_MADE[0]}",
                           vm_kib("VmRSS") * 1024 + (config.memory_mb + MARGIN_MB) * MiB)
        groups.join(path)
        AHEAD["group"] = path
        return
    except OSError:
        traceback.print_exc()
    AHEAD["off"] = True
    if left is not None and not join_home():
        print(f"autograder: the template could not leave the memory cgroup {left}", file=sys.stderr)
    if path is not None:
        groups.remove(path)


def join_home() -> bool:
    try:
        MEMORY["groups"].join(AHEAD["home"])
        return True
    except (OSError, TypeError):
        traceback.print_exc()
        return False


def drop_ahead() -> None:
    """Back to the template's own group; the group made ahead goes (the next fork makes one as before)."""
    group, AHEAD["group"] = AHEAD["group"], None
    if group is not None:
        if join_home():
            MEMORY["groups"].remove(group)
        else:
            AHEAD["off"] = True


def memory_group(config: WorkerConfig) -> tuple[str | None, str, bool]:
    """A memory cgroup for the next worker (None where there is none, and why): the template's resident
    memory (what the worker may copy on write) plus limits.memory_mb plus room for kernel memory. True
    when it is the group made ahead, which holds the template: the worker is born in it."""
    groups = MEMORY["groups"]
    if groups is None or config.mode == "none":
        return None, MEMORY["why"] if groups is None else "not caged (--no-isolation)", False
    from autograder.inside.memcg import MARGIN_MB

    limit = vm_kib("VmRSS") * 1024 + (config.memory_mb + MARGIN_MB) * MiB
    made_ahead = AHEAD["group"]
    if made_ahead is not None:
        AHEAD["group"] = None
        try:
            groups.set_limit(made_ahead, limit)
            return made_ahead, "", True
        except OSError:
            traceback.print_exc()
            AHEAD["group"] = made_ahead
            drop_ahead()
            AHEAD["off"] = True
    GROUPS_MADE[0] += 1
    try:
        return groups.make(f"autograder-{os.getpid()}-{GROUPS_MADE[0]}", limit), "", False
    except OSError as exc:
        return None, f"{groups.describe()}: {exc.strerror or exc}", False
