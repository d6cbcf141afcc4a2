"""Issue 48: a real class on the service: the grade that counts is always the right one.

Each test reproduces what a new instructor, student or TA saw (each failed on the main of 2026-12-05):
a notebook of another assignment graded into this one; extensions granted on the dashboard that never
reached the stored scores; the late line's pre-penalty score; a token with a CRLF line end.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from support import make_samples
from served import serving, student_token
from late_class import LATE_COURSE, late_result
from autograder.course.config import load_course
from autograder.service import db, tables, tokens
from autograder.service import queue as Q
from autograder.service.app import create_app

COURSE = load_course()
RNN = COURSE.assignment("01_rnn_decay")
QKV = COURSE.assignment("02_qkv_attention")
#: 02's maximum (autograder.course.written.maximum): its automatic points and its written answer's; the late policy's
#: percentage is of it.
MAX = QKV.points + QKV.manual_points
UTC = dt.timezone.utc


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def stored(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(tables.Submission)).scalar_one()


@pytest.fixture
def service(tmp_path, request):
    course = getattr(request, "param", COURSE)
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    people = {"s04": student_token(engine, "s04"), "s05": student_token(engine, "s05"),
              "teacher": tokens.issue(engine, "teacher", role="instructor")}
    with serving(create_app(engine, course)) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, engine, people, course
    engine.dispose()


# -- 1. a notebook of another assignment ------------------------------------------------------------------------
def test_the_release_writes_its_assignment_into_each_notebook():
    for a in COURSE.assignments:
        nb = json.loads((COURSE.root / "release" / a.id / a.notebook).read_text(encoding="utf-8"))
        assert nb["metadata"]["autograder"] == {"assignment": a.id}, a.id


def test_an_upload_of_another_assignments_notebook_is_refused_naming_it(service):
    client, engine, who, _ = service
    qkv = make_samples.submission(QKV, solved="all")            # its cells' nbgrader ids say 02
    released = json.loads((COURSE.root / "release" / QKV.id / QKV.notebook).read_text(encoding="utf-8"))
    for notebook in (qkv, released):                             # ... and the release's metadata too
        got = client.post("/api/submissions", headers=auth(who["s04"]), data={"assignment": RNN.id},
                          files={"notebook": ("mine.ipynb", json.dumps(notebook).encode(), "application/json")})
        assert got.status_code == 422, got.text
        error = got.json()["error"]
        assert got.json()["code"] == "service.wrong_assignment"
        assert QKV.id in error["zh"] and QKV.id in error["en"] and RNN.id in error["en"]
    assert stored(engine) == 0
    ok = client.post("/api/submissions", headers=auth(who["s04"]), data={"assignment": QKV.id},
                     files={"notebook": ("mine.ipynb", json.dumps(qkv).encode(), "application/json")})
    assert ok.status_code == 202 and stored(engine) == 1


def test_grade_names_a_notebook_of_another_assignment_in_its_row(tmp_path):
    """The path says 01, the notebook's cells say 02: the row says so (never 0 with "function missing")."""
    from autograder.grading.submissions import discover

    qkv = make_samples.submission(QKV, solved="all")
    older = json.loads(json.dumps(qkv))
    older["metadata"].pop("autograder")                # a notebook from before the release wrote its assignment
    for student, notebook in (("s30", qkv), ("s31", older)):
        folder = tmp_path / "subs" / student
        folder.mkdir(parents=True)
        (folder / f"{RNN.id}.ipynb").write_text(json.dumps(notebook))
    found = {s.student: s for s in discover(tmp_path / "subs", COURSE).submissions}
    for student, how in (("s30", "notebook metadata"), ("s31", "nbgrader cell ids")):
        assert found[student].assignment == RNN.id
        assert found[student].problem == f"wrong assignment: the notebook is {QKV.id} ({how}), not {RNN.id}"
        assert QKV.id in found[student].said["zh"] and RNN.id in found[student].said["zh"]


def test_check_goes_by_what_the_notebook_says_before_its_name_or_functions(tmp_path):
    """A 02 notebook renamed 01_rnn_decay.ipynb that also defines 01's functions is checked as 02."""
    from autograder.selfcheck.exercises import guess_assignment

    nb = make_samples.submission(QKV, solved="all")
    namespace = {e.function: (lambda *a: None) for e in RNN.exercises}
    assert guess_assignment(COURSE, namespace, f"{RNN.id}.ipynb", nb=nb).id == QKV.id
    # In a kernel: the notebook's file, read as it is saved.
    path = tmp_path / f"{RNN.id}.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert guess_assignment(COURSE, namespace, str(path)).id == QKV.id
    assert guess_assignment(COURSE, namespace, str(tmp_path / "gone.ipynb")).id == RNN.id   # the functions


# -- 3 and 7. an extension reaches every view of the stored result, at once ------------------------------------
def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


@pytest.mark.parametrize("service", [LATE_COURSE], indirect=True)
def test_an_extension_granted_on_the_dashboard_reaches_every_view_at_once_and_a_revoke_too(service):
    client, engine, who, _ = service
    sub = late_result(engine, "s04")
    before = client.get(f"/api/submissions/{sub}", headers=auth(who["s04"])).json()["result"]
    assert before["points"] == QKV.points - MAX / 2 and before["late"]["extended"] is False
    assert before["raw_points"] == QKV.points          # the late line's score before the penalty (item 7)
    with httpx.Client(base_url=str(client.base_url), timeout=60) as board:
        page = board.get("/login")
        board.post("/login", data={"token": who["teacher"], "csrf": _csrf(page.text), "next": "/dashboard"})
        csrf = _csrf(board.get("/dashboard").text)
        typo = board.post("/dashboard/extensions", data={"csrf": csrf, "student": "s4", "assignment": QKV.id,
                                                          "due": "2026-01-20T23:59"})
        assert typo.status_code == 422 and "s04" in typo.text and "名单" in typo.text
        granted = board.post("/dashboard/extensions", data={"csrf": csrf, "student": "s04", "assignment": QKV.id,
                                                             "due": "2026-01-20T23:59"})
        assert granted.status_code == 303
        # The API, the student's page, grades.csv and the class report: all at once, nothing regraded.
        now = client.get(f"/api/submissions/{sub}", headers=auth(who["s04"])).json()["result"]
        assert now["points"] == QKV.points and now["late"]["extended"] is True and now["late"]["late"] is False
        grades = list(csv.DictReader(io.StringIO(board.get("/dashboard/download/grades.csv").text.lstrip("\ufeff"))))
        assert [float(r["total"]) for r in grades if r["student"] == "s04"] == [QKV.points]
        with httpx.Client(base_url=str(client.base_url), timeout=60) as ada:
            page = ada.get("/login")
            ada.post("/login", data={"token": who["s04"], "csrf": _csrf(page.text), "next": "/me"})
            mine = ada.get("/me").text
        assert f"{QKV.points:g} / {MAX:g}" in mine and f"{QKV.points:g} / {MAX:g} · 迟交" not in mine
        revoked = board.post("/dashboard/extensions/revoke", data={"csrf": csrf, "student": "s04",
                                                                    "assignment": QKV.id})
        assert revoked.status_code == 303 and "已撤销" in board.get(revoked.headers["location"]).text
    again = client.get(f"/api/submissions/{sub}", headers=auth(who["s04"])).json()["result"]
    assert again["points"] == QKV.points - MAX / 2 and again["late"]["extended"] is False
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.Job)).scalar_one() == 1     # never regraded


@pytest.mark.parametrize("service", [LATE_COURSE], indirect=True)
def test_the_late_line_shows_the_score_before_the_penalty(service):
    from autograder.reports.feedback import feedback_parts

    client, engine, who, course = service
    sub = late_result(engine, "s05")
    seen = client.get(f"/api/submissions/{sub}", headers=auth(who["s05"])).json()["result"]
    text = "\n".join(feedback_parts(seen, course, "zh"))
    assert f"扣分前 {QKV.points:g}" in text, text


# -- 10. a token copied with its line end -----------------------------------------------------------------------
def test_a_token_copied_with_its_crlf_line_end_works_and_odd_characters_are_said(service, tmp_path, monkeypatch):
    from autograder.selfcheck import submit as S

    client, engine, who, course = service
    saved = tmp_path / "mine.ipynb"                              # its name says nothing: the notebook does
    saved.write_text(json.dumps(make_samples.submission(QKV, solved="all")), encoding="utf-8")
    monkeypatch.setenv(S.ENV_SERVER, f"{client.base_url}/ ")
    monkeypatch.setenv(S.ENV_TOKEN, who["s04"] + "\r\n")
    said: list[str] = []
    assert S.submit_file(saved, assignment=None, course=course, language="zh", wait=False, say=said.append) is None
    assert said and "已提交" in said[0] and stored(engine) == 1
    monkeypatch.setenv(S.ENV_TOKEN, who["s04"] + "\u00a0x")
    with pytest.raises(S.SubmitError, match="令牌里有不该有的字符"):
        S.submit_file(saved, assignment=None, course=course, language="zh", wait=False, say=said.append)


# -- 5. out of memory only where the sandbox says so --------------------------------------------------------------
def test_a_wrong_answer_whose_function_name_says_memory_is_no_memory_note():
    from autograder.grading.submission import _exercise_notes
    from autograder.core.messages import say

    def exercise(status: str, en: str) -> dict:
        return {"exercise": "5.9", "status": status, "checks": [
            {"passed": False, "message": {"zh": "…", "en": en}}]}

    wrong = exercise("failed", "kv_cache_memory(2, 4, 8) returned 64, expected 128")
    assert _exercise_notes(wrong, "kv_cache_memory") is None
    own = exercise("error", say("check.raised", kind="ValueError", detail="attention_memory out of memory").en)
    assert _exercise_notes(own, "attention_memory") is None         # the word in the student's own message
    killed = exercise("crashed", say("sandbox.killed_memory").en)
    assert _exercise_notes(killed, "kv_cache_memory")[0] == "memory: 5.9"
    refused = exercise("error", say("check.raised", kind="MemoryError", detail="").en)
    assert _exercise_notes(refused, "kv_cache_memory")[0] == "memory: 5.9"


# -- 2. extensions.csv and students who are not in this batch ------------------------------------------------------
def test_an_extension_for_a_student_not_in_the_batch_is_no_error_and_a_typo_is_caught_against_the_roster(
        course_root, tmp_path):
    from autograder.core.errors import ConfigError
    from autograder.grading.batch import plan

    subs = tmp_path / "subs"
    for student in ("s30", "s31"):
        (subs / student).mkdir(parents=True)
        (subs / student / QKV.notebook).write_text(json.dumps(make_samples.submission(QKV, solved="all")))
    (course_root / "extensions.csv").write_text("student,assignment,extra,reason\ns05,02_qkv_attention,2d,\n"
                                                "s30,02_qkv_attention,1d,\n", encoding="utf-8")
    course = load_course(course_root)
    one = plan(subs, course, tmp_path / "out", student="s30")          # regrading one student: s05 is elsewhere
    assert [s.student for s in one.found.submissions] == ["s30"]
    assert {e.student for e in one.deadlines.extensions} == {"s05", "s30"}
    whole = plan(subs, course, tmp_path / "out")                        # s05 has not handed in yet
    assert len(whole.found.submissions) == 2
    # With a roster in course.yml, a name on no roster is a typo: the row is named.
    (course_root / "roster.csv").write_text("student,name\ns30,A\ns31,B\ns50,C\n", encoding="utf-8")
    text = (course_root / "course.yml").read_text(encoding="utf-8")
    (course_root / "course.yml").write_text(text + "\nroster: roster.csv\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"extensions.csv, row 1 \(s05, 02_qkv_attention\): student: 's05' is "
                                          r"not on the roster"):
        plan(subs, load_course(course_root), tmp_path / "out")


# -- 4. explain reads what serve export wrote --------------------------------------------------------------------
def test_explain_finds_the_graded_notebook_in_a_service_export(tmp_path):
    import hashlib

    from autograder.grading.explain import find_result, graded_file
    from autograder.service.export import export

    from autograder.service.worker import serve

    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    data = json.dumps(make_samples.submission(QKV, solved="all")).encode()
    Q.store(engine, student="s30", assignment=QKV.id, filename="a.ipynb", data=data)
    assert serve(str(tmp_path / "service.db"), once=True, owner="w") == 1
    out = tmp_path / "out"
    export(engine, COURSE, out)
    result = find_result(out, "s30", QKV.id)
    path = graded_file(result, tmp_path)
    assert path == out.resolve() / "submitted" / "s30" / QKV.id / QKV.notebook and path.read_bytes() == data
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    engine.dispose()


# -- 8. a changed course.yml reaches the running service, validated first -----------------------------------------
@pytest.mark.slow
def test_a_changed_course_yml_reaches_the_running_service_and_an_invalid_one_is_refused(course_root, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from served import cli_student_token, free_port

    env = dict(os.environ, AUTOGRADER_COURSE=str(course_root / "course.yml"))
    base = [sys.executable, "-m", "autograder", "serve", "--database", str(tmp_path / "s.db")]
    token = cli_student_token(base, env, tmp_path, "s04")
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([*base, "--port", str(port), "--workers", "0"], env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def due_shown() -> str:
        with httpx.Client(base_url=url, timeout=30) as browser:
            page = browser.get("/login")
            browser.post("/login", data={"token": token, "csrf": _csrf(page.text), "next": "/me"})
            return browser.get("/me").text

    def wait_for(predicate, what: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"{what}: {log.read_text(errors='replace')[-2000:]}")

    try:
        wait_for(lambda: "没有截止时间" in due_shown(), "the service did not start")
        text = (course_root / "course.yml").read_text(encoding="utf-8")
        assert "  - id: 02_qkv_attention\n" in text
        (course_root / "course.yml").write_text(text.replace("  - id: 02_qkv_attention\n", "  - id: 02_qkv_attention\n"
                                                             "    due: 2031-03-04T10:00:00+00:00\n"), encoding="utf-8")
        wait_for(lambda: "2031-03-04" in due_shown(), "the new due date did not reach the page")
        (course_root / "course.yml").write_text(text.replace("seed:", "seed: [not a number]\nx:"), encoding="utf-8")
        wait_for(lambda: "is not valid" in log.read_text(errors="replace"), "the invalid file was not named")
        assert "2031-03-04" in due_shown()                       # the course in use stays
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    assert "reloaded" in log.read_text(errors="replace")


# -- 13. smaller things a new user tripped on ---------------------------------------------------------------------
def test_serve_takes_database_before_or_after_its_action_and_check_help_names_a_real_notebook(tmp_path):
    import argparse

    from autograder.service.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    db_file = str(tmp_path / "s.db")
    for argv in (["--database", db_file, "token", "--student", "s1"],
                 ["token", "--student", "s1", "--database", db_file]):
        args = parser.parse_args(argv)
        assert (args.action, args.database, args.student) == ("token", db_file, "s1")
    assert parser.parse_args(["token", "--student", "s1"]).database is None
    import autograder.selfcheck.command as check_command

    # The example names no notebook that does not exist (it said 02_attention.ipynb): a placeholder, said so.
    named = re.findall(r"Example: autograder check (\S+\.ipynb)", Path(check_command.__file__).read_text())
    assert named == ["NOTEBOOK.ipynb"], named


def test_autograder_course_shows_each_due_date_and_late_policy():
    from autograder.commands.course import _deadline_text

    assert _deadline_text(LATE_COURSE, QKV.id) == ("due 2026-01-10 23:59 +00:00 (" + (COURSE.timezone or "UTC")
                                                  + "), late: 50% of the points off per started day")
    assert _deadline_text(LATE_COURSE, RNN.id) == "no due date"


@pytest.mark.parametrize("service", [LATE_COURSE], indirect=True)
def test_past_the_due_date_the_student_page_says_what_handing_in_now_costs(service):
    client, engine, who, _ = service
    with httpx.Client(base_url=str(client.base_url), timeout=60) as browser:
        page = browser.get("/login")
        browser.post("/login", data={"token": who["s05"], "csrf": _csrf(page.text), "next": "/me"})
        mine = browser.get("/me").text
    section = mine.split(f'id="assignment-{QKV.id}"', 1)[1].split("</section>", 1)[0]
    # (the penalty is of the maximum, 02's written answer's points included, and says so: issue 66)
    assert f"迟交不设截止；现在交会扣 {MAX:g} 分（按满分 {MAX:g} 分计）" in section
    assert "现在交会扣" not in mine.split(f'id="assignment-{RNN.id}"', 1)[1].split("</section>", 1)[0]


# -- 6. a notebook opened where there is no course -------------------------------------------------------------------
def test_check_and_submit_without_a_course_say_so_in_one_sentence(tmp_path, monkeypatch, capsys):
    from autograder.selfcheck import kernel
    from autograder.selfcheck.submit import submit

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)
    monkeypatch.setattr(kernel, "_show", lambda result: print(result.notes[0].message.zh))
    kernel.check("2.1")
    assert submit() is None
    out = capsys.readouterr()
    assert out.out.count("这里找不到课程（没有 course.yml）") == 2 and "Traceback" not in out.out + out.err


# -- 12. a demonstration cell's time is its own -------------------------------------------------------------
@pytest.mark.slow
def test_a_demonstration_cell_runs_within_its_own_budget_and_no_loop_is_guessed(tmp_path):
    import nbformat

    from autograder.selfcheck.execute import execute_notebook

    nb = nbformat.v4.new_notebook()
    demo = nbformat.v4.new_code_cell("import time\ntime.sleep(1.5)\ntrained = True")
    demo.metadata["nbgrader"] = {"grade_id": "training_experiment", "locked": True}
    mine = nbformat.v4.new_code_cell("import time\ntime.sleep(1.5)\nmine = True")
    nb.cells = [demo, mine]
    namespace, notes = execute_notebook(nb, tmp_path, seconds=1, demo_seconds=5)
    assert namespace.get("trained") is True and "mine" not in namespace       # the student's cell had 1 s
    assert len(notes) == 1 and "cell 2" in notes[0].message.en
    slow = execute_notebook(nb, tmp_path, seconds=1, demo_seconds=1)[1][0].message
    assert "limits.demo_seconds" in slow.en and "loop" not in slow.en and "死循环" not in slow.zh


# -- 11. the self-check names the earlier exercise a failure comes from ---------------------------------------------
def test_check_says_when_a_failure_comes_from_an_earlier_exercise_it_calls():
    """A correct 2.4 on top of a 2.3 that uses K.T (wrong with batch dimensions): check("2.4") fails, as the
    student's own 2.3 answers its calls, and says to fix 2.3 first (the grader gives 2.4 full marks with a
    stand-in)."""
    import math

    import solutions.qkv_attention as reference
    from autograder.selfcheck.kernel import self_check

    namespace = {name: getattr(reference, name) for name in dir(reference) if not name.startswith("_")}

    def attention_scores(Q, K):
        return Q @ K.T / math.sqrt(Q.shape[-1])

    namespace["attention_scores"] = attention_scores
    exec("def scaled_dot_product_attention(Q, K, V):\n"
         "    weights = softmax(attention_scores(Q, K), dim=-1)\n"
         "    return weights @ V, weights\n", namespace)
    result = self_check(namespace, "2.4", language="en", course=COURSE)
    assert not result.passed
    said = [n.message.en for n in result.notes]
    assert any("2.4 calls your attention_scores (exercise 2.3), which fails its own public checks" in s and
               "fix 2.3 first" in s for s in said), said
    namespace["attention_scores"] = reference.attention_scores                # all correct: no such note
    assert not any("fix" in n.message.en for n in self_check(namespace, "2.4", language="en", course=COURSE).notes)


# -- 9. the roster carries names and LMS ids; the LMS files use them -------------------------------------------------
CANVAS_EXPORT = (  # Canvas: Grades → Export (its second row is the assignments' points, not a student)
    "Student,ID,SIS User ID,SIS Login ID,Section,Homework 1 (101),Current Points,Final Points\n"
    "    Points Possible,,,,,11,(read only),(read only)\n"
    '"Lovelace, Ada",1001,U-30,s30,Sect A,11,11,11\n'
    '"Ng, Ben",1002,U-31,s31,Sect B,,0,0\n')
MOODLE_EXPORT = (  # Moodle: Grades → Export → Plain text file (with the username field), BOM and all
    "\ufeffFirst name,Last name,ID number,Institution,Department,Email address,Username,Assignment: 01\n"
    "Ada,Lovelace,20260030,Uni,CS,ada@uni.example,s30,-\n"
    "Ben,Ng,,Uni,CS,,s31,-\n")


def test_a_roster_is_read_from_the_kits_columns_and_from_canvas_and_moodle_exports(tmp_path):
    from autograder.core.errors import ConfigError
    from autograder.course.roster import parse_roster, read_roster

    canvas = parse_roster(CANVAS_EXPORT, "export.csv")
    assert [(m.student, m.name, m.canvas_id, m.section) for m in canvas.members] == [
        ("s30", "Lovelace, Ada", "1001", "Sect A"), ("s31", "Ng, Ben", "1002", "Sect B")]
    (tmp_path / "moodle.csv").write_text(MOODLE_EXPORT, encoding="utf-8")
    moodle = read_roster(tmp_path / "moodle.csv")
    assert [(m.student, m.name, m.email, m.moodle_id_number, m.canvas_id) for m in moodle.members] == [
        ("s30", "Ada Lovelace", "ada@uni.example", "20260030", ""), ("s31", "Ben Ng", "", "", "")]
    own = parse_roster("student,name,email,canvas_id\ns30,Ada,ada@uni.example,1001\n\ns31,,,\n")
    assert own.member("s30").canvas_id == "1001" and own.member("s31").name == "" and own.students == {"s30", "s31"}
    for text, said in (("name,email\nAda,a@b\n", r"r\.csv: no student column \(its header: name, email\)"),
                       ("student,canvas_id\ns30,12a\n", r"r\.csv, row 1: canvas_id: a Canvas user id is digits"),
                       ("student\ns30\ns30\n", r"r\.csv, row 2: student 's30' is already row 1")):
        with pytest.raises(ConfigError, match=said):
            parse_roster(text, "r.csv")


def test_serve_roster_takes_canvas_export_as_downloaded_with_names(tmp_path):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    (tmp_path / "export.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    rows = tokens.import_roster(engine, tmp_path / "export.csv")
    assert [(student, name) for student, name, _ in rows] == [("s30", "Lovelace, Ada"), ("s31", "Ng, Ben")]
    assert tokens.caller(engine, rows[0][2]) == tokens.Caller("student", "s30")
    engine.dispose()


def test_the_services_lms_files_match_students_by_the_rosters_ids_and_list_those_without(course_root, tmp_path):
    from autograder.service.export import export
    from autograder.service.worker import serve

    (course_root / "roster.csv").write_text("student,name,email,canvas_id\ns30,Ada Lovelace,ada@uni.example,1001\n"
                                            "s31,Ben Ng,,\n", encoding="utf-8")
    text = (course_root / "course.yml").read_text(encoding="utf-8")
    (course_root / "course.yml").write_text(text.replace("\nassignments:", "\nroster: roster.csv\nassignments:", 1),
                                            encoding="utf-8")
    course = load_course(course_root / "course.yml")
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    data = json.dumps(make_samples.submission(QKV, solved="all")).encode()
    for student in ("s30", "s31"):
        Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb", data=data)
    assert serve(str(tmp_path / "service.db"), once=True, owner="w") == 2      # (graded with the course served)
    out = tmp_path / "out"
    export(engine, course, out)
    engine.dispose()

    def rows(name: str) -> list[list[str]]:
        return list(csv.reader(io.StringIO((out / name).read_text(encoding="utf-8-sig"))))

    full = f"{QKV.points:g}"
    canvas = rows("canvas.csv")
    assert canvas[2][:5] == ["Ada Lovelace", "1001", "", "", ""] and canvas[2][5] == full
    assert canvas[3][:5] == ["Ben Ng", "", "", "s31", ""]           # no id: Canvas may match its SIS Login ID only
    grades = rows("moodle-grades.csv")
    assert grades[0] == ["Email address", "ID number", "Full name", QKV.gradebook_title]
    assert grades[1:] == [["ada@uni.example", "", "Ada Lovelace", full], ["", "", "Ben Ng", full]]
    skipped = rows("lms-skipped.csv")
    assert [(r[0], r[1]) for r in skipped[1:]] == [("s31", QKV.id), ("s31", QKV.id)]
    assert sorted(r[2].split(" ")[0] + " " + ("Canvas" if "Canvas" in r[2] else "Moodle") for r in skipped[1:]) == \
        ["graded, Canvas", "graded, Moodle"]


# -- 4. the same explanation from the dashboard, in the course's language ----------------------------------------
@pytest.mark.slow
def test_an_instructor_opens_the_explanation_of_a_lost_exercise_from_the_dashboard(service):
    from autograder.service.worker import serve

    client, engine, who, _ = service
    wrong = make_samples.submission(QKV, solved="all", code={
        "2.3": "import torch\ndef attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"})
    made = client.post("/api/submissions", headers=auth(who["s05"]), data={"assignment": QKV.id},
                       files={"notebook": ("n.ipynb", json.dumps(wrong).encode(), "application/json")})
    assert made.status_code == 202, made.text
    number = made.json()["submission"]
    database = str(engine.url.database)
    assert serve(database, once=True, owner="w") == 1
    with httpx.Client(base_url=str(client.base_url), timeout=300) as board:
        page = board.get("/login")
        board.post("/login", data={"token": who["teacher"], "csrf": _csrf(page.text), "next": "/dashboard"})
        history = board.get("/dashboard/student", params={"id": "s05"}).text
        link = f"/dashboard/explain?submission={number}&amp;exercise=2.3"
        assert link in history and "练习 2.3 为什么扣分" in history
        assert "exercise=2.4" not in history                 # (2.4 kept its points: graded with 2.3's reference)
        shown = board.get(link.replace("&amp;", "&"))
        assert shown.status_code == 200, shown.text
        text = re.sub(r"<[^>]+>", " ", shown.text)
        assert "仅限教师" in text and "已知错误 no-scale" in text and "参考答案给出：Tensor" in text, text[:3000]
        assert "学生的函数返回：Tensor" in text
        english = board.get(link.replace("&amp;", "&") + "&lang=en").text
        assert "known mistake no-scale" in english and "the reference gives: Tensor" in english
        assert board.get(f"/dashboard/explain?submission={number}&exercise=9.9").status_code == 404
        assert board.get("/dashboard/explain?submission=999&exercise=2.3").status_code == 404
    with httpx.Client(base_url=str(client.base_url), timeout=60) as student:
        page = student.get("/login")
        student.post("/login", data={"token": who["s05"], "csrf": _csrf(page.text), "next": "/me"})
        assert "dashboard/explain" not in student.get("/me").text
        assert student.get(link.replace("&amp;", "&")).status_code == 403
