"""The kit's structure: layers and acyclic packages (import-linter), the same layers for imports by string,
no import circle counting every import, the course's one entry to the engine, no private names across modules,
packages that load a module only when one of its names is used."""
from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:                       # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from autograder.core.lazy import type_checking_imports

ROOT = Path(__file__).resolve().parents[2]
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


#: Modules allowed past MODULE_LINES: data catalogues and tables of rules, read entry by entry, not as code.
LONG_BY_NATURE = {"autograder/core/messages.py": "the message catalogue, zh and en",
                  "autograder/authoring/operators.py": "the mutation operators, one small class each"}
MODULE_LINES = 500


def test_no_module_is_over_500_lines_but_the_catalogues():
    """A module a newcomer can read whole: one concern each (issue 68); the two catalogues are lists, not code."""
    long = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted((ROOT / "autograder").rglob("*.py"))}
    over = {path: n for path, n in long.items() if n > MODULE_LINES and path not in LONG_BY_NATURE}
    assert not over, f"split these modules (at most {MODULE_LINES} lines each): {over}"
    assert all(path in long for path in LONG_BY_NATURE), "a module allowed to be long is gone: update LONG_BY_NATURE"


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
    # 15 before core/ and course/ were packages of their own; 18 with autograder.core.version, which the
    # package's __init__ reads (no module imports that __init__ back: see test_no_module_..._import_circle);
    # 20 with course.yml's reader in three modules (config, and the files and service_policy it imports)
    assert len(loaded) <= 20, loaded


# -- imports by string: the same layers ------------------------------------------------------------------------
#: The calls that import a module named by a string.
STRING_IMPORTERS = {"importlib.import_module", "import_module", "__import__", "importlib.__import__"}


def _kit_module(text: str) -> str | None:
    """The module of the kit a string names (``"autograder.sandbox.launch:launch_early"``: its module), else None."""
    name = text.split(":")[0]
    return name if re.fullmatch(r"autograder(\.[A-Za-z_]\w*)*", name) else None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _tables(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a literal tuple, list, set or dict -> the kit's modules its strings name
    (FORMAT_MODULES, TARGET_MODULES, TEMPLATE_MODULES, cli.COMMANDS: each entry's module, EARLY...)."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        value = getattr(node, "value", None)
        if not isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            continue
        named = [_kit_module(c.value) for c in ast.walk(value)
                 if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        for target in targets:
            if isinstance(target, ast.Name):
                out[target.id] = [m for m in named if m]
    return out


def _bound_from_tables(scope: ast.AST, tables: Mapping[str, list[str]]) -> dict[str, set[str]]:
    """Names that ``scope``'s loops, comprehensions and assignments bind from a table -> those tables
    (``for module in TARGET_MODULES``, ``for name, (module_name, _) in COMMANDS.items()``, ``x = EARLY[name]``)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(scope):
        if isinstance(node, (ast.For, ast.comprehension)):
            pairs: list[tuple[ast.AST, ast.AST]] = [(node.iter, node.target)]
        elif isinstance(node, ast.Assign):
            pairs = [(node.value, t) for t in node.targets]
        else:
            continue
        for source, target in pairs:
            read = {n.id for n in ast.walk(source) if isinstance(n, ast.Name) and n.id in tables}
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                out.setdefault(name, set()).update(read)
    return out


def string_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import by string in ``source`` that names a module of the kit: a string literal
    (``importlib.import_module("autograder.x.y")``), an f-string with a literal ``autograder.`` prefix (its
    package: ``f"autograder.reports.{name}"`` is autograder.reports), or a name that the call's function binds from
    a module-level table of literal strings (each of the table's modules)."""
    tree = ast.parse(source)
    tables = _tables(tree)
    scopes: dict[ast.AST, ast.AST] = {}          # a call -> its function (or the module)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        for node in ast.walk(scope):
            scopes[node] = scope                 # the innermost function wins: it is walked after its parents
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _dotted(node.func) in STRING_IMPORTERS and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            named = [_kit_module(arg.value)]
        elif isinstance(arg, ast.JoinedStr):
            head = arg.values[0] if arg.values else None
            prefix = head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
            named = [_kit_module(prefix.rsplit(".", 1)[0])] if prefix.startswith("autograder.") else []
        elif isinstance(arg, ast.Name):
            named = list(tables.get(arg.id, ()))
            for table in _bound_from_tables(scopes[node], tables).get(arg.id, ()):
                named += tables[table]
        else:
            named = []
        out += [(node.lineno, m) for m in dict.fromkeys(named) if m]
    return out


def _import_layers() -> tuple[dict[str, tuple[int, bool]], set[str]]:
    """pyproject.toml's layers contract: each package -> (its layer's rank, 0 the top; whether the layer's
    packages are independent, ``a | b``), and the entry points it leaves out."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    assert contract["containers"] == ["autograder"]
    ranks = {package.strip(): (rank, "|" in layer) for rank, layer in enumerate(contract["layers"])
             for package in re.split(r"[|:]", layer)}
    return ranks, set(contract.get("exhaustive_ignores", ()))


def _module_name(path: str) -> str:
    return ".".join(Path(path).with_suffix("").parts).removesuffix(".__init__")


def wrong_string_imports(sources: Iterable[tuple[str, str]]) -> list[str]:
    """``path:line: importer -> imported (why)`` for each import by string in ``sources`` ((path relative to the
    repository, text)) that the layers forbid, as import-linter would for an import statement: a module may import
    its own package and the layers below; the entry points (``exhaustive_ignores``) and the package's own
    ``__init__`` (``autograder.check``, which import-linter leaves outside the layers too) may import anything."""
    ranks, entry_points = _import_layers()
    wrong = []
    for path, text in sources:
        importer = _module_name(path)
        mine = importer.split(".")[1] if "." in importer else ""
        for line, imported in string_imports(text):
            theirs = imported.split(".")[1] if "." in imported else ""
            if not mine or mine in entry_points or not theirs or theirs == mine or theirs not in ranks:
                continue
            (rank, independent), (their_rank, _) = ranks[mine], ranks[theirs]
            if their_rank < rank:
                wrong.append(f"{path}:{line}: {importer} -> {imported} ({mine} is below {theirs})")
            elif their_rank == rank and independent:
                wrong.append(f"{path}:{line}: {importer} -> {imported} ({mine} | {theirs}: independent)")
    return wrong


def _kit_sources() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / "autograder").rglob("*.py"))]


def test_imports_by_string_keep_the_layers():
    """An import by string (a registry's modules, the command table, the template's preloads) is an arrow
    import-linter cannot see: each one that names a module of the kit is held to the same layers."""
    sources = _kit_sources()
    found = {(_module_name(path), imported) for path, text in sources for _, imported in string_imports(text)}
    assert len(found) >= 20, sorted(found)     # 26 when written
    assert {("autograder.reports.lms", "autograder.reports.lms_canvas"),     # FORMAT_MODULES
            ("autograder.reports.lms", "autograder.reports"),                 # f"autograder.reports.{module}"
            ("autograder.exports.targets", "autograder.exports.otter"),       # TARGET_MODULES
            ("autograder.inside.template", "autograder.inside.probes"),       # TEMPLATE_MODULES
            ("autograder.cli", "autograder.commands.grade"),                  # COMMANDS
            ("autograder.cli", "autograder.sandbox.launch"),                  # EARLY
            ("autograder", "autograder.exports.nbgrader_cells"),              # autograder.check's nbgrader bridge
            } <= found
    missing = [m for _, m in found if not (ROOT / Path(*m.split("."))).with_suffix(".py").is_file()
               and not (ROOT / Path(*m.split(".")) / "__init__.py").is_file()]
    assert not missing, missing
    wrong = wrong_string_imports(sources)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path, source, arrow", [
    ("autograder/selfcheck/kernel.py",
     'import importlib\n\n\ndef f():\n    return importlib.import_module("autograder.exports.nbgrader_cells")\n',
     "autograder/selfcheck/kernel.py:5: autograder.selfcheck.kernel -> autograder.exports.nbgrader_cells "
     "(selfcheck is below exports)"),
    ("autograder/catalog/scoring.py",
     'import importlib\n\nMODULES = ("autograder.catalog.outcomes", "autograder.grading.lanes")\n\n\n'
     'def f():\n    return [importlib.import_module(m) for m in MODULES]\n',
     "autograder/catalog/scoring.py:7: autograder.catalog.scoring -> autograder.grading.lanes "
     "(catalog is below grading)"),
    ("autograder/reports/lms.py",
     'from importlib import import_module\n\n\ndef f(name):\n    return import_module(f"autograder.service.{name}")\n',
     "autograder/reports/lms.py:5: autograder.reports.lms -> autograder.service (reports is below service)"),
    ("autograder/core/points.py", '__import__("autograder.inside.probes")\n',
     "autograder/core/points.py:1: autograder.core.points -> autograder.inside.probes (core is below inside)"),
    ("autograder/selfcheck/render.py", 'import importlib\nimportlib.import_module("autograder.reports.lms")\n',
     "autograder/selfcheck/render.py:2: autograder.selfcheck.render -> autograder.reports.lms "
     "(selfcheck | reports: independent)"),
    ("autograder/reports/lms.py", 'import importlib\nimportlib.import_module("autograder.catalog.scoring")\n', None),
    ("autograder/cli.py", 'import importlib\nimportlib.import_module("autograder.service.app")\n', None),
    ("autograder/exports/targets.py", 'import importlib\nimportlib.import_module("autograder.exports.otter")\n', None),
])
def test_an_import_by_string_going_up_is_refused(path, source, arrow):
    """The check names the file, the line and the arrow; a lower layer, the same package or an entry point pass."""
    assert wrong_string_imports([(path, source)]) == ([arrow] if arrow else [])


# -- no import circle, every import counted ----------------------------------------------------------------------
def _components(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return components


def _round(edges: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """The shortest way round ``component`` from its first module back to it: ``[a, b, c, a]``."""
    inside, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        nxt = sorted(w for w in edges.get(v, ()) if w in inside)
        if start in nxt:
            return [*paths[v], start]
        for w in nxt:
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(component)     # a strongly connected component always leads back


def import_circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module, as one circle through its first module."""
    return [_round(edges, component) for component in _components(edges)]


def test_import_circles_are_found_and_named():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert import_circles(edges) == [["a", "b", "c", "a"]]
    assert import_circles({"x": {"y"}, "y": set()}) == []


def test_no_module_of_the_kit_is_in_an_import_circle():
    """No circle among the kit's modules, packages with their own modules included, counting every import: at a
    module's top, inside a function and under ``if TYPE_CHECKING:`` (which import-linter's acyclic contract leaves
    out). A type named back up the package is a Protocol of what is used, or moves down to where both can import it."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("autograder", exclude_type_checking_imports=False, cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert len(edges) >= 150
    assert "autograder.selfcheck" in edges["autograder"]                    # in a function (autograder.check)
    assert "autograder.selfcheck.kernel" in edges["autograder.selfcheck"]   # under TYPE_CHECKING (lazy exports)
    circles = import_circles(edges)
    named = []
    for circle in circles:
        steps = []
        for a, b in zip(circle, circle[1:]):
            lines = sorted(d["line_number"] for d in graph.get_import_details(importer=a, imported=b))
            steps.append(f"{a} -> {b} (line {', '.join(map(str, lines))})")
        named.append("; ".join(steps))
    assert not circles, "\n".join(named)
