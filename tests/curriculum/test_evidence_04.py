"""The claims of 04_multi_head_attention that issue 24 corrected or added, re-derived from the chapter's own
cells (items 1, 2, 7 and 14): each test reads what the cells computed and asserts that the prose says it,
no more broadly."""
from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import nbformat
import pytest

from evidence import run_chapter

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "04_multi_head_attention"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chapter():
    return run_chapter(ASSIGNMENT)


def markdown(cell_id: str) -> str:
    """One markdown cell of the source notebook, by its id."""
    nb = nbformat.read(ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def code(cell_id: str) -> str:
    return markdown(cell_id)


def last_ten(losses: list[float]) -> float:
    return sum(losses[-10:]) / 10


# -- item 1: nan_to_num after the softmax, and the gradients of a fully padded row ------------------------------
def test_04_nan_to_num_gradients_depend_on_how_the_inf_got_in(chapter):
    import torch

    ns, _text = chapter
    recipes, truth = ns["nan_recipes"], ns["true_grad"]
    assert set(recipes) == {(f, s) for f in ("masked_fill", "加法掩码") for s in ("nan_to_num", "torch.where")}
    for (fill, _swap), r in recipes.items():
        assert bool((r["weights"][1] == 0).all())                       # the forward pass is right either way
        assert bool(torch.isnan(r["softmax_input"][1]).all())           # softmax's backward: NaN in every recipe
        if fill == "masked_fill":
            assert bool((r["scores"][1] == 0).all())                    # masked_fill's backward zeroes the row
            assert bool(torch.isfinite(r["W_q"]).all())
            assert (r["W_q"] - truth).abs().max().item() == 0.0         # finite and correct: "差恰好是 0"
        else:
            assert bool(torch.isnan(r["scores"][1]).all())              # the addition passes the NaN on
            assert bool(torch.isnan(r["W_q"]).all())                    # "每个元素都是 NaN"
    # the truth leaves out the fully padded sample, whose output is the constant 0
    assert bool(torch.isfinite(truth).all()) and truth.abs().max().item() > 0

    statement = markdown("ex4-3-statement")
    assert "要看 $-\\infty$ 是怎么进到分数里的" in statement
    assert "用 `masked_fill` 填 $-\\infty$：它的反向把被填位置的梯度换成 0" in statement
    assert "传回 `q`、`k` 的梯度有限，而且是对的" in statement
    assert "用**加法掩码**" in statement and "NaN 一路传进 `q`、`k`，再进 `in_proj_weight.grad`" in statement
    assert "反向传播却仍要经过那次 0/0" not in statement                 # the old, too broad claim
    reading = markdown("nan-gradient-reading")
    assert "softmax 输入处的梯度在四种写法里也一样，都是 NaN" in reading
    assert "`W_q.grad` 与真值一致（这次的差恰好是 0）" in reading and "`W_q.grad` 的每个元素都是 NaN" in reading
    module_statement = markdown("ex4-4-statement")
    assert "用 `masked_fill` 填 $-\\infty$、softmax 之后再 `nan_to_num` 的写法也满足" in module_statement
    assert "**加法掩码**加上 softmax 之后的 `nan_to_num`，前向对、梯度是 NaN" in module_statement
    summary = markdown("summary")
    assert "只修好了前向" not in summary
    assert "`masked_fill` 填进去的，梯度有限而且正确；加法掩码加进去的，梯度是 NaN" in summary


def test_04_torch_adds_its_mask_when_it_returns_weights():
    """The statement's reading of torch's source: with need_weights=True the boolean key_padding_mask becomes a
    0/-inf float mask, added to the scores (baddbmm), which is why torch's gradients are NaN there."""
    import torch.nn.functional as F

    canonical = inspect.getsource(F._canonical_mask)
    assert re.search(r"zeros_like\(\s*mask, dtype=target_type\s*\)"
                     r"\.masked_fill_\(\s*mask, float\(\"-inf\"\)", canonical)
    forward = inspect.getsource(F.multi_head_attention_forward)
    assert "key_padding_mask = _canonical_mask(" in forward
    assert "attn_mask = key_padding_mask" in forward and "attn_mask = attn_mask + key_padding_mask" in forward
    assert re.search(r"if need_weights:.*?torch\.baddbmm\(\s*attn_mask, q_scaled", forward, re.S)


def test_04_the_fully_padded_message_names_the_additive_mask(course):
    """checks.py's 4.4 message, as the self-check gives it to the additive-mask recipe (the known mistake)."""
    from autograder import catalog as C
    from support import failed, grade

    mistake = next(m for m in C.MISTAKES["4.4"] if m.name == "nan-to-num-backward")
    result = failed(grade(course, "4.4", mistake.fn, audiences=(C.Audience.PUBLIC,)))
    message = result["fully-padded-row"].message.zh
    assert "常见的原因是加法掩码" in message and "用 masked_fill 填 -inf 时" in message
    assert "前向之后再用 nan_to_num 或 torch.where 把 NaN 换成 0 不够" not in message
    assert "加法掩码" in mistake.message.zh and "masked_fill" in mistake.message.zh


# -- item 7: strict=False loads what matches; torch's initialization ---------------------------------------
def test_04_strict_false_loads_the_keys_that_match(chapter):
    import torch

    ns, _text = chapter
    report, partial = ns["report"], ns["partial"]
    assert report.unexpected_keys == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert partial.unexpected_keys == ["out_proj.weight", "out_proj.bias"]          # skipped
    assert partial.missing_keys == ["out.weight", "out.bias"]                       # left as initialized
    half, torch_mha = ns["half"], ns["torch_mha"]
    assert torch.equal(half.in_proj_weight, torch_mha.in_proj_weight)               # loaded
    assert torch.equal(half.in_proj_bias, torch_mha.in_proj_bias)
    assert not torch.equal(half.out.weight, torch_mha.out_proj.weight)
    statement = markdown("ex4-4-statement")
    assert "什么也不加载" not in statement and "什么也不加载" not in markdown("summary")
    assert "名字对得上的键照常加载，对不上的**悄悄跳过**" in statement
    assert "名字全不对的模块一个张量也没加载" in statement
    assert "加载了 `in_proj_weight` 和 `in_proj_bias`，跳过了另外两个" in statement
    assert "`strict=False` 只加载名字对得上的键，其余的悄悄跳过，不报错" in markdown("summary")


def test_04_the_recommended_initialization_is_torchs(chapter):
    import torch

    ns, _text = chapter
    fresh = ns["fresh_torch"]
    assert bool((fresh.in_proj_bias == 0).all()) and bool((fresh.out_proj.bias == 0).all())
    assert torch.equal(fresh.out_proj.weight, ns["plain_linear"].weight)           # nn.Linear's own init
    assert ns["same_start"] is True                                                 # the reference follows it
    assert ("`in_proj_weight` 用 `nn.init.xavier_uniform_`，`in_proj_bias` 和 `out_proj.bias` 取 0，"
            "`out_proj.weight` 保留 `nn.Linear` 自己的初始化") in markdown("ex4-4-statement")


# -- item 2: each head's weight on both neighbours, the even-split floor ------------------------------------
def test_04_the_even_split_floor(chapter):
    ns, _text = chapter
    # The Bayes loss of a reader that knows only the unordered pair {left, right} of 8 uniform tokens.
    vocab = ns["VOCAB"]
    floor = sum(math.log(2) for a in range(vocab) for b in range(vocab) if a != b) / vocab ** 2
    assert abs(ns["EVEN_SPLIT_FLOOR"] - floor) < 1e-12 and abs(floor - 7 / 8 * math.log(2)) < 1e-12
    discussion = markdown("experiment-discussion")
    assert "$$\\frac{7}{8}\\ln 2 \\approx 0.6065 .$$" in discussion and f"{floor:.4f}" == "0.6065"
    assert "$a = b$ 的概率是 $1/8$" in discussion and "$a \\ne b$ 的概率是 $7/8$" in discussion
    assert "这是**平分**的下限，不是 1 个头的下限" in discussion
    assert "$\\frac78\\ln 2 \\approx 0.607$" in markdown("summary")


def test_04_what_the_run_shows(chapter):
    ns, _text = chapter
    runs, long_single = ns["runs"], ns["long_single"]
    floor = ns["EVEN_SPLIT_FLOOR"]
    steps, long_steps = ns["STEPS"], ns["LONG_STEPS"]
    assert (steps, long_steps) == (120, 600)
    assert long_single["losses"][:steps] == runs[1]["losses"]                   # the same run, trained on
    one, longer, eight = last_ten(runs[1]["losses"]), ns["long_final"], last_ten(runs[8]["losses"])
    assert one > floor > longer > 100 * eight                                    # above, then below, the floor
    discussion = markdown("experiment-discussion")
    assert f"1 个头训练 120 步，最后 10 步的平均损失是 {one:.4f}，还在下限之上" in discussion
    # 600 steps amplify the floating-point details of the machine: the text states the bound, the cell the number
    assert "权重仍然不是平分，损失降到平分的下限以下（上面一格打印出这次的数字" in discussion
    assert f"8 个头 120 步就到了 {eight:.4f}" in discussion
    assert f"同样 8 个头的损失停在 {ns['unordered_final']:.4f}" in discussion
    for n_steps, (left, right) in ns["single_head"].items():
        assert n_steps in (steps, long_steps) and abs(left - right) > 0.05      # not an even split
        if n_steps == steps:
            assert f"左 {left:.2f}、右 {right:.2f}" in discussion
    # the eight heads: which look at one neighbour with at least FOCUS of their weight, and which split it
    neighbours, focus = ns["neighbours"], ns["FOCUS"]
    lefts = [h for h, (left, right) in neighbours.items() if max(left, right) >= focus and left > right]
    rights = [h for h, (left, right) in neighbours.items() if max(left, right) >= focus and right > left]
    split = [h for h in neighbours if h not in lefts + rights]
    assert lefts and rights and split                                           # not every map is one diagonal
    join = "、".join
    assert (f"有 {len(lefts) + len(rights)} 个头把至少 {focus} 的权重放在同一个邻居上"
            f"（头 {join(map(str, lefts))} 看左邻居，头 {join(map(str, rights))} 看右邻居），"
            f"另外 {len(split)} 个头把权重分给了两边") in discussion
    example = int(re.search(r"例如头 (\d)：", discussion).group(1))
    left, right = neighbours[example]
    assert example in split and f"例如头 {example}：左 {left:.2f}、右 {right:.2f}" in discussion
    assert "每张图都是一条平移的对角线" not in discussion and "没法把左右两个邻居分开取回" not in discussion
    assert f"8 个头中有 {len(lefts) + len(rights)} 个各自盯住一个邻居" in markdown("summary")
    # the plot's titles carry both weights, not an argmax label
    assert 'f"头 {head}：左 {left:.2f}，右 {right:.2f}"' in code("experiment-heads")


# -- item 14: sparse attention where the chapter counts the memory of attention --------------------------------
def test_04_sparse_attention_saves_memory_only_when_it_stores_the_window(chapter):
    import torch

    ns, _text = chapter
    T, w = ns["T_long"], ns["w"]
    dense, band = ns["dense_weights"], ns["band_weights"]
    assert tuple(dense.shape) == (1, T, T) and tuple(band.shape) == (1, T, 2 * w + 1)
    in_window = sum(min(T - 1, i + w) - max(0, i - w) + 1 for i in range(T))
    assert int((dense != 0).sum()) == in_window == int((band != 0).sum())        # outside the window: exactly 0
    assert torch.allclose(ns["band_out"], ns["dense_out"], atol=1e-5)            # the same outputs
    assert (ns["band_out"] - ns["full_out"]).abs().max().item() > 0.5            # another model than full attention
    dense_kib, band_kib = ns["kib"](dense), ns["kib"](band)
    assert (dense_kib, band_kib) == (16384, 520)
    note = markdown("cost-table")
    assert "**稀疏注意力**让每个查询只和一部分键算分数" in note
    assert f"$T = {T}$、$w = {w}$" in note
    assert f"权重是 $2048 \\times 2048$ 个 float32，{dense_kib:.0f} KiB" in note
    assert f"权重是 $2048 \\times {2 * w + 1}$ 个，{band_kib:.0f} KiB，输出相同" in note
    assert "它换了模型" in note and "一个字节也没少" in note
    assert "稀疏注意力（例如局部窗口）" in markdown("summary")


# -- more of the prose's numbers, on the same run of the chapter -------------------------------------------
def test_04_heads_split_the_work_and_need_positions(chapter):
    ns, _text = chapter
    runs = ns["runs"]

    def final(losses):
        return sum(losses[-10:]) / 10

    assert final(runs[8]["losses"]) < 0.1 < final(runs[1]["losses"])
    assert ns["unordered_final"] > 10 * final(runs[8]["losses"])       # no positions: left and right look alike
    assert {-1, 1} <= set(ns["head_focus"].values())                   # some heads look left, some right


def test_04_fully_padded_gradients(chapter):
    ns, _text = chapter
    import torch

    assert bool(torch.isnan(ns["torch_mha"].in_proj_weight.grad).any())      # torch: NaN
    assert all(bool(torch.isfinite(p.grad).all()) for p in ns["module"].parameters())   # ours: finite
    report = ns["report"]                                      # strict=False loaded nothing, raised nothing
    assert len(report.unexpected_keys) == 4 and set(report.missing_keys) == {"qkv_weight", "out.weight", "out.bias"}
