"""The claims of the evidence cells, re-derived with the installed torch: each chapter's code cells run
in-process (self-checks and hidden-test cells left out, plots not shown) and the numbers the prose quotes
are asserted against what the cells computed."""
from __future__ import annotations

import pytest

from evidence import run_chapter

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chapter_01():
    return run_chapter("01_rnn_decay")


@pytest.fixture(scope="module")
def chapter_03():
    return run_chapter("03_padding_masks")


@pytest.fixture(scope="module")
def chapter_04():
    return run_chapter("04_multi_head_attention")


def test_01_forgetting_is_a_property_of_the_gradient(chapter_01):
    ns, text = chapter_01
    g = ns["gradients"]
    assert f"{g[0.9][50]:.2g}" == "0.0011" and "0.0011" in text
    assert g[0.9][10] > g[0.9][20] > g[0.9][50]                  # vanishing with L
    assert 1e-20 < abs(g[1.5][50]) < 1e-19 and r"5\times 10^{-20}" in text
    assert f"{ns['saturated_h']:.3f}" == "0.859" and "0.859" in text        # h_L does not decay...
    assert abs(g[1.5][50]) < abs(g[0.9][50])                     # ...but its gradient vanishes fastest
    assert f"{ns['exploding'][10]:.0f}" == "19" and "约为 19" in text       # near 0 it explodes
    assert ns["norm_before"] > 1 and abs(ns["x_tiny"].grad.norm().item() - 1.0) < 1e-9   # clipping: norm 1


def test_01_scalar_rnn_numbers_of_the_prose(chapter_01):
    ns, text = chapter_01
    assert f"{ns['saturated']:.4f}" == "0.8586" and "0.8586" in text
    assert f"{ns['bound'][20]:.3f}" == "0.062" and f"{ns['bound'][50]:.4f}" == "0.0026"
    assert "0.062" in text and "0.0026" in text
    assert f"{ns['residuals'][20]:.4f}" == "0.0493" and f"{ns['residuals'][50]:.4f}" == "0.0021"


def test_01_attention_recalls_where_the_rnn_forgets(chapter_01):
    ns, _text = chapter_01
    recall = ns["recall"]
    longest = max(ns["RECALL_DISTANCES"])
    assert recall["注意力"][longest] >= 0.9
    assert recall["RNN"][longest] <= 0.3                          # near chance (1/8)
    assert recall["注意力"][longest] > recall["RNN"][longest] + 0.5
    assert recall["RNN"][min(ns["RECALL_DISTANCES"])] >= 0.9       # the RNN is fine at short distance


def test_03_torch_paths_on_a_fully_padded_sentence(chapter_03):
    """The torch_nan_note's claims, for the installed torch."""
    ns, _text = chapter_03
    paths = ns["torch_paths"]
    assert paths["masked_fill(-inf) + softmax"] == "NaN"
    for mode in ("train", "eval"):
        for grad in (True, False):
            assert paths[f"MHA {mode}, need_weights=True, grad={grad}"] == "NaN"
    assert paths["MHA train, need_weights=False, grad=True"] == "out_proj.bias"
    assert paths["MHA train, need_weights=False, grad=False"] == "out_proj.bias"
    assert paths["MHA eval, need_weights=False, grad=True"] == "out_proj.bias"
    assert paths["MHA eval, need_weights=False, grad=False"] == "NaN"      # the inference fast path
    assert paths["F.scaled_dot_product_attention (CPU)"] == "0"


def test_03_causal_masks_in_torch(chapter_03):
    ns, _text = chapter_03
    import torch

    w = ns["w_mha"]
    assert bool((w[:, :, ns["blocked_future"]] == 0).all())
    assert torch.allclose(ns["by_flag"], ns["by_mask"], atol=1e-6)
    assert torch.allclose(ns["merged"], ns["out_mha"][:1], atol=1e-6)
    assert ns["no_leak"] is True


def test_04_heads_split_the_work_and_need_positions(chapter_04):
    ns, _text = chapter_04
    runs = ns["runs"]

    def final(losses):
        return sum(losses[-10:]) / 10

    assert final(runs[8]["losses"]) < 0.1 < final(runs[1]["losses"])
    assert ns["unordered_final"] > 10 * final(runs[8]["losses"])       # no positions: left and right look alike
    assert {-1, 1} <= set(ns["head_focus"].values())                   # some heads look left, some right


def test_04_fully_padded_gradients(chapter_04):
    ns, _text = chapter_04
    import torch

    assert bool(torch.isnan(ns["torch_mha"].in_proj_weight.grad).any())      # torch: NaN
    assert all(bool(torch.isfinite(p.grad).all()) for p in ns["module"].parameters())   # ours: finite
    report = ns["report"]                                      # strict=False loaded nothing, raised nothing
    assert len(report.unexpected_keys) == 4 and set(report.missing_keys) == {"qkv_weight", "out.weight", "out.bias"}
