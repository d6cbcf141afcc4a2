"""A student's path through JupyterLab, in a real browser.

Starts ``jupyter lab`` on localhost over a copy of a release notebook, opens it in
headless Chromium (Debian's ``chromium``, driven by Playwright), types a solution into
the 2.4 stub with the keyboard, runs the notebook from the Run menu and reads the
rendered self-check from the page: 2.4 all passed, 2.1 (still a stub) "not attempted"
without a traceback. The page is saved as tests/artifacts/browser-check.png.

Chromium and playwright come from scripts/install-browser.sh; where either is missing
the test skips and says which. Playwright's own browser download is never used.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from chromium import ARTIFACTS, CHROMIUM_FLAGS, PAGE_TIMEOUT_MS, Browser, wait_idle, write_settings
from autograder.authoring import build
from autograder.course.config import load_course

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "02_qkv_attention"
SOLVED = "2.4"           # the stub the test fills through the page
UNTOUCHED = "2.1"        # a stub left as released: its check must say "not attempted"
STUB = build.course_stub(ROOT)       # the stub release/ holds, in course.yml's language
# What the self-check HTML says, by course.yml's language (autograder/selfcheck/render.py renders it).
WORDS = {"zh": {"passed": "全部通过", "not_attempted": "尚未作答"},
         "en": {"passed": "all passed", "not_attempted": "not attempted"}}
# Typed line by line into CodeMirror: no blank lines, so auto-indentation has nothing to leave behind.
SOLUTION = '''def scaled_dot_product_attention(Q, K, V):
    """Exercise 2.4, typed in the browser: softmax(Q K^T / sqrt(Dk)) V."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])   # (..., Tq, Tk)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))    # stable: every exponent <= 0
    weights = e / e.sum(dim=-1, keepdim=True)                    # (..., Tq, Tk), rows sum to 1
    return weights @ V, weights                                  # (..., Tq, Dv), (..., Tq, Tk)'''
LAB_START_S = 90

pytestmark = pytest.mark.slow


# -- the notebook ---------------------------------------------------------------------
def _release_like(source: Path) -> nbformat.NotebookNode:
    """What `autograder build` releases, for when release/ is not built: stubs for solutions."""
    nb = nbformat.read(source, as_version=4)
    region = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            exercise = meta["grade_id"].removeprefix("ex").replace("_", ".")
            cell.source = region.sub(lambda m, exercise=exercise: m.group(1) + STUB.format(exercise=exercise),
                                     cell.source)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def _notebook_into(folder: Path) -> Path:
    released = ROOT / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    target = folder / f"{ASSIGNMENT}.ipynb"
    if released.exists():
        shutil.copy2(released, target)
    else:
        nbformat.write(_release_like(ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"), target)
    text = "\n".join(c.source for c in nbformat.read(target, as_version=4).cells if c.cell_type == "code")
    assert STUB.format(exercise=SOLVED) in text and STUB.format(exercise=UNTOUCHED) in text, \
        "the notebook under test is not a release notebook (no stubs)"
    return target


# -- the server -------------------------------------------------------------------------
@dataclass
class Lab:
    url: str
    token: str
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen, lab: Lab) -> None:
    try:        # the kernels first, through the server that owns them
        for kernel in lab.api("/api/kernels") or []:
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
    except (OSError, ValueError):
        pass
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)    # its own process group: jupyter lab and what it spawned
        except ProcessLookupError:
            break
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    process.wait()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    jupyter = ROOT / ".venv" / "bin" / "jupyter"
    if not jupyter.exists():
        jupyter = Path(sys.executable).parent / "jupyter"
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook_into(notebooks)
    home = tmp_path / "jupyter"
    write_settings(home / "settings")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update({
        "PATH": f"{jupyter.parent}{os.pathsep}{env.get('PATH', '')}",
        # Away from the user's own Jupyter config, settings, workspaces and kernels.
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "JUPYTER_PREFER_ENV_PATH": "1",
        "IPYTHONDIR": str(home / "ipython"),
        # The notebooks are copies outside the course: their check() uses this course, as a student's
        # installed bundle would use the one it carries.
        "AUTOGRADER_COURSE": str(ROOT / "course.yml"),
    })
    command = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={notebooks}"]
    if os.geteuid() == 0:
        command.append("--allow-root")      # containers and CI run as root
    log = tmp_path / "jupyter-lab.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, cwd=notebooks, start_new_session=True)
    server = Lab(f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.monotonic() + LAB_START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{server.log_tail()}")
            try:
                server.api("/api/status")
                break
            except (OSError, ValueError):      # refused, reset, URLError: all OSErrors; not up yet
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within {LAB_START_S} s:\n{server.log_tail()}")
                time.sleep(0.25)
        yield server
    finally:
        _stop(process, server)


# -- the page ---------------------------------------------------------------------------
def _cell(page, text: str):
    """The code cell whose input contains ``text`` (exactly one)."""
    cells = page.locator(".jp-Notebook .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea", has_text=text))
    cells.first.wait_for()
    assert cells.count() == 1, f"{cells.count()} cells contain {text!r}"
    return cells.first


def _type_into(page, cell, code: str) -> None:
    """Replace the cell's text with ``code`` by keystrokes.

    After each Enter, CodeMirror indents the new line itself; Shift+Home selects that
    indentation so the line's own indentation replaces it rather than adding to it.
    """
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    for number, line in enumerate(code.splitlines()):
        if number:
            page.keyboard.press("Enter")
            page.keyboard.press("Shift+Home")
        page.keyboard.type(line)


def _editor_text(cell) -> str:
    # CodeMirror renders each line as a .cm-line element.
    return "\n".join(cell.locator(".cm-content .cm-line").all_inner_texts()).replace("\u00a0", " ")


def _selfcheck(cell):
    output = cell.locator(".jp-OutputArea-output .autograder-selfcheck")
    output.wait_for(timeout=PAGE_TIMEOUT_MS)
    return output


# browser_kit comes first: a machine without Chromium skips before jupyter lab starts.
def test_a_stub_filled_in_jupyterlab_passes_its_check(browser_kit: Browser, lab: Lab):
    language = load_course().language
    words = WORDS[str(getattr(language, "value", language))]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "browser-check.png"
    shot.unlink(missing_ok=True)
    with browser_kit.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, locale="zh-CN")
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        try:
            page.goto(f"{lab.url}/lab/tree/{ASSIGNMENT}.ipynb?token={lab.token}")
            wait_idle(page)         # the kernel has started: typing and running go to a live kernel

            solution = _cell(page, "def scaled_dot_product_attention")
            assert STUB.format(exercise=SOLVED) in _editor_text(solution)
            _type_into(page, solution, SOLUTION)
            assert _editor_text(solution) == SOLUTION, "the editor does not hold what was typed"

            page.keyboard.press("Escape")                     # command mode, as after editing
            page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

            solved = _selfcheck(_cell(page, f'check("{SOLVED}")'))
            untouched_cell = _cell(page, f'check("{UNTOUCHED}")')
            untouched = _selfcheck(untouched_cell)
            wait_idle(page)

            exercise = solved.locator(f'.exercise[data-exercise="{SOLVED}"]')
            assert exercise.get_attribute("data-status") == "passed", solved.inner_text()
            assert solved.get_attribute("data-status") == "passed", solved.inner_text()
            rows = solved.locator(".check")
            statuses = [rows.nth(i).get_attribute("data-status") for i in range(rows.count())]
            assert statuses and set(statuses) == {"passed"}, solved.inner_text()
            text = solved.inner_text()
            assert SOLVED in text and words["passed"] in text, text

            stub = untouched.locator(f'.exercise[data-exercise="{UNTOUCHED}"]')
            assert stub.get_attribute("data-status") == "not_attempted", untouched.inner_text()
            assert words["not_attempted"] in untouched.inner_text()
            # No traceback: nothing on stderr, no error output, only the self-check's own output.
            outputs = untouched_cell.locator(".jp-OutputArea-output")
            mimes = [outputs.nth(i).get_attribute("data-mime-type") for i in range(outputs.count())]
            assert mimes == ["text/html"], mimes
            assert "Traceback" not in untouched_cell.locator(".jp-OutputArea").inner_text()

            # The picture a person checks: the typed solution with its rendered check below it.
            solution.evaluate("node => node.scrollIntoView({block: 'start'})")
            page.mouse.move(0, 0)
            page.screenshot(path=str(shot))
        except Exception as exc:
            with contextlib.suppress(Exception):    # the page may be gone: keep the first error
                page.screenshot(path=str(ARTIFACTS / "browser-failure.png"))
            raise AssertionError(f"{exc}\n-- jupyter lab log (tail) --\n{lab.log_tail()}") from exc
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
