"""The engine's message catalogue (autograder/core/messages.py): complete in both languages, one language each."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from autograder.core import messages as M
from autograder.catalog import Status

PACKAGE = Path(M.__file__).parent.parent    # the autograder package (messages is in core/)
#: Code, file and unit names a Chinese sentence may contain as they are.
TECHNICAL = {"NotImplementedError", "sys", "exit", "os", "_exit", "KiB", "MiB", "limits", "cell_kb", "ipynb",
             "nbformat", "CPU", "zip", "_qkv_attention.ipynb", "nbgrader", "autograde", "autograder", "build", "data",
             "fingerprints.json", "check", "course", "yml", "call_seconds", "submission_seconds", "demo_seconds",
             "JSON", "UTF", "cell_type", "exercise", "Ctrl", "apt", "install", "fonts-noto-cjk",
             "Python", "torch", "NumPy", "IPython", "Jupyter", "Authorization", "Bearer", "AUTOGRADER_SERVER",
             "AUTOGRADER_TOKEN", "server", "token", "submit", "CSV", "Alt", "Tab", "LTI", "LMS", "JWKS",
             "serve", "lti", "register", "Moodle", "Canvas"}
# (commands, paths, settings and functions a student types as they are; the names of the software)


@pytest.mark.parametrize("key", sorted(M.CATALOGUE))
def test_every_message_exists_in_both_languages_with_the_same_parameters(key):
    zh, en = M.CATALOGUE[key]
    assert zh.strip() and en.strip(), key
    assert M._fields(zh) == M._fields(en), key


@pytest.mark.parametrize("key", sorted(M.CATALOGUE))
def test_chinese_messages_hold_no_english_words(key):
    zh, en = M.CATALOGUE[key]
    bare = re.sub(r"\{[^}]*\}", "", zh)
    words = set(re.findall(r"[A-Za-z_][A-Za-z_.]{2,}", bare)) - TECHNICAL
    words = {w for w in words if not set(w.split(".")) <= TECHNICAL}
    assert not words, (key, words)
    assert re.search(r"[\u4e00-\u9fff]", zh) or key.startswith("status."), key
    assert not re.search(r"[\u4e00-\u9fff]", en), key


def _keys_used_in_code() -> set[str]:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "messages.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                    "say", "text", "_sandbox_said") and node.args and isinstance(node.args[0], ast.Constant):
                used.add(node.args[0].value)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in M.CATALOGUE:
                used.add(node.value)
    return used


def test_every_key_the_code_asks_for_exists_and_every_entry_is_used():
    used = _keys_used_in_code()
    assert used - set(M.CATALOGUE) == set()
    # status.* and label.* are looked up by name (a Status value, a label word); the rest literally.
    dynamic = {k for k in M.CATALOGUE if k.startswith(("status.", "label.", "sandbox.hint.", "selfcheck.column.",
                                                         "page."))}

    from autograder.sandbox import replies
    assert {f"sandbox.hint.{s.name}" for s in replies._SIGNAL_HINTS} == {
        k for k in M.CATALOGUE if k.startswith("sandbox.hint.")}
    assert set(M.CATALOGUE) - dynamic - used == set()
    assert {f"status.{s.value}" for s in Status} <= set(M.CATALOGUE)


def test_say_fills_both_languages():
    msg = M.say("sandbox.call_timeout", seconds=10)
    assert msg.zh == "调用在 10 秒内没有返回（死循环？）" and "10 s" in msg.en
    assert M.text("sandbox.call_timeout", "en", seconds=3) == msg.en.replace("10", "3")


@pytest.mark.slow
def test_chinese_feedback_of_a_crashing_and_looping_submission_has_no_english_sentence(tmp_path, course_root):
    """eve's 2.4 calls sys.exit, and a cell of ours loops forever: what the sandbox says reaches a
    Chinese course's feedback in Chinese (it used to read "运行中断：the worker exited with status 0 ...")."""
    import json
    import shutil
    import subprocess
    import sys

    import nbformat

    subs = tmp_path / "subs"
    shutil.copytree(PACKAGE.parent / "samples" / "submissions" / "eve", subs / "eve")
    path = subs / "eve" / "02_qkv_attention.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(nb, path)
    course = course_root / "course.yml"      # a copy of the course, with a 2-second call limit
    text = course.read_text(encoding="utf-8").replace("call_seconds: 10 ", "call_seconds: 2 ")
    course.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "autograder", "--course", str(course), "grade", str(subs), "-o",
                           str(tmp_path / "out"), "-j", "1"], capture_output=True, text=True, timeout=300,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    md = (tmp_path / "out" / "feedback" / "eve__02_qkv_attention.md").read_text(encoding="utf-8")
    result = json.loads((tmp_path / "out" / "results" / "eve__02_qkv_attention.json").read_text(encoding="utf-8"))
    assert "运行学生代码的进程退出了（状态 0" in md and "单元格在 2 秒内没有运行完" in md, md
    english = [en for key, (zh, en) in M.CATALOGUE.items() if key.startswith(("sandbox.", "check.", "submission."))]
    for sentence in english:
        head = re.split(r"\{", sentence)[0].strip()
        assert len(head) < 8 or head not in md, head
    looped = [c for c in result["cells"] if c["status"] == "timeout"]
    assert looped and looped[0]["said"]["zh"].startswith("单元格在 2 秒内")


def test_the_self_check_table_names_statuses_in_the_course_language():
    from autograder.core.messages import status_word
    from autograder.selfcheck import parent as S

    assert status_word("not_attempted", "zh") == "未作答" and status_word("passed", "en") == "passed"
    assert S._step_text(("cell", "3", "x = 0"), "zh") == "第 3 个单元格（x = 0）"


def test_every_page_word_is_used_by_a_page():
    """The service pages' words (``page.*``, the templates' ``T``) live in the catalogue, each used by a template
    or a route, and the pages read no word of their own (ui.UI is the catalogue's)."""
    from autograder.service import ui

    service = PACKAGE / "service"
    used = set()
    for path in [*service.glob("templates/*.html"), *service.rglob("*.py")]:
        source = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"\bT\.(\w+)", source)) | set(re.findall(r"\bT\[\"(\w+)\"\]", source))
        used |= set(re.findall(r"UI\[[^\]]+\]\[\"(\w+)\"\]", source))
    used |= {"queued", "running", "done", "failed", "unknown"}     # T[s.state]: a job's state (listing.py)
    from autograder.service.class_list import STATES

    used |= set(STATES)                                  # T[c.state]: a student's state on an assignment (roster)
    page = {k.removeprefix("page.") for k in M.CATALOGUE if k.startswith("page.")}
    assert len(page) > 50
    assert page - used == set()
    for language, index in (("zh", 0), ("en", 1)):
        assert ui.UI[language] == {**{k: M.CATALOGUE[f"page.{k}"][index] for k in page},
                                   "bad_token": M.CATALOGUE["service.bad_token"][index]}

