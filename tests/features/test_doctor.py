"""``autograder doctor``: the table of cages as ``autograder grade`` would get them, and a verdict that names
the real reason grading would refuse."""
from __future__ import annotations

import pytest
import torch

from autograder.cli import main


@pytest.mark.slow
def test_doctor_finds_the_cage_grading_uses(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "(used)" in out and "CPUs:" in out and "CUDA:" in out
    assert "ERROR" not in out
    # The filter's mode and size (issue 23): default deny, the allow-list's length, its BPF program.
    assert " ".join(out.split()).count("seccomp filter: default deny (EPERM), allow-list of ") == 1
    # And how memory no rlimit counts is kept in check: a memory cgroup where there is one, or why not.
    from autograder.inside import memcg

    groups, where = memcg.find()
    said = " ".join(out.split())
    assert ("counted by a memory cgroup per worker" in said) == (groups is not None)
    assert ("memory-cgroup" in said) == (groups is not None)    # the layer in the cage's table


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the CPU-build verdict cannot show")
def test_doctor_on_cuda_without_a_device_names_the_real_reason(capsys):
    """As root on a CPU build of torch, the verdict is about CUDA, not 'run as root' (issue 25, item 7)."""
    assert main(["doctor", "--device", "cuda"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "autograder grade --device cuda would refuse" in out
    assert ("is a CPU build" in out) if torch.version.cuda is None else ("sees no device" in out)
    assert "no cage can be set up here" not in out and "(used)" in out   # the cages were probed as CPU workers
