"""The kit's structure: layers and acyclic packages (import-linter), the course's one entry to the engine,
no private names across modules, packages that load a module only when one of its names is used."""
from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.core.lazy import type_checking_imports

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAZY_PACKAGES = ("catalog", "exports", "grading", "reports", "sandbox", "selfcheck")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    """pyproject.toml's contracts: the layers (the code next to student code among them), no cycle in any package."""
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


@pytest.mark.parametrize("importer, imported, broken", [
    ("catalog/scoring.py", "autograder.service.app", {"layers", "acyclic"}),   # up the layers, and back down
    ("grading/cells.py", "autograder.commands.grade", {"layers", "acyclic"}),
    ("sandbox/replies.py", "autograder.sandbox.handle", {"acyclic"}),        # handle imports replies
    ("inside/worker.py", "autograder.catalog.outcomes", {"layers", "acyclic"}),   # next to student code: no catalog
    ("inside/worker.py", "autograder.sandbox.handle", {"layers", "acyclic"}),     # ... nor the grader's side
    ("inside/probes.py", "autograder.course.config", {"layers"}),           # course | inside: independent
    ("course/notebook.py", "autograder.inside.namespace", {"layers"}),
    ("core/points.py", "autograder.inside.probes", {"layers", "acyclic"}),  # core imports nothing of the kit
])
def test_the_contracts_refuse_a_wrong_arrow(tmp_path, importer, imported, broken):
    """Each contract can fail: the same tree with one wrong import added breaks the one it should."""
    shutil.copytree(ROOT / "autograder", tmp_path / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__", "templates", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "autograder" / importer, "a", encoding="utf-8") as f:
        f.write(f"\n\ndef _wrong_arrow() -> None:\n    import {imported}  # noqa: F401\n")
    for contract in ("layers", "acyclic"):
        done = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--contract", contract], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(tmp_path)})
        assert done.returncode == (1 if contract in broken else 0), (contract, done.stdout[-3000:] + done.stderr)


def _kit_imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name or "", line) of every import of the kit in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "autograder"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "autograder":
            out += [(node.module or "", a.name, node.lineno) for a in node.names]
    return out


def test_the_course_imports_only_the_catalog():
    """A course's checks, hidden checks, mistakes and alternatives see the engine through autograder.catalog."""
    files = sorted((ROOT / "source").glob("*/*.py"))
    assert len(files) >= 20
    wrong = [f"{p.relative_to(ROOT)}:{line}: {module} {name}".strip()
             for p in files for module, name, line in _kit_imports(p)
             if not (module == "autograder.catalog" or module.startswith("autograder.catalog."))]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_another_modules_private_name():
    """What modules share is public; a ``_name`` stays in its module (its tests may reach in, the kit not)."""
    wrong = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for imported, name, line in _kit_imports(path):
            if name.startswith("_") and not name.startswith("__") and imported != module:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {imported}.{name}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_package_loads_its_modules_only_when_used(package):
    """Importing a package loads none of its modules; each name it offers is its module's own object."""
    code = (f"import sys\nimport autograder.{package} as P\n"
            f"print(sorted(m for m in sys.modules if m.startswith('autograder.{package}.')))\n"
            "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["[]", "False"]
    init = ROOT / "autograder" / package / "__init__.py"
    names = type_checking_imports(f"autograder.{package}", init.read_text(encoding="utf-8"))
    assert len(names) >= 5
    pkg = importlib.import_module(f"autograder.{package}")
    for name, (module, attribute) in names.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(module), attribute), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pkg.not_a_name  # noqa: B018


def test_a_module_of_a_lazy_package_is_an_attribute_too():
    """``grading.lanes`` works as it did when the package imported every module."""
    code = "import autograder.grading as G\nprint(G.lanes.__name__)\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "autograder.grading.lanes", done.stderr[-2000:]


def test_importing_one_module_loads_few_of_the_kit():
    """``autograder.grading.cells`` (107 lines) loaded 39 modules of the kit through the packages' imports:
    now only what it imports, the foundations below it."""
    code = ("import sys\nimport autograder.grading.cells\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'autograder')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = done.stdout.split()
    packages = {p.name for p in (ROOT / "autograder").iterdir() if (p / "__init__.py").exists()}
    below = {"grading", "course", "core", "inside"}     # the layers under grading it may use
    others = [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in packages - below]
    assert not others, others
    assert len(loaded) <= 17, loaded     # 15 before core/ and course/ were packages of their own
