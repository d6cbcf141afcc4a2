"""What a batch writes: results/, feedback/, grades.csv and the LMS files, atomically, by one writer;
and what it keeps from an earlier run (resuming).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from autograder import reports as R
from autograder.course.config import Course
from autograder.core.errors import ConfigError
from autograder.grading.deadlines import Deadlines
from autograder.grading.grader import GradingContext
from autograder.grading.submission import finalize, grader_fault
from autograder.grading.submissions import Discovery, Submission

#: grades.csv is rebuilt at most this often while a batch runs (and always when it ends or stops).
CSV_SECONDS = 0.5


# -- the batch --------------------------------------------------------------------------
class Outputs:
    """OUT: results/ (the record), feedback/, grades.csv and report.html (views of results/).

    grades.csv holds a row for every result in results/, this batch's and earlier
    ones' (another assignment graded into the same OUT keeps its rows), and is
    rewritten atomically as each submission finishes.
    """

    def __init__(self, out: Path, course: Course, language: str, deadlines: Deadlines | None = None):
        self.out = Path(out)
        self.course = course
        self.language = language
        self.deadlines = deadlines       # applied to each result written or kept (grading/deadlines.py)
        self.results_dir = self.out / "results"
        self.feedback_dir = self.out / "feedback"
        self.lock = threading.Lock()
        for d in (self.results_dir, self.feedback_dir):
            d.mkdir(parents=True, exist_ok=True)
            R.remove_stale_temporaries(d)
        R.remove_stale_temporaries(self.out)
        self.rows: dict[str, dict[str, Any]] = {}
        for path in sorted(self.results_dir.glob("*.json")):
            old = R.load_result(path)
            if old is not None and old.get("key") == path.stem:
                self.rows[path.stem] = _row(old)
        self._csv_seconds = 0.0
        self._csv_written = 0.0

    def result_path(self, key: str) -> Path:
        return self.results_dir / f"{key}.json"

    def existing(self, sub: Submission, fingerprint: str) -> dict[str, Any] | None:
        """The stored result of this very notebook by this very grader, if there is one."""
        old = R.load_result(self.result_path(sub.key))
        if old and old.get("sha256") == sub.sha256 and old.get("grader") == fingerprint \
                and old.get("source") == sub.source and not old.get("retry"):
            return old
        return None  # a grader fault (retry) is never taken as done: the next run tries again

    def retire(self, origin: str, found: Discovery) -> list[str]:
        """Move aside results of this SUBMISSIONS that no longer describe a file in it.

        A file now known under another key (a duplicate resolved, a student renamed)
        or gone from the folder keeps its old files in OUT/superseded/, not in grades.csv.
        """
        current = {s.source: s.key for s in found.submissions}
        scoped = set(found.out_of_scope)
        moved = []
        for key, row in list(self.rows.items()):
            source = row.get("source")
            if row.get("origin") != origin or source in scoped:
                continue
            if isinstance(source, str) and current.get(source) == key:
                continue
            target = self.out / "superseded"
            target.mkdir(exist_ok=True)
            for path in (self.result_path(key), self.feedback_dir / f"{key}.md", self.feedback_dir / f"{key}.html"):
                if path.exists():
                    os.replace(path, target / path.name)
            del self.rows[key]
            moved.append(key)
        return moved

    def feedback(self, result: dict[str, Any], rendered: tuple[str, str] | None = None) -> None:
        """Write the feedback files; ``rendered`` is (markdown, html) a grading lane already made."""
        key = result["key"]
        md, html = rendered if rendered is not None else render_feedback(result, self.course, self.language)
        R.write_if_changed(self.feedback_dir / f"{key}.md", md)
        R.write_if_changed(self.feedback_dir / f"{key}.html", html)

    def keep(self, result: dict[str, Any], submitted: dict[str, Any] | None = None) -> None:
        """A result from an earlier run: its lateness settled again (a new extension, a changed due date),
        its feedback (in this run's language) and its row."""
        if self.deadlines is not None:
            before = R.dump_result(result)
            self.deadlines.settle(result, submitted)
            if R.dump_result(result) != before:
                R.atomic_write_text(self.result_path(result["key"]), R.dump_result(result))
        self.feedback(result)
        with self.lock:
            self.rows[result["key"]] = _row(result)

    def record(self, result: dict[str, Any], rendered: tuple[str, str] | None = None,
               submitted: dict[str, Any] | None = None) -> None:
        """Write one fresh result (its late policy applied), its feedback, then the gradebook; safe from any
        thread. A custom late policy that fails raises ConfigError: the batch stops, nothing wrong is written."""
        if self.deadlines is not None:
            self.deadlines.settle(result, submitted)
            if "late" in result:
                rendered = None       # a lane rendered it before the penalty was known
        R.atomic_write_text(self.result_path(result["key"]), R.dump_result(result))
        self.feedback(result, rendered)
        with self.lock:
            self.rows[result["key"]] = _row(result)
            # Rebuilding is O(rows) (5 ms for 200): at most every half second, and every 20 times as long as it
            # takes past thousands of rows (and at the end, or when the batch stops: results/ holds every row).
            if time.monotonic() - self._csv_written > max(CSV_SECONDS, 20 * self._csv_seconds):
                self._write_csv()

    def write_csv(self) -> None:
        with self.lock:
            self._write_csv()

    def _write_csv(self) -> None:
        start = time.monotonic()
        R.atomic_write_text(self.out / "grades.csv", R.grades_csv(list(self.rows.values()), self.course),
                            encoding="utf-8-sig")
        self._csv_written = time.monotonic()
        self._csv_seconds = self._csv_written - start

    def all_results(self) -> list[dict[str, Any]]:
        """Every result grades.csv shows, read back from results/."""
        out = []
        for key in sorted(self.rows):
            result = R.load_result(self.result_path(key))
            if result is not None:
                out.append(result)
        return out

    def report(self, results: list[dict[str, Any]] | None = None) -> None:
        results = self.all_results() if results is None else results
        R.atomic_write_text(self.out / "report.html", R.class_report_html(results, self.course, self.language))


def render_feedback(result: dict[str, Any], course: Course, language: str) -> tuple[str, str]:
    """A result's feedback files: (markdown, html)."""
    return R.feedback_markdown(result, course, language), R.feedback_html(result, course, language)


def _row(result: dict[str, Any]) -> dict[str, Any]:
    """What grades.csv needs of a result (kept in memory instead of whole results)."""
    keep = ("key", "student", "assignment", "points", "max_points", "status", "source", "origin", "raw_points",
            "late")
    return {**{k: result.get(k) for k in keep},
            "exercises": [{"exercise": e["exercise"], "points": e["points"], "max_points": e.get("max_points")}
                          for e in result.get("exercises", [])],
            "questions": [{"question": q.get("question"), "points": q.get("points"), "max_points": q.get("max_points")}
                          for q in result.get("questions") or () if isinstance(q, dict)]}


def keep_earlier(outputs: Outputs, old: dict[str, Any], submitted: dict[str, Any] | None = None) -> bool:
    """Keep an earlier run's result; False (grade it again) when even its feedback cannot be written."""
    try:
        outputs.keep(old, submitted)
        return True
    except ConfigError:
        raise           # a custom late policy that fails: one clear error, not a regrade
    except Exception:  # noqa: BLE001 - a damaged old result is simply regraded
        return False


def record_or_fail(outputs: Outputs, result: dict[str, Any], sub: Submission, ctx: GradingContext,
            unwritten: list[str], rendered: tuple[str, str] | None = None) -> dict[str, Any] | None:
    """Write one result; if that fails, write this submission's failure row instead.

    Returns what was written, or None (named in ``unwritten``) when not even the failure row
    could be: the batch goes on either way.
    """
    try:
        outputs.record(result, rendered, sub.submitted)
        return result
    except ConfigError:
        raise           # a custom late policy that fails: the batch stops with one line naming it
    except Exception as exc:  # noqa: BLE001 - a submission's row can fail, never the batch
        try:
            fallback = finalize(grader_fault(sub, ctx, exc, step="writing the result"))
            outputs.record(fallback)
            return fallback
        except Exception as again:  # noqa: BLE001 - not even the fallback row: named, and the batch goes on
            unwritten.append(f"{sub.source}: {type(again).__name__}")
            return None
