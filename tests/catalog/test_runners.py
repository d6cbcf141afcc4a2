"""A diagnosis is given only when its signature matches (autograder.catalog.runners): the known mistake departs from
the reference on the failing call, the student's output matches it there, every element where the student departs is
one where the mistake does too, and none of the student's other outputs contradicts it. And validate proves that no
mistake's diagnosis fires on another known mistake or a correct alternative (autograder.authoring.diagnoses)."""
from __future__ import annotations

import math

import numpy as np
import torch

from autograder import catalog as C
from autograder.inside import plain
from autograder.authoring.validate import solution_for
from autograder.catalog.comparison import compare, values_match
from autograder.catalog.runners import EXACT, signature
from autograder.inside.probes import Request
from support import failed, grade


def _mistake(exercise_id: str, name: str) -> C.Mistake:
    return next(m for m in C.MISTAKES[exercise_id] if m.name == name)


def _value(x) -> plain.Value:
    return plain.roundtrip(x)


# -- 2.4: a right softmax is not "the softmax without the max shift" ---------------------------------
def _attention_with_float32_scale():
    """2.4 built on a right softmax and a 2.3 that divides by torch.sqrt(torch.tensor(d_k)): a float32 scale inside
    float64 scores, off by one float32 rounding (about 1e-8 relative)."""
    def softmax(x, dim=-1):
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)

    def attention_scores(Q, K):
        return Q @ K.transpose(-2, -1) / torch.sqrt(torch.tensor(Q.shape[-1]))

    def scaled_dot_product_attention(Q, K, V):
        weights = softmax(attention_scores(Q, K))
        return weights @ V, weights

    return scaled_dot_product_attention


def test_a_right_softmax_is_not_named_the_one_without_the_max_shift_even_where_it_fails(course):
    """"unstable-softmax" equals the right softmax on ordinary scores, so the student's output matches it there:
    that says nothing. Compared at a tolerance that the float32 scale fails, no mistake is named."""
    reference = solution_for(course, "2.4")
    fn = _attention_with_float32_scale()
    ctx = C.Context("2.4", "scaled_dot_product_attention", "diagnosis-test",
                    C.in_process_runner({"scaled_dot_product_attention": fn}), course.tolerances, 0,
                    reference_fn=reference)
    gen = torch.Generator().manual_seed(3)
    # Dk = 5: no square, so the float32 sqrt is rounded
    Q, K, V = (torch.randn(2, 4, d, generator=gen, dtype=torch.float64) * 2 for d in (5, 5, 3))
    got = ctx.call(Q, K, V)
    _, weights = reference(Q, K, V)
    # It fails where the comparison is strict enough to see a float32 rounding ...
    assert compare(got.items()[1].tensor(), weights, 1e-12, 0.0) is not None
    # ... and the old rule (the first mistake whose output matches the student's) named the unstable softmax there.
    unstable = _mistake("2.4", "unstable-softmax")
    assert values_match(got, _value(unstable.fn(Q, K, V)), course.tolerances)
    live = C.LiveDiagnoser(course.tolerances)
    assert live("2.4", ctx.last_request, ctx.last_value, reference=reference) is None
    # A mistake the output does show is still named: the missing scale departs from the reference everywhere.
    no_scale = _mistake("2.4", "no-scale")
    assert live("2.4", ctx.last_request, _value(no_scale.fn(Q, K, V)), reference=reference) is no_scale
    assert live("2.4", ctx.last_request, _value(no_scale.fn(Q, K, V))) is None     # no reference: no signature


# -- what a signature is -------------------------------------------------------------------------------
def test_a_mistake_does_not_explain_a_failure_where_it_agrees_with_the_reference(course):
    """The student's output matches the mistake's within the diagnosis tolerance, but departs from the reference at
    an element where the mistake does not: the mistake is not what went wrong there."""
    tol = course.tolerances
    reference = _value(torch.tensor([1.0, 2.0], dtype=torch.float64))
    mistake = _value(torch.tensor([5.0, 2.0 + 2e-6], dtype=torch.float64))   # departs at 0; at 1 within tolerance
    student = _value(torch.tensor([5.0, 2.0 + 4e-6], dtype=torch.float64))   # matches it, departs at 0 and at 1
    assert values_match(student, mistake, tol)
    assert signature(student, mistake, reference, tol) is None
    assert signature(_value(torch.tensor([5.0, 2.0], dtype=torch.float64)), mistake, reference, tol) == EXACT
    # Where the mistake agrees with the reference everywhere, matching it says nothing.
    assert signature(reference, _value(torch.tensor([1.0, 2.0], dtype=torch.float64)), reference, tol) is None


def test_a_mistake_of_kinds_is_named_by_its_kinds(course):
    """Right values in float64 where float32 is asked: the signature is the dtype, which the student's output has."""
    tol = course.tolerances
    reference = _value(torch.tensor([0.25, 0.75], dtype=torch.float32))
    in_float64 = _value(torch.tensor([0.25, 0.75], dtype=torch.float64))
    assert signature(in_float64, in_float64, reference, tol) == EXACT
    assert signature(reference, in_float64, reference, tol) is None       # right kinds: not this mistake
    assert signature(_value(np.array([0.25, 0.75])), in_float64, reference, tol) is None


# -- 2.5: the student's other outputs rule a mistake out -------------------------------------------------
def _overwrote_the_diagonal(weights):
    """-p p^T with p written over the diagonal instead of added to it: the diagonal is p, not p - p^2."""
    jacobian = -(weights.unsqueeze(-1) * weights.unsqueeze(-2))
    jacobian.diagonal(dim1=-2, dim2=-1).copy_(weights)
    return jacobian


def test_an_answer_that_overwrote_the_diagonal_is_not_named_diagonal_only(course):
    """On N = 1 it equals "diagonal-only" (a 1 x 1 Jacobian has no off-diagonal entry); on every larger one its
    off-diagonal entries are right, which "diagonal-only" never is."""
    result = grade(course, "2.5", _overwrote_the_diagonal)
    lost = failed(result)
    assert "edge-one-key-one-hot" in lost and lost["edge-one-key-one-hot"].mistake is None
    assert all(r.mistake is None for r in result.checks)
    # The N = 1 call alone matches "diagonal-only": it is the evidence of the other calls that rules it out.
    reference = solution_for(course, "2.5")
    ones = torch.ones(4, 1)
    request = Request("softmax_jacobian", (ones,), {})
    live = C.LiveDiagnoser(course.tolerances)
    alone = live("2.5", request, _value(_overwrote_the_diagonal(ones)), reference=reference)
    assert alone is _mistake("2.5", "diagonal-only")
    weights = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64), -1)
    other = (Request("softmax_jacobian", (weights,), {}), _value(_overwrote_the_diagonal(weights)))
    assert live("2.5", request, _value(_overwrote_the_diagonal(ones)), reference=reference, evidence=[other]) is None


def test_known_mistakes_are_still_named_as_themselves(course):
    for exercise_id, name in (("2.5", "diagonal-only"), ("2.4", "no-scale"), ("2.4", "unstable-softmax")):
        result = grade(course, exercise_id, _mistake(exercise_id, name).fn)
        assert {r.mistake for r in result.checks if r.mistake} == {name}, (exercise_id, name)


# -- validate: no diagnosis fires on another answer -------------------------------------------------------
def test_validate_finds_a_diagnosis_that_fires_on_another_answer(course, monkeypatch):
    """2.5's mistakes and alternatives: none fires on another; a second mistake that makes the first's mistake under
    another name is found both ways (the check is not vacuous)."""
    from autograder.authoring.diagnoses import misdiagnoses

    C.load_catalog(course, hidden=True, mistakes=True, alternatives=True)
    assert C.ALTERNATIVES["2.5"] and misdiagnoses(course, ["2.5"]) == []
    diagonal = _mistake("2.5", "diagonal-only")

    def twin(weights):
        return torch.diag_embed(weights * 1.0)

    monkeypatch.setitem(C.MISTAKES, "2.5", [*C.MISTAKES["2.5"], C.Mistake("2.5", "twin", diagonal.message, twin)])
    monkeypatch.setitem(C.ALTERNATIVES, "2.5", [])
    found = {(m.mistake, m.answer) for m in misdiagnoses(course, ["2.5"])}
    assert found == {("diagonal-only", "mistake twin"), ("twin", "mistake diagonal-only")}


def test_a_float32_scale_in_float64_is_off_by_one_float32_rounding():
    """(What the 2.4 test above relies on: the scale differs from math.sqrt in float32's last place.)"""
    assert torch.sqrt(torch.tensor(5)).item() != math.sqrt(5)
    assert abs(torch.sqrt(torch.tensor(5)).item() / math.sqrt(5) - 1) < 1e-7
