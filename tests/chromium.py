"""Chromium and Playwright for the browser tests, found once for them all.
The browser tests drive Debian's ``chromium`` (or the one ``$CHROMIUM`` names) through the ``playwright`` package,
both installed by scripts/install-browser.sh; Playwright's own browser download is never used. :func:`find_browser`
gives the pair or skips the test saying which is missing (the ``browser_kit`` fixture of tests/conftest.py);
:data:`CHROMIUM_FLAGS` are the flags every launch passes, :data:`ARTIFACTS` the folder the screenshots go to, and
:func:`write_settings` and :func:`wait_idle` are the JupyterLab settings and the idle-kernel wait the notebook pages
need.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: The repository: the course and the engine, side by side.
ROOT = Path(__file__).resolve().parent.parent
#: Where the browser tests leave their screenshots (tests/artifacts/).
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: How long a JupyterLab page may take to do what it is asked (a kernel's start included).
PAGE_TIMEOUT_MS = 90_000


@dataclass
class Browser:
    executable: str
    sync_playwright: Callable[[], Any]


def find_browser() -> Browser:
    """The system Chromium and Playwright, or a skip that says how to get them."""
    executable = next((c for c in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"))
                       if c and os.access(c, os.X_OK)), None)
    if executable is None:
        pytest.skip("Chromium not found (/usr/bin/chromium): run scripts/install-browser.sh as root "
                    "(apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is missing: run scripts/install-browser.sh "
                    "(pip install playwright into .venv)")
    return Browser(executable, sync_playwright)


def write_settings(folder: Path) -> None:
    """JupyterLab user settings for the run: no news pop-up over the page, every cell in the DOM."""
    settings = {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
        # Virtualised notebooks drop off-screen cells from the DOM; the test looks for cells by text.
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for name, value in settings.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")


def wait_idle(page) -> None:
    """Until the notebook's kernel is idle (it has started, or has run what it was given)."""
    page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=PAGE_TIMEOUT_MS)
