"""Issue 29: the service's pages in a real browser (Debian's Chromium, driven by Playwright).

A student signs in with her token, uploads a notebook from her page and watches it go from
queued to graded without touching the page (its script follows the submission through the API's
long poll and reloads); the instructor's dashboard draws the class report, re-queues a submission
and grants an extension from its forms. A student whose name, file name, notebook and exception
messages are HTML and script is shown on every page as text: Chromium runs none of it. The two
main pages are saved as tests/artifacts/service-student.png and service-dashboard.png.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest

from support import make_samples
from served import student_token
from chromium import ARTIFACTS, CHROMIUM_FLAGS
from pages import COURSE, QKV
from autograder.service import tokens

pytestmark = pytest.mark.slow
TIMEOUT_MS = 90_000


def _grade(database: Path) -> None:
    """One worker process grades the queue (as `autograder serve` starts them)."""
    done = subprocess.run([sys.executable, "-m", "autograder", "worker", "--database", str(database), "--once"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _sign_in(page, url: str, token: str) -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=token]", token)
    page.click("form[action$='/login'] button")
    page.wait_for_load_state()


def test_a_student_watches_her_upload_get_graded_and_the_dashboard_manages_the_class(site, browser_kit,
                                                                                    tmp_path):
    url, engine, who, database = site
    solved = tmp_path / QKV.notebook
    solved.write_text(nbformat.writes(make_samples.submission(QKV, solved="all")), encoding="utf-8")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_kit.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = chromium.new_context(locale="zh-CN", timezone_id="Asia/Shanghai").new_page()
            page.set_default_timeout(TIMEOUT_MS)
            _sign_in(page, url, who["ada"])
            assert page.url.endswith("/me")
            section = page.locator(f"#assignment-{QKV.id}")
            section.locator("input[type=file]").set_input_files(str(solved))
            section.locator("form.upload button").click()
            page.wait_for_selector("[data-submission][data-state=queued]")
            assert "排队中" in page.locator("[data-submission]").first.inner_text()
            assert "剩余" in section.locator(".left").inner_text()          # the time left, in her time zone
            _grade(database)
            # No reload by hand: the page's long poll sees the verdict and shows it.
            page.wait_for_selector("[data-submission][data-state=done]")
            assert "已评分" in page.locator("[data-submission]").first.inner_text()
            verdict = section.locator("details[open]")
            # (out of 02's maximum, its written answer's points included: autograder.course.written.maximum)
            most = QKV.points + QKV.manual_points
            assert f"{QKV.points:g} / {most:g}" in verdict.inner_text() and "隐藏" in verdict.inner_text()
            page.screenshot(path=str(ARTIFACTS / "service-student.png"), full_page=True)

            board = chromium.new_context(locale="zh-CN").new_page()
            board.set_default_timeout(TIMEOUT_MS)
            _sign_in(board, url, who["teacher"])
            assert board.url.endswith("/dashboard")
            histogram = board.locator("#report img").first
            assert histogram.evaluate("img => img.complete && img.naturalWidth > 100")     # drawn, not broken
            assert "ada" in board.locator("#all").inner_text()
            board.locator("#all button.requeue").first.click()
            board.wait_for_selector("#notice")
            assert "已重新排队：1 份" in board.locator("#notice").inner_text()
            board.fill("#extension-form input[name=student]", "ada")
            board.select_option("#extension-form select[name=assignment]", QKV.id)
            board.fill("#extension-form input[name=due]", "2030-01-01T10:00")
            board.click("#extension-form button")
            board.wait_for_selector("#extensions")
            assert "已批准 ada" in board.locator("#notice").inner_text()
            assert "2030-01-01 10:00" in board.locator("#extensions").inner_text()
            board.screenshot(path=str(ARTIFACTS / "service-dashboard.png"), full_page=True)
        finally:
            chromium.close()


def test_an_instructor_finds_who_has_not_submitted_edits_an_extension_and_revokes_a_token(site, browser_kit,
                                                                                          tmp_path):
    """Issue 50's flows in Chromium: the roster filtered to "not submitted"; an extension granted as a duration,
    edited (granted again) and revoked; a token revoked from the tokens page signs its student out at once."""
    from autograder.service import queue as Q

    url, engine, who, database = site
    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb",
            data=json.dumps(make_samples.submission(QKV, solved="all")).encode())
    with browser_kit.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            ben = chromium.new_context(locale="zh-CN").new_page()
            ben.set_default_timeout(TIMEOUT_MS)
            _sign_in(ben, url, who["ben"])
            assert ben.url.endswith("/me")
            board = chromium.new_context(locale="en-GB").new_page()
            board.set_default_timeout(TIMEOUT_MS)
            _sign_in(board, url, who["teacher"])
            board.goto(f"{url}/dashboard?lang=en")
            board.click("#staff-nav a[href$='/dashboard/roster']")
            board.select_option("#roster-filters select[name=assignment]", QKV.id)
            board.select_option("#roster-filters select[name=show]", "missing")
            board.click("#roster-filters button")
            board.wait_for_url("**/dashboard/roster?*show=missing*")
            rows = board.locator("#roster tbody tr")
            assert rows.count() == 1 and rows.first.get_attribute("data-student") == "ben"
            assert "not submitted" in rows.first.inner_text()
            assert "show=missing" in board.locator("#roster-csv").get_attribute("href")
            # An extension: three days past the due date, then changed to a date, then revoked.
            board.goto(f"{url}/dashboard?lang=en")
            for due in ("3d", "2100-01-05 12:00"):
                board.fill("#extension-form input[name=student]", "ben")
                board.select_option("#extension-form select[name=assignment]", QKV.id)
                board.fill("#extension-form input[name=due]", due)
                board.click("#extension-form button")
                board.wait_for_selector("#notice")
            assert "2100-01-05 12:00" in board.locator("#extensions").inner_text()
            assert board.locator("#extensions li").count() == 1                  # the new grant replaced the old
            board.click("#extensions form.revoke button")
            board.wait_for_selector("#notice")
            assert "revoked ben" in board.locator("#notice").inner_text()
            assert board.locator("#extensions").count() == 0
            # Ben's token, revoked from the tokens page: his open page is signed out on its next request.
            board.click("#staff-nav a[href$='/dashboard/tokens']")
            row = board.locator("#tokens tr[data-state=live]", has_text="ben")
            row.locator("form.revoke-token button").click()
            board.wait_for_selector("#notice")
            assert "stop at once" in board.locator("#notice").inner_text()
            assert board.locator("#tokens tr[data-state=revoked]", has_text="ben").count() == 1
            ben.reload()
            assert "/login" in ben.url
            board.goto(f"{url}/dashboard/actions?lang=en")
            log = board.locator("#actions").inner_text()
            assert "token.revoke" in log and "extension.revoke" in log and "extension.grant" in log
        finally:
            chromium.close()


def test_a_student_reads_why_her_grade_changed_after_an_extension_and_a_regrade(browser_kit, tmp_path):
    """Issue 50: in Chromium, a late result (half off), then an extension granted on the dashboard and a regrade:
    the student's page says each change, old and new, why and who, in her language."""
    import datetime as dt

    from served import serving
    from late_class import LATE_COURSE, late_result
    from autograder.grading.deadlines import Deadlines, submitted_json
    from autograder.grading.times import SubmittedAt
    from autograder.service import db, history, tables
    from autograder.service import queue as Q
    from autograder.service.app import create_app

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    ada = student_token(engine, "ada")
    teacher = tokens.issue(engine, "teacher", role="instructor")
    sub = late_result(engine, "ada")
    history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="graded", who=history.WORKER)
    try:
        with serving(create_app(engine, LATE_COURSE)) as url, browser_kit.sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
            try:
                board = chromium.new_context(locale="zh-CN").new_page()
                board.set_default_timeout(TIMEOUT_MS)
                _sign_in(board, url, teacher)
                board.fill("#extension-form input[name=student]", "ada")
                board.select_option("#extension-form select[name=assignment]", QKV.id)
                board.fill("#extension-form input[name=due]", "2d")
                board.click("#extension-form button")
                board.wait_for_selector("#notice")
                # Graded again after a check changed: 6 of full marks, on time now.
                Q.requeue(engine, [sub])
                claimed = Q.claim(engine, "w", 60)
                result = {"student": "ada", "assignment": QKV.id, "points": 6.0, "max_points": QKV.points,
                          "status": "graded", "exercises": []}
                received = dt.datetime(2026, 1, 11, 12, 0, tzinfo=dt.timezone.utc)
                Deadlines.load(LATE_COURSE, more=tables.granted_extensions(engine)).settle(
                    result, submitted_json(SubmittedAt(received, "the service's receipt")))
                assert Q.complete(engine, claimed.job, "w", result) == "regrade"
                history.note(engine, LATE_COURSE, [("ada", QKV.id)], why="regrade", who=history.WORKER)
                page = chromium.new_context(locale="zh-CN").new_page()
                page.set_default_timeout(TIMEOUT_MS)
                _sign_in(page, url, ada)
                rows = page.locator("#score-history tr[data-why]")
                assert [rows.nth(i).get_attribute("data-why") for i in range(rows.count())] == [
                    "graded", "extension", "regrade"]
                # Half the maximum off (its written answer's points included), then none of it; each score out of
                # the maximum (autograder.course.written.maximum).
                most = QKV.points + QKV.manual_points
                full, half, top = f"{QKV.points:g}", f"{QKV.points - most / 2:g}", f"{most:g}"
                assert f"{half} → {full} / {top}" in rows.nth(1).inner_text() and "延期" in rows.nth(1).inner_text()
                assert "teacher" in rows.nth(1).inner_text()
                assert f"{full} → 6 / {top}" in rows.nth(2).inner_text() and "重新评分" in rows.nth(2).inner_text()
            finally:
                chromium.close()
    finally:
        engine.dispose()


EVIL_NAME = '<img src=x onerror="window.__pwned=1">"><script>window.__pwned=2</script>'
EVIL_TEXT = '<img src=x onerror="window.__pwned=3"><script>window.__pwned=4</script>'


def test_html_and_script_in_a_students_name_file_and_notebook_are_shown_as_text(site, browser_kit,
                                                                               tmp_path):
    """Everything a student controls reaches the pages escaped: a real browser runs none of it."""
    import httpx

    url, engine, who, database = site
    evil = student_token(engine, EVIL_NAME)
    nb = make_samples.submission(QKV, solved="all")
    nb.cells.append(nbformat.v4.new_markdown_cell(EVIL_TEXT))
    nb.cells.append(nbformat.v4.new_code_cell(f"raise RuntimeError({EVIL_TEXT!r})"))
    made = httpx.post(f"{url}/api/submissions", headers={"Authorization": f"Bearer {evil}"},
                      data={"assignment": QKV.id},
                      files={"notebook": (f"{EVIL_TEXT}.ipynb", json.dumps(nb).encode(), "application/json")},
                      timeout=30)
    assert made.status_code == 202, made.text
    _grade(database)
    with browser_kit.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            for token, paths in ((evil, ["/me", "/me?lang=en"]),
                                 (who["teacher"], ["/dashboard", f"/dashboard/student?id={quote(EVIL_NAME, safe='')}",
                                                   "/dashboard?sort=score", "/dashboard/report", "/dashboard/roster",
                                                   "/dashboard/tokens", "/dashboard/actions"])):
                page = chromium.new_context().new_page()
                page.set_default_timeout(TIMEOUT_MS)
                dialogs: list[str] = []
                page.on("dialog", lambda d, seen=dialogs: (seen.append(d.message), d.dismiss()))
                _sign_in(page, url, token)
                for path in paths:
                    page.goto(url + path)
                    page.wait_for_load_state("networkidle")
                    assert page.evaluate("typeof window.__pwned") == "undefined", path
                    assert page.locator("img[src=x]").count() == 0 and dialogs == [], path
                    # (the report fragment lists no student: it shows the numbers)
                    if path.startswith(("/dashboard/student", "/dashboard/roster", "/dashboard/tokens", "/me")) \
                            or path == "/dashboard":
                        assert "window.__pwned" in page.locator("body").inner_text(), path    # shown, as text
        finally:
            chromium.close()


PREFIX = "/services/grader"


def test_under_a_prefix_the_student_page_follows_its_upload_to_the_verdict(browser_kit, tmp_path):
    """Mounted under a prefix, as inside JupyterHub (/services/NAME): the page's script polls the API under the
    prefix (the meta tag the template writes is the one it reads), so the verdict shows without a reload."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from served import serving
    from autograder.service import db
    from autograder.service.app import create_app

    database = tmp_path / "service.db"
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    ada = student_token(engine, "ada")
    solved = tmp_path / QKV.notebook
    solved.write_text(nbformat.writes(make_samples.submission(QKV, solved="all")), encoding="utf-8")
    app = Starlette(routes=[Mount(PREFIX, app=create_app(engine, COURSE))])
    try:
        with serving(app) as root, browser_kit.sync_playwright() as pw:
            url = root + PREFIX
            chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
            try:
                page = chromium.new_context(locale="zh-CN").new_page()
                page.set_default_timeout(TIMEOUT_MS)
                polled: list[str] = []
                page.on("request", lambda r: polled.append(r.url) if "/api/submissions/" in r.url else None)
                _sign_in(page, url, ada)
                assert page.url == f"{url}/me"
                section = page.locator(f"#assignment-{QKV.id}")
                section.locator("input[type=file]").set_input_files(str(solved))
                section.locator("form.upload button").click()
                page.wait_for_selector("[data-submission][data-state=queued]")
                _grade(database)
                page.wait_for_selector("[data-submission][data-state=done]")
                assert "已评分" in page.locator("[data-submission]").first.inner_text()
                assert polled and all(u.startswith(f"{url}/api/submissions/") for u in polled), polled
            finally:
                chromium.close()
    finally:
        engine.dispose()
