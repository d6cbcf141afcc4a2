"""A mistake costs its points once: an exercise built on an earlier one whose function lost points is graded
with the reference answering those calls from the trusted side (course.yml ``builds_on``,
``earlier_mistakes``). The sandbox's side first (the proxy, its gradients, what the grader refuses), then
whole notebooks graded as ``autograder grade`` grades them.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from autograder.authoring.session import GradingSession
from autograder.config import Limits, load_course
from autograder.notebook import Cell
from autograder.probes import Request
from autograder.reports.feedback import feedback_markdown
from autograder.sandbox import Sandbox

LIMITS = Limits(call_seconds=2.0, submission_seconds=60, cpu_seconds=30, memory_mb=512, output_mb=16,
                file_mb=1, processes=0)

CELLS = [
    "import torch",
    "def g(x):\n    return x * 2",
    "def f(x):\n    global kept\n    kept = g\n    return g(x) + 1",
    "def later(x):\n    return kept(x)",
    "def careful(x):\n    try:\n        return g('not a tensor')\n"
    "    except RuntimeError as exc:\n        return str(exc)",
]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as sb:
        yield sb


def worker_of(sandbox):
    return sandbox.open([Cell(i, None, s, s, None) for i, s in enumerate(CELLS)], label="stand-ins")


def three_times(x):
    return x * 3


def test_the_grader_answers_the_earlier_function_and_gradients_flow_through(sandbox):
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float32)
    with worker_of(sandbox) as worker:
        plain_call = worker(Request("f", (x,), {}))
        assert plain_call.status == "ok" and torch.equal(plain_call.value().tensor(), x * 2 + 1)
        stood_in = worker(Request("f", (x,), {}, stand_ins={"g": three_times}))
        got = stood_in.value().tensor()
        assert stood_in.status == "ok" and got.dtype == torch.float32 and torch.equal(got, x * 3 + 1)
        # The backward pass is the trusted side's too: d(3x + 1)/dx = 3, never the student's 2.
        grad = worker(Request("f", ((0,), torch.ones(3), x), {}, probe="grad", stand_ins={"g": three_times}))
        assert grad.status == "ok", grad
        assert torch.equal(grad.value().to_python()["grads"][0], torch.full((3,), 3.0))
        # The namespace is the student's again after the call.
        assert torch.equal(worker(Request("f", (x,), {})).value().tensor(), x * 2 + 1)


def test_a_stand_in_kept_for_later_answers_nothing_outside_its_call(sandbox):
    """A student who keeps the proxy and calls it in another exercise's call gets that call failed:
    the grader answers only the names a request lists, only while that request runs."""
    x = torch.ones(2, dtype=torch.float64)
    with worker_of(sandbox) as worker:
        assert worker(Request("f", (x,), {}, stand_ins={"g": three_times})).status == "ok"
        kept = worker(Request("later", (x,), {}))
        assert kept.status == "crashed"
        # The handle starts a fresh worker: the cells again, a normal call works.
        again = worker(Request("f", (x,), {}))
        assert again.status == "ok" and torch.equal(again.value().tensor(), x * 2 + 1)


def test_arguments_the_reference_refuses_raise_in_the_students_code(sandbox):
    with worker_of(sandbox) as worker:
        reply = worker(Request("careful", (torch.ones(1),), {}, stand_ins={"g": _absolute}))
        assert reply.status == "ok" and "AttributeError" in reply.value().to_python()
        # Uncaught, it is the student's error like any other; the worker goes on.
        reply = worker(Request("f", (torch.ones(1),), {}, stand_ins={"g": _raises}))
        assert (reply.status, reply.error_type) == ("error", "RuntimeError") and "refuses" in reply.error
        assert worker(Request("f", (torch.ones(1),), {})).status == "ok"


def _absolute(x):
    return x.abs()


def _raises(x):
    raise ValueError("the reference refuses")


# -- whole notebooks ---------------------------------------------------------------------------------
NO_SCALE = "def attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"
LOOPS = "def attention_scores(Q, K):\n    while True:\n        pass\n"


def _course_copy(course_root: Path, **changes) -> object:
    data = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    data.update(changes)
    (course_root / "course.yml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
                                            encoding="utf-8")
    return load_course(course_root / "course.yml")


def _by_exercise(result):
    return {e["exercise"]: e for e in result["exercises"]}


def test_a_wrong_earlier_function_costs_its_points_once(tmp_path, course_root):
    course = _course_copy(course_root, limits={**load_course(course_root).limits.model_dump(), "call_seconds": 3})
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("02_qkv_attention", "2.3", "attention_scores", NO_SCALE)
        result = session.grade("02_qkv_attention", "ada", nb)
        by = _by_exercise(result)
        assert by["2.3"]["points"] < by["2.3"]["max_points"]
        assert by["2.4"]["points"] == by["2.4"]["max_points"], by["2.4"]
        assert by["2.4"]["stand_ins"] == [{"exercise": "2.3", "function": "attention_scores"}]
        assert "stand_ins" not in by["2.2"]
        feedback = feedback_markdown(result, course, "zh")
        assert "同一个错误只扣一次" in feedback and "attention\\_scores（练习 2.3）" in feedback   # Markdown-escaped
        assert result["status"] == "graded"

        # 2.3 loops: each of its checks times out, and the correct 2.4 still gets every point.
        nb = session.notebooks.notebook("02_qkv_attention", "2.3", "attention_scores", LOOPS)
        by = _by_exercise(session.grade("02_qkv_attention", "bea", nb))
        assert by["2.3"]["status"] == "timeout" and by["2.3"]["points"] == 0
        assert by["2.4"]["points"] == by["2.4"]["max_points"], by["2.4"]


def test_a_course_can_choose_the_cascade(tmp_path, course_root):
    course = _course_copy(course_root, earlier_mistakes="cascade")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("02_qkv_attention", "2.3", "attention_scores", NO_SCALE)
        by = _by_exercise(session.grade("02_qkv_attention", "ada", nb))
        assert by["2.4"]["points"] < by["2.4"]["max_points"] and "stand_ins" not in by["2.4"]


def test_builds_on_names_only_earlier_exercises_of_its_assignment(course_root):
    from autograder.config import parse_course
    from autograder.errors import ConfigError

    data = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    data["assignments"][1]["exercises"][1]["builds_on"] = ["2.3"]
    with pytest.raises(ConfigError, match=r"exercise 2.2: builds_on: '2.3' is not an earlier exercise"):
        parse_course(data)
    data["assignments"][1]["exercises"][1]["builds_on"] = ["1.1"]
    with pytest.raises(ConfigError, match=r"'1.1' is not an exercise of assignment 02_qkv_attention"):
        parse_course(data)
