"""``autograder serve``: the grading service for the course found as for every command.

``autograder serve`` starts the worker processes (as many as the machine has CPUs, ``--workers``),
then the HTTP API on 127.0.0.1 (``--host``, ``--port``); the database is one SQLite file in the
course's ``service-data/`` folder unless ``--database`` names another (a PostgreSQL URL for a
deployment). ``autograder serve roster ROSTER.csv`` imports the class list and issues a token to each student who
has none, written to ``service-data/tokens.csv`` (``-o TOKENS.csv`` elsewhere; ``--list``, ``--remove ID``);
``serve token`` issues, lists, revokes and re-issues;
``autograder serve export -o OUT`` writes the files ``autograder grade`` writes from its results;
``autograder serve regrade [--assignment A]`` queues every submission again (after a check changed);
``autograder serve token --instructor NAME`` (``--ta NAME``) one for the staff; ``serve mail send`` the e-mail to
students still waiting (:mod:`autograder.service.mail`); ``serve lti register|sync|roster``
the LMS as an LTI 1.3 platform (:mod:`autograder.service.lti.command`). Put TLS in front of it (a
reverse proxy, or JupyterHub's proxy): it serves plain HTTP.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from autograder.course.config import Course


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", metavar="URL", default=None,
                        help="a SQLite file or postgresql+psycopg://... (default: service-data/service.db in the "
                             "course's folder)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default 8765; as a JupyterHub service, the "
                                                                "port of its JUPYTERHUB_SERVICE_URL)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="grading worker processes to start (default: one per CPU; 0: only the API)")
    roster = sub.add_parser("roster", help=(
        "import the class list (student[,name,email,section,canvas_id,moodle_id_number], or Canvas' or Moodle's "
        "export as downloaded: a student there is updated, a new one added and given a token), or list it, or "
        "remove a student (their tokens revoked, their submissions kept)"))
    roster.add_argument("roster", type=Path, metavar="ROSTER.csv", nargs="?", help="the CSV to import")
    roster.add_argument("-o", "--out", type=Path, metavar="TOKENS.csv",
                        help="where to write student,name,token of the tokens issued (hand each student their row; "
                             "default: service-data/tokens.csv in the course's folder, or tokens-2.csv, ... there "
                             "when it exists: an earlier file is never overwritten)")
    roster.add_argument("--list", action="store_true", help="print the roster (a CSV, with each student's tokens)")
    roster.add_argument("--remove", metavar="ID", help="take a student off the roster and revoke their tokens")
    regrade = sub.add_parser("regrade", help="grade every submission (of an assignment) again, e.g. after a "
                                             "check changed: a new job for each; their results are replaced")
    regrade.add_argument("--assignment", metavar="A", help="only this assignment's submissions")
    export = sub.add_parser("export", help="write OUT from the service's results, as autograder grade writes it")
    export.add_argument("-o", "--out", type=Path, required=True, metavar="OUT")
    export.add_argument("--nbgrader", type=Path, metavar="COURSE",
                        help="also record the scores in this nbgrader course's gradebook.db (as grade --nbgrader)")
    token = sub.add_parser("token", help="issue a token, list them, revoke one, or issue one again")
    token.add_argument("--instructor", metavar="NAME", help="an instructor's token (everything, the roster and "
                                                            "tokens too)")
    token.add_argument("--ta", metavar="NAME", help="a TA's token (reads everything, grades again, grants "
                                                    "extensions; neither the roster nor tokens)")
    token.add_argument("--student", metavar="ID", help="a student's token (only a student on the roster)")
    token.add_argument("--expires", metavar="WHEN", help="the token stops then: a time (2027-01-31 23:59, in the "
                                                        "course's zone) or a duration from now (30d, 12h)")
    token.add_argument("--list", action="store_true", help="list the tokens (never their secret): number, role, "
                                                           "holder, state")
    token.add_argument("--revoke", metavar="N|ID", help="revoke token number N (from --list), or every live token "
                                                        "of ID; it stops at once, pages signed in with it too")
    token.add_argument("--reissue", metavar="ID", help="revoke ID's live tokens and print a new one with the same "
                                                       "role")
    from autograder.service.lti.command import add_lti

    lti = add_lti(sub)
    mail = sub.add_parser("mail", help=(
        "e-mail to students (course.yml's service.email): send now every mail still waiting, those waiting to be "
        "tried again too (autograder serve sends them by itself every few seconds)"))
    mail.add_argument("mail_action", choices=("send",), metavar="send", help="send the waiting mail now")
    for action in (roster, regrade, export, token, lti, mail): # `serve ACTION --database URL` as well as before ACTION
        action.add_argument("--database", metavar="URL", default=argparse.SUPPRESS,
                            help="the service's database (as before the action)")


def data_folder(course: Course) -> Path:
    """The service's own folder, ``service-data/`` in the course's folder (0700, ignored by git): its SQLite
    database and the class's secrets (the tokens, the roster's names and e-mails) go there, never into the
    checkout beside the course's files."""
    from autograder.service.db import private_folder

    return private_folder(course.root / "service-data")


def database_url(args: argparse.Namespace, course: Course) -> str:
    if args.database:
        return str(args.database)
    return str(data_folder(course) / "service.db")


def _new_tokens_file(course: Course) -> Path:
    """``service-data/tokens.csv``, or the first of tokens-2.csv, tokens-3.csv, ... not there yet, made empty and
    0600 to claim it: an earlier file holds tokens that exist nowhere else (the database keeps their digests)."""
    folder = data_folder(course)
    n = 1
    while True:
        path = folder / ("tokens.csv" if n == 1 else f"tokens-{n}.csv")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return path
        except FileExistsError:
            n += 1


def run(args: argparse.Namespace) -> int:
    from autograder.course.config import load_course
    from autograder.service.db import engine_for, upgrade

    course = load_course()
    url = database_url(args, course)
    engine = engine_for(url)
    upgrade(engine)
    if args.action == "roster":
        return _roster(args, engine, course)
    if args.action == "regrade":
        from sqlalchemy import select

        from autograder.service import queue as Q
        from autograder.service.tables import Submission

        if args.assignment is not None:
            course.assignment(args.assignment)        # an unknown one: the usual error, with the known ones
        query = select(Submission.id).order_by(Submission.id)
        if args.assignment is not None:
            query = query.where(Submission.assignment == args.assignment)
        with engine.connect() as conn:
            ids = list(conn.execute(query).scalars())
        jobs = Q.requeue(engine, ids, behind=course.service.queued_per_student or 0)    # behind new uploads
        from autograder.service import audit

        audit.note(engine, audit.COMMAND_LINE, "regrade", detail=f"{len(jobs)} submission(s)"
                   + (f": assignment={args.assignment}" if args.assignment else ""))
        print(f"queued {len(jobs)} submissions to grade again; the workers replace each result as they go")
        return 0
    if args.action == "export":
        from autograder.service.export import export

        written = export(engine, course, args.out, nbgrader=args.nbgrader)
        which = "best" if course.service.counts == "best" else "latest"
        print(f"exported {len(written)} results (the {which} graded submission of each student and assignment) "
              f"to {args.out}: grades.csv, results/, feedback/, submitted/, report.html, canvas.csv, moodle.csv, "
              "moodle-grades.csv, lms-skipped.csv, score-history.csv")
        return 0
    if args.action == "token":
        return _token(args, engine, course)
    if args.action == "lti":
        from autograder.service.lti.command import run_lti

        return run_lti(args, engine, course)
    if args.action == "mail":
        return _mail(engine, course)
    return _serve(args, course, url, engine)


def _roster(args: argparse.Namespace, engine: Any, course: Course) -> int:
    from autograder.core.errors import AutograderError
    from autograder.service import people, tokens

    chosen = [bool(args.roster), args.list, bool(args.remove)]
    if sum(chosen) != 1:
        raise AutograderError("serve roster: give ROSTER.csv to import, or --list, or --remove ID")
    if args.list:
        from autograder.core.text import csv_rows

        held: dict[str, list[str]] = {}
        for t in tokens.listing(engine):
            held.setdefault(t.who, []).append(f"{t.id}:{t.state}")
        sys.stdout.write(csv_rows([[*people.COLUMNS, "tokens"]],
                                  [[*row, " ".join(held.get(row.student, []))] for row in people.people(engine)]))
        return 0
    if args.remove:
        gone, revoked = tokens.remove_student(engine, args.remove, by="cli")
        if not gone:
            raise AutograderError(f"serve roster --remove {args.remove}: not on the roster",
                                  hint="autograder serve roster --list shows who is")
        print(f"removed {args.remove} from the roster; {revoked} token(s) revoked; their submissions stay")
        return 0
    from autograder.course.roster import read_roster

    members = read_roster(args.roster).members          # read whole first: a bad row changes nothing
    held_now = tokens.holders(engine)
    new = [m.student for m in members if m.student not in held_now]
    out: Path | None = args.out
    if new and out is None:
        out = _new_tokens_file(course)      # claimed before any token is issued: none is left without its file
    try:
        rows = tokens.enrol(engine, members, by="cli", source=args.roster.name)
    except BaseException:
        if out is not None and args.out is None:
            out.unlink(missing_ok=True)
        raise
    if out is not None:
        from autograder.core.atomic import atomic_write_bytes

        atomic_write_bytes(out, tokens.tokens_csv(rows).encode("utf-8"), mode=0o600)    # 0600 from the start
    print(f"roster: {len(members)} students read; issued {len(rows)} tokens"
          + (f"; wrote {out} (keep it private: each row is a student's key)" if out is not None else "")
          + "; the students who had a token keep it")
    return 0


def _mail(engine: Any, course: Course) -> int:
    from autograder.core.errors import AutograderError
    from autograder.service import mail

    if mail.settings_of(course) is None:
        raise AutograderError("serve mail send: course.yml sends no mail (it has no service.email)",
                              hint="see docs/admin/service.md, E-mail to students")
    done = mail.send(engine, course, due_only=False)
    print(f"mail: {done.sent} sent, {done.skipped} skipped (no address, or nothing left to tell of), {done.refused} "
          f"refused for good, {done.failed} to try again" + (f" ({done.errors[0]})" if done.errors else "")
          + (f", {done.held} being sent by another sender" if done.held else ""))
    return 1 if done.failed else 0


def _token(args: argparse.Namespace, engine: Any, course: Course) -> int:
    from autograder.course.clock import time_or_after
    from autograder.core.errors import AutograderError
    from autograder.service import tokens
    from autograder.service.tables import utcnow

    issue = [(role, who) for role, who in (("instructor", args.instructor), ("ta", args.ta), ("student", args.student))
             if who]
    if len(issue) + bool(args.list) + bool(args.revoke) + bool(args.reissue) != 1:
        raise AutograderError("serve token: give one of --instructor NAME, --ta NAME, --student ID, --list, "
                              "--revoke N|ID, --reissue ID")
    expires = time_or_after(args.expires, utcnow(), where="--expires", default_tz=course.timezone) \
        if args.expires else None
    if args.list:
        print("number  role        state    holder  (issued, by; expires)")
        for t in tokens.listing(engine):
            print(f"{t.id:<7} {t.role:<11} {t.state:<8} {t.who}  ({t.created_at:%Y-%m-%d %H:%M}Z, {t.issued_by or '-'}"
                  + (f"; expires {t.expires_at:%Y-%m-%d %H:%M}Z" if t.expires_at else "") + ")")
        return 0
    if args.revoke:
        number = args.revoke.isascii() and args.revoke.isdigit() and len(args.revoke) <= 18   # (not "²", not 2**70)
        n = tokens.revoke(engine, token_id=int(args.revoke), by="cli") if number else 0
        if not number or n == 0:
            n = tokens.revoke(engine, who=args.revoke, by="cli") or n
        if n == 0:
            raise AutograderError(f"serve token --revoke {args.revoke}: no live token with that number or holder",
                                  hint="autograder serve token --list")
        print(f"revoked {n} token(s): they stop at once")
        return 0
    if args.reissue:
        role, token = tokens.reissue(engine, args.reissue, by="cli", expires=expires)
        print(token)
        print(f"({role} token of {args.reissue}; the old one(s) stopped)", file=sys.stderr)
        return 0
    role, who = issue[0]
    print(tokens.issue(engine, who, role=role, expires=expires))
    return 0


def _serve(args: argparse.Namespace, course: Course, url: str, engine: Any) -> int:
    import uvicorn

    from autograder.service.app import create_app
    from autograder.service.server import MAX_CONNECTIONS, bind, raise_open_files, server_config

    host, port = args.host, args.port or 8765
    from autograder.service.hub import hub_from_env

    hub = hub_from_env(course)          # None unless started as a JupyterHub service
    if hub is not None and args.port is None and hub.port is not None:
        host, port = hub.host or host, hub.port
    listening = bind(host, port)        # a port in use: one clear error now, before any worker starts
    # The workers first, while this process has no thread: they are processes of their own. Each stops after its
    # job in hand when this process ends, however it ends (--parent: they watch it).
    workers = Workers(course, url, engine, max(0, args.workers))
    # SIGTERM and SIGINT end this process through the finally below, whatever the web server does with the signal
    # (uvicorn handles it, shuts down, then raises it again: without a handler of ours SIGTERM would end the
    # process there, and SIGINT print a traceback).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    from autograder.course.files import course_file
    from autograder.service.live import CourseWatch, LiveCourse

    from autograder.service import history

    def changed(new: Course) -> None:
        workers.restart(new)
        history.settle_all(engine, new)         # a changed due date or late policy moves counted scores

    live = LiveCourse(course)           # course.yml read again when it changes (validated first)
    watch = CourseWatch(live, course.root / course_file().name, changed)
    history.settle_all(engine, course)  # course.yml may have changed while the service was down
    from autograder.service.lti.outbox import Passback

    # The live course stands in for a Course: every attribute read is the current course's.
    app: Any = create_app(engine, cast("Course", live), hub=hub)
    passback = Passback(app.state.lti, cast("Course", live))     # LTI: each changed score to the LMS
    from autograder.service.mail import Mailer

    mailer = Mailer(engine, cast("Course", live))       # e-mail to students, when course.yml turns it on
    try:
        workers.watch()
        watch.start()
        passback.start()
        mailer.start()
        if hub is not None:
            # The Hub's proxy passes its whole path (/services/NAME/...): the app is mounted under that prefix.
            from starlette.applications import Starlette
            from starlette.routing import Mount

            app = Starlette(routes=[Mount(hub.prefix.rstrip("/"), app=app)])
        opened = raise_open_files()
        config = server_config(app, host, port, max_connections=max(64, min(MAX_CONNECTIONS, opened - 256)))
        print(f"serving {course.name} on http://{host}:{port}{hub.prefix if hub else '/'} ({workers.count} workers; "
              f"database {url})", flush=True)
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        passback.stop()
        mailer.stop()
        watch.stop()
        workers.stop()
    return 0


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _ended(code: int) -> str:
    """How a process ended, from its return code (a signal Python has no name for is named by its number)."""
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:              # (a real-time signal: SIGRTMIN+3 is no member of signal.Signals)
        return f"killed by signal {-code}"


class Workers:
    """``autograder serve``'s grading processes: started before the server has any thread, watched by a thread of
    its own (a worker that exits while the service runs, killed or crashed, is named on stderr, its job is queued
    again at once instead of waiting for its lease, and a new worker takes its place; one that keeps dying at
    start is started again less and less often), and drained when the service stops."""

    def __init__(self, course: Course, url: str, engine: Any, count: int):
        self.course, self.url, self.engine, self.count = course, url, engine, count
        self.procs = [self._start() for _ in range(count)]
        self._started = [time.monotonic()] * count
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._restarting: set[int] = set()      # pids told to stop for a new course.yml (not a crash)

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "autograder", "--course", str(self.course.root), "worker",
                                 "--database", self.url, "--parent", str(os.getpid())])

    def watch(self) -> None:
        if self.count:
            self._thread = threading.Thread(target=self._watch, name="worker-watch", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        from autograder.service.loops import Rounds

        pause = [1.0] * self.count
        # A look that raises (a worker that cannot be started now: no memory, no process left) is logged once per
        # kind, and the next look tries again: the watch itself never stops while the service runs.
        rounds = Rounds("serve: the watch over the workers")
        while not self._stopping.wait(1.0):
            for i in range(len(self.procs)):
                if self._stopping.is_set():
                    return
                rounds.run(self._look, i, pause)

    def _look(self, i: int, pause: list[float]) -> None:
        """Worker ``i`` looked at: one that stopped is named and replaced (see the class's text)."""
        from autograder.service import queue as Q

        proc = self.procs[i]
        code = proc.poll()
        if code is None or self._stopping.is_set():
            return
        lived = time.monotonic() - self._started[i]
        if proc.pid in self._restarting:    # it finished its job and stopped for the new course.yml
            self.procs[i], self._started[i] = self._start(), time.monotonic()
            self._restarting.discard(proc.pid)      # (only now: a start that failed is tried again at the next look)
            return
        pause[i] = 1.0 if lived > 60 else min(60.0, pause[i] * 2)
        try:
            freed = Q.release(self.engine, f"{socket.gethostname()}:{proc.pid}")
        except Exception:  # noqa: BLE001 - the database is away: the job's lease hands it on later
            freed = 0
        print(f"serve: worker {proc.pid} stopped ({_ended(code)}) after {lived:.0f} s; "
              f"{freed} job(s) queued again; a new worker starts"
              + (f" in {pause[i]:.0f} s" if pause[i] > 1 else ""), file=sys.stderr, flush=True)
        if self._stopping.wait(pause[i] - 1.0 if pause[i] > 1 else 0):
            return
        self._started[i] = time.monotonic()     # first: a start that fails is tried again after a longer pause
        self.procs[i] = self._start()

    def restart(self, _course: Course | None = None) -> None:
        """Each worker finishes its job in hand and a new one takes its place (course.yml changed)."""
        for w in self.procs:
            if w.poll() is None:
                self._restarting.add(w.pid)
                w.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """Each worker finishes the job in hand, then stops (a drain); one still grading after the submission's
        whole budget is killed (its lease then hands the job to the next worker)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for w in self.procs:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in self.procs:
            try:
                w.wait(timeout=float(self.course.limits.submission_seconds) + 30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
