"""The student bundle (``dist/student-bundle.zip``): what of the kit and the course a student may hold.

The release notebooks, the public part of the engine (:data:`STUDENT_PACKAGE`, which imports nothing of
grading or authoring), a course.yml without the grading seed (:func:`student_course`), each assignment's
public checks and the self-check data; a ``pyproject.toml`` whose dependencies come from the kit's own
(:func:`_bundle_pyproject`) and a README in both languages. Nothing else of source/ ships, by rule
(:func:`course_files`), and a last guard (:func:`_refuse_secrets`) refuses a bundle that holds a secret
file's name, a line of a reference solution or a near-answer the course declares. The zip is
deterministic (:func:`zip_bytes`), dated as the sources.

``autograder build`` (:mod:`autograder.authoring.build`) derives the files and writes the zip.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from nbformat.notebooknode import NotebookNode

from autograder.authoring.notebooks import BEGIN, END, Derived, Source
from autograder.catalog import NEAR_ANSWERS, load_catalog
from autograder.course.config import Course, parse_course
from autograder.course.files import PACKAGE, PUBLIC_FILE
from autograder.core.errors import BuildError, ConfigError
from autograder.core.zips import deterministic_zip, source_time

if sys.version_info >= (3, 11):
    import tomllib
else:                       # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib


#: The public part of the engine (the autograder package): everything a student's ``check`` needs,
#: nothing of grading. Globs, relative to the engine's folder's parent, match files, sorted. Of the
#: course, only course.yml (without the seed) and each assignment's public checks
#: (:data:`~autograder.catalog.PUBLIC_FILE`) ship: :func:`course_files`.
STUDENT_PACKAGE: tuple[str, ...] = (
    "autograder/__init__.py",
    "autograder/core/*.py",               # the bottom layer: imports nothing of the kit
    "autograder/course/__init__.py",
    "autograder/course/config.py",
    "autograder/course/config_errors.py",    # (course.yml's problems in words: config raises them)
    "autograder/course/late_policy.py",      # (course.yml's late policies: config reads them)
    "autograder/course/clock.py",            # (course.yml's dates and time zone: config reads them)
    "autograder/course/roster.py",           # (course.yml's roster: config reads it where asked)
    "autograder/course/written.py",          # (course.yml's written questions: config reads them)
    "autograder/course/files.py",            # (which course.yml, and its files' names: config reads them)
    "autograder/course/service_policy.py",   # (course.yml's service section: config reads it)
    "autograder/course/notebook.py",
    "autograder/inside/__init__.py",
    "autograder/inside/plain.py",
    "autograder/inside/probes.py",
    "autograder/inside/guards.py",           # (probes runs each call under its guards)
    "autograder/inside/forbidden.py",
    "autograder/inside/namespace.py",        # (the self-check runs a notebook's cells in it)
    "autograder/selfcheck/*.py",
    "autograder/catalog/*.py",
)
#: Distributions the student bundle installs; their version ranges come from pyproject.toml.
#: matplotlib: the notebooks plot; jupyterlab and ipykernel: where they run; rich and
#: nbformat: ``autograder check NOTEBOOK``'s table and reader (IPython comes with ipykernel); ijson: the reader's
#: bounded look at a notebook before it is parsed.
STUDENT_DEPENDENCIES: tuple[str, ...] = ("torch", "numpy", "nbformat", "pydantic", "pyyaml", "rich",
                                         "matplotlib", "jupyterlab", "ipykernel", "httpx", "ijson")
#: The bundle's console script: the student side of ``autograder`` (only ``check``), which needs
#: nothing outside :data:`STUDENT_PACKAGE` (the kit's autograder/cli.py imports grading modules).
STUDENT_SCRIPT = "autograder.selfcheck.command:main"

#: The self-check data: a build output of the course (dist/), carried by the bundle beside its course.yml.
FINGERPRINTS = "dist/fingerprints.json"
BUNDLED_FINGERPRINTS = "autograder/data/fingerprints.json"
BUNDLE = "dist/student-bundle.zip"
BUNDLE_FOLDER = "student-bundle"
#: The student course as a folder (what the bundle's package carries as autograder/data/): course.yml
#: without the seed, ``<assignment>/checks.py`` and fingerprints.json. A JupyterHub whose single-user
#: servers run the instructor's kit points ``AUTOGRADER_COURSE`` at it, so a student's ``check()`` finds
#: its course without reading the instructor's folder (hidden checks, solutions, the seed).
STUDENT_COURSE_DIR = "dist/student-course"
#: The Jupyter configuration of the students' servers on a JupyterHub whose single-user servers run the
#: instructor's kit: its Python holds nbgrader, whose JupyterLab shows the staff's "Create Assignment" panel and
#: the formgrader to everyone. The Hub's spawner points ``JUPYTER_CONFIG_PATH`` at this folder (the first place
#: Jupyter reads its configuration from: above the kit's own and the user's): those plugins and the formgrader's
#: pages are off in the students' servers. ``autograder build`` writes it (:func:`student_jupyter_files`).
STUDENT_JUPYTER_DIR = "dist/student-jupyter"
#: nbgrader 0.9's JupyterLab plugins for the staff (``jupyter labextension disable`` names them so); a student keeps
#: ``@jupyter/nbgrader:assignment-list`` (nbgrader's fetch and submit, for a course that uses its exchange),
#: ``validate-assignment`` (the notebook's Validate button) and ``menu`` (it shows only what is left).
STAFF_LAB_PLUGINS: tuple[str, ...] = ("@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
                                      "@jupyter/nbgrader:course-list")
#: ... and the server extensions behind them (the formgrader's pages and API, the course list's).
STAFF_SERVER_EXTENSIONS: tuple[str, ...] = ("nbgrader.server_extensions.formgrader",
                                            "nbgrader.server_extensions.course_list")
#: The student course, inside the package so a non-editable install finds it too: course.yml and
#: ``<assignment>/checks.py`` (:func:`autograder.course.files.course_file` falls back to it).
STUDENT_DATA = "autograder/data"
STUDENT_COURSE = f"{STUDENT_DATA}/course.yml"
#: The bundle's entries carry the time of the sources (zips.source_time: $SOURCE_DATE_EPOCH or the git commit),
#: never the build's, so that JupyterLab shows the notebooks as of when the course changed; outside git, this.
BUNDLE_TIME = (2026, 1, 1, 0, 0, 0)

SEED_LINE = re.compile(r"^seed:[^\n]*$", re.MULTILINE)
# -- the bundle's files ----------------------------------------------------------------
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


def pyproject_project(root: Path) -> dict[str, Any]:
    """The ``[project]`` table of ``root``'s pyproject.toml; empty where there is none."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    return project if isinstance(project, dict) else {}


def requirement_specs(project: dict[str, Any]) -> dict[str, str]:
    """Distribution name -> its requirement in a ``[project]`` table: the kit's own dependencies first, then its
    extras' (JupyterLab is the `lab` extra), one spec per name."""
    specs: dict[str, str] = {}
    for spec in [*project.get("dependencies", []),
                 *(d for ds in project.get("optional-dependencies", {}).values() for d in ds)]:
        specs.setdefault(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower(), spec)
    return specs


def _bundle_pyproject(root: Path) -> bytes:
    project = pyproject_project(root)
    specs = requirement_specs(project)
    deps = [specs[name] for name in STUDENT_DEPENDENCIES if name in specs]
    lacking = sorted(set(STUDENT_DEPENDENCIES) - set(specs))
    if lacking:
        raise BuildError(f"pyproject.toml: the student bundle needs {', '.join(lacking)} in [project] dependencies "
                         "or an extra")
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

## 提交 / Handing in

课程有评分服务时，课程会发给你服务的地址和你自己的令牌（token，请保密）。把它们写进
`~/.config/autograder/service.json`（或设置环境变量 `AUTOGRADER_SERVER` 和 `AUTOGRADER_TOKEN`）：
When the course runs a grading service, it gives you the service's address and your own token (keep
it private). Put them into `~/.config/autograder/service.json` (or set `AUTOGRADER_SERVER` and
`AUTOGRADER_TOKEN`):

    {{"server": "https://grader.example.edu", "token": "你的令牌 / your token"}}

然后在 notebook 里先保存（Ctrl+S），再运行 / Then, in the notebook, save it (Ctrl+S) and run:

    from autograder import submit
    submit()

或在终端里 / or from a terminal:

    autograder submit {notebook}

你会看到排队的位置，然后是评分结果（截止前只显示每项检查的标题和是否通过）。
You see your place in the queue, then the verdict (before the due date, each check's title and
whether it passed).
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


def student_course_files(course: Course, derived: Derived) -> dict[str, bytes]:
    """The files of :data:`STUDENT_COURSE_DIR`, relative to it: the bundle's course data, no more."""
    files = {path.removeprefix(f"{STUDENT_DATA}/"): data for path, data in course_files(course).items()}
    if FINGERPRINTS in derived.outputs:
        files[PurePosixPath(BUNDLED_FINGERPRINTS).name] = derived.outputs[FINGERPRINTS]
    return files


def student_jupyter_files() -> dict[str, bytes]:
    """The files of :data:`STUDENT_JUPYTER_DIR`, relative to it: JupyterLab's page config with the staff's nbgrader
    plugins disabled (what ``jupyter labextension disable`` writes) and the server's config with their extensions
    off (what ``jupyter server extension disable`` writes)."""
    page = {"disabledExtensions": {name: True for name in STAFF_LAB_PLUGINS}}
    server = {"ServerApp": {"jpserver_extensions": {name: False for name in STAFF_SERVER_EXTENSIONS}}}
    return {"labconfig/page_config.json": (json.dumps(page, indent=2) + "\n").encode(),
            "jupyter_server_config.json": (json.dumps(server, indent=2) + "\n").encode()}


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

    load_catalog(course, hidden=True, mistakes=False)     # the near-answers, declared in hidden.py
    _refuse_secrets(derived.sources, files)
    return dict(sorted(files.items()))


def near_answers(path: str, data: bytes) -> list[tuple[str, str]]:
    """(exercise, the line) for every line of this file that matches a near-answer the course declares
    (:data:`autograder.catalog.NEAR_ANSWERS`, from the assignments' hidden.py)."""
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
    when = (source_time(root) if root is not None else None) or BUNDLE_TIME
    return deterministic_zip(files, prefix=f"{folder}/", date_time=when)


def bundle_inputs_missing(course: Course) -> list[str]:
    """What the student bundle needs and lacks: the engine's public files, each assignment's public checks."""
    _package, missing = student_package()
    for a in course.assignments:
        path = course.content_dir(a) / PUBLIC_FILE
        if not path.is_file():
            missing.append(path.relative_to(course.root).as_posix())
    return missing
