"""``autograder serve export -o OUT``: the service's results as ``autograder grade`` writes them.

For each student and assignment one graded submission counts (course.yml's service.counts: last,
or best, the highest score); OUT gets results/, feedback/, grades.csv, report.html and the LMS
CSVs, written by the same writer as a batch's (the late policy applied again from each submission's receipt time, so an
extension added since takes effect).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from autograder.service.db import Result, Submission


def counted(engine: Engine, counts: str = "last") -> list[dict[str, Any]]:
    """The result that counts per (student, assignment): the latest submission's that has one, or with
    ``counts="best"`` the highest-scoring (the latest of equal ones)."""
    with engine.connect() as conn:
        rows = conn.execute(select(Submission.id, Submission.student, Submission.assignment, Result.result)
                            .join(Result, Result.submission_id == Submission.id).order_by(Submission.id)).all()
    latest: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    for sid, student, assignment, result in rows:
        earlier = latest.get((student, assignment))
        if counts == "best" and earlier is not None and \
                float(earlier[1].get("points") or 0.0) > float(result.get("points") or 0.0):
            continue
        latest[(student, assignment)] = (sid, dict(result))
    out = []
    for (_student, _assignment), (sid, result) in sorted(latest.items()):
        result["origin"] = "service"
        result["source"] = f"submission {sid}"
        out.append(result)
    return out


def export(engine: Engine, course: Any, out: Path) -> list[dict[str, Any]]:
    """Write OUT from the service's results; the results written."""
    from autograder.grading.deadlines import Deadlines
    from autograder.grading.outputs import Outputs
    from autograder.grading.submissions import safe_name
    from autograder.reports.lms import write_lms_csv

    outputs = Outputs(Path(out), course, course.language.value, Deadlines.load(course))
    written = []
    for result in counted(engine, course.service.counts):
        result["key"] = f"{safe_name(str(result.get('student') or 'unknown'))}__{result.get('assignment')}"
        outputs.record(result, submitted=result.get("submitted"))
        written.append(result)
    outputs.write_csv()
    outputs.report(written)
    write_lms_csv(written, course, Path(out))
    return written
