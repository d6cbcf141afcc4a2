"""The engine is not the course: autograder/ names no exercise, function, assignment or notebook of a
course (course.yml and each assignment's folder declare them). Torch's own API may be named where the
engine knows torch (:data:`TORCH_TABLES`)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autograder.course.config import grade_id, load_course
from autograder.course.files import PACKAGE
from support import ROOT

#: Where the engine's knowledge of torch's API lives: the forbidden-call table (names of torch functions
#: and operators), the guard and the static scan that read it (its vocabulary, its resolver and its
#: walk), the tensor-aware mutation operators, and the similarity report's equivalent torch spellings.
TORCH_TABLES = {"forbidden.py", "probes.py", "guards.py", "scan_vocabulary.py", "source_scan.py", "scan_walk.py",
                "operators.py", "normalize.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_torch_api(word: str) -> bool:
    return any(hasattr(namespace, word) for namespace in (torch, F, torch.nn, torch.Tensor, torch.ops.aten))


def course_words(course_yml: Path) -> set[str]:
    course = load_course(course_yml)
    words = set()
    for a in course.assignments:
        words |= {a.id, a.module, a.notebook}
        for e in a.exercises:
            words |= {e.id, e.function, grade_id(e.id)}
    return words


def engine_mentions(words: set[str], package: Path = PACKAGE) -> list[str]:
    """file:line word, for every identifier or string (not a docstring) of the engine naming a course word."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if "data" in path.relative_to(package).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            named = []
            if isinstance(node, ast.Name):
                named = [node.id]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                named = [node.name]
            elif isinstance(node, ast.arg):
                named = [node.arg]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value
                named = [w for w in words if w == text or (len(w) > 4 and w in text.replace("(", " ").split())]
            for word in named:
                if word in words and not (path.name in TORCH_TABLES and _is_torch_api(word)):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} {word}")
    return found


@pytest.mark.slow
def test_the_engine_names_no_exercise_of_either_course() -> None:
    for course in (ROOT / "course.yml", ROOT / "tests" / "courses" / "tiny" / "course.yml"):
        assert engine_mentions(course_words(course)) == [], course


def test_the_detector_finds_a_course_name_in_engine_code(tmp_path: Path) -> None:
    """The scan is not vacuous: a function, a string or an exercise ID of the course in engine code is found;
    a docstring's example is not."""
    package = tmp_path / "autograder"
    package.mkdir()
    (package / "leaky.py").write_text(
        '"""An example in a docstring: check("2.4") on 02_qkv_attention.ipynb."""\n'
        "def scaled_dot_product_attention(q):\n"
        "    return q\n"
        "WHERE = 'source/02_qkv_attention'\n"
        "ID = '2.4'\n", encoding="utf-8")
    found = engine_mentions(course_words(ROOT / "course.yml"), package)
    assert found == ["autograder/leaky.py:2 scaled_dot_product_attention", "autograder/leaky.py:5 2.4"], found


def test_torch_module_builds_once_per_key_and_thread_without_moving_the_rng_or_keeping_gradients():
    import threading

    from autograder.catalog.modules import torch_module

    built = []

    def make() -> torch.nn.Linear:
        built.append(1)
        return torch.nn.Linear(3, 2, dtype=torch.float64)

    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    first = torch_module(("test-linear", 3, 2), make)
    assert torch.equal(torch.random.get_rng_state(), state)      # its init drew from a forked RNG
    first(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
    assert first.weight.grad is not None
    again = torch_module(("test-linear", 3, 2), make)
    assert again is first and again.weight.grad is None and len(built) == 1
    assert torch_module(("test-linear", 3, 4), lambda: torch.nn.Linear(3, 4)) is not first
    other: list[torch.nn.Module] = []
    thread = threading.Thread(target=lambda: other.append(torch_module(("test-linear", 3, 2), make)))
    thread.start()
    thread.join()
    assert other[0] is not first and len(built) == 2        # each grading thread its own
