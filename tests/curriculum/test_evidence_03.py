"""Chapter 03's claims re-derived from its cells (issue 24, items 8 and 9): the empty sentence of the running
example comes out of a cleaning step the chapter performs (no multi-GPU padding it cannot show); the 3.2
statement's finite fills and its NaN that reaches the gradients through a finite loss are computed by a
demonstration cell; the loss's wrong denominator is the factor the cells print; what torch does on a fully
padded sentence is stated for the installed torch only, and the paths of nn.MultiheadAttention are the ones
the prose names."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from evidence import run_chapter

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chapter_03():
    return run_chapter("03_padding_masks")


def _section(text: str, start: str, end: str) -> str:
    """The markdown from the heading ``start`` up to the next heading ``end``."""
    first = text.index(start)
    return text[first:text.index(end, first)]


def test_03_the_empty_sentence_is_what_cleaning_leaves(chapter_03):
    """Item 8: the running example's three sentences are cleaned from three comments by the cell after 3.1;
    the third comment holds only emoji and punctuation, so nothing is left of it."""
    ns, text = chapter_03
    comments, sentences = ns["comments"], ns["sentences"]
    assert ns["lengths"].tolist() == [5, 3, 0]
    assert sentences[2] == [] and not re.search(r"[\u4e00-\u9fff]", comments[2])
    assert [len(words) for words in sentences] == [5, 3, 0]
    prose = _section(text, "## 练习 3.1", "**要求**")
    assert f"一条只有表情和标点的评论（比如“{comments[2]}”），清洗时去掉表情和标点，就一个词元都不剩" in prose
    assert "长度 5、3、0" in prose
    # The table of the statement shows the cleaned sentences, token by token.
    for words in sentences[:2]:
        assert "| " + " | ".join(words) in prose
    for unsupported in ("多卡", "凑数", "DistributedSampler", "切块", "并不少见"):
        assert unsupported not in text
    # "the paths where NaN appears" are those the torch comparison computes
    assert "手写的 softmax 和 `nn.MultiheadAttention` 的几条路径正是在这样的句子上出现 NaN" in prose
    paths = ns["torch_paths"]
    assert paths["masked_fill(-inf) + softmax"] == "NaN"
    assert sum(result == "NaN" for path, result in paths.items() if path.startswith("MHA")) >= 2


def test_03_without_the_mask_padded_keys_take_weight(chapter_03):
    """The introduction: queries give padded keys a share of the weight when nothing masks them."""
    ns, text = chapter_03
    share = ns["unmasked"][:, 3:].sum(dim=-1)
    assert bool((share > 0.1).all())
    assert "查询照样给填充的键打分、分走权重" in text


def test_03_finite_fills_as_the_statement_says(chapter_03):
    """The 3.2 statement's paragraph on -1e9, computed by the demonstration cell."""
    import torch

    ns, text = chapter_03
    statement = _section(text, "## 练习 3.2", "**要求**")
    Tk = ns["fill_scores"].shape[-1]
    # a fully padded row comes out uniform: 1/Tk each
    assert torch.allclose(ns["uniform"][2], torch.full((5, Tk), 1 / Tk, dtype=torch.float64))
    assert "却会把权重平均分给所有填充位置（每个 $1/T_k$）" in statement
    # float16 cannot hold -1e9: masked_fill raises
    assert torch.finfo(torch.float16).max == 65504 and "最大约 65504" in statement
    assert ns["half_result"].startswith("报错") and "`masked_fill` 会直接报错" in statement
    with pytest.raises(RuntimeError):
        torch.zeros(2, dtype=torch.float16).masked_fill(torch.tensor([True, False]), -1e9)
    # real scores as negative as the fill: the padded keys take weight even with the fully padded row patched,
    # and zeroing the padded weights afterwards leaves rows that no longer sum to 1
    assert bool((ns["leak"] > 0.1).all())
    assert bool((ns["pads_zeroed"][1].sum(dim=-1) < 0.9).all())
    assert "有效键的分数本身和 `-1e9` 一样负时，填充键照样分走权重（或者每行的和不再是 1）" in statement
    # -inf keeps the padded keys at exactly 0 there, and leaves the fully padded row to be handled (NaN)
    assert bool((ns["exact"][1, :, 3:] == 0).all()) and bool(ns["exact"][2].isnan().all())
    yours = ns["yours"]
    assert bool((yours[1, :, 3:] == 0).all()) and bool((yours[2] == 0).all()) and not bool(yours.isnan().any())
    assert "另一个流行的做法" not in statement


def test_03_nan_reaches_the_gradients_through_a_finite_loss(chapter_03):
    """The 3.2 statement's "NaN 会传染": the loss leaves the fully padded sentence out and is finite, yet every
    element of both weight matrices' gradients is NaN, one step makes the layer NaN; masked_softmax keeps
    the same loss with finite gradients."""
    ns, text = chapter_03
    statement = _section(text, "## 练习 3.2", "**要求**")
    loss_plain, grad_in, grad_out = ns["toy_plain"]
    assert math.isfinite(loss_plain)
    assert (ns["toy_targets"][2] == -100).all()               # the fully padded sentence counts nowhere
    assert bool(grad_in.isnan().all()) and bool(grad_out.isnan().all())
    assert bool(ns["W_stepped"].isnan().all()) and bool((ns["x_toy"][0] @ ns["W_stepped"]).isnan().all())
    assert ns["loss_safe"] == pytest.approx(loss_plain, rel=1e-6)
    assert bool(ns["safe_in"].isfinite().all()) and bool(ns["safe_out"].isfinite().all())
    assert "就算损失用 `ignore_index` 把这一句的位置全部剔除、算出来是个正常的数" in statement
    assert "一个小模型的损失是有限的，两个权重矩阵的梯度却每个元素都是 NaN" in statement
    assert "这一层的参数就全成了 NaN，之后经过这一层的每个输出也都是 NaN" in statement
    assert "所有参数都变成 NaN" not in text


def test_03_the_wrong_denominator_is_the_printed_factor(chapter_03):
    """3.4: dividing by B*T multiplies the loss by the counted share, 8/15 in the chapter's example; a sentence
    without a counted position gives torch's NaN."""
    ns, text = chapter_03
    statement = _section(text, "## 练习 3.4", "**提示**")
    counted, total = ns["counted"], ns["targets"].numel()
    assert (counted, total) == (8, 15) == (sum(ns["lengths"].tolist()), 15)
    assert ns["over_all"].item() == pytest.approx(ns["ours"].item() * counted / total)
    assert f"本章的例子里是 {counted}/{total}" in statement
    assert "句子越短，模型学到的越少" not in statement
    assert math.isnan(ns["empty_sentence"].item()) and "torch 给 NaN（3.4 之后的单元格单独算了空句）" in statement


def test_03_multihead_attention_paths_are_the_ones_the_prose_names(chapter_03):
    """The torch comparison: with need_weights=False, nn.MultiheadAttention calls F.scaled_dot_product_attention
    in training mode or when gradients are needed, and not on the inference fast path (eval, no_grad)."""
    import warnings

    import torch
    import torch.nn.functional as F

    ns, text = chapter_03
    note = _section(text, "### 对照：PyTorch 自己在整句填充时给出什么？", "顺便注意")
    mha, x, key_padding = ns["mha"], ns["x"], ns["key_padding"]
    sdpa, calls = F.scaled_dot_product_attention, []

    def counted(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    F.scaled_dot_product_attention = counted
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for mode in ("train", "eval"):
                mha.train(mode == "train")
                for grad in (True, False):
                    calls.clear()
                    with torch.set_grad_enabled(grad):
                        mha(x, x, x, key_padding_mask=key_padding, need_weights=False)
                    assert bool(calls) == (mode == "train" or grad), (mode, grad)
                    assert ns["torch_paths"][f"MHA {mode}, need_weights=False, grad={grad}"] == (
                        "out_proj.bias" if calls else "NaN")
    finally:
        F.scaled_dot_product_attention = sdpa
        mha.train()
    assert "它改用 `F.scaled_dot_product_attention` 计算，整行被掩蔽的查询得到 0，输出恰好是 `out_proj.bias`" in note
    assert "走的是推理用的“快速路径”，不再调用 `F.scaled_dot_product_attention`，输出又是 NaN" in note
    # the printed names are Chinese, one per path
    assert set(ns["path_names"]) == {p for p in ns["torch_paths"] if p.startswith("MHA")}
    assert not any(re.search(r"\b(train|eval)\b", name) for name in ns["path_names"].values())


def test_03_need_weights_true_gives_nan_output_and_weights(chapter_03):
    """"need_weights=True（默认）时，这个样本的输出和权重都是 NaN，训练模式和评估模式都一样": the cell records
    the weights of sentence 2 on each of those paths; its output is NaN there, every element of it."""
    import warnings

    import torch

    ns, text = chapter_03
    note = _section(text, "### 对照：PyTorch 自己在整句填充时给出什么？", "顺便注意")
    assert "`need_weights=True`（默认）时，这个样本的输出和权重都是 NaN，训练模式和评估模式都一样" in note
    mha, x, key_padding = ns["mha"], ns["x"], ns["key_padding"]
    assert len(ns["weights_nan"]) == 4 and all(ns["weights_nan"].values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for mode in ("train", "eval"):
                mha.train(mode == "train")
                for grad in (True, False):
                    assert ns["torch_paths"][f"MHA {mode}, need_weights=True, grad={grad}"] == "NaN"
                    with torch.set_grad_enabled(grad):
                        out, attn = mha(x, x, x, key_padding_mask=key_padding)
                    assert bool(out[2].isnan().all()) and bool(attn[2].isnan().all())
                    assert not bool(out[:2].isnan().any())          # the other sentences are fine
        finally:
            mha.train()


def test_03_scaled_dot_product_attention_is_stated_for_the_installed_torch_only(chapter_03):
    """The cell measures one torch on the CPU; the prose says so, and names no other version's behaviour."""
    ns, text = chapter_03
    note = _section(text, "### 对照：PyTorch 自己在整句填充时给出什么？", "顺便注意")
    assert ns["torch_paths"]["F.scaled_dot_product_attention (CPU)"] == "0"
    assert "本机的 torch 在 CPU 上对整行被掩蔽的查询返回 0" in note
    assert "别的版本、后端和设备不一定给 0，不要依赖它" in note
    for unsupported in ("较新的版本", "早些的版本", "某些 GPU 后端给 NaN"):
        assert unsupported not in text
    summary = text[text.index("## 小结"):]
    assert "`F.scaled_dot_product_attention` 在本机 CPU 上给 0，别的版本、后端和设备不一定" in summary


def test_03_fully_padded_message_names_only_the_paths_that_give_nan(chapter_03):
    """The public check's message on a NaN row says torch's softmax and some paths of nn.MultiheadAttention
    give NaN there (not "torch's own modules" at large: some of them give 0 or out_proj.bias)."""
    ns, _text = chapter_03
    source = (ROOT / "source" / "03_padding_masks" / "checks.py").read_text(encoding="utf-8")
    assert "torch 自带的 softmax 和 nn.MultiheadAttention 的一些路径在这里也给 NaN" in source
    assert "torch 自带的模块在这里也给 NaN" not in source
    results = set(ns["torch_paths"].values())
    assert ns["torch_paths"]["masked_fill(-inf) + softmax"] == "NaN" and {"NaN", "out_proj.bias", "0"} <= results


# -- more of the prose's numbers, on the same run of the chapter -------------------------------------------
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
