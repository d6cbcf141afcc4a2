"""Issue 48: the documentation's three walkthroughs (instructor, student, TA), run as printed.

Each ``<!-- walkthrough: ROLE -->`` block of docs/walkthrough.md runs in bash (``set -euo pipefail``) in the
role's folder: the instructor's and the TA's in a copy of the course, the student's in a folder of her own holding her
notebook (the stubs filled in, one of them wrong), with ``AUTOGRADER_COURSE`` at the student course the build
wrote, as the student bundle or the Hub gives it. Only the port (8765, maybe taken here) and ``<your token>``
(s01's row of tokens.csv) are put in. The service the instructor starts is stopped at the end, whatever failed.
A role's guide (docs/instructor/index.md, docs/student.md, docs/student.en.md, docs/ta.md) repeats its block under
the same marker: every copy must hold the same commands (their comments may speak the page's language).
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, copy_course
from served import free_port
from support import make_samples
from autograder.config import load_course

QKV = load_course().assignment("02_qkv_attention")
BIN = Path(sys.executable).parent
PORT = "8765"


DOCS = ROOT / "docs"


def _blocks(role: str, text: str) -> list[str]:
    return re.findall(rf"<!-- walkthrough: {role} -->\n```bash\n(.*?)```", text, re.S)


def _commands(block: str) -> list[str]:
    """A block's commands: each line without its trailing comment."""
    return [re.sub(r"\s+#.*$", "", line).rstrip() for line in block.splitlines()]


def walkthrough(role: str) -> str:
    """The bash block after ``<!-- walkthrough: ROLE -->`` in docs/walkthrough.md; every other page that shows
    the role's block must show the same commands."""
    found = _blocks(role, (DOCS / "walkthrough.md").read_text(encoding="utf-8"))
    assert len(found) == 1, f"docs/walkthrough.md has {len(found)} walkthrough blocks for {role}, not one"
    for page in sorted(DOCS.rglob("*.md")):
        for copy in _blocks(role, page.read_text(encoding="utf-8")):
            assert _commands(copy) == _commands(found[0]), (
                f"{page.relative_to(ROOT)}: the {role}'s walkthrough differs from docs/walkthrough.md's")
    return found[0]


def test_every_guide_shows_its_roles_walkthrough_as_the_walkthrough_page_does():
    """Each role's guide repeats its block (checked against the page the slow test runs), in both languages."""
    for role, pages in {"instructor": ["instructor/index.md"], "student": ["student.md", "student.en.md"],
                        "ta": ["ta.md"]}.items():
        walkthrough(role)
        for page in pages:
            assert len(_blocks(role, (DOCS / page).read_text(encoding="utf-8"))) == 1, (page, role)


def run_block(role: str, cwd: Path, env: dict[str, str], groups: list[int], **put: str) -> str:
    """The role's block run by bash in a process group of its own (added to ``groups``: what it leaves running
    is stopped with it); its output."""
    script = walkthrough(role)
    for place, value in put.items():
        assert place in script, f"the {role}'s walkthrough no longer names {place}"
        script = script.replace(place, value)
    with subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True) as bash:
        groups.append(bash.pid)
        out, _ = bash.communicate(timeout=600)
    assert bash.returncode == 0, f"the {role}'s walkthrough failed ({bash.returncode}):\n{out}"
    return out


def _stop(groups: list[int]) -> None:
    """Whatever a block left running (the instructor's service and its workers): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        deadline = time.monotonic() + 20
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(g) for g in groups):
            time.sleep(0.2)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


@pytest.mark.slow
def test_the_walkthroughs_run_as_printed(tmp_path):
    course = copy_course(tmp_path / "course")
    home = tmp_path / "home"
    home.mkdir()
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGRADER_", "JUPYTERHUB_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(home))
    groups: list[int] = []
    try:
        # -- the instructor: the course built, the class's tokens, the service started -----------------------
        said = run_block("instructor", course, env, groups, **{PORT: port})
        assert "issued 2 tokens" in said and "02_qkv_attention" in said, said
        assert load_course(course / "course.yml").roster_students() == {"s01", "s02"}
        rows = list(csv.DictReader(io.StringIO((course / "tokens.csv").read_text(encoding="utf-8"))))
        assert [r["student"] for r in rows] == ["s01", "s02"] and (course / "tokens.csv").stat().st_mode & 0o077 == 0
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, (course / "service.log").read_text(errors="replace")
            time.sleep(0.5)

        # -- the student: her notebook (2.3 without the scale), checked, handed in, her verdict -----------------
        desk = tmp_path / "s01"
        desk.mkdir()
        wrong = make_samples.submission(QKV, solved="all", code={
            "2.3": "import torch\ndef attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"})
        (desk / QKV.notebook).write_text(json.dumps(wrong), encoding="utf-8")
        student_env = dict(env, AUTOGRADER_COURSE=str(course / "dist" / "student-course"), HOME=str(desk))
        said = run_block("student", desk, student_env, groups, **{PORT: port, "<your token>": rows[0]["token"]})
        assert "自检：02_qkv_attention.ipynb" in said and "全部通过" in said, said     # check --exercise 2.1
        assert "评分完成" in said and f"/ {QKV.points:g} 分" in said, said        # submit: the verdict
        lost = re.search(r"^2\.3: ([0-9.]+) / ([0-9.]+)$", said, re.M)
        assert lost and float(lost.group(1)) < float(lost.group(2)), said          # (2.3 lost points)

        # -- the TA: who handed in, the export, why s01 lost points on 2.3 ---------------------------------------
        said = run_block("ta", course, env, groups, **{PORT: port})
        listing = json.loads(said[said.index("{"):said.index("}]}") + 3])
        assert [(s["student"], s["assignment"]) for s in listing["submissions"]] == [("s01", QKV.id)]
        grades = list(csv.DictReader(io.StringIO((course / "out" / "grades.csv").read_text(encoding="utf-8-sig"))))
        assert [r["student"] for r in grades] == ["s01"]
        lms = list(csv.reader(io.StringIO((course / "out" / "moodle-grades.csv").read_text(encoding="utf-8"))))
        assert lms[1][:3] == ["ada@uni.example", "", "Ada Lovelace"]          # the roster's email and name
        assert "仅限教师" in said and "已知错误 no-scale" in said and "参考答案给出" in said, said
    finally:
        _stop(groups)
