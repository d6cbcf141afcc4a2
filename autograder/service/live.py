"""The course as the running service sees it: course.yml read again when it changes, never a stale copy.

``autograder serve`` hands the app a :class:`LiveCourse`: every attribute is the current course's, so a
changed due date, late policy or service rule reaches every view at the next request. :class:`CourseWatch`
looks at course.yml every two seconds (and at once on SIGHUP): a changed file is validated first; a valid one
replaces the course and the workers are restarted to grade with it (each finishes its job in hand); an
invalid one is named on stderr and the course in use stays. Whatever a look raises (a course.yml the loader
chokes on, the restart of the workers failing), the watch goes on and sees the next edit (:mod:`.loops`: each kind
of failure logged once). Nothing of the course is kept elsewhere in the web process (:class:`Assignments` is a
live view of its assignments).
"""
from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.core.errors import AutograderError
from autograder.service.loops import Rounds

if TYPE_CHECKING:
    from autograder.course.config import Course


class LiveCourse:
    """A course whose every attribute is the current one's (see the module's text)."""

    def __init__(self, course: Course):
        object.__setattr__(self, "current", course)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "current"), name)

    def replace(self, course: Course) -> None:
        object.__setattr__(self, "current", course)


class Assignments(Mapping[str, Any]):
    """The course's assignments by id, read from the course each time (a live view)."""

    def __init__(self, course: Course):
        self._course = course

    def _now(self) -> dict[str, Any]:
        return {a.id: a for a in self._course.assignments}

    def __getitem__(self, key: str) -> Any:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._now()))

    def __len__(self) -> int:
        return len(self._now())

    def __contains__(self, key: object) -> bool:
        return key in self._now()


class CourseWatch:
    """Reloads ``live``'s course.yml when it changes or on SIGHUP (validated first); ``changed`` is called with
    the new course after each reload (the workers restart)."""

    def __init__(self, live: LiveCourse, path: Path, changed: Callable[[Any], None], every: float = 2.0):
        self.live, self.path, self.changed, self.every = live, Path(path), changed, every
        self._seen = self._stamp()
        self._now = threading.Event()
        self._stop = threading.Event()
        self.rounds = Rounds(f"serve: the watch of {self.path}")
        self._thread = threading.Thread(target=self._run, name="course-watch", daemon=True)

    def start(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, lambda *_: self._now.set())
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._now.set()
        self._thread.join(timeout=10)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = self._now.wait(self.every)
            self._now.clear()
            if self._stop.is_set():
                return
            self.rounds.run(self._look, asked)

    def _look(self, asked: bool) -> None:
        stamp = self._stamp()
        if stamp != self._seen or asked:
            self._seen = stamp          # first: a file that fails is not read again until it changes again
            self.reload()

    def reload(self) -> bool:
        """course.yml read and validated again; True when the new one is now in use."""
        from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

        try:
            course = load_course(self.path)
        except AutograderError as exc:
            print(f"serve: {self.path} changed but is not valid ({exc.message}); still serving the course as it "
                  "was", file=sys.stderr, flush=True)
            return False
        self.live.replace(course)
        print(f"serve: {self.path} reloaded: the pages and the API use it now; the workers restart to grade with "
              "it (each finishes its job in hand)", file=sys.stderr, flush=True)
        self.changed(course)
        return True
