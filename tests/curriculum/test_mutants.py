"""``autograder validate --mutants``: the operators, the equivalence confirmation, and a seeded subset graded
in the sandbox with no survivor (``make validate`` grades every mutant)."""
from __future__ import annotations

import textwrap

import pytest

from autograder.authoring import mutants as M
from autograder.authoring import operators as O
from autograder.course.config import load_course
from autograder.core.errors import ConfigError

COURSE = load_course()

#: The subset the suite grades: this many mutants of every exercise, drawn with this seed.
SUBSET_PER_EXERCISE = 2
SUBSET_SEED = 0


def mutated(source: str, operator: str) -> set[str]:
    """The normal forms of the mutants ``operator`` makes of ``source``."""
    return {O.normal_form(code) for op, code in O.mutate(textwrap.dedent(source)) if op == operator}


def form(source: str) -> str:
    return O.normal_form(textwrap.dedent(source))


SOFTMAX = '''
def softmax(x, dim=-1):
    """doc"""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
'''


def test_reduction_swaps():
    got = mutated(SOFTMAX, "tensor:reduction")
    assert form(SOFTMAX.replace("x.amax(", "x.mean(")) in got
    assert form(SOFTMAX.replace("e.sum(", "e.logsumexp(")) in got
    assert form(SOFTMAX.replace("x.amax(", "x.amin(")) in got


def test_dim_and_keepdim():
    assert form(SOFTMAX.replace("e.sum(dim=dim", "e.sum(dim=0")) in mutated(SOFTMAX, "tensor:dim")
    assert (form(SOFTMAX.replace("x.amax(dim=dim, keepdim=True)", "x.amax(dim=dim)"))
            in mutated(SOFTMAX, "tensor:keepdim"))
    snippet = "def f(x):\n    return x.squeeze(-1)\n"
    assert form("def f(x):\n    return x.squeeze(-2)\n") in mutated(snippet, "tensor:dim")


def test_transpose_of_other_dims_or_none():
    snippet = "def f(Q, K):\n    return Q @ K.transpose(-2, -1)\n"
    got = mutated(snippet, "tensor:transpose")
    assert form("def f(Q, K):\n    return Q @ K\n") in got
    assert form("def f(Q, K):\n    return Q @ K.T\n") in got
    assert form("def f(Q, K):\n    return Q @ K.transpose(-3, -2)\n") in got
    assert form("def f(W):\n    return W\n") in mutated("def f(W):\n    return W.T\n", "tensor:transpose")


def test_scale_changed():
    snippet = "def f(Q, K):\n    return Q @ K / math.sqrt(Q.shape[-1])\n"
    got = mutated(snippet, "tensor:scale")
    assert form("def f(Q, K):\n    return Q @ K\n") in got                         # no scale
    assert form("def f(Q, K):\n    return Q @ K / Q.shape[-1]\n") in got           # d instead of sqrt(d)
    assert form("def f(Q, K):\n    return Q @ K / math.sqrt(Q.shape[-2])\n") in got  # another size
    heads = "def f(s, E, h):\n    return s / math.sqrt(E // h)\n"
    assert form("def f(s, E, h):\n    return s / math.sqrt(E)\n") in mutated(heads, "tensor:scale")


def test_mask_inverted_and_after_softmax():
    snippet = '''
    def f(s, mask):
        s = s.masked_fill(mask, float("-inf"))
        e = torch.exp(s)
        w = e / e.sum(dim=-1, keepdim=True)
        return w
    '''
    got = mutated(snippet, "tensor:mask-inverted")
    assert form(snippet.replace("masked_fill(mask,", "masked_fill(~mask,")) in got
    after = mutated(snippet, "tensor:mask-after-softmax")
    assert form('''
    def f(s, mask):
        s = s
        e = torch.exp(s)
        w = e / e.sum(dim=-1, keepdim=True)
        w = w.masked_fill(mask, 0.0)
        return w
    ''') in after
    where = "def f(c, a, b):\n    return torch.where(c, a, b)\n"
    assert form("def f(c, a, b):\n    return torch.where(c, b, a)\n") in mutated(where, "tensor:mask-inverted")


def test_infinity_and_back():
    snippet = 'def f(s, m):\n    return s.masked_fill(m, float("-inf"))\n'
    assert form("def f(s, m):\n    return s.masked_fill(m, -1e9)\n") in mutated(snippet, "tensor:infinity")
    finite = "def f(s, m):\n    return s.masked_fill(m, -1e9)\n"
    assert form('def f(s, m):\n    return s.masked_fill(m, float("-inf"))\n') in mutated(finite, "tensor:infinity")


def test_detach_no_grad_and_casts():
    snippet = "def f(x, W):\n    y = x @ W\n    return y, W\n"
    got = mutated(snippet, "tensor:detach")
    assert form("def f(x, W):\n    y = x @ W\n    return y.detach(), W\n") in got
    assert form("def f(x, W):\n    with torch.no_grad():\n        y = x @ W\n        return y, W\n") in got
    assert form("def f(x, W):\n    y = x @ W\n    return y.float(), W\n") in mutated(snippet, "tensor:cast-added")
    cast = "def f(T):\n    return torch.ones(T, T, dtype=torch.bool).float()\n"
    removed = mutated(cast, "tensor:cast-removed")
    assert form("def f(T):\n    return torch.ones(T, T, dtype=torch.bool)\n") in removed
    assert form("def f(T):\n    return torch.ones(T, T).float()\n") in removed


def test_in_place_on_an_input():
    got = mutated(SOFTMAX, "tensor:in-place-input")
    assert form(SOFTMAX.replace("x - x.amax(dim=dim, keepdim=True)", "x.sub_(x.amax(dim=dim, keepdim=True))")) in got
    fill = "def f(s, m):\n    return s.masked_fill(m, 0)\n"
    assert form("def f(s, m):\n    return s.masked_fill_(m, 0)\n") in mutated(fill, "tensor:in-place-input")


def test_generic_operators_come_from_mutmut_and_dedupe():
    snippet = ("def f(a, b):\n    \"\"\"doc string\"\"\"\n"
               "    if a > b:\n        raise ValueError('a is large')\n    return a + 1\n")
    ops = {op for op, _ in O.mutate(snippet)}
    assert {"generic:swap_op", "generic:number", "generic:off-by-one", "generic:drop-statement"} <= ops
    codes = [code for _, code in O.mutate(snippet)]
    assert not any("XXdoc" in c or "XXa is large" in c for c in codes)   # docstrings and messages untouched
    made = O.mutants_of(COURSE, "2.3")
    assert len({m.id for m in made}) == len(made) == len({O.normal_form(m.source) for m in made})
    assert all(O.normal_form(m.source) != O.normal_form(m.reference) for m in made)


def test_ids_are_stable_across_formatting():
    assert (O.mutant_id("2.2", "def f(x):\n    return x + 1\n")
            == O.mutant_id("2.2", "def f(x):\n    return (x+1)  # c\n"))


# -- equivalents --------------------------------------------------------------------------------------
def _mutant(exercise: str, operator: str, needle: str) -> O.Mutant:
    return next(m for m in O.mutants_of(COURSE, exercise) if m.operator == operator and needle in m.source)


def test_a_true_equivalent_is_confirmed():
    # 4.5: int(4) is 4 -> removing the cast of bytes_per_element changes nothing on int inputs
    m = _mutant("4.5", "tensor:cast-removed", "* (bytes_per_element)")
    assert M.confirm_equivalent(COURSE, m, seeds=range(2)) == []


def test_an_equivalent_that_draws_from_the_global_random_numbers_is_confirmed():
    """5.7 without a seed draws from the global numbers: the mutant and the reference are compared from the same
    global state (each call from where the other started), so a true equivalent is not "different values"."""
    m = next(m for m in O.mutants_of(COURSE, "5.7") if m.id == "c7de004babd3")     # squeeze(1) for squeeze(-1)
    assert M.confirm_equivalent(COURSE, m, seeds=range(1)) == []


@pytest.mark.slow
def test_a_wrong_declaration_fails(tmp_path):
    wrong = _mutant("2.3", "tensor:scale", "Q.shape[-1])")     # no scale: plainly different
    assert M.confirm_equivalent(COURSE, wrong, seeds=range(1))
    declared = tmp_path / "mutants.yml"
    declared.write_text(f'equivalent:\n  - {{exercise: "2.3", id: "{wrong.id}", reason: "wrongly claimed equal"}}\n'
                        f'  - {{exercise: "2.3", id: "000000000000", reason: "a mutant that no longer exists"}}\n')
    run = M.run_mutants(COURSE, exercises=["2.3"], equivalents_file=declared)
    assert any(wrong.id in p and "differs" in p for p in run.problems)
    assert any("000000000000" in p and "no such mutant" in p for p in run.problems)
    assert not run.ok


def test_mutants_file_is_validated(tmp_path):
    bad = tmp_path / "mutants.yml"
    bad.write_text('equivalent:\n  - {exercise: "9.9", id: "abc", reason: "x"}\n')
    with pytest.raises(ConfigError, match="mutants.yml"):
        M.load_equivalents(COURSE, bad)
    assert M.load_equivalents(COURSE)   # the course's own file reads


def test_html_report_escapes_and_counts():
    m = _mutant("2.3", "tensor:scale", "Q.shape[-1])")
    m = O.Mutant(m.exercise, m.function, m.operator, m.line, m.source + "# <script>alert(1)</script>\n",
                 m.reference, m.id)
    run = M.MutationRun([M.Verdict(m, "survived", 8, 8)], [], 1.0)
    page = M.html_report(run, COURSE)
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "<td class='bad'>1</td>" in page


# -- the seeded subset, graded in the sandbox ------------------------------------------------------------
#: Survivors of the full run (2.x and 3.x have none): real gaps the checks cannot yet reach,
#: listed so that no *new* survivor passes unnoticed. Each entry goes when its check lands; the target is {}.
KNOWN_SURVIVORS: dict[str, frozenset[str]] = {}


@pytest.mark.slow
def test_seeded_subset_has_no_survivor(tmp_path):
    run = M.run_mutants(COURSE, per_exercise=SUBSET_PER_EXERCISE, seed=SUBSET_SEED, jobs=2)
    assert len(run.verdicts) == sum(min(SUBSET_PER_EXERCISE, len(O.mutants_of(COURSE, e.id)))
                                    for e in COURSE.exercises)
    assert not run.problems, run.problems
    new = [v for v in run.survivors if v.mutant.id not in KNOWN_SURVIVORS.get(v.mutant.exercise, frozenset())]
    assert not new, "\n".join(f"{v.mutant.exercise} {v.mutant.id}\n{v.mutant.diff}" for v in new)
    assert not [v for v in run.survivors if v.mutant.exercise[0] in "23"]   # 2.x and 3.x: none at all


def test_known_survivors_are_still_mutants():
    """A listed survivor whose mutant no longer exists (the reference changed) is dropped from the list."""
    for ex, ids in KNOWN_SURVIVORS.items():
        assert ids <= {m.id for m in O.mutants_of(COURSE, ex)}, ex
