"""Reading a submitted notebook and turning its code cells into plain Python.

The grader reads notebooks here (trusted, nothing executed); the sandbox worker and
``autograder check`` execute the :attr:`Cell.code` it produces, in the namespace of
:mod:`autograder.inside.namespace`. IPython syntax is neutralized: line magics and shell
escapes become calls on its ``NeutralIPython`` (which does nothing), a cell magic either runs
its body as Python (``%%time``, ``%%capture``...) or skips the cell, and
top-level ``check(...)`` calls are replaced by ``pass``.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.core.errors import NotebookError
from autograder.core.messages import Msg, say
from autograder.core.pyast import parse as parse_python

if TYPE_CHECKING:
    from autograder.course.config import Course

#: A notebook file larger than this is refused before parsing (a 50 MB output is fine).
MAX_NOTEBOOK_BYTES = 64 * 2**20
#: Cell magics whose body is plain Python that should still run.
PASSTHROUGH_CELL_MAGICS = {"time", "timeit", "capture", "prun", "memit", "debug"}


@dataclass(frozen=True)
class Cell:
    index: int              # position among all cells of the notebook
    grade_id: str | None    # nbgrader grade_id, when the metadata survived
    source: str             # what the student wrote
    code: str               # plain Python to execute ("" when skipped)
    skipped: str | None     # why the cell is not executed, if it is not
    said: Msg | None = None  # that reason in both languages, where the kit's words give it


def read_notebook(path: str | Path, max_bytes: int = MAX_NOTEBOOK_BYTES,
                  bounds: Bounds | None = None) -> dict[str, Any]:
    """Parse a notebook leniently; NotebookError names the file and what is wrong.

    nbformat 3 is converted to 4. Missing metadata or cell ids are tolerated
    (students strip them); what cannot be read as cells at all is an error. The file is held to
    ``bounds`` (course.yml's limits, :meth:`Bounds.of`) before it is parsed: see :func:`load_notebook`.
    """
    file = Path(path)
    bounds = bounds or Bounds(max_bytes=max_bytes)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise NotebookError(f"{file}: cannot read ({exc.strerror})",
                            said=say("notebook.cannot_read", detail=str(exc.strerror))) from None
    if size > bounds.max_bytes:
        raise _too_large(str(file), size, bounds.max_bytes)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise NotebookError(f"{file}: cannot read ({exc.strerror})",
                            said=say("notebook.cannot_read", detail=str(exc.strerror))) from None
    return parse_notebook(load_notebook(data, bounds, str(file)), str(file))


# -- the one gate for a notebook's bytes -----------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """What a submitted notebook's JSON may hold (course.yml's ``limits``): every honest notebook meets
    them with room (the course's own hold about 3,000 values, 100 cells, 5 levels), while a file of
    millions of tiny values (``[],[],...``), which costs a parser seconds and a gigabyte within the
    size limit, is refused after a bounded look at its first values."""

    max_bytes: int = MAX_NOTEBOOK_BYTES
    cells: int = 2_000
    depth: int = 32
    values: int = 200_000

    @classmethod
    def of(cls, limits: Any) -> Bounds:
        return cls(int(limits.notebook_mb * 2**20), int(limits.notebook_cells), int(limits.notebook_depth),
                   int(limits.notebook_values))


@dataclass(frozen=True)
class Shape:
    """What the bounded look at a notebook's bytes saw: enough for the service to accept or refuse it."""

    nbformat: Any               # the top level's nbformat value (None when absent or not a number)
    cells: int                  # cells (nbformat 4's, or every worksheet's in nbformat 3)
    has_cells: bool             # a list of cells (or of worksheets) at the top level
    declared: str | None        # metadata.autograder.assignment: the assignment the release wrote in
    values: int                 # JSON values, keys included
    depth: int                  # deepest nesting
    grade_ids: frozenset[str] = frozenset()     # the cells' nbgrader grade_ids (nbformat 4)


#: Where a container or value sits, as the keys leading to it ("[]" for an array's item), for the few
#: places the scan looks at: the cells, the version, the assignment the release wrote into the metadata,
#: the cells' nbgrader ids.
_CELL_PATHS = {("cells", "[]"), ("worksheets", "[]", "cells", "[]")}
_DECLARED = ("metadata", "autograder", "assignment")
_GRADE_ID = ("cells", "[]", "metadata", "nbgrader", "grade_id")
#: The bytes handed to the parser at a time (a refusal names the place of a JSON error within what it had).
_PIECE = 64 * 1024


class NotebookScanner:
    """The bounded look at a notebook's JSON, fed in pieces as they come (an upload as it arrives: a bomb is
    refused after its first few hundred KiB, the rest never read) or all at once (:func:`scan_notebook`).

    ijson's C parser pushes each JSON event to the scanner, which stops it at the first value past
    ``bounds`` (NotebookError naming the bound, in both languages): the work is at most ``bounds.values``
    events (200,000: about 20 ms), whatever follows. Not UTF-8, not JSON, empty: a NotebookError too. What
    :meth:`close` returns is the notebook's shape; whether its cells are cells is :func:`parse_notebook`'s
    to say."""

    def __init__(self, bounds: Bounds, name: str = "notebook"):
        import ijson  # noqa: PLC0415 - ijson and its C parser: only a streamed read needs them

        self.bounds, self.name = bounds, name
        self._parsed = 0                    # how far into the bytes the parser has been handed
        self._skip = 0                      # a UTF-8 byte-order mark at the start: 3, not JSON
        self._blank = True                  # nothing but white space so far
        #: The bytes fed, as received (the one copy kept: the upload's notebook, and what a JSON error's exact
        #: place is read from); a notebook fed whole at once is kept by reference, not copied.
        self._seen: bytes | bytearray = bytearray()
        self._stack: list[list[Any]] = []   # [is_map, the pending key] per open container
        self.values = self.depth = self.cells = 0
        self.version: Any = None
        self.declared: str | None = None
        self.has_cells = False
        self.grade_ids: set[str] = set()
        sink = self._sink()
        next(sink)
        self._parser = ijson.basic_parse_coro(sink, use_float=True)
        self._errors: tuple[type[BaseException], ...] = (ijson.JSONError, ValueError, OverflowError)

    def feed(self, piece: bytes, last: bool = False) -> None:
        """The next bytes of the notebook (``last``: and nothing follows); NotebookError as soon as they pass a
        bound or break the JSON."""
        if not piece:
            return
        if self.size + len(piece) > self.bounds.max_bytes:
            raise _too_large(self.name, self.size + len(piece), self.bounds.max_bytes)
        begin = len(self._seen)
        if last and not self._seen:
            self._seen = piece                  # (the whole notebook: kept as it is, not copied)
        else:
            self._seen += piece
        body = piece
        if not begin and piece.startswith(b"\xef\xbb\xbf"):
            self._skip = begin = 3
            body = piece[3:]
        if self._blank and body and not body.isspace():
            self._blank = False
        view = memoryview(self._seen)
        try:
            for start in range(begin, len(self._seen), _PIECE):
                self._parsed = min(len(self._seen), start + _PIECE)
                self._parser.send(bytes(view[start:self._parsed]))
        except NotebookError:
            raise
        except self._errors as exc:         # (a number too long for an int: ValueError)
            raise self._invalid(exc, complete=last and self._parsed == len(self._seen)) from None
        finally:
            view.release()

    @property
    def size(self) -> int:
        """Bytes fed so far."""
        return len(self._seen)

    @property
    def data(self) -> bytes:
        """The bytes fed, as received."""
        return self._seen if isinstance(self._seen, bytes) else bytes(self._seen)

    def close(self) -> Shape:
        """The end of the notebook: its shape, or NotebookError (empty, cut short)."""
        if self._blank:
            raise NotebookError(f"{self.name}: empty file, not a notebook", said=say("notebook.empty"), kind="not_json")
        try:
            self._parser.close()
        except NotebookError:
            raise
        except self._errors as exc:
            self._parsed = len(self._seen)
            raise self._invalid(exc, complete=True) from None
        return Shape(self.version, self.cells, self.has_cells, self.declared, self.values, self.depth,
                     frozenset(self.grade_ids))

    def _sink(self) -> Any:
        """The parser's events, one per send: each value counted against the bounds, what the shape keeps noted."""
        bounds, name, stack, open_container = self.bounds, self.name, self._stack, self._open
        while True:
            event, value = yield
            if event == "map_key":
                stack[-1][1] = value
                self.values += 1
            elif event in ("end_map", "end_array"):
                stack.pop()
                continue
            else:
                self.values += 1
                where = tuple(k if is_map else "[]" for is_map, k in stack) if len(stack) <= 5 else ()
                if event in ("start_map", "start_array"):
                    open_container(event, where)
                elif event == "string" and where == _GRADE_ID:
                    self.grade_ids.add(value[:100])
                elif where == ("nbformat",) and event == "number":
                    self.version = int(value) if float(value).is_integer() else value
                elif where == _DECLARED and event == "string":
                    self.declared = value[:200]
            if self.values > bounds.values:
                raise _past(name, "notebook.too_many_values", "notebook_values", bounds.values, "JSON values")

    def _open(self, event: str, where: tuple[Any, ...]) -> None:
        """A map or an array begins at ``where``: a cell counted, the cells' list noted, the depth bounded."""
        bounds, name, stack = self.bounds, self.name, self._stack
        if where in _CELL_PATHS:
            self.cells += 1
            if self.cells > bounds.cells:
                raise _past(name, "notebook.too_many_cells", "notebook_cells", bounds.cells, "cells")
        elif where in (("cells",), ("worksheets",)) and event == "start_array":
            self.has_cells = True
        stack.append([event == "start_map", None])
        if len(stack) > self.depth:
            self.depth = len(stack)
            if self.depth > bounds.depth:
                raise _past(name, "notebook.too_deep", "notebook_depth", bounds.depth, "levels of nesting")

    def _invalid(self, exc: BaseException, complete: bool) -> NotebookError:
        """The NotebookError of bytes that are not JSON: where exactly, as Python's parser says it, on the bytes
        the look had (the error lies in them; a prefix already found within the bounds, so this costs no more
        than the look did)."""
        name, seen = self.name, bytes(self._seen[self._skip:self._parsed])     # (up to the piece it stopped in)
        try:
            seen.decode("utf-8")
        except UnicodeDecodeError as bad:
            if complete or bad.start < len(seen) - 4:          # (not a character cut at the end of a piece)
                return NotebookError(f"{name}: not UTF-8 text, not a notebook", said=say("notebook.not_utf8"),
                                    kind="not_json")
        try:
            json.loads(seen.decode("utf-8", "ignore"))
        except json.JSONDecodeError as precise:
            if complete or precise.pos < len(seen) - 1:        # (not merely where the bytes so far end)
                return NotebookError(f"{name}: invalid JSON at line {precise.lineno} column {precise.colno} "
                                     f"({precise.msg})", said=say("notebook.invalid_json", line=precise.lineno,
                                                                  column=precise.colno), kind="not_json")
        except (ValueError, RecursionError):
            pass
        why = " ".join(str(exc).split())[:120] or type(exc).__name__     # (yajl's messages span lines)
        return NotebookError(f"{name}: invalid JSON ({why})", said=say("notebook.invalid_json_at", detail=why),
                             kind="not_json")


def scan_notebook(data: bytes, bounds: Bounds, name: str = "notebook") -> Shape:
    """:class:`NotebookScanner` over a whole notebook's bytes: its shape, or NotebookError."""
    if len(data) > bounds.max_bytes:
        raise _too_large(name, len(data), bounds.max_bytes)
    scanner = NotebookScanner(bounds, name)
    scanner.feed(data, last=True)
    return scanner.close()


def assignments_of_cells(grade_ids: set[str] | frozenset[str], course: Course) -> set[str]:
    """The assignments whose exercises' solution cells these nbgrader grade_ids are."""
    from autograder.course.config import grade_id  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    by_exercise = {grade_id(e.id): a.id for a in course.assignments for e in a.exercises}
    return {by_exercise[g] for g in grade_ids if g in by_exercise}


def all_cells(nb: Any) -> list[dict[str, Any]]:
    """A parsed notebook's cells, nbformat 3's (in worksheets) too; anything that is not a cell left out."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):  # nbformat 3
        worksheets = nb.get("worksheets") if isinstance(nb, dict) else None
        cells = [c for ws in worksheets or [] if isinstance(ws, dict) for c in ws.get("cells") or []]
    return [c for c in cells if isinstance(c, dict)]


def said_in(nb: Any) -> tuple[str | None, set[str]]:
    """What a parsed notebook says of its assignment (:func:`notebook_claims` weighs it): the assignment the
    release wrote into its metadata (``metadata.autograder.assignment``), and its cells' nbgrader grade_ids."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    ag = meta.get("autograder") if isinstance(meta, dict) else None
    declared = ag["assignment"] if isinstance(ag, dict) and isinstance(ag.get("assignment"), str) else None
    return declared, {gid for gid in map(cell_grade_id, all_cells(nb)) if gid is not None}


def notebook_claims(declared: str | None, by_cells: set[str]) -> tuple[str | None, str]:
    """(assignment, how) from what a notebook says of itself, before any guess from names or definitions: the
    assignment the release wrote into its metadata, else the one assignment its cells' nbgrader ids belong to;
    (None, "") when it says neither. The one rule the grader, the service's upload and the self-check follow."""
    if declared:
        return declared, "notebook metadata"
    if len(by_cells) == 1:
        return next(iter(by_cells)), "nbgrader cell ids"
    return None, ""


def load_notebook(data: bytes, bounds: Bounds, name: str = "notebook") -> Any:
    """A submitted notebook's JSON, parsed only after :func:`scan_notebook` found it within ``bounds``
    (so the parse itself is bounded: at most ``bounds.values`` values, ``bounds.depth`` deep). The one
    place the grader parses a student's notebook bytes; NotebookError names the file and the reason."""
    scan_notebook(data, bounds, name)
    try:
        return json.loads(data.decode("utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})",
                            said=say("notebook.invalid_json", line=exc.lineno, column=exc.colno)) from None
    except (ValueError, RecursionError) as exc:
        raise NotebookError(f"{name}: invalid JSON ({str(exc)[:200]})",
                            said=say("notebook.invalid_json_at", detail=str(exc)[:120])) from None


def _too_large(name: str, size: int, limit: int) -> NotebookError:
    return NotebookError(f"{name}: {size / 2**20:.0f} MiB is more than the {limit / 2**20:.0f} MiB "
                         "a notebook may have (limits.notebook_mb)",
                         said=say("notebook.too_large", size=f"{size / 2**20:.0f}", limit=f"{limit / 2**20:.0f}"),
                         kind="too_large")


def _past(name: str, key: str, setting: str, limit: int, what: str) -> NotebookError:
    return NotebookError(f"{name}: more than {limit:,} {what} (limits.{setting}): not a notebook the grader reads",
                         said=say(key, limit=f"{limit:,}", setting=f"limits.{setting}"), kind="bound")


def skip_unused_schema_formats() -> None:
    """Spare a command's cold start the 1.5 s that ``import nbformat`` spends on a schema format it never
    checks: nbformat imports jsonschema, whose format checkers import ``rfc3987_syntax`` (when installed,
    as Jupyter installs it) only to check "iri" strings, which no notebook schema asks for. Blocked in this
    process, that import fails fast and jsonschema leaves those two formats unchecked; every notebook
    validates exactly as before. Called first by the commands that read notebooks (grade, gradescope-run,
    check).
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def parse_notebook(data: Any, name: str = "notebook") -> dict[str, Any]:
    """The notebook as a dict of cells, read as nbformat 4 (an nbformat 3 one converted by nbformat,
    which only then is imported: the grader reads nbformat 4 notebooks without it)."""
    if not isinstance(data, dict) or "nbformat" not in data:
        raise NotebookError(f"{name}: JSON but not a notebook (no nbformat field)", said=say("notebook.not_a_notebook"))
    major = data.get("nbformat")
    if not isinstance(major, int) or major < 3 or major > 4:
        raise NotebookError(f"{name}: unsupported nbformat {major!r} (expected 4, or 3 to convert)",
                            said=say("notebook.nbformat", version=repr(major)[:20]))
    if major == 3:
        if not isinstance(data.get("worksheets"), list):
            raise NotebookError(f"{name}: nbformat 3 without worksheets", said=say("notebook.broken"))
        import nbformat

        try:
            nb = nbformat.convert(nbformat.from_dict(data), 4)
        except Exception as exc:  # noqa: BLE001 - any conversion failure is a bad notebook
            raise NotebookError(f"{name}: nbformat 3 notebook could not be converted ({exc})",
                                said=say("notebook.broken")) from None
        nb.metadata["autograder_converted_from"] = 3
        return nb
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{name}: notebook has no list of cells", said=say("notebook.broken"))
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"{name}: cell {i} is not a cell (no cell_type)",
                                said=say("notebook.bad_cell", cell=i + 1))
    return data


def cell_source(cell: Any) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def cell_grade_id(cell: Any) -> str | None:
    meta = cell.get("metadata")
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return gid if isinstance(gid, str) else None


def code_cells(nb: dict[str, Any]) -> list[Cell]:
    """The notebook's code cells as executable Python, in order."""
    out: list[Cell] = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        code, skipped = to_python(source)
        out.append(Cell(index, cell_grade_id(cell), source, code, skipped))
    return out


def to_python(source: str) -> tuple[str, str | None]:
    """(plain Python, reason skipped or None) for one cell's source."""
    stripped = source.lstrip()
    if stripped.startswith("%%"):
        first, _, body = stripped.partition("\n")
        magic = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        if magic not in PASSTHROUGH_CELL_MAGICS:
            return "", f"cell magic %%{magic} is not run by the grader"
        source = body
    code = _already_python(source)
    if code is None:
        work = ipython_work(source)
        if work > IPYTHON_WORK_LIMIT:
            return "", say("notebook.ipython_too_costly", lines=ipython_lines(source)).en
        from IPython.core.inputtransformer2 import TransformerManager

        try:
            code = TransformerManager().transform_cell(source)
        except Exception:  # noqa: BLE001 - leave it to exec to report the syntax error
            code = source
    return _drop_check_calls(code), None


#: A line IPython's input transformer could act on in source that is already Python: prompts (``>>>``,
#: ``...``, ``In [1]:``, also inside strings, where its doctest heuristics look) and escapes.
_IPYTHON_LINE = re.compile(r"^[ \t]*(>>>|\.\.\.|In \[\d*\]:|[%!?])", re.MULTILINE)


#: IPython's token transforms read the whole cell again for each line they rewrite: the work grows as
#: (lines it may rewrite) x (lines of the cell), about 20 us each on this trusted side, before any cage or
#: time limit. A cell past this budget is neither rewritten nor run (a fraction of a second at most; an honest
#: cell, a ``%matplotlib inline`` among a few lines, costs a few dozen). Without it, 400 ``%a`` lines in a
#: 240 KiB cell held the grader for minutes.
IPYTHON_WORK_LIMIT = 20_000
#: The same budget for all of one submission's cells (a few seconds at most): many cells each under the
#: cell's budget cost no more than this either (:func:`autograder.grading.cells.submission_cells`).
IPYTHON_SUBMISSION_LIMIT = 200_000


#: A line IPython's token transforms may rewrite: an escape (``%magic``, ``!cmd``, ``?name``) at its start,
#: one assigned (``x = !ls``), or help asked at its end (``name?``; a comment's question mark is not).
#: Prompts are stripped line by line, once: they cost nothing like this.
_ESCAPE_LINE = re.compile(r"^[ \t]*[%!?]|=[ \t]*[%!]|^[^#\n]*\?[ \t]*$", re.MULTILINE)


def ipython_lines(source: str) -> int:
    return len(_ESCAPE_LINE.findall(source))


def needs_ipython(source: str) -> bool:
    """Whether :func:`to_python` hands ``source`` to IPython's transform (it is not plain Python)."""
    return _already_python(source) is None


def ipython_work(source: str) -> int:
    """How much IPython's transform would cost on ``source``, in its units (see IPYTHON_WORK_LIMIT)."""
    candidates = ipython_lines(source)
    return candidates * (source.count("\n") + 1) if candidates else 0


def _already_python(source: str) -> str | None:
    """What IPython's ``TransformerManager().transform_cell(source)`` returns, for a cell that is plain
    Python with no line IPython acts on (most cells); None for any other cell. Importing IPython takes
    0.7 s of a cold ``autograder grade``; for such a cell the transform only drops leading blank lines,
    dedents (whitespace-only lines become empty) and ends the text with a newline, done here the same
    way (tests/course/test_notebook.py compares both on every course notebook and on edge cases).
    """
    if _IPYTHON_LINE.search(source):
        return None
    try:
        parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not source.endswith("\n"):
        source += "\n"
    lines = source.splitlines(keepends=True)
    for i, text in enumerate(lines):          # IPython's leading_empty_lines
        if text and not text.isspace():
            lines = lines[i:]
            break
    return textwrap.dedent("".join(lines))    # IPython's leading_indent


def _drop_check_calls(code: str) -> str:
    """Replace top-level ``check(...)`` statements by ``pass`` (same line numbers)."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code     # exec reports it, as the cell's own error
    lines = code.split("\n")
    for node in tree.body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "check"):
            start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            lines[start] = indent + "pass"
            for i in range(start + 1, end + 1):
                lines[i] = ""
    return "\n".join(lines)
