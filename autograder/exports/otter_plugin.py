"""Otter-Grader glue: the kit grades, Otter reports.

``autograder export otter`` writes an Otter autograder zip: ``otter_config.json`` naming
:class:`KitPlugin`, one OK-format test per exercise (``tests/ex2_4.py``: one doctest case
per check, worth that check's points, ``hidden`` for hidden checks) and ``kit/``, the same
bundle ``autograder export gradescope`` makes.

Otter executes a submission in a Jupyter kernel and runs its tests in that same kernel, so
a student's cell can change what the tests see (``torch.allclose = lambda *a: True``), and
the results travel back to Otter as a pickle the kernel writes. With this plugin nothing of
the student's runs there:

1. ``before_execution`` (in Otter's own process, before any kernel starts) grades the
   submission file with ``kit/run_autograder``: the kit's sandbox runs the student's code
   in a fresh worker (an unprivileged uid in an empty chroot when run as root), the
   trusted side compares and scores. It then hands Otter a notebook with no student code.
2. The tests' cases run in Otter's kernel and ask :func:`check_passed`, which reads the
   kit's verdict from a file this plugin wrote.
3. ``after_grading`` (Otter's process again) rebuilds every test's result from the kit's
   verdict it holds in memory, so Otter's score is the kit's whatever the kernel reported.

Without the plugin (an ``otter_config.json`` without it), :func:`check_passed` grades the
notebook in the kernel's working folder with the same ``kit/run_autograder``: the score is
still computed in the kit's sandbox, but the student's code has run in the kernel that
asks, so only the plugin's path is tamper-proof.

The kit must be importable where ``otter run`` runs (``pip install -e .`` of the course, as
in its ``.venv``); the grading itself uses the bundled ``kit/`` (its ``course.yml``, checks
and solutions), in a subprocess with ``sys.executable``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from autograder.core.points import hundredths

#: The kit's verdict (Gradescope's results.json) for Otter's kernel to read.
RESULTS_ENV = "AUTOGRADER_OTTER_RESULTS"
#: Where the bundled kit is, when not ``../source/kit`` from the submission folder.
KIT_ENV = "AUTOGRADER_OTTER_KIT"
#: Longest a whole grading may take (the kit's own limits stop a submission long before).
GRADE_TIMEOUT = 900


class KitGradingError(RuntimeError):
    """The bundled kit did not produce a results.json."""


def grade_notebook(notebook: Path, kit: Path, *, metadata: dict[str, Any] | None = None,
                   timeout: float = GRADE_TIMEOUT) -> dict[str, Any]:
    """Grade one notebook with ``kit/run_autograder`` in a private /autograder layout; its results.json."""
    notebook, kit = Path(notebook), Path(kit).resolve()
    runner = kit / "run_autograder"
    if not runner.is_file():
        raise KitGradingError(f"{runner}: not found (is this an `autograder export otter` zip?)")
    with tempfile.TemporaryDirectory(prefix="autograder-otter-") as tmp:
        root = Path(tmp)
        (root / "source").symlink_to(kit, target_is_directory=True)
        (root / "submission").mkdir()
        (root / "results").mkdir()
        # A copy: the file graded cannot change under the grader.
        shutil.copyfile(notebook, root / "submission" / notebook.name)
        (root / "submission_metadata.json").write_text(json.dumps(metadata or {}), encoding="utf-8")
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(["bash", str(runner)], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, check=False)  # judged by its results.json
        path = root / "results" / "results.json"
        if not path.is_file():
            tail = (proc.stdout + proc.stderr)[-2000:]
            raise KitGradingError(f"kit/run_autograder wrote no results.json (exit {proc.returncode}):\n{tail}")
        results = json.loads(path.read_text(encoding="utf-8"))
    results["_log"] = proc.stdout[-20000:]
    return results


def verdicts(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(exercise, check) -> its test in the kit's results.json."""
    out = {}
    for test in results.get("tests", []):
        extra = test.get("extra_data") or {}
        if "exercise" in extra and "check" in extra:
            out[(extra["exercise"], extra["check"])] = test
    return out


def _write_private(results: dict[str, Any]) -> str:
    fd, path = tempfile.mkstemp(prefix="autograder-otter-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in results.items() if k != "_log"}, f, ensure_ascii=False)
    return path


def _kit_here() -> Path:
    return Path(os.environ.get(KIT_ENV) or Path.cwd().parent / "source" / "kit")


def check_passed(exercise: str, check: str) -> bool:
    """In an Otter test case: did the kit's check pass? (True/False; the doctest expects True.)"""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        # No plugin: grade the one notebook here with the bundled kit, once per kernel.
        notebooks = sorted(Path.cwd().glob("*.ipynb"))
        if len(notebooks) != 1:
            raise KitGradingError(f"expected one notebook in {Path.cwd()}, found {len(notebooks)}")
        path = _write_private(grade_notebook(notebooks[0], _kit_here()))
        os.environ[RESULTS_ENV] = path
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    test = verdicts(results).get((exercise, check))
    if test is None:
        raise KeyError(f"the kit reported no check {check!r} of exercise {exercise}")
    return test.get("status") == "passed"


class KitPlugin:
    """Otter plugin: grade with the kit's sandbox; Otter executes no student code and reports the kit's score.

    Configuration (``otter_config.json``): ``{"autograder.exports.otter_plugin.KitPlugin":
    {"kit": "kit", "assignment": "02_qkv_attention"}}``; ``kit`` is relative to the
    autograder's ``source/`` folder. Otter calls a plugin's events by name (it needs no
    base class), so importing this module does not import Otter.
    """

    def __init__(self, submission_path: str, submission_metadata: dict[str, Any] | None,
                 plugin_config: dict[str, Any] | None):
        self.submission_path = submission_path
        self.submission_metadata = submission_metadata or {}
        self.plugin_config = plugin_config or {}
        self.results: dict[str, Any] | None = None
        self._file: str | None = None
        self.kernel_cases = 0
        self.disagreements: list[str] = []

    def _kit(self) -> Path:
        if os.environ.get(KIT_ENV):
            return Path(os.environ[KIT_ENV])
        name = self.plugin_config.get("kit", "kit")
        # Otter runs plugins from <autograder>/submission; the zip is unpacked in <autograder>/source.
        for base in (Path.cwd().parent, Path(self.submission_path).resolve().parent.parent):
            if (base / "source" / name / "run_autograder").is_file():
                return base / "source" / name
        raise KitGradingError(f"no {name}/run_autograder in the autograder's source folder")

    def before_execution(self, submission: Any) -> Any:
        import nbformat

        try:
            self.results = grade_notebook(Path(self.submission_path), self._kit(),
                                          metadata=self.submission_metadata)
        except (KitGradingError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            # No verdict: every case fails (0 points) and the report says why; the student's code still never
            # runs in Otter's kernel.
            self.results = {"score": 0.0, "output": f"the course kit could not grade this submission: {exc}",
                            "tests": [], "_log": str(exc)}
        self._file = _write_private(self.results)
        os.environ[RESULTS_ENV] = self._file  # the kernel Otter starts next inherits it
        if isinstance(submission, str):
            return "# graded by the course kit's sandbox\n"
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells.append(nbformat.v4.new_markdown_cell(
            "The student's code was graded by the course kit's sandbox; Otter runs none of it."))
        return nb

    def after_grading(self, results: Any) -> None:
        from otter.test_files.abstract_test import TestCaseResult
        from otter.test_files.ok_test import OKTestFile

        if self.results is None:
            return
        found = verdicts(self.results)
        # What Otter's kernel concluded, for the report: it ran no student code, so it should agree.
        self.kernel_cases = 0
        self.disagreements = []
        for tf in getattr(results, "results", {}).values():
            for tcr in getattr(tf, "test_case_results", []):
                exercise, _, check = tcr.test_case.name.partition(" ")
                test = found.get((exercise, check))
                self.kernel_cases += 1
                if test is None or tcr.passed != (test.get("status") == "passed"):
                    self.disagreements.append(tcr.test_case.name)
        tests_dir = Path(self.submission_path).resolve().parent / "tests"
        rebuilt = {}
        for path in sorted(tests_dir.glob("*.py")):
            if path.name == "__init__.py":
                continue
            tf = OKTestFile.from_file(str(path))
            tf.test_case_results = []
            score = 0.0
            for case in tf.test_cases:
                exercise, _, check = case.name.partition(" ")
                test = found.get((exercise, check))
                passed = test is not None and test.get("status") == "passed"
                score += float(test.get("score") or 0.0) if test else 0.0
                message = test.get("output", "") if test else "the kit reported no such check"
                tf.test_case_results.append(TestCaseResult(test_case=case, message=message, passed=passed))

            tf.update_score(hundredths(score))  # hundredths, as the kit's (autograder.core.points)
            rebuilt[tf.name] = tf
        # The kit's verdict replaces whatever the kernel reported (or failed to report).
        results.results = rebuilt
        results._catastrophic_error = None  # noqa: SLF001 - Otter has no public setter
        results.set_output(self.results.get("output", ""))
        if self._file:
            Path(self._file).unlink(missing_ok=True)
            os.environ.pop(RESULTS_ENV, None)

    def generate_report(self) -> str:
        if self.results is None:
            return "the course kit did not grade this submission"
        if self.disagreements:
            kernel = (f"Otter's kernel disagreed with the kit on {len(self.disagreements)} of {self.kernel_cases} "
                      f"cases ({', '.join(self.disagreements[:10])}); the kit's verdict stands")
        else:
            kernel = f"Otter's kernel agreed with the kit on all {self.kernel_cases} cases"
        return (f"graded by the course kit's sandbox: {self.results.get('score')} points; {kernel}\n"
                f"{self.results.get('_log', '')[-4000:]}")
