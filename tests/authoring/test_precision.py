"""Issue 64, class 1: the precision a check asks for is the precision the statement teaches.

A float32 scalar or table inside a float64 call (``torch.sqrt(torch.tensor(d_k))``, the frequency table the
notebook's formula builds in the default dtype, d2l-zh's table) keeps full marks, on its own exercise and on the
exercises built on it; where an exercise declares float64 precision, the same answer loses points there. The
machinery validate proves it with (autograder.authoring.precision): the reference with float32 intermediates, a
dependency at the edge of its own tolerance inside the exercise built on it.
"""
from __future__ import annotations

import math

import pytest
import torch

from autograder import catalog as C
from autograder.authoring import precision as P
from autograder.authoring.validate import print_report, solution_for, validate
from support import failed, grade

pytestmark = pytest.mark.usefixtures("one_thread")


def scores_with_a_float32_scale(Q, K):
    """2.3 as tutorials write it: torch.tensor(d_k) is float32, the result stays float64."""
    return Q @ K.transpose(-2, -1) / torch.sqrt(torch.tensor(Q.size(-1)))


def positions_as_the_formula_reads(positions, D):
    """5.1 written literally from the formula: the frequencies in the default dtype (float32)."""
    j = torch.arange(D)
    angle = positions[:, None] * 10000 ** (-(j - j % 2) / D)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))


def test_a_float32_scale_in_2_3_costs_neither_2_3_nor_2_4(course):
    assert grade(course, "2.3", scores_with_a_float32_scale).points == 2
    softmax = solution_for(course, "2.2")

    def attention(Q, K, V):             # the student's 2.4, calling their own 2.2 and 2.3
        weights = softmax(scores_with_a_float32_scale(Q, K), dim=-1)
        return weights @ V, weights

    for seed in range(3):
        result = grade(course, "2.4", attention, seed=seed)
        assert result.points == 3, failed(result)


def test_the_frequency_table_of_the_formula_and_of_d2l_keep_5_1s_point(course):
    def d2l(positions, D):
        X = positions.reshape(-1, 1) / torch.pow(10000, torch.arange(0, D, 2, dtype=torch.float32) / D)
        P_ = torch.zeros(positions.shape[0], D, dtype=positions.dtype)
        P_[:, 0::2] = torch.sin(X)
        P_[:, 1::2] = torch.cos(X[:, :D // 2])
        return P_

    for answer in (positions_as_the_formula_reads, d2l):
        for seed in range(3):
            result = grade(course, "5.1", answer, seed=seed)
            assert result.points == 1, (answer.__name__, failed(result))


def test_where_float64_is_declared_a_float32_intermediate_loses_points(course, monkeypatch):
    declared = C.PRECISIONS["5.1"]
    monkeypatch.setitem(C.PRECISIONS, "5.1", C.PrecisionSpec("5.1", C.Precision.FLOAT64, declared.statement))
    assert grade(course, "5.1", positions_as_the_formula_reads).points < 1
    assert grade(course, "5.1", solution_for(course, "5.1")).points == 1      # the reference keeps it


def test_every_exercise_declares_its_precision_in_words_its_notebook_says(course):
    for ex in course.exercises:
        assert C.PRECISIONS[ex.id].precision is C.Precision.ONE_FLOAT32, ex.id
    v = validate(course, seeds=(0,), exercises=["2.3", "5.1"], alternatives=False)
    assert v.requirements == [] and v.ok
    del C.PRECISIONS["2.3"]
    try:
        gaps = validate(course, seeds=(0,), exercises=["2.3"], alternatives=False).requirements
    finally:
        C.load_catalog(course, hidden=True, mistakes=True)
    assert any("2.3: declares no precision" in g for g in gaps)


def test_the_float32_variant_rounds_what_is_not_of_the_inputs_and_nothing_else(course):
    generator = torch.Generator().manual_seed(0)
    Q, K = (torch.randn(2, 5, 7, generator=generator, dtype=torch.float64) for _ in range(2))
    reference = solution_for(course, "2.3")
    variant = P.float32_variant(reference)(Q, K)
    assert variant.dtype == torch.float64
    assert torch.equal(variant, Q @ K.transpose(-2, -1) / float(torch.tensor(math.sqrt(7), dtype=torch.float32)))
    assert not torch.equal(variant, reference(Q, K))
    positions = torch.arange(6, dtype=torch.float64)
    table = P.float32_variant(solution_for(course, "5.1"))(positions, 8)
    assert table.dtype == torch.float64
    assert torch.allclose(table, positions_as_the_formula_reads(positions, 8), rtol=0, atol=1e-12)
    # A module class: its parameters are inputs (never rounded), a table its __init__ builds is.
    lm = P.float32_variant(solution_for(course, "5.5"))
    assert issubclass(lm, torch.nn.Module) and lm.__name__ == "TinyLM"


def test_an_edge_answer_moves_every_output_but_small_whole_numbers_by_its_fraction_of_the_tolerance(course):
    weights = solution_for(course, "2.2")
    edge = P.edge_variant(weights, course.tolerances, 0.5)
    x = torch.tensor([[0.0, 1.0, 2.0], [5.0, 5.0, -1e9]], dtype=torch.float64)
    want, got = weights(x), edge(x)
    moved = (got - want).abs() / want.abs().clamp_min(1e-300)
    assert torch.all(((moved - 0.5e-7).abs() < 1e-12) | (want == want.round()))
    assert torch.equal(edge(x), got)                 # the same values move the same way every time


def test_validate_proves_the_precision_and_lists_it_per_exercise(course, capsys):
    from rich.console import Console

    v = validate(course, seeds=(0, 1), exercises=["2.4", "3.3", "4.4"], alternatives=False)
    kinds = {(p.exercise, p.kind) for p in v.precision}
    assert {("2.4", "float32 intermediates"), ("3.3", "float32 intermediates"),
            ("4.4", "4.3 at 0.5 of its tolerance")} <= kinds
    assert any(k.startswith("2.3 at") for e, k in kinds if e == "2.4")
    assert all(p.fair for p in v.precision) and v.ok
    print_report(v, Console(width=200))
    out = capsys.readouterr().out
    assert "Precision: what each exercise asks of float64 calls" in out and "one float32 intermediate" in out


def test_a_dependency_at_the_edge_of_its_tolerance_inside_a_check_that_ignores_it_fails_the_proof(course, monkeypatch):
    """The proof can fail: with the dependency's share of the tolerance left out (the rule this round added),
    2.4's reference with 2.2 at the edge of 2.2's float32 tolerance loses points."""
    monkeypatch.setattr(C.Context, "builds_on", False)
    original = C.Context.__init__

    def without_dependencies(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.builds_on = False

    monkeypatch.setattr(C.Context, "__init__", without_dependencies)
    lost = [p for p in P.prove(course, ["2.4"], seeds=(0, 1, 2)) if not p.fair]
    assert any(p.kind.startswith("2.2 at") for p in lost)
