"""``submit()`` in a notebook and ``autograder submit NOTEBOOK``: hand the saved notebook to the course's
grading service and show its verdict (the hidden checks' titles and pass/fail before the deadline).

The service's address and the student's token come from ``AUTOGRADER_SERVER`` and ``AUTOGRADER_TOKEN``,
else from ``~/.config/autograder/service.json`` (``{"server": "...", "token": "..."}``); when neither
has them the message says where to put them. Inside a JupyterHub single-user server, with the service
a service of that Hub, a student configures nothing: the instructor sets ``AUTOGRADER_SERVER`` for every
user (``c.Spawner.environment``), and without a token of their own the server's ``JUPYTERHUB_API_TOKEN``
is sent (only to an ``AUTOGRADER_SERVER`` from the environment, never to one a file names). What is sent
is the file on disk: in a notebook, ``submit()`` says plainly when that file is older than the last cell
run (unsaved work). Everything is said in course.yml's language (or ``language=``); the token is never
printed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.core.errors import ConfigError
from autograder.core.messages import say, text
from autograder.core.points import fmt, total
from autograder.selfcheck import kernel
from autograder.selfcheck.exercises import claimed_assignment
from autograder.selfcheck.results import ipython_shell, language_of

if TYPE_CHECKING:
    from autograder.course.config import Course

ENV_SERVER, ENV_TOKEN = "AUTOGRADER_SERVER", "AUTOGRADER_TOKEN"
#: A JupyterHub single-user server's own token (the Hub sets it): the student's token when the service is
#: a service of that Hub.
ENV_HUB_TOKEN = "JUPYTERHUB_API_TOKEN"
CONFIG = Path("~/.config/autograder/service.json")
#: A busy service (429, 503) is asked again this many times, after the Retry-After it gives.
RETRIES = 3
#: How long one read waits at the service for the verdict (a long poll: it answers as soon as it is graded).
LONG_POLL = 20.0
#: When the last cell finished, recorded by an IPython hook (see :func:`watch_runs`).
_LAST_RUN: list[float] = []


class SubmitError(Exception):
    """Something the student can fix, already said in their language."""


class Verdict(dict):
    """The service's answer for a submission: a dict, which a notebook shows as one line (``submit()`` is a
    cell's last expression; the verdict is already printed above it), not the whole answer again."""

    def __repr__(self) -> str:
        result = self.get("result") or {}
        return (f"<submission {self.get('submission')}: {self.get('state')}, {fmt(result.get('points') or 0.0)} / "
                f"{fmt(result.get('max_points') or 0.0)}>")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _say(language: str, key: str, **params: Any) -> str:
    return text(key, language, **params)


def settings(language: str) -> tuple[str, str]:
    """(server URL, token) from the environment, else the config file; inside a JupyterHub single-user
    server, its ``JUPYTERHUB_API_TOKEN`` when neither gives a token."""
    env_server = os.environ.get(ENV_SERVER, "")
    server, token = env_server, os.environ.get(ENV_TOKEN, "")
    path = CONFIG.expanduser()
    if not (server and token) and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            server, token = server or str(data.get("server") or ""), token or str(data.get("token") or "")
        except (OSError, ValueError, AttributeError):
            pass
    hub_token = os.environ.get(ENV_HUB_TOKEN, "")
    if not token and hub_token:
        # The Hub's token goes only to the address the Hub's configuration gave (the environment): one that a
        # file names could be anyone's, and the token opens this user's server too.
        if not env_server:
            raise SubmitError(_say(language, "submit.no_server"))
        server, token = env_server, hub_token
    # A copied line often brings its line end (tokens.csv has CRLF ones) or spaces: they are not the token's.
    server, token = server.strip(), token.strip()
    if not (server and token):
        raise SubmitError(_say(language, "submit.no_settings", config=str(path)))
    if not token.isascii() or not token.isprintable() or " " in token:
        raise SubmitError(_say(language, "submit.token_characters"))
    return server.rstrip("/"), token


def submit_file(path: Path, *, assignment: str | None, course: Course, language: str, wait: bool = True,
                timeout: float = 600.0, say: Any = print) -> dict[str, Any] | None:
    """Send ``path`` for ``assignment`` (guessed from its name when None); with ``wait``, the verdict."""
    import httpx

    path = Path(path)
    if not path.is_file():
        raise SubmitError(_say(language, "submit.missing", name=str(path)))
    if assignment is None:
        assignment = _assignment_of(path, course, language)
    server, token = settings(language)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
            data = path.read_bytes()
            for _attempt in range(RETRIES + 1):
                made = client.post("/api/submissions", data={"assignment": assignment},
                                   files={"notebook": (path.name, data, "application/json")})
                if made.status_code not in (429, 503) or _attempt == RETRIES:
                    break
                # Busy (too many uploads, or a full queue): said, then tried again after what the service asks.
                say(_error(made, language))
                time.sleep(min(60.0, float(made.headers.get("Retry-After") or 5)))
            if made.status_code != 202:
                raise SubmitError(_error(made, language))
            receipt = made.json()
            say(_say(language, "submit.queued", submission=receipt["submission"],
                     position=receipt.get("position") or 0))
            if not wait:
                return None
            return _wait_for_verdict(client, receipt["submission"], language, timeout, say)
    except httpx.LocalProtocolError:        # (a header this client refuses to send: said above, for the token)
        raise SubmitError(_say(language, "submit.token_characters")) from None
    except httpx.TransportError as exc:
        raise SubmitError(_say(language, "submit.unreachable", server=server, why=type(exc).__name__)) from None


def _assignment_of(path: Path, course: Course, language: str) -> str:
    """The assignment a notebook is for: the one it names, else the one its file name names."""
    claimed = claimed_assignment(course, str(path), None)       # what the notebook says it is, first
    stem = path.stem
    found = [claimed.id] if claimed is not None else [
        a.id for a in course.assignments if stem == a.id or stem.startswith(a.id) or a.id in stem]
    if len(found) != 1:
        raise SubmitError(_say(language, "submit.no_assignment", name=path.name,
                               known=", ".join(a.id for a in course.assignments)))
    return found[0]


def _wait_for_verdict(client: Any, submission: Any, language: str, timeout: float, say: Any) -> Verdict | None:
    """Ask the service for the submission's state until it is graded (its verdict, said line by line), it
    failed, or ``timeout`` seconds passed (None)."""
    deadline = time.monotonic() + timeout
    running = False
    while time.monotonic() < deadline:
        got = client.get(f"/api/submissions/{submission}",
                         params={"wait": min(LONG_POLL, max(0.0, deadline - time.monotonic()))},
                         timeout=LONG_POLL + 30)
        if got.status_code == 429:          # asked too often: wait as long as the service says
            time.sleep(min(60.0, float(got.headers.get("Retry-After") or 5)))
            continue
        if got.status_code != 200:
            raise SubmitError(_error(got, language))
        state = got.json()
        if state["state"] == "done":
            for line in verdict_lines(state.get("result") or {}, language, state.get("score")):
                say(line)
            return Verdict(state)
        if state["state"] == "failed":
            raise SubmitError(_say(language, "submit.failed"))
        if state["state"] == "running" and not running:
            running = True
            say(_say(language, "submit.running"))
    say(_say(language, "submit.waiting", submission=submission))
    return None


def _error(response: Any, language: str) -> str:
    try:
        error = response.json()["error"]
        return str(error.get(language) or error.get("en"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"HTTP {response.status_code}"


def verdict_lines(result: dict[str, Any], language: str, score: dict[str, Any] | None = None) -> list[str]:
    """The verdict as the service shows it to a student: the score, with the written answers that still wait for a
    TA (in the maximum, not yet in the points: "10 / 12" alone reads as two points lost), then each check's title
    and result. ``score``: the service's answer's own (the API's ``score``)."""
    score = score if isinstance(score, dict) else {}
    points = fmt(score.get("points", result.get("points")) or 0.0)
    most = fmt(score.get("max_points", result.get("max_points")) or 0.0)
    waiting, questions = _waiting(result, score)
    lines = [_say(language, "submit.done_waiting", points=points, max_points=most, waiting=fmt(waiting),
                  questions=", ".join(questions)) if questions else
             _say(language, "submit.done", points=points, max_points=most)]
    late = result.get("late")
    if isinstance(late, dict) and isinstance(late.get("rule"), dict):
        lines.append(str(late["rule"].get(language) or late["rule"].get("en")))
    for ex in result.get("exercises") or []:
        lines.append(f"{ex.get('exercise')}: {fmt(ex.get('points') or 0.0)} / {fmt(ex.get('max_points') or 0.0)}")
        for c in ex.get("checks") or []:
            title = c.get("title")
            title = title.get(language) or title.get("en") if isinstance(title, dict) else str(title or c.get("check"))
            mark = "✓" if c.get("passed") else "✗"
            kind = _say(language, "submit.hidden" if c.get("audience") == "hidden" else "submit.public")
            verdict = _say(language, "submit.passed" if c.get("passed") else "submit.not_passed")
            lines.append(f"  {mark} {title} ({kind}, {verdict})")
    return lines


def _waiting(result: dict[str, Any], score: dict[str, Any]) -> tuple[float, list[str]]:
    """(points, questions) of the written answers that wait for a TA: as the service's score says, else (a service
    older than its score) as the result's own written answers do, where the caller's view of it has them."""
    if "written_waiting" in score:
        return float(score.get("waiting_points") or 0.0), [str(q) for q in score.get("waiting_questions") or ()]
    if not str(result.get("status") or "").startswith("graded"):
        return 0.0, []
    left = [q for q in result.get("questions") or () if isinstance(q, dict) and q.get("points") is None]
    return total(float(q.get("max_points") or 0.0) for q in left), [str(q.get("question")) for q in left]


def submit(assignment: str | None = None, *, language: str | None = None, wait: bool = True) -> dict[str, Any] | None:
    """In a notebook: send the saved notebook to the grading service and show its verdict."""
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    try:
        course = load_course()
    except ConfigError as exc:          # (no course here: one sentence, never a traceback into the notebook)
        lang = language if language in ("zh", "en") else "zh"
        print((say("selfcheck.no_course") if "no course.yml" in exc.message else
               say("selfcheck.bad_course", detail=exc.message)).get(lang))
        return None
    lang = language_of(language, course)
    name = kernel.notebook_name(kernel.caller_namespace(2))
    try:
        if name is None:            # (nbconvert, a script: no notebook file to send)
            raise SubmitError(_say(lang, "submit.no_notebook_file"))
        path = Path(name)
        if _LAST_RUN and path.is_file() and path.stat().st_mtime < _LAST_RUN[-1]:
            print(_say(lang, "submit.unsaved", name=path.name))
        return submit_file(path, assignment=assignment, course=course, language=lang, wait=wait)
    except SubmitError as exc:
        print(str(exc))            # (never stderr: nbgrader scores a cell that writes there 0)
        return None


def watch_runs() -> None:
    """Remember when each cell finished (to tell unsaved work from saved): an IPython post_run_cell hook."""
    shell = ipython_shell()
    if shell is None or getattr(shell, "_autograder_watching", False):
        return
    shell._autograder_watching = True  # noqa: SLF001 - the kit's own mark on IPython's shell
    shell.events.register("post_run_cell", lambda *_: _LAST_RUN.append(time.time()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", type=Path, metavar="NOTEBOOK", help="the saved notebook to hand in")
    parser.add_argument("--assignment", metavar="A", help="its assignment (default: from the file name)")
    parser.add_argument("--no-wait", action="store_true", help="hand it in and return without the verdict")
    parser.add_argument("--language", choices=("zh", "en"), default=None, help="language of the messages")


def run(args: argparse.Namespace) -> int:
    from autograder.course.config import load_course  # noqa: PLC0415 - loads pydantic and yaml (course.yml)

    course = load_course()
    lang = args.language or str(getattr(course.language, "value", course.language))
    try:
        state = submit_file(args.notebook, assignment=args.assignment, course=course, language=lang,
                            wait=not args.no_wait)
    except SubmitError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0 if args.no_wait or state is not None else 1
