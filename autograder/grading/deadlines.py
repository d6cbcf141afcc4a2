"""A batch's deadlines: the late policy applied to each result, every time it is written.

The grader scores a notebook (``raw_points``); this module turns that into the final score
(``points``) from the assignment's due date, its late window and policy (course.yml), a
student's extension (``extensions.csv`` or ``extensions.yml`` beside course.yml) and the time
the submission came (:mod:`autograder.grading.times`: where it came from is recorded). It runs
in this process, on fresh results and on results kept from an earlier run alike, so a changed
due date or a new extension takes effect without regrading a notebook, and nothing here reads
the clock: the same files and the same course give the same scores, whenever they are graded.
``--as-of TIME`` is the submission time of every submission whose time nobody can vouch for
(a plain folder), so that an instructor sees what a deadline will change before it applies.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder.course import lateness
from autograder.course.clock import readable
from autograder.course.config import Course
from autograder.core.errors import ConfigError
from autograder.course.extensions import load_extensions
from autograder.grading.times import NONE, SubmittedAt
from autograder.course.late_policy import Deadline, Extension, deadline_for
from autograder.course.written import maximum_of

#: The extensions file, beside course.yml (the first that exists).
EXTENSION_FILES = ("extensions.csv", "extensions.yml", "extensions.yaml")


def submitted_json(at: SubmittedAt | None) -> dict[str, Any]:
    """A submission time as a result records it."""
    at = at or NONE
    return {"when": _iso(at.when), "source": at.source, "late_marker": at.late_marker, "due": _iso(at.due),
            "last": _iso(at.last), "problem": at.problem}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


class Deadlines:
    """What decides lateness for one batch: the course's dates and policies, the extensions, ``--as-of``."""

    def __init__(self, course: Course, extensions: list[Extension] | None = None, as_of: datetime | None = None,
                 source: str = ""):
        self.course = course
        self.extensions = list(extensions or [])
        self.as_of = as_of
        self.source = source          # the extensions file read, for messages ("" for none)

    @classmethod
    def load(cls, course: Course, *, students: set[str] | None = None, as_of: datetime | None = None,
             more: Iterable[Extension] = ()) -> Deadlines:
        """The course's deadlines with its extensions file (errors name the file, the row and the field), and
        ``more`` (nbgrader's gradebook) for a student and assignment the file says nothing of."""
        try:
            root = course.root
        except Exception:  # noqa: BLE001 - a course built in memory has no folder and no extensions
            return cls(course, list(more), as_of)
        for path in policy_file(course):
            if not path.is_file():
                raise ConfigError(f"course.yml: late: custom policy: {path.name} is not in the course folder {root}",
                                  hint="function: module:function names a .py file beside course.yml")
        found: list[Extension] = []
        source = ""
        for name in EXTENSION_FILES:
            path = root / name
            if path.exists():
                found = load_extensions(path, assignments={a.id for a in course.assignments}, students=students,
                                        default_tz=course.timezone)
                source = name
                break
        listed = {(e.student, e.assignment) for e in found}
        found += [e for e in more if (e.student, e.assignment) not in listed]
        return cls(course, found, as_of, source)

    def deadline(self, student: str | None, assignment: str, submitted: dict[str, Any] | None = None
                 ) -> Deadline | None:
        """The deadline of ``student`` for ``assignment``: a due date the submission's own source holds for
        this student (Gradescope's carries their extension) before course.yml's and the extensions file's."""
        due, last, policy = self.course.deadline_of(assignment)
        own_due = _time((submitted or {}).get("due"))
        if own_due is not None:       # shown in the course's time zone, as course.yml's dates are
            own_last = _time((submitted or {}).get("last"))
            return Deadline(due=self._local(own_due), last=self._local(own_last) if own_last else None,
                            policy=policy)
        if due is None:
            return None
        found = deadline_for(student, assignment, due=due, last=last, policy=policy, extensions=self.extensions)
        if found is None:
            return None
        # In the course's time zone, as every page and message shows a time (an extension granted on the dashboard
        # is stored in UTC).
        return found.model_copy(update={"due": self._local(found.due),
                                        "last": self._local(found.last) if found.last is not None else None})

    def _local(self, value: datetime) -> datetime:
        return value.astimezone(self.course.zone)

    def settle(self, result: dict[str, Any], submitted: dict[str, Any] | None) -> dict[str, Any]:
        """``result`` with its submission time, its lateness and its final score (in place, and returned).

        ``raw_points`` keeps what the notebook scored; ``points`` is the score after the late policy, which is
        computed on the assignment's maximum (:func:`autograder.course.written.maximum`: its written answers' points
        included, graded or not), the ``max_points`` written. A custom policy that fails raises ConfigError
        naming it: nothing is written wrongly.
        """
        raw = result.get("raw_points")
        raw = float(raw if isinstance(raw, (int, float)) else result.get("points") or 0.0)
        result["raw_points"] = raw
        if any(a.id == result.get("assignment") for a in self.course.assignments):
            result["max_points"] = maximum_of(self.course, result).points
        if submitted is not None:
            result["submitted"] = submitted
        submitted = result.get("submitted")
        assignment = result.get("assignment")
        result.pop("late", None)
        result["points"] = raw
        if not isinstance(assignment, str) or not result.get("status", "").startswith("graded"):
            return result
        try:
            deadline = self.deadline(result.get("student"), assignment, submitted)
        except StopIteration:       # an assignment course.yml no longer has
            return result
        if deadline is None:
            return result
        when = _time((submitted or {}).get("when"))
        as_of_used = when is None and self.as_of is not None
        if as_of_used:
            when = self.as_of
        late = lateness.apply(deadline, submitted=when, late_marker=bool((submitted or {}).get("late_marker")),
                              raw=raw, max_points=float(result.get("max_points") or 0.0), course_root=self.course.root,
                              unknown_late="on_time" if self.course.late_marker == "on_time" else "late_unknown")
        rule_en, rule_zh = late.rule, late.rule_zh
        if as_of_used and self.as_of is not None:
            shown = readable(self.as_of, self.course.zone)
            rule_en += f" (no trustworthy submission time: taken as --as-of {shown})"
            rule_zh += f"（没有可信的提交时间：按 --as-of {shown} 计）"
        result["late"] = {"due": _iso(deadline.due), "last": _iso(deadline.last), "late": late.late,
                          "seconds_late": late.seconds_late, "penalty": late.penalty, "accepted": late.accepted,
                          "extended": deadline.extension is not None, "policy": deadline.policy.kind,
                          "as_of": _iso(self.as_of) if as_of_used else None,
                          "rule": {"zh": rule_zh, "en": rule_en}}
        result["points"] = late.final
        return result


def policy_file(course: Course) -> list[Path]:
    """The course's custom late-policy files (they decide scores: the grader's fingerprint hashes them)."""
    out = []
    for policy in [course.late, *(a.late for a in course.assignments if a.late is not None)]:
        if policy.kind == "custom" and policy.function:
            out.append(course.root / (policy.function.split(":", 1)[0] + ".py"))
    return out
