"""The dashboard's downloads: grades.csv, the LMS files, every student's feedback page in one zip; each
made from the stored results as they stand now (the same export as ``autograder serve export``)."""
from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from autograder.service.auth import StaffPage
from autograder.service.context import ServiceDep
from autograder.service.errors import ApiError
from autograder.service.export import export

router = APIRouter(prefix="/dashboard", include_in_schema=False)

FILES = ("grades.csv", "canvas.csv", "moodle.csv", "moodle-grades.csv", "lms-skipped.csv", "score-history.csv",
         "feedback.zip")


@router.get("/download/{name}")
async def download(name: str, signed: StaffPage, state: ServiceDep) -> Response:
    if name not in FILES:
        raise ApiError(404, "service.no_submission", submission=name[:50])

    def build() -> bytes:
        with tempfile.TemporaryDirectory(prefix="autograder-export-") as tmp:
            out = Path(tmp) / "out"
            export(state.engine, state.course, out)
            if name != "feedback.zip":
                return (out / name).read_bytes()
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
                for path in sorted((out / "feedback").iterdir()):
                    z.write(path, f"feedback/{path.name}")
            return buffer.getvalue()

    data = await run_in_threadpool(build)
    kind = "application/zip" if name.endswith(".zip") else "text/csv; charset=utf-8"
    return Response(data, media_type=kind, headers={"Content-Disposition": f'attachment; filename="{name}"'})
