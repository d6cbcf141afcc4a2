"""The check catalog of 03_padding_masks and 04_multi_head_attention: sound, strict where it should be."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from autograder import catalog as C
from autograder.course.config import load_course
from support import failed, grade

#: The exercises of these two assignments, as course.yml lists them (a new exercise joins by itself).
EXERCISES = [e.id for e in load_course().exercises if e.id.split(".")[0] in ('3', '4')]
pytestmark = pytest.mark.usefixtures("one_thread")


# -- what this assignment's catalog must have (sound: tests/curriculum/test_catalog.py) -----------------
def test_every_exercise_has_each_kind_it_needs(course):
    for e in EXERCISES:
        public = {c.kind for c in C.checks_for(e, [C.Audience.PUBLIC])}
        hidden = {c.kind for c in C.checks_for(e, [C.Audience.HIDDEN])}
        assert C.Kind.SHAPE in public, e
        assert C.Kind.NUMERIC in public, e
        assert C.Kind.EDGE in hidden, e
    assert C.Kind.GRADIENT in {c.kind for c in C.checks_for("4.4", [C.Audience.PUBLIC])}
    assert {c.kind for c in C.checks_for("4.3", [C.Audience.PUBLIC])} >= {C.Kind.FACT, C.Kind.PROPERTY}
    for e, calls in {"3.2": {"F.softmax", "torch.softmax", "Tensor.softmax"},
                     "3.3": {"F.softmax", "F.scaled_dot_product_attention"},
                     "3.4": {"F.cross_entropy", "nn.CrossEntropyLoss", "F.nll_loss", "nn.NLLLoss"},
                     "4.3": {"nn.MultiheadAttention", "F.scaled_dot_product_attention"},
                     "4.4": {"nn.MultiheadAttention", "F.multi_head_attention_forward"}}.items():
        assert calls <= set(C.SPECS[e].forbidden), e
        assert any(c.kind is C.Kind.FORBIDDEN for c in C.checks_for(e, [C.Audience.HIDDEN])), e



# -- strict where it should be ------------------------------------------------------
def test_cross_entropy_through_the_module_is_forbidden_and_named(course):
    def masked_cross_entropy(logits, targets, ignore_index=-100):
        C_ = logits.shape[-1]
        loss = nn.CrossEntropyLoss(ignore_index=ignore_index)
        return loss(logits.reshape(-1, C_), targets.reshape(-1))

    result = grade(course, "3.4", masked_cross_entropy)
    assert result.points == 0
    assert result.status is C.Status.FORBIDDEN
    # nn.CrossEntropyLoss is caught by the function it calls, and the message names that call
    assert {f for r in result.checks for f in r.forbidden} == {"F.cross_entropy"}
    messages = [r.message for r in result.checks if r.status is C.Status.FORBIDDEN]
    assert messages and all("F.cross_entropy" in m.en and "F.cross_entropy" in m.zh for m in messages)


def test_nan_on_a_fully_padded_row_fails_with_a_clear_message(course):
    def masked_softmax(scores, key_padding_mask):
        B, Tk = key_padding_mask.shape
        mask = key_padding_mask.reshape(B, *([1] * (scores.dim() - 2)), Tk)
        s = scores.masked_fill(mask, float("-inf"))
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))       # a row of -inf: exp(nan)
        return e / e.sum(dim=-1, keepdim=True)

    result = grade(course, "3.2", masked_softmax)
    bad = failed(result)
    assert "fully-padded-rows" in bad
    assert "matches-torch" not in bad and "padded-keys-zero" not in bad    # right wherever a key is real
    message = bad["fully-padded-rows"].message
    assert "NaN" in message.en and "all padded" in message.en and "all zeros" in message.en
    assert "NaN" in message.zh and "全为 0" in message.zh
    assert bad["fully-padded-rows"].mistake == "nan-on-fully-padded"
    assert 0 < result.points < result.max_points


def test_detached_gradients_fail_the_gradient_check(course):
    from solutions.multi_head_attention import MultiHeadAttention as Reference
    from solutions.multi_head_attention import multi_head_attention

    class MultiHeadAttention(Reference):
        def forward(self, query, key, value, key_padding_mask=None):
            return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                                        self.out_proj.weight.detach(), self.out_proj.bias, key_padding_mask)

    result = grade(course, "4.4", MultiHeadAttention)
    bad = failed(result)
    assert "gradients-match-torch" in bad
    assert "matches-torch" not in bad and "torch-names-shapes" not in bad    # the forward pass is right
    assert "no gradient reached out_proj.weight" in bad["gradients-match-torch"].message.en
    assert result.points < result.max_points


def test_wrong_gradients_are_compared_against_torch(course):
    from solutions.multi_head_attention import MultiHeadAttention as Reference

    class Scaled(torch.autograd.Function):
        """Identity forward, doubled gradient backward: only the gradient check can see it."""

        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return 2 * grad

    class MultiHeadAttention(Reference):
        def forward(self, query, key, value, key_padding_mask=None):
            return super().forward(Scaled.apply(query), key, value, key_padding_mask)

    bad = failed(grade(course, "4.4", MultiHeadAttention, audiences=(C.Audience.PUBLIC,)))
    assert set(bad) == {"gradients-match-torch", "no-bias"}    # both compare gradients; no output check fails
    assert "query.grad" in bad["gradients-match-torch"].message.en


def test_split_heads_must_raise_value_error(course):
    def split_heads(x, num_heads):
        B, T, E = x.shape
        return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)    # RuntimeError when E % H != 0

    bad = failed(grade(course, "4.1", split_heads))
    assert set(bad) == {"value-error"}
    assert "ValueError" in bad["value-error"].message.en and "RuntimeError" in bad["value-error"].message.en


def test_attention_memory_must_be_a_python_int(course):
    def attention_memory(batch, num_heads, seq_len, bytes_per_element=4):
        return float(batch * num_heads * math.pow(seq_len, 2) * bytes_per_element)

    bad = failed(grade(course, "4.5", attention_memory))
    assert "python-int" in bad and "Python int" in bad["python-int"].message.en


@pytest.mark.parametrize("exercise_id, mistake", [("3.2", "fill-minus-1e9"), ("3.4", "no-max-subtraction"),
                                                  ("4.3", "averaged-weights"), ("4.4", "weights-not-transposed")])
def test_a_known_mistake_is_named_in_both_languages(course, exercise_id, mistake):
    fn = next(m.fn for m in C.MISTAKES[exercise_id] if m.name == mistake)
    result = grade(course, exercise_id, fn, seed=3)
    named = {r.mistake for r in result.checks if r.mistake}
    assert named == {mistake}
    found = next(r for r in result.checks if r.mistake)
    message = found.mistake_message
    assert message.zh and message.en and message.zh != message.en


def test_a_nan_mistake_does_not_claim_finite_output():
    """values_match: an expected NaN must meet a NaN, not anything at all."""
    tol = load_course().tolerances
    from autograder.inside import plain

    nan = plain.roundtrip(torch.tensor([0.5, float("nan")]))
    assert C.values_match(nan, nan, tol)
    assert not C.values_match(plain.roundtrip(torch.tensor([0.5, 0.5])), nan, tol)


def test_nan_to_num_after_softmax_is_named_in_4_4(course):
    """The reviewer's variant: an additive -inf mask, torch.softmax, nan_to_num. Its forward pass is right
    (full marks on 4.3); its backward pass goes through the fully padded row's 0/0 (NaN gradients in 4.4)."""
    import math

    from solutions.multi_head_attention import MultiHeadAttention as Reference
    from solutions.multi_head_attention import merge_heads, split_heads

    def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight,
                             out_proj_bias, key_padding_mask=None):
        W_q, W_k, W_v = in_proj_weight.chunk(3)
        b_q, b_k, b_v = in_proj_bias.chunk(3)
        q = split_heads(query @ W_q.T + b_q, num_heads)
        k = split_heads(key @ W_k.T + b_k, num_heads)
        v = split_heads(value @ W_v.T + b_v, num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if key_padding_mask is not None:
            additive = torch.zeros(key_padding_mask.shape, dtype=scores.dtype, device=scores.device)
            scores = scores + additive.masked_fill(key_padding_mask, float("-inf"))[:, None, None, :]
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
        return merge_heads(weights @ v) @ out_proj_weight.T + out_proj_bias, weights

    forward_only = grade(course, "4.3", multi_head_attention)
    assert forward_only.points == forward_only.max_points

    class MultiHeadAttention(Reference):
        def forward(self, query, key, value, key_padding_mask=None):
            E = self.embed_dim
            in_bias = self.in_proj_bias if self.in_proj_bias is not None else query.new_zeros(3 * E)
            out_bias = self.out_proj.bias if self.out_proj.bias is not None else query.new_zeros(E)
            return multi_head_attention(query, key, value, self.num_heads, self.in_proj_weight, in_bias,
                                        self.out_proj.weight, out_bias, key_padding_mask)

    result = grade(course, "4.4", MultiHeadAttention)
    bad = failed(result)
    assert "fully-padded-row" in bad and "matches-torch" not in bad
    assert bad["fully-padded-row"].mistake == "nan-to-num-backward"
    assert "nan_to_num" in bad["fully-padded-row"].message.en
    assert 0 < result.points < result.max_points
