"""``autograder build``: derive release/, solutions/ and the student bundle from source/.

* ``release/<a>/<a>.ipynb``: the source notebook run through nbgrader's own
  generate_assignment preprocessors (:data:`RELEASE_PREPROCESSORS`); the solution
  regions become a stub in course.yml's language (:data:`STUBS`), with ``language: zh``
  ``raise NotImplementedError("请完成练习 2.4")``.
  ``nbgrader_config.py`` hands nbgrader the same pipeline, so ``nbgrader
  generate_assignment`` writes the very same bytes.
* ``solutions/<module>.py``: the imports cell and every solution cell, marker lines
  removed. Each reference solution lives only in its source notebook.
* ``dist/fingerprints.json`` (the self-check data; the bundle carries it as ``autograder/data/fingerprints.json``).
* ``dist/student-bundle.zip``: release notebooks + the public part of the package
  + a student course.yml without the grading seed (what it holds, and what it refuses to
  hold: :mod:`autograder.authoring.bundle`).
* ``dist/student-course/``: the bundle's course data as a folder (course.yml without the seed,
  public checks, fingerprints), for single-user servers that run the instructor's kit (JupyterHub:
  ``AUTOGRADER_COURSE`` points at it).
* ``dist/student-jupyter/``: those servers' Jupyter configuration, nbgrader's staff menus and formgrader off
  (JupyterHub: ``JUPYTER_CONFIG_PATH`` points at it).

release/ and solutions/ are committed: built in memory first, deterministically
(no timestamps, sorted entries, no computed float), so ``--check`` compares them
with the committed files byte for byte on any machine. The fingerprints hold
outputs of torch kernels, whose last bits depend on the CPU (and the bundle
carries them): they are build outputs, written by every build and never
committed nor compared.
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path, PurePosixPath

from nbconvert.exporters import NotebookExporter
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from autograder.core.atomic import atomic_write_bytes
from autograder.authoring.bundle import (
    BUNDLE,
    FINGERPRINTS,
    STUDENT_COURSE_DIR,
    STUDENT_JUPYTER_DIR,
    bundle_files,
    bundle_inputs_missing,
    student_course,
    student_course_files,
    student_jupyter_files,
    zip_bytes,
)
from autograder.authoring.notebooks import (  # noqa: F401
    BEGIN,
    END,
    NBGRADER_PREPROCESSORS,
    RELEASE_PREPROCESSORS,
    STUBS,
    Derived,
    Source,
    course_stub,
    read_source,
    strip_markers,
    stub_for,
    sync_test_cells,
)
from autograder.catalog import COURSE_FILES
from autograder.course.config import Course, load_course
from autograder.course.files import course_root
from autograder.core.errors import BuildError, StaleError
from autograder.course.written import TEXT_STUBS
from autograder.grading.references import module_name


#: What nbgrader leaves out when it copies an assignment folder (checkpoints, caches).
IGNORED: list[str] = CourseDirectory.class_traits()["ignore"].default()



# -- deriving the files ------------------------------------------------------------------
def release_notebook(source: Source, language: str, assignment: str | None = None) -> bytes:
    """The student notebook, through nbgrader's preprocessors and nbconvert's writer; ``language``
    (course.yml's) picks the stub text. ``assignment``: its id, which the pipeline's last step writes into the
    notebook's metadata (:class:`autograder.authoring.notebooks.AssignmentMetadata`)."""
    stub = stub_for(language)
    exporter = NotebookExporter(config=Config({"Exporter": {"default_preprocessors": []},
                                               "ExerciseStubs": {"code_stub": {"python": stub},
                                                                 "text_stub": TEXT_STUBS[language]}}))
    for preprocessor in RELEASE_PREPROCESSORS:
        exporter.register_preprocessor(preprocessor)
    name = PurePosixPath(source.path).stem
    try:
        output, _ = exporter.from_notebook_node(source.notebook, resources={"unique_key": name,
                                                                            "assignment": assignment})
    except Exception as exc:  # noqa: BLE001 - nbgrader raises RuntimeError, ValidationError...: each is a build error
        raise BuildError(f"{source.path}: nbgrader could not release it ({type(exc).__name__}: {exc})") from None
    return output.encode("utf-8")


def solutions_module(source: Source, module: str) -> bytes:
    """solutions/<module>.py: the imports cell and the solution cells, in notebook order."""
    parts = [f"# GENERATED from {source.path} by autograder build; do not edit.\n"
             f'"""Reference solutions of {PurePosixPath(source.path).stem}: hidden, never shipped to students."""\n'
             + source.imports.strip()]
    parts += [code.strip() for _gid, code in source.solutions]
    text = "\n\n\n".join(parts) + "\n"
    try:
        compile(text, f"solutions/{module}.py", "exec")
    except SyntaxError as exc:
        raise BuildError(f"{source.path}: solutions/{module}.py would not compile "
                         f"(line {exc.lineno}: {exc.msg})") from None
    return text.encode("utf-8")


SOLUTIONS_INIT = (b"# GENERATED by autograder build; do not edit.\n"
                  b'"""Hidden reference solutions, derived from source/: never shipped to students."""\n')


def _extra_files(root: Path, assignment_id: str) -> dict[str, bytes]:
    """Other files of source/<a>/ (data, images): nbgrader copies them to release/<a>/ too. The
    course's code (checks.py, hidden.py, mistakes.py) is the grader's, never the release's."""
    folder = root / "source" / assignment_id
    out: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if (not path.is_file() or rel.as_posix() == f"{assignment_id}.ipynb" or rel.as_posix() in COURSE_FILES
                or _ignored(rel)):
            continue
        out[f"release/{assignment_id}/{rel.as_posix()}"] = path.read_bytes()
    return out


def fingerprint_files(course: Course, solutions: dict[str, bytes]) -> dict[str, bytes]:
    """dist/fingerprints.json (the self-check data, :mod:`autograder.authoring.fingerprints`).

    The fingerprints run the references: they see the solutions just derived (``solutions``:
    path -> text), not whatever solutions/ held before, so one build is enough and
    ``--check`` judges the fingerprints by source/ alone.
    """
    from autograder.authoring import fingerprints  # noqa: PLC0415 - loads torch

    modules = {}
    for a in course.assignments:
        path = f"solutions/{a.module}.py"
        if path not in solutions:
            continue
        name = module_name(a)
        module = types.ModuleType(name)
        module.__file__ = str(course.root / path)     # where autograder.grading.references would load it from
        exec(compile(solutions[path], path, "exec"), module.__dict__)  # instructor code, on the trusted side
        modules[name] = module
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        data = fingerprints.build_fingerprints(course)
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    return {FINGERPRINTS: fingerprints.dumps(data).encode("utf-8")}


def derive(root: Path, course: Course, outputs: bool = True) -> Derived:
    """Every file that build derives: the committed ones and, with ``outputs``, the machine's own."""
    files: dict[str, bytes] = {"solutions/__init__.py": SOLUTIONS_INIT}
    sources = []
    for a in course.assignments:
        source = read_source(root, a.id, [(e.id, e.function) for e in a.exercises], tuple(q.id for q in a.questions))
        sources.append(source)
        files[f"release/{a.id}/{a.notebook}"] = release_notebook(source, course.language, a.id)
        files.update(_extra_files(root, a.id))
        files[f"solutions/{a.module}.py"] = solutions_module(source, a.module)
    solutions = {path: data for path, data in files.items()
                  if path.startswith("solutions/") and path != "solutions/__init__.py"}
    built = fingerprint_files(course, solutions) if outputs else {}
    return Derived(dict(sorted(files.items())), tuple(sources), built)


# -- comparing and writing ---------------------------------------------------------------
def _ignored(rel: Path) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in rel.parts for pattern in IGNORED)


def unexpected_files(root: Path, derived: dict[str, bytes]) -> list[str]:
    """Files under release/ and solutions/*.py that build did not derive (left from an old build)."""
    found = [p for p in (root / "release").rglob("*") if p.is_file()] if (root / "release").is_dir() else []
    found += [p for p in (root / "solutions").glob("*.py")] if (root / "solutions").is_dir() else []
    rels = (p.relative_to(root) for p in found)
    return sorted(r.as_posix() for r in rels if not _ignored(r) and r.as_posix() not in derived)


def stale_files(root: Path, derived: dict[str, bytes], course: Course | None = None) -> list[str]:
    """Lines naming every derived file that is missing, different or unexpected on disk."""
    out: list[str] = []
    for rel, data in derived.items():
        path = root / rel
        if not path.is_file():
            out.append(f"{rel} (missing)")
        elif path.read_bytes() != data:
            out.append(f"{rel} (stale)")
    out += [f"{rel} (not derived from source/)" for rel in unexpected_files(root, derived)]
    course = course if course is not None else load_course(root / "course.yml")
    out += [f"{rel} (missing bundle input)" for rel in bundle_inputs_missing(course)]
    return out


def _write(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)  # readers never see half a file


def write_files(root: Path, derived: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Write what changed, remove leftovers; returns (written, removed)."""
    written = []
    for rel, data in derived.items():
        path = root / rel
        if not path.is_file() or path.read_bytes() != data:
            _write(path, data)
            written.append(rel)
    removed = unexpected_files(root, derived)
    for rel in removed:
        (root / rel).unlink()
    return written, removed


def build(root: Path | None = None) -> list[str]:
    """Build release/, solutions/, the fingerprints and dist/student-bundle.zip into ``root``.

    Returns one line per file written or removed (the bundle is always written).
    """
    root = root if root is not None else course_root()
    course = load_course(root / "course.yml")
    # Atomic: everything is derived in memory and checked (the bundle's secrets and near-answers too) before
    # a file is written; a build that fails leaves every file as it was, the source notebooks included.
    notebooks = {a.id: root / "source" / a.id / a.notebook for a in course.assignments}
    before = {key: path.read_bytes() for key, path in notebooks.items() if path.is_file()}
    try:
        # course.yml's points into the source notebooks' nbgrader test cells first: release/ derives from them.
        synced = _test_cells(root, course, write=True)
        derived = derive(root, course)
        bundle = zip_bytes(bundle_files(course, derived), root=root)    # (refuses secrets: before the folder too)
        student = student_course_files(course, derived)
    except BaseException:
        for key, data in before.items():
            if notebooks[key].read_bytes() != data:
                _write(notebooks[key], data)
        raise
    written, removed = write_files(root, derived.files)
    for rel, data in derived.outputs.items():
        _write(root / rel, data)
    _write(root / BUNDLE, bundle)
    _write_folder(root / STUDENT_COURSE_DIR, student)
    _write_folder(root / STUDENT_JUPYTER_DIR, student_jupyter_files())
    return ([f"updated the test cells of {rel} from course.yml" for rel in synced]
            + [f"wrote {rel}" for rel in written] + [f"removed {rel}" for rel in removed]
            + [f"wrote {rel}" for rel in derived.outputs]
            + [f"wrote {BUNDLE}", f"wrote {STUDENT_COURSE_DIR}/", f"wrote {STUDENT_JUPYTER_DIR}/"])


def _write_folder(folder: Path, files: dict[str, bytes]) -> None:
    """Replace ``folder`` by one holding exactly ``files``, readable by every user (students' servers read
    it): built beside it, then renamed over it, so a student's check() never sees half a course."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for rel, data in files.items():
            path = fresh / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
        for path in [fresh, *(p for p in fresh.rglob("*") if p.is_dir())]:
            path.chmod(0o755)
        old = folder.with_name(f".{folder.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            os.rename(folder, old)
        os.rename(fresh, folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def check_current(root: Path | None = None) -> None:
    """Raise :class:`StaleError` naming every committed derived file that does not match source/.

    The machine-dependent outputs (fingerprints, bundle) are not compared: no build elsewhere
    could reproduce their bytes.
    """
    root = root if root is not None else course_root()
    course = load_course(root / "course.yml")
    stale = [f"{rel} (test cells differ from course.yml's points)" for rel in _test_cells(root, course, write=False)]
    stale += stale_files(root, derive(root, course, outputs=False).files, course)
    student_course(root)  # the seed can still be taken out of the bundle
    if stale:
        raise StaleError("derived files do not match source/:\n  " + "\n  ".join(stale), hint=stale_hint(stale))


def _test_cells(root: Path, course: Course, *, write: bool) -> list[str]:
    """Source notebooks whose nbgrader test cells differ from course.yml (points, place); written when ``write``."""
    return sync_test_cells(root, course, write=write)


def stale_hint(stale: list[str]) -> str:
    """What to run and commit, naming only the folders whose files are stale."""
    folders = sorted({line.split("/", 1)[0] + "/" for line in stale if "(missing bundle input)" not in line})
    lacking = [line.split(" (", 1)[0] for line in stale if "(missing bundle input)" in line]
    parts = []
    if folders:
        parts.append(f"run `autograder build` and commit {' and '.join(folders)}")
    if lacking:
        parts.append(f"restore {', '.join(lacking)} (the student bundle needs it)")
    return "; ".join(parts)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="build in memory and compare with the committed files; exit 1 if any is stale")
    parser.add_argument("--root", type=Path, default=None,
                        help="course folder holding course.yml and source/ (default: the course autograder "
                             "finds: --course, else the nearest course.yml from here upward)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve() if args.root is not None else course_root()
    if args.check:
        check_current(root)
        print("build: release/ and solutions/ match source/, the bundle inputs are there")
        return 0
    for line in build(root):
        print(f"build: {line}")
    return 0

