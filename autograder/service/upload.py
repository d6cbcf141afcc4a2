"""An upload's form, read as it arrives, the notebook looked at as its bytes come.

The API's and the student page's uploads are ``multipart/form-data`` forms: a few small fields
(``assignment``, the page's ``csrf``) and one file, ``notebook``. :func:`read_upload` reads the body in
pieces (the guard has already bounded it: :mod:`autograder.service.guard`), hands them to
python-multipart's parser and the notebook's bytes, as they come, to the bounded look
(:class:`autograder.course.notebook.NotebookScanner`), so that a notebook past a bound is refused after its
first few hundred KiB and the rest is never read: a 32 MiB notebook of tiny values costs what 200,000
values do, not a 32 MiB parse, a spool on disk and a copy in memory. Both parsers run in a worker
thread, a piece of ~256 KiB at a time: the event loop never parses a student's bytes. Nothing is
written to disk; the notebook's bytes are kept in memory (at most ``limits.notebook_mb``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from autograder.core.errors import NotebookError
from autograder.course.notebook import Bounds, NotebookScanner, Shape

#: The file field, and how much of each other field is kept (an assignment id, a CSRF token).
NOTEBOOK = "notebook"
FIELD_BYTES = 8 * 1024
#: Parts a form may have (the notebook and a few fields).
MAX_PARTS = 6
#: Bytes gathered before one hand-over to the parsing thread.
BATCH = 256 * 1024


class FormRefused(Exception):
    """The body is not the form an upload is (``what`` names the part), or its notebook was refused
    (``notebook``: the NotebookError)."""

    def __init__(self, what: str, notebook: NotebookError | None = None):
        super().__init__(what)
        self.what, self.notebook = what, notebook


@dataclass
class Upload:
    """The form's small fields, the notebook's bytes and what the bounded look saw of them."""

    fields: dict[str, str] = field(default_factory=dict)
    data: bytes = b""
    shape: Shape | None = None


class _Form:
    """python-multipart's callbacks: the parts, bounded; the notebook's bytes fed to the scanner."""

    def __init__(self, bounds: Bounds):
        self.bounds = bounds
        self.upload = Upload()
        self.parts = 0
        self._name: str | None = None
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self._value = bytearray()
        self._scanner: NotebookScanner | None = None
        self._is_notebook = False

    def callbacks(self) -> Any:       # (python-multipart's MultipartCallbacks)
        return {"on_part_begin": self.part_begin, "on_header_field": self.header_field,
                "on_header_value": self.header_value, "on_header_end": self.header_end,
                "on_headers_finished": self.headers_finished, "on_part_data": self.part_data,
                "on_part_end": self.part_end}

    def part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise FormRefused(f"more than {MAX_PARTS} parts")
        self._name, self._disposition, self._value = None, b"", bytearray()

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = self._header_value = b""

    def headers_finished(self) -> None:
        from python_multipart.multipart import parse_options_header

        _, options = parse_options_header(self._disposition)
        name = options.get(b"name")
        if name is None:
            raise FormRefused("a part without a name")
        self._name = name.decode("utf-8", "replace")[:100]
        self._is_notebook = self._name == NOTEBOOK
        if self._is_notebook:
            if self._scanner is not None:
                raise FormRefused("two notebooks")
            self._scanner = NotebookScanner(self.bounds, "notebook")

    def part_data(self, data: bytes, start: int, end: int) -> None:
        piece = data[start:end]
        if self._is_notebook:
            assert self._scanner is not None
            try:                    # (the scanner keeps the notebook's bytes: the one copy)
                self._scanner.feed(piece)
            except NotebookError as exc:
                raise FormRefused("notebook", exc) from None
        else:
            self._value += piece
            if len(self._value) > FIELD_BYTES:
                raise FormRefused(f"the field {self._name}: more than {FIELD_BYTES // 1024} KiB")

    def part_end(self) -> None:
        if self._is_notebook:
            assert self._scanner is not None
            try:
                self.upload.shape = self._scanner.close()
            except NotebookError as exc:
                raise FormRefused("notebook", exc) from None
            self.upload.data = self._scanner.data
        elif self._name is not None:
            self.upload.fields[self._name] = self._value.decode("utf-8", "replace")
        self._is_notebook = False


async def read_upload(request: Any, bounds: Bounds) -> Upload:
    """The upload's form (see the module's text); FormRefused when it is not one, or its notebook was refused."""
    from python_multipart.multipart import MultipartParser, parse_options_header

    kind, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise FormRefused("notebook (send a multipart/form-data form: the assignment and the .ipynb file)")
    form = _Form(bounds)
    parser = MultipartParser(boundary, form.callbacks())
    batch: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            batch.append(chunk)
            size += len(chunk)
            if size >= BATCH:
                await run_in_threadpool(_write, parser, batch)
                batch, size = [], 0
    except ClientDisconnect:
        raise FormRefused("body (the client went away)") from None
    if batch:
        await run_in_threadpool(_write, parser, batch)
    await run_in_threadpool(_finish, parser)
    if form.upload.shape is None:
        raise FormRefused(NOTEBOOK)
    return form.upload


def _write(parser: Any, pieces: list[bytes]) -> None:
    """A batch of the body's chunks through the form's parser (in a thread: the notebook is scanned as it comes)."""
    from python_multipart.exceptions import FormParserError

    try:
        for piece in pieces:
            parser.write(piece)
    except FormParserError as exc:
        raise FormRefused(f"body ({str(exc)[:100]})") from None


def _finish(parser: Any) -> None:
    """The form's parser told the body ended (in a thread: the last part's callbacks run)."""
    from python_multipart.exceptions import FormParserError

    try:
        parser.finalize()
    except FormParserError as exc:
        raise FormRefused(f"body ({str(exc)[:100]})") from None
