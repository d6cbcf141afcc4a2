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
from autograder.course.config import Limits, load_course
from autograder.course.notebook import Cell
from autograder.inside.probes import Request
from autograder.reports.feedback import feedback_markdown

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
        # The reference's own kind of exception (a ValueError, as the student's own function would raise).
        reply = worker(Request("f", (torch.ones(1),), {}, stand_ins={"g": _raises}))
        assert (reply.status, reply.error_type) == ("error", "ValueError") and "refuses" in reply.error
        assert worker(Request("f", (torch.ones(1),), {})).status == "ok"


def _absolute(x):
    return x.abs()


def _raises(x):
    raise ValueError("the reference refuses")


class _Scale(torch.nn.Module):
    """A reference module class: a weight, a buffer, a plain attribute, a submodule."""

    def __init__(self, n, factor=2.0):
        super().__init__()
        if n < 1:
            raise ValueError("n must be positive")
        self.n = n
        self.weight = torch.nn.Parameter(torch.full((n,), factor))
        self.register_buffer("offset", torch.arange(n, dtype=torch.float32))
        self.inner = torch.nn.Linear(n, 1, bias=False)

    def forward(self, x):
        return x * self.weight + self.offset + self.inner.weight.sum()


MODULE_CELLS = ["import torch",
                "def run(n, x):\n    m = Scale(n)\n    return m(x), sorted(m.state_dict()), m.n, type(m).__name__",
                "def grad(n, x):\n    m = Scale(n).double()\n    m(x).sum().backward()\n"
                "    return m.weight.grad, m.inner.weight.grad",
                "def built(*args):\n    try:\n        Scale(*args)\n    except Exception as exc:\n"
                "        return type(exc).__name__, str(exc)\n    return 'built'"]


def test_a_module_class_is_answered_by_its_reference_with_its_parameters_and_gradients(sandbox):
    """An earlier exercise's class (4.4's MultiHeadAttention in 5.4): the worker holds the reference's
    parameters and buffers under their names, and each forward is answered on the trusted side with them."""
    x = torch.tensor([1.0, -1.0, 0.5])
    with sandbox.open([Cell(i, None, s, s, None) for i, s in enumerate(MODULE_CELLS)], label="modules") as worker:
        got = worker(Request("run", (3, x), {}, stand_ins={"Scale": _Scale})).value().to_python()
        want = x * 2.0 + torch.arange(3.0)
        out, names, n, cls = got
        assert names == ["inner.weight", "offset", "weight"] and n == 3 and cls == "Scale"
        # The reference's initialization under a fixed seed: the same Linear weights on every call.
        torch.manual_seed(0)
        inner = torch.nn.Linear(3, 1, bias=False).weight.detach().sum()
        assert torch.allclose(out, want + inner, atol=1e-6), (out, want + inner)
        grads = worker(Request("grad", (3, x.double()), {}, stand_ins={"Scale": _Scale})).value().to_python()
        assert torch.equal(grads[0], x.double()) and torch.equal(grads[1], torch.full((1, 3), 3.0, dtype=torch.float64))
        # The reference's ValueError is the student's ValueError; what the grader refuses to build, a RuntimeError.
        said = worker(Request("built", (0,), {}, stand_ins={"Scale": _Scale})).value().to_python()
        assert said[0] == "ValueError" and "n must be positive" in said[1]
        for args, why in (((10**7,), "too large"), ((torch.ones(1),), "numbers and flags only"),
                          (("x" * 200,), "too long")):
            said = worker(Request("built", args, {}, stand_ins={"Scale": _Scale})).value().to_python()
            assert said[0] == "RuntimeError" and why in said[1], said
        assert worker(Request("run", (2, x[:2]), {})).status == "error"     # no stand-in asked: the student's (none)


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


@pytest.mark.slow
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


def test_builds_on_names_only_earlier_exercises(course_root):
    from autograder.course.config import parse_course
    from autograder.core.errors import ConfigError

    data = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    data["assignments"][1]["exercises"][1]["builds_on"] = ["2.3"]
    with pytest.raises(ConfigError, match=r"exercise 2.2: builds_on: '2.3' is not an earlier exercise"):
        parse_course(data)
    data["assignments"][1]["exercises"][1]["builds_on"] = ["3.1"]
    with pytest.raises(ConfigError, match=r"'3.1' is not an exercise of assignment 02_qkv_attention or of an "
                                          r"assignment before it"):
        parse_course(data)
    data["assignments"][1]["exercises"][1]["builds_on"] = ["9.9"]
    with pytest.raises(ConfigError, match=r"'9.9' is not an exercise of assignment 02_qkv_attention"):
        parse_course(data)
    data["assignments"][1]["exercises"][1]["builds_on"] = ["1.1"]     # a pasted answer of an earlier assignment
    assert parse_course(data).exercise("2.2")[1].builds_on == ["1.1"]


# -- answers pasted from an earlier assignment, and dependencies followed through --------------------------
WRONG_SPLIT = ("def split_heads(x, num_heads):\n"
               "    B, T, E = x.shape\n"
               "    if E % num_heads != 0:\n        raise ValueError('E % H')\n"
               "    return x.reshape(B, T, E // num_heads, num_heads).permute(0, 3, 1, 2)\n")

NO_OUT_BIAS = """class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("E % H")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        out, w = multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                                      self.out_proj.weight, self.out_proj.bias, key_padding_mask, attn_mask)
        return out - self.out_proj.bias, w
"""

POST_NORM = """class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        a, _ = self.self_attn(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        x = layer_norm(x + a, self.norm1.weight, self.norm1.bias)
        f = feed_forward(x, self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias)
        return layer_norm(x + f, self.norm2.weight, self.norm2.bias)
"""


def _lost(by):
    return {e: x["points"] for e, x in by.items() if x["points"] < x["max_points"] - 1e-9}


@pytest.mark.slow
def test_a_mistake_in_an_answer_pasted_from_04_costs_nothing_in_05(tmp_path, course_root):
    """5.4's cell holds the student's 04 answers: 5.4 loses points with a wrong split_heads (4.1) there, so the
    answers it calls are judged by their own checks for no points, and 5.4, 5.5 and 5.8, which call 4.1, are
    graded with the reference in its place; a wrong MultiHeadAttention (4.4, a class) likewise; with the
    cascade the same mistake costs 05's points."""
    course = load_course(course_root / "course.yml")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("05_transformer_block", "5.4", "split_heads", WRONG_SPLIT)
        result = session.grade("05_transformer_block", "ada", nb)
        by = _by_exercise(result)
        assert _lost(by) == {} and result["points"] == 14
        for e in ("5.4", "5.5", "5.8"):
            assert {"exercise": "4.1", "function": "split_heads"} in by[e]["stand_ins"], e
        judged = {p["exercise"]: p for p in result["pasted"]}
        assert sorted(judged) == ["4.1", "4.2", "4.3", "4.4"]      # what 5.4 calls (5.6's 3.4 got every point)
        assert [e for e, p in judged.items() if not p["passed"]] == ["4.1"]
        assert {c["mistake"] for c in judged["4.1"]["failed"]} >= {"split-as-d-h"}
        # 4.3 was judged with 4.1 answered by the reference: one mistake, one pasted answer that fails
        assert judged["4.3"]["stand_ins"] == [{"exercise": "4.1", "function": "split_heads"}]
        feedback = feedback_markdown(result, course, "zh")
        assert "没有通过 4.1 自己的检查" in feedback and "同一个错误只扣一次" in feedback

        nb = session.notebooks.notebook("05_transformer_block", "5.4", "MultiHeadAttention", NO_OUT_BIAS)
        by = _by_exercise(result := session.grade("05_transformer_block", "ada", nb))
        assert _lost(by) == {} and result["points"] == 14
        assert [p["exercise"] for p in result["pasted"] if not p["passed"]] == ["4.4"]
        assert by["5.4"]["stand_ins"] == [{"exercise": "4.4", "function": "MultiHeadAttention"}]

        # An honest notebook: no pasted answer judged, nothing graded twice.
        honest = session.grade("05_transformer_block", "ada", session.notebooks.notebook("05_transformer_block"))
        assert honest["points"] == 14 and "pasted" not in honest

    cascade = _course_copy(course_root, earlier_mistakes="cascade")
    with GradingSession(cascade, tmp_path / "cascade") as session:
        nb = session.notebooks.notebook("05_transformer_block", "5.4", "MultiHeadAttention", NO_OUT_BIAS)
        by = _by_exercise(session.grade("05_transformer_block", "ada", nb))
        assert {"5.4", "5.5"} <= set(_lost(by)), by


@pytest.mark.slow
def test_a_wrong_block_costs_its_points_once_and_dependencies_are_followed_through(tmp_path, course_root):
    """A post-norm 5.4: TinyLM (5.5) is graded with the reference's block, a class answered from the trusted side,
    gradients included. In 04, a wrong 4.1 costs 4.4 nothing: 4.4 calls the student's 4.3, which calls 4.1."""
    course = load_course(course_root / "course.yml")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("05_transformer_block", "5.4", "TransformerBlock", POST_NORM)
        by = _by_exercise(session.grade("05_transformer_block", "ada", nb))
        assert set(_lost(by)) == {"5.4"}
        assert by["5.5"]["stand_ins"] == [{"exercise": "5.4", "function": "TransformerBlock"}]

        nb = session.notebooks.notebook("04_multi_head_attention", "4.1", "split_heads", WRONG_SPLIT)
        by = _by_exercise(session.grade("04_multi_head_attention", "ada", nb))
        assert set(_lost(by)) == {"4.1"}
        assert by["4.4"]["stand_ins"] == [{"exercise": "4.1", "function": "split_heads"}]


NO_TANH = ("def rnn_forward(seq, W_hh=0.9, W_xh=0.5):\n    h = 0.0\n    for x in seq:\n"
           "        h = W_hh * h + W_xh * float(x)\n    return float(h)\n")


def test_a_stand_in_takes_and_gives_sequences_of_any_length(tmp_path, course_root, sandbox):
    """Issue 55, 1: 1.4 calls rnn_forward on sequences longer than 64 items; with 1.2 wrong, the reference answers
    those calls from the trusted side, so the sequence crosses the boundary (it came back opaque: 1.4 lost a
    check). Both directions: a long list in, a long list out."""
    x = torch.arange(3.0)
    with worker_of(sandbox) as worker:
        long_in = worker(Request("f", (list(range(500)),), {}, stand_ins={"g": lambda seq: float(sum(seq))}))
        assert long_in.status == "ok" and long_in.value().to_python() == float(sum(range(500))) + 1
        long_out = worker(Request("later", (x,), {}, stand_ins={"kept": lambda t: [float(v) for v in range(300)]}))
        assert long_out.status == "ok" and long_out.value().to_python() == [float(v) for v in range(300)], long_out
    course = load_course(course_root / "course.yml")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("01_rnn_decay", "1.2", "rnn_forward", NO_TANH)
        by = _by_exercise(session.grade("01_rnn_decay", "ada", nb))
        assert set(_lost(by)) == {"1.2"}, by
        assert by["1.4"]["stand_ins"] == [{"exercise": "1.2", "function": "rnn_forward"}]


# 4.3 without the 1/sqrt(d) scale (it loses points), taking None for "no bias" as its own 4.4 needs.
UNSCALED_43 = '''def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                         out_proj_weight, out_proj_bias, key_padding_mask=None):
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0) if in_proj_bias is not None else (0, 0, 0)
    q = split_heads(query @ W_q.T + b_q, num_heads)
    k = split_heads(key @ W_k.T + b_k, num_heads)
    v = split_heads(value @ W_v.T + b_v, num_heads)
    scores = q @ k.transpose(-2, -1)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    out = merge_heads(weights @ v) @ out_proj_weight.T
    return (out + out_proj_bias if out_proj_bias is not None else out), weights
'''
def test_a_stand_in_accepts_every_call_a_correct_dependent_exercise_makes(tmp_path, course_root):
    """Issue 55, 2: with 4.3 wrong, the reference 4.3 answers 4.4's calls; a correct 4.4 with bias=False passes
    None for the biases (its student's own 4.3 takes it), and the reference took it as an error (0.86 of 3 lost)."""
    from autograder import catalog as C
    from autograder.authoring.alternatives import alternative_source

    course = load_course(course_root / "course.yml")
    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    # The correct 4.4 that hands its biases to 4.3 as they are (None with bias=False): a declared alternative.
    as_they_are = next(a for a in C.ALTERNATIVES["4.4"] if a.name == "biases-as-they-are")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("04_multi_head_attention", "4.3", "multi_head_attention", UNSCALED_43,
                                        also=(("4.4", "MultiHeadAttention",
                                               alternative_source(as_they_are, "MultiHeadAttention")),))
        by = _by_exercise(session.grade("04_multi_head_attention", "ada", nb))
        assert set(_lost(by)) == {"4.3"}, by
        assert by["4.4"]["stand_ins"][0]["exercise"] == "4.3"


@pytest.mark.slow
def test_validate_grades_a_dependent_alternative_on_the_substitution_path_too(tmp_path, course_root):
    """Issue 55, 2: validate proves a stand-in takes what a correct answer passes. The alternative 4.4 that hands
    its None biases to 4.3 keeps full marks with the notebook's own 4.3; with the reference 4.3 made to refuse
    None again (solutions/ only: the notebooks' 4.3 still takes it), only the substitution path sees the loss."""
    from autograder import catalog as C
    from autograder.authoring.alternatives import grade_alternatives

    course = load_course(course_root / "course.yml")
    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    try:
        alt = next(a for a in C.ALTERNATIVES["4.4"] if a.name == "biases-as-they-are")
        (fair,) = grade_alternatives(course, [alt], seeds=1, jobs=1, workdir=tmp_path / "fair")
        assert fair.fair, fair.lost
        solutions = course_root / "solutions" / "multi_head_attention.py"
        text = solutions.read_text(encoding="utf-8")
        strict = text.replace("in_proj_bias.chunk(3, dim=0) if in_proj_bias is not None else (0.0,) * 3",
                              "in_proj_bias.chunk(3, dim=0)")
        assert strict != text
        solutions.write_text(strict, encoding="utf-8")
        import sys

        for name in [n for n in sys.modules if n.startswith("autograder_course.solutions")]:
            del sys.modules[name]           # (the references as they are now on disk)
        (unfair,) = grade_alternatives(course, [alt], seeds=1, jobs=1, workdir=tmp_path / "unfair")
        assert not unfair.fair and unfair.lost
        assert all(loss.startswith("4.4/") and "answered by the references" in loss for loss in unfair.lost)
    finally:
        C.load_catalog(load_course(), hidden=True, mistakes=True, alternatives=True)


# -- a forbidden call in an earlier function (issue 64, class 2) ------------------------------------------
def _softmax_reference(x):
    """A reference that itself calls what the dependent exercise forbids: it runs on the trusted side."""
    return torch.nn.functional.softmax(x, -1)


def test_the_guards_see_the_students_own_earlier_function_and_never_a_stand_in(sandbox):
    """A forbidden call inside the student's own earlier function, called from the exercise being graded, is that
    exercise's (its call made it); a stand-in answers from the trusted side, where no guard sees anything."""
    cells = ["import torch.nn.functional as F", "def g(x):\n    return F.softmax(x, -1)",
             "def f(x):\n    return g(x) * 2"]
    x = torch.tensor([1.0, 2.0, 3.0])
    with sandbox.open([Cell(i, None, s, s, None) for i, s in enumerate(cells)], label="forbidden-earlier") as worker:
        own = worker(Request("f", (x,), {}, forbidden=("F.softmax",)))
        assert own.status == "ok" and own.forbidden == ["F.softmax"]
        stood_in = worker(Request("f", (x,), {}, forbidden=("F.softmax",), stand_ins={"g": _softmax_reference}))
        assert stood_in.status == "ok" and stood_in.forbidden == [], stood_in
        assert torch.allclose(stood_in.value().tensor(), torch.softmax(x, -1) * 2)


def _calls_sdpa_43() -> str:
    """4.3's known mistake ``calls-sdpa`` as a student's cell: right values, F.scaled_dot_product_attention."""
    from autograder import catalog as C
    from autograder.authoring.alternatives import alternative_source

    C.load_catalog(load_course(), hidden=True, mistakes=True)
    mistake = next(m for m in C.MISTAKES["4.3"] if m.name == "calls-sdpa")
    return alternative_source(mistake, "multi_head_attention")


def _scanned(exercise: dict) -> list[dict]:
    return [c for c in exercise["checks"] if c["check"] == "source-scan"]


def test_a_forbidden_call_in_an_earlier_function_costs_its_points_once(tmp_path, course_root):
    """Issue 64, class 2: a 4.3 that calls SDPA loses 4.3's points (its checks and the static scan), and 4.4, graded
    with the reference 4.3 standing in, keeps all of its own: the scan reads only the code that ran for 4.4."""
    course = load_course(course_root / "course.yml")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("04_multi_head_attention", "4.3", "multi_head_attention", _calls_sdpa_43())
        result = session.grade("04_multi_head_attention", "ada", nb)
        by = _by_exercise(result)
        assert _lost(by) == {"4.3": 0.0}, by
        assert by["4.3"]["status"] == "forbidden"
        assert _scanned(by["4.3"])[0]["forbidden"] == ["F.scaled_dot_product_attention"]
        assert {c["mistake"] for c in by["4.3"]["checks"] if c["check"] != "source-scan"} == {"calls-sdpa"}
        assert by["4.4"]["points"] == by["4.4"]["max_points"] == 3 and by["4.4"]["status"] == "passed"
        assert by["4.4"]["stand_ins"] == [{"exercise": "4.3", "function": "multi_head_attention"}]
        assert not _scanned(by["4.4"])
        assert result["points"] == result["max_points"] - by["4.3"]["max_points"]


# The 05 notebook's own multi_head_attention (it takes an attn_mask), pasted with SDPA computing the heads' output:
# the guards see it when it runs; the fast path for long inputs is never run by a check: only the static scan sees it.
SDPA_PASTED = '''import torch.nn.functional as F


def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                         out_proj_weight, out_proj_bias, key_padding_mask=None, attn_mask=None):
    E = query.shape[-1]
    W_q, W_k, W_v = in_proj_weight.chunk(3, dim=0)
    b_q, b_k, b_v = in_proj_bias.chunk(3, dim=0) if in_proj_bias is not None else (0.0,) * 3
    q = split_heads(query @ W_q.T + b_q, num_heads)
    k = split_heads(key @ W_k.T + b_k, num_heads)
    v = split_heads(value @ W_v.T + b_v, num_heads)
    hidden = torch.zeros(q.shape[0], 1, q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, None, :]
    if attn_mask is not None:
        hidden = hidden | attn_mask
    dead = hidden.all(dim=-1, keepdim=True)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)).masked_fill(hidden, float("-inf"))
    weights = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(hidden, 0.0)
    if LONG:
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=~hidden | dead).masked_fill(dead, 0.0)
    else:
        heads = weights @ v
    out = merge_heads(heads) @ out_proj_weight.T
    return (out + out_proj_bias if out_proj_bias is not None else out), weights
'''


@pytest.mark.parametrize("when, failed_by", [("True", "checks"), ("query.shape[1] > 100_000", "source-scan")],
                         ids=["the guards see it", "only the scan sees it"])
def test_a_forbidden_call_in_an_answer_pasted_from_04_costs_nothing_in_05(tmp_path, course_root, when, failed_by):
    """Issue 64, class 2: SDPA inside the multi_head_attention pasted into 05 fails that pasted answer's own
    judgement (4.3's checks, or the static scan read for 4.3), for no points; 5.4 and 5.5 are graded with the
    reference 4.3 in its place, and the scan, which reads only the code that ran for them, finds nothing there
    (it zeroed 5.4 and 5.5 before: 0 of 3 and 0 of 2)."""
    course = load_course(course_root / "course.yml")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("05_transformer_block", "5.4", "multi_head_attention",
                                        SDPA_PASTED.replace("if LONG:", f"if {when}:"))
        result = session.grade("05_transformer_block", "ada", nb)
        by = _by_exercise(result)
        assert _lost(by) == {} and result["points"] == result["max_points"] == 14, by
        assert not any(_scanned(e) for e in by.values())
        for e in ("5.4", "5.5"):
            assert {"exercise": "4.3", "function": "multi_head_attention"} in by[e]["stand_ins"], e
        judged = {p["exercise"]: p for p in result["pasted"]}
        assert [e for e, p in judged.items() if not p["passed"]] == ["4.3"]
        assert judged["4.3"]["status"] == "forbidden"
        scan_rows = [c for c in judged["4.3"]["failed"] if c["check"] == "source-scan"]
        assert scan_rows and scan_rows[0]["forbidden"] == ["F.scaled_dot_product_attention"]
        if failed_by == "source-scan":       # every check of it passed: the scan alone failed it
            assert [c["check"] for c in judged["4.3"]["failed"]] == ["source-scan"]
        else:
            assert {c["status"] for c in judged["4.3"]["failed"]} == {"forbidden"} and len(judged["4.3"]["failed"]) > 1
        assert "没有通过 4.3 自己的检查" in feedback_markdown(result, course, "zh")


def test_the_in_kernel_routes_follow_the_same_rule(monkeypatch, course):
    """nbgrader's test cells grade 4.4 with the reference 4.3 in place of the one that calls SDPA (in the kernel: the
    reference runs under 4.4's guards and calls nothing 4.4 forbids); the self-check, which holds no reference to
    substitute, shows the call 4.4 made through the student's 4.3 and says to fix 4.3 first."""
    from autograder.exports import nbgrader_cells
    from autograder.exports.nbgrader_cells import grade_exercise
    from autograder.selfcheck.kernel import self_check

    monkeypatch.setenv("AUTOGRADER_COURSE", str(course.root / "course.yml"))
    assignment = course.assignment("04_multi_head_attention")
    ns: dict = {}              # as a kernel holds them: every function looks its helpers up in this namespace
    exec(compile((course.root / "solutions" / f"{assignment.module}.py").read_text(encoding="utf-8"), "solution",
                 "exec"), ns)
    exec(compile(_calls_sdpa_43(), "student", "exec"), ns)
    nbgrader_cells._LOST.clear()
    nbgrader_cells._JUDGED.clear()
    try:
        own = grade_exercise("4.3", namespace=ns, student="ada")
        assert own.points == 0 and own.result.status.value == "forbidden"
        built_on = grade_exercise("4.4", namespace=ns, student="ada")
        assert built_on.points == 3, built_on.result
        assert "同一个错误只扣一次" in built_on._repr_html_()          # the note: 4.3 answered by the reference
    finally:
        nbgrader_cells._LOST.clear()
        nbgrader_cells._JUDGED.clear()

    checked = self_check(ns, "4.4", language="en", course=course, fingerprints={})
    (result,) = checked.exercises
    assert result.status.value == "forbidden"
    assert any("calls your multi_head_attention (exercise 4.3), which fails its own public checks" in n.message.en
               for n in checked.notes), checked.notes
