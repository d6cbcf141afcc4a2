"""``autograder serve export -o OUT``: the service's results as ``autograder grade`` writes them.

For each student and assignment one graded submission counts (course.yml's service.counts: last,
or best, the highest score); OUT gets results/, feedback/, grades.csv, report.html and the LMS
CSVs, written by the same writer as a batch's (the late policy applied again from each submission's receipt time, so an
extension added since takes effect; the LMS files' names and ids from the service's roster, course.yml's where it
has none), and ``submitted/STUDENT/ASSIGNMENT/NOTEBOOK`` with the notebook
each counted result graded and a ``timestamp.txt`` of the server's receipt time (nbgrader collect's
layout). With ``--nbgrader COURSE`` the scores are recorded in that nbgrader course's gradebook as
``autograder grade --nbgrader`` records them (the formgrader then shows each student's notebook).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from autograder.core.errors import AutograderError
from autograder.service import people
from autograder.service.tables import Result, Submission
from autograder.service.history import changes, history_csv, pick_counted
from autograder.service.standing import Standing

if TYPE_CHECKING:
    from autograder.course.config import Course


@dataclass
class Counted:
    """The result that counts for one student and assignment, with the notebook it graded."""

    submission: int
    result: dict[str, Any]
    data: bytes
    received_at: dt.datetime


def counted(engine: Engine, counts: str = "last", standing: Any = None) -> list[dict[str, Any]]:
    """The result that counts per (student, assignment): the latest submission's that has one, or with
    ``counts="best"`` the highest-scoring (the latest of equal ones). With ``standing`` (a
    :class:`autograder.service.standing.Standing`), each result as the late policy makes it now, and "best"
    compares those points."""
    return [c.result for c in counted_submissions(engine, counts, standing)]


def counted_submissions(engine: Engine, counts: str = "last", standing: Any = None) -> list[Counted]:
    """:func:`counted` with each result's submission: its id, bytes and receipt time."""
    with engine.connect() as conn:
        rows: list[tuple[int, str, str, float]] = [
            (r[0], r[1], r[2], r[3]) for r in conn.execute(
                select(Submission.id, Submission.student, Submission.assignment, Result.points)
                .join(Result, Result.submission_id == Submission.id).order_by(Submission.id))]
        if counts == "best" and standing is not None:        # the points as they are now (an extension since)
            now = {sid: float(standing.result(r).get("points") or 0.0) for sid, r in conn.execute(
                select(Result.submission_id, Result.result))}
            rows = [(sid, student, assignment, now.get(sid, 0.0)) for sid, student, assignment, _ in rows]
        chosen = pick_counted(rows, counts)
        out = []
        for _key, (sid, _points) in sorted(chosen.items()):
            one = conn.execute(select(Result.result, Submission.data, Submission.received_at)
                               .join(Submission, Submission.id == Result.submission_id)
                               .where(Result.submission_id == sid)).one()
            result = dict(one.result) if standing is None else standing.result(one.result)
            result["origin"] = "service"
            result["source"] = f"submission {sid}"
            out.append(Counted(sid, result, bytes(one.data), one.received_at))
    return out


def export(engine: Engine, course: Course, out: Path, nbgrader: Path | None = None) -> list[dict[str, Any]]:
    """Write OUT from the service's results (and, with ``nbgrader``, record them in that course's
    gradebook); the results written."""
    from autograder.grading.outputs import Outputs  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.grading.submissions import safe_name  # noqa: PLC0415 - loads pydantic and yaml (course.yml)
    from autograder.reports.files import atomic_write_bytes, atomic_write_text  # noqa: PLC0415 - loads pydantic
    from autograder.reports.lms import write_lms_csv  # noqa: PLC0415 - loads pydantic and yaml (course.yml)


    if nbgrader is not None and not (Path(nbgrader) / "nbgrader_config.py").is_file() and \
            not (Path(nbgrader) / "gradebook.db").is_file():
        raise AutograderError(f"--nbgrader {nbgrader}: not an nbgrader course folder (no nbgrader_config.py "
                              "or gradebook.db in it)", hint="pass the folder nbgrader runs in; nothing was written")
    out = Path(out)

    standing = Standing(engine, course)
    outputs = Outputs(out, course, course.language.value, standing.deadlines)
    written, located = [], []
    submitted = (out / "submitted").resolve()
    known = {a.id: a for a in course.assignments}
    for one in counted_submissions(engine, course.service.counts, standing):
        result = one.result
        student, assignment = safe_name(str(result.get("student") or "unknown")), str(result.get("assignment"))
        result["key"] = f"{student}__{assignment}"
        if assignment in known:
            # The notebook beside the results (nbgrader collect's layout): `autograder explain STUDENT EXERCISE
            # -o OUT` finds there the very file that was graded (a result's source: "submission N").
            rel = Path(student) / assignment / known[assignment].notebook
            atomic_write_bytes(submitted / rel, one.data)
            atomic_write_text(submitted / rel.parent / "timestamp.txt",
                              one.received_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC") + "\n")
            located.append(dict(result, origin=str(submitted), source=rel.as_posix()))
        outputs.record(result, submitted=result.get("submitted"))
        written.append(result)
    outputs.write_csv()
    outputs.report(written)
    # The LMS files name students as the service knows them (serve roster: e-mails, Canvas ids, Moodle ID
    # numbers), course.yml's roster for a student the service's does not have.
    write_lms_csv(written, course, out, roster=people.roster(engine, course))
    # Every change of a counted score, with why, who and when (the audit CSV).
    atomic_write_text(out / "score-history.csv", history_csv(changes(engine, limit=10_000_000)))
    if nbgrader is not None:
        from autograder.exports.nbgrader import record_in_gradebook  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

        for text in record_in_gradebook(located, course, Path(nbgrader)).lines():
            print(text)
    return written
