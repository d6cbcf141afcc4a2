"""The check catalog of 05_transformer_block: sound, strict where it should be, and the claims its statements
make about torch (the block loads nn.TransformerEncoderLayer's weights with strict=True and agrees with it,
the cache gives the tokens of generation without it) run against the real modules."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from autograder import catalog as C
from autograder.course.config import load_course
from autograder.authoring.validate import solution_for
from support import failed, grade

#: The exercises of this assignment, as course.yml lists them (a new exercise joins by itself).
EXERCISES = [e.id for e in load_course().exercises if e.id.split(".")[0] == "5"]
pytestmark = pytest.mark.usefixtures("one_thread")


# -- what this assignment's catalog must have (sound: tests/curriculum/test_catalog.py) -----------------
def test_every_exercise_has_each_kind_it_needs(course):
    assert EXERCISES == ["5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7", "5.8", "5.9"]
    for e in EXERCISES:
        public = {c.kind for c in C.checks_for(e, [C.Audience.PUBLIC])}
        hidden = {c.kind for c in C.checks_for(e, [C.Audience.HIDDEN])}
        assert C.Kind.SHAPE in public, e
        assert C.Kind.NUMERIC in public, e
        assert C.Kind.EDGE in hidden, e
    for e in ("5.4", "5.5"):
        assert C.Kind.GRADIENT in {c.kind for c in C.checks_for(e, [C.Audience.PUBLIC])}, e
    for e, calls in {"5.2": {"F.layer_norm", "nn.LayerNorm"},
                     "5.4": {"nn.MultiheadAttention", "F.scaled_dot_product_attention"},
                     "5.5": {"nn.MultiheadAttention"}, "5.6": {"F.cross_entropy", "nn.CrossEntropyLoss"},
                     "5.8": {"nn.MultiheadAttention", "F.multi_head_attention_forward"}}.items():
        assert calls <= set(C.SPECS[e].forbidden), e
        assert any(c.kind is C.Kind.FORBIDDEN for c in C.checks_for(e, [C.Audience.HIDDEN])), e
    course_yml = load_course()
    # the pasted 04 and 03 answers (judged by their own checks) and 05's own earlier exercises
    assert course_yml.exercise("5.4")[1].builds_on == ["4.1", "4.2", "4.3", "4.4", "5.2", "5.3"]
    assert course_yml.exercise("5.5")[1].builds_on == ["5.1", "5.2", "5.4"]
    assert course_yml.exercise("5.6")[1].builds_on == ["3.4"]
    assert course_yml.exercise("5.8")[1].builds_on == ["4.1", "4.2"]
    assert sum(e.points for e in course_yml.assignment("05_transformer_block").exercises) == 14


@pytest.mark.parametrize("how", ["F.layer_norm", "nn.LayerNorm"])
def test_library_layer_norm_in_5_2_is_forbidden_and_named(course, how):
    import torch.nn.functional as F

    def layer_norm(x, weight=None, bias=None, eps=1e-5):
        if how == "F.layer_norm":
            return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
        norm = nn.LayerNorm(x.shape[-1], eps=eps, elementwise_affine=weight is not None, dtype=x.dtype)
        if weight is not None:
            with torch.no_grad():
                norm.weight.copy_(weight)
                norm.bias.copy_(bias if bias is not None else torch.zeros_like(weight))
        return norm(x)

    result = grade(course, "5.2", layer_norm)
    assert result.points == 0 and result.status is C.Status.FORBIDDEN
    assert {f for r in result.checks for f in r.forbidden} == {"F.layer_norm"}
    messages = [r.message for r in result.checks if r.status is C.Status.FORBIDDEN]
    assert messages and all("F.layer_norm" in m.en and "F.layer_norm" in m.zh for m in messages)


# -- the statements' claims about torch, on the real modules ------------------------
def test_the_block_loads_torch_s_layer_strictly_and_agrees_with_it(course):
    Block = solution_for(course, "5.4")
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(12, 3, 20, dropout=0.0, batch_first=True, norm_first=True, dtype=torch.float64)
    block = Block(12, 3, 20).double()
    report = block.load_state_dict(layer.state_dict(), strict=True)
    assert report.missing_keys == [] and report.unexpected_keys == []
    assert sorted(dict(block.named_parameters())) == sorted(dict(layer.named_parameters()))
    x = torch.randn(3, 5, 12, dtype=torch.float64)
    padding = torch.tensor([[False] * 5, [False] * 2 + [True] * 3, [False] * 4 + [True]])
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    for kpm, am in ((padding, None), (None, causal), (padding, causal)):
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours, theirs = block(xa, key_padding_mask=kpm, attn_mask=am), layer(xb, src_mask=am, src_key_padding_mask=kpm)
        assert torch.allclose(ours, theirs, atol=1e-12)
        ours.square().sum().backward()
        theirs.square().sum().backward()
        assert torch.allclose(xa.grad, xb.grad, atol=1e-12)
        torch_grads = dict(layer.named_parameters())
        for name, p in block.named_parameters():
            assert torch.allclose(p.grad, torch_grads[name].grad, atol=1e-12), name
        block.zero_grad()
        layer.zero_grad()


def test_cached_generation_gives_the_tokens_of_generation_without_the_cache(course):
    """5.8 inside a whole model: greedy tokens from a step-by-step cached forward equal the full forward's."""
    LM = solution_for(course, "5.5")
    cached = solution_for(course, "5.8")
    ns = LM.__init__.__globals__
    torch.manual_seed(1)
    model = LM(11, 16, 4, 24, 2).eval()
    tokens = torch.randint(0, 11, (2, 3))
    full = tokens
    with torch.no_grad():
        for _ in range(12):
            full = torch.cat([full, model(full)[:, -1].argmax(-1, keepdim=True)], dim=1)
        caches, step, out = [None, None], tokens, tokens
        while out.shape[1] < full.shape[1]:
            seen = out.shape[1] - step.shape[1]
            x = model.token_embedding(step) + ns["positional_encoding"](torch.arange(float(seen), out.shape[1]), 16)
            for i, b in enumerate(model.blocks):
                h = ns["layer_norm"](x, b.norm1.weight, b.norm1.bias)
                a = b.self_attn
                att, caches[i] = cached(h, caches[i], a.num_heads, a.in_proj_weight, a.in_proj_bias,
                                        a.out_proj.weight, a.out_proj.bias)
                x = x + att
                x = x + ns["feed_forward"](ns["layer_norm"](x, b.norm2.weight, b.norm2.bias), b.linear1.weight,
                                           b.linear1.bias, b.linear2.weight, b.linear2.bias)
            logits = ns["layer_norm"](x[:, -1], model.norm.weight, model.norm.bias) @ model.token_embedding.weight.T
            step = logits.argmax(-1, keepdim=True)
            out = torch.cat([out, step], dim=1)
    assert torch.equal(out, full)
    assert caches[0][0].shape == (2, 4, full.shape[1] - 1, 4)


def test_sampling_is_torch_multinomial_with_a_seeded_generator(course):
    sample = solution_for(course, "5.7")
    logits = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    want = torch.multinomial(torch.softmax(logits / 0.7, -1), 1, generator=torch.Generator().manual_seed(5)).squeeze(-1)
    assert torch.equal(sample(logits, 0.7, seed=5), want)
    assert torch.equal(sample(logits.double(), 0.7, seed=5), want)          # the dtype does not move the draws
    assert torch.equal(sample(logits), logits.argmax(-1))



def test_what_5_7_states_of_ties_and_the_global_random_numbers_is_checked(course):
    """Issue 55, 3 and 4: a tie at temperature 0 goes to the lowest index (as argmax), and a seeded draw leaves
    torch's global random state alone. Before, a tie broken the other way and a torch.manual_seed(seed) kept full
    marks (the same draws); each now loses points on its own check, named, and a draw that restores the global
    state it changed is left alone as asked."""
    by_name = {m.name: m.fn for m in C.MISTAKES["5.7"]}
    last = failed(grade(course, "5.7", by_name["ties-to-the-last"]))
    assert set(last) == {"greedy"} and last["greedy"].mistake == "ties-to-the-last"
    reseeded = failed(grade(course, "5.7", by_name["reseeds-the-global-generator"]))
    assert set(reseeded) == {"global-random-untouched"}
    assert reseeded["global-random-untouched"].mistake == "reseeds-the-global-generator"
    assert "torch.manual_seed" in reseeded["global-random-untouched"].message.en      # (a sentence with no value)
    reference = solution_for(course, "5.7")

    def restores(logits, temperature=0.0, seed=None):
        state = torch.get_rng_state()
        try:
            if temperature and seed is not None:
                torch.manual_seed(seed)
                return torch.multinomial(torch.softmax(logits / temperature, -1), 1).squeeze(-1)
            return reference(logits, temperature, seed)
        finally:
            torch.set_rng_state(state)

    assert failed(grade(course, "5.7", restores)) == {}


def test_seeded_draws_are_compared_on_the_cpu_whatever_the_device_under_test(course):
    """Graded with --device cuda, the statement's generator would live on the GPU, which draws other numbers
    from the same seed than the CPU's, and the trusted side (never CUDA) knows the CPU's only: the checks that
    compare seeded draws call the student's function on the CPU; every other call goes to the device."""
    from support import BOTH

    _, ex = course.exercise("5.7")
    sample = solution_for(course, "5.7")
    inner = C.in_process_runner({"sample_next_token": sample})
    sent = []

    def runner(request):
        temperature = request.args[1] if len(request.args) > 1 else request.kwargs.get("temperature", 0.0)
        sent.append((request.device, request.kwargs.get("seed") is not None and temperature > 0))
        request.device = "cpu"               # no GPU here: what a GPU worker would run, run on the CPU
        return inner(request)

    result = C.run_exercise(ex, runner, audiences=BOTH, tolerances=course.tolerances, seed_parts=("test", 0),
                            device="cuda", reference=sample)
    compared = {c.name for c in C.checks_for("5.7", BOTH) if c.name in ("same-draws-as-multinomial", "edge-cases")}
    assert compared == {"same-draws-as-multinomial", "edge-cases"}
    by = {r.check: r for r in result.checks}
    assert all(by[name].passed for name in compared), [by[n].message for n in compared]   # draws made on the CPU
    seeded_on = {device for device, seeded in sent if seeded}
    assert seeded_on == {"cpu", "cuda"}                  # shape-dtype asks a seeded draw on the device too
    # ... but only the shape check does: the rest of the calls on the device are greedy or unseeded
    assert sum(1 for device, seeded in sent if seeded and device == "cuda") == 1
    assert by["shape-dtype"].status is not C.Status.PASSED      # its CPU tensors, said to be on cuda, are refused


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False")
@pytest.mark.gpu
@pytest.mark.slow
def test_the_reference_notebook_gets_every_point_graded_on_the_gpu(tmp_path, course):
    from autograder import grading as G
    from autograder.authoring.session import Notebooks
    from autograder.sandbox import Sandbox

    notebooks = Notebooks(course)
    path = tmp_path / "05_transformer_block.ipynb"
    path.write_bytes(notebooks.notebook("05_transformer_block"))
    references = G.check_catalog(course, {"05_transformer_block"})
    with Sandbox(course.limits, "cuda") as sandbox:
        ctx = G.GradingContext(course, sandbox, "cuda", G.grader_fingerprint("cuda", course), references,
                               C.LiveDiagnoser(course.tolerances), G.demo_cells(course))
        from autograder.grading.submissions import Submission
        sub = Submission(path, path.name, "0" * 64, "ada", "05_transformer_block")
        result = G.grade_submission(sub, ctx)
    lost = {e["exercise"]: e for e in result["exercises"] if e["points"] < e["max_points"]}
    assert lost == {}
    assert result["points"] == 14

# -- strict where it should be ------------------------------------------------------
def test_the_naive_variance_fails_on_large_offsets_with_a_clear_message(course):
    fn = next(m.fn for m in C.MISTAKES["5.2"] if m.name == "variance-as-mean-of-squares")
    result = grade(course, "5.2", fn)
    bad = failed(result)
    assert "large-offset" in bad and "matches-torch" not in bad           # right for ordinary inputs
    assert bad["large-offset"].mistake == "variance-as-mean-of-squares"
    said = bad["large-offset"]
    assert "E[x^2] - E[x]^2" in said.message.en or "E[x^2] - E[x]^2" in said.mistake_message.en
    assert 0 < result.points < result.max_points


def test_an_untied_output_layer_is_refused_by_its_name(course):
    Reference = solution_for(course, "5.5")

    class TinyLM(Reference):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers)
            self.head = nn.Linear(d_model, vocab_size, bias=False)

        def forward(self, tokens, key_padding_mask=None):
            return super().forward(tokens, key_padding_mask)

    bad = failed(grade(course, "5.5", TinyLM, audiences=(C.Audience.PUBLIC,)))
    assert set(bad) == {"names-shapes", "matches-torch", "gradients-match-torch"}
    assert "head.weight" in bad["names-shapes"].message.en and "strict=True" in bad["names-shapes"].message.en


def test_a_post_norm_block_is_named(course):
    fn = next(m.fn for m in C.MISTAKES["5.4"] if m.name == "post-norm")
    result = grade(course, "5.4", fn, seed=3)
    assert {r.mistake for r in result.checks if r.mistake} == {"post-norm"}
    assert result.points < result.max_points


@pytest.mark.slow
def test_a_wrong_layer_norm_costs_its_points_once_in_the_sandbox(tmp_path, course):
    """5.4 and 5.5 call 5.2: with an unbiased variance in 5.2, the block and the model still get every point
    (the reference answers their layer_norm calls from the trusted side, gradients included)."""
    from autograder.authoring.session import GradingSession

    wrong = ("def layer_norm(x, weight=None, bias=None, eps=1e-5):\n"
             "    y = (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)\n"
             "    y = y if weight is None else y * weight\n"
             "    return y if bias is None else y + bias\n")
    with GradingSession(course, tmp_path / "work") as session:
        nb = session.notebooks.notebook("05_transformer_block", "5.2", "layer_norm", wrong)
        result = session.grade("05_transformer_block", "ada", nb)
    by = {e["exercise"]: e for e in result["exercises"]}
    assert by["5.2"]["points"] < by["5.2"]["max_points"]
    for e in ("5.4", "5.5"):
        assert by[e]["points"] == by[e]["max_points"], by[e]
        assert {"exercise": "5.2", "function": "layer_norm"} in by[e]["stand_ins"]
    assert all(by[e]["points"] == by[e]["max_points"] for e in ("5.1", "5.3", "5.6", "5.7", "5.8", "5.9"))
