"""The dashboard's "why did this lose points?": ``autograder explain`` on one stored submission, in a process
of its own (the web process never grades: it has threads, and the cage needs a process without them).

The web process writes the graded notebook and its stored result into a private folder and runs
``python -m autograder.service.explain_job FOLDER`` with the course in ``AUTOGRADER_COURSE``; this prints the
explanation's lines as JSON (:func:`autograder.grading.explain.explanation`, in the language asked), or exits 2
with one line saying why (the notebook changed since it was graded, an unknown exercise).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from autograder.core.errors import AutograderError
from autograder.grading.process import prepare_grader_process

#: The files of the folder the web process fills.
REQUEST = "request.json"
NOTEBOOK = "graded.ipynb"


def main(argv: list[str] | None = None) -> int:
    prepare_grader_process()            # before numpy and torch load, as a worker does
    from autograder.course.config import load_course  # noqa: PLC0415 - after prepare_grader_process, as a worker
    from autograder.grading.explain import explanation  # noqa: PLC0415 - after prepare_grader_process, as a worker

    folder = Path((argv if argv is not None else sys.argv[1:])[0])
    asked = json.loads((folder / REQUEST).read_text(encoding="utf-8"))
    result = dict(asked["result"], origin=str(folder), source=NOTEBOOK)
    try:
        lines = explanation(load_course(), result, str(asked["exercise"]), language=str(asked["language"]))
    except AutograderError as exc:
        print(exc.message, file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(lines, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
