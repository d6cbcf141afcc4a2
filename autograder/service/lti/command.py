"""``autograder serve lti``: register an LMS as an LTI 1.3 platform, send the pending scores, pull the members, check
the running service as an LMS would (``selftest``: :mod:`autograder.service.lti.selftest`)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autograder.course.config import Course


def add_lti(sub: Any) -> argparse.ArgumentParser:
    """``serve lti ACTION``'s parser (under ``serve``'s subparsers ``sub``)."""
    lti = sub.add_parser("lti", help="the course inside Canvas or Moodle (LTI 1.3): register the LMS, send the "
                                     "pending scores, pull its members into the roster")
    actions = lti.add_subparsers(dest="lti_action", metavar="ACTION", required=True)
    register = actions.add_parser("register", help="record an LMS (its issuer, client id, deployments and URLs; "
                                                   "again to change one) and print what to enter in the LMS")
    register.add_argument("--issuer", required=True, help="the platform's issuer (Canvas: https://canvas."
                                                          "instructure.com; Moodle: the site's URL)")
    register.add_argument("--client-id", required=True, help="the client id the LMS gave the tool")
    register.add_argument("--deployment", action="append", required=True, metavar="ID",
                          help="a deployment id the LMS gave the tool")
    register.add_argument("--auth-url", required=True, help="the platform's OIDC authorization URL")
    register.add_argument("--token-url", required=True, help="the platform's OAuth2 token URL")
    register.add_argument("--jwks-url", required=True, help="the platform's public keys (JWKS) URL")
    register.add_argument("--token-audience", default="", metavar="URL",
                          help="the aud of the tool's token requests where the LMS wants another than the token URL")
    register.add_argument("--enrol", action="store_true", help="a student who launches and is not on the roster is "
                                                               "added to it (else refused)")
    register.add_argument("--course", action="append", default=[], metavar="CONTEXT_ID", dest="lms_courses",
                          help="bind the LMS course with this LTI context id (Moodle: the course's id; repeat for "
                               "several): only the courses bound are served, a launch from any other is refused")
    register.add_argument("--url", default="", metavar="URL", help="the service's URL, to print the tool's URLs to "
                                                                   "enter in the LMS (default: course.yml's "
                                                                   "service.public_url)")
    for action, what in (("bind", "serve the LMS course with this context id (one whose launch was refused is listed "
                                  "by `serve lti courses`)"),
                         ("unbind", "stop serving an LMS course: its launches are refused, its members' sessions end, "
                                    "its scores wait")):
        parser_ = actions.add_parser(action, help=what)
        parser_.add_argument("--course", required=True, metavar="CONTEXT_ID", dest="lms_course",
                             help="the LMS course's LTI context id")
        parser_.add_argument("--issuer", default="", help="the platform's issuer, where several LMSs are registered")
    actions.add_parser("courses", help="list the LMS courses: bound, or asking (a launch from them was refused)")
    selftest = actions.add_parser("selftest", help="check the running service as an LMS would, without one: a "
                                                   "platform of its own for the test's duration plays login, launch, "
                                                   "deep linking and a score sent back; one line per step, exit "
                                                   "status 0 only when every step passed")
    selftest.add_argument("--url", default="", metavar="URL",
                          help="the running service's URL (default: course.yml's service.public_url, else "
                               "http://127.0.0.1:PORT, PORT serve's --port)")
    selftest.add_argument("--platform-host", default="127.0.0.1", metavar="HOST",
                          help="the address the test's platform listens on, which the service calls back (its "
                               "keys, its access tokens, its gradebook; default 127.0.0.1: the service's machine)")
    actions.add_parser("sync", help="send every pending score now (the service sends them by itself every few "
                                    "seconds) and say what is still pending")
    roster = actions.add_parser("roster", help="read each LMS course's members into the roster (names, emails, LMS "
                                               "ids)")
    roster.add_argument("-o", "--out", type=Path, metavar="TOKENS.csv",
                        help="also issue a token to each student who has none and write student,name,token here")
    parser: argparse.ArgumentParser = lti
    return parser


def run_lti(args: argparse.Namespace, engine: Any, course: Course) -> int:
    from autograder.service.lti.tool import Tool  # noqa: PLC0415 - the service extra, loaded by the action

    tool = Tool(engine, course.root)
    try:
        return _action(args, engine, course, tool)
    finally:
        tool.close()


def _action(args: argparse.Namespace, engine: Any, course: Course, tool: Any) -> int:
    from autograder.core.errors import AutograderError  # noqa: PLC0415 - the service extra, loaded by the action
    from autograder.service.lti import nrps, outbox  # noqa: PLC0415 - the service extra, loaded by the action
    from autograder.service.lti import platforms as P  # noqa: PLC0415 - the service extra, loaded by the action
    from autograder.service.lti.ags import PlatformError  # noqa: PLC0415 - the service extra, loaded by the action

    if args.lti_action == "register":
        platform = P.register(engine, issuer=args.issuer, client_id=args.client_id, deployments=args.deployment,
                              auth_url=args.auth_url, token_url=args.token_url, jwks_url=args.jwks_url,
                              token_audience=args.token_audience, enrol=args.enrol, courses=args.lms_courses, by="cli")
        key = tool.key              # made now (0600 beside the database) if it was not
        print(f"registered {platform.issuer} (client {platform.client_id}; deployments "
              f"{', '.join(platform.deployments)}); the tool's key: {tool.folder / 'lti-private-key.pem'} "
              f"(key id {key.kid})")
        _print_values(args.url or course.service.public_url or "")
        if not args.lms_courses:
            print("no LMS course is bound yet: launches are refused until the course's instructor binds it (--course, "
                  "serve lti bind, or the dashboard's LTI page, where a refused course is listed)")
        return 0
    if args.lti_action == "selftest":
        from autograder.service.lti import selftest  # noqa: PLC0415 - the service extra, loaded by the action

        url = args.url or course.service.public_url or f"http://127.0.0.1:{args.port or 8765}"
        passed = selftest.run(engine, url, platform_host=args.platform_host, out=print,
                              assignment=course.assignments[0].id)
        return 0 if passed else 1
    if not P.platforms(engine):
        raise AutograderError("serve lti: no LMS is registered", hint="autograder serve lti register --issuer ...")
    if args.lti_action in ("bind", "unbind", "courses"):
        return _courses(args, engine)
    if args.lti_action == "sync":
        from autograder.service.lti import hub_users  # noqa: PLC0415 - the service extra, loaded by the action

        done = outbox.sync(tool, course, hub_users=hub_users.from_env(course, outbox.backfill))   # (as a Hub's service)
        print(f"lti sync: {done.sent} score(s) sent, {done.same} unchanged, {done.failed} to try again"
              + (f" ({done.errors[0]})" if done.errors else ""))
        return 0 if not done.failed else 1
    try:
        pulled = nrps.pull(tool, by="cli", issue_tokens=args.out is not None)
    except PlatformError as exc:
        raise AutograderError(f"serve lti roster: {exc}", hint="the LMS did not answer; try again later") from None
    if args.out is not None:
        from autograder.core.atomic import atomic_write_text  # noqa: PLC0415 - the service extra, loaded by the action
        from autograder.service.tokens import tokens_csv  # noqa: PLC0415 - the service extra, loaded by the action

        atomic_write_text(args.out, tokens_csv(pulled.issued))
        os.chmod(args.out, 0o600)
    print(f"lti roster: {pulled.read} member(s) read, {len(pulled.added)} student(s) added to the roster, "
          f"{pulled.linked} linked, {pulled.staff} staff" + (f"; {len(pulled.issued)} token(s) written to {args.out}"
                                                             if args.out is not None else ""), file=sys.stdout)
    return 0


def _print_values(url: str) -> None:
    """What to enter in the LMS: the tool's URLs under ``url`` (the service's public URL), its placements and custom
    fields."""
    from autograder.course.service_policy import public_url  # noqa: PLC0415 - (loaded with the action, as the rest)
    from autograder.service.lti import tool  # noqa: PLC0415 - the service extra, loaded by the action

    found = tool.urls(url or "https://YOUR-SERVICE")
    print(f"enter in the LMS:\n  login initiation URL  {found['login']}\n  redirect / launch URL {found['launch']}"
          f"\n  public keys (JWKS)    {found['jwks']}\n  deep-link URL         {found['deep_link']}"
          f"\n  placements            Canvas: {', '.join(tool.CANVAS_PLACEMENTS)} (open in a new tab); Moodle: tick "
          f"{tool.MOODLE_DEEP_LINKING!r}, Content Selection URL the deep-link URL"
          f"\n  custom fields         {' '.join(tool.CUSTOM_FIELDS)} (Canvas)")
    if not url:
        print("the service's URL is not known: set service.public_url in course.yml (or give --url) to print it")
        return
    try:
        public_url(url)                 # (a --url for a trial may be what course.yml refuses: said, not refused)
    except ValueError as exc:
        print(f"note: an LMS elsewhere may not take these URLs: {exc}")


def _courses(args: argparse.Namespace, engine: Any) -> int:
    """``serve lti courses`` (the list), ``bind`` and ``unbind``."""
    from autograder.core.errors import AutograderError  # noqa: PLC0415 - the service extra, loaded by the action
    from autograder.service.db import writing  # noqa: PLC0415 - the service extra, loaded by the action
    from autograder.service.lti import platforms as P  # noqa: PLC0415 - the service extra, loaded by the action

    if args.lti_action == "courses":
        for c in P.courses(engine):
            print(f"{'bound ' if c.bound else 'asking'}  {c.context_id}  {c.title or '-'}  ({c.issuer})")
        return 0
    found = [c for c in P.courses(engine) if c.context_id == args.lms_course and args.issuer in ("", c.issuer)]
    platforms = [p for p in P.platforms(engine) if args.issuer in ("", p.issuer)]
    if len(found) > 1 or (not found and len(platforms) > 1):
        raise AutograderError(f"serve lti {args.lti_action}: --course {args.lms_course} could be of several LMSs",
                              hint="name the LMS: --issuer ISSUER")
    if found:
        P.set_bound(engine, found[0].id, args.lti_action == "bind", by="cli")
    elif args.lti_action == "bind" and platforms:
        with writing(engine).begin() as conn:
            P.bind_in(conn, platforms[0].id, args.lms_course, by="cli")
    else:
        raise AutograderError(f"serve lti {args.lti_action}: no LMS course {args.lms_course!r} is recorded"
                              + (f" for {args.issuer}" if args.issuer else ""), hint="autograder serve lti courses")
    print(f"lti {args.lti_action}: LMS course {args.lms_course} {'bound' if args.lti_action == 'bind' else 'unbound'}")
    return 0
