"""The claims of 05_transformer_block's evidence cells, re-derived from the chapter's own cells: each test reads
what the cells computed and asserts what the prose and the printed lines say, no more broadly (issue 31)."""
from __future__ import annotations

import math
from pathlib import Path

import nbformat
import pytest

from evidence import run_chapter

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "05_transformer_block"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chapter():
    return run_chapter(ASSIGNMENT)


def cell(cell_id: str) -> str:
    """One cell of the source notebook, by its id."""
    nb = nbformat.read(ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def test_05_the_corpus_is_generated_as_the_intro_says(chapter):
    ns, _text = chapter
    intro = cell("experiment-intro")
    assert (len(ns["SUBJECTS"]), len(ns["PLACES"]), len(ns["ACTIONS"])) == (5, 4, 5)
    assert "5 个主语 × 4 个地点 × 5 个动作，拼成 100 个句子" in intro and len(set(ns["SENTENCES"])) == 100
    assert "随机抽 3000 句" in intro and len(ns["corpus_order"]) == 3000
    assert "两万多个字" in intro and 20_000 <= len(ns["corpus"]) < 30_000
    assert "词表只有二十几个字" in intro and 20 <= ns["VOCAB_SIZE"] < 30
    assert "小猫在河边唱歌。" in ns["SENTENCES"]
    # the model and the training, as stated
    assert (ns["WIDTH"], ns["HEADS"], ns["FF_WIDTH"], ns["LAYERS"], ns["STEPS"]) == (32, 4, 64, 2, 400)
    assert "宽度 32，4 个头，前馈宽 64，2 个块" in intro and "400 步" in intro
    assert "每步从语料里随机截 32 段、每段 32 个字" in intro and (ns["BATCH"], ns["CONTEXT"]) == (32, 32)
    # the floor: ln 100 per sentence spread over the characters
    assert ns["LOSS_FLOOR"] == pytest.approx(math.log(100) * 3000 / len(ns["corpus"]))


def test_05_the_model_trains_and_writes_corpus_sentences(chapter):
    ns, _text = chapter
    losses = ns["tf_losses"]
    assert len(losses) == 400
    assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20 / 3          # it learned
    assert sum(losses[-20:]) / 20 > ns["LOSS_FLOOR"] - 0.05           # and no loss below what the data allows
    good_before, whole_before = ns["sentence_check"](ns["before"])
    good_after, whole_after = ns["sentence_check"](ns["after"])
    assert good_before == 0 and good_after >= 3 and good_after > good_before
    good_long, whole_long = ns["good_long"], ns["whole_long"]
    assert whole_long >= 10 and good_long / whole_long >= 0.8
    assert ns["before"].startswith("小猫") and ns["after"].startswith("小猫")


def test_05_the_first_loss_is_checked_against_ln_v_and_the_embedding_starts_small(chapter):
    """Issue 53, 2: with nn.Embedding's N(0, 1) and the tied output layer the first loss is far above ln V (the
    prose: "远大于"); with std D^(-1/2) it is near it ("接近")."""
    ns, _text = chapter
    ln_v = math.log(ns["VOCAB_SIZE"])
    assert ns["first_loss_default"] > 3 * ln_v
    assert abs(ns["tf_losses"][0] - ln_v) < 1.0
    intro = cell("experiment-intro")
    assert "第一步的损失远大于 $\\ln V$" in intro and "标准差换成 $D^{-1/2}$" in intro
    assert "nn.init.normal_(model.token_embedding.weight, std=WIDTH ** -0.5)" in cell("experiment-train")


def test_05_generation_keeps_to_the_trained_context(chapter):
    """Issue 53, 1: the model was trained on 32 characters; generating with the last 32 only writes corpus
    sentences all along, while feeding it everything written falls apart past position 32."""
    ns, _text = chapter
    assert ns["CONTEXT"] == 32 and "只在 32 个字长的片段上训练过" in cell("experiment-intro")
    assert "context=CONTEXT" in cell("experiment-samples")
    good_long, whole_long = ns["good_long"], ns["whole_long"]
    good_all, whole_all = ns["good_unbounded"], ns["whole_unbounded"]
    assert good_long / whole_long >= 0.8 and whole_all < whole_long / 2       # fewer whole sentences at all
    assert good_all < good_long
    assert "表能现算，不等于模型学会了用它" in cell("experiment-intro")
    assert "生成时只送最后 32 个字" in cell("summary")


def test_05_the_rnn_has_the_same_parameter_count_and_the_same_batches(chapter):
    ns, _text = chapter
    assert abs(ns["rnn_params"] - ns["tf_params"]) / ns["tf_params"] < 0.01
    assert ns["tf_params"] == sum(p.numel() for p in ns["trained"].parameters())
    assert len(ns["rnn_losses"]) == len(ns["tf_losses"]) == ns["STEPS"]
    # The training is worded by what the cell shows (400 steps, its time in the plot): no wall clock here, where
    # a loaded machine once took 49 + 16 s (issue 53, 12); the time is measured and printed, never asserted.
    assert ns["STEPS"] == 400 and "训练 400 步（用时画在图里）" in cell("intro")
    assert ns["tf_seconds"] > 0 and ns["rnn_seconds"] > 0
    # the prose names no winner: the plot shows both, computed
    intro = cell("experiment-intro")
    assert "参数量相同" in intro and "比较损失和用时" in intro
    plot = cell("experiment-plot")
    assert "ax_time.bar" in plot and "rnn_seconds" in plot and "plot_text(" in plot


def test_05_the_attention_map_comes_with_the_caution(chapter):
    ns, _text = chapter
    note = cell("attention-note")
    assert "**注意力权重 ≠ 理解程度**" in note
    weights = ns["head_weights"]
    assert weights.shape == (4, 24, 24)
    assert bool((weights[:, ns["sample_causal"]] == 0).all())            # "因果掩码让右上角恒为 0"
    assert weights.sum(-1).sub(1).abs().max().item() < 1e-5
    assert "注意力权重 ≠ 理解程度" in cell("experiment-attention")


def test_05_the_cache_gives_the_same_tokens_faster(chapter):
    ns, _text = chapter
    assert ns["same_tokens"] is True
    assert ns["outputs"][True].shape == (1, 2 + ns["CACHE_TOKENS"])
    assert ns["timings"][False] > ns["timings"][True]                 # the speed-up is measured, and it is one
    assert ns["held"] == 2 * ns["LAYERS"] * ns["HEADS"] * (2 + ns["CACHE_TOKENS"]) * (ns["WIDTH"] // ns["HEADS"]) * 4
    summary = cell("summary")
    assert "写出的词元与不用缓存时完全相同" in summary and "快了多少上面量过" in summary


def test_05_the_facts_printed_before_the_experiment(chapter):
    import torch

    ns, _text = chapter
    # layer norm: E[x^2] - E[x]^2 in float32 breaks on the offset data, the stable one does not
    assert bool((ns["naive_var"] <= 1.0).any())
    # Printed as what they are (issue 53, 7): the gap is NaN where a variance came out negative (never "inf"),
    # and the cache of 32 x 4096 tokens exactly 4.5 GiB (never rounded to 4): the notebook's own print lines,
    # run again on its namespace.
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        source = nbformat.read(ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
        for line in (x for c in source.cells if c.cell_type == "code" for x in c.source.splitlines()):
            if line.startswith("print(\"E[x²] - E[x]² 写法与真值的最大差") or "批量 32、4096 个词元" in line:
                exec(line.strip(), ns)
    assert bool(ns["gap"].isnan().any())
    gap_line = "E[x²] - E[x]² 写法与真值的最大差： NaN（有的方差算成了负数，开方得 NaN）"
    assert printed.getvalue().splitlines() == [gap_line, "同样的模型，批量 32、4096 个词元：4.5 GiB"]
    assert (ns["mine"].double() - ns["truth"]).abs().max().item() < 1e-3
    # the block loads torch's layer and agrees with it
    assert ns["report"].missing_keys == [] and ns["report"].unexpected_keys == []
    # sampling with a seed repeats itself; the frequencies follow softmax(l / tau)
    assert ns["again"][0] == ns["again"][1]
    assert ns["same"] is True                                          # 5.5: the logits are causal
    assert ns["fp16"] == 36 * 2**20
    assert isinstance(ns["pe"], torch.Tensor) and tuple(ns["pe"].shape) == (50, 16)


def test_05_generation_seeds_give_independent_streams(chapter):
    """Issue 53, 6: with seed + step as each step's seed, seed s + 1 replayed seed s one step later (seeds 1 and 2
    wrote the same text from the third sentence). On logits that say nothing (a uniform model), a token depends on
    its step's seed alone: the streams of neighbouring seeds must not be shifted copies of each other."""
    import torch

    ns, _text = chapter
    vocab = ns["VOCAB_SIZE"]

    def uniform(tokens):
        return torch.zeros(tokens.shape[0], tokens.shape[1], vocab)

    prompt = torch.zeros(1, 1, dtype=torch.long)
    one, two = (ns["generate"](uniform, prompt, 60, 1.0, seed=s)[0, 1:].tolist() for s in (1, 2))
    assert two[:-1] != one[1:]
    assert ns["generate"](uniform, prompt, 60, 1.0, seed=1)[0, 1:].tolist() == one          # still reproducible


def test_05_the_findings_say_why_the_rnn_does_not_lose_here(chapter):
    """Issue 53, 3: the parameter-matched RNN's loss is on a par with TinyLM's (as the findings cell says), and
    the corpus's dependencies reach back one sentence at most (9 characters), which the cell gives as the reason."""
    ns, _text = chapter
    findings = cell("experiment-findings")
    tf_final, rnn_final = (sum(ns[k][-20:]) / 20 for k in ("tf_losses", "rnn_losses"))
    assert "RNN 的损失与 TinyLM 不相上下" in findings and abs(tf_final - rnn_final) < 0.05
    assert "一句最长 9 个字" in findings and max(len(s) for s in ns["SENTENCES"]) == 9
    assert "第 01 章" in findings and "长程依赖" in findings


def test_05_says_it_builds_a_decoder_only_model_and_names_the_layout_it_leaves_out():
    """Issue 53, 4: the chapter says what it built (decoder-only, GPT-like: an encoder block with a causal mask),
    the encoder-decoder layout with cross-attention, and the original paper's sqrt(D) embedding scale."""
    note = cell("decoder-only-note")
    for words in ("仅解码器", "GPT", "编码器-解码器", "交叉注意力", "查询来自解码器，键和值来自编码器的输出", "d2l-zh",
                  "$\\sqrt{D}$"):
        assert words in note, words


def test_05_says_equal_within_rounding_where_the_cells_show_rounding(chapter):
    """Issue 53, 8: the block matches torch's layer to float32's rounding (its cell prints differences of about
    1e-7), so the prose says "在浮点误差内一致", never "逐个数字一致"; issue 53, 9: "按维度", "种子"."""
    ns, text = chapter
    assert ns["worst"] < 1e-4 and (ns["ours"] - ns["theirs"]).abs().max().item() < 1e-4    # (its last case)
    assert "逐个数字一致" not in text and "在浮点误差内一致" in cell("summary")
    assert "按维度缩放" in text and "按通道" not in text
    nb = nbformat.read(ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "同一个种子抽两次" in code and "同一个 seed" not in code


def test_05_shifting_k_positions_is_one_rotation_as_51_says(chapter):
    """Issue 53, 8: 5.1 says moving k positions on is a rotation that depends on k alone; the facts cell rotates
    each (sin, cos) pair of PE[t] by k * omega_i and gets PE[t + k] for every t."""
    ns, _text = chapter
    assert "只与 $k$ 有关的旋转" in cell("ex5-1-statement")
    assert ns["shift"] == 7 and ns["relative_gap"] < 1e-5


def test_05_the_intros_table_of_substitutions_is_course_ymls_builds_on():
    """Issue 53, 9: the intro's table (which function of yours stands behind which exercise, replaced by the
    reference where it failed) says what course.yml's builds_on makes the grader do, row by row."""
    import re

    from autograder.course.config import load_course

    course = load_course()
    used_by: dict[str, set[str]] = {}
    for exercise in course.assignment(ASSIGNMENT).exercises:
        for earlier in exercise.builds_on or []:
            used_by.setdefault(earlier, set()).add(exercise.id)
    table = {}
    for row in re.findall(r"^\| ([^|]+) \| ([\d.、]+) \|$", cell("intro"), flags=re.M):
        for earlier in re.findall(r"(\d\.\d) `", row[0]):
            table[earlier] = set(row[1].split("、"))
    assert table == used_by


def test_05_learned_and_sinusoidal_positions_end_at_the_same_loss_here(chapter):
    """Issue 53, 11: the same blocks and batches with a learned position table (CONTEXT rows) instead of the
    sinusoidal one end within 0.001 of each other, as the note says; the learned table has CONTEXT * D more
    parameters and no row past CONTEXT."""
    ns, _text = chapter
    sinusoidal, learned = (sum(ns[k][-20:]) / 20 for k in ("tf_losses", "learned_losses"))
    assert abs(sinusoidal - learned) < 0.001 and "相差不到 0.001" in cell("positions-note")
    assert len(ns["learned_losses"]) == ns["STEPS"]
    model = ns["learned_model"]
    assert model.positions.weight.shape == (ns["CONTEXT"], ns["WIDTH"])
    extra = sum(p.numel() for p in model.parameters()) - ns["tf_params"]
    assert extra == ns["CONTEXT"] * ns["WIDTH"]


def test_05_claims_only_what_its_cells_show_about_tying_and_threads():
    """Issue 53, 8: 5.5 no longer says tied weights overfit less on a small corpus (no cell holds a validation
    split to show it), and the experiment gives the real reason for one thread, not a time budget: on matrices
    this small more threads are slower (measured once on 2 cores under load: a TinyLM step 12 ms on one thread,
    190 ms on two; a (1024, 32) @ (32, 64) product 64 us against 530 us), so no timing is asserted here."""
    statement = cell("ex5-5-statement")
    assert "过拟合" not in statement and "参数也少了 $V \\cdot D$ 个" in statement
    intro = cell("experiment-intro")
    assert "不超过一分钟" not in intro and "线程多了反而更慢" in intro
    assert "torch.set_num_threads(1)" in cell("experiment-train")
