"""Reading a batch: the tasks discovery gives, a notebook that cannot be read named, and the same works whether read
here or by forked processes (in a process of its own: pytest-xdist's workers hold threads and may not fork)."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from similar_class import COURSE, QKV, honest, notebook, write_class
from autograder.grading.submissions import discover
from autograder.similarity import batch


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    write_class(root, {f"s{i:02d}": notebook(honest(random.Random(i))) for i in range(6)})
    (root / "broken").mkdir()
    (root / "broken" / QKV.notebook).write_text("[1, 2", encoding="utf-8")
    return discover(root, COURSE)


def summary(works):
    return [(w.student, {e: fn.whole for e, fn in w.functions.items()}) for w in works]


def test_each_notebook_is_read_or_named(found):
    tasks, skipped = batch.tasks_of(found)
    assert len(tasks) == 7 and skipped == []
    assert all(task[5] is not None for task in tasks if "broken" not in task[1])   # passed the gate: not rescanned
    with batch.reading(tasks, COURSE, 1) as results:
        works, unread = batch.collect(results, lambda: None)
    assert [w.student for w in works] == [f"s{i:02d}" for i in range(6)]
    assert len(unread) == 1 and unread[0].startswith("broken/02_qkv_attention.ipynb: invalid JSON")


#: Run in a process of its own: a pytest-xdist worker holds threads, and the readers fork only from a process without.
FORKED_CHECK = """
import json, random, sys
sys.path[:0] = sys.argv[1:3]
from similar_class import COURSE, QKV, honest, notebook, write_class
from autograder.grading.submissions import discover
from autograder.similarity import batch
from pathlib import Path

root = Path(sys.argv[3])
write_class(root, {f"s{i:02d}": notebook(honest(random.Random(i))) for i in range(6)})
(root / "broken").mkdir()
(root / "broken" / QKV.notebook).write_text("[1, 2", encoding="utf-8")
assert batch.single_threaded(), "the check's own process holds threads"
tasks, _ = batch.tasks_of(discover(root, COURSE))
summary = lambda works: [(w.student, {e: fn.whole for e, fn in w.functions.items()}) for w in works]
with batch.reading(tasks, COURSE, 1) as results:
    here, _ = batch.collect(results, lambda: None)
with batch.reading(tasks, COURSE, 2) as results:
    forked, unread = batch.collect(results, lambda: None)
print(json.dumps({"same": summary(forked) == summary(here), "works": len(here), "unread": len(unread)}))
"""


def test_forked_readers_read_the_same(tmp_path):
    tests = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", FORKED_CHECK, str(tests), str(tests.parent), str(tmp_path / "b")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"same": True, "works": 6, "unread": 1}


def test_a_small_batch_or_a_threaded_process_is_read_here(monkeypatch):
    monkeypatch.setattr(batch.os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(batch, "single_threaded", lambda: True)
    assert batch.workers(batch.PARALLEL_FROM - 1) == 1
    assert batch.workers(batch.PARALLEL_FROM) == 3
    monkeypatch.setattr(batch, "single_threaded", lambda: False)
    assert batch.workers(10_000) == 1
