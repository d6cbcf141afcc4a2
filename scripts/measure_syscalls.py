"""Measure the system calls caged workers make: the evidence behind cage.ALLOWED_SYSCALLS.

Runs a command under ``strace -ff`` (one file per thread), finds every thread that loaded a
seccomp filter (the cage's last step) and the threads those started afterwards, and prints the
system calls they made from then on, with how many threads made each, and which of them the
allow-list lacks::

    python scripts/measure_syscalls.py -- autograder grade samples/submissions -o /tmp/out --force
    python scripts/measure_syscalls.py -- autograder validate

Needs strace (Debian: ``apt-get install strace``) and a machine where ptrace is allowed.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

CALL = re.compile(r"^(?:\d+ )?([a-z_][a-z0-9_]*)\(")
RESUMED = re.compile(r"^<\.\.\. ([a-z_0-9]+) resumed>")
SPAWN = re.compile(r"^(?:clone3?|fork|vfork)\(.*\)\s+=\s+(\d+)")
LOADED = ("SECCOMP_SET_MODE_FILTER", "PR_SET_SECCOMP")


def caged_calls(folder: str) -> collections.Counter[str]:
    """Count, per system call, the caged threads that made it (from strace -ff's files in folder)."""
    lines: dict[int, list[str]] = {}
    for name in os.listdir(folder):
        tid = int(name.rsplit(".", 1)[1])
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            lines[tid] = f.read().splitlines()
    caged: dict[int, int] = {}           # tid -> index of its first caged line
    for tid, text in lines.items():
        for i, line in enumerate(text):
            if any(mark in line for mark in LOADED) and "= 0" in line:
                caged[tid] = i + 1
                break
    todo = list(caged)
    while todo:
        tid = todo.pop()
        for line in lines[tid][caged[tid]:]:
            m = SPAWN.match(line)
            if m and int(m.group(1)) in lines and int(m.group(1)) not in caged:
                caged[int(m.group(1))] = 0
                todo.append(int(m.group(1)))
    seen: collections.Counter[str] = collections.Counter()
    for tid, start in caged.items():
        names = set()
        for line in lines[tid][start:]:
            m = CALL.match(line) or RESUMED.match(line)
            if m and not line.startswith("+++") and not line.startswith("---"):
                names.add(m.group(1))
        seen.update(names)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to trace, after --")
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"] or None
    if command is None:
        parser.error("give the command to trace after --")
    if shutil.which("strace") is None:
        parser.error("strace is not installed (Debian: apt-get install strace)")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from autograder.inside import cage

    with tempfile.TemporaryDirectory(prefix="syscalls-") as folder:
        done = subprocess.run(["strace", "-ff", "-qq", "-o", os.path.join(folder, "t"), *command],
                              stdout=subprocess.DEVNULL, check=False)
        seen = caged_calls(folder)
    if not seen:
        print("no thread loaded a seccomp filter: was the command caged?", file=sys.stderr)
        return 1
    allowed = cage.allowed_names()
    print(f"{'system call':<24}{'threads':>8}  allowed")
    for name, count in sorted(seen.items()):
        print(f"{name:<24}{count:>8}  {'yes' if name in allowed else 'NO'}")
    missing = sorted(n for n in seen if n not in allowed)
    print(f"\n{len(seen)} calls made by caged threads; the allow-list lacks {len(missing)}: "
          f"{', '.join(missing) or 'none'} (the command exited {done.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
