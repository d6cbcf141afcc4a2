"""Written answers as words and shingles: Chinese characters one by one, other words whole, markup dropped."""
from __future__ import annotations

from autograder.similarity.prose import N, prose, shingles, words


def test_words_are_chinese_characters_and_latin_words():
    expected = ["不", "缩", "放", "时", "sqrt", "d_k", "越", "大", "softmax"]
    assert words("不缩放时，$\\sqrt{d_k}$ 越大 Softmax!") == expected
    assert words("  ") == []


def test_shingles_are_runs_of_n_words_with_their_positions():
    text = "一 二 三 四 五 六 一 二 三 四 五"
    found = prose(text)
    assert len(found.words) == 11
    assert sorted(found.shingles.values()) == sorted([[0, 6], [1], [2], [3], [4], [5]])
    assert len(shingles("too short")) == 0 and len(shingles(" ".join(["w"] * N))) == 1


def test_a_phrase_is_shown_as_it_reads():
    found = prose("方差是 d_k, so divide by sqrt(d_k)")
    assert found.phrase(0, len(found.words)) == "方差是 d_k so divide by sqrt d_k"
    assert found.phrase(0, len(found.words), chars=5) == "方差是 …"
