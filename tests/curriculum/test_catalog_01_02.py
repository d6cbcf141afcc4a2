"""The check catalog of 01_rnn_decay and 02_qkv_attention: sound, strict where it should be, fair otherwise."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from autograder import catalog as C
from autograder.course.config import load_course
from autograder.authoring.validate import solution_for
from support import failed, grade

#: The exercises of these two assignments, as course.yml lists them (a new exercise joins by itself).
EXERCISES = [e.id for e in load_course().exercises if e.id.split(".")[0] in ('1', '2')]
pytestmark = pytest.mark.usefixtures("one_thread")


# -- what this assignment's catalog must have (sound: tests/curriculum/test_catalog.py) -----------------
def test_every_exercise_has_each_kind_it_needs(course):
    for e in EXERCISES:
        public = C.checks_for(e, [C.Audience.PUBLIC])
        hidden = C.checks_for(e, [C.Audience.HIDDEN])
        kinds = {c.kind for c in public}
        assert C.Kind.NUMERIC in kinds, e
        assert C.Kind.SHAPE in kinds or e == "2.3" or C.Kind.FACT in kinds, e
        assert any(c.kind is C.Kind.EDGE for c in hidden), e
    for e in ("2.2", "2.4"):
        assert any(c.kind is C.Kind.FORBIDDEN for c in C.checks_for(e, [C.Audience.HIDDEN])), e
        assert C.SPECS[e].forbidden, e



@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_public_checks_pass_the_solution_without_hidden_data(course, exercise_id):
    """Self-check runs with no reference and no diagnoser; the solution scores full marks there."""
    _, ex = course.exercise(exercise_id)
    result = C.run_exercise(ex,
                            C.in_process_runner({ex.function: solution_for(course, exercise_id)}),
                            audiences=[C.Audience.PUBLIC], tolerances=course.tolerances,
                            seed_parts=(C.PUBLIC_SEED,))
    assert result.status is C.Status.PASSED, failed(result)
    assert result.points == pytest.approx(ex.points)


def test_public_checks_leave_the_global_rng_alone(course):
    # nn.RNN draws its initial weights and the notebook's example uses seed 0: neither may touch the student's RNG.
    torch.manual_seed(1234)
    state = torch.get_rng_state()
    for e in ("1.2", "1.4", "1.5", "2.1", "2.4"):
        grade(course, e, solution_for(course, e), audiences=[C.Audience.PUBLIC])
    assert torch.equal(torch.get_rng_state(), state)


# -- targeted outcomes ----------------------------------------------------------------
def test_softmax_with_F_softmax_scores_zero_and_names_it(course):
    def softmax(x, dim=-1):
        return torch.nn.functional.softmax(x, dim=dim)

    result = grade(course, "2.2", softmax)
    assert result.status is C.Status.FORBIDDEN
    assert result.points == 0.0
    assert all(r.points == 0.0 for r in result.checks)
    messages = [r.message.en for r in result.checks if r.message]
    assert messages and all("F.softmax" in m for m in messages)
    assert any("F.softmax" in r.message.zh for r in result.checks if r.message)


def test_sdpa_with_torch_attention_is_told_which_call(course):
    def scaled_dot_product_attention(Q, K, V):
        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
        w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)
        return out, w

    result = grade(course, "2.4", scaled_dot_product_attention, audiences=[C.Audience.PUBLIC])
    assert result.status is C.Status.FORBIDDEN and result.points == 0.0
    assert "F.scaled_dot_product_attention" in result.checks[0].message.en


def test_tanh_derivative_returning_a_tensor_for_a_float_fails_the_kind_check(course):
    def tanh_derivative(z):
        return 1 - torch.tanh(torch.as_tensor(z)) ** 2

    bad = failed(grade(course, "1.1", tanh_derivative))
    kind = bad["same-kind"]
    assert "Python float" in kind.message.en and "Tensor" in kind.message.en
    assert "float" in kind.message.zh
    assert kind.mistake == "tensor-for-every-input"
    assert "chapter-table" not in bad      # the values are right: only the kind is wrong


@pytest.mark.parametrize("exercise_id, fn", [
    ("1.6", lambda query, keys: torch.full((keys.shape[0],), math.nan, dtype=keys.dtype)),
    ("2.2", lambda x, dim=-1: x * math.nan),
    ("2.4", lambda Q, K, V: ((Q @ K.mT).softmax(-1) @ V * math.nan, (Q @ K.mT).softmax(-1) * math.nan)),
])
def test_nan_outputs_fail(course, exercise_id, fn):
    result = grade(course, exercise_id, fn)
    assert result.status is C.Status.FAILED
    numeric = [r for r in result.checks if r.kind == "numeric"]
    assert numeric and not any(r.passed for r in numeric)
    assert any("NaN" in r.message.en for r in numeric)


def test_K_dot_T_on_batched_input_gets_a_pointed_message(course):
    def attention_scores(Q, K):
        return Q @ K.T / math.sqrt(Q.shape[-1])

    bad = failed(grade(course, "2.3", attention_scores))
    assert {"shapes", "seeded-example", "matches-closed-form"}.isdisjoint(bad)     # fine on 2-D input
    assert "K.T" in bad["batch-dims"].message.en and "K.mT" in bad["batch-dims"].message.en
    assert "K.T" in bad["batch-dims"].message.zh


def test_missing_scale_is_named_in_both_languages(course):
    def scaled_dot_product_attention(Q, K, V):
        w = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)
        return w @ V, w

    bad = failed(grade(course, "2.4", scaled_dot_product_attention))
    named = {r.mistake_message for r in bad.values() if r.mistake}
    assert named == {C.Msg("看起来少了 1/√d 缩放", "looks like the 1/sqrt(d) scale is missing")}


def test_unstable_softmax_is_caught_on_large_inputs(course):
    def softmax(x, dim=-1):
        e = torch.exp(x)
        return e / e.sum(dim=dim, keepdim=True)

    bad = failed(grade(course, "2.2", softmax, audiences=[C.Audience.PUBLIC]))
    assert set(bad) == {"large-inputs"}
    assert "subtract" in bad["large-inputs"].message.en
    assert bad["large-inputs"].mistake == "no-max-subtraction"


def test_chapter_facts_are_compared_at_printed_precision(course):
    # The chapter prints 4 decimals: its own rounded table passes, a value off in the 3rd decimal does not.
    def as_printed(z):
        return torch.round(1 - torch.tanh(z) ** 2, decimals=4)

    def off(z):
        return 1 - torch.tanh(z) ** 2 + 1e-3

    assert "chapter-table" not in failed(grade(course, "1.1", as_printed, audiences=[C.Audience.PUBLIC]))
    assert "chapter-table" in failed(grade(course, "1.1", off, audiences=[C.Audience.PUBLIC]))


def test_jacobian_with_1d_only_calls_is_told_to_use_diag_embed(course):
    """torch.diag and torch.outer take 1-D tensors: right without batch dims, a pointed message with them."""
    def softmax_jacobian(weights):
        return torch.diag(weights) - torch.outer(weights, weights)

    bad = failed(grade(course, "2.5", softmax_jacobian, audiences=[C.Audience.PUBLIC]))
    assert {"shape-dtype", "matches-autograd", "rows-sum-to-zero-symmetric"} == set(bad)
    for result in bad.values():
        assert "torch.diag_embed" in result.message.en and "torch.diag_embed" in result.message.zh
        assert "raises with batch dims" in result.message.en and "带批量维" in result.message.zh
    assert bad["shape-dtype"].message.en.startswith("batch dims")    # its 1-D case passed before


@pytest.mark.parametrize("shape", [(1,), (7,), (5, 8), (6, 9, 8), (3, 1), (2, 4, 2)])
def test_2_5s_expected_jacobian_is_torchs_functional_jacobian_bit_for_bit(course, shape):
    """2.5's statement names torch.autograd.functional.jacobian of F.softmax as the truth; the check computes it
    in one batched backward pass, which must give the very same numbers, slice by slice."""
    import importlib

    checks = importlib.import_module(f"{C.COURSE_PACKAGE}.qkv_attention.checks")
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) * 7 + shape[-1]),
                         dtype=torch.float64) * 4.0
    rows = scores.reshape(-1, shape[-1])
    functional = torch.stack([torch.autograd.functional.jacobian(lambda row: torch.nn.functional.softmax(row, dim=-1),
                                                                 row) for row in rows])
    got = checks.autograd_jacobian(scores)
    assert got.shape == (*shape, shape[-1])
    assert torch.equal(got.reshape(-1, shape[-1], shape[-1]), functional)


def _jacobian_renormalized(weights):
    p = weights / weights.sum(dim=-1, keepdim=True)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)


def test_jacobians_of_the_renormalized_weights_keep_full_marks(course):
    """Issue 64: 2.5's weights sum to 1 along their last dim, and an answer that divides them by that sum first has
    the reference's values on every such input; its gradient differs from the reference's only along the all-ones
    direction, which no such input moves in, and the gradient check compares the directions that keep each row's
    sum. Autograd of F.softmax at log(weights) is that same function of the weights (the Jacobian at
    weights / weights.sum()), so it keeps full marks too: no check of values or gradients can tell the two apart
    (the statement's "no torch.autograd" sentence is not what it enforces)."""
    jacobian = torch.func.vmap(torch.func.jacrev(lambda row: torch.softmax(row, dim=-1)))

    def through_autograd(weights):
        rows = weights.reshape(-1, weights.shape[-1])
        return jacobian(rows.log()).reshape(*weights.shape, weights.shape[-1])

    for softmax_jacobian in (_jacobian_renormalized, through_autograd):
        result = grade(course, "2.5", softmax_jacobian)
        assert failed(result) == {} and result.points == result.max_points


# -- fair to correct answers written differently ------------------------------------------
def _tanh_derivative_cosh(z):
    if isinstance(z, torch.Tensor):
        return torch.cosh(z.clamp(-50, 50)) ** -2
    if isinstance(z, np.ndarray):
        return np.cosh(np.clip(z, -50, 50)) ** -2.0
    return math.cosh(max(-50.0, min(50.0, z))) ** -2


def _rnn_forward_numpy(seq, W_hh=0.9, W_xh=0.5):
    h = np.float64(0.0)
    for x in np.asarray(seq, dtype=np.float64):     # (a list, an array or a tensor: the statement allows each)
        h = np.tanh(W_hh * h + W_xh * x)
    return h                                   # numpy.float64 is a Python float


def _rnn_layer_module(x, W_xh, W_hh, b=None, h0=None):
    D, H = W_xh.shape
    if x.shape[1] == 0:                 # nn.RNN refuses T = 0: nothing read, the state is still h0
        return x.new_zeros(x.shape[0], 0, H), (h0 if h0 is not None else x.new_zeros(x.shape[0], H))
    rnn = torch.nn.RNN(D, H, batch_first=True, device=x.device, dtype=x.dtype)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh.T)
        rnn.weight_hh_l0.copy_(W_hh.T)
        rnn.bias_ih_l0.copy_(b if b is not None else torch.zeros_like(rnn.bias_ih_l0))
        rnn.bias_hh_l0.zero_()
        out, h_n = rnn(x, None if h0 is None else h0.unsqueeze(0))
    return out, h_n[0]


def _softmax_logsumexp(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


def _scores_einsum(Q, K):
    return torch.einsum("...qd,...kd->...qk", Q / Q.shape[-1] ** 0.5, K)


def _sdpa_einsum(Q, K, V):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    w = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kv->...qv", w, V), w


@pytest.mark.parametrize("exercise_id, fn", [
    ("1.1", _tanh_derivative_cosh), ("1.2", _rnn_forward_numpy), ("1.5", _rnn_layer_module),
    ("1.6", lambda query, keys: torch.softmax(keys @ query, dim=0)), ("2.2", _softmax_logsumexp),
    ("2.3", _scores_einsum), ("2.4", _sdpa_einsum),
])
def test_correct_answers_written_differently_score_full_marks(course, exercise_id, fn):
    for seed in range(3):
        result = grade(course, exercise_id, fn, seed=seed)
        assert result.status is C.Status.PASSED, failed(result)


def test_hidden_check_errors_do_not_echo_the_students_exception_text():
    """str(x) of a hidden input in an exception must not reach the feedback."""
    from autograder import catalog as C
    from solutions.qkv_attention import softmax as reference_softmax

    course = load_course()
    C.load_catalog(hidden=True, mistakes=False)

    def leaky(x, dim=-1):
        raise ValueError(f"SECRET{x.flatten()[:3].tolist()}")

    result = C.run_exercise(course.exercise("2.2")[1], C.in_process_runner({"softmax": leaky}),
                            audiences=[C.Audience.PUBLIC, C.Audience.HIDDEN], tolerances=course.tolerances,
                            seed_parts=("leak",), reference=reference_softmax)
    hidden = [r for r in result.checks if r.audience == "hidden"]
    public = [r for r in result.checks if r.audience == "public"]
    assert hidden and all(r.status is C.Status.ERROR for r in hidden)
    assert all("SECRET" not in r.message.en and "ValueError" in r.message.en for r in hidden)
    assert any("SECRET" in r.message.en for r in public)  # public inputs are the student's to see
