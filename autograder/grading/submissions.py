"""Finding submissions: which notebooks, which student, which assignment.

``autograder grade`` takes a folder of notebooks in any nesting or a ``.zip``
downloaded from an LMS. Every ``.ipynb`` found becomes one :class:`Submission`.
Its student and assignment come from evidence, never from a silent guess:

* the path: a folder or file named for an assignment (``01_rnn_decay``,
  ``alice_01_rnn_decay.ipynb``), the folder that differs between students
  (``alice/``, nbgrader's ``submitted/alice/01_rnn_decay/``), or the file name
  of a flat export (``alice.ipynb``, Canvas' ``alice_123_456_01_rnn_decay.ipynb``);
* the notebook: ``metadata.autograder.assignment`` (written by the build), the
  nbgrader ``grade_id`` of its cells (``ex2_4`` belongs to one assignment only),
  and the exercise functions it defines;
* ``--assignment``, which scopes the batch and fills in what the path leaves open.

When the evidence disagrees or says nothing, the submission carries a
``problem`` (``ambiguous student: ...``, ``unknown assignment: ...``) and the
grader reports it as a named failure row. Several notebooks of one student for
one assignment: one is graded (see :func:`_pick_duplicates`), the others are
named in its ``evidence["also_found"]`` and in :attr:`Discovery.superseded`.

An LMS download's ids are kept as evidence: Canvas' user id
(``evidence["canvas_id"]``) and Moodle's participant id (``evidence["moodle_id"]``),
so the grade files an LMS imports can match students by them.

A zip is extracted into a private temporary folder: no absolute paths, no
``..``, no links, a cap on member count and on bytes actually written (a zip
bomb stops at the cap, whatever its headers claim).

Every name read here (folders, files, zip members, notebook metadata) is
student-controlled: it passes the text gate (:mod:`autograder.text`) as it is
read, and every step of one notebook fails into that notebook's ``problem``,
never out of :func:`discover`.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from autograder.config import Course, grade_id
from autograder.reports.lms import formats, id_keys
from autograder.errors import AutograderError, UnknownExercise
from autograder.messages import Msg, say
from autograder.text import file_stem, line, path_text
from autograder.pyast import parse as parse_python

#: Folder names that organize submissions but never name a student.
STRUCTURAL = {"submitted", "submissions", "submission", "autograded", "release", "source", "feedback",
              "nbgrader", "exchange", "inbound", "outbound", "export", "download", "downloads", "notebooks"}
#: Files that belong beside submissions and need no mention (nbgrader's submit time, and the secret
#: nbgrader submit writes next to it).
EXPECTED_FILES = {"timestamp.txt", "submission_secret.txt"}
#: Folders whose content is never a submission.
IGNORED_DIRS = {".ipynb_checkpoints", "__MACOSX", "__pycache__", ".git"}

#: Zip limits: bytes actually written, members, one member.
ZIP_MAX_BYTES = 2 * 2**30
ZIP_MAX_MEMBERS = 50_000
ZIP_MAX_MEMBER_BYTES = 256 * 2**20

_COPY_NOISE = re.compile(r"(?:[-_ ]*copy\d*|[-_ ]*\(\d+\)|[-_ ]+v\d+|[-_ ]*final)+$", re.I)
_SEPARATORS = re.compile(r"[\s\-.]+")


@dataclass
class Submission:
    """One notebook found, with what could be established about it."""

    path: Path                     # the file to grade (inside the temp folder for a zip)
    source: str                    # where it was found, relative to SUBMISSIONS (posix)
    sha256: str = ""
    student: str | None = None
    assignment: str | None = None
    problem: str | None = None     # why it cannot be graded, when it cannot (English, for the instructor)
    said: dict[str, str] | None = None  # the same for the student, {"zh", "en"} (autograder.messages)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The file-name stem of its outputs: ``<student>__<assignment>``, sanitized, under 160 bytes."""
        if self.problem:
            # Not enough identity for a clean name: name it for where it was found (the path as the file
            # system spells it: two names that clean to the same text are still two files).
            where = os.fsencode(self.path) + b"\0" + self.source.encode()
            tag = hashlib.sha256(where).hexdigest()[:8]
            return f"{safe_name(self.student or 'unknown')}__{self.assignment or 'unknown'}__{tag}"
        return f"{safe_name(self.student or 'unknown')}__{self.assignment}"

    def fail(self, problem: str, said: Msg | None = None) -> None:
        """This notebook cannot be graded: why, as one clean line (and in both languages for the student)."""
        self.problem = line(problem, 400)
        msg = said or say("submission.problem", detail=problem)
        self.said = {"zh": line(msg.zh, 400), "en": line(msg.en, 400)}


@dataclass
class Discovery:
    """Everything found under SUBMISSIONS."""

    submissions: list[Submission]
    ignored: list[str]             # files that are not notebooks (README.txt, a .py, a nested zip)
    out_of_scope: list[str]        # notebooks of another assignment than --assignment
    #: Notebooks not graded because the same student handed in another one for the same assignment
    #: (see :func:`_pick_duplicates`): their source -> the source graded instead.
    superseded: dict[str, str] = field(default_factory=dict)


def safe_name(text: str) -> str:
    """A file-name-safe form of a student's name (see :func:`autograder.text.file_stem`); distinct names
    stay distinct, and ``<name>__<assignment>.json`` stays within a file name's 255 bytes."""
    return file_stem(text, max_bytes=100)


# -- zip ---------------------------------------------------------------------------
class UnsafeArchive(AutograderError):
    """The zip cannot be extracted safely (too big, too many members, not a zip)."""


@dataclass
class Extraction:
    root: Path
    refused: dict[str, str]        # member name -> why it was not extracted


def extract_zip(archive: Path, dest: Path, *, max_bytes: int = ZIP_MAX_BYTES,
                max_members: int = ZIP_MAX_MEMBERS, max_member_bytes: int = ZIP_MAX_MEMBER_BYTES) -> Extraction:
    """Extract ``archive`` under ``dest`` member by member, refusing anything unsafe.

    Refused members (absolute paths, ``..``, links, devices, oversized) are
    listed with the reason; a notebook among them still gets a failure row.
    """
    refused: dict[str, str] = {}
    written = 0
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeArchive(f"{archive}: not a readable zip ({exc})") from None
    with zf:
        members = zf.infolist()
        if len(members) > max_members:
            raise UnsafeArchive(f"{archive}: {len(members)} members, more than the {max_members} allowed")
        root = dest.resolve()
        for info in members:
            name = info.filename
            reason = _unsafe_member(info)
            if reason is None:
                try:
                    target = (root / name).resolve()
                    if not target.is_relative_to(root):
                        reason = "path leaves the extraction folder"
                    elif info.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                except (OSError, ValueError) as exc:
                    # A file and a folder of the same name, a name part over 255 bytes, ...
                    reason = f"cannot be extracted ({_os_reason(exc)})"
            if reason is not None:
                refused[name] = reason
                continue
            budget = min(max_member_bytes, max_bytes - written)
            try:
                n = _copy_capped(zf, info, target, budget)
            except _TooBig:
                target.unlink(missing_ok=True)
                if written >= max_bytes or budget < max_member_bytes:
                    raise UnsafeArchive(f"{archive}: more than {max_bytes / 2**20:.0f} MiB once extracted",
                                        hint="unpack it yourself and grade the folder") from None
                refused[name] = f"larger than {max_member_bytes / 2**20:.0f} MiB once extracted"
                continue
            except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, ValueError, zlib.error) as exc:
                # A corrupt or encrypted member: the notebook gets a row, the rest continues.
                with contextlib.suppress(OSError):
                    target.unlink(missing_ok=True)
                refused[name] = f"cannot be extracted ({_os_reason(exc)})"
                continue
            written += n
            _keep_time(target, info)
    return Extraction(root, refused)


def _keep_time(target: Path, info: zipfile.ZipInfo) -> None:
    """Give the file its member's modification time (the duplicate rule compares them), not the
    time of extraction; a time the platform cannot represent leaves the file as it is."""
    with contextlib.suppress(OverflowError, ValueError, OSError):
        stamp = time.mktime((*info.date_time, 0, 0, -1))
        os.utime(target, (stamp, stamp), follow_symlinks=False)


class _TooBig(Exception):
    pass


def _os_reason(exc: BaseException) -> str:
    """Why, without the path (the member's name is reported beside it already)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def _unsafe_member(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if "\x00" in name:
        return "name contains a NUL byte"
    posix = name.replace("\\", "/")
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        return "absolute path"
    if any(part == ".." for part in PurePosixPath(posix).parts):
        return "path with '..'"
    # Unix file type in the high bits of external_attr; 0 (no type) is what most zip writers store.
    kind = stat.S_IFMT((info.external_attr >> 16) & 0xFFFF)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "a link or special file"
    return None


def _copy_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Stream one member to ``target``; raise _TooBig past ``budget`` bytes (never trust the header)."""
    n = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, zf.open(info) as src:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > budget:
                raise _TooBig()
            out.write(chunk)
    return n


@contextlib.contextmanager
def opened(path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """Yield (folder to search, refused zip members) for a folder or a zip; clean up after."""
    path = Path(path)
    if path.is_dir():
        yield path, {}
        return
    if not path.exists():
        raise AutograderError(f"{path}: no such file or folder")
    if not zipfile.is_zipfile(path):
        raise AutograderError(f"{path}: neither a folder nor a zip archive",
                              hint="pass a folder of notebooks or the .zip your LMS exported")
    tmp = Path(tempfile.mkdtemp(prefix="autograder-zip-"))
    os.chmod(tmp, 0o700)  # private: the sandbox worker must not browse other submissions
    try:
        extraction = extract_zip(path, tmp)
        yield tmp, extraction.refused
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- evidence ------------------------------------------------------------------------
def _norm(text: str) -> str:
    return _SEPARATORS.sub("_", unicodedata.normalize("NFC", text).lower())


def _assignment_tokens(course: Course) -> list[tuple[re.Pattern[str], str]]:
    out = []
    for a in course.assignments:
        for token in (a.id, a.module):
            out.append((re.compile(rf"(?<![0-9a-z]){re.escape(token)}(?![0-9a-z])"), a.id))
    return out


def assignments_named(text: str, course: Course) -> set[str]:
    """Assignment IDs named in a folder or file name (``01_rnn_decay``, ``alice-rnn-decay``)."""
    norm = _norm(text)
    return {aid for pattern, aid in _assignment_tokens(course) if pattern.search(norm)}


def _strip_assignment(stem: str, course: Course) -> str:
    norm = _norm(stem)
    for pattern, _ in sorted(_assignment_tokens(course), key=lambda p: -len(p[0].pattern)):
        norm = pattern.sub(" ", norm)
    residue = _COPY_NOISE.sub("", norm.strip(" _"))
    return re.sub(r"[\s_]+", "_", residue).strip(" _")


def _student_from_dir(name: str) -> tuple[str, dict[str, str]]:
    """(student, LMS ids) of a folder, as an LMS format names it (Moodle's ``Ada Lovelace_12345_
    assignsubmission_file_``: ``Ada Lovelace``, ``{"moodle_id": "12345"}``), else the folder's name."""
    for lms in formats():
        found = lms.from_folder(name) if lms.from_folder is not None else None
        if found is not None:
            return found
    return name, {}


def _student_from_stem(stem: str, course: Course) -> tuple[str | None, dict[str, str]]:
    """(student, LMS ids) of a file name, as an LMS format names it (Canvas' ``alicesmith_12345_67890_...``:
    ``alicesmith``, ``{"canvas_id": "12345"}``), else what is left of the name without the assignment."""
    for lms in formats():
        found = lms.from_file(stem) if lms.from_file is not None else None
        if found is not None:
            return found
    return _plain_student_from_stem(stem, course), {}


def _plain_student_from_stem(stem: str, course: Course) -> str | None:
    residue = _strip_assignment(stem, course)
    if not residue:
        return None
    if residue == _norm(stem).strip(" _"):
        return _COPY_NOISE.sub("", stem).strip() or None  # keep the student's own spelling
    return residue


@dataclass
class NotebookEvidence:
    """What a notebook says about itself (read leniently; None fields when unreadable)."""

    readable: bool
    declared: str | None = None          # metadata.autograder.assignment
    by_grade_id: set[str] = field(default_factory=set)
    by_function: dict[str, int] = field(default_factory=dict)


def notebook_evidence(data: bytes, course: Course) -> NotebookEvidence:
    """Assignment evidence inside a notebook, without executing anything; never raises.

    Cells over ``limits.cell_kb`` are not parsed (their function definitions are
    looked for on their first lines only).
    """
    try:
        return _notebook_evidence(data, course, int(course.limits.cell_kb * 1024))
    except Exception:  # noqa: BLE001 - RecursionError, MemoryError...: this notebook says nothing
        return NotebookEvidence(False)


def _notebook_evidence(data: bytes, course: Course, cell_bytes: int) -> NotebookEvidence:
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return NotebookEvidence(False)
    if not isinstance(nb, dict):
        return NotebookEvidence(False)
    ev = NotebookEvidence(True)
    meta = nb.get("metadata")
    if isinstance(meta, dict):
        ag = meta.get("autograder")
        if isinstance(ag, dict) and isinstance(ag.get("assignment"), str):
            ev.declared = line(ag["assignment"], 80)
    cells = nb.get("cells")
    if not isinstance(cells, list):  # nbformat 3
        cells = [c for ws in nb.get("worksheets") or [] if isinstance(ws, dict)
                 for c in ws.get("cells") or []]
    by_exercise = {grade_id(e.id): a.id for a in course.assignments for e in a.exercises}
    functions = {e.function: a.id for a in course.assignments for e in a.exercises}
    defined: set[str] = set()
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        cmeta = cell.get("metadata")
        nbg = cmeta.get("nbgrader") if isinstance(cmeta, dict) else None
        gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
        if isinstance(gid, str) and gid in by_exercise:
            ev.by_grade_id.add(by_exercise[gid])
        if cell.get("cell_type") == "code":
            src = cell.get("source", cell.get("input", ""))
            text = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else \
                src if isinstance(src, str) else ""
            defined |= _defined_names(text) if len(text) <= cell_bytes else _defined_by_scan(text[:cell_bytes])
    for name in defined & functions.keys():
        ev.by_function[functions[name]] = ev.by_function.get(functions[name], 0) + 1
    return ev


def _defined_names(code: str) -> set[str]:
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Magics, a half-written cell, one absurdly nested expression: a plain scan of def/class lines.
        return _defined_by_scan(code)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _defined_by_scan(code: str) -> set[str]:
    return set(re.findall(r"^[ \t]*(?:def|class)[ \t]+([A-Za-z_]\w*)", code, flags=re.M))


def _notebook_says(ev: NotebookEvidence) -> tuple[str | None, str]:
    """(assignment, how) from the notebook alone; (None, why) when it says nothing clear."""
    if ev.declared:
        return ev.declared, "notebook metadata"
    if len(ev.by_grade_id) == 1:
        return next(iter(ev.by_grade_id)), "nbgrader cell ids"
    if ev.by_function:
        best = max(ev.by_function.values())
        top = sorted(a for a, n in ev.by_function.items() if n == best)
        if len(top) == 1 and len(ev.by_grade_id) <= 1:
            return top[0], "functions defined"
    return None, ""


# -- discovery -------------------------------------------------------------------------
def find_notebooks(root: Path) -> tuple[list[Path], list[str]]:
    """(notebook files, other files) under ``root``, sorted, links not followed."""
    notebooks: list[Path] = []
    others: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = path_text(p.relative_to(root).as_posix())
            if name.startswith(".") or name in EXPECTED_FILES:
                continue
            if p.is_symlink():
                others.append(f"{rel} (a link, not followed)")
            elif name.lower().endswith(".ipynb"):
                notebooks.append(p)
            else:
                others.append(rel)
    return notebooks, others


def discover(root: Path, course: Course, *, assignment: str | None = None,
             refused: dict[str, str] | None = None, around: tuple[str, ...] = (),
             student: str | None = None) -> Discovery:
    """Every notebook under ``root`` with its student and assignment, or the reason it has none.

    ``around``: the names of the folders that hold ``root`` and ``root`` itself (outermost first), when
    ``root`` is a folder the user named (not a zip's extraction): one student's folder graded alone
    (``autograder grade subs/s04``) names its student that way. ``student``: only that student's
    notebooks are in scope (``--student``); the others are left as they are, never retired.
    """
    if assignment is not None:
        try:
            course.assignment(assignment)
        except UnknownExercise as exc:
            known = ", ".join(a.id for a in course.assignments)
            raise UnknownExercise(f"--assignment {assignment}: {exc.message}",
                                  hint=exc.hint or f"the assignments are {known}") from None
    root = Path(root)
    paths, others = find_notebooks(root)
    max_bytes = int(course.limits.notebook_mb * 2**20)
    subs: list[Submission] = []
    for p in paths:
        # The name as the gate cleans it: valid UTF-8 (an undecodable folder name too), no control
        # characters, bounded. The path itself stays as the file system spells it.
        source = path_text(p.relative_to(root).as_posix())
        sub = Submission(p, source, hashlib.sha256(source.encode()).hexdigest())
        try:
            sub.sha256, data = _read(p, max_bytes)
        except OSError as exc:
            sub.fail(f"unreadable: {_os_reason(exc)}", say("submission.unreadable", detail=_os_reason(exc)))
            data = b""
        sub.evidence["notebook"] = notebook_evidence(data, course)
        subs.append(sub)
    for name, why in sorted((refused or {}).items()):
        name = path_text(name)
        if name.lower().endswith(".ipynb"):
            sub = Submission(root / "(refused)", name, hashlib.sha256(name.encode()).hexdigest())
            sub.fail(f"not extracted from the zip: {why}", say("submission.not_extracted", detail=why))
            subs.append(sub)
        else:
            others.append(f"{name} (refused: {line(why, 200)})")

    prefix = _common_dirs([PurePosixPath(s.source).parts[:-1] for s in subs if not s.problem])
    out_of_scope: list[str] = []
    kept: list[Submission] = []
    for s in subs:
        if s.problem is None:
            try:
                _identify(s, prefix, course, assignment, around)
            except Exception as exc:  # noqa: BLE001 - one odd name must not stop the discovery
                s.fail(f"could not be identified ({type(exc).__name__})",
                       say("submission.unidentified", kind=type(exc).__name__))
        if s.problem == "out of scope" or (student is not None and s.student != student):
            out_of_scope.append(s.source)
            continue
        kept.append(s)
    kept, superseded = _pick_duplicates(kept, course)
    return Discovery(kept, others, out_of_scope, superseded)


def _read(path: Path, max_bytes: int) -> tuple[str, bytes]:
    """(sha256 of the file, its bytes when small enough to be a notebook worth reading, else b"")."""
    digest = hashlib.sha256()
    keep = path.stat().st_size <= max_bytes
    chunks = []
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            if keep:
                chunks.append(chunk)
    return digest.hexdigest(), b"".join(chunks)


def _common_dirs(dirs: list[tuple[str, ...]]) -> tuple[str, ...]:
    if not dirs:
        return ()
    first = dirs[0]
    n = 0
    while n < len(first) and all(len(d) > n and d[n] == first[n] for d in dirs):
        n += 1
    return first[:n]


def _identify(s: Submission, prefix: tuple[str, ...], course: Course, wanted: str | None,
              around: tuple[str, ...] = ()) -> None:
    parts = PurePosixPath(s.source).parts
    dirs, stem = parts[:-1], PurePosixPath(parts[-1]).stem
    student, student_problem, ids = _student(dirs, stem, prefix, course, s.source, around)
    s.student = line(student, 200) if student is not None else None
    s.evidence.update(ids)
    s.assignment, assignment_problem, how = _assignment(dirs, stem, s.evidence["notebook"], course, wanted)
    s.evidence["assignment"] = how
    problem = assignment_problem or student_problem
    if problem is None or problem == "out of scope":
        s.problem = problem
    else:
        s.fail(*problem)


def _assignment(dirs: tuple[str, ...], stem: str, ev: NotebookEvidence, course: Course,
                wanted: str | None) -> tuple[str | None, Any, str]:
    """(assignment, problem, how it was established): the path, then the notebook, then --assignment."""
    by_path: set[str] = set()
    for part in (*dirs, stem):
        by_path |= assignments_named(part, course)
    said, how = _notebook_says(ev)
    known = {a.id for a in course.assignments}
    if said is not None and said not in known:
        return None, (f"unknown assignment: the notebook says {said!r}, course.yml has no such assignment",
                      say("submission.unknown_assignment_said", said=repr(said))), how
    if len(by_path) > 1:
        if said not in by_path:
            names = ", ".join(sorted(by_path))
            return None, (f"ambiguous assignment: the path names {names}",
                          say("submission.ambiguous_assignment", names=names)), "path"
        by_path = {said}
    path_says = next(iter(by_path), None)
    if path_says is not None:
        if wanted is not None and path_says != wanted:
            return path_says, "out of scope", "path"
        if ev.declared is not None and ev.declared != path_says:
            return None, (f"ambiguous assignment: the path says {path_says}, the notebook metadata says "
                          f"{ev.declared}", say("submission.assignment_disagrees", path=path_says,
                                                declared=ev.declared)), "path"
        return path_says, None, "path"
    if wanted is not None:
        if said is not None and said != wanted:
            return wanted, (f"wrong assignment: the notebook is {said} ({how}), expected {wanted}",
                            say("submission.wrong_assignment", said=said, wanted=wanted)), how
        return wanted, None, "--assignment"
    if said is not None:
        return said, None, how
    why = "the notebook names none" if ev.readable else "the notebook is unreadable"
    return None, (f"unknown assignment: the path names none and {why} (pass --assignment)",
                  say("submission.unknown_assignment")), ""


def _student(dirs: tuple[str, ...], stem: str, prefix: tuple[str, ...], course: Course,
             source: str, around: tuple[str, ...] = ()) -> tuple[str | None, Any, dict[str, str]]:
    """(student, problem, LMS ids): the one folder that tells students apart, else the file name, else
    the nearest folder around them (inside SUBMISSIONS, then SUBMISSIONS itself and the one holding it).

    The LMS ids (``canvas_id``, ``moodle_id``) come from the very name that gave the student.
    """
    def names(folders: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
        found = [_student_from_dir(d) for d in folders
                 if _norm(d) not in STRUCTURAL and not assignments_named(d, course)]
        return list({name: (name, ids) for name, ids in found}.values())

    candidates = names(dirs[len(prefix):])
    if len(candidates) > 1:
        listed = ", ".join(name for name, _ in candidates)
        return None, (f"ambiguous student: several folders of {source} could name one ({listed})",
                      say("submission.ambiguous_student", names=listed)), {}
    if candidates:
        return candidates[0][0], None, candidates[0][1]
    student, ids = _student_from_stem(stem, course)
    if student is None:
        # A lone submission (or one student's folder): the folder around it is the only name there is.
        outer = names(prefix) or names(around)
        student, ids = outer[-1] if outer else (None, {})
    if student is None:
        return None, (f"unknown student: nothing in {source} names one", say("submission.unknown_student")), {}
    return student, None, ids


def _distinguish_namesakes(subs: list[Submission]) -> None:
    """Two students of one LMS download with the same name (two ``alicesmith`` in Canvas, two
    ``Ada Lovelace`` in Moodle) are two people: their LMS ids differ. Each gets its id appended
    (``alicesmith_12345``), so neither is taken for the other's second notebook."""
    ids: dict[str, set[tuple[str, str]]] = {}
    for s in subs:
        if s.problem is None and s.student:
            for kind in id_keys():
                if kind in s.evidence:
                    ids.setdefault(safe_name(s.student), set()).add((kind, s.evidence[kind]))
    for s in subs:
        if s.problem is None and s.student and len(ids.get(safe_name(s.student), ())) > 1:
            number = next((s.evidence[kind] for kind in id_keys() if kind in s.evidence), None)
            if number is not None:
                s.student = line(f"{s.student}_{number}", 200)


def _canonical(s: Submission, notebook: str) -> bool:
    """The file bears the assignment's notebook name (``02_qkv_attention.ipynb``), alone or after an
    LMS prefix (``alicesmith_12345_67890_02_qkv_attention.ipynb``)."""
    name, want = unicodedata.normalize("NFC", PurePosixPath(s.source).name).casefold(), notebook.casefold()
    return name == want or name.endswith("_" + want)


def _origin(s: Submission) -> tuple[str, ...] | bytes:
    """What names the student on disk: the LMS id when the name carried one, else the folder the
    notebook is in (the file system's bytes: two folders whose names clean to the same text differ)."""
    for kind in id_keys():
        if kind in s.evidence:
            return (kind, s.evidence[kind])
    return os.fsencode(s.path.parent)


def _mtime_ns(s: Submission) -> int:
    try:
        return os.stat(s.path, follow_symlinks=False).st_mtime_ns
    except OSError:
        return 0


def _pick_duplicates(subs: list[Submission], course: Course) -> tuple[list[Submission], dict[str, str]]:
    """One notebook per student and assignment: (the submissions kept, {source not graded: source graded}).

    When a student handed in several notebooks for one assignment (``02_qkv_attention.ipynb`` and
    JupyterLab's ``02_qkv_attention-Copy1.ipynb``), the one graded is, in this order:

    1. the one named as the assignment's notebook (``course.yml``'s ``notebook``, also after an LMS
       prefix such as Canvas' ``alicesmith_12345_67890_``);
    2. the newest file (modification time; a zip keeps its members' times);
    3. the first by path.

    It records the others in ``evidence["also_found"]`` (and why it won in ``evidence["chosen_by"]``);
    the others get no row of their own. Notebooks of one name from different folders (whose names
    differ on disk but clean to the same text) or different LMS ids are not one student's: each
    becomes an ``ambiguous student`` row instead.
    """
    _distinguish_namesakes(subs)
    groups: dict[tuple[str, str], list[Submission]] = {}
    for s in subs:
        if s.problem is None and s.student and s.assignment:
            groups.setdefault((safe_name(s.student), s.assignment), []).append(s)
    superseded: dict[str, str] = {}
    dropped: set[int] = set()
    for (student, assignment), group in groups.items():
        if len(group) < 2:
            continue
        if len({_origin(g) for g in group}) > 1:
            # Different folders (or ids) give the same name: different students, or one we cannot tell.
            where = ", ".join(g.source for g in group)
            for g in group:
                g.fail(f"ambiguous student: {len(group)} notebooks for {student}/{assignment} come from "
                       f"different folders ({where})", say("submission.namesakes", count=len(group), where=where))
            continue
        try:
            notebook = course.assignment(assignment).notebook
        except AutograderError:
            notebook = f"{assignment}.ipynb"
        ranked = sorted(((not _canonical(g, notebook), -_mtime_ns(g), g.source, g) for g in group),
                        key=lambda t: t[:3])
        chosen, runner_up = ranked[0], ranked[1]
        winner = chosen[3]
        if chosen[0] != runner_up[0]:
            winner.evidence["chosen_by"] = f"named {notebook}"
        elif chosen[1] != runner_up[1]:
            winner.evidence["chosen_by"] = "the newest file"
        else:
            winner.evidence["chosen_by"] = "the first by path (same modification time)"
        winner.evidence["also_found"] = line(", ".join(t[3].source for t in ranked[1:]), 1000)
        for t in ranked[1:]:
            superseded[t[3].source] = winner.source
            dropped.add(id(t[3]))
    return [s for s in subs if id(s) not in dropped], superseded
