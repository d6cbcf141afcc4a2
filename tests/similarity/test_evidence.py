"""A pair worth a look in words and side by side: each item names where it was found, the matched lines are marked
on both sides."""
from __future__ import annotations

import datetime as dt
import random

from similar_class import EVE, REFERENCE, cohort, disguise, honest, notebook, pair_score
from autograder.similarity.evidence import MAX_ITEMS, explain

ODD = ("def softmax(x, dim=-1):\n    # normalise so exp never overflows, per Goodfellow 6.2\n"
       "    if x.numel() == 0:\n        raise ValueError('softmax of nothing makes no sense here, sorry')\n"
       "    zz_peak_holder = x.amax(dim=dim, keepdim=True)\n    leftover_thing = torch.zeros_like(x).sum() + 1\n"
       "    shifted = x - zz_peak_holder\n    e = torch.exp(shifted)\n    return e / e.sum(dim=dim, keepdim=True)\n")
OWN = ("我的理解是：把每个分量看成掷一枚均匀的硬币，d_k 个硬币加在一起，摇摆的幅度跟着 √d_k 长大；"
       "如果不管它，softmax 就像一个只看得见第一名的裁判。")


def test_each_kind_of_evidence_is_said_and_the_matched_lines_marked(tmp_path):
    students = {f"h{i:02d}": notebook(honest(random.Random(i))) for i in range(12)}
    students["eve"] = notebook({**EVE, "softmax": ODD}, OWN)
    students["zed"] = notebook({**disguise(EVE, random.Random(3), rename=False), "softmax": ODD}, OWN + "谢谢。")
    start = dt.datetime(2026, 3, 1, 10, tzinfo=dt.timezone.utc)
    found, index = cohort(tmp_path, students, {"eve": start, "zed": start + dt.timedelta(minutes=2)})
    pair = explain(found, pair_score(found, index, "eve", "zed"))
    assert (pair.student_a, pair.student_b) == ("eve", "zed") and pair.score > 0.9
    said = "\n".join(pair.evidence)
    assert len(pair.evidence) <= MAX_ITEMS
    for expected in ("2.3: shared rare fragment `", "2.2: identical comment `# normalise so exp never overflows",
                     "Q1: shared rare phrase “", "submitted 2 min apart, ", "2.2: same error message “softmax of",
                     "near-identical: 4 of 5 functions the same in the same names"):
        assert expected in said, (expected, said)
    shown = {one.exercise: one for one in pair.shown}
    assert {"2.2", "2.3", "2.4", "2.5"} <= set(shown) and "2.1" not in shown        # 2.1: the reference, nothing
    scores = shown["2.3"]
    assert scores.a.marked and scores.b.marked
    assert any("math.sqrt(width)" in scores.a.lines[i] for i in scores.a.marked)
    assert pair.evidence_text.startswith(pair.evidence[0] + "; ") and len(pair.evidence_text) <= 800 + 20


def test_names_and_dead_code_are_said(tmp_path):
    """Around the reference's own code: the same unusual names, statements spelled alike, the same dead line."""
    students = {f"h{i:02d}": notebook(honest(random.Random(i))) for i in range(12)}
    students["eve"] = notebook({**REFERENCE, "softmax": ODD})
    students["zed"] = notebook({**REFERENCE, "softmax": ODD.replace("    # normalise", "    # my own")})
    found, index = cohort(tmp_path, students)
    said = "\n".join(explain(found, pair_score(found, index, "eve", "zed")).evidence)
    for expected in ("2.2: same identifiers leftover_thing, zz_peak_holder", "2.2: same dead code `leftover_thing",
                     "2.2: the whole function in the same names (3 statements of its own), e.g. `zz_peak_holder"):
        assert expected in said, (expected, said)


def test_the_evidence_of_a_reference_pair_is_empty(tmp_path):
    """An honest pair is never a candidate; explained anyway, it has nothing to say."""
    students = {"alice": notebook(REFERENCE), "bob": notebook(REFERENCE), "eve": notebook(EVE)}
    found, index = cohort(tmp_path, students)
    assert pair_score(found, index, "alice", "bob") is None
    assert found.scored() == []
