"""Issue 65, item 5: the service's long-lived loops go on whatever one round of them raises.

Each loop (the course watch, the LTI passback, a worker's lease heartbeat, the watch over the workers) is fed rounds
that raise, runs on, and does what its next round asks; its log names each kind of failure once (the first with its
traceback), the repeats only counted. course.yml values PyYAML cannot build (a 5000-digit number, nesting thousands
deep, a date that is no date) are the kit's own clear error naming the file, and the watch keeps the course it has.
"""
from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autograder.course import config
from autograder.core.errors import ConfigError
from autograder.service import loops
from autograder.service import queue as Q
from autograder.service.command import Workers, _ended
from autograder.service.live import CourseWatch, LiveCourse
from autograder.service.lti import outbox
from autograder.service.worker import _Heartbeat

ROOT = Path(__file__).resolve().parents[2]
COURSE = config.load_course(ROOT / "course.yml")
#: How long a test waits for a loop to get somewhere (a limit on waiting, never a measured duration).
PATIENCE = 60.0


def until(condition: Any, what: str) -> None:
    """Wait for ``condition()`` to hold (looking every 20 ms), failing after PATIENCE seconds saying ``what``."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"waited {PATIENCE:.0f} s for {what}"
        time.sleep(0.02)


def write(path: Path, text: str) -> None:
    """``path`` replaced whole at once (the watch never reads half an edit)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)


def logged(caplog: pytest.LogCaptureFixture, kind: str) -> list[logging.LogRecord]:
    """The loop log's records of a round failed with ``kind`` logged whole (not a count of repeats)."""
    return [r for r in caplog.records if r.name == loops.LOG.name and f"a round failed with {kind}:" in r.getMessage()]


class Flaky:
    """``real`` called as it is, except its first calls, which raise ``failures`` in turn."""

    def __init__(self, real: Any, *failures: BaseException):
        self.real, self.failures, self.calls = real, list(failures), 0
        self.lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.calls += 1
            failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        return self.real(*args, **kwargs)


# -- the shared helper --------------------------------------------------------------------------------------------
def test_a_round_that_raises_is_logged_once_per_kind_then_counted(caplog):
    caplog.set_level(logging.WARNING, logger=loops.LOG.name)
    rounds = loops.Rounds("a loop")

    def boom(kind: type[Exception]) -> None:
        raise kind("x" * 2000)

    for _ in range(12):
        assert rounds.run(boom, ValueError) is None
    assert rounds.run(boom, KeyError) is None
    assert rounds.run(lambda a, b: a + b, 2, 3) == 5
    assert rounds.failures == {"ValueError": 12, "KeyError": 1}
    [first] = logged(caplog, "ValueError")
    assert first.exc_info is not None and "a loop" in first.getMessage()
    assert len(first.getMessage()) < 1000                           # the exception's text cut short
    assert len(logged(caplog, "KeyError")) == 1
    assert [r.getMessage() for r in caplog.records if r.name == loops.LOG.name and "again" in r.getMessage()] == [
        "a loop: a round failed with ValueError again: 10 times so far"]


# -- course.yml: the loader's own limits are the kit's error ----------------------------------------------------------
@pytest.mark.parametrize("text, said", [
    ("seed: " + "9" * 5000, "4300 digits"),
    ("seed: " + "[" * 5000 + "]" * 5000, "nested too deep"),
    ("seed:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(3000)), "nested too deep"),
    ("due: 2026-13-01", "month must be in 1..12"),
])
def test_a_course_yml_value_yaml_cannot_build_is_a_config_error_naming_the_file(tmp_path, text, said):
    course_yml = tmp_path / "course.yml"
    course_yml.write_text((ROOT / "course.yml").read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        config.load_course(course_yml)
    assert str(course_yml) in raised.value.message and said in raised.value.message


# -- the course watch -------------------------------------------------------------------------------------------------
def test_the_course_watch_goes_on_after_any_edit_and_picks_up_the_next_valid_one(tmp_path, capsys, caplog,
                                                                                     monkeypatch):
    caplog.set_level(logging.WARNING, logger=loops.LOG.name)
    original = (ROOT / "course.yml").read_text(encoding="utf-8")
    course_yml = tmp_path / "course.yml"
    course_yml.write_text(original, encoding="utf-8")
    live = LiveCourse(config.load_course(course_yml))
    reloaded: queue.Queue[Any] = queue.Queue()
    watch = CourseWatch(live, course_yml, reloaded.put, every=0.02)
    said: list[str] = []

    def stderr_says(text: str) -> bool:
        said.append(capsys.readouterr().err)
        return text in "".join(said)

    watch.start()
    try:
        # A 5000-digit number, then YAML nested 5000 deep: each named on stderr, the course in use kept.
        write(course_yml, original.replace("seed: 20261129", "seed: " + "9" * 5000))
        until(lambda: stderr_says("4300 digits"), "the 5000-digit number to be named")
        write(course_yml, original + "\nextra: " + "[" * 5000 + "]" * 5000 + "\n")
        until(lambda: stderr_says("nested too deep"), "the deep nesting to be named")
        assert "still serving the course as it was" in "".join(said) and live.seed == 20261129
        # The loader raising what it raised before it said the kit's words (ValueError, RecursionError): the watch
        # logs each kind once and goes on.
        flaky = Flaky(config.load_course, ValueError("Exceeds the limit (4300 digits)"),
                      ValueError("Exceeds the limit (4300 digits)"), RecursionError("maximum recursion depth"))
        monkeypatch.setattr(config, "load_course", flaky)
        for n in range(3):
            write(course_yml, original + "\n" + "#" * (n + 1) + "\n")
            until(lambda n=n: flaky.calls > n, f"edit {n + 1} to be read")
        until(lambda: len(logged(caplog, "RecursionError")) == 1, "the RecursionError to be logged")
        assert len(logged(caplog, "ValueError")) == 1
        assert watch.rounds.failures == {"ValueError": 2, "RecursionError": 1}
        assert reloaded.empty() and live.seed == 20261129
        # A valid edit: picked up, the workers told.
        write(course_yml, original.replace("seed: 20261129", "seed: 42"))
        new = reloaded.get(timeout=PATIENCE)
        assert new.seed == 42 and live.seed == 42
        # SIGHUP's way (a look asked for now) still works too.
        watch._now.set()
        assert reloaded.get(timeout=PATIENCE).seed == 42
        assert watch._thread.is_alive()
    finally:
        watch.stop()
    assert not watch._thread.is_alive()


# -- the LTI passback -------------------------------------------------------------------------------------------------
def test_the_passback_goes_on_after_a_round_that_raises(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger=loops.LOG.name)
    rounds_done = threading.Semaphore(0)

    def one_round(*_args: Any, **_kwargs: Any) -> outbox.Delivery:
        rounds_done.release()
        return outbox.Delivery()

    flaky = Flaky(one_round, ConnectionError("the database is away"), ConnectionError("the database is away"),
                  LookupError("no such row"))
    monkeypatch.setattr(outbox, "sync", flaky)
    monkeypatch.setattr(outbox.P, "platforms", lambda _engine: ["an LMS"])
    passback = outbox.Passback(SimpleNamespace(engine=None, close=lambda: None), COURSE, every=0.01)
    passback.start()
    try:
        for _ in range(2):                      # two rounds that went through, after the three that raised
            assert rounds_done.acquire(timeout=PATIENCE), "the passback stopped"
    finally:
        passback.stop()
    assert flaky.calls >= 5
    assert passback.rounds.failures == {"ConnectionError": 2, "LookupError": 1}
    assert len(logged(caplog, "ConnectionError")) == 1 and len(logged(caplog, "LookupError")) == 1


# -- a worker's lease heartbeat -----------------------------------------------------------------------------------
def test_the_lease_heartbeat_goes_on_after_a_beat_that_raises(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger=loops.LOG.name)
    renewed = threading.Semaphore(0)

    def renew(_engine: Any, job: int, owner: str, _lease: float) -> bool:
        assert (job, owner) == (7, "w1")
        renewed.release()
        return True

    flaky = Flaky(renew, TimeoutError("no answer"), TimeoutError("no answer"))
    monkeypatch.setattr(Q, "renew", flaky)
    beat = _Heartbeat(None, "w1", lease=0.03)
    beat.job = 7
    try:
        for _ in range(2):
            assert renewed.acquire(timeout=PATIENCE), "the heartbeat stopped"
    finally:
        beat.close()
    assert beat.rounds.failures == {"TimeoutError": 2}
    assert len(logged(caplog, "TimeoutError")) == 1


# -- the watch over the workers -----------------------------------------------------------------------------------
class FakeWorker:
    """A worker process as the watch sees it: running until signalled."""

    pids = iter(range(40_000, 50_000))

    def __init__(self) -> None:
        self.pid, self.code = next(self.pids), None

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        self.code = -sig if sig != signal.SIGTERM else 0

    def wait(self, timeout: float | None = None) -> int | None:
        return self.code

    def kill(self) -> None:
        self.code = -9


def test_the_worker_watch_goes_on_when_a_worker_cannot_be_started(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger=loops.LOG.name)
    started: list[FakeWorker] = []

    def start(_self: Any) -> FakeWorker:
        started.append(FakeWorker())
        return started[-1]

    # The first start (the service starting) works; the next two (after course.yml changed) find no process left.
    flaky = Flaky(start)
    monkeypatch.setattr(Workers, "_start", lambda self: flaky(self))
    workers = Workers(COURSE, "unused", None, 1)
    first = workers.procs[0]
    flaky.failures = [BlockingIOError(11, "Resource temporarily unavailable"),
                      BlockingIOError(11, "Resource temporarily unavailable")]
    workers.watch()
    try:
        workers.restart(COURSE)             # the worker finishes its job and stops: the watch starts another
        until(lambda: workers.procs[0] is not first, "a new worker to be started")
        assert workers.procs[0] is started[-1] and workers.procs[0].poll() is None
        assert workers._thread is not None and workers._thread.is_alive()
    finally:
        workers.stop()
    assert flaky.calls == 4
    assert len(logged(caplog, "BlockingIOError")) == 1


def test_a_worker_killed_by_a_signal_python_has_no_name_for_is_named_by_its_number():
    assert _ended(-signal.SIGKILL) == "killed by SIGKILL" and _ended(3) == "exit status 3"
    assert _ended(-(signal.SIGRTMIN + 3)) == f"killed by signal {signal.SIGRTMIN + 3}"
