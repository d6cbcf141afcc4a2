"""`autograder build`: release/ and solutions/ from source/, --check, the student bundle, nbgrader."""
from __future__ import annotations

import ast
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import build as B
from autograder.authoring import bundle as BUNDLE
from autograder import catalog as C
from autograder.cli import main
from autograder.course.config import grade_id, load_course
from autograder.core.errors import BuildError, StaleError
from support import ROOT

VENV_BIN = Path(sys.executable).parent
COMMON_IMPORTS = ("import math\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
                  "import torch.nn.functional as F\n")


# -- helpers ---------------------------------------------------------------------------
def snapshot(root: Path) -> dict[str, bytes]:
    """Every file build writes (release/, solutions/, data/, the bundle), by relative path."""
    files = [p for d in ("release", "solutions", "autograder/data", "dist") if (root / d).is_dir()
             for p in (root / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(files)}


def derived(root: Path) -> dict[str, bytes]:
    return B.derive(root, load_course(root / "course.yml")).files


def secret_lines(text: str) -> set[str]:
    """Non-trivial lines of a module: stripped, over 20 characters, no comment, docstring,
    import, decorator or signature (students see signatures; imports are everyone's)."""
    tree = ast.parse(text)
    lines = text.splitlines()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            skip.update(range(node.lineno, node.end_lineno + 1))  # docstrings
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first_body = node.body[0].lineno
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            skip.update(range(start, first_body))
    return {line.strip() for number, line in enumerate(lines, 1)
            if number not in skip and len(line.strip()) > 20 and not line.strip().startswith("#")}


def text_lines(data: bytes) -> set[str]:
    """Stripped lines of a file; for a notebook, of its cells' sources too."""
    text = data.decode("utf-8", errors="replace")
    out = {line.strip() for line in text.splitlines()}
    if text.lstrip().startswith("{") and '"cells"' in text:
        for cell in json.loads(text)["cells"]:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            out |= {line.strip() for line in source.splitlines()}
    return out


def edit_source(root: Path, assignment: str, edit) -> Path:
    path = root / "source" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    edit(nb)
    nbformat.write(nb, path)
    return path


def cell(nb, gid: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


@pytest.fixture
def no_fingerprints(monkeypatch) -> None:
    """For tests about release/ and solutions/: skip the fingerprints (seconds; tested on their own)."""
    monkeypatch.setattr(B, "fingerprint_files", lambda course, solutions: {})


@pytest.mark.slow
def test_committed_files_are_current() -> None:
    """The repository's release/ and solutions/ match source/ (what `autograder build --check` says)."""
    B.check_current(ROOT)


# -- release/ and solutions/ --------------------------------------------------------------
def bundle_entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def cpu_capability(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                          env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_build_gives_the_same_committed_bytes_in_another_folder_process_and_cpu_capability(
        built_course_root: Path, tmp_path: Path) -> None:
    """Committed files hold no float computed by torch: another folder, another process with another
    hash seed and torch's plainest CPU kernels (ATEN_CPU_CAPABILITY=default) give the same bytes,
    the bytes committed in this repository. Only the fingerprints differ, in their float bits."""
    course_root = built_course_root      # as `autograder build` leaves it (built once per test process)
    first = snapshot(course_root)
    assert B.BUNDLE in first and B.FINGERPRINTS in first and any(k.startswith("release/") for k in first)
    other = tmp_path / "elsewhere"
    other.mkdir()
    for name in ("course.yml", "pyproject.toml"):
        (other / name).write_bytes((course_root / name).read_bytes())
    for name in ("source", "autograder"):
        shutil.copytree(course_root / name, other / name, ignore=shutil.ignore_patterns("data"))
    env = {**os.environ, "PYTHONHASHSEED": "12345", "ATEN_CPU_CAPABILITY": "default"}
    assert cpu_capability(env) == "DEFAULT"
    print("this machine's CPU capability:", cpu_capability({**os.environ, "ATEN_CPU_CAPABILITY": ""}))
    subprocess.run([str(VENV_BIN / "autograder"), "build", "--root", str(other)], env=env, check=True,
                   capture_output=True)
    second = snapshot(other)
    assert sorted(second) == sorted(first)
    committed = [path for path in first if path.startswith(("release/", "solutions/"))]
    assert committed and [path for path in committed if second[path] != first[path]] == []
    assert [path for path in committed if (ROOT / path).read_bytes() != first[path]] == []
    # The bundle: every entry the same but the fingerprints, in fixed order and times.
    mine, theirs = bundle_entries(first[B.BUNDLE]), bundle_entries(second[B.BUNDLE])
    shipped = f"{BUNDLE.BUNDLE_FOLDER}/{BUNDLE.BUNDLED_FINGERPRINTS}"
    assert list(mine) == list(theirs) == sorted(mine) and shipped in mine
    assert [name for name in mine if name != shipped and mine[name] != theirs[name]] == []
    with zipfile.ZipFile(course_root / B.BUNDLE) as zf:
        # Outside git and without SOURCE_DATE_EPOCH: the kit's fixed date, never 1980 (JupyterLab: "46y ago").
        assert {i.date_time for i in zf.infolist()} == {BUNDLE.BUNDLE_TIME}
    # The fingerprints' keys name calls by site, not by float bits: the same keys under both kernels,
    # and what the default kernels stored names every known mistake here as the live diagnoser does.
    from autograder.authoring.fingerprints import verify_fingerprints

    here, there = (json.loads(files[B.FINGERPRINTS]) for files in (first, second))
    assert {ex: sorted(e["requests"]) for ex, e in here["exercises"].items()} == \
           {ex: sorted(e["requests"]) for ex, e in there["exercises"].items()}
    assert verify_fingerprints(there) == []


def test_machine_dependent_outputs_are_ignored_by_git() -> None:
    """What build writes from this machine's floats never shows as a change in `git status`."""
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (an installed copy): nothing to ask git")
    for path in (B.FINGERPRINTS, B.BUNDLE):
        assert subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", path],
                              capture_output=True).returncode != 0, f"{path} is committed"
        assert subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path]).returncode == 0, \
            f"{path} is not in .gitignore"


@pytest.mark.usefixtures("no_fingerprints")
def test_every_stub_raises_not_implemented_naming_its_exercise(course_root: Path) -> None:
    course = load_course(course_root / "course.yml")
    files = derived(course_root)
    for a in course.assignments:
        nb = nbformat.reads(files[f"release/{a.id}/{a.notebook}"].decode(), as_version=4)
        imports = cell(nb, "imports").source
        for ex in a.exercises:
            stub = cell(nb, grade_id(ex.id))
            assert B.BEGIN not in stub.source and B.END not in stub.source
            assert stub.metadata.nbgrader["solution"] and stub.metadata["deletable"] is False
            namespace: dict = {}
            exec(compile(imports + "\n" + stub.source, f"{a.id}:{ex.id}", "exec"), namespace)
            defined = namespace[ex.function]  # the signature stays visible
            if inspect.isclass(defined):  # every stubbed method, on a bare instance
                node = next(n for n in ast.parse(stub.source).body if isinstance(n, ast.ClassDef))
                stubbed = [m.name for m in node.body if isinstance(m, ast.FunctionDef)
                           and "NotImplementedError" in ast.get_source_segment(stub.source, m)]
                assert stubbed
                calls = [(getattr(defined, m), defined.__new__(defined)) for m in stubbed]
            else:
                calls = [(defined, None)]
            for fn, instance in calls:
                params = [p for p in inspect.signature(fn).parameters.values()
                          if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
                args = [None] * len(params) if instance is None else [instance] + [None] * (len(params) - 1)
                # The stub speaks course.yml's language and names the exercise.
                said = B.stub_for(course.language).format(exercise=ex.id).split('"')[1]
                with pytest.raises(NotImplementedError, match=rf"^{re.escape(said)}$"):
                    fn(*args)


@pytest.mark.usefixtures("no_fingerprints")
def test_no_release_notebook_holds_a_line_of_a_reference_solution(course_root: Path) -> None:
    files = derived(course_root)
    solutions = {p: d for p, d in files.items() if p.startswith("solutions/") and p.endswith(".py")}
    secret = set().union(*(secret_lines(d.decode()) for d in solutions.values()))
    assert len(secret) > 40, "the detector must have something to look for"
    # The detector works: the source notebooks hold those lines.
    sources = [p.read_bytes() for p in (course_root / "source").rglob("*.ipynb")]
    assert secret <= set().union(*(text_lines(d) for d in sources))
    for path, data in files.items():
        if path.startswith("release/"):
            leaked = secret & text_lines(data)
            assert not leaked, f"{path} holds reference solution lines: {sorted(leaked)[:3]}"


@pytest.mark.usefixtures("no_fingerprints")
def test_solutions_are_the_imports_and_solution_cells(course_root: Path) -> None:
    course = load_course(course_root / "course.yml")
    files = derived(course_root)
    assert files["solutions/__init__.py"].startswith(b"# GENERATED")
    for a in course.assignments:
        text = files[f"solutions/{a.module}.py"].decode()
        assert text.startswith(f"# GENERATED from source/{a.id}/{a.notebook} by autograder build; do not edit.")
        assert B.BEGIN not in text and B.END not in text and text.endswith("\n")
        namespace: dict = {}
        exec(compile(text, a.module, "exec"), namespace)
        assert all(callable(namespace[ex.function]) for ex in a.exercises)


@pytest.mark.usefixtures("no_fingerprints")
def test_check_passes_when_current_and_names_both_files_after_an_edit(built_course_root: Path, capsys) -> None:
    course_root = built_course_root      # as `autograder build` leaves it (built once per test process)
    assert main(["build", "--check", "--root", str(course_root)]) == 0
    a = load_course(course_root / "course.yml").assignments[1]
    ex = a.exercises[0]

    def edit(nb) -> None:  # the docstring (seen by students) and the body (the reference)
        c = cell(nb, grade_id(ex.id))
        c.source = c.source.replace('"""', '"""Edited. ', 1).replace(
            "    ### END SOLUTION", "    _unused = 0  # edited\n    ### END SOLUTION", 1)

    edit_source(course_root, a.id, edit)
    capsys.readouterr()
    assert main(["build", "--check", "--root", str(course_root)]) == 1
    err = capsys.readouterr().err
    assert f"release/{a.id}/{a.notebook} (stale)" in err
    assert f"solutions/{a.module}.py (stale)" in err
    assert err.count("(stale)") == 2 and "Traceback" not in err


@pytest.mark.usefixtures("no_fingerprints")
def test_edit_inside_a_solution_region_makes_only_solutions_stale(course_root: Path) -> None:
    B.build(course_root)
    a = load_course(course_root / "course.yml").assignments[0]
    ex = a.exercises[0]
    edit_source(course_root, a.id, lambda nb: setattr(
        cell(nb, grade_id(ex.id)), "source",
        cell(nb, grade_id(ex.id)).source.replace("### END SOLUTION", "# edited\n    ### END SOLUTION", 1)))
    with pytest.raises(StaleError) as caught:
        B.check_current(course_root)
    assert caught.value.exit_code == 1
    assert f"solutions/{a.module}.py (stale)" in caught.value.message
    assert "release/" not in caught.value.message  # students see the same stub
    assert caught.value.hint == "run `autograder build` and commit solutions/"


@pytest.mark.usefixtures("no_fingerprints")
def test_the_stale_hint_names_only_the_folders_that_are_stale(course_root: Path) -> None:
    B.build(course_root)
    a = load_course(course_root / "course.yml").assignments[3]
    release = course_root / "release" / a.id / a.notebook
    release.write_bytes(release.read_bytes().replace(b"\n", b"\r\n", 1))
    with pytest.raises(StaleError) as caught:
        B.check_current(course_root)
    assert caught.value.hint == "run `autograder build` and commit release/"
    (course_root / "source" / a.id / "checks.py").unlink()
    with pytest.raises(StaleError) as caught:
        B.check_current(course_root)
    assert caught.value.hint == ("run `autograder build` and commit release/; "
                                 f"restore source/{a.id}/checks.py (the student bundle needs it)")


@pytest.mark.slow
@pytest.mark.usefixtures("no_fingerprints")
def test_check_names_missing_and_leftover_files(course_root: Path) -> None:
    B.build(course_root)
    a = load_course(course_root / "course.yml").assignments[2]
    (course_root / "release" / a.id / a.notebook).unlink()
    (course_root / "solutions" / "old_module.py").write_text("x = 1\n")
    checks = course_root / "source" / a.id / "checks.py"
    public_checks = checks.read_bytes()
    checks.unlink()
    with pytest.raises(StaleError) as caught:
        B.check_current(course_root)
    assert f"release/{a.id}/{a.notebook} (missing)" in caught.value.message
    assert "solutions/old_module.py (not derived from source/)" in caught.value.message
    assert f"source/{a.id}/checks.py (missing bundle input)" in caught.value.message
    with pytest.raises(BuildError, match=f"cannot make the student bundle: source/{a.id}/checks.py missing"):
        B.build(course_root)
    checks.write_bytes(public_checks)
    B.build(course_root)
    assert not (course_root / "solutions" / "old_module.py").exists()
    B.check_current(course_root)


@pytest.mark.slow
def test_fingerprints_are_a_build_output_never_a_committed_file(course_root: Path) -> None:
    result = B.derive(course_root, load_course(course_root / "course.yml"))
    assert B.FINGERPRINTS not in result.files    # never a committed file: its floats are this machine's
    data = result.outputs[B.FINGERPRINTS]
    from autograder.catalog.fingerprints import dumps

    assert data == dumps(json.loads(data)).encode()  # the fingerprints module's canonical form
    assert set(json.loads(data)["exercises"]) == {e.id for e in load_course(course_root / "course.yml").exercises}


# -- malformed source --------------------------------------------------------------------
def _drop(gid: str):
    return lambda nb: nb.cells.remove(cell(nb, gid))


def _duplicate(gid: str):
    def edit(nb) -> None:
        copy = nbformat.from_dict(json.loads(json.dumps(cell(nb, gid))))
        copy["id"] = "a-copy"
        nb.cells.append(copy)
    return edit


def _replace(gid: str, old: str, new: str):
    return lambda nb: setattr(cell(nb, gid), "source", cell(nb, gid).source.replace(old, new))


@pytest.mark.parametrize("edit, message", [
    (_drop("ex2_4"), "no solution cell 'ex2_4' for exercise 2.4"),
    (_drop("ex2_3_check"), "no check cell 'ex2_3_check' for exercise 2.3"),
    (_duplicate("ex2_2"), "grade_id 'ex2_2' appears twice"),
    (_replace("ex2_1", "def project_qkv(", "def project(", ), "cell 'ex2_1' does not define project_qkv"),
    (_replace("ex2_1", "### END SOLUTION", ""), "cell 'ex2_1': ### BEGIN SOLUTION without ### END SOLUTION"),
    (_replace("ex2_2", "### BEGIN SOLUTION", "# BEGIN"), "cell 'ex2_2': unbalanced solution markers"),
    (_replace("ex2_3", "return", "return return"), "cell 'ex2_3': Python syntax error on line"),
    (_replace("ex2_4_check", '"2.4"', '"2.3"'), 'cell \'ex2_4_check\' must be a code cell calling check("2.4")'),
    (_replace("imports", "import torch", "BEGIN SOLUTION"), "cell 'imports' holds a BEGIN SOLUTION region"),
])
@pytest.mark.usefixtures("no_fingerprints")
def test_malformed_source_names_the_notebook_and_the_cell(course_root: Path, edit, message: str) -> None:
    path = edit_source(course_root, "02_qkv_attention", edit)
    with pytest.raises(BuildError) as caught:
        B.derive(course_root, load_course(course_root / "course.yml"))
    assert caught.value.message.startswith("source/02_qkv_attention/02_qkv_attention.ipynb: ")
    assert message in caught.value.message
    assert path.exists()


@pytest.mark.usefixtures("no_fingerprints")
def test_invalid_json_is_one_error_line_with_exit_code_2(course_root: Path, capsys) -> None:
    path = course_root / "source" / "03_padding_masks" / "03_padding_masks.ipynb"
    path.write_text(path.read_text(encoding="utf-8")[:-30], encoding="utf-8")
    assert main(["build", "--check", "--root", str(course_root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR source/03_padding_masks/03_padding_masks.ipynb: not valid JSON (line ")
    assert "Traceback" not in err


@pytest.mark.usefixtures("no_fingerprints")
def test_missing_source_notebook_is_a_build_error(course_root: Path) -> None:
    (course_root / "source" / "01_rnn_decay" / "01_rnn_decay.ipynb").unlink()
    with pytest.raises(BuildError, match="source/01_rnn_decay/01_rnn_decay.ipynb: source notebook not found"):
        B.check_current(course_root)


# -- the student bundle --------------------------------------------------------------------
def _definitions(name: str, data: bytes, functions: set[str]) -> list[ast.stmt]:
    """Every def/class named like a student function, in a .py file or a notebook's code cells."""
    if name.endswith(".py"):
        sources = [data.decode()]
    elif name.endswith(".ipynb"):
        sources = [c.source for c in nbformat.reads(data.decode(), as_version=4).cells if c.cell_type == "code"]
    else:
        return []
    found = []
    for text in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in functions:
                node.decorator_list = []
                found.append(node)
    return found


def _full_marks(name: str, data: bytes, course, references: dict) -> list[str]:
    """Exercises whose function, as defined in this file, scores full marks on every check."""
    functions = {e.function for e in course.exercises}
    nodes = _definitions(name, data, functions)
    if not nodes:
        return []
    namespace: dict = {}
    exec(COMMON_IMPORTS, namespace)
    for node in nodes:
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), name, "exec"), namespace)
        except Exception:  # noqa: BLE001 - a definition that cannot even be made passes nothing
            continue
    passing = []
    for ex in course.exercises:
        if ex.function not in namespace or not C.checks_for(ex.id, (C.Audience.PUBLIC, C.Audience.HIDDEN)):
            continue
        result = C.run_exercise(ex, C.in_process_runner(namespace),
                                audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN), tolerances=course.tolerances,
                                seed_parts=("bundle-test",), reference=references[ex.id])
        if result.points >= ex.points - 1e-9:
            passing.append(ex.id)
    return passing


#: Earlier exercises whose answers a notebook holds again: 05 has the students paste their 3.4 and 4.1-4.4 into
#: its own stubs (5.4's and 5.6's cells), so its reference defines working answers to those too.
CARRIED_OVER = {"solutions/transformer_block.py": ["3.4", "4.1", "4.2", "4.3", "4.4"]}


@pytest.mark.slow
def test_student_bundle_holds_no_solution_no_hidden_check_no_mistake(built_course_root: Path) -> None:
    course_root = built_course_root      # as `autograder build` leaves it (built once per test process)
    course = load_course(course_root / "course.yml")
    with zipfile.ZipFile(course_root / B.BUNDLE) as zf:
        bundle = {i.filename.split("/", 1)[1]: zf.read(i) for i in zf.infolist()}
    assert {"pyproject.toml", "README.md", "autograder/__init__.py", "autograder/catalog/__init__.py"} <= set(bundle)
    assert all(f"{a.id}/{a.notebook}" in bundle for a in course.assignments)
    # Of each assignment's folder, the public checks alone ship (inside the package, for any install).
    assert {n for n in bundle if n.endswith(".py") and (not n.startswith("autograder/") or "/data/" in n)} == \
        {f"autograder/data/{a.id}/checks.py" for a in course.assignments}
    assert not [n for n in bundle if n.rsplit("/", 1)[-1] in ("hidden.py", "mistakes.py", "alternatives.py")
                or "solutions" in n]
    lines = set().union(*(text_lines(d) for d in bundle.values()))

    # 1. Not one line of a reference solution (as build derived them from source/).
    solutions = {p.relative_to(course_root).as_posix(): p.read_bytes()
                 for p in sorted((course_root / "solutions").glob("*.py"))}
    for path, data in solutions.items():
        leaked = secret_lines(data.decode()) & lines
        assert not leaked, f"{path} leaked into the bundle: {sorted(leaked)[:3]}"

    # 2. No text of a hidden check or a known mistake (lines shared with the public checks are public).
    public = set().union(*(secret_lines(p.read_text()) for p in (course_root / "source").glob("*/checks.py")))
    # The correct alternatives: the lines they share with the notebooks' own demonstrations are public too.
    demos = set().union(*(text_lines(p.read_bytes()) for p in (course_root / "release").glob("*/*.ipynb")))
    for name in ("hidden.py", "mistakes.py", "alternatives.py"):
        for module in sorted((course_root / "source").glob(f"*/{name}")):
            shared = public | (demos if name == "alternatives.py" else set())
            leaked = (secret_lines(module.read_text()) - shared) & lines
            assert not leaked, f"{module.relative_to(course_root)} leaked into the bundle: {sorted(leaked)[:3]}"
    # Nor into release/, which nbgrader hands out as it is.
    assert not [p for p in (course_root / "release").rglob("*") if p.suffix == ".py"]

    # 3. No file defines a function that passes the checks, hidden ones included...
    C.load_catalog(course, hidden=True, mistakes=False)
    references: dict = {}
    for a in course.assignments:
        namespace: dict = {}
        exec(compile(solutions[f"solutions/{a.module}.py"], a.module, "exec"), namespace)
        references.update({e.id: namespace[e.function] for e in a.exercises})
    for name, data in bundle.items():
        assert _full_marks(name, data, course, references) == [], f"{name} defines a working solution"
    # ...and the detector does find the references themselves.
    for path, data in solutions.items():
        expected = sorted([e.id for a in course.assignments if f"solutions/{a.module}.py" == path
                           for e in a.exercises if C.checks_for(e.id, (C.Audience.PUBLIC, C.Audience.HIDDEN))]
                          + CARRIED_OVER.get(path, []))
        assert sorted(_full_marks(path, data, course, references)) == expected

    # 4. The grading seed is nowhere; the student course.yml says 0.
    seed = re.compile(rf"(?<![0-9A-Za-z+/]){course.seed}(?![0-9A-Za-z+/])".encode())
    assert not [n for n, d in bundle.items() if seed.search(d)]
    student = load_course_text(bundle[BUNDLE.STUDENT_COURSE])
    assert student.seed == 0
    assert student.model_copy(update={"seed": course.seed}).model_dump() == course.model_dump()

    # 5. dist/student-course/ (JupyterHub's AUTOGRADER_COURSE) holds the bundle's course data and nothing more,
    # readable by every user.
    folder = course_root / BUNDLE.STUDENT_COURSE_DIR
    written = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    data_prefix = "autograder/data/"
    assert {name: p.read_bytes() for name, p in written.items()} == {
        name.removeprefix(data_prefix): data for name, data in bundle.items() if name.startswith(data_prefix)}
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in written.values())
    assert load_course(folder / "course.yml").seed == 0 and load_course(folder / "course.yml").content_dir(
        course.assignments[0]) == folder / course.assignments[0].id
    (folder / "stale.py").write_text("left from an older build")
    B.build(course_root)
    assert not (folder / "stale.py").exists() and (folder / "fingerprints.json").is_file()
    # 6. dist/student-jupyter/ (JupyterHub's JUPYTER_CONFIG_PATH): the students' Jupyter configuration, readable by all.
    jupyter = course_root / BUNDLE.STUDENT_JUPYTER_DIR
    assert {p.relative_to(jupyter).as_posix(): p.read_bytes() for p in jupyter.rglob("*") if p.is_file()} == \
        BUNDLE.student_jupyter_files()
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in jupyter.rglob("*") if p.is_file())


def _jupyterlab(home: Path, config_path: Path | None) -> tuple[list[str], int]:
    """A JupyterLab server of .venv's (as a single-user server runs it), with ``JUPYTER_CONFIG_PATH`` at
    ``config_path``: (the plugins its page says are disabled, the status of its /formgrader page)."""
    import httpx

    from served import free_port

    port, token = free_port(), "student-jupyter-test"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_", "JUPYTERHUB_"))}
    env.update(HOME=str(home), PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}")
    if config_path is not None:
        env["JUPYTER_CONFIG_PATH"] = str(config_path)
    argv = [str(VENV_BIN / "jupyter"), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}", *(["--allow-root"] if os.geteuid() == 0 else [])]
    with subprocess.Popen(argv, cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as lab:
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(240):
                assert lab.poll() is None, lab.stderr.read() if lab.stderr else lab.returncode
                try:
                    if httpx.get(f"{url}/api/status", params={"token": token}, timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                import time

                time.sleep(0.5)
            page = httpx.get(f"{url}/lab", params={"token": token}, timeout=30)
            assert page.status_code == 200, page.text[:500]
            found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page.text,
                              re.S)
            assert found, page.text[:500]
            disabled = list(json.loads(found.group(1)).get("disabledExtensions") or [])
            formgrader = httpx.get(f"{url}/formgrader", params={"token": token}, timeout=30).status_code
        finally:
            lab.terminate()
            try:
                lab.wait(30)
            except subprocess.TimeoutExpired:
                lab.kill()
    return disabled, formgrader


@pytest.mark.slow
def test_the_student_jupyter_config_turns_nbgrader_staff_tools_off_in_jupyterlab(tmp_path: Path) -> None:
    """Issue 66, item 8: on a Hub that runs the instructor's kit, students saw nbgrader's "Create Assignment" and
    formgrader. A JupyterLab that reads dist/student-jupyter/ first (the Hub's JUPYTER_CONFIG_PATH) disables the
    staff's lab plugins and has no formgrader pages; the assignment list and validation stay; without it (the
    instructor's own JupyterLab) the formgrader is there. The plugin names are nbgrader's own: each is in the
    installed extension's code (a renamed plugin fails here, not silently in a student's browser)."""
    import importlib.util

    code = "".join(p.read_text(encoding="utf-8", errors="replace")
                   for p in (VENV_BIN.parent / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader"
                             / "static").glob("*.js"))
    for plugin in (*BUNDLE.STAFF_LAB_PLUGINS, "@jupyter/nbgrader:assignment-list"):
        assert f'"{plugin}"' in code, plugin
    for module in BUNDLE.STAFF_SERVER_EXTENSIONS:
        assert importlib.util.find_spec(module) is not None, module
    folder = tmp_path / "student-jupyter"
    B._write_folder(folder, BUNDLE.student_jupyter_files())
    home = tmp_path / "home"
    home.mkdir()
    disabled, formgrader = _jupyterlab(home, folder)
    assert set(BUNDLE.STAFF_LAB_PLUGINS) <= set(disabled), disabled
    assert not [p for p in disabled if p.endswith((":assignment-list", ":validate-assignment"))], disabled
    assert formgrader == 404
    disabled, formgrader = _jupyterlab(home, None)
    assert not set(BUNDLE.STAFF_LAB_PLUGINS) & set(disabled) and formgrader in (200, 302), (disabled, formgrader)


def load_course_text(data: bytes):
    import yaml

    from autograder.course.config import parse_course

    return parse_course(yaml.safe_load(data.decode()))


# -- nbgrader --------------------------------------------------------------------------------
@pytest.mark.slow
def test_nbgrader_generate_assignment_writes_what_build_writes(built_course_root: Path) -> None:
    course_root = built_course_root      # as `autograder build` leaves it (built once per test process)
    ours = {k: v for k, v in snapshot(course_root).items() if k.startswith("release/")}
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    # One nbgrader process for every assignment (its assignment id is a glob): as an instructor releases them all.
    done = subprocess.run([str(VENV_BIN / "nbgrader"), "generate_assignment", "*", "--force"],
                          cwd=course_root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    written = set(re.findall(r"Writing \d+ bytes to \S*/release/(\w+)/", done.stderr))
    assert written == {a.id for a in load_course(course_root / "course.yml").assignments}, done.stderr[-2000:]
    assert (course_root / "gradebook.db").is_file()
    theirs = {k: v for k, v in snapshot(course_root).items() if k.startswith("release/")}
    assert theirs == ours  # same bytes: build and nbgrader never fight over release/
    B.check_current(course_root)


def test_nbgrader_config_uses_the_build_pipeline(monkeypatch) -> None:
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)     # the config sets it: undone after this test
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    # The kernels nbgrader starts grade with this course, never one found from a submission's folder.
    assert os.environ["AUTOGRADER_COURSE"] == str(ROOT / "course.yml")
    assert set(config.CourseDirectory.ignore) >= {"checks.py", "hidden.py", "mistakes.py"}
    assert config.GenerateAssignment.preprocessors == B.NBGRADER_PREPROCESSORS
    assert config.ClearSolutions.code_stub == {"python": B.course_stub(ROOT)}
    assert config.CourseDirectory.root == str(ROOT)
    assert config.CourseDirectory.db_url == f"sqlite:///{ROOT / 'gradebook.db'}"
    assert "gradebook.db" in (ROOT / ".gitignore").read_text().split()


# -- near-answers and the installed bundle ---------------------------------------------------
#: Lines that once shipped in the public checks: readable answers, though no line of a reference.
OLD_NEAR_ANSWERS = {
    "1.1": "want = 1 - torch.tanh(z.double()) ** 2",
    "3.1": "return torch.arange(max_len).unsqueeze(0) >= lengths.unsqueeze(1)     # (B, max_len)",
    "3.3": "weights = torch_masked_softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, mask)",
    "2.4": "weights = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)",
    "2.3": "return Q.double() @ K.double().transpose(-2, -1) / math.sqrt(Q.shape[-1])",
    "3.2": 'return F.softmax(s.masked_fill(key_mask_like(mask, s), float("-inf")), dim=-1)',
    "4.1": "return x.reshape(B, T, H, E // H).transpose(1, 2)                  # (B, H, T, d)",
    "4.2": "return x.transpose(1, 2).reshape(B, T, H * d)                      # (B, T, H*d)",
}


def test_no_shipped_file_holds_a_near_answer() -> None:
    course = load_course(ROOT / "course.yml")
    C.load_catalog(course, hidden=True, mistakes=False)       # the near-answers: declared in hidden.py
    package, missing = BUNDLE.student_package()
    assert not missing
    shipped = {**package, **BUNDLE.course_files(course),
               **{p.relative_to(ROOT).as_posix(): p.read_bytes() for p in (ROOT / "release").rglob("*.ipynb")}}
    assert {p: BUNDLE.near_answers(p, d) for p, d in shipped.items() if BUNDLE.near_answers(p, d)} == {}
    # The patterns catch what used to ship, and the references' own one-liners.
    for exercise, line in OLD_NEAR_ANSWERS.items():
        assert exercise in [e for e, _ in BUNDLE.near_answers("x.py", line.encode())], line
    refs = {e for p in (ROOT / "solutions").glob("*.py") for e, _ in BUNDLE.near_answers(p.name, p.read_bytes())}
    assert {"1.1", "3.1", "4.1", "4.2"} <= refs
    # ...and the build refuses a bundle holding one.
    with pytest.raises(BuildError, match="near-answer of exercise 4.1"):
        BUNDLE._refuse_secrets((), {"autograder/data/04_x/checks.py": f"    {OLD_NEAR_ANSWERS['4.1']}\n".encode()})
    with pytest.raises(BuildError, match="must never be shipped"):
        BUNDLE._refuse_secrets((), {"autograder/data/04_x/hidden.py": b"x = 1\n"})


def test_bundle_pyproject_declares_what_students_need() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    bundle = tomllib.loads(BUNDLE._bundle_pyproject(ROOT).decode())["project"]
    kit = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*kit["dependencies"], *kit["optional-dependencies"]["lab"]]    # JupyterLab: the lab extra
    for name in ("matplotlib", "jupyterlab", "ipykernel", "torch", "rich", "nbformat"):
        spec = next(d for d in declared if re.split(r"[<>=!~ ]", d)[0] == name)
        assert spec in bundle["dependencies"]                 # the kit's version range
    assert not {"nbgrader", "otter-grader", "pyseccomp", "pytest"} & {re.split(r"[<>=!~ ]", d)[0]
                                                                     for d in bundle["dependencies"]}
    assert bundle["scripts"] == {"autograder": BUNDLE.STUDENT_SCRIPT}
    readme = BUNDLE.bundle_readme(load_course(ROOT / "course.yml")).decode()
    assert "download.pytorch.org/whl/cpu" in readme and "01_rnn_decay/01_rnn_decay.ipynb" in readme
    # How to hand in (issue 48): submit(), the token and where it goes.
    assert "submit()" in readme and "service.json" in readme and "AUTOGRADER_TOKEN" in readme


@pytest.mark.slow
def test_bundle_installed_in_a_fresh_venv_runs_its_autograder_check(course_root: Path, tmp_path: Path) -> None:
    """pip install . in a new venv (offline: dependencies from the kit's environment), then the
    installed `autograder check` on a notebook with a known mistake names it."""
    from autograder.authoring.fingerprints import build_fingerprints
    from autograder.catalog.fingerprints import dumps

    course = load_course(course_root / "course.yml")
    derived = B.derive(course_root, course, outputs=False)
    fingerprints = {B.FINGERPRINTS: dumps(build_fingerprints(course, exercises=["2.4"])).encode()}
    derived = B.Derived(derived.files, derived.sources, fingerprints)
    with zipfile.ZipFile(io.BytesIO(BUNDLE.zip_bytes(BUNDLE.bundle_files(course, derived)))) as zf:
        zf.extractall(tmp_path / "unzipped")
    folder = tmp_path / "unzipped" / BUNDLE.BUNDLE_FOLDER
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    # The kit's .venv is itself a venv, so --system-site-packages would not see torch: a .pth line lends
    # its site-packages instead (appended after the new venv's own, and without its .pth files, so the
    # kit's editable autograder stays out of sight).
    (purelib / "kit-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AUTOGRADER_COURSE", "AUTOGRADER_FINGERPRINTS", "VIRTUAL_ENV")}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", "."], cwd=folder, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    metadata = next(purelib.glob("attention_course_selfcheck-*.dist-info")) / "METADATA"
    requires = {line.split(":", 1)[1].strip().split(">")[0].split("<")[0].split("=")[0].strip()
                for line in metadata.read_text().splitlines() if line.startswith("Requires-Dist:")}
    assert {"matplotlib", "jupyterlab", "ipykernel", "torch", "rich"} <= requires
    where = subprocess.run([str(python), "-c", "import autograder, matplotlib; print(autograder.__file__)"],
                           env=env, capture_output=True, text=True, cwd=tmp_path)
    assert where.stdout.strip() == str(purelib / "autograder" / "__init__.py"), where.stderr
    # Installed, the kit reads course.yml where config looks (the packaged copy: no course folder around it),
    # and holds no hidden check.
    probe = subprocess.run([str(python), "-c", "import autograder\nfrom autograder import catalog\n"
                            "from autograder.course.config import load_course\ncourse = load_course()\n"
                            "print(course.seed, catalog.hidden_available())"], env=env, capture_output=True,
                           text=True, cwd=tmp_path)
    assert probe.stdout.split() == ["0", "False"], (
        f"config.py should fall back to {BUNDLE.STUDENT_COURSE} when installed\n{probe.stdout}{probe.stderr}")

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "import math\nimport torch\nimport matplotlib.pyplot as plt\nfrom autograder import check",
        "def scaled_dot_product_attention(Q, K, V):  # a known mistake: no 1/sqrt(d)\n"
        "    w = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)\n    return w @ V, w",
        'check("2.4")')]
    path = tmp_path / "work" / "02_qkv_attention.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    out = subprocess.run([str(venv / "bin" / "autograder"), "check", path.name, "--exercise", "2.4",
                          "--language", "en"], cwd=path.parent, env=env, capture_output=True, text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1/sqrt(d)" in out.stdout and "✗" in out.stdout, out.stdout + out.stderr   # the mistake, named
    assert "raised" not in out.stdout        # every cell ran: matplotlib and check were there
    assert "Traceback" not in out.stderr


def test_the_bundle_is_dated_as_its_sources_never_1980(tmp_path, monkeypatch):
    """JupyterLab shows a notebook unzipped from the bundle as modified when its entry says: the sources'
    time ($SOURCE_DATE_EPOCH, else the git commit), the same wherever the same commit is built."""
    from autograder.core.zips import source_time

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    assert source_time(tmp_path) == (2025, 12, 1, 0, 0, 0)
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert source_time(tmp_path) is None                     # no git here: the caller's fixed date
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-03-04T05:06:08Z", "GIT_COMMITTER_DATE": "2026-03-04T05:06:08Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    (tmp_path / "f").write_text("x")
    for command in (["init", "-q"], ["add", "f"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(tmp_path), *command], env=env, check=True, capture_output=True)
    assert source_time(tmp_path) == (2026, 3, 4, 5, 6, 8)
    with zipfile.ZipFile(io.BytesIO(BUNDLE.zip_bytes({"a.ipynb": b"{}"}, root=tmp_path))) as zf:
        assert [i.date_time for i in zf.infolist()] == [(2026, 3, 4, 5, 6, 8)]


@pytest.mark.slow
def test_a_build_that_fails_leaves_every_file_as_it_was(course_root: Path) -> None:
    """Issue 25, item 14: a near-answer in checks.py makes the build fail, and nothing was written before:
    not release/ or solutions/ (their source changed), not the source notebook's test cells."""
    import yaml

    checks = course_root / "source" / "04_multi_head_attention" / "checks.py"
    checks.write_text(checks.read_text(encoding="utf-8") + f"\n# {OLD_NEAR_ANSWERS['4.1']}\n", encoding="utf-8")
    source = course_root / "source" / "02_qkv_attention" / "02_qkv_attention.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    statement = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex2_1_statement")
    statement["source"] = ["## 练习 2.1　投影（改过的题面）\n"]
    source.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    data = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    data["assignments"][1]["exercises"][0]["points"] = 2          # the test cell's points would be rewritten
    (course_root / "course.yml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    watched = [p for folder in ("release", "solutions", "source") for p in (course_root / folder).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    before = {p: p.read_bytes() for p in watched}
    with pytest.raises(BuildError, match="near-answer of exercise 4"):
        B.build(course_root)
    assert [str(p) for p in watched if p.read_bytes() != before[p]] == []
    assert not (course_root / B.BUNDLE).exists()


def test_what_ships_to_students_imports_nothing_of_the_grader():
    """Every module of the student bundle imports (at any depth of its code) only modules that ship too:
    the student's side of the self-check data never reaches grading/ or authoring/ (issue 26)."""
    package, missing = BUNDLE.student_package()
    assert not missing
    shipped = {p[:-3].replace("/", ".").removesuffix(".__init__") for p in package if p.endswith(".py")}
    outside = []
    for path, data in package.items():
        if not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(data.decode("utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                if name.startswith("autograder") and name not in shipped and \
                        not any(s.startswith(name + ".") for s in shipped):
                    outside.append(f"{path}: import {name}")
    assert outside == []
