"""What the kit needs installed: grading needs no extra, a command that needs one says which, and the set-up
installs pinned versions (constraints.txt) of everything pyproject.toml names."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from autograder.core.errors import OPTIONAL_MODULES

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: A Python prelude under which every module named (and its submodules) is missing: importing one raises
#: ModuleNotFoundError as an uninstalled one does (a probe with find_spec still answers, as nbconvert's does).
BLOCKER = """
import importlib.abc, importlib.util, sys
BLOCKED = set({blocked!r})
class Block(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name.partition(".")[0] in BLOCKED else None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        raise ModuleNotFoundError(f"No module named {{module.__name__!r}}", name=module.__name__)
sys.meta_path.insert(0, Block())
"""


def _without(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER.format(blocked=sorted(blocked)) + code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@pytest.mark.slow
def test_grading_needs_no_extra():
    """Every module of the grading path imports with no optional dependency installed."""
    code = (
        "import importlib, pkgutil, autograder\n"
        "skip = ('autograder.service', 'autograder.exports.otter_plugin', 'autograder.grading.distributed',\n"
        "        'autograder.__main__', 'autograder.exports.__main__')\n"
        "names = [m.name for m in pkgutil.walk_packages(autograder.__path__, 'autograder.')\n"
        "         if not m.name.startswith(skip)]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n")
    done = _without(set(OPTIONAL_MODULES) - {"sqlalchemy", "alembic"}, code)   # nbgrader itself requires these two
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) > 80


@pytest.mark.parametrize("argv, module, extra", [
    (["worker", "--help"], "sqlalchemy", "service"),
    (["serve", "token", "--student", "s1"], "sqlalchemy", "service"),
    (["serve", "token", "--student", "s1"], "alembic", "service"),
])
def test_a_command_without_its_extra_names_the_extra(argv, module, extra, tmp_path):
    """`autograder worker` where the service's dependencies are missing: one ERROR line naming the extra."""
    argv = [*argv, "--database", str(tmp_path / "service.db")] if argv[0] == "serve" else argv
    done = _without({module}, f"from autograder.cli import main\nraise SystemExit(main({argv!r}))\n")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"needs the kit's {extra!r} extra" in done.stderr
    assert f'pip install "attention-course-kit[{extra}]"' in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_grading_on_a_cluster_without_dask_names_the_extra(tmp_path):
    done = _without({"dask", "distributed"},
                    "from autograder.cli import main\n"
                    f"raise SystemExit(main(['grade', 'samples/submissions', '-o', {str(tmp_path / 'out')!r}, "
                    "'--scheduler', 'tcp://127.0.0.1:1']))\n")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "pip install '.[dask]'" in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_missing_module_is_not_disguised():
    """A module the kit does not know as optional is a real error: its traceback stays."""
    done = _without({"yaml"}, "from autograder.cli import main\nraise SystemExit(main(['course']))\n")
    assert done.returncode == 1
    assert "ModuleNotFoundError" in done.stderr and "extra" not in done.stderr


def test_the_runtime_dependencies_are_what_grading_needs():
    """Test tools and services are extras, not what every grading machine installs."""
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    for tool in ("pytest", "hypothesis", "jupyterhub", "psycopg", "otter-grader", "fastapi", "uvicorn", "dask",
                 "mkdocs"):
        assert tool not in core, tool
        assert any(tool in {_name(r) for r in reqs} for reqs in extras.values()), tool
    for module, extra in OPTIONAL_MODULES.items():
        assert extra in extras, (module, extra)


def test_constraints_pin_every_distribution_pyproject_names():
    """The set-up installs from constraints.txt: each distribution named anywhere in pyproject is pinned."""
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned (NAME==VERSION)"
            pinned[_name(name)] = version
    requirements = [*PYPROJECT["project"]["dependencies"],
                    *(r for reqs in PYPROJECT["project"]["optional-dependencies"].values() for r in reqs)]
    # (one for another Python, tomli on 3.10, is not installed here, so not pinned from here)
    named = {_name(r) for r in requirements if Requirement(r).marker is None or Requirement(r).marker.evaluate()}
    named -= {"attention-course-kit", "torch"}      # itself (its extras name it); torch: setup.sh pins the build
    missing = sorted(n for n in named if n not in pinned)
    assert not missing, missing
    assert "torch" not in pinned
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert '"torch==${TORCH_VERSION:-2.13.0}"' in setup and '-c constraints.txt -e ".[all]"' in setup


def test_compare50_has_an_environment_of_its_own_pinned_too():
    """compare50 (bench/bench_similarity.py's peer) cannot share .venv: every release since 1.2.0 requires attrs<21,
    the kit's jsonschema attrs>=22.2. setup.sh makes .venv/compare50 from constraints-compare50.txt, which pins it and
    everything it installs; `make constraints` rewrites that file as it does constraints.txt."""
    pins = [line for line in (ROOT / "constraints-compare50.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    assert all("==" in line for line in pins), pins
    assert {"compare50", "attrs", "lib50", "intervaltree"} <= {_name(line.partition("==")[0]) for line in pins}
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert "-c constraints-compare50.txt compare50" in setup and "constraints-compare50.txt scripts/setup.sh" in setup
    assert "constraints-compare50.txt" in (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "bench" in PYPROJECT["project"]["optional-dependencies"]["all"][0]
