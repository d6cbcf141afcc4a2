"""``nbgrader export`` in hundredths: nbgrader's own CSV export, every score as the kit keeps it.

The gradebook holds each exercise's points exactly as the kit recorded them (hundredths of a point), but
nbgrader sums them in floating point: its export would write ``4.390000000000001`` where grades.csv says
``4.39``. The course's nbgrader_config.py makes this plugin nbgrader's exporter
(``c.ExportApp.plugin_class``), so ``nbgrader export`` and grades.csv show the same totals.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from nbgrader.plugins.export import CsvExportPlugin

from autograder.core.points import fmt


class HundredthsCsvExport(CsvExportPlugin):
    """nbgrader's CSV export, then every score column rounded to hundredths (see the module docstring)."""

    SCORES = ("raw_score", "late_submission_penalty", "score", "max_score")

    def export(self, gradebook: Any) -> None:
        super().export(gradebook)
        dest = Path(self.to or "grades.csv")
        rows = list(csv.DictReader(io.StringIO(dest.read_text(encoding="utf-8"))))
        if not rows:
            return
        for row in rows:
            for key in self.SCORES:
                try:
                    row[key] = fmt(float(row[key]))      # fmt rounds to hundredths, as the kit keeps scores
                except (KeyError, TypeError, ValueError):
                    pass
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        from autograder.reports.files import atomic_write_text  # noqa: PLC0415 - loads pydantic

        atomic_write_text(dest, buffer.getvalue())
