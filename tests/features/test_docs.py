"""Issue 49: the documentation site (docs/, mkdocs.yml) stays whole.

- The reference pages (docs/reference/) are what scripts/docs_reference.py writes from the code today: the
  commands' parsers, course.yml's model, the service's OpenAPI schema; and so are the generated parts of
  docs/project/architecture.md and its picture (tests/features/test_docs_architecture.py holds those to more).
- ``mkdocs build --strict`` passes: no broken link or anchor, no page left out of the navigation; and the site it
  builds works from the file system (``site/index.html``, as the README says): every link of every built page,
  its assets' too, leads to a file, never to a folder (issue 66: with directory URLs each one showed a listing).
- Every command block a guide marks ``<!-- runnable -->`` (or ``<!-- runnable: slow -->``) right before it runs
  in bash, in a copy of the course (with the repository's samples/), and exits 0.
- README.md keeps the two commands and every link it has into docs/ leads to a page.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import ROOT, copy_course

DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
MKDOCS = BIN / "mkdocs"
RUNNABLE = re.compile(r"<!-- runnable(: slow)? -->\n```bash\n(.*?)```", re.S)


def _generator():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGRADER_", "JUPYTERHUB_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", NO_MKDOCS_2_WARNING="1")
    return env


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)], cwd=config.parent,
                          env=_env(), capture_output=True, text=True, timeout=300)


# -- the reference pages -------------------------------------------------------------------------------------------
def test_the_reference_pages_are_current():
    generator = _generator()
    assert generator.stale() == [], ("docs/reference/ or docs/project/architecture.md is stale: run "
                                     "`.venv/bin/python scripts/docs_reference.py`")


def test_the_reference_names_every_command_option_and_course_yml_key():
    """What the pages hold comes from the code itself, not from a list kept by hand."""
    import argparse
    import importlib

    from autograder.cli import COMMANDS
    from autograder.course.config import Course, Exercise, Limits
    from autograder.course.service_policy import ServicePolicy

    cli = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for name, (module, _) in COMMANDS.items():
        assert f"## `autograder {name}`" in cli, name
        parser = argparse.ArgumentParser()
        importlib.import_module(module).add_arguments(parser)
        for action in parser._actions:
            for option in action.option_strings:
                assert f"`{option}" in cli or f", {option}`" in cli, (name, option)
    course_yml = (DOCS / "reference" / "course-yml.md").read_text(encoding="utf-8")
    for model in (Course, Exercise, Limits, ServicePolicy):
        for field in model.model_fields:
            assert f"| `{field}` |" in course_yml, (model.__name__, field)
    api = (DOCS / "reference" / "http-api.md").read_text(encoding="utf-8")
    for route in ("## `POST /api/submissions`", "## `GET /api/submissions/{submission_id}`", "`/dashboard`",
                  "`/hub-login` (*Hub*)"):
        assert route in api, route


def test_a_changed_parser_makes_the_cli_page_stale(monkeypatch):
    """The staleness test can fail: a new option of a command shows up as a stale page."""
    from autograder.commands import course

    generator = _generator()
    before = course.add_arguments

    def more(parser):
        before(parser)
        parser.add_argument("--brand-new", help="an option no page mentions yet")

    monkeypatch.setattr(course, "add_arguments", more)
    assert generator.stale() == [generator.REFERENCE / "cli.md"]
    assert "`--brand-new`" in generator.cli_markdown()


# -- the site ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The site as `make docs` builds it (mkdocs.yml as it is), into a folder of its own: (the folder, the build)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    return site, _mkdocs_build(ROOT / "mkdocs.yml", site)


def test_mkdocs_build_strict_passes(built):
    site, done = built
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "student.html", "student.en.html", "instructor/index.html", "ta.html",
                 "admin/service.html", "reference/cli.html", "reference/course-yml.html", "reference/http-api.html",
                 "project/architecture.html", "project/layers.svg"):
        assert (site / page).is_file(), page


class _Links(HTMLParser):
    """Every href and src of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


def site_links(site: Path) -> tuple[int, dict[str, list[str]]]:
    """How many links of the built ``site`` point inside it, and those that lead to no file: link -> the pages
    that have it. A link is followed as a browser opening the site from the file system follows it: relative to
    its page, a path from ``/`` relative to the site's folder (404.html's), the query and the fragment dropped."""
    broken: dict[str, list[str]] = {}
    count = 0
    for page in sorted(site.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path:      # another site, mailto:, data:, a fragment alone
                continue
            count += 1
            path = unquote(parts.path)
            target = ((site / path.lstrip("/")) if path.startswith("/") else page.parent / path).resolve()
            if not target.is_file() or site.resolve() not in target.parents:
                broken.setdefault(link, []).append(page.relative_to(site).as_posix())
    return count, broken


def test_every_link_of_the_built_site_leads_to_a_file(built):
    """Opened from the file system, a link to a folder shows the folder's listing: every page, stylesheet, script
    and image a built page links to is a file of the site (`use_directory_urls: false` in mkdocs.yml)."""
    site, done = built
    assert done.returncode == 0, done.stdout + done.stderr
    count, broken = site_links(site)
    assert count > 500, count                       # (the pages' navigation alone has more: the parser found them)
    assert broken == {}, {link: pages[:3] for link, pages in list(broken.items())[:20]}


def test_the_link_check_finds_a_link_to_a_folder(tmp_path):
    """The check can fail: a page that links to a folder (as directory URLs do) or to no file is named."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text("<a href='#top'>top</a>", encoding="utf-8")
    (tmp_path / "index.html").write_text("<a href='guide/'>a folder</a> <img src='gone.png'> "
                                         "<a href='guide/index.html#x'>fine</a> <a href='https://example.org/'>web</a>",
                                         encoding="utf-8")
    assert site_links(tmp_path) == (3, {"guide/": ["index.html"], "gone.png": ["index.html"]})


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The strict build is a real check: a link to a page or a heading that is not there fails it."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy2(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "ta.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](admin/nowhere.md), [here](index.md#no-such-heading)\n",
                    encoding="utf-8")
    done = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "admin/nowhere.md" in said and "no-such-heading" in said, said


# -- what each role reads ------------------------------------------------------------------------------------------
def _words(page: str) -> str:
    """A page's text with every run of white space one space (a phrase may break across lines)."""
    return " ".join((DOCS / page).read_text(encoding="utf-8").split())


def test_the_student_guides_and_the_tas_guide_say_how_to_ask_for_and_answer_a_review():
    """Issue 66, item 6: review requests were only in docs/admin/service.md. Each student guide says, in its language
    and with the labels of the page (/me) in that language, where to ask, the window's default length and the
    message's limit (both read from the code); the TA's guide where the queue is, its two answers, and the
    analytics, each with its link into the service's page."""
    from autograder.course.service_policy import ServicePolicy
    from autograder.core.messages import CATALOGUE
    from autograder.service.reviews import MESSAGE_CHARS

    days = ServicePolicy.model_fields["review_days"].default
    for page, lang, window in (("student.md", 0, f"默认 {days} 天"), ("student.en.md", 1, f"({days} by default)")):
        text = _words(page)
        labels = [CATALOGUE[key][lang] for key in ("page.reviews", "page.review_item", "page.review_ask",
                                                     "page.review_accepted", "page.review_declined")]
        labels.append(CATALOGUE["page.review_message"][lang].format(n=MESSAGE_CHARS))
        missing = [said for said in ["`/me`", "`service.review_days`", window, *labels] if said not in text]
        assert missing == [], (page, missing)
    ta = _words("ta.md")
    for said in ("`/dashboard/reviews`", CATALOGUE["page.reviews_link"][1].format(n="N"),
                 CATALOGUE["page.review_accept"][1], CATALOGUE["page.review_decline"][1], "`service.review_days`",
                 "(admin/service.md#answering-review-requests)", "`/dashboard/analytics?assignment=ID`",
                 "(admin/service.md#reading-the-analytics)"):
        assert said in ta, said


# -- the runnable blocks -------------------------------------------------------------------------------------------
def runnable_blocks() -> list[tuple[str, bool, str]]:
    """(page:line, slow, script) of every block marked runnable in docs/."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in RUNNABLE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(DOCS)}:{line}", bool(match.group(1)), match.group(2)))
    return found


BLOCKS = runnable_blocks()


def test_the_guides_mark_the_cheap_commands_runnable():
    scripts = "\n".join(script for _, _, script in BLOCKS)
    for command in ("autograder --help", "autograder course", "autograder build", "autograder check ",
                    "autograder doctor"):
        assert command in scripts, command
    assert any(slow for _, slow, _ in BLOCKS) and not all(slow for _, slow, _ in BLOCKS)


@pytest.mark.parametrize("where,script", [
    pytest.param(where, script, id=where, marks=[pytest.mark.slow] if slow else [])
    for where, slow, script in BLOCKS])
def test_a_runnable_block_runs(where, script, tmp_path):
    course = copy_course(tmp_path / "course")
    shutil.copytree(ROOT / "samples", course / "samples", ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=course, env=dict(_env(), HOME=str(home)),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"docs/{where} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"


# -- the README ----------------------------------------------------------------------------------------------------
def test_the_readme_keeps_the_two_commands_and_leads_into_the_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert sum(link.startswith("docs/") for link in local) >= 10, local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == [], missing
