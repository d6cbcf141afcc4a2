"""Issue 66, item 10: e-mail to students when a verdict, a hand grade or a review answer is ready.

Every mail goes to a local SMTP server (aiosmtpd, on 127.0.0.1, started per test), never a real one. The events are
made as the service makes them (a worker's first result through queue.complete with the worker's hook, a mark saved
with the grading page's hook, a review answered through autograder.service.reviews); the outbox is sent by
autograder.service.mail.send, as the serve loop and ``serve mail send`` send it. No test measures time: a retry is
made due by passing the round a later ``now``, and a loop is waited on for a condition.
"""
from __future__ import annotations

import datetime as dt
import email
import email.policy
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from sqlalchemy import select, update

from support import make_samples
from autograder.cli import main
from autograder.course.config import load_course
from autograder.course.service_policy import MailSettings
from autograder.core.points import fmt
from autograder.course.roster import Member
from autograder.service import db, mail, marks, people, reviews, tables
from autograder.service import queue as Q
from autograder.service.worker import verdict_mail
from autograder.course.written import answer_sha

ROOT = Path(__file__).resolve().parents[2]
COURSE = load_course(ROOT / "course.yml")
QKV = COURSE.assignment("02_qkv_attention")
ANSWER = "Var(q.k) grows with d_k, so the softmax saturates."
HIDDEN = "HIDDEN-MESSAGE: the reference's value was 0.4242"
PUBLIC = "PUBLIC-MESSAGE: the shape is wrong"
#: ada's result: 2.2 lost its points, the rest full; 2.Q1 waiting for a person.
EXERCISE_POINTS = {e.id: 0.0 if e.id == "2.2" else float(e.points) for e in QKV.exercises}
PATIENCE = 60.0


class Inbox:
    """aiosmtpd's handler: every message the server accepted, parsed."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.logins: list[tuple[str, str]] = []

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), msg))
        return "250 OK"

    def authenticate(self, _server: Any, _session: Any, _envelope: Any, mechanism: str, data: Any) -> AuthResult:
        if isinstance(data, LoginPassword):
            self.logins.append((data.login.decode(), data.password.decode()))
            return AuthResult(success=data.password == b"s3cret-pw")
        return AuthResult(success=False)


class Server:
    """A local SMTP server on one port, stopped and started again at will."""

    def __init__(self, **params: Any) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.inbox = Inbox()
        self.params = params
        self.controller: Controller | None = None

    def start(self) -> None:
        extra = {"authenticator": self.inbox.authenticate, "auth_require_tls": False} if self.params else {}
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port, **extra)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp():
    server = Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def engine(tmp_path):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    yield engine
    engine.dispose()


def course_mailing(server: Server, events=("verdict", "hand_grade", "review_answer"), **more: Any):
    """COURSE with service.email sending to ``server`` (and service.public_url set)."""
    settings = MailSettings.model_validate({"host": "127.0.0.1", "port": server.port, "tls": "none",
                                            "sender": "Attention course <grader@example.edu>",
                                            "events": list(events), **more})
    service = COURSE.service.model_copy(update={"email": settings, "public_url": "https://grader.example.edu"})
    return COURSE.model_copy(update={"service": service})


def enrol(engine, *students: str, email_of=lambda s: f"{s}@example.edu") -> None:
    people.import_members(engine, [Member(student=s, email=email_of(s)) for s in students], by="test")


def graded(engine, course, student: str) -> int:
    """A submission of 02 graded as a worker records it (the worker's hook queues its mail): its number."""
    data = json.dumps(make_samples.submission(QKV, solved="all")).encode()
    sub, job = Q.store(engine, student=student, assignment=QKV.id, filename="a.ipynb", data=data)
    with engine.connect() as conn:
        sha = conn.execute(select(tables.Submission.sha256).where(tables.Submission.id == sub)).scalar_one()
    exercises = [{"exercise": e.id, "function": e.function, "points": EXERCISE_POINTS[e.id],
                  "max_points": float(e.points), "status": "passed" if EXERCISE_POINTS[e.id] else "failed",
                  "checks": [{"check": "c1", "audience": "hidden", "title": "hidden check", "passed": False,
                              "message": HIDDEN},
                             {"check": "c2", "audience": "public", "title": "public check", "passed": False,
                              "message": PUBLIC}]} for e in QKV.exercises]
    result = {"student": student, "assignment": QKV.id, "sha256": sha, "status": "graded",
              "points": sum(EXERCISE_POINTS.values()), "raw_points": sum(EXERCISE_POINTS.values()),
              "max_points": QKV.points, "exercises": exercises,
              "questions": [{"question": "2.Q1", "max_points": 2.0, "points": None, "status": "ungraded",
                             "answer": ANSWER, "sha256": answer_sha(ANSWER), "answered": True}]}
    claimed = Q.claim(engine, "w", 60)
    assert claimed.job == job
    assert Q.complete(engine, job, "w", result, verdict_mail(course, claimed)) == "graded"
    return sub


def outbox(engine) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(select(tables.MailOut).order_by(tables.MailOut.id)).all()


def subjects(server: Server) -> list[str]:
    return [str(msg["Subject"]) for _to, msg in server.inbox.messages]


def test_a_first_verdict_mails_the_student_once_with_their_pages_words(service_engine, smtp):
    engine, course = service_engine, course_mailing(smtp)
    enrol(engine, "ada")
    sub = graded(engine, course, "ada")
    (row,) = outbox(engine)
    assert (row.kind, row.student, row.state, row.ref) == ("verdict", "ada", "pending", sub)
    done = mail.send(engine, course)
    assert (done.sent, done.failed, done.skipped) == (1, 0, 0)
    ((to, msg),) = smtp.inbox.messages
    assert to == ["ada@example.edu"] and msg["To"] == "ada@example.edu"
    assert msg["From"] == "Attention course <grader@example.edu>"
    title = QKV.title_in("zh")
    assert msg["Subject"] == f"{COURSE.name}：作业 {title} 的提交 {sub} 已评分"
    body = msg.get_content()
    # The score as the page shows it (the written answer's 2 points waiting, said beside it), the link to the page.
    points, most = sum(EXERCISE_POINTS.values()), QKV.points + QKV.manual_points
    assert f"得分：{fmt(points)} / {fmt(most)}" in body
    assert f"https://grader.example.edu/me#submission-{sub}" in body
    # No check's message, hidden or public; nothing but the page's words.
    assert HIDDEN not in body and PUBLIC not in body and "hidden check" not in body
    assert outbox(engine)[0].state == "sent"
    # Sent once: the next round finds nothing; a regrade of the same submission queues no second mail.
    assert mail.send(engine, course, due_only=False).sent == 0
    (job,) = Q.requeue(engine, [sub])
    claimed = Q.claim(engine, "w2", 60)
    assert Q.complete(engine, job, "w2", {"points": 1, "max_points": 8, "status": "graded"},
                      verdict_mail(course, claimed)) == "regrade"
    assert len(outbox(engine)) == 1 and len(smtp.inbox.messages) == 1


def test_a_hand_grade_and_a_review_answer_each_send_one_mail(engine, smtp):
    course = course_mailing(smtp, events=("hand_grade", "review_answer"))
    enrol(engine, "ada")
    graded(engine, course, "ada")
    assert outbox(engine) == []                    # (verdict mail is not among the events)

    def save(version: int, rubric: list[str]) -> Any:
        return marks.save_mark(engine, course, student="ada", assignment=QKV.id, question="2.Q1",
                               answer_sha=answer_sha(ANSWER), rubric=rubric, comment="why the variance matters",
                               who="T. A.", version=version, also=mail.on_mark(course))

    first = save(0, [])
    again = save(first.version, [QKV.question("2.Q1").rubric[0].id])     # corrected before its mail went: one mail
    (row,) = outbox(engine)
    assert (row.kind, row.item, row.ref) == ("hand_grade", "2.Q1", again.id)
    assert mail.send(engine, course).sent == 1
    assert subjects(smtp) == [f"{COURSE.name}：作业 {QKV.title_in('zh')} 的书面题 2.Q1 已评分"]

    # A review declined, then one accepted (its new mark saved by reviews: no second hand-grade mail).
    asked = reviews.ask(engine, course, "ada", QKV.id, "2.2", "my scores look right to me")
    reviews.answer(engine, course, asked.id, "T. A.", False, None, "the shape is wrong", asked.version)
    written = reviews.ask(engine, course, "ada", QKV.id, "2.Q1", "I did say why")
    reviews.answer(engine, course, written.id, "T. A.", True, 2.0, "yes, you did", written.version)
    assert [r.kind for r in outbox(engine)] == ["hand_grade", "review_answer", "review_answer"]
    assert mail.send(engine, course).sent == 2
    declined, accepted = (msg.get_content() for _to, msg in smtp.inbox.messages[1:])
    assert "2.2" in declined and "未被接受" in declined and "https://grader.example.edu/me" in declined
    assert "2.Q1" in accepted and "已被接受" in accepted and f"改为 {fmt(2.0)}" in accepted
    assert len(smtp.inbox.messages) == 3


def test_no_mail_when_course_yml_has_none_or_not_of_that_event(engine, smtp):
    enrol(engine, "ada", "ben")
    graded(engine, COURSE, "ada")                                     # no service.email at all
    marks.save_mark(engine, COURSE, student="ada", assignment=QKV.id, question="2.Q1", answer_sha=answer_sha(ANSWER),
                    rubric=[], comment="", who="T. A.", version=0, also=mail.on_mark(COURSE))
    assert outbox(engine) == [] and mail.send(engine, COURSE, due_only=False).sent == 0
    only_verdicts = course_mailing(smtp, events=("verdict",))
    marks.save_mark(engine, only_verdicts, student="ada", assignment=QKV.id, question="2.Q1",
                    answer_sha=answer_sha(ANSWER), rubric=[], comment="again", who="T. A.", version=1,
                    also=mail.on_mark(only_verdicts))
    none = course_mailing(smtp, events=())
    graded(engine, none, "ben")
    assert outbox(engine) == [] and smtp.inbox.messages == []


def test_a_student_without_an_address_gets_none_and_the_log_says_so_once(engine, smtp, caplog, monkeypatch):
    monkeypatch.setattr(mail, "_told", set())
    course = course_mailing(smtp)
    enrol(engine, "ada")
    enrol(engine, "ben", email_of=lambda s: "")                       # on the roster, no address
    enrol(engine, "eve", email_of=lambda s: "eve at example dot edu")  # something that is no address
    for student in ("ben", "ben", "cal", "eve", "ada"):               # cal: not on the roster at all
        graded(engine, course, student)
    with caplog.at_level(logging.WARNING, logger=mail.LOG.name):
        done = mail.send(engine, course)
    assert (done.sent, done.skipped) == (1, 4)
    assert [to for to, _msg in smtp.inbox.messages] == [["ada@example.edu"]]
    assert [r.state for r in outbox(engine)] == ["skipped", "skipped", "skipped", "skipped", "sent"]
    said = [r.getMessage() for r in caplog.records if r.name == mail.LOG.name]
    assert sorted(s.split()[1] for s in said) == ["ben", "cal", "eve"], said      # once per student


def test_a_server_that_refuses_leaves_the_mail_pending_and_it_goes_once_when_it_is_back(service_engine, smtp):
    engine, course = service_engine, course_mailing(smtp)
    enrol(engine, "ada", "ben")
    graded(engine, course, "ada")
    graded(engine, course, "ben")
    smtp.stop()
    done = mail.send(engine, course)
    assert (done.sent, done.failed) == (0, 1) and "Connection" in done.errors[0]
    first, second = outbox(engine)
    assert (first.state, first.attempts, first.held_until) == ("pending", 1, None)
    assert (second.state, second.attempts) == ("pending", 0)     # the round stopped at the server's refusal
    assert first.next_try_at > first.created_at                   # backed off
    smtp.start()
    later = first.next_try_at + dt.timedelta(seconds=1)
    done = mail.send(engine, course, now=later)
    assert (done.sent, done.failed) == (2, 0)
    assert mail.send(engine, course, now=later + dt.timedelta(days=1), due_only=False).sent == 0
    assert sorted(to[0] for to, _msg in smtp.inbox.messages) == ["ada@example.edu", "ben@example.edu"]
    assert [r.state for r in outbox(engine)] == ["sent", "sent"]


def test_a_recipient_refused_for_good_fails_that_mail_only(engine, smtp):
    course = course_mailing(smtp)
    enrol(engine, "ada", "ben")
    graded(engine, course, "ada")
    graded(engine, course, "ben")

    async def refuse_ada(_server: Any, _session: Any, envelope: Any, address: str, _options: Any) -> str:
        if address.startswith("ada@"):
            return "550 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    smtp.inbox.handle_RCPT = refuse_ada
    done = mail.send(engine, course)
    assert (done.sent, done.refused, done.failed) == (1, 1, 0)
    assert [(r.state, "550" in r.error) for r in outbox(engine)] == [("failed", True), ("sent", False)]
    assert mail.send(engine, course, due_only=False).sent == 0          # never tried again


def test_two_senders_at_once_send_each_mail_once(service_engine, smtp):
    engine, course = service_engine, course_mailing(smtp)
    students = [f"s{i:02d}" for i in range(12)]
    enrol(engine, *students)
    for s in students:
        graded(engine, course, s)
    start = threading.Barrier(2)
    results: list[mail.Sent] = []

    def sender() -> None:
        start.wait()
        results.append(mail.send(engine, course))

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE)
    assert len(results) == 2 and sum(r.sent for r in results) == 12 and sum(r.failed for r in results) == 0
    got = sorted(to[0] for to, _msg in smtp.inbox.messages)
    assert got == sorted(f"{s}@example.edu" for s in students)          # each once
    assert len({msg["Message-ID"] for _to, msg in smtp.inbox.messages}) == 12
    assert {r.state for r in outbox(engine)} == {"sent"}


def test_a_held_row_is_left_to_its_sender_until_its_hold_runs_out(engine, smtp):
    course = course_mailing(smtp)
    enrol(engine, "ada")
    graded(engine, course, "ada")
    now = tables.utcnow()
    with db.writing(engine).begin() as conn:      # another sender holds it (its lease runs until now + LEASE)
        conn.execute(update(tables.MailOut).values(held_until=now + dt.timedelta(seconds=mail.LEASE)))
    assert mail.send(engine, course, now=now, due_only=False).sent == 0 and smtp.inbox.messages == []
    # That sender died: past its lease, the next round sends it.
    assert mail.send(engine, course, now=now + dt.timedelta(seconds=mail.LEASE + 1)).sent == 1


def test_the_login_uses_the_password_from_the_environment_variable_course_yml_names(engine, monkeypatch):
    server = Server(auth=True)
    server.start()
    try:
        course = course_mailing(server, username="grader", password_env="AG_TEST_SMTP_PASSWORD")
        enrol(engine, "ada")
        graded(engine, course, "ada")
        monkeypatch.delenv("AG_TEST_SMTP_PASSWORD", raising=False)
        done = mail.send(engine, course)
        assert done.failed == 1 and "AG_TEST_SMTP_PASSWORD" in done.errors[0]
        monkeypatch.setenv("AG_TEST_SMTP_PASSWORD", "s3cret-pw")
        assert mail.send(engine, course, due_only=False).sent == 1
        assert server.inbox.logins == [("grader", "s3cret-pw")] and len(server.inbox.messages) == 1
        assert all("s3cret-pw" not in r.error for r in outbox(engine))
    finally:
        server.stop()


def test_the_service_loop_sends_by_itself(engine, smtp):
    course = course_mailing(smtp)
    enrol(engine, "ada")
    graded(engine, course, "ada")
    loop = mail.Mailer(engine, course, every=0.02)
    loop.start()
    try:
        deadline = time.monotonic() + PATIENCE
        while not smtp.inbox.messages:
            assert time.monotonic() < deadline, "the loop sent nothing"
            time.sleep(0.02)
    finally:
        loop.stop()
    assert len(smtp.inbox.messages) == 1 and outbox(engine)[0].state == "sent"


def test_serve_mail_send_sends_what_waits(tmp_path, smtp, capsys, monkeypatch):
    # (--course sets AUTOGRADER_COURSE in this process: given back after the test, for the tests after it)
    monkeypatch.setenv("AUTOGRADER_COURSE", str(tmp_path))
    text = (ROOT / "course.yml").read_text(encoding="utf-8")
    (tmp_path / "course.yml").write_text(text + f"\nservice:\n  email:\n    host: 127.0.0.1\n    port: {smtp.port}\n"
                                         "    tls: none\n    sender: grader@example.edu\n", encoding="utf-8")
    database = tmp_path / "service.db"
    course = load_course(tmp_path / "course.yml")
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    enrol(engine, "ada")
    graded(engine, course, "ada")
    engine.dispose()
    assert main(["--course", str(tmp_path), "serve", "--database", str(database), "mail", "send"]) == 0
    assert "mail: 1 sent" in capsys.readouterr().out
    ((to, msg),) = smtp.inbox.messages
    assert to == ["ada@example.edu"] and "/me" in msg.get_content()      # (no public_url: the path, said)


@pytest.mark.parametrize(("email_section", "words"), [
    ({"host": "smtp.example.edu", "sender": "grader@example.edu", "tls": "tls"}, "service.email.tls: tls is none"),
    ({"host": "smtp.example.edu", "sender": "nobody"}, "service.email.sender: sender is an e-mail address"),
    ({"host": "smtp.example.edu", "sender": "g@example.edu", "events": ["grade"]},
     "service.email.events: events lists 'grade'"),
    ({"host": "smtp.example.edu", "sender": "g@example.edu", "username": "g"},
     "service.email: username and password_env go together"),
    ({"host": "smtp.example.edu", "sender": "g@example.edu", "username": "g", "password_env": "hunter2!"},
     "service.email.password_env: password_env is the name of an environment variable"),
    ({"host": "smtp.example.edu", "sender": "g@example.edu", "prot": 25}, "service.email.prot: unknown key"),
    ({"sender": "g@example.edu"}, "service.email.host: missing"),
])
def test_course_yml_email_settings_are_checked_field_by_field(email_section, words):
    from autograder.course.config import parse_course
    from autograder.core.errors import ConfigError
    import yaml

    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    data["service"] = {"email": email_section}
    with pytest.raises(ConfigError) as caught:
        parse_course(data)
    assert words in str(caught.value)
    assert "hunter2" not in str(caught.value)       # (a password written there by mistake is not said back)


def test_mail_is_off_by_default_and_the_port_follows_tls():
    assert COURSE.service.email is None
    ports = [MailSettings(host="h", sender="g@example.edu", tls=t).port_or_default for t in ("none", "starttls", "ssl")]
    assert ports == [25, 587, 465]
