"""``autograder doctor``: what this machine offers the grader, one table.

For each cage mode (see :mod:`autograder.inside.cage`) it starts a real sandbox limited to
that mode and one empty worker, exactly as ``autograder grade`` would, and says
which layers held or why the mode was refused. Then CUDA and the CPUs. Exit 1 when
``autograder grade`` would refuse to run (no cage at all).
"""
from __future__ import annotations

import argparse
import os
from typing import Any

from autograder.core.errors import AutograderError
from autograder.inside.cage import LANDLOCK_GAPS, filter_summary, landlock_abi

#: What each layer keeps from the student's code, for the table.
LAYERS = {
    "user-ns": "its own user namespace: no rights over anything of the host",
    "pid-ns": "its own process ids: cannot see or signal the grader; its children die with it",
    "mount-ns": "its own mounts",
    "net-ns": "no network but its own loopback",
    "ipc-ns": "its own SysV IPC: nothing outlives the worker",
    "tmpfs-root": "an empty root file system in memory, capped at limits.disk_mb",
    "own-uid": "a uid of its own",
    "no-capabilities": "no capability at all",
    "no-new-privs": "no setuid program can raise its rights",
    "landlock-fs": "no file of the host may be opened",
    "landlock-tcp": "no TCP bind or connect",
    "landlock-scope": "no abstract Unix socket or signal outside the worker",
    "address-space-limit": "every mapping counts against limits.memory_mb (RLIMIT_AS)",
    "memory-cgroup": "memory no rlimit counts (its tmpfs, kernel memory) past limits.memory_mb: the kernel kills it",
    "seccomp": "any system call off the allow-list (ptrace, mount, bpf, new namespaces or sockets, memfd, IPC, "
               "chmod/chown/utime/xattr, limits or priorities of another process, ...)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="probe the workers as they would run on this device")


def probe_modes(device: str = "cpu") -> list[dict[str, Any]]:
    """One row per cage mode this user could get: works (with its layers) or refused (and why)."""
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.sandbox import Sandbox, cage_modes  # noqa: PLC0415 - loads torch

    limits = load_course().limits
    rows = []
    for mode in cage_modes():      # what `autograder grade` would try, in its order
        try:
            with Sandbox(limits, device, modes=(mode,)) as sandbox:
                rows.append({"mode": mode, "works": True, "layers": list(sandbox.isolation.layers)})
        except AutograderError as exc:
            why = getattr(exc, "missing", {}).get(mode, exc.message)
            rows.append({"mode": mode, "works": False, "why": why})
    return rows


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    cuda_problem = _cuda_problem() if args.device == "cuda" else None
    # Without a CUDA device the cages are probed as CPU workers: what they hold is still worth knowing,
    # and the verdict below names the real reason grading on CUDA would refuse.
    rows = probe_modes("cpu" if cuda_problem else args.device)
    table = Table(title="Cages for student code, best first")
    for col in ("mode", "result", "layers / why not"):
        table.add_column(col, overflow="fold")
    chosen = next((r for r in rows if r["works"]), None)
    for r in rows:
        if r["works"]:
            mark = "[green]works[/]" + (" (used)" if r is chosen else "")
            table.add_row(r["mode"], mark, ", ".join(r["layers"]))
        else:
            table.add_row(r["mode"], "[red]refused[/]", r["why"])
    console.print(table)
    if chosen is not None:
        layers = Table(title=f"What the {chosen['mode']} cage blocks")
        layers.add_column("layer")
        layers.add_column("keeps student code from")
        for layer in chosen["layers"]:
            layers.add_row(layer, LAYERS.get(layer, ""))
        console.print(layers)
        if chosen["mode"] == "landlock":
            console.print(f"[yellow]the landlock fallback leaves open: {LANDLOCK_GAPS}[/]")
        if "seccomp" in chosen["layers"]:
            console.print(seccomp_line(chosen["mode"], args.device))
        console.print(memory_line())
    console.print(f"Landlock ABI: {landlock_abi() or 'not available'}; root: {os.geteuid() == 0}; "
                  f"CPUs: {os.cpu_count()}; {_cuda()}")
    if chosen is None:
        console.print("[red]ERROR[/] autograder grade would refuse: no cage can be set up here. Run as root or "
                      "in a container that allows user namespaces, or pass --no-isolation for trusted code only.")
        return 1
    if cuda_problem:
        console.print(f"[red]ERROR[/] autograder grade --device cuda would refuse: {cuda_problem}")
        return 1
    return 0


def seccomp_line(mode: str, device: str) -> str:
    """The filter the workers load: its mode and size."""
    f = filter_summary(mode, device)
    return (f"seccomp filter: default {f['default']}, allow-list of {f['allowed']} system calls "
            f"({f['restricted']} only with some arguments: the worker itself, harmless requests), "
            f"{f['instructions']} BPF instructions")


def memory_line() -> str:
    """How memory that no rlimit counts is kept in check here."""
    from autograder.inside import memcg  # noqa: PLC0415 - loads torch

    groups, where = memcg.find()
    bounded = ("refused by the filter (memfd, socket pairs, SysV and POSIX IPC, pipe buffers past 64 KiB) "
               "or bounded (256 open files, the tmpfs at limits.disk_mb)")
    if groups is not None:
        return f"memory no rlimit counts: counted by a memory cgroup per worker ({where}); {bounded}"
    return f"memory no rlimit counts: {bounded}; no memory cgroup ({where})"


def _cuda_problem() -> str | None:
    """Why workers cannot run on CUDA here, or None when they can."""
    import torch

    if torch.version.cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU build; install a CUDA build "
                f"(TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 make setup: see docs/admin/gpu.md)")
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} is built for CUDA {torch.version.cuda} but sees no device "
                f"(driver missing or too old, CUDA_VISIBLE_DEVICES empty?)")
    return None


def _cuda() -> str:
    import torch

    build = f"torch {torch.__version__}, " + (f"built for CUDA {torch.version.cuda}" if torch.version.cuda
                                               else "a CPU build")
    if not torch.cuda.is_available():
        return f"CUDA: none ({build}; torch.cuda.is_available() is False)"
    return f"CUDA: {torch.cuda.device_count()} device(s), {torch.cuda.get_device_name(0)} ({build})"
