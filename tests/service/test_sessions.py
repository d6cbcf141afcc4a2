"""Issue 29: the service's pages over HTTP: sign-in, sessions, CSRF, security headers, who sees what.

The app runs on a real uvicorn server (a thread of this process) over a real SQLite database; a
client keeps cookies as a browser does. The browser tests (tests/features/test_service_browser.py) drive
the same pages in Chromium.
"""
from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import zipfile

import pytest
from sqlalchemy import func, select

from pages import COURSE, QKV, browser, csrf_of, sign_in, site_for
from support import make_samples
from autograder.course.config import load_course
from autograder.service import sessions, tables


def notebook() -> bytes:
    return json.dumps(make_samples.submission(QKV, solved="all")).encode()


def stored(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one()


def test_signing_in_sets_an_httponly_samesite_session_and_every_page_checks_its_caller(site):
    url, engine, who, _ = site
    with browser(url) as anonymous:
        assert anonymous.get("/me").status_code == 303 and "/login?next=" in anonymous.get("/me").headers["location"]
        assert anonymous.get("/dashboard").status_code == 303
        page = anonymous.get("/login")
        for header in ("content-security-policy", "x-content-type-options", "x-frame-options"):
            assert header in page.headers, header
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "<script>" not in page.text.replace("<script src=", "")          # no inline script anywhere
        # A login without the form's CSRF token, or with a wrong token, signs nobody in.
        assert anonymous.post("/login", data={"token": who["ada"]}).status_code == 403
        wrong = anonymous.post("/login", data={"csrf": csrf_of(page.text), "token": "nope"})
        assert wrong.status_code == 401 and "令牌无效" in wrong.text and sessions.COOKIE not in wrong.cookies
    with browser(url) as ada:
        made = sign_in(ada, who["ada"], next_url="https://evil.example/")
        assert made.status_code == 303 and made.headers["location"] == "/"     # never another site
        cookie = made.headers["set-cookie"]
        assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower() and who["ada"] not in cookie
        assert ada.get("/").headers["location"] == "/me"
        mine = ada.get("/me")
        assert mine.status_code == 200 and "我的提交" in mine.text and QKV.id in mine.text
        assert ada.get("/dashboard").status_code == 403                        # a student's session
        assert ada.get("/dashboard/student?id=ben").status_code == 403
        assert ada.get("/dashboard/download/grades.csv").status_code == 403
        assert "My submissions" in ada.get("/me?lang=en").text and "My submissions" in ada.get("/me").text
        # Signing out ends the session on the server: the old cookie opens nothing.
        old = ada.cookies[sessions.COOKIE]
        assert ada.post("/logout", data={"csrf": csrf_of(mine.text)}).status_code == 303
        with browser(url) as replay:
            replay.cookies.set(sessions.COOKIE, old)
            assert replay.get("/me").status_code == 303
    with browser(url) as teacher:
        sign_in(teacher, who["teacher"])
        assert teacher.get("/").headers["location"] == "/dashboard"
        assert teacher.get("/dashboard").status_code == 200


def test_every_write_needs_the_sessions_csrf_token_and_nothing_is_stored_without_it(site):
    url, engine, who, _ = site
    with browser(url) as ada:
        sign_in(ada, who["ada"])
        page = ada.get("/me").text
        files = {"notebook": ("mine.ipynb", notebook(), "application/json")}
        assert ada.post("/me/upload", data={"assignment": QKV.id}, files=files).status_code == 403
        assert ada.post("/me/upload", data={"assignment": QKV.id, "csrf": "forged"}, files=files).status_code == 403
        # The JSON API with the session's cookie: a write needs the X-CSRF-Token header.
        assert ada.post("/api/submissions", data={"assignment": QKV.id}, files=files).status_code == 403
        assert stored(engine) == 0
        done = ada.post("/me/upload", data={"assignment": QKV.id, "csrf": csrf_of(page)}, files=files)
        assert done.status_code == 303 and stored(engine) == 1
        api = ada.post("/api/submissions", data={"assignment": QKV.id}, files=files,
                       headers={"X-CSRF-Token": csrf_of(page)})
        assert api.status_code == 202 and stored(engine) == 2
        # The page's script reads its submissions through the API with the cookie alone.
        assert ada.get(f"/api/submissions/{api.json()['submission']}").json()["state"] == "queued"
        bad = ada.post("/me/upload", data={"assignment": "99_none", "csrf": csrf_of(page)}, files=files)
        assert bad.status_code == 404 and "99_none" in bad.text and "text/html" in bad.headers["content-type"]
    with browser(url) as teacher:
        sign_in(teacher, who["teacher"])
        board = teacher.get("/dashboard").text
        assert teacher.post("/dashboard/requeue", data={"submission": "1"}).status_code == 403
        assert teacher.post("/dashboard/extensions", data={"student": "ada", "assignment": QKV.id,
                                                          "due": "2030-01-01T10:00"}).status_code == 403
        assert teacher.post("/dashboard/requeue", data={"submission": "1", "csrf": csrf_of(board)}).status_code == 303
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.Job)).scalar_one() == 3    # 2 uploads + 1 again


@pytest.mark.slow
def test_the_dashboard_filters_sorts_grants_extensions_and_downloads(site):
    url, engine, who, database = site
    from autograder.service import queue as Q

    Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb", data=notebook())
    Q.store(engine, student="ben", assignment=QKV.id, filename="b.ipynb",
            data=json.dumps(make_samples.submission(QKV, solved=())).encode())
    done = subprocess.run([sys.executable, "-m", "autograder", "worker", "--database", str(database), "--once"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with browser(url) as teacher:
        sign_in(teacher, who["teacher"])
        board = teacher.get("/dashboard")
        assert board.status_code == 200 and "ada" in board.text and "ben" in board.text
        assert "data:image/svg+xml;base64," in board.text                    # the histogram, drawn
        by_score = teacher.get("/dashboard?sort=score").text
        assert by_score.index('id="submission-1"') < by_score.index('id="submission-2"')   # ada 8, ben 0
        only_ben = teacher.get("/dashboard?student=ben").text
        assert 'id="submission-2"' in only_ben and 'id="submission-1"' not in only_ben
        assert 'id="submission-1"' not in teacher.get("/dashboard?status=queued").text
        assert teacher.get("/dashboard/report").status_code == 200
        history = teacher.get("/dashboard/student?id=ada").text
        assert 'id="submission-1"' in history and "<details open>" in history    # her latest feedback, open
        token = csrf_of(board.text)
        bad = teacher.post("/dashboard/extensions", data={"csrf": token, "student": "ada", "assignment": QKV.id,
                                                          "due": "next week"})
        assert bad.status_code == 422 and "due" in bad.text
        granted = teacher.post("/dashboard/extensions", data={"csrf": token, "student": "ada", "assignment": QKV.id,
                                                              "due": "2030-01-01T10:00", "reason": "ill"})
        assert granted.status_code == 303
        assert "2030-01-01 10:00" in teacher.get(granted.headers["location"]).text
        rows = list(csv.DictReader(io.StringIO(teacher.get("/dashboard/download/grades.csv").content
                                               .decode("utf-8-sig"))))
        assert {r["student"]: float(r["total"]) for r in rows} == {"ada": QKV.points, "ben": 0.0}
        archive = zipfile.ZipFile(io.BytesIO(teacher.get("/dashboard/download/feedback.zip").content))
        assert f"feedback/ada__{QKV.id}.html" in archive.namelist()
        assert teacher.get("/dashboard/download/secret.txt").status_code == 404
    with browser(url) as ada:
        sign_in(ada, who["ada"])
        mine = ada.get("/me").text
        assert "2030-01-01" in mine                                   # her own due date, the extension's
        assert "<details open>" in mine and "隐藏" in mine             # her verdict, open
        assert "ben" not in mine


def test_an_extension_from_the_dashboard_says_when_the_courses_extensions_file_wins(course_root, tmp_path):
    from urllib.parse import unquote

    (course_root / "extensions.csv").write_text("student,assignment,extra,reason\nada,02_qkv_attention,1d,\n",
                                                encoding="utf-8")
    course = load_course(course_root)
    with site_for(tmp_path, course) as (url, _engine, who, _database), browser(url) as teacher:
        sign_in(teacher, who["teacher"])
        token = csrf_of(teacher.get("/dashboard").text)
        said = {}
        for student in ("ada", "ben"):
            made = teacher.post("/dashboard/extensions", data={"csrf": token, "student": student,
                                                               "assignment": QKV.id, "due": "2030-01-01T10:00"})
            assert made.status_code == 303
            said[student] = unquote(made.headers["location"])
    assert "extensions.csv" in said["ada"] and "以文件为准" in said["ada"]
    assert "extensions.csv" not in said["ben"]


# -- issue 66, item 2: one date format, in the course's zone -----------------------------------------------------------
#: A date as people read it, the one format (autograder.course.clock.readable): "2026-01-08 23:59 +08:00".
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? [+-]\d{2}:\d{2}")


def _dates(page: str) -> list[str]:
    """Every date a page's text shows (its attributes, for machines, left out), with what follows it."""
    import html as html_module

    text = html_module.unescape(re.sub(r"<[^>]+>", " ", page))
    return [text[m.start():m.start() + 40] for m in re.finditer(r"\d{4}[-年/]\d{1,2}[-月/]\d{1,2}", text)]


def test_every_page_writes_dates_one_way_in_the_courses_zone_and_the_report_gives_the_assignments_due_date(tmp_path):
    """The class report once gave the first student's extended due date as the assignment's, in UTC
    ("2026-12-10T15:59:00+00:00"); the pages wrote dates four ways (年月日 by the script, "CST", "+08:00", ISO);
    an on-time result's feedback was labelled "迟交"."""
    import datetime as dt

    from autograder.grading.deadlines import Deadlines, submitted_json
    from autograder.grading.times import SubmittedAt
    from autograder.course.late_policy import LatePolicy
    from autograder.service import queue as Q

    course = COURSE.model_copy(update={"timezone": "Asia/Shanghai", "assignments": [
        a.model_copy(update={"due": "2026-12-08T23:59:00+08:00", "late": LatePolicy(kind="per_day", percent=10)})
        if a.id == QKV.id else a for a in COURSE.assignments]})
    utc = dt.timezone.utc
    with site_for(tmp_path, course) as (url, engine, who, _database):
        # ada's extension, granted on the dashboard (kept in UTC): two days more; both hand in on time.
        with browser(url) as teacher:
            sign_in(teacher, who["teacher"])
            granted = teacher.post("/dashboard/extensions", data={
                "csrf": csrf_of(teacher.get("/dashboard").text), "student": "ada", "assignment": QKV.id,
                "due": "2026-12-10T23:59", "reason": "ill"})
            assert granted.status_code == 303
        assert tables.granted_extensions(engine)[0].due == dt.datetime(2026, 12, 10, 15, 59, tzinfo=utc)
        for student, received in (("ada", dt.datetime(2026, 12, 9, 20, 0, tzinfo=utc)),
                                  ("ben", dt.datetime(2026, 12, 8, 12, 0, tzinfo=utc))):
            sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb", data=notebook(),
                               received_at=received)
            result = {"student": student, "assignment": QKV.id, "points": QKV.points, "max_points": QKV.points,
                      "status": "graded", "exercises": []}
            Deadlines.load(course).settle(result, submitted_json(SubmittedAt(received, "the service's receipt")))
            assert Q.claim(engine, "w", 60).job == job and Q.complete(engine, job, "w", result)
        with browser(url) as teacher, browser(url) as ada:
            sign_in(teacher, who["teacher"])
            sign_in(ada, who["ada"])
            report = teacher.get("/dashboard/report").text
            # The assignment's due date, in the course's zone: not ada's extension, not UTC, not ISO.
            assert "截止 2026-12-08 23:59 +08:00" in report
            assert "2026-12-10" not in report and "T15:59" not in report and "+00:00" not in report
            mine = ada.get("/me").text
            assert ">2026-12-10 23:59 +08:00</time>" in mine                         # her own due date
            assert "截止时间 2026-12-10 23:59 +08:00（已延期）；按时提交" in mine      # in the course's zone
            assert "提交期限: 截止时间" in mine and "迟交: 截止时间" not in mine       # on time: not labelled late
            pages = {"/me": mine, "/dashboard/report": report}
            for path in ("/dashboard", "/dashboard/student?id=ada", "/dashboard/actions", "/dashboard/tokens",
                         "/dashboard/roster"):
                pages[path] = teacher.get(path).text
            for path, page in pages.items():
                shown = _dates(page)
                assert all(ONE_FORMAT.match(d) for d in shown), (path, [d for d in shown if not ONE_FORMAT.match(d)])
                assert "CST" not in page, path
            assert sum(len(_dates(p)) for p in pages.values()) >= 6
            # The pages' script leaves the dates as the page wrote them (it once rewrote them in the reader's zone,
            # 年月日 in Chinese).
            script = ada.get("/static/app.js").text
            assert "toLocaleString" not in script
