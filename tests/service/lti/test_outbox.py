"""Issue 65, item 7: the passback's outbox rows are claimed before they are sent, and only the claimant makes a line
item, against the simulated LMS (tests/lti_platform.py), on SQLite and on PostgreSQL.

Two senders at once (the service's passback round in a thread of its own, the dashboard's "send now" while that round
is in the middle of a call to the platform): the platform receives each score once and one line item (gradebook
column) per assignment. A sender that dies mid-send holds its row, or the line item it was making, only until its
lease runs out: the next round then sends it, once.
"""
from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from lti_platform import INSTRUCTOR, LEARNER, launch, tool_with_lms
from late_class import LATE_COURSE, QKV, RNN, grade, regrade
from pages import browser, csrf_of
from autograder.service import lti_tables, tables
from autograder.service.lti import outbox

STUDENTS = 3
ROUND = "passback-round"


@pytest.fixture
def lti(service_database):
    """The service (LATE_COURSE) on a fresh SQLite or PostgreSQL database and the simulated LMS, each on a server."""
    with tool_with_lms(service_database, LATE_COURSE, "test") as served:
        yield served


def _paused_after(monkeypatch, services: Any, method: str) -> tuple[threading.Event, threading.Event]:
    """``services.method`` as it is, except that its first call from the thread named ROUND, once the platform has
    answered, waits for ``go`` (having set ``inside``): that sender is then in the middle of its work."""
    inside, go = threading.Event(), threading.Event()
    real = getattr(services, method)

    def paused(*args: Any, **kwargs: Any) -> Any:
        answer = real(*args, **kwargs)
        if threading.current_thread().name == ROUND and not inside.is_set():
            inside.set()
            assert go.wait(120), "the test never let the round go on"
        return answer

    monkeypatch.setattr(services, method, paused)
    return inside, go


def _round_in_thread(tool: Any) -> tuple[threading.Thread, list[Any]]:
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(outbox.sync(tool, LATE_COURSE)), name=ROUND, daemon=True)
    thread.start()
    return thread, done


def _send_now(url: str, lms: Any) -> None:
    """The dashboard's "send now", pressed by the instructor (signed in by a launch)."""
    with browser(url) as prof:
        assert launch(prof, lms, lms.prepare(lms.claims("t1", [INSTRUCTOR], email="prof@uni.example"))
                      ).status_code == 303
        pressed = prof.post("/dashboard/lti/sync", data={"csrf": csrf_of(prof.get("/dashboard/lti").text)})
        assert pressed.status_code == 303, pressed.text


def _received(lms: Any) -> dict[tuple[str, str, Any], int]:
    """How many times the platform received each score: (line item, LMS user, points) -> count."""
    seen: dict[tuple[str, str, Any], int] = {}
    for item, score in lms.scores:
        key = (item, score["userId"], score.get("scoreGiven"))
        seen[key] = seen.get(key, 0) + 1
    return seen


def test_send_now_during_a_round_sends_each_score_once_and_makes_one_line_item_per_assignment(lti, monkeypatch):
    url, lms, engine, app = lti
    tool = app.state.lti
    subs = {}
    for n in range(STUDENTS):
        with browser(url) as client:
            assert launch(client, lms, lms.prepare(lms.claims(f"lms-{n}", [LEARNER], sourcedid=f"s{n}"))
                          ).status_code == 303
        grade(engine, f"s{n}", RNN, float(n + 1))
        subs[f"s{n}"] = grade(engine, f"s{n}", QKV, float(n + 2))
    assert lms.line_items == []                 # no deep link: the passback finds or makes each column itself

    # The round has asked the platform for the first assignment's line item and heard there is none; before it
    # makes one, "send now" is pressed.
    inside, go = _paused_after(monkeypatch, tool.services, "line_items")
    thread, done = _round_in_thread(tool)
    assert inside.wait(120), "the round never asked for a line item"
    _send_now(url, lms)
    go.set()
    thread.join(120)
    assert not thread.is_alive() and done and done[0].failed == 0, done
    monkeypatch.undo()
    assert done[0].held >= 1                    # the rows "send now" had sent: left to it, not sent again
    rest = outbox.sync(tool, LATE_COURSE)       # anything either sender left for a later round
    assert rest.failed == 0, rest.errors
    assert sorted(i["resourceId"] for i in lms.line_items) == sorted([RNN.id, QKV.id])
    received = _received(lms)
    assert len(received) == 2 * STUDENTS and set(received.values()) == {1}, received
    assert outbox.sync(tool, LATE_COURSE).sent == 0

    # A new score for each student; the round is paused just after the platform took its first one, before it wrote
    # down that it did: "send now" must not send that one again.
    for n in range(STUDENTS):
        regrade(engine, subs[f"s{n}"], f"s{n}", float(n + 7))
    inside, go = _paused_after(monkeypatch, tool.services, "score")
    thread, done = _round_in_thread(tool)
    assert inside.wait(120), "the round never sent a score"
    _send_now(url, lms)
    go.set()
    thread.join(120)
    assert not thread.is_alive() and done and done[0].failed == 0, done
    monkeypatch.undo()
    assert outbox.sync(tool, LATE_COURSE).failed == 0
    received = _received(lms)
    assert len(received) == 3 * STUDENTS and set(received.values()) == {1}, received
    assert len(lms.line_items) == 2
    for n in range(STUDENTS):
        assert lms.cell(QKV.id, f"lms-{n}") == float(n + 7)
    with engine.connect() as conn:
        states = [r.state for r in conn.execute(lti_tables.LtiScore.__table__.select())]
    assert "pending" not in states


def test_a_sender_that_died_mid_send_holds_its_row_and_line_item_only_until_the_lease_runs_out(lti, monkeypatch):
    url, lms, engine, app = lti
    tool = app.state.lti
    with browser(url) as client:
        assert launch(client, lms, lms.prepare(lms.claims("lms-a", [LEARNER], sourcedid="ada"))).status_code == 303
    grade(engine, "ada", RNN, 3.0)
    sub = grade(engine, "ada", QKV, 4.0)

    def dies(*_args: Any, **_kwargs: Any) -> Any:
        raise SystemExit(137)           # the sender's process ends here: nothing after this line of it runs

    # Dead while making the first assignment's line item: its row and the line item stay claimed.
    monkeypatch.setattr(tool.services, "find_or_create", dies)
    with pytest.raises(SystemExit):
        outbox.sync(tool, LATE_COURSE)
    monkeypatch.undo()
    now = tables.utcnow()
    first = outbox.sync(tool, LATE_COURSE, now=now)
    assert first.sent == 1 and [i["resourceId"] for i in lms.line_items] == [QKV.id]    # the other one, not RNN's
    assert outbox.sync(tool, LATE_COURSE, now=now + dt.timedelta(seconds=outbox.LEASE / 2)).sent == 0
    later = now + dt.timedelta(seconds=outbox.LEASE + 60)
    taken_over = outbox.sync(tool, LATE_COURSE, now=later)
    assert (taken_over.sent, taken_over.failed) == (1, 0), taken_over.errors
    assert sorted(i["resourceId"] for i in lms.line_items) == sorted([RNN.id, QKV.id])
    assert lms.cell(RNN.id, "lms-a") == 3.0

    # Dead in the middle of sending a score (the platform never took it): held until the lease runs out, then sent.
    regrade(engine, sub, "ada", 9.0)
    monkeypatch.setattr(tool.services, "score", dies)
    with pytest.raises(SystemExit):
        outbox.sync(tool, LATE_COURSE, now=later)
    monkeypatch.undo()
    assert outbox.sync(tool, LATE_COURSE, now=later).sent == 0
    assert outbox.sync(tool, LATE_COURSE, now=later + dt.timedelta(seconds=outbox.LEASE + 60)).sent == 1
    assert lms.cell(QKV.id, "lms-a") == 9.0
    column = {i["resourceId"]: i["id"] for i in lms.line_items}
    assert _received(lms) == {(column[RNN.id], "lms-a", 3.0): 1, (column[QKV.id], "lms-a", 4.0): 1,
                              (column[QKV.id], "lms-a", 9.0): 1}
