"""Each kind of evidence of the similarity report finds a disguised copy and leaves an honest pair alone: code (each
disguise issue 69 names), oddities, written answers, timing; and the rarity that weighs them."""
from __future__ import annotations

import datetime as dt
import random

import pytest

from similar_class import COMMON_SENTENCES, EVE, REFERENCE, cohort, disguise, honest, notebook, pair_score
from autograder.similarity.scoring import FLOOR, rarity

UTC = dt.timezone.utc
#: The model answer's own words (the instructor's notebook): quoting it is no evidence.
MODEL = ("$q \\cdot k = \\sum_{i=1}^{d_k} q_i k_i$。每一项均值为 0，方差为 $E[q_i^2]E[k_i^2] = 1$，"
         "各项独立，所以方差相加，$\\operatorname{Var}(q \\cdot k) = d_k$，标准差是 $\\sqrt{d_k}$。")


def honest_class(count: int = 14) -> dict[str, dict]:
    """Honest students who vary (methods, names, comments, quirks), two of them writing the reference."""
    students = {f"h{i:02d}": notebook(honest(random.Random(i))) for i in range(count)}
    students["alice"] = notebook(REFERENCE, MODEL)
    students["bob"] = notebook(REFERENCE, MODEL[40:] + MODEL[:40])
    return students


def test_rarity_is_worth_nothing_past_a_few_percent_of_the_class():
    assert rarity(1, 300) == 0                      # not shared
    assert rarity(2, 300) == 1
    assert 0 < rarity(8, 300) < 1
    assert rarity(13, 300) == 0 and rarity(100, 300) == 0
    assert rarity(2, 10) == 1 and rarity(4, 10) == 0


# -- code ----------------------------------------------------------------------------------------------------------
DISGUISES = {
    "renamed": dict(rename=True, reorder=False, swap=False, recomment=False),
    "reordered": dict(rename=False, reorder=True, swap=False, recomment=False),
    "reformatted-recommented": dict(rename=False, reorder=False, swap=False, recomment=True),
    "operations-swapped": dict(rename=False, reorder=False, swap=True, recomment=False),
    "all-at-once": dict(rename=True, reorder=True, swap=True, recomment=True),
}


@pytest.mark.parametrize("how", sorted(DISGUISES))
def test_a_disguised_copy_is_found_by_its_code(tmp_path, how):
    students = honest_class()
    students["eve"] = notebook(EVE)
    students["frank"] = notebook(disguise(EVE, random.Random(1), **DISGUISES[how]))
    found, index = cohort(tmp_path, students)
    scored = pair_score(found, index, "eve", "frank")
    assert scored is not None and scored.channels["code"] >= 0.8 and scored.score >= 0.8, scored
    best = found.scored()[0]
    assert {found.works[best.a].student, found.works[best.b].student} == {"eve", "frank"}


def test_two_of_five_exercises_copied_are_found(tmp_path):
    students = honest_class()
    students["eve"] = notebook(EVE)
    copied = disguise(EVE, random.Random(2), only=("softmax", "softmax_jacobian"))
    students["gus"] = notebook({**honest(random.Random(99), quirks=False), **copied})
    found, index = cohort(tmp_path, students)
    scored = pair_score(found, index, "eve", "gus")
    assert scored is not None and scored.score >= 0.6, scored
    assert set(found.code_mass(scored.a, scored.b, scored.keys)) == {"2.2", "2.5"}


def test_honest_students_who_wrote_the_reference_share_nothing(tmp_path):
    found, index = cohort(tmp_path, honest_class())
    assert pair_score(found, index, "alice", "bob") is None
    assert all({found.works[s.a].student, found.works[s.b].student} != {"alice", "bob"} for s in found.scored())


def test_honest_students_who_wrote_a_known_alternative_or_a_common_way_share_nothing(tmp_path):
    """The course's alternatives (einsum, logsumexp) are subtracted like the reference; a way five students of the
    class wrote (2.2 with .max(...).values, each their own names) is common, whatever names it has."""
    students = honest_class()
    methods = {"project_qkv": "einsum", "softmax": "max-values", "attention_scores": "einsum",
               "scaled_dot_product_attention": "reference", "softmax_jacobian": "einsum"}
    for i, name in enumerate(["carol", "dan", "ivan", "judy", "kim"]):
        students[name] = notebook(honest(random.Random(200 + i), methods=methods, quirks=False))
    found, index = cohort(tmp_path, students)
    scored = pair_score(found, index, "carol", "dan")
    assert scored is None or scored.score < FLOOR, scored


def own_names(code: dict[str, str], prefix: str) -> dict[str, str]:
    """The reference's approach in a student's own names (each local of the reference with ``prefix``)."""
    out = {}
    for function, text in code.items():
        for name in ("shifted", "e", "outer", "weights = ", "weights @", "weights\n"):
            text = text.replace(f" {name}", f" {prefix}{name}").replace(f"({name}", f"({prefix}{name}")
        out[function] = text
    return out


def test_a_copy_of_the_references_approach_in_ones_own_names_is_found(tmp_path):
    """Every function the reference's, every name the student's own: the copy is near-identical, a student who
    happens to name one function's locals alike is not."""
    students = honest_class()
    own = own_names(REFERENCE, "zq_")
    students["rita"] = notebook(own)
    students["sam"] = notebook(disguise(own, random.Random(4), rename=False, swap=True, recomment=True))
    students["tom"] = notebook({**REFERENCE, "softmax": own["softmax"]})          # one function alike
    found, index = cohort(tmp_path, students)
    copy = pair_score(found, index, "rita", "sam")
    assert copy is not None and copy.score >= 0.8 and found.near(copy.a, copy.b, copy.keys) >= 0.9, copy
    alike = pair_score(found, index, "rita", "tom")
    assert alike is not None and alike.score < copy.score - 0.3, alike


# -- oddities ------------------------------------------------------------------------------------------------------
ODD = ("def softmax(x, dim=-1):\n    # normalise so exp never overflows, per Goodfellow 6.2\n"
       "    if x.numel() == 0:\n        raise ValueError('softmax of nothing makes no sense here, sorry')\n"
       "    zz_peak_holder = x.amax(dim=dim, keepdim=True)\n    leftover_thing = torch.zeros_like(x).sum() + 1\n"
       "    shifted = x - zz_peak_holder\n    e = torch.exp(shifted)\n    return e / e.sum(dim=dim, keepdim=True)\n")


def test_shared_oddities_are_found_and_named(tmp_path):
    """The same unusual names, comment, error message and dead statement around the reference's own code."""
    students = honest_class()
    students["grace"] = notebook({**REFERENCE, "softmax": ODD})
    students["henry"] = notebook({**REFERENCE, "softmax": ODD.replace("    e = torch.exp", "    e = torch.exp")})
    found, index = cohort(tmp_path, students)
    scored = pair_score(found, index, "grace", "henry")
    assert scored is not None and scored.channels["oddities"] >= 0.8 and scored.score >= 0.8, scored
    kinds = {key[0] for key in scored.keys}
    assert {"identifier", "comment", "raise", "dead"} <= kinds, kinds


def test_oddities_many_students_share_or_the_course_holds_are_none(tmp_path):
    """A comment five students wrote and the names the release uses are no oddity."""
    students = honest_class()
    for name in ["ivan", "judy", "kim", "lin", "max"]:
        code = dict(REFERENCE)
        code["softmax"] = code["softmax"].replace("    shifted", "    # subtract the max for stability\n    shifted")
        students[name] = notebook(code)
    found, index = cohort(tmp_path, students)
    assert pair_score(found, index, "ivan", "judy") is None


# -- written answers -----------------------------------------------------------------------------------------------
OWN = ("我的理解是：把每个分量看成掷一枚均匀的硬币，d_k 个硬币加在一起，摇摆的幅度跟着 √d_k 长大；"
       "如果不管它，softmax 就像一个只看得见第一名的裁判，其余的键一点声音都没有，反向传播时梯度几乎为零。")


def test_a_copied_written_answer_is_found(tmp_path):
    students = honest_class()
    students["kate"] = notebook(REFERENCE, OWN)
    students["leo"] = notebook(REFERENCE, OWN.replace("我的理解是", "我认为").replace("裁判", "评委"))
    found, index = cohort(tmp_path, students)
    scored = pair_score(found, index, "kate", "leo")
    assert scored is not None and scored.channels["written"] >= 0.8 and scored.score >= 0.8, scored


def test_answers_in_the_words_of_the_question_and_the_model_answer_share_nothing(tmp_path):
    students = honest_class()
    students["mia"] = notebook(REFERENCE, MODEL + COMMON_SENTENCES[0])
    students["ned"] = notebook(REFERENCE, COMMON_SENTENCES[0] + MODEL + "不缩放时，softmax 会变成什么样？")
    for i in range(4):                 # the class's common sentence: many students wrote it
        students[f"w{i}"] = notebook(REFERENCE, COMMON_SENTENCES[0])
    found, index = cohort(tmp_path, students)
    assert pair_score(found, index, "mia", "ned") is None


# -- timing --------------------------------------------------------------------------------------------------------
def test_near_identical_notebooks_minutes_apart_add_evidence(tmp_path):
    students = honest_class()
    partial = {**REFERENCE, "softmax": EVE["softmax"]}
    students["oscar"] = notebook(partial)
    students["pia"] = notebook(partial)
    start = dt.datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    close = {"oscar": start, "pia": start + dt.timedelta(minutes=3), "alice": start,
             "bob": start + dt.timedelta(minutes=1)}
    found, index = cohort(tmp_path / "close", students, close)
    near = pair_score(found, index, "oscar", "pia")
    assert near is not None and near.channels["timing"] > 0.3, near
    assert pair_score(found, index, "alice", "bob") is None      # the reference, a minute apart: still nothing
    far = {**close, "pia": start + dt.timedelta(days=2)}
    found, index = cohort(tmp_path / "far", students, far)
    later = pair_score(found, index, "oscar", "pia")
    assert later is not None and later.channels["timing"] == 0 and later.score < near.score
    found, index = cohort(tmp_path / "untimed", students)
    assert pair_score(found, index, "oscar", "pia").channels["timing"] == 0       # no times: skipped, silently
