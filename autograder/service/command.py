"""``autograder serve``: the grading service for the course found as for every command.

``autograder serve`` starts the worker processes (as many as the machine has CPUs, ``--workers``),
then the HTTP API on 127.0.0.1 (``--host``, ``--port``); the database is one SQLite file in the
course's ``service-data/`` folder unless ``--database`` names another (a PostgreSQL URL for a
deployment). ``autograder serve roster ROSTER.csv -o TOKENS.csv`` issues a token per student;
``autograder serve export -o OUT`` writes the files ``autograder grade`` writes from its results;
``autograder serve regrade [--assignment A]`` queues every submission again (after a check changed);
``autograder serve token --instructor NAME`` one for an instructor or TA. Put TLS in front of it (a
reverse proxy, or JupyterHub's proxy): it serves plain HTTP.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


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
    roster = sub.add_parser("roster", help="issue a token per student of a roster CSV (student[,name])")
    roster.add_argument("roster", type=Path, metavar="ROSTER.csv")
    roster.add_argument("-o", "--out", type=Path, required=True, metavar="TOKENS.csv",
                        help="where to write student,name,token (hand each student their row)")
    regrade = sub.add_parser("regrade", help="grade every submission (of an assignment) again, e.g. after a "
                                             "check changed: a new job for each; their results are replaced")
    regrade.add_argument("--assignment", metavar="A", help="only this assignment's submissions")
    export = sub.add_parser("export", help="write OUT from the service's results, as autograder grade writes it")
    export.add_argument("-o", "--out", type=Path, required=True, metavar="OUT")
    export.add_argument("--nbgrader", type=Path, metavar="COURSE",
                        help="also record the scores in this nbgrader course's gradebook.db (as grade --nbgrader)")
    token = sub.add_parser("token", help="issue one token")
    token.add_argument("--instructor", metavar="NAME", help="an instructor's or TA's token (reads everything)")
    token.add_argument("--student", metavar="ID", help="a student's token")


def database_url(args: argparse.Namespace, course: Any) -> str:
    if args.database:
        return str(args.database)
    folder = course.root / "service-data"
    folder.mkdir(exist_ok=True)
    return str(folder / "service.db")


def run(args: argparse.Namespace) -> int:
    from autograder.config import load_course
    from autograder.errors import AutograderError
    from autograder.service import tokens
    from autograder.service.db import engine_for, upgrade

    course = load_course()
    url = database_url(args, course)
    engine = engine_for(url)
    upgrade(engine)
    if args.action == "roster":
        rows = tokens.import_roster(engine, args.roster)
        from autograder.atomic import atomic_write_text

        atomic_write_text(args.out, tokens.tokens_csv(rows))
        os.chmod(args.out, 0o600)
        print(f"issued {len(rows)} tokens; wrote {args.out} (keep it private: each row is a student's key)")
        return 0
    if args.action == "regrade":
        from sqlalchemy import select

        from autograder.service import queue as Q
        from autograder.service.db import Submission

        if args.assignment is not None:
            course.assignment(args.assignment)        # an unknown one: the usual error, with the known ones
        query = select(Submission.id).order_by(Submission.id)
        if args.assignment is not None:
            query = query.where(Submission.assignment == args.assignment)
        with engine.connect() as conn:
            ids = list(conn.execute(query).scalars())
        jobs = Q.requeue(engine, ids)
        print(f"queued {len(jobs)} submissions to grade again; the workers replace each result as they go")
        return 0
    if args.action == "export":
        from autograder.service.export import export

        written = export(engine, course, args.out, nbgrader=args.nbgrader)
        which = "best" if course.service.counts == "best" else "latest"
        print(f"exported {len(written)} results (the {which} graded submission of each student and assignment) "
              f"to {args.out}: grades.csv, results/, feedback/, submitted/, report.html, canvas.csv, moodle.csv")
        return 0
    if args.action == "token":
        if bool(args.instructor) == bool(args.student):
            raise AutograderError("serve token: give --instructor NAME or --student ID")
        role, who = ("instructor", args.instructor) if args.instructor else ("student", args.student)
        print(tokens.issue(engine, who, role=role))
        return 0
    return _serve(args, course, url, engine)


def _serve(args: argparse.Namespace, course: Any, url: str, engine: Any) -> int:
    import uvicorn

    from autograder.service.app import create_app

    # The workers first, while this process has no thread: they are processes of their own.
    workers = [subprocess.Popen([sys.executable, "-m", "autograder", "--course", str(course.root), "worker",
                                 "--database", url]) for _ in range(max(0, args.workers))]
    try:
        from autograder.service.hub import hub_from_env

        hub = hub_from_env(course)          # None unless started as a JupyterHub service
        app: Any = create_app(engine, course, hub=hub)
        host, port = args.host, args.port or 8765
        if hub is not None:
            # The Hub's proxy passes its whole path (/services/NAME/...): the app is mounted under that prefix.
            from starlette.applications import Starlette
            from starlette.routing import Mount

            app = Starlette(routes=[Mount(hub.prefix.rstrip("/"), app=app)])
            if args.port is None and hub.port is not None:
                host, port = hub.host or host, hub.port
        print(f"serving {course.name} on http://{host}:{port}{hub.prefix if hub else '/'} ({len(workers)} workers; "
              f"database {url})", flush=True)
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)      # each finishes the job in hand
        for w in workers:
            try:
                w.wait(timeout=float(course.limits.submission_seconds) + 30)
            except subprocess.TimeoutExpired:
                w.kill()
    return 0
