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

This module weighs the evidence; reading it is :mod:`autograder.grading.evidence`'s
job (what a name or a notebook says), and opening a zip is
:mod:`autograder.grading.archives`' (extracted safely into a private temporary
folder; its refused members come here as ``refused`` and a notebook among them
gets a failure row).

Every name read here (folders, files, zip members, notebook metadata) is
student-controlled: it passes the text gate (:mod:`autograder.core.text`) as it is
read, and every step of one notebook fails into that notebook's ``problem``,
never out of :func:`discover`.
"""
from __future__ import annotations

import hashlib
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from autograder.course.config import Course
from autograder.core.errors import AutograderError, UnknownExercise
from autograder.grading import times as T
from autograder.grading.archives import os_reason
from autograder.grading.deadlines import submitted_json
from autograder.grading.evidence import (
    NotebookEvidence,
    assignments_named,
    normalized_name,
    notebook_evidence,
    notebook_says,
    student_from_dir,
    student_from_stem,
)
from autograder.core.messages import Msg, say
from autograder.course.notebook import notebook_claims
from autograder.reports.lms import id_keys
from autograder.core.text import file_stem, line, path_text

#: Folder names that organize submissions but never name a student.
STRUCTURAL = {"submitted", "submissions", "submission", "autograded", "release", "source", "feedback",
              "nbgrader", "exchange", "inbound", "outbound", "export", "download", "downloads", "notebooks"}
#: Files that belong beside submissions and need no mention (nbgrader's submit time, and the secret
#: nbgrader submit writes next to it).
EXPECTED_FILES = {"timestamp.txt", "submission_secret.txt"}
#: Folders whose content is never a submission.
IGNORED_DIRS = {".ipynb_checkpoints", "__MACOSX", "__pycache__", ".git"}


@dataclass
class Submission:
    """One notebook found, with what could be established about it."""

    path: Path                     # the file to grade (inside the temp folder for a zip)
    source: str                    # where it was found, relative to SUBMISSIONS (posix)
    sha256: str = ""
    student: str | None = None
    assignment: str | None = None
    problem: str | None = None     # why it cannot be graded, when it cannot (English, for the instructor)
    said: dict[str, str] | None = None  # the same for the student, {"zh", "en"} (autograder.core.messages)
    evidence: dict[str, Any] = field(default_factory=dict)
    #: When it came and by whose word (autograder.grading.deadlines.submitted_json); None: not looked for.
    submitted: dict[str, Any] | None = None

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
    """A file-name-safe form of a student's name (see :func:`autograder.core.text.file_stem`); distinct names
    stay distinct, and ``<name>__<assignment>.json`` stays within a file name's 255 bytes."""
    return file_stem(text, max_bytes=100)


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
             student: str | None = None, times: dict[tuple[str, str | None], Any] | None = None,
             files_trusted: bool = True) -> Discovery:
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
    subs = _read_notebooks(root, paths, course)
    subs += _refused_notebooks(root, refused or {}, others)

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
    for s in kept:
        s.submitted = _submitted_at(s, times or {}, files_trusted)
    kept, superseded = _pick_duplicates(kept, course)
    return Discovery(kept, others, out_of_scope, superseded)


def _read_notebooks(root: Path, paths: list[Path], course: Course) -> list[Submission]:
    """A Submission for each notebook file found: its hash and what the notebook says (unreadable: a failure)."""
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
            sub.fail(f"unreadable: {os_reason(exc)}", say("submission.unreadable", detail=os_reason(exc)))
            data = b""
        sub.evidence["notebook"] = notebook_evidence(data, course)
        subs.append(sub)
    return subs


def _refused_notebooks(root: Path, refused: dict[str, str], others: list[str]) -> list[Submission]:
    """A failure for each notebook the zip's extraction refused; any other refused member is added to ``others``."""
    subs: list[Submission] = []
    for name, why in sorted(refused.items()):
        name = path_text(name)
        if name.lower().endswith(".ipynb"):
            sub = Submission(root / "(refused)", name, hashlib.sha256(name.encode()).hexdigest())
            sub.fail(f"not extracted from the zip: {why}", say("submission.not_extracted", detail=why))
            subs.append(sub)
        else:
            others.append(f"{name} (refused: {line(why, 200)})")
    return subs


def _submitted_at(s: Submission, times: dict[tuple[str, str | None], Any], files_trusted: bool) -> dict[str, Any]:
    """When the submission came, from the most trusted source that says: the instructor's times CSV, then
    nbgrader's timestamp.txt beside it (on disk only), then a Canvas file name's late marker. Never a file's
    or a zip member's time: the student sets those."""
    listed = [times[k] for k in ((s.student, s.assignment), (s.student, None)) if s.student and k in times]
    stamp = T.read_nbgrader_timestamp(s.path.parent / "timestamp.txt") if files_trusted else T.NONE
    return submitted_json(T.best(*listed, stamp, T.canvas_late_marker(PurePosixPath(s.source).name)))


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
    said, how = notebook_says(ev)
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
        return _path_assignment(path_says, ev, wanted)
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


def _path_assignment(path_says: str, ev: NotebookEvidence, wanted: str | None) -> tuple[str | None, Any, str]:
    """(assignment, problem, how) where the path names it: out of --assignment's scope, or not the notebook's own."""
    if wanted is not None and path_says != wanted:
        return path_says, "out of scope", "path"
    # What the notebook says of itself (its metadata, its cells' ids) wins over a name: a notebook of
    # another assignment is named as such, never graded as this one (to 0, "function missing").
    claimed, claimed_how = notebook_claims(ev.declared, ev.by_grade_id)
    if claimed is not None and claimed != path_says:
        return path_says, (f"wrong assignment: the notebook is {claimed} ({claimed_how}), not {path_says}",
                           say("submission.wrong_assignment", said=claimed, wanted=path_says)), claimed_how
    return path_says, None, "path"


def _student(dirs: tuple[str, ...], stem: str, prefix: tuple[str, ...], course: Course,
             source: str, around: tuple[str, ...] = ()) -> tuple[str | None, Any, dict[str, str]]:
    """(student, problem, LMS ids): the one folder that tells students apart, else the file name, else
    the nearest folder around them (inside SUBMISSIONS, then SUBMISSIONS itself and the one holding it).

    The LMS ids (``canvas_id``, ``moodle_id``) come from the very name that gave the student.
    """
    def names(folders: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
        found = [student_from_dir(d) for d in folders
                 if normalized_name(d) not in STRUCTURAL and not assignments_named(d, course)]
        return list({name: (name, ids) for name, ids in found}.values())

    candidates = names(dirs[len(prefix):])
    if len(candidates) > 1:
        listed = ", ".join(name for name, _ in candidates)
        return None, (f"ambiguous student: several folders of {source} could name one ({listed})",
                      say("submission.ambiguous_student", names=listed)), {}
    if candidates:
        return candidates[0][0], None, candidates[0][1]
    student, ids = student_from_stem(stem, course)
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
        winner, *others = _ranked(group, notebook)
        for other in others:
            superseded[other.source] = winner.source
            dropped.add(id(other))
    return [s for s in subs if id(s) not in dropped], superseded


def _ranked(group: list[Submission], notebook: str) -> list[Submission]:
    """One student's notebooks for an assignment, the one to grade first; it says why it won and what else was found."""
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
    return [t[3] for t in ranked]
