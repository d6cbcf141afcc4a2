"""Behaviour does not change unseen: a batch of the bundled samples and of the benchmark's kinds of
submission writes the same grades, results, feedback and LMS files as the golden snapshot in
tests/golden/ (see tests/golden.py for what is taken out and how to rewrite it on purpose)."""
from __future__ import annotations

import difflib
import json

import pytest

import golden
from support import ROOT


def _differences(want: dict, got: dict) -> str:
    lines = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            lines.append(f"missing: {name}")
        elif name not in want:
            lines.append(f"new: {name}")
        elif want[name] != got[name]:
            a = golden.dump({name: want[name]}).splitlines()
            b = golden.dump({name: got[name]}).splitlines()
            lines.extend(difflib.unified_diff(a, b, f"golden {name}", f"now {name}", n=1, lineterm=""))
    return "\n".join(lines[:200])


@pytest.mark.slow
@pytest.mark.parametrize("which", ["samples", "bench"])
def test_a_batch_writes_what_the_golden_snapshot_holds(which, tmp_path):
    want = json.loads((golden.GOLDEN / f"{which}.json").read_text(encoding="utf-8"))
    submissions = ROOT / "samples" / "submissions" if which == "samples" else \
        golden.bench_submissions(tmp_path / "subs")
    got = golden.snapshot(golden.grade(submissions, tmp_path / "out"))
    assert len(want) >= 10
    assert got == want, "the batch differs from tests/golden/ (python tests/golden.py --update, " \
        "after checking the change is meant):\n" + _differences(want, got)
