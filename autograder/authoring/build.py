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
  (:data:`STUDENT_PACKAGE`) + a student course.yml without the grading seed.

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
import json
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from nbconvert.exporters import NotebookExporter
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from autograder.config import (PACKAGE, PUBLIC_FILE, Course, course_root, load_course,
                               parse_course)
from autograder.errors import BuildError, ConfigError, StaleError
from autograder.authoring.notebooks import (BEGIN, END, NBGRADER_PREPROCESSORS, RELEASE_PREPROCESSORS,  # noqa: F401
                                            STUBS, Source, course_stub, read_source, stub_for, strip_markers)
from autograder.zips import ZIP_TIME, deterministic_zip  # noqa: F401 - ZIP_TIME: the time of every entry


#: The public part of the engine (the autograder package): everything a student's ``check`` needs,
#: nothing of grading. Globs, relative to the engine's folder's parent, match files, sorted. Of the
#: course, only course.yml (without the seed) and each assignment's public checks
#: (:data:`~autograder.catalog.PUBLIC_FILE`) ship: :func:`course_files`.
STUDENT_PACKAGE: tuple[str, ...] = (
    "autograder/__init__.py",
    "autograder/config.py",
    "autograder/errors.py",
    "autograder/plain.py",
    "autograder/text.py",
    "autograder/points.py",
    "autograder/messages.py",
    "autograder/probes.py",
    "autograder/selfcheck/*.py",
    "autograder/notebook.py",
    "autograder/pyast.py",
    "autograder/forbidden.py",
    "autograder/stopwatch.py",
    "autograder/catalog/*.py",
)
#: Distributions the student bundle installs; their version ranges come from pyproject.toml.
#: matplotlib: the notebooks plot; jupyterlab and ipykernel: where they run; rich and
#: nbformat: ``autograder check NOTEBOOK``'s table and reader (IPython comes with ipykernel).
STUDENT_DEPENDENCIES: tuple[str, ...] = ("torch", "numpy", "nbformat", "pydantic", "pyyaml", "rich",
                                         "matplotlib", "jupyterlab", "ipykernel")
#: The bundle's console script: the student side of ``autograder`` (only ``check``), which needs
#: nothing outside :data:`STUDENT_PACKAGE` (the kit's autograder/cli.py imports grading modules).
STUDENT_SCRIPT = "autograder.selfcheck.command:main"

#: The self-check data: a build output of the course (dist/), carried by the bundle beside its course.yml.
FINGERPRINTS = "dist/fingerprints.json"
BUNDLED_FINGERPRINTS = "autograder/data/fingerprints.json"
BUNDLE = "dist/student-bundle.zip"
BUNDLE_FOLDER = "student-bundle"
#: The student course, inside the package so a non-editable install finds it too: course.yml and
#: ``<assignment>/checks.py`` (:func:`autograder.config.course_file` falls back to it).
STUDENT_DATA = "autograder/data"
STUDENT_COURSE = f"{STUDENT_DATA}/course.yml"
#: The bundle's entries carry the time of the sources (zips.source_time: $SOURCE_DATE_EPOCH or the git commit),
#: never the build's, so that JupyterLab shows the notebooks as of when the course changed; outside git, this.
BUNDLE_TIME = (2026, 1, 1, 0, 0, 0)

SEED_LINE = re.compile(r"^seed:[^\n]*$", re.MULTILINE)
#: What nbgrader leaves out when it copies an assignment folder (checkpoints, caches).
IGNORED: list[str] = CourseDirectory.class_traits()["ignore"].default()



# -- deriving the files ------------------------------------------------------------------
def release_notebook(source: Source, language: str) -> bytes:
    """The student notebook, through nbgrader's preprocessors and nbconvert's writer; ``language``
    (course.yml's) picks the stub text."""
    stub = stub_for(language)
    exporter = NotebookExporter(config=Config({"Exporter": {"default_preprocessors": []},
                                               "ExerciseStubs": {"code_stub": {"python": stub}}}))
    for preprocessor in RELEASE_PREPROCESSORS:
        exporter.register_preprocessor(preprocessor)
    name = PurePosixPath(source.path).stem
    try:
        output, _ = exporter.from_notebook_node(source.notebook, resources={"unique_key": name})
    except Exception as exc:  # nbgrader raises RuntimeError/ValidationError with the cell in its log
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
    from autograder.catalog import COURSE_FILES

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
    from autograder.authoring import fingerprints
    from autograder.grading.references import module_name

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


@dataclass(frozen=True)
class Derived:
    """What build derives from source/, in memory."""

    files: dict[str, bytes]          # committed files, the same bytes on every machine: path -> bytes
    sources: tuple[Source, ...]      # the validated source notebooks
    #: Outputs whose bytes depend on this machine's float kernels (the fingerprints): written, not committed.
    outputs: dict[str, bytes] = field(default_factory=dict)


def derive(root: Path, course: Course, outputs: bool = True) -> Derived:
    """Every file that build derives: the committed ones and, with ``outputs``, the machine's own."""
    files: dict[str, bytes] = {"solutions/__init__.py": SOLUTIONS_INIT}
    sources = []
    for a in course.assignments:
        source = read_source(root, a.id, [(e.id, e.function) for e in a.exercises])
        sources.append(source)
        files[f"release/{a.id}/{a.notebook}"] = release_notebook(source, course.language)
        files.update(_extra_files(root, a.id))
        files[f"solutions/{a.module}.py"] = solutions_module(source, a.module)
    solutions = {path: data for path, data in files.items()
                  if path.startswith("solutions/") and path != "solutions/__init__.py"}
    built = fingerprint_files(course, solutions) if outputs else {}
    return Derived(dict(sorted(files.items())), tuple(sources), built)


# -- the student bundle ---------------------------------------------------------------
def student_package(root: Path | None = None) -> tuple[dict[str, bytes], list[str]]:
    """The files of :data:`STUDENT_PACKAGE` (the engine's, default: the installed one's) and the
    entries that match nothing."""
    root = root if root is not None else PACKAGE.parent
    found: dict[str, bytes] = {}
    missing: list[str] = []
    for pattern in STUDENT_PACKAGE:
        paths = sorted(p for p in root.glob(pattern) if p.is_file())
        if not paths:
            missing.append(pattern)
        for p in paths:
            found[p.relative_to(root).as_posix()] = p.read_bytes()
    return found, missing


def student_course(root: Path) -> bytes:
    """course.yml with the grading seed replaced by 0; comments kept, all else unchanged."""
    text = (root / "course.yml").read_text(encoding="utf-8")
    replaced, count = SEED_LINE.subn("seed: 0               # the grading seed is never shipped", text)
    original = parse_course(yaml.safe_load(text))
    try:
        shipped = parse_course(yaml.safe_load(replaced), source="student course.yml")
    except (ConfigError, yaml.YAMLError):
        shipped = None
    if count != 1 or shipped is None or shipped.model_copy(update={"seed": original.seed}) != original \
            or shipped.seed != 0:
        raise BuildError("course.yml: cannot remove the grading seed for the student bundle",
                         hint="keep `seed: <number>` on one top-level line of its own")
    return replaced.encode("utf-8")


def _bundle_pyproject(root: Path) -> bytes:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def name_of(spec: str) -> str:
        return re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower()

    deps = [d for d in project["dependencies"] if name_of(d) in STUDENT_DEPENDENCIES]
    lacking = sorted(set(STUDENT_DEPENDENCIES) - {name_of(d) for d in deps})
    if lacking:
        raise BuildError(f"pyproject.toml: the student bundle needs {', '.join(lacking)} in [project] dependencies")
    listed = "".join(f"    {json.dumps(d)},\n" for d in deps)
    return (
        "# The self-check of the course, for students: install PyTorch's CPU build first\n"
        "# (pip install torch --index-url https://download.pytorch.org/whl/cpu), then `pip install .`\n"
        "# here; `from autograder import check` in the notebooks, `autograder check NOTEBOOK` in a terminal.\n"
        "[build-system]\n"
        'requires = ["setuptools>=68"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        'name = "attention-course-selfcheck"\n'
        f"version = {json.dumps(project['version'])}\n"
        f"requires-python = {json.dumps(project.get('requires-python', '>=3.10'))}\n"
        f"dependencies = [\n{listed}]\n\n"
        "[project.scripts]\n"
        f"autograder = {json.dumps(STUDENT_SCRIPT)}\n\n"
        "[tool.setuptools.packages.find]\n"
        'include = ["autograder*"]\n\n'
        "[tool.setuptools.package-data]\n"
        'autograder = ["data/*.json", "data/*.yml", "data/*/*.py"]\n'
    ).encode()


#: The bundle's README; ``{notebook}`` and ``{exercise}`` name the course's first ones.
BUNDLE_README = """\
# 自测包 / Self-check bundle

安装（在这个文件夹里，最好在一个新的虚拟环境中）。先装 PyTorch 的 CPU 版
（不这样做，pip 可能下载好几个 GB 的 CUDA 版），再装本包：
Install (in this folder, best in a fresh virtual environment). First PyTorch's CPU
build (otherwise pip may download gigabytes of the CUDA build), then this package:

    pip install torch --index-url https://download.pytorch.org/whl/cpu
    pip install .

这会同时装好 JupyterLab、matplotlib 和 `autograder` 命令。
This also installs JupyterLab, matplotlib and the `autograder` command.

然后用 JupyterLab（`jupyter lab`）打开各作业文件夹里的 notebook，完成每个练习后运行它下面的
`check("{exercise}")` 单元格，马上就能看到哪里对、哪里错、为什么。
Then open the notebooks in JupyterLab (`jupyter lab`); after each exercise run the
`check("{exercise}")` cell below it to see at once what is right, what is wrong and why.

在终端里检查保存好的 notebook / From a terminal, on a saved notebook:

    autograder check {notebook}
    autograder check {notebook} --exercise {exercise} --language en

某个单元格或函数调用陷入死循环时，它会在 course.yml 的 limits.call_seconds 秒后停下并指出是哪一个。
A cell or call stuck in an endless loop is stopped after course.yml's limits.call_seconds and named.

这里只有公开的自测：没有参考答案，也没有隐藏测试。
Only the public self-checks are here: no reference solutions, no hidden tests.
"""


def bundle_readme(course: Course) -> bytes:
    first = course.assignments[0]
    return BUNDLE_README.format(notebook=f"{first.id}/{first.notebook}", exercise=first.exercises[0].id).encode()


def course_files(course: Course) -> dict[str, bytes]:
    """The course as a student's installed package carries it, by rule: the student course.yml and,
    of each assignment's folder, its public checks (:data:`~autograder.catalog.PUBLIC_FILE`) alone.
    Hidden checks, known mistakes, solutions and anything else of source/ never ship."""
    files = {STUDENT_COURSE: student_course(course.root)}
    for a in course.assignments:
        path = course.content_dir(a) / PUBLIC_FILE
        if not path.is_file():
            raise BuildError(f"{path}: missing: every assignment declares its public checks there")
        files[f"{STUDENT_DATA}/{a.id}/{PUBLIC_FILE}"] = path.read_bytes()
    return files


def bundle_files(course: Course, derived: Derived) -> dict[str, bytes]:
    """Path inside the bundle folder -> bytes."""
    missing = bundle_inputs_missing(course)
    if missing:
        raise BuildError(f"cannot make the student bundle: {', '.join(missing)} missing")
    package, _ = student_package()
    files = dict(package)
    files.update(course_files(course))
    engine = PACKAGE.parent if (PACKAGE.parent / "pyproject.toml").is_file() else course.root
    files["pyproject.toml"] = _bundle_pyproject(engine)
    files["README.md"] = bundle_readme(course)
    if FINGERPRINTS in derived.outputs:
        files[BUNDLED_FINGERPRINTS] = derived.outputs[FINGERPRINTS]
    for path, data in derived.files.items():
        if path.startswith("release/"):
            files[path.removeprefix("release/")] = data
    from autograder.catalog import load_catalog

    load_catalog(course, hidden=True, mistakes=False)     # the near-answers, declared in hidden.py
    _refuse_secrets(derived.sources, files)
    return dict(sorted(files.items()))


def near_answers(path: str, data: bytes) -> list[tuple[str, str]]:
    """(exercise, the line) for every line of this file that matches a near-answer the course declares
    (:data:`autograder.catalog.NEAR_ANSWERS`, from the assignments' hidden.py)."""
    from autograder.catalog import NEAR_ANSWERS

    found = []
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if path.endswith(".json"):
        # A JSON file (the self-check data) is one line: each of its strings is read as a line of its own,
        # so that a pattern never spans two unrelated messages.
        try:
            lines = list(_strings(json.loads(text)))
        except ValueError:
            pass
    for line in lines:
        squeezed = re.sub(r"\s+", "", line)
        for exercise, patterns in NEAR_ANSWERS.items():
            if any(re.search(pattern, squeezed) for pattern in patterns):
                found.append((exercise, line.strip()))
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, its keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


#: What never ships, by name: the engine is public, the course's secrets are not.
SECRET_NAMES = frozenset({"hidden.py", "mistakes.py", "alternatives.py", "solutions"})


def _refuse_secrets(sources: tuple[Source, ...], files: dict[str, bytes]) -> None:
    """A last guard: no secret file, no line of a reference solution, no near-answer in the bundle."""
    for path in files:
        parts = PurePosixPath(path).parts
        if SECRET_NAMES & set(parts):
            raise BuildError(f"student bundle: {path} must never be shipped")
    secret = {line for source in sources for line in solution_lines(source.notebook)}
    for path, data in files.items():
        lines = {line.strip() for line in data.decode("utf-8", errors="replace").splitlines()}
        leaked = sorted(secret & lines)
        if leaked:
            raise BuildError(f"student bundle: {path} contains a line of a reference solution: {leaked[0]!r}")
        near = near_answers(path, data)
        if near:
            raise BuildError(f"student bundle: {path} contains a near-answer of exercise {near[0][0]}: {near[0][1]!r}",
                             hint="compare with torch's own functions or with expected values built element by "
                                  "element (the near-answers are declared in the assignment's hidden.py)")


def solution_lines(nb: NotebookNode) -> set[str]:
    """Non-trivial lines (stripped, over 20 characters, not comments) inside solution regions."""
    out: set[str] = set()
    for cell in nb.cells:
        inside = False
        for line in cell.source.split("\n"):
            if BEGIN in line:
                inside = True
            elif END in line:
                inside = False
            elif inside and len(line.strip()) > 20 and not line.strip().startswith("#"):
                out.add(line.strip())
    return out


def zip_bytes(files: dict[str, bytes], folder: str = BUNDLE_FOLDER, root: Path | None = None) -> bytes:
    """The student bundle as a deterministic zip, every file under ``folder/``, dated as the sources in ``root``."""
    from autograder.zips import source_time

    when = (source_time(root) if root is not None else None) or BUNDLE_TIME
    return deterministic_zip(files, prefix=f"{folder}/", date_time=when)


# -- comparing and writing ---------------------------------------------------------------
def _ignored(rel: Path) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in rel.parts for pattern in IGNORED)


def unexpected_files(root: Path, derived: dict[str, bytes]) -> list[str]:
    """Files under release/ and solutions/*.py that build did not derive (left from an old build)."""
    found = [p for p in (root / "release").rglob("*") if p.is_file()] if (root / "release").is_dir() else []
    found += [p for p in (root / "solutions").glob("*.py")] if (root / "solutions").is_dir() else []
    rels = (p.relative_to(root) for p in found)
    return sorted(r.as_posix() for r in rels if not _ignored(r) and r.as_posix() not in derived)


def bundle_inputs_missing(course: Course) -> list[str]:
    """What the student bundle needs and lacks: the engine's public files, each assignment's public checks."""
    _package, missing = student_package()
    for a in course.assignments:
        path = course.content_dir(a) / PUBLIC_FILE
        if not path.is_file():
            missing.append(path.relative_to(course.root).as_posix())
    return missing


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
    from autograder.atomic import atomic_write_bytes

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
        bundle = zip_bytes(bundle_files(course, derived), root=root)
    except BaseException:
        for key, data in before.items():
            if notebooks[key].read_bytes() != data:
                _write(notebooks[key], data)
        raise
    written, removed = write_files(root, derived.files)
    for rel, data in derived.outputs.items():
        _write(root / rel, data)
    _write(root / BUNDLE, bundle)
    return ([f"updated the test cells of {rel} from course.yml" for rel in synced]
            + [f"wrote {rel}" for rel in written] + [f"removed {rel}" for rel in removed]
            + [f"wrote {rel}" for rel in derived.outputs] + [f"wrote {BUNDLE}"])


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
    from autograder.authoring.notebooks import sync_test_cells

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

