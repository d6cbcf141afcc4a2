"""Forbidden calls are found where they cannot be dodged; tampering costs the student, never the kit.

Three layers, each tested on the real code: the worker's guards (the operator
actually dispatched, not only the function called), the static scan of the
source on the trusted side, and the sandbox, where a forged or unreadable reply
is the student's outcome rather than "the check itself failed".
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder import catalog as C
from autograder import grading as G
from autograder.inside import guards, plain, probes
from autograder.course.config import load_course
from autograder.course.notebook import Cell, to_python
from autograder.inside.probes import Request, execute
from autograder.sandbox import UNREADABLE_REPLY
from autograder.grading.source_scan import MAX_SOURCE_BYTES, TAMPERING, UNINSPECTABLE, scan_exercise, scan_notebook
from autograder.authoring.validate import solution_for
from support import make_samples

COURSE = load_course()
SOFTMAX = ("torch.softmax", "F.softmax", "Tensor.softmax", "F.log_softmax", "torch.log_softmax")
ATTENTION = ("F.scaled_dot_product_attention", "nn.MultiheadAttention", "F.multi_head_attention_forward")
MHA = ("nn.MultiheadAttention", "F.multi_head_attention_forward", "F.scaled_dot_product_attention")
LOSS = ("F.cross_entropy", "nn.CrossEntropyLoss", "F.nll_loss", "nn.NLLLoss")
LAYER_NORM = ("F.layer_norm", "nn.LayerNorm")
SDPA = "F.scaled_dot_product_attention"
pytestmark = pytest.mark.usefixtures("one_thread")


def used(fn, forbidden, *args) -> list[str]:
    """What the worker's guards report for one call of ``fn`` (it must run)."""
    reply = execute({"f": fn}, Request("f", args, forbidden=tuple(forbidden)))
    assert reply.status == "ok", reply
    return reply.forbidden


def _undisabled(call):
    def run(*args):
        with torch._C.DisableTorchFunction():
            return call(*args)
    return run


X = torch.randn(3, 5, dtype=torch.float64)
Q3 = torch.randn(2, 5, 8)          # not 4-D: sdpa takes its math path
Q4 = torch.randn(2, 2, 5, 8)       # 4-D: sdpa's fused CPU kernel
LOGITS, TARGETS = torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 0, 1])


def _native_mha(q):
    m = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    with torch.no_grad(), torch._C.DisableTorchFunction():
        return m(q, q, q)[0]       # eval + no_grad: the fused _native_multi_head_attention kernel


# -- the worker's guards: the operator actually dispatched ---------------------------------------
@pytest.mark.parametrize("fn, forbidden, args, expected", [
    (lambda x: torch.special.softmax(x, -1), SOFTMAX, (X,), ["torch.softmax"]),
    (_undisabled(lambda x: F.softmax(x, -1)), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: torch.ops.aten._softmax(x, -1, False), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: torch.ops.aten._softmax.default(x, -1, False), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: torch.ops.aten.softmax.int(x, -1), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: torch._softmax(x, -1, False), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: F.softmin(-x, -1), SOFTMAX, (X,), ["torch.softmax"]),
    (lambda x: x.log_softmax(-1).exp(), SOFTMAX, (X,), ["torch.log_softmax"]),
    (_undisabled(lambda x: x.log_softmax(-1).exp()), SOFTMAX, (X,), ["F.log_softmax"]),
    (_undisabled(lambda q: F.scaled_dot_product_attention(q, q, q)), ATTENTION, (Q3,),
     ["F.scaled_dot_product_attention"]),
    (_undisabled(lambda q: F.scaled_dot_product_attention(q, q, q)), ATTENTION, (Q4,),
     ["F.scaled_dot_product_attention"]),
    (lambda q: torch.ops.aten.scaled_dot_product_attention(q, q, q), ATTENTION, (Q3,),
     ["F.scaled_dot_product_attention"]),
    (_native_mha, MHA, (Q3,), ["nn.MultiheadAttention"]),
    (_undisabled(lambda x, t: F.nll_loss(x, t)), LOSS, (LOGITS, TARGETS), ["F.nll_loss"]),
    (lambda x, t: torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)[0], LOSS, (LOGITS, TARGETS), ["F.nll_loss"]),
    (lambda x: nn.LayerNorm(5, dtype=torch.float64)(x), LAYER_NORM, (X,), ["F.layer_norm"]),
    (_undisabled(lambda x: F.layer_norm(x, (5,))), LAYER_NORM, (X,), ["F.layer_norm"]),
    (lambda x: torch.ops.aten.native_layer_norm(x, [5], None, None, 1e-5)[0], LAYER_NORM, (X,), ["F.layer_norm"]),
], ids=["torch.special.softmax", "DisableTorchFunction", "aten._softmax", "aten._softmax.default",
        "aten.softmax.int", "torch._softmax", "F.softmin", "log_softmax.exp", "disabled log_softmax",
        "disabled sdpa 3-D", "disabled sdpa 4-D", "aten.sdpa", "native mha", "disabled nll_loss",
        "aten.nll_loss_forward", "nn.LayerNorm", "disabled layer_norm", "aten.native_layer_norm"])
def test_dodges_are_caught_at_the_operator_dispatched(fn, forbidden, args, expected):
    assert used(fn, forbidden, *args) == expected


def test_a_forbidden_call_is_named_once_by_what_was_called():
    # Each runs on other forbidden operators (nll_loss_forward, sdpa): only the call itself is named.
    assert used(lambda x, t: nn.CrossEntropyLoss()(x, t), LOSS, LOGITS, TARGETS) == ["F.cross_entropy"]
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    assert used(lambda q: mha(q, q, q, need_weights=False)[0], MHA, Q3) == ["nn.MultiheadAttention"]
    assert used(lambda x: F.softmax(x, -1), SOFTMAX, X) == ["F.softmax"]


def test_layer_norm_by_hand_is_not_a_forbidden_call():
    # 5.2's honest answer: mean, biased variance, rsqrt; none of it is layer_norm's operator.
    def by_hand(x):
        centered = x - x.mean(-1, keepdim=True)
        return centered * torch.rsqrt((centered * centered).mean(-1, keepdim=True) + 1e-5)
    assert used(by_hand, LAYER_NORM, X) == []
    assert torch.allclose(by_hand(X), F.layer_norm(X, (5,)))


def test_only_what_the_exercise_forbids_counts():
    assert used(lambda x: F.softmax(x, -1), ATTENTION, X) == []
    assert used(lambda x, t: -F.log_softmax(x, -1).gather(-1, t[:, None]).mean(), LOSS, LOGITS, TARGETS) == []
    assert used(lambda x: F.softmax(x, -1), (), X) == []


def test_the_guards_ignore_later_changes_to_the_probes_module(monkeypatch):
    """What a cell could do to autograder.inside.probes and .guards after the worker imported them reaches nothing
    execute uses."""
    monkeypatch.setattr(guards, "FORBIDDEN_OBJECTS", {})
    monkeypatch.setattr(guards, "FORBIDDEN_OPERATORS", {})
    monkeypatch.setattr(probes, "PROBES", {"call": lambda fn, *a, **k: torch.zeros(1)})
    monkeypatch.setattr(guards, "TorchFunctionMode", object)
    monkeypatch.setattr(guards, "TorchDispatchMode", object)
    monkeypatch.setattr(probes, "bind_guards", lambda: None)
    monkeypatch.setattr(plain, "encode", lambda *a, **k: b"forged")
    reply = execute({"f": lambda x: F.softmax(x, -1)}, Request("f", (X,), forbidden=SOFTMAX))
    assert reply.status == "ok" and reply.forbidden == ["F.softmax"]
    assert torch.equal(reply.value().tensor(), F.softmax(X, -1))


# -- honest solutions are never flagged ------------------------------------------------------------
def masked_softmax(scores, key_padding_mask):
    """3.2 by hand with logsumexp and masked_fill: exact zeros at padded keys, zeros on a fully padded row."""
    B, Tk = key_padding_mask.shape
    mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)
    s = scores.masked_fill(mask, float("-inf"))
    top = s.amax(dim=-1, keepdim=True)
    shifted = s - top.masked_fill(torch.isinf(top), 0.0)            # all -inf on a fully padded row
    out = torch.exp(shifted - torch.logsumexp(shifted, dim=-1, keepdim=True))
    # a fully padded row, or one whose real keys are all -inf: NaN -> 0 (3.2: no NaN anywhere)
    return out.masked_fill(mask, 0.0).nan_to_num(0.0)


class MultiHeadAttention(nn.Module):
    """4.4 with torch.softmax, which 4.4 allows: its backward (_softmax_backward_data) must not count."""

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None):
        B, Tq, E = query.shape
        H, d = self.num_heads, E // self.num_heads
        bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
        q, k, v = (F.linear(t, w, b).reshape(B, -1, H, d).transpose(1, 2)       # (B, H, T, d)
                   for t, w, b in zip((query, key, value), self.in_proj_weight.chunk(3), bias.chunk(3)))
        scores = q @ k.transpose(-2, -1) / d ** 0.5                              # (B, H, Tq, Tk)
        if key_padding_mask is not None:
            mask = key_padding_mask[:, None, None, :]
            empty = mask.all(-1, keepdim=True)
            weights = torch.softmax(scores.masked_fill(mask & ~empty, float("-inf")), dim=-1)
            weights = weights.masked_fill(mask, 0.0)
        else:
            weights = torch.softmax(scores, dim=-1)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, Tq, E)), weights


def fresh(answer):
    """A new function (or subclass) on each call: the operator level watches the first calls of each."""
    if isinstance(answer, type):
        return type(answer.__name__, (answer,), {})
    return lambda *args, **kwargs: answer(*args, **kwargs)


@pytest.mark.parametrize("exercise, answer", [("3.2", masked_softmax), ("4.4", MultiHeadAttention)])
def test_hand_written_solutions_are_not_flagged(course, exercise, answer):
    _, ex = course.exercise(exercise)

    def every_call_watched(request: Request):
        return execute({ex.function: fresh(answer)}, C.copied(request))

    result = C.run_exercise(ex, every_call_watched,
                            audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN), tolerances=course.tolerances,
                            seed_parts=("forbidden", 0), reference=solution_for(course, exercise))
    assert result.status is C.Status.PASSED, [(r.check, r.message) for r in result.checks if not r.passed]
    assert not any(r.forbidden for r in result.checks)


def test_the_operator_level_watches_the_first_calls_of_each_function():
    """Past them only the function level runs (speed); the static scan reads the dodge's spelling."""
    def softmax(x, dim=-1):
        with torch._C.DisableTorchFunction():
            return F.softmax(x, dim)

    found = [used(softmax, SOFTMAX, X) for _ in range(guards.OPERATOR_WATCHED_CALLS + 1)]
    assert found == [["torch.softmax"]] * guards.OPERATOR_WATCHED_CALLS + [[]]
    assert used(fresh(softmax), SOFTMAX, X) == ["torch.softmax"]

    def honest_looking(x):
        return F.softmax(x, -1)

    assert all(used(honest_looking, SOFTMAX, X) == ["F.softmax"] for _ in range(guards.OPERATOR_WATCHED_CALLS + 2))


def test_a_call_that_returns_with_the_guards_off_is_named_as_such():
    """Issue 23, item 5: the guard's integrity is part of the verdict. A call after which torch's function
    modes are off, or a guard is gone from its mode stack, reports GUARD_OFF (the exercise scores 0),
    whatever it called; a ``with`` that restores everything leaves the verdict to what was seen."""
    from autograder.inside.forbidden import GUARD_OFF

    left_open: list = []

    def switch_off(x, dim=-1):          # the switch fetched by reflection: the scan cannot name it
        import operator

        off = operator.attrgetter("_C.DisableTorchFunction")(torch)()
        off.__enter__()
        left_open.append(off)
        return F.softmax(x, dim)

    def pop_the_guard(x, dim=-1):
        torch._C._pop_torch_function_stack()
        return F.softmax(x, dim)

    def restores(x, dim=-1):
        with torch._C.DisableTorchFunction():
            return (x - x.amax(dim, keepdim=True)).exp() / (x - x.amax(dim, keepdim=True)).exp().sum(dim, True)

    try:
        assert GUARD_OFF in used(fresh(switch_off), SOFTMAX, X)
        for _ in range(guards.OPERATOR_WATCHED_CALLS + 1):     # the function level alone: off all the same
            assert GUARD_OFF in used(switch_off, SOFTMAX, X)
    finally:
        for off in reversed(left_open):
            off.__exit__(None, None, None)
    assert torch._C._is_torch_function_enabled()
    assert GUARD_OFF in used(fresh(pop_the_guard), SOFTMAX, X)
    assert used(fresh(restores), SOFTMAX, X) == []
    assert used(lambda x: x.exp() / x.exp().sum(-1, keepdim=True), SOFTMAX, X) == []


def test_the_guard_off_zeroes_the_exercise_in_the_sandbox(course, sandbox):
    code = ("import torch, operator\n"
            "def softmax(x, dim=-1):\n"
            "    operator.attrgetter('_C.DisableTorchFunction')(torch)().__enter__()\n"
            "    return torch.nn.functional.softmax(x, dim)\n")
    _, ex = course.exercise("2.2")
    with sandbox.open([Cell(0, None, code, code, None)], label="guard-off") as worker:
        result = C.run_exercise(ex, worker, audiences=(C.Audience.PUBLIC, C.Audience.HIDDEN),
                                tolerances=course.tolerances, seed_parts=("guard-off", 0),
                                reference=solution_for(course, "2.2"))
    assert result.points == 0 and result.status is C.Status.FORBIDDEN
    said = [r.message for r in result.checks if r.status is C.Status.FORBIDDEN]
    assert said and all("switched off" in m.en and "已被关闭" in m.zh for m in said)


# -- the static scan ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sources, function, forbidden, expected", [
    (["import torch.nn.functional as Fn\ndef softmax(x, dim=-1):\n    return Fn.softmax(x, dim)"],
     "softmax", SOFTMAX, ["F.softmax"]),
    (["from torch.nn.functional import softmax as s\n", "def softmax(x, dim=-1):\n    return s(x, dim)"],
     "softmax", SOFTMAX, ["F.softmax"]),
    (["from torch import softmax\n", "def masked_softmax(s, m):\n    return softmax(s.masked_fill(m, -1e9), -1)"],
     "masked_softmax", SOFTMAX, ["torch.softmax"]),
    (["import torch.nn.functional as F\nsm = F.softmax\n", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
     "softmax", SOFTMAX, ["F.softmax"]),
    (["import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return getattr(F, 'softmax')(x, dim)"],
     "softmax", SOFTMAX, ["F.softmax"]),
    (["import torch\ndef softmax(x, dim=-1):\n    return torch.special.softmax(x, dim)"],
     "softmax", SOFTMAX, ["torch.softmax"]),
    (["import torch\ndef softmax(x, dim=-1):\n    return torch.ops.aten._softmax.default(x, dim, False)"],
     "softmax", SOFTMAX, ["torch.softmax"]),
    (["def softmax(x, dim=-1):\n    return x.softmax(dim)"], "softmax", SOFTMAX, ["Tensor.softmax"]),
    (["def softmax(x, dim=-1):\n    return x.log_softmax(dim).exp()"], "softmax", SOFTMAX, ["torch.log_softmax"]),
    (["import torch\ndef helper(x):\n    return torch.softmax(x, -1)\n",
      "def masked_softmax(s, m):\n    return helper(s.masked_fill(m, 0.0))"],
     "masked_softmax", SOFTMAX, ["torch.softmax"]),
    (["from torch.nn.functional import *\n", "def masked_softmax(s, m):\n    return softmax(s, -1)"],
     "masked_softmax", SOFTMAX, ["F.softmax"]),
    (["import torch.nn as nn\nclass MultiHeadAttention(nn.MultiheadAttention):\n    pass"],
     "MultiHeadAttention", MHA, ["nn.MultiheadAttention"]),
    (["from torch import nn\nclass MultiHeadAttention(nn.Module):\n    def __init__(self, e, h, bias=True):\n"
      "        super().__init__()\n        self.m = nn.MultiheadAttention(e, h)\n"
      "    def forward(self, q, k, v, key_padding_mask=None):\n        return self.m(q, k, v)"],
     "MultiHeadAttention", MHA, ["nn.MultiheadAttention"]),
    (["import torch.nn as nn\ndef masked_cross_entropy(logits, targets, ignore_index=-100):\n"
      "    return nn.CrossEntropyLoss(ignore_index=ignore_index)(logits.flatten(0, 1), targets.flatten())"],
     "masked_cross_entropy", LOSS, ["nn.CrossEntropyLoss"]),
    (["import importlib\ndef softmax(x, dim=-1):\n"
      "    return importlib.import_module('torch.nn.functional').softmax(x, dim)"], "softmax", SOFTMAX, ["F.softmax"]),
    (["def softmax(x, dim=-1):\n    return __import__('torch').nn.functional.softmax(x, dim)"],
     "softmax", SOFTMAX, ["F.softmax"]),
    (["import torch, torch.nn.functional as F\ntorch.exp = F.softmax\n",
      "def softmax(x, dim=-1):\n    return torch.exp(x)"], "softmax", SOFTMAX, ["F.softmax"]),
    (["import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return x\n",
      "def setup():\n    global softmax\n    softmax = F.softmax\nsetup()"], "softmax", SOFTMAX, ["F.softmax"]),
], ids=["module alias", "from-import alias", "from torch import softmax", "module-level assignment",
        "getattr constant", "torch.special.softmax", "torch.ops.aten._softmax", "x.softmax", "x.log_softmax",
        "helper function", "star import", "subclass of nn.MultiheadAttention", "nn.MultiheadAttention inside",
        "nn.CrossEntropyLoss", "importlib", "__import__", "monkeypatched torch.exp", "global rebinding"])
def test_the_scan_finds_what_the_function_can_reach(sources, function, forbidden, expected):
    assert scan_exercise(sources, function, forbidden) == expected


# A 4.3 that calls SDPA through a helper, and 4.4 built on it (issue 64, class 2).
SDPA_43 = ["import torch.nn.functional as F\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)",
           "def multi_head_attention(q, k, v):\n    return attend(q, k, v)"]


@pytest.mark.parametrize("module, expected", [
    ("class MultiHeadAttention:\n    def forward(self, q):\n        return multi_head_attention(q, q, q)", []),
    ("class MultiHeadAttention:\n    def forward(self, q):\n        return multi_head_attention(q, q, q)\n"
     "    def other(self, q):\n        return attend(q, q, q)", [SDPA]),
    ("mine = multi_head_attention\nclass MultiHeadAttention:\n    def forward(self, q):\n        return mine(q, q, q)",
     [SDPA]),
    ("class MultiHeadAttention:\n    def forward(self, q, f=multi_head_attention):\n        return f(q, q, q)", [SDPA]),
    ("class MultiHeadAttention:\n    call = staticmethod(multi_head_attention)\n"
     "    def forward(self, q):\n        return self.call(q, q, q)", [SDPA]),
], ids=["looked up when it runs", "reached another way too", "module-level alias", "default argument", "class body"])
def test_the_scan_does_not_walk_into_a_function_a_stand_in_answers(module, expected):
    """Issue 64, class 2: a function the grader's stand-in answers while the exercise runs (its earlier exercise
    lost points) is not the student's code there: what only it reaches costs the exercise nothing. Where the
    student's own function was captured before the stand-in took its name's place (an alias, a default, a class
    body), it is the code that runs, and counts."""
    sources = [*SDPA_43, module]
    assert scan_exercise(sources, "MultiHeadAttention", MHA) == [SDPA]      # the student's own 4.3: it counts
    assert scan_exercise(sources, "MultiHeadAttention", MHA, answered={"multi_head_attention"}) == expected
    # the exercise's own function is never answered for it; nor does a stand-in elsewhere hide anything
    assert scan_exercise(sources, "multi_head_attention", MHA, answered={"multi_head_attention"}) == [SDPA]
    assert scan_exercise(sources, "MultiHeadAttention", MHA, answered={"split_heads"}) == [SDPA]


REFLECTED = "a name fetched by reflection (pickle, attrgetter, vars, getattr as a value) in code the exercise runs"


@pytest.mark.parametrize("source, expected", [
    ("import torch\nwith torch._C.DisableTorchFunction():\n    pass", "uses DisableTorchFunction"),
    ("import autograder.inside.probes as p\np.execute = lambda *a, **k: None", "imports autograder.inside.probes"),
    ("import autograder\nautograder.inside.probes.FORBIDDEN_OBJECTS.clear()", "touches autograder.inside.probes"),
    ("from autograder.inside import plain\nplain.encode = None", "imports autograder.inside.plain"),
    ("import sys\nsys.modules['autograder.' + 'probes'].execute = None", "uses sys.modules"),
    ("import sys\ndef softmax(x, dim=-1):\n    return sys._getframe(1).f_locals", "uses _getframe"),
    ("from torch.utils._python_dispatch import _disable_current_modes", "uses _python_dispatch"),
    ("exec('def softmax(x, dim=-1):\\n    return x.softmax(dim)')", "softmax is not defined in plain code"),
    ("def softmax(x, dim=-1):\n    return eval('x.softmax(dim)')", "exec/eval/compile in code the exercise runs"),
    ("import torch\ndef softmax(x, dim=-1):\n    return getattr(torch, 'soft' + 'max')(x, dim)",
     "a torch attribute looked up by a computed name in code the exercise runs"),
    ("import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return F.__dict__['soft' + 'max'](x, dim)",
     "a torch attribute looked up by a computed name in code the exercise runs"),
    # Reflection (issue 23, item 5): a name held as data reaches what the scan cannot name.
    ("import pickle, torch.nn.functional as F\ndef softmax(x, dim=-1):\n"
     "    return pickle.loads(b'ctorch.nn.functional\\nsoftmax\\n.')(x, dim)", REFLECTED),
    ("import operator, torch\ndef softmax(x, dim=-1):\n"
     "    with operator.attrgetter('_C.DisableTorchFunction')(torch)():\n        return x.softmax(dim)", REFLECTED),
    ("from operator import methodcaller\ndef softmax(x, dim=-1):\n    return methodcaller('softmax', dim)(x)",
     REFLECTED),
    ("import torch\ndef softmax(x, dim=-1):\n    return vars(torch.nn.functional)['softmax'](x, dim)", REFLECTED),
    ("import functools, torch\ndef softmax(x, dim=-1):\n"
     "    return functools.reduce(getattr, ['nn', 'functional', 'softmax'], torch)(x, dim)", REFLECTED),
    ("import torch\ndef softmax(x, dim=-1):\n"
     "    return object.__getattribute__(torch.nn.functional, 'soft' + 'max')(x, dim)", REFLECTED),
], ids=["DisableTorchFunction", "patch autograder.inside.probes", "autograder attribute", "patch the encoder",
        "sys.modules", "frames", "dispatch modes", "exec defines the function", "eval in the function",
        "getattr with a computed name", "__dict__ of a torch module", "pickle GLOBAL", "attrgetter",
        "methodcaller", "vars", "getattr as a value", "__getattribute__"])
def test_tampering_is_found_anywhere_in_the_notebook(source, expected):
    found = scan_exercise([source, "def other():\n    return 1"], "softmax", SOFTMAX)
    assert any(f.startswith(TAMPERING + expected) for f in found), found
    # tampering is notebook-wide: every exercise of the notebook sees it, whatever it forbids
    if "exercise runs" not in expected and "not defined" not in expected:  # these concern one function
        assert f"{TAMPERING}{expected}" in scan_exercise([source], "project_qkv", ())


@pytest.mark.parametrize("sources", [
    ["import torch\nimport torch.nn.functional as F\nweights = F.softmax(torch.zeros(3), -1)\n",
     "def softmax(x, dim=-1):\n    weights = (x - x.amax(dim, keepdim=True)).exp()\n"
     "    return weights / weights.sum(dim, keepdim=True)"],
    ["from torch.nn.functional import softmax\nprint(softmax)\n",
     "def softmax(x, dim=-1):\n    return (x - x.logsumexp(dim, keepdim=True)).exp()"],
    ["import torch\nclass Helper:\n    def softmax(self, x):\n        return x.exp() / x.exp().sum()\n",
     "def softmax(x, dim=-1):\n    return Helper().softmax(x)"],
    ["from autograder import check\n", "def softmax(x, dim=-1):\n    return x.exp() / x.exp().sum(dim, keepdim=True)\n",
     "import autograder\nautograder.check('2.2')"],
    ["def softmax(x, dim=-1):\n    return x\n", "def broken(:\n", "x = 1\0"],
], ids=["local shadows a demo global", "later def shadows an import", "own method named softmax",
        "self-check calls", "cells that never run"])
def test_honest_code_scans_clean(sources):
    assert scan_exercise(sources, "softmax", SOFTMAX) == []


def test_the_scan_never_raises_and_names_what_it_could_not_read():
    too_large = ["x = 1\n" * (MAX_SOURCE_BYTES // 6 + 1)]
    assert scan_exercise(too_large, "softmax", SOFTMAX) == [
        f"{UNINSPECTABLE}the code is too large to inspect ({len(too_large[0])} bytes, at most {MAX_SOURCE_BYTES})"]
    deep = scan_exercise(["def softmax(x, dim=-1):\n    return x\n", "y = " + "-" * 200_000 + "1"], "softmax", SOFTMAX)
    assert len(deep) == 1 and deep[0].startswith(f"{UNINSPECTABLE}code cell 1 ")
    chained = "def softmax(x, dim=-1):\n    return x" + ".exp()" * 300      # deep, but within the parser's reach
    assert scan_exercise([chained], "softmax", SOFTMAX) == []
    # deeper than ast.parse can build: code the scan did not read is never called clean
    assert scan_exercise([chained + ".exp()" * 2000], "softmax", SOFTMAX) == [
        f"{UNINSPECTABLE}code cell 0 is too deeply nested to inspect (RecursionError)"]
    cycle = ["a = b\nb = a\n" * 40, "def softmax(x, dim=-1):\n    return a.softmax(x)"]
    assert scan_exercise(cycle, "softmax", SOFTMAX) == ["Tensor.softmax"]


@pytest.mark.parametrize("assignment", [a.id for a in COURSE.assignments])
def test_every_reference_notebook_scans_clean(course, assignment):
    """The release notebook filled with the reference solutions: demo cells (F.softmax, nn.MultiheadAttention
    against the student's code) included, no exercise of it is flagged."""
    a = course.assignment(assignment)
    nb = make_samples.submission(a, solved="all")
    scan = scan_notebook([to_python(c.source)[0] for c in nb.cells if c.cell_type == "code"])
    for e in a.exercises:
        assert scan.exercise(e.function, C.SPECS[e.id].forbidden if e.id in C.SPECS else ()) == [], e.id


def test_no_stand_in_reaches_a_call_forbidden_to_the_exercises_built_on_it(course):
    """A stand-in answers from the trusted side in the sandbox, where no guard sees it; the in-process routes
    (nbgrader's test cells, validate's account of a loss) run the reference under the guards of the exercise that
    calls it. Neither may then cost that exercise a point: no reference that stands in reaches a call forbidden
    to an exercise built on it (the notebooks' 3.2 may forbid less than the 3.3 that calls it)."""
    import inspect

    from autograder.grading.earlier import answering, dependencies

    checked = 0
    for a in course.assignments:
        for ex in a.exercises:
            forbidden = C.SPECS[ex.id].forbidden if ex.id in C.SPECS else ()
            for dep in dependencies(course, ex) if forbidden else ():
                stand_in = answering(course, a, dep)
                source = Path(inspect.getsourcefile(stand_in)).read_text(encoding="utf-8")
                assert scan_exercise([source], dep.function, forbidden) == [], (ex.id, dep.id)
                checked += 1
    assert checked >= 10


# -- the sandbox: patched grader, forged replies ----------------------------------------------------------
LIMITS = COURSE.limits.model_copy(update={"call_seconds": 4.0, "submission_seconds": 60.0})


def cells(*sources: str) -> list[Cell]:
    return [Cell(i, None, s, s, None) for i, s in enumerate(sources)]


PATCH_THE_GRADER = '''import autograder.inside.probes as P, autograder.inside.plain as plain
import autograder.inside.guards as G, autograder.inside.worker as W
G.FORBIDDEN_OBJECTS.clear()
G.FORBIDDEN_OPERATORS.clear()
P.execute = lambda namespace, request, max_bytes=0: P.Reply(
    "ok", blob=plain.encode(namespace[request.function](*request.args)))
_send = W.send_frame
W.send_frame = lambda sock, header, blob=b"": _send(sock, {**header, "forbidden": []}, blob)
'''
DODGES = '''import torch, torch.nn.functional as F
def via_alias(x):
    return torch.special.softmax(x, -1)
def via_disable(x):
    with torch._C.DisableTorchFunction():
        return F.softmax(x, -1)
def via_ops(x):
    return torch.ops.aten._softmax(x, -1, False)
def plain_softmax(x):
    return F.softmax(x, -1)
'''


def test_a_cell_that_patches_the_grader_changes_nothing_in_the_worker(sandbox):
    with sandbox.open(cells(PATCH_THE_GRADER, DODGES), label="patcher") as worker:
        assert [c.status for c in worker.cells] == ["ok", "ok"]
        for function, name in [("via_alias", "torch.softmax"), ("via_disable", "torch.softmax"),
                               ("via_ops", "torch.softmax"), ("plain_softmax", "F.softmax")]:
            reply = worker(Request(function, (X,), forbidden=SOFTMAX))
            assert reply.status == "ok" and reply.forbidden == [name], (function, reply)


FORGE = '''import json, os, stat, struct, sys
def _channel():
    return [fd for fd in range(3, 64) if _is_socket(fd)]
def _is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
def _seq():
    f = sys._getframe()
    while 'header' not in f.f_locals:
        f = f.f_back
    return f.f_locals['header']['seq']
def _blob(spec, arrays=(), data=b''):
    head = json.dumps({"spec": spec, "arrays": list(arrays)}).encode()
    return len(head).to_bytes(8, "little") + head + data
def forge(fields, blob=b''):
    head = json.dumps({"t": "reply", "seq": _seq(), "status": "ok", **fields}).encode()
    for fd in _channel():
        os.write(fd, struct.pack('<4sIQ', b'AGW1', len(head), len(blob)) + head + blob)
    os._exit(0)
'''


@pytest.mark.parametrize("attack, status", [
    ("forge({'status': ['ok']})", "crashed"),
    ("forge({'forbidden': {'F.softmax': 1}, 'seconds': 'x'}, "
     "_blob({'t': 'tensor', 'k': ['a0'], 'dtype': 'torch.float32', 'device': 'cpu', 'shape': [1]}))", "error"),
    ("forge({}, _blob({'t': 'tensor', 'k': 'a0', 'dtype': ['torch.float32'], 'device': 'cpu', 'shape': [1]}, "
     "[['a0', '<f4', [1], 0, 4]], bytes(4)))", "error"),
    ("forge({}, _blob({'t': 'tensor', 'k': 'a0', 'dtype': 'torch.float64', 'device': 'cpu', 'shape': [1]}, "
     "[['a0', '>f8', [1], 0, 8]], bytes(8)))", "error"),
    ("forge({}, _blob({'t': 'tensor', 'k': 'a0', 'dtype': 'torch.float64', 'device': 'cpu', 'shape': [1]}, "
     "[['a0', '<f16', [1], 0, 16]], bytes(16)))", "error"),
    ("forge({}, _blob({'t': 'ndarray', 'k': 'a0', 'dtype': 'no such dtype', 'shape': [1]}, "
     "[['a0', '<f8', [1], 0, 8]], bytes(8)))", "error"),
], ids=["status not a string", "unhashable array key", "unhashable dtype", "big-endian tensor",
        "16-byte floats as a tensor", "ndarray dtype that is not its data's"])
def test_a_forged_reply_is_the_students_outcome(sandbox, attack, status):
    with sandbox.open(cells(FORGE + f"def attack(x):\n    {attack}\ndef fine(x):\n    return x\n"),
                      label="forger") as worker:
        reply = worker(Request("attack", (1,)))
        assert reply.status == status, reply
        assert reply.blob == b""
        if status == "error":
            assert reply.error == UNREADABLE_REPLY
        assert worker(Request("fine", (7,))).value().to_python() == 7


#: Every reply names an array by a key the trusted decoder cannot even look up (a list).
ENCODER = '''import autograder.inside.plain as plain
plain.Encoder.spec = lambda self, value, depth=0: {"t": "tensor", "k": ["a0"], "dtype": "torch.float32",
                                                  "device": "cpu", "shape": [1]}
'''


@pytest.mark.slow
def test_grading_catches_dodges_and_a_patched_encoder_is_no_check_error(tmp_path, sandbox):
    qkv = COURSE.assignment("02_qkv_attention")
    others = tuple(e.id for e in qkv.exercises if e.id != "2.2")      # every exercise but the dodged softmax
    dodges = {
        "alias": "import torch\ndef softmax(x, dim=-1):\n    return torch.special.softmax(x, dim)\n",
        "disable": ("import torch, torch.nn.functional as F\ndef softmax(x, dim=-1):\n"
                    "    with torch._C.DisableTorchFunction():\n        return F.softmax(x, dim)\n"),
        "ops": "import torch\ndef softmax(x, dim=-1):\n    return torch.ops.aten._softmax(x, dim, False)\n",
        "patcher": PATCH_THE_GRADER + "import torch\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n",
    }
    subs = tmp_path / "subs"
    notebooks = {name: make_samples.submission(qkv, solved=others, code={"2.2": code}) for name, code in dodges.items()}
    notebooks["encoder"] = make_samples.submission(qkv, solved="all", extra_cells={"imports": ENCODER})
    notebooks["honest"] = make_samples.submission(qkv, solved="all")
    for name, nb in notebooks.items():
        _write(subs / name / "02_qkv_attention.ipynb", nb)
    batch = G.plan(subs, COURSE, tmp_path / "out")
    results = {r["student"]: r for r in G.grade_batch(batch, sandbox, jobs=2).results}

    for name in dodges:
        exercises = {e["exercise"]: e for e in results[name]["exercises"]}
        assert exercises["2.2"]["status"] == "forbidden" and exercises["2.2"]["points"] == 0, name
        if name in ("disable", "patcher"):
            # Tampering with the grader's guards, found on the trusted side: no exercise of it counts.
            assert results[name]["points"] == 0, name
            scans = [c for e in exercises.values() for c in e["checks"] if c["check"] == "source-scan"]
            assert len(scans) == len(exercises) and all("tampering" in c["message"]["en"] for c in scans)
        else:
            assert results[name]["points"] == qkv.points - exercises["2.2"]["max_points"], name
    encoder = results["encoder"]["exercises"]
    # Never "check_error"; the patching itself is tampering the source scan names ("forbidden").
    assert {c["status"] for e in encoder for c in e["checks"]} <= {"error", "crashed", "forbidden"}
    assert results["encoder"]["points"] == 0
    assert results["honest"]["points"] == qkv.points


def _write(path: Path, nb) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def test_readable_accepts_every_honest_value():
    from autograder.sandbox import readable

    value = (torch.randn(2, 3), torch.ones(2, dtype=torch.bfloat16), torch.arange(3), torch.zeros(1, dtype=torch.bool),
             np.arange(4, dtype=">f8"), np.float32(2.5), 3, True, None, "s", [1.5, {"k": torch.zeros(0)}],
             object())
    readable(plain.roundtrip(value))


def test_one_table_of_forbidden_calls_feeds_the_guard_and_the_scan():
    """Issue 26: a forbidden call is one entry of autograder/inside/forbidden.py; the run-time guard and the static
    scan both read it, and a course that forbids a name the table lacks is refused when its checks load."""
    from autograder.inside import forbidden
    from autograder.catalog.declarations import exercise
    from autograder.grading import scan_vocabulary

    assert set(guards.FORBIDDEN_OBJECTS) == set(guards.FORBIDDEN_OPERATORS) == set(forbidden.NAMES)
    for entry in forbidden.TABLE:
        assert all(scan_vocabulary.QUALIFIED[s][0] == entry.name for s in entry.spellings), entry.name
    assert scan_vocabulary.QUALIFIED["torch.nn.functional.softmax"] == ("F.softmax", "torch.softmax",
                                                                        "Tensor.softmax")
    with pytest.raises(ValueError, match=r"'F.softmx' are not in autograder/inside/forbidden.py"):
        exercise("9.9", forbidden=("F.softmax", "F.softmx"))
