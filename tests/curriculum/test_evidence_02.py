"""Chapter 02's claims re-derived from its cells (issue 24): the pitfall "注意力权重 ≠ 理解程度" is taught by
a cell that computes its three counterexamples, and the prose quotes what that cell computed; the
chapter's words are the glossary's (独热, not one-hot)."""
from __future__ import annotations

import pytest
from evidence import run_chapter

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chapter_02():
    return run_chapter("02_qkv_attention")


def _pitfall(text: str) -> str:
    """The markdown of the pitfall section (from its heading to the summary)."""
    start = text.index("## 误区：注意力权重 ≠ 理解程度")
    return text[start:text.index("## 小结", start)]


def test_02_untrained_random_projections_already_give_peaked_weights(chapter_02):
    """Counterexample 1: 1000 random draws (the example's sizes and distribution), nothing learned."""
    ns, text = chapter_02
    prose = _pitfall(text)
    mean_row_max, share_big = ns["mean_row_max"], ns["share_big"]
    assert mean_row_max > 1.5 * (1 / 5)                # well above the even split over 5 keys
    assert 0 < share_big < 1
    assert f"每行最大的权重平均为 {mean_row_max:.2f}，而 5 个键平均分配时每个是 {1 / 5:.2f}" in prose
    assert f"{share_big:.0%} 的权重矩阵里至少有一个权重超过 0.5" in prose
    assert len(ns["row_max"]) == 1000 and "再随机抽 1000 组" in prose      # one (T,) row maximum per draw


def test_02_the_largest_weight_is_not_the_longest_addend(chapter_02):
    """Counterexample 2 on the chapter's own example: row 想 gives its largest weight to 想, but the longest
    vector added to its output comes from 我, whose value vector is longer."""
    import torch
    import torch.nn.functional as F

    ns, text = chapter_02
    prose = _pitfall(text)
    words, w, V = ns["words"], ns["w_ex"], ns["V_ex"]
    # the weights are torch's own for the example's Q and K
    eye = torch.eye(5)
    assert torch.allclose(w, F.scaled_dot_product_attention(ns["Q_ex"], ns["K_ex"], eye), atol=1e-6)
    # the addends of out[i] = sum_j w[i, j] v[j], measured as vectors
    addends = w.unsqueeze(-1) * V.unsqueeze(0)                         # (Tq, Tk, Dv)
    assert torch.allclose(addends.sum(dim=1), w @ V, atol=1e-6)
    lengths = addends.norm(dim=-1)
    assert torch.allclose(lengths, ns["addend_len"], atol=1e-6)
    i = words.index("想")
    me = words.index("我")
    assert int(w[i].argmax()) == i and int(lengths[i].argmax()) == me
    value_len = V.norm(dim=-1)
    assert value_len[me] > value_len[i]
    assert (f"“想”这一行把最大的权重 {w[i, i].item():.3f} 给了“想”自己，加进去最长的向量却来自“我”"
            f"（长 {lengths[i, me].item():.3f}，“想”的只有 {lengths[i, i].item():.3f}）") in prose
    assert f"“我”的值向量长 {value_len[me].item():.2f}，“想”的只有 {value_len[i].item():.2f}" in prose
    # the prose names one row; the cell prints every row, and 想 is the one where the two differ
    differ = [words[r] for r in range(5) if int(w[r].argmax()) != int(lengths[r].argmax())]
    assert differ == ["想"]


def test_02_different_weights_give_the_same_output(chapter_02):
    """Counterexample 3: keys 1 and 2 equal, value 3 the mean of values 1 and 2; every query's output is
    (v_1 + v_2) / 2, whatever its weights."""
    import torch

    ns, text = chapter_02
    prose = _pitfall(text)
    K, V, w, out = ns["K_toy"], ns["V_toy"], ns["w_toy"], ns["out_toy"]
    assert torch.equal(K[0], K[1]) and torch.allclose(V[2], (V[0] + V[1]) / 2)
    half = (V[0] + V[1]) / 2
    assert torch.allclose(out, half.expand_as(out), atol=1e-6)
    assert (w[:, 2].max() - w[:, 2].min()).item() > 0.5                # the two queries weigh token 3 apart
    assert f"查询 A 只给第三个词元 {w[0, 2].item():.3f} 的权重，查询 B 给它 {w[1, 2].item():.3f}" in prose
    assert f"两者的输出都是 {[round(o, 4) for o in half.tolist()]}" in prose
    # "不管查询是什么": any query, through the chapter's own 2.4
    g = torch.Generator().manual_seed(0)
    queries = torch.randn(50, 2, generator=g) * 4
    any_out, any_w = ns["scaled_dot_product_attention"](queries, K, V)
    assert torch.allclose(any_w[:, 0], any_w[:, 1], atol=1e-6)
    assert torch.allclose(any_out, half.expand_as(any_out), atol=1e-5)


def test_02_summary_states_the_pitfall_and_uses_the_glossary(chapter_02):
    _ns, text = chapter_02
    summary = text[text.index("## 小结"):]
    assert "注意力权重 ≠ 理解程度" in summary
    assert "one-hot" not in text and "独热" in summary


def test_02_scaling_keeps_the_softmax_jacobian_only_where_the_numbers_say(chapter_02):
    """Issue 53, item 5: demo_scale measures the softmax's Jacobian (the chapter's 2.5) with 8 and with 200 keys,
    scaled and unscaled, at d = 64 and 1024; the findings, the 2.Q1 answer and the summary quote those numbers
    and claim what they show: with few keys scaling keeps the gradient, with many it is not the same story."""
    import math

    import torch
    import torch.nn.functional as F

    ns, text = chapter_02
    norms, tops = ns["jacobian_norms"], ns["top_weights"]
    assert set(norms) == set(tops) == {(8, 64), (8, 1024), (200, 64), (200, 1024)}

    # The chapter's 2.5 is the Jacobian torch's autograd finds for F.softmax.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, dtype=torch.float64, generator=g) * 3
    autograd = torch.stack([torch.autograd.functional.jacobian(lambda r: F.softmax(r, dim=-1), row) for row in x])
    assert torch.allclose(ns["softmax_jacobian"](F.softmax(x, dim=-1)), autograd, atol=1e-12)

    # The cell's numbers, re-derived from its seed and draws with torch's own softmax and its autograd Jacobian.
    g = torch.Generator().manual_seed(1)
    jacobian = torch.func.vmap(torch.func.jacrev(lambda row: F.softmax(row, dim=-1)))
    for n_keys in (8, 200):
        for d in (64, 1024):
            q, k = torch.randn(200, d, generator=g), torch.randn(n_keys, d, generator=g)
            raw = q @ k.T
            for i, s in enumerate((raw, raw / math.sqrt(d))):
                p = F.softmax(s, dim=-1)
                assert math.isclose(tops[n_keys, d][i], p.amax(dim=-1).mean().item(), rel_tol=1e-4)
                assert math.isclose(norms[n_keys, d][i], jacobian(s).norm(dim=(-2, -1)).mean().item(), rel_tol=1e-3)

    # What the findings claim. Few keys: unscaled, the weights near one-hot as d grows and the Jacobian shrinks,
    # below the scaled one at both widths; scaled, neither moves with d (either key count).
    assert tops[8, 64][0] < tops[8, 1024][0] and norms[8, 64][0] > norms[8, 1024][0]
    assert all(norms[8, d][0] < norms[8, d][1] for d in (64, 1024))
    for n_keys in (8, 200):
        assert abs(norms[n_keys, 64][1] - norms[n_keys, 1024][1]) < 0.03 * norms[n_keys, 64][1]
    # Many keys: at d = 64 the unscaled Jacobian is the larger one, the scaled weights are flat (near the even
    # split's Jacobian); at d = 1024 the unscaled one falls below.
    flat = math.sqrt(1 / 200 - 1 / 200 ** 2)
    assert norms[200, 64][0] > 2 * norms[200, 64][1] and tops[200, 64][1] < 0.1
    assert flat < norms[200, 64][1] < 2 * flat
    assert norms[200, 1024][0] < norms[200, 1024][1]

    findings = text[text.index("上面打印的数说明了两件事"):text.index("## 书面问题 2.Q1")]
    assert (f"最大权重的平均值从 $d = 64$ 的 {tops[8, 64][0]:.2f} 升到 $d = 1024$ 的 {tops[8, 1024][0]:.2f}，"
            f"雅可比的大小从 {norms[8, 64][0]:.3f} 降到 {norms[8, 1024][0]:.3f}") in findings
    assert (f"最大权重的平均值是 {tops[8, 64][1]:.2f} 和 {tops[8, 1024][1]:.2f}，"
            f"雅可比的大小是 {norms[8, 64][1]:.3f} 和 {norms[8, 1024][1]:.3f}") in findings
    assert f"不缩放的雅可比大（{norms[200, 64][0]:.3f} 对 {norms[200, 64][1]:.3f}）" in findings
    assert f"最大的平均只有 {tops[200, 64][1]:.2f}" in findings and f"雅可比的大小也只有 {flat:.3f}" in findings
    assert f"（{norms[200, 1024][0]:.3f} 对 {norms[200, 1024][1]:.3f}）" in findings

    answer = text[text.index("## 书面问题 2.Q1"):text.index("## 小结")]
    assert f"$d = 64$ 的 {norms[8, 64][0]:.3f} 降到 $d = 1024$ 的 {norms[8, 1024][0]:.3f}" in answer
    assert f"{norms[8, 64][1]:.2f}" == f"{norms[8, 1024][1]:.2f}" == "0.36" and "两次都是 0.36 左右" in answer
    assert f"（{norms[200, 64][0]:.3f} 对 {norms[200, 64][1]:.3f}）" in answer
    summary = text[text.index("## 小结"):]
    assert f"8 个键、$d = 1024$ 时雅可比的大小 {norms[8, 1024][0]:.3f}，缩放后 {norms[8, 1024][1]:.3f}" in summary
    # The claims the demonstration never showed are gone (issue 53, item 5).
    assert "其余权重和它们的梯度都接近 0" not in text and "梯度几乎消失" not in text
