"""``autograder course``: validate course.yml and show the course as read.

The course's dates (each assignment's due date, late window and late policy, in words), the service's
rules, and a light check of the source notebooks: each exercise's solution cell defines the function
course.yml names. ``--json`` prints the validated course instead (:mod:`autograder.course.config`'s model).
"""
from __future__ import annotations

import argparse
import json
import re

from autograder.course.clock import readable
from autograder.course.config import Course, grade_id, load_course
from autograder.course.files import course_file
from autograder.course.config_errors import did_you_mean
from autograder.core.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the validated course as JSON")


def run(args: argparse.Namespace) -> int:
    file = course_file()
    course = load_course(file)
    if args.json:
        print(course.model_dump_json(indent=2))
        return 0
    print(f"course file: {file.resolve()}")
    print(f"{course.name}: {len(course.assignments)} assignments, {len(course.exercises)} exercises, "
          f"language {course.language.value}")
    for a in course.assignments:
        ids = ", ".join(f"{e.id} {e.function} ({e.points:g})" for e in a.exercises)
        print(f"  {a.id} [{a.points:g} points]: {ids}")
        print(f"    {_deadline_text(course, a.id)}")
    service = course.service
    print(f"service: before the due date students see {service.before_due}; attempts "
          f"{service.attempts or 'unlimited'}, a day {service.attempts_per_day or 'unlimited'}; counts "
          f"{service.counts}; {service.queued_per_student or 'any number of'} waiting per student")
    _check_sources(course)
    return 0


def _deadline_text(course: Course, assignment_id: str) -> str:
    """One assignment's due date, late window and late policy, in words (the course's time zone)."""
    due, last, policy = course.deadline_of(assignment_id)
    if due is None:
        return "no due date"
    zone = course.timezone or "UTC"
    text = f"due {readable(due, course.zone)} ({zone})"
    if last is not None:
        text += f", late until {readable(last, course.zone)}"
    if policy.kind == "none":
        return text + ", no late penalty"
    if policy.kind == "zero":
        return text + ", late: 0 points"
    if policy.kind == "custom":
        return text + f", late: {policy.function}"
    unit = "hour" if policy.kind == "per_hour" else "day"
    amount = f"{policy.percent:g}% of the points" if policy.percent is not None else f"{policy.points:g} points"
    floor = f", never below {policy.floor:g}" if policy.floor is not None else ""
    return text + f", late: {amount} off per started {unit}{floor}"


def _check_sources(course: Course) -> None:
    """Where the source notebooks are (the instructor's repository), each exercise's solution cell
    must define the function course.yml names: a misspelled name fails here, not only at build.

    A light read (JSON and def/class lines): `autograder build` validates the notebooks in full.
    """
    for a in course.assignments:
        path = course.root / "source" / a.id / a.notebook
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError, TypeError):
            continue   # no source here (a student bundle), or a notebook `autograder build` will name
        sources = {}
        for cell in cells:
            gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") if isinstance(cell, dict) else None
            src = cell.get("source", "") if isinstance(cell, dict) else ""
            sources[gid] = "".join(src) if isinstance(src, list) else str(src)
        for e in a.exercises:
            cell_id = grade_id(e.id)
            defined = re.findall(r"^\s*(?:def|class)\s+([A-Za-z_]\w*)", sources.get(cell_id, ""), flags=re.M)
            if cell_id in sources and e.function not in defined:
                raise ConfigError(f"course.yml: exercise {e.id}: function {e.function!r} is not defined in "
                                  f"source/{a.id}/{a.notebook} (cell {cell_id!r})",
                                  hint=(did_you_mean(e.function, defined)
                                        or f"the cell defines {', '.join(defined) or 'nothing'}"))
